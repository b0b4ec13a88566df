import RelayProtocol

/// A socket of the trace: a generation within one client life (a machine trace's `client restart`
/// marker starts a new life that numbers its generations from 1 again; a wire trace has one life).
struct SocketKey: Hashable, Comparable {
    var life: Int
    var generation: UInt64

    static func < (a: SocketKey, b: SocketKey) -> Bool { (a.life, a.generation) < (b.life, b.generation) }
}

/// Something the client must do by a deadline, or else give the socket up: register (handshake),
/// send a heartbeat, hear inbound traffic (watchdog), re-register, renew or re-issue a lease, get an
/// answer (request timeout).
struct Deadline {
    var rule: CheckRule
    /// When the wait started, and the record that started it.
    var start: Moment
    var startRecord: UInt64
    /// How long the SPEC allows.
    var due: Duration
    /// What is awaited (`heartbeat`, `inbound traffic`, `a response to system.ping`...).
    var awaited: String
    /// Since what (`after the previous heartbeat`, `after registration`...).
    var since: String
    /// True when the wait started with something the client received (its reaction may come at most
    /// `earlyTolerance` sooner than `due`); false for an interval between two client messages.
    var fromInbound: Bool
}

/// An inbound record that ended a wait too late, on a wire trace: it is a finding only if the client
/// still used the socket afterwards (it may have given up, with a close the relay never saw).
struct Overdue {
    var deadline: Deadline
    var at: Moment
    var record: UInt64
}

/// A request in flight on a socket.
struct Request {
    var method: String?
    var time: Moment
    var record: UInt64
    var traceId: String?
    var timeout: Deadline?
}

/// What the checker keeps about one socket while it is open.
final class Socket {
    let key: SocketKey
    let openRecord: UInt64
    let openTime: Moment
    let isPhone: Bool
    let device: String?
    let desktop: String?
    let pair: String

    /// The client's last record on the socket (its upgrade, a message, a ping, its close).
    var lastClientTime: Moment
    var lastClientRecord: UInt64
    var registeredAt: Moment?
    var registeredRecord: UInt64 = 0
    var handshake: Deadline?
    var heartbeat: Deadline?
    var watchdog: Deadline?
    var watchdogBroken = false
    var reRegister: Deadline?
    var renewal: Deadline?
    var reissue: Deadline?
    var requests: [String: Request] = [:]
    var overdue: [Overdue] = []
    /// The resume token of the last `register` sent (refused if `invalidResume` follows).
    var lastRegisterToken: String?
    /// Wire traces: a later socket of the same pair opened; sending after it is two live generations.
    var successor: (time: Moment, record: UInt64, generation: UInt64)?
    /// Machine traces: the next outbound frame is a send retry (`sendAttempt` action), not a new message.
    var nextIsRetry = false
    /// Upgrade headers without a target desktop, judged at the first message: a link socket's or not.
    var pendingHeaders: UpgradeHeaders?

    init(key: SocketKey, record: UInt64, time: Moment, isPhone: Bool, device: String?, desktop: String?) {
        self.key = key
        openRecord = record
        openTime = time
        self.isPhone = isPhone
        self.device = device
        self.desktop = desktop
        pair = (device ?? "?") + "::" + (desktop ?? "?")
        lastClientTime = time
        lastClientRecord = record
    }
}

/// What the checker keeps per phone/desktop pair (across sockets and client lives).
final class Pair {
    /// Open sockets of the pair, in opening order.
    var live: [SocketKey] = []
    /// The session and token the relay issued last (`registered`).
    var issued: (session: String?, token: String, record: UInt64)?
    /// Tokens refused with `invalidResume`, with the refusal's record.
    var refused: [String: UInt64] = [:]
    /// Times of the invalid resumes of the rolling window.
    var recentInvalid: [Moment] = []
    /// The invalid resume that ended the loop; a `register` within the window after it is a finding.
    var loopStop: (time: Moment, record: UInt64)?
    /// An `invalidResume` waiting for its token-less re-register.
    var pendingReRegister: (time: Moment, record: UInt64)?
    /// The active lease (the session of the last `active: true`), nil when released or none.
    var lease: String?
}
