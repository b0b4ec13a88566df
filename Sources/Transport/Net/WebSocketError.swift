public import WebSocket

/// A failure of the blocking WebSocket client, server or channel.
public enum WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The URL cannot be used: the message says which part and what to write instead.
    case invalidURL(String)
    /// The socket or TLS layer failed (refused, timed out, certificate did not verify, reset, ...).
    case transport(NetError)
    /// The opening handshake failed. The server refusing the upgrade is kind `.refused` with
    /// ``WebSocketHandshakeError/httpStatus`` (401 for a bad JWT).
    case handshake(WebSocketHandshakeError)
    /// The codec refused a send (the connection is closing, a control payload is too large, ...).
    case send(WebSocketSendError)
    /// The connection is over: its last event (`.closed` or `.protocolError`) was already returned.
    case closed(String)

    /// The HTTP status of a refused upgrade (e.g. 401), nil for every other error.
    public var httpStatus: Int? {
        if case .handshake(let e) = self, e.kind == .refused { return e.httpStatus }
        return nil
    }

    /// Whether the error is a timeout (of a connect, handshake, read or write).
    public var isTimeout: Bool {
        if case .transport(let e) = self { return e.kind == .timedOut }
        return false
    }

    /// A sentence saying what failed and what to do.
    public var description: String {
        switch self {
        case .invalidURL(let message): "invalid WebSocket URL: \(message)"
        case .transport(let e): "WebSocket transport: \(e)"
        case .handshake(let e): e.description
        case .send(let e): e.description
        case .closed(let message): "WebSocket closed: \(message)"
        }
    }
}
