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
    /// `c7` for connection 7; `s3` for the relay's own third simulated-desktop connection.
    public var description: String { isSimulated ? "s\(rawValue & ~ConnectionID.simulatedBit)" : "c\(rawValue)" }

    /// The relay numbers the connections of its own simulated desktops with this bit set (a driver's
    /// IDs count up from 1 and never reach it), so they never collide with a driver's.
    public static let simulatedBit: UInt64 = 1 << 63
    /// Whether this is a connection of one of the relay's own simulated desktops (no socket behind it).
    public var isSimulated: Bool { rawValue & ConnectionID.simulatedBit != 0 }
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
    /// Whether the peer runs inside the relay itself (a simulated desktop, set by the relay machine, never
    /// from a header): its connection carries every phone's traffic, so the per-socket rate limit
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
    /// A timer of the relay's own simulated desktop number `serial` (``DevRelay/simulatedDesktops``).
    case desktop(serial: UInt64, DesktopTimer)
    /// A message between the relay and a simulated desktop arrives
    /// (``DevRelayConfiguration/desktopLatency``); `slot` names it.
    case desktopLink(slot: UInt64)

    /// `idle(c3)`, `sweep`, `desktop1.heartbeat`, ...
    public var description: String {
        switch self {
        case .sweep: "sweep"
        case .idle(let c): "idle(\(c))"
        case .delayedFrame(let s): "delayedFrame(\(s))"
        case .desktop(let serial, let t): "desktop\(serial).\(t)"
        case .desktopLink(let slot): "desktopLink(\(slot))"
        }
    }
}

/// Everything that happens to the relay. Each input is handled at a `Moment`.
public enum RelayInput: Sendable, Hashable {
    /// The driver started the relay: the desktops of ``DevRelayConfiguration/desktopsAtStart`` come up.
    case start
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
    /// A fault-script directive aimed at the desktop: applied to every simulated desktop there is, and
    /// (`ignore` rules) to those the relay simulates later.
    case desktopFault(DesktopFault)
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
    /// A desktop (simulated or real) was issued a link code: show it and its QR (`relaytrace relay`).
    case linkCodeIssued(LinkCodeOffer)
}

/// A link code the relay issued to a desktop (docs/DEVICE_LINK.md), for a driver to show.
public struct LinkCodeOffer: Sendable, Hashable {
    /// The code, grouped (`K7QF-3M9X`).
    public var code: String
    /// The QR text (`relaytrace://link?code=K7QF-3M9X`).
    public var uri: String
    /// The desktop's device ID (lower-cased).
    public var desktopDeviceId: String
    /// The desktop's name.
    public var desktopName: String
    /// The account the code belongs to; nil: any account may redeem it (the relay's own link desktop
    /// without `--link-account`).
    public var userId: String?
    /// When it expires.
    public var expiresAt: Moment
    /// `expiresAt` as RFC 3339 on the relay's wall clock.
    public var expiresAtText: String

    /// Creates an offer.
    public init(code: String, uri: String, desktopDeviceId: String, desktopName: String, userId: String?, expiresAt: Moment,
                expiresAtText: String) {
        self.code = code
        self.uri = uri
        self.desktopDeviceId = desktopDeviceId
        self.desktopName = desktopName
        self.userId = userId
        self.expiresAt = expiresAt
        self.expiresAtText = expiresAtText
    }
}
