public import RelayProtocol

/// One socket the relay serves, named by the driver (the simulation runner or `relaytrace relay`).
///
/// The driver hands out a fresh ID per accepted TCP connection and never reuses one; every input and
/// action that concerns a socket carries it, so a stale input (for a socket the relay already closed) is
/// recognised and ignored.
public struct ConnectionID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt64
    /// Creates connection `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates connection `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.rawValue < b.rawValue }
    /// `c7` for connection 7.
    public var description: String { "c\(rawValue)" }
}

/// One header of an upgrade request, in the order it was sent.
public struct UpgradeHeader: Sendable, Hashable, CustomStringConvertible {
    /// The header name as sent.
    public var name: String
    /// The header value.
    public var value: String
    /// Creates a header.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
    /// `Name: value`.
    public var description: String { "\(name): \(value)" }
}

/// An HTTP `GET` that asks to upgrade to a WebSocket (PROTOCOL.md §1). Transport-neutral: the driver
/// parses the HTTP request and hands over the path and headers.
public struct UpgradeRequest: Sendable, Hashable {
    /// The request path, e.g. `/ws/device-link` (a query string, if any, is ignored by the relay).
    public var path: String
    /// The headers in the order sent; names compare case-insensitively (``value(of:)``).
    public var headers: [UpgradeHeader]
    /// Whether the peer runs inside the relay's own process (the simulated desktop, set by the driver,
    /// never by a header): its socket carries every phone's traffic, so the per-socket rate limit
    /// (PROTOCOL.md §2) does not apply to it.
    public var inProcess: Bool

    /// Creates a request.
    public init(path: String = RelayConstants.devicePath, headers: [UpgradeHeader], inProcess: Bool = false) {
        self.path = path
        self.headers = headers
        self.inProcess = inProcess
    }

    /// The value of the first header called `name` (ASCII case-insensitive), or nil.
    public func value(of name: String) -> String? {
        headers.first { asciiCaseInsensitiveEquals($0.name, name) }?.value
    }
}

/// Whether `a` and `b` are equal ignoring ASCII case (HTTP header names).
func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    let x = a.utf8, y = b.utf8
    guard x.count == y.count else { return false }
    for (p, q) in zip(x, y) where lowerASCII(p) != lowerASCII(q) { return false }
    return true
}

@inline(__always)
func lowerASCII(_ c: UInt8) -> UInt8 {
    (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) ? c + 32 : c
}

/// Lower-cases the ASCII letters of `s` (device IDs are compared lower-cased).
func lowercasedASCII(_ s: String) -> String {
    String(decoding: s.utf8.map(lowerASCII), as: UTF8.self)
}

/// Which kind of client a socket belongs to (`X-Client-Type`).
public enum ClientKind: String, Sendable, Hashable {
    /// The phone.
    case mobile
    /// The desktop app (the RPC producer).
    case desktop
}

/// A timer the relay arms with ``RelayAction/armTimer(_:deadline:)`` and receives back as
/// ``RelayInput/timerFired(_:)``. A fire of a timer that is not armed (cancelled, re-armed, or its
/// connection gone) is stale and ignored.
public enum RelayTimer: Sendable, Hashable, CustomStringConvertible {
    /// PROTOCOL.md §5: sweep expired relay sessions (every 5 min).
    case sweep
    /// PROTOCOL.md §1: check whether this connection has been silent for 60 s.
    case idle(ConnectionID)
    /// A frame held back by a `delay` fault; `slot` names it.
    case delayedFrame(slot: UInt64)

    /// `idle(c3)`, `sweep`, ...
    public var description: String {
        switch self {
        case .sweep: "sweep"
        case .idle(let c): "idle(\(c))"
        case .delayedFrame(let s): "delayedFrame(\(s))"
        }
    }
}

/// Everything that happens to the relay. Each input is handled at a `Moment`.
public enum RelayInput: Sendable, Hashable {
    /// A client asks to upgrade `GET /ws/device-link` on this (new) connection.
    case upgrade(ConnectionID, UpgradeRequest)
    /// A message arrived on this connection.
    case frame(ConnectionID, WireFrame)
    /// The peer closed the connection or the socket died (close code if one was received).
    case closed(ConnectionID, code: UInt16?, reason: String)
    /// An armed timer reached its deadline.
    case timerFired(RelayTimer)
    /// A fault-script directive aimed at the relay takes effect now.
    case fault(RelayFault)
}

/// Everything the relay wants done. The driver performs them in order.
public enum RelayAction: Sendable, Hashable {
    /// Answer the upgrade with 101 Switching Protocols.
    case acceptUpgrade(ConnectionID)
    /// Answer the upgrade with a plain HTTP error (401, 404, 429, 500), then close the TCP connection.
    case refuseUpgrade(ConnectionID, status: Int, reason: String)
    /// Send a message on this connection.
    case send(ConnectionID, WireFrame)
    /// Close this connection; a nil code means an empty close frame. No `.closed` input is expected
    /// back for it (one that comes anyway is ignored).
    case close(ConnectionID, code: UInt16?, reason: String)
    /// Arm (or move) a timer.
    case armTimer(RelayTimer, deadline: Moment)
    /// Cancel an armed timer.
    case cancelTimer(RelayTimer)
    /// One human-readable line about a connection event (for `relaytrace relay`).
    case log(String)
}
