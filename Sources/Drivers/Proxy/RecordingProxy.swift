public import Net
public import WebSocket
public import WireRecording
import Glibc
import RelayProtocol
import Synchronization
import Trace

/// Where a ``RecordingProxy`` forwards to and how it talks to it.
public struct ProxyUpstream: Sendable, Hashable {
    /// The relay's URL (`ws://` or `wss://`): where every client is forwarded (host and port; the
    /// client's own request target is sent as it is, so a wrong path gets the relay's own 404). Its path is
    /// the one the proxy's printed URL shows.
    public var url: WebSocketURL
    /// How a `wss` upstream is verified (on by default, against the system store or a given CA file).
    public var tls: TLSClientConfiguration

    /// An upstream.
    public init(url: WebSocketURL, tls: TLSClientConfiguration = TLSClientConfiguration()) {
        self.url = url
        self.tls = tls
    }
}

/// Which of a client's upgrade headers a proxy forwards (RFC 9110 §7.6.1 hop-by-hop fields, RFC 6455).
public enum ProxyHeaders {
    /// Fields that belong to one connection, never forwarded: the standard hop-by-hop set, the fields the
    /// upstream handshake writes itself (`Host` is the upstream's, `Upgrade`, `Connection`, the client's
    /// `Sec-WebSocket-Key` and `-Version` are written again), and `Sec-WebSocket-Extensions` (the proxy
    /// offers no extension, so frames stay uncompressed and readable on both legs).
    public static let notForwarded: Set<String> = [
        "host", "connection", "upgrade", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "transfer-encoding", "content-length", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-extensions", "sec-websocket-accept",
    ]

    /// The headers to send upstream, in the client's order: every field except ``notForwarded`` and those
    /// the client's `Connection` header names as hop-by-hop.
    public static func forwarded(_ headers: HTTPHeaders) -> HTTPHeaders {
        let named = Set(headers.tokens(for: "Connection"))
        var out = HTTPHeaders()
        for f in headers.fields {
            let lower = f.name.lowercased()
            if notForwarded.contains(lower) || named.contains(lower) { continue }
            out.add(name: f.name, value: f.value)
        }
        return out
    }
}

/// A recording WebSocket proxy between unmodified clients and any relay (`relaytrace proxy`), served from
/// event loops (``LoopStreamServer``: about one loop per core, never a thread per connection).
///
/// Each accepted client gets its own upstream connection, on the client's loop. The proxy terminates TLS
/// on the listening side when it has a server identity, reads and validates the client's upgrade request,
/// opens the upstream without blocking (TCP, TLS verified as configured) and sends the client's upgrade
/// with the client's own `Sec-WebSocket-Key` and every end-to-end header (``ProxyHeaders``). The
/// upstream's answer goes back to the client byte for byte: a refusal (401, 429...) with its body, or the
/// 101 head. From then on the two streams are relayed **as bytes**, frame boundaries, masks, fragments,
/// pings, pongs and close frames untouched, so neither side can tell a proxy is there (the close
/// handshake and ping answers are the real peers'). A copy of each stream goes through a sans-IO
/// ``WebSocketConnection`` parser that only observes: whole messages, pings, pongs and the first close are
/// recorded into the ``WireRecorder`` before the bytes are written on, so the trace's order is the order
/// the proxy saw.
///
/// A client whose upstream cannot be reached gets `502 Bad Gateway` with the reason; a connection that
/// one side ends is ended on the other side the same way once what was forwarded is written (a close
/// without a close frame is seen as 1006, as it would have been). Backpressure crosses over: while one
/// side's output is over its pause mark the proxy stops reading the other side (``LoopBufferLimits``), so
/// memory per connection is two output buffers of at most about 1 MiB plus the message being reassembled
/// for the recording (at most 32 MiB; past that the proxy stops recording that direction, says so in a
/// marker, and keeps forwarding: the relay's own limit answers).
public final class RecordingProxy: Sendable {
    /// The listening address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The URL clients connect to: `ws://` or `wss://` this address, with the upstream's path.
    public let url: String

    private let server: LoopStreamServer
    private let core: ProxyCore

