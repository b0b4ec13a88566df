import Net
import RelayProtocol
import WebSocket
import WireRecording

/// The in-app recorder wrapped around a WebSocket client: this project's own `Net` client here, and the
/// example docs/RECORDING.md points to. A client that cannot go through a proxy records itself by calling
/// its `WireSocket` from the places its WebSocket stack already has: after the upgrade, next to every send,
/// for every received event, at the close. Nothing else changes in the client.
final class RecordedChannel: Sendable {
    let channel: WebSocketChannel
    let socket: WireSocket

    /// Connects like `WebSocketClient.connect` and records the socket in `recorder`.
    static func connect(url: String, headers: HTTPHeaders, recorder: WireRecorder) throws -> RecordedChannel {
        // The request as the client sends it (the recorder redacts Authorization and the token binding).
        let socket = recorder.openSocket(url: url, headers: headers.fields.map { ($0.name, $0.value) })
        do {
            let channel = try WebSocketClient.connect(url: url, headers: headers)
            socket.opened(status: 101)
            return RecordedChannel(channel: channel, socket: socket)
        } catch {
            if case .handshake(let h) = error, let status = h.httpStatus {
                socket.refused(status: status, reason: h.message)
            } else {
                socket.failed("\(error)")
            }
            throw error
        }
    }

    private init(channel: WebSocketChannel, socket: WireSocket) {
        self.channel = channel
        self.socket = socket
    }

    func send(text: String) throws {
        socket.sent(.text(text))
        try channel.send(text: text)
    }

    func send(binary: [UInt8]) throws {
        socket.sent(.binary(binary))
        try channel.send(binary: binary)
    }

    func ping(_ data: [UInt8]) throws {
        socket.ping(data, .outbound)
        try channel.ping(data)
    }

    /// The next event, recorded as it is handed to the app.
    func receive(timeout: Duration? = nil) throws -> WebSocketEvent {
        let event = try channel.receive(timeout: timeout)
        switch event {
        case .text(let t): socket.received(.text(t))
        case .binary(let b): socket.received(.binary(b))
        case .ping(let d):
            socket.ping(d, .inbound)
            socket.pong(d, .outbound)  // the Net client answers pings by itself
        case .pong(let d): socket.pong(d, .inbound)
        case .closed(let code, let reason):
            // The relay closed first (had the app closed first, `close` recorded it and this is the echo).
            socket.closed(code: code == .noStatusReceived || code == .abnormalClosure ? nil : Int(code.rawValue), reason: reason,
                          byClient: false, clean: code != .abnormalClosure)
        case .protocolError(let e):
            socket.closed(code: Int(e.closeCode.rawValue), reason: e.message, byClient: true)
        }
        return event
    }

    /// The app closes: recorded first, then the close handshake.
    func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") throws {
        socket.closed(code: Int(code.rawValue), reason: reason, byClient: true)
        _ = try channel.closeAndWait(code: code, reason: reason)
    }
}
