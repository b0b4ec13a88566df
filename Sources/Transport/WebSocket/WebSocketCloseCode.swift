/// A WebSocket close status code (RFC 6455 §7.4).
///
/// An open struct rather than an enum: any 16-bit value can arrive on the wire, and the application range
/// 3000-4999 has no names. Use ``isSendable`` to know whether a code may appear in a close frame.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code as carried in the first two bytes of a close frame body (big-endian).
    public var rawValue: UInt16

    /// Wraps a numeric close code. Every value is representable; validity is a separate question.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Wraps a numeric close code (convenience for `init(rawValue:)`).
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: normal closure, the purpose of the connection was fulfilled.
    public static let normalClosure = WebSocketCloseCode(1000)
    /// 1001: going away (server shutting down, app going to the background). The mobile client uses it.
    public static let goingAway = WebSocketCloseCode(1001)
    /// 1002: the peer violated the WebSocket protocol.
    public static let protocolError = WebSocketCloseCode(1002)
    /// 1003: a data type the endpoint cannot accept (e.g. binary to a text-only endpoint).
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// 1005: no status code was present in the close frame. Reserved: never sent on the wire.
    public static let noStatusReceived = WebSocketCloseCode(1005)
    /// 1006: the connection closed without a close frame. Reserved: never sent on the wire.
    public static let abnormalClosure = WebSocketCloseCode(1006)
    /// 1007: message data inconsistent with its type (invalid UTF-8 in a text message or close reason).
    public static let invalidPayloadData = WebSocketCloseCode(1007)
    /// 1008: a message violates the endpoint's policy.
    public static let policyViolation = WebSocketCloseCode(1008)
    /// 1009: a frame or message is larger than the endpoint accepts (here: 32 MiB by default).
    public static let messageTooBig = WebSocketCloseCode(1009)
    /// 1010: the client expected the server to negotiate an extension.
    public static let mandatoryExtension = WebSocketCloseCode(1010)
    /// 1011: the server met an unexpected condition.
    public static let internalError = WebSocketCloseCode(1011)
    /// 1012: the service is restarting (IANA registry).
    public static let serviceRestart = WebSocketCloseCode(1012)
    /// 1013: try again later (IANA registry).
    public static let tryAgainLater = WebSocketCloseCode(1013)
    /// 1014: bad gateway (IANA registry).
    public static let badGateway = WebSocketCloseCode(1014)
    /// 1015: TLS handshake failure. Reserved: never sent on the wire.
    public static let tlsHandshakeFailure = WebSocketCloseCode(1015)

    /// Whether this code may appear in a close frame, sent or received (RFC 6455 §7.4.1 and §7.4.2):
    /// 1000-1003, 1007-1011, 1012-1014 (IANA-registered), and 3000-4999 (libraries, frameworks,
    /// applications). 1004, 1005, 1006, 1015, 0-999, 1016-2999 and 5000+ are not.
    public var isSendable: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    /// The code and, when it has one, its RFC name, e.g. `1009 (message too big)`.
    public var description: String {
        let name: String? = switch rawValue {
        case 1000: "normal closure"
        case 1001: "going away"
        case 1002: "protocol error"
        case 1003: "unsupported data"
        case 1005: "no status received"
        case 1006: "abnormal closure"
        case 1007: "invalid payload data"
        case 1008: "policy violation"
        case 1009: "message too big"
        case 1010: "mandatory extension"
        case 1011: "internal error"
        case 1012: "service restart"
        case 1013: "try again later"
        case 1014: "bad gateway"
        case 1015: "TLS handshake failure"
        default: nil
        }
        if let name { return "\(rawValue) (\(name))" }
        return String(rawValue)
    }
}