    /// Listens on `host:port` and forwards every client to `upstream`.
    /// - Parameters:
    ///   - tls: the listening side's identity for `wss`; nil listens with plain `ws`.
    ///   - recorder: where the wire trace goes (nil: forward only).
    ///   - handshakeTimeout: bound on a client's TLS handshake and upgrade request together with the
    ///     upstream's connect, TLS and upgrade answer.
    ///   - log: one line per connection event.
    /// - Throws: ``NetError`` when the address cannot be bound or the loops cannot start.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil, upstream: ProxyUpstream,
                recorder: WireRecorder?, handshakeTimeout: Duration = .seconds(10),
                log: @escaping @Sendable (String) -> Void = { _ in }) throws(NetError) {
        let core = ProxyCore(upstream: upstream, recorder: recorder, handshakeTimeout: handshakeTimeout, log: log)
        self.core = core
        server = try LoopStreamServer(host: host, port: port, tls: tls, log: log) { stream in core.accepted(stream) }
        localAddress = server.localAddress
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let path = upstream.url.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(server.port)\(path)"
    }

    /// The listening port.
    public var port: UInt16 { localAddress.port }

    /// How many client connections were accepted so far.
    public var accepted: Int { core.acceptedCount.load(ordering: .relaxed) }

    /// Stops accepting, ends every connection (both legs dropped) and stops the loops. Idempotent.
    public func stop() {
        server.stop()
    }
}

/// What every proxied connection shares.
final class ProxyCore: Sendable {
    let upstream: ProxyUpstream
    let recorder: WireRecorder?
    let handshakeTimeout: Duration
    let log: @Sendable (String) -> Void
    let acceptedCount = Atomic<Int>(0)

    init(upstream: ProxyUpstream, recorder: WireRecorder?, handshakeTimeout: Duration, log: @escaping @Sendable (String) -> Void) {
        self.upstream = upstream
        self.recorder = recorder
        self.handshakeTimeout = handshakeTimeout
        self.log = log
    }

    /// A client socket was accepted (on its loop, before it starts).
    func accepted(_ client: LoopStream) {
        acceptedCount.add(1, ordering: .relaxed)
        ProxiedConnection(core: self, client: client).start()
    }
}

/// One proxied connection, on its loop: the client's stream, the upstream's, the upgrade between them,
/// then the two byte pumps with their observers.
final class ProxiedConnection: @unchecked Sendable {
    // Thread-safety: `@unchecked` because every `var` is touched only on `loop` (the streams' callbacks,
    // the timer and the connect completion all run there).
    private enum Phase {
        /// The client's TLS handshake and upgrade request.
        case readingRequest
        /// Connecting upstream (TCP, TLS).
        case connecting
        /// The upgrade went upstream; reading its answer.
        case readingResponse
        /// The upstream refused: reading the refusal's body (up to its Content-Length, at most 64 KiB).
        case readingRefusal(status: Int, message: String, length: Int, headEnd: Int)
        /// Bytes flow both ways.
        case pumping
        /// Over.
        case done
    }

    private let core: ProxyCore
    private let loop: EventLoop
    private let client: LoopStream
    private let peer: String
    private var relay: LoopStream?
    private var phase = Phase.readingRequest
    private var timer: LoopTimer?
    private var handshake = WebSocketServerHandshake()
    private var request: WebSocketUpgradeRequest?
    private var early: [UInt8] = []
    private var upstreamHandshake: WebSocketClientHandshake?
    private var head: [UInt8] = []
    private var socket: WireSocket?
    private var tag = ""
    private var fromClient: Observer?
    private var fromRelay: Observer?
    /// Whether the client's TLS handshake (if any) is done.
    private var clientReady = false

    init(core: ProxyCore, client: LoopStream) {
        self.core = core
        self.loop = client.loop
        self.client = client
        self.peer = client.remoteAddress?.description ?? "?"
    }

    private var upstream: ProxyUpstream { core.upstream }
    private func log(_ line: String) { core.log(line) }

    /// The callbacks hold this connection; they are dropped when both streams close.
    func start() {
        deadline = ContinuousClock.now.advanced(by: core.handshakeTimeout)
        client.onReady = { [self] _ in clientReady = true }
        client.onBytes = { [self] _, bytes in clientBytes(bytes) }
        client.onEnd = { [self] _, end in clientEnded(end) }
        timer = loop.schedule(at: deadline) { [self] in
            timer = nil
            timedOut()
        }
    }

    // MARK: The client's upgrade request

