/// The client's timing, as a value: the SPEC's numbers by default (``spec``), changeable for what-if
/// experiments ("would a 6 s heartbeat have kept this socket alive?"): `relaytrace replay --set` and
/// tests build a changed client with it. A machine with any other tuning is not the SPEC's client; a
/// strict replay of a trace recorded with the SPEC's tuning diverges where the change first shows.
public struct ClientTuning: Sendable, Hashable {
    /// A6: from opening a socket until registered.
    public var handshakeTimeout: Duration = ClientConstants.handshakeTimeout
    /// A6: between heartbeats.
    public var heartbeatInterval: Duration = ClientConstants.heartbeatInterval
    /// A6: inbound silence before the watchdog fails the socket.
    public var watchdogTimeout: Duration = ClientConstants.watchdogTimeout
    /// A7: from `invalidResume` to the token-less re-register.
    public var invalidResumeReRegisterDelay: Duration = ClientConstants.invalidResumeReRegisterDelay
    /// A9: the window of a recovery epoch.
    public var recoveryWindow: Duration = ClientConstants.recoveryWindow
    /// A9: from returning to the foreground to recovery.
    public var foregroundRecoveryDelay: Duration = ClientConstants.foregroundRecoveryDelay
    /// The reconnect ladder (not a SPEC 1.6 rule: our pre-1.6 choice, ``ClientConstants/reconnectDelays``):
    /// the delay before reconnect attempt n is the n-th entry (the last repeats), jittered by ±15 %. A
    /// wire replay sets one tiny step so that the model reconnects when the recorded client did.
    public var reconnectDelays: [Duration] = ClientConstants.reconnectDelays

    /// The SPEC's timing.
    public static let spec = ClientTuning()

    /// The SPEC's timing.
    public init() {}

    /// The names ``set(_:to:)`` takes, with their SPEC sections.
    public static let names: [String: String] = [
        "handshakeTimeout": "A6", "heartbeatInterval": "A6", "watchdogTimeout": "A6",
        "invalidResumeReRegisterDelay": "A7", "recoveryWindow": "A9", "foregroundRecoveryDelay": "A9",
    ]

    /// Sets the value called `name`; returns false for an unknown name.
    public mutating func set(_ name: String, to value: Duration) -> Bool {
        switch name {
        case "handshakeTimeout": handshakeTimeout = value
        case "heartbeatInterval": heartbeatInterval = value
        case "watchdogTimeout": watchdogTimeout = value
        case "invalidResumeReRegisterDelay": invalidResumeReRegisterDelay = value
        case "recoveryWindow": recoveryWindow = value
        case "foregroundRecoveryDelay": foregroundRecoveryDelay = value
        default: return false
        }
        return true
    }
}
