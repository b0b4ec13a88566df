/// One WebSocket message as the client machine and the trace see it: text (JSON control traffic) or
/// binary (PTC1 terminal output). Transport-level control frames (ping, pong, close) are not messages.
public enum WireFrame: Sendable, Hashable {
    /// A text message (UTF-8).
    case text(String)
    /// A binary message.
    case binary([UInt8])

    /// The payload length in bytes.
    public var byteCount: Int {
        switch self {
        case .text(let s): s.utf8.count
        case .binary(let b): b.count
        }
    }
}