    private func clientBytes(_ bytes: UnsafeRawBufferPointer) {
        switch phase {
        case .readingRequest: readRequest(bytes)
        case .pumping: forward(bytes, from: .outbound)
        // The client is not read while the upgrade is pending; bytes already read keep their order.
        case .connecting: early += Array(bytes)
        case .readingResponse, .readingRefusal: relay?.write(bytes)
        case .done: return
        }
    }

    private func readRequest(_ bytes: UnsafeRawBufferPointer) {
        do throws(WebSocketHandshakeError) {
            guard case .complete(let r, let consumed) = try handshake.receive(bytes) else { return }
            request = r
            early = Array(bytes[consumed...])
        } catch {
            let status = error.httpStatus ?? 400
            log("\(peer): refused \(status): \(error)")
            core.recorder?.connectionFailed("malformed upgrade request: \(error.message)", peer: peer, status: status)
            return refuseClient(error.refusalResponse())
        }
        guard let request else { return }
        // Nothing more from the client until the upstream answered (then it is forwarded as it comes).
        client.pauseReading()
        socket = core.recorder?.openSocket(url: request.target, headers: request.headers.fields.map { ($0.name, $0.value) }, peer: peer)
        tag = socket.map { "g\($0.generation) " } ?? ""
        do throws(WebSocketHandshakeError) {
            upstreamHandshake = try WebSocketClientHandshake(host: upstream.url.hostHeader, path: request.target, key: request.key,
                                                             extraHeaders: ProxyHeaders.forwarded(request.headers))
        } catch {
            return badGateway(error.message)
        }
        phase = .connecting
        let left = timeLeft
        LoopStream.connect(host: upstream.url.host, port: upstream.url.port, tls: upstream.url.isSecure ? upstream.tls : nil,
                           on: loop, timeout: left) { [self] result in connected(result) }
    }

    /// The end of the handshake's time (from the accept).
    private var deadline = ContinuousClock.now
    private var timeLeft: Duration { max(.milliseconds(1), deadline - ContinuousClock.now) }

    private func clientEnded(_ end: LoopStreamEnd) {
        switch phase {
        case .readingRequest:
            let why: String
            if case .failed(let error) = end {
                why = clientReady ? "upgrade request not read: \(error)" : "TLS handshake failed: \(error)"
            } else {
                why = "closed before sending a complete upgrade request"
            }
            log("\(peer): \(why)")
            core.recorder?.connectionFailed(why, peer: peer)
            finish()
        case .pumping:
            ended(from: .outbound, end)
        case .done:
            return
        default:
            log("\(tag)\(peer): the client went away before the upgrade answer")
            socket?.failed("the client went away before the upgrade answer: \(describe(end))")
            finish()
        }
    }

    // MARK: The upstream

    private func connected(_ result: Result<LoopStream, NetError>) {
        guard case .connecting = phase else {
            if case .success(let stream) = result { stream.close() }
            return
        }
        let stream: LoopStream
        switch result {
        case .failure(let error): return badGateway("\(error)")
        case .success(let s): stream = s
        }
        relay = stream
        stream.onBytes = { [self] _, bytes in relayBytes(bytes) }
        stream.onEnd = { [self] _, end in relayEnded(end) }
        phase = .readingResponse
        guard let upstreamHandshake else { return }
        stream.write(upstreamHandshake.requestBytes)
        if !early.isEmpty {
            stream.write(early)
            early = []
        }
    }

    private func relayBytes(_ bytes: UnsafeRawBufferPointer) {
        switch phase {
        case .readingResponse: readResponse(bytes)
        case .readingRefusal: readRefusal(bytes)
        case .pumping: forward(bytes, from: .inbound)
        default: return
        }
    }

    private func readResponse(_ chunk: UnsafeRawBufferPointer) {
        guard var upstreamHandshake, let request else { return }
        head += Array(chunk)
        do throws(WebSocketHandshakeError) {
            let progress = try upstreamHandshake.receive(chunk)
            self.upstreamHandshake = upstreamHandshake
            guard case .complete(let response, let consumed) = progress else { return }
            let headEnd = head.count - chunk.count + consumed
            let afterHead = Array(head[headEnd...])
            let answer = Array(head[..<headEnd])
            head = []
            if let error = client.write(answer) {
                log("\(tag)\(peer): the client went away before the upgrade answer: \(error)")
                socket?.failed("the client went away before the upgrade answer: \(error)")
                return finish()
            }
            cancelTimer()
            socket?.opened(status: response.status, headers: response.headers.fields.map { ($0.name, $0.value) })
            log("\(tag)\(peer): \(request.target) -> \(upstream.url.hostHeader)\(request.target): upgraded")
            startPumping(afterHead)
        } catch {
            if error.kind == .refused, let status = error.httpStatus {
                // The relay's own refusal goes back as it is, body included.
                let end = headEnd(head) ?? head.count
                phase = .readingRefusal(status: status, message: error.message, length: contentLength(head[..<end]), headEnd: end)
                return readRefusal(UnsafeRawBufferPointer(start: nil, count: 0))
            }
            badGateway(error.message)
        }
    }

    /// The refusal's head and as much of its body as `Content-Length` announces (at most 64 KiB), as
    /// received; then it goes to the client and both sides close.
    private func readRefusal(_ chunk: UnsafeRawBufferPointer) {
        guard case .readingRefusal(let status, let message, let length, let end) = phase else { return }
        if chunk.count > 0 { head += Array(chunk) }
        if head.count - end < length { return }  // more body to come (or the end, or the timeout)
        refusalRead(status, message, end, length)
    }

    private func refusalRead(_ status: Int, _ message: String, _ end: Int, _ length: Int) {
        let bodyEnd = min(head.count, end + length)
        let text = String(decoding: head[end..<bodyEnd], as: UTF8.self).trimmedWhitespace
        log("\(tag)\(peer): upstream refused \(status)")
        socket?.refused(status: status, reason: text.isEmpty ? message : text)
        relay?.close()
        relay = nil
        refuseClient(Array(head[..<bodyEnd]))
    }

    private func relayEnded(_ end: LoopStreamEnd) {
        switch phase {
        case .readingResponse:
            if case .failed(let error) = end { return badGateway("no upgrade answer: \(error)") }
            badGateway("closed the connection before answering the upgrade")
        case .readingRefusal(let status, let message, let length, let headEnd):
            refusalRead(status, message, headEnd, length)
        case .pumping:
            ended(from: .inbound, end)
        default:
            return
        }
    }

    private func badGateway(_ why: String) {
        log("\(tag)\(peer): upstream \(upstream.url) failed: \(why)")
        socket?.refused(status: 502, reason: "relaytrace proxy: upstream \(upstream.url): \(why)")
        relay?.close()
        relay = nil
        let bytes = (try? WebSocketHandshake.refusalResponse(status: 502, body: "relaytrace proxy: the upstream \(upstream.url) failed: \(why)\n")) ?? []
        refuseClient(bytes)
    }

    /// Writes `bytes` to the client, then closes it as a server does (FIN, then its FIN, bounded).
    private func refuseClient(_ bytes: [UInt8]) {
        cancelTimer()
        phase = .done
        if !bytes.isEmpty { client.write(bytes) }
        client.finish(shutdownSending: true, readUntilEnd: true, timeout: .seconds(5))
    }

    private func timedOut() {
        switch phase {
        case .readingRequest:
            log("\(peer): upgrade request not read: no complete request within \(core.handshakeTimeout)")
            core.recorder?.connectionFailed("upgrade request not read: timed out after \(core.handshakeTimeout)", peer: peer)
            finish()
        case .connecting, .readingResponse:
            badGateway("no upgrade answer within \(core.handshakeTimeout)")
        case .readingRefusal(let status, let message, let length, let headEnd):
            refusalRead(status, message, headEnd, length)
        case .pumping, .done:
            return
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    // MARK: Pumping

    private func startPumping(_ afterHead: [UInt8]) {
        guard let relay else { return }
        phase = .pumping
        if let socket {
            fromClient = Observer(role: .server, direction: .outbound, socket: socket, recorder: core.recorder)
            fromRelay = Observer(role: .client, direction: .inbound, socket: socket, recorder: core.recorder)
        }
        // Backpressure crosses over: a side that does not drain pauses the other side's reading.
        for (to, from) in [(client, relay), (relay, client)] {
            to.pausesOwnReading = false
            to.onFull = { _ in from.pauseReading() }
            to.onWritable = { _ in from.resumeReading() }
        }
        if !afterHead.isEmpty { afterHead.withUnsafeBytes { forward($0, from: .inbound) } }
        client.resumeReading()
    }

    /// Records, then forwards (the trace's order is the order the proxy saw).
    private func forward(_ bytes: UnsafeRawBufferPointer, from direction: FrameDirection) {
        let to = direction == .outbound ? relay : client
        if direction == .outbound { fromClient?.observe(bytes) } else { fromRelay?.observe(bytes) }
        guard let to, !to.isClosed else { return }
        if let error = to.write(bytes) {
            log("\(tag)\(peer): writing to \(direction == .outbound ? "the relay" : "the client") failed: \(error)")
        }
    }

    /// One side's stream ended: it is recorded (unless a close frame was), and the other side is closed
    /// once what was forwarded to it is written (after a close handshake, the TCP close; without one, the
    /// peer sees 1006). Nothing more is read from it: a peer still sending is reset, as the old end would
    /// have reset it.
    private func ended(from direction: FrameDirection, _ end: LoopStreamEnd) {
        guard case .pumping = phase else { return }
        phase = .done
        let who = direction == .outbound ? "the client" : "the relay"
        if let socket, !socket.isFinished {
            if case .failed(let error) = end {
                socket.failed("\(who)'s connection failed: \(error)")
            } else {
                socket.closed(code: nil, reason: "\(who) ended the connection without a close frame", byClient: direction == .outbound,
                              clean: false)
            }
        }
        let detail: String
        if case .failed(let error) = end { detail = ": \(who)'s connection failed: \(error)" } else { detail = "" }
        log("\(tag)\(peer): ended by \(who)\(detail)")
        let (from, other) = direction == .outbound ? (client, relay) : (relay, client)
        from?.close()
        other?.finish(shutdownSending: true, readUntilEnd: false, timeout: .seconds(5))
        relay = nil
    }

    private func finish() {
        cancelTimer()
        phase = .done
        client.close()
        relay?.close()
        relay = nil
    }

    private func describe(_ end: LoopStreamEnd) -> String {
        if case .failed(let error) = end { return "\(error)" }
        return "it closed the connection"
    }

    private func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    /// The head's `Content-Length` (0 when absent), at most 64 KiB.
    private func contentLength(_ head: ArraySlice<UInt8>) -> Int {
        let text = String(decoding: head, as: UTF8.self).lowercased()
        var length = 0
        for line in text.split(separator: "\r\n") where line.hasPrefix("content-length:") {
            length = Int(String(line.dropFirst("content-length:".count)).trimmedWhitespace) ?? 0
        }
        return min(max(0, length), 65_536)
    }
}

/// Parses one direction's bytes as the receiving end would (the relay, server role, reads the client's
/// frames; the client reads the relay's), answering nothing, and records what it sees.
struct Observer {
    private var parser: WebSocketConnection
    private var observing = true
    let direction: FrameDirection
    let socket: WireSocket
    let recorder: WireRecorder?

    init(role: WebSocketRole, direction: FrameDirection, socket: WireSocket, recorder: WireRecorder?) {
        parser = WebSocketConnection(role: role, configuration: .transparent())
        self.direction = direction
        self.socket = socket
        self.recorder = recorder
    }

    mutating func observe(_ bytes: UnsafeRawBufferPointer) {
        guard observing else { return }
        for event in parser.receive(bytes) {
            switch event {
            case .text(let t): socket.message(.text(t), direction)
            case .binary(let b): socket.message(.binary(b), direction)
            case .ping(let d): socket.ping(d, direction)
            case .pong(let d): socket.pong(d, direction)
            case .closed(let code, let reason), .closeReceived(let code, let reason):
                socket.closed(code: code == .noStatusReceived ? nil : Int(code.rawValue), reason: reason,
                              byClient: direction == .outbound)
                observing = false
            case .protocolError(let e):
                let who = direction == .outbound ? "the client" : "the relay"
                recorder?.marker("g\(socket.generation): the proxy stopped recording \(who)'s frames: \(e.message); the bytes are still forwarded")
                observing = false
            }
        }
        _ = parser.takeOutbound()
    }
}

extension String {
    /// Without leading and trailing spaces, tabs, CR and LF.
    var trimmedWhitespace: String {
        let u = Array(utf8)
        func ws(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
        guard let first = u.firstIndex(where: { !ws($0) }), let last = u.lastIndex(where: { !ws($0) }) else { return "" }
        return String(decoding: u[first...last], as: UTF8.self)
    }
}
