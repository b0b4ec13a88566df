/// Every number of SPEC.md Part A that the client machine uses, in one place, each with its section.
///
/// Tests state the SPEC's values literally (not through these names), so changing a constant here turns
/// the test of its rule red.
public enum ClientConstants {
    // MARK: A4 The socket

    /// A4: maximum WebSocket message size, 32 MiB.
    public static let maxMessageBytes = 32 * 1024 * 1024
    /// A4 / PROTOCOL.md §1: the path of the relay socket on the region's origin.
    public static let deviceLinkPath = "/ws/device-link"
    /// A4: the value of `X-Client-Type` this client sends.
    public static let clientType = "mobile"
    /// PROTOCOL.md §1: the mobile closes its sockets with 1001 (going away).
    public static let closeCode: UInt16 = 1001

    // MARK: A6 Registration, heartbeat, watchdog

    /// A6: the relay protocol version sent in `register`.
    public static let relayProtocolVersion = "1.6"
    /// A6: from opening a socket until `registered`/`resumed` (re-armed for each `register` sent).
    public static let handshakeTimeout: Duration = .seconds(10)
    /// A6: a transient send failure is retried after min(`sendRetryStep` × attempt, `sendRetryCap`).
    public static let sendRetryStep: Duration = .milliseconds(250)
    /// A6: the cap of the transient send retry delay.
    public static let sendRetryCap: Duration = .milliseconds(1500)
    /// A6: after registration the client sends `heartbeat` this often.
    public static let heartbeatInterval: Duration = .seconds(5)
    /// A6: the watchdog fails the connection after this long without any inbound traffic.
    public static let watchdogTimeout: Duration = .seconds(15)

    // MARK: A7 Resume tokens

    /// A7: after `invalidResume` the client re-registers, without a token, this much later.
    public static let invalidResumeReRegisterDelay: Duration = .milliseconds(200)
    /// A7: this many invalid resumes within `invalidResumeWindow` end the loop with `invalidResumeLoop`.
    public static let invalidResumeLoopCount = 3
    /// A7: the rolling window of the invalid-resume loop rule.
    public static let invalidResumeWindow: Duration = .seconds(30)
    /// A7: the separator of the resume-token key `<device ID>::<desktop ID>`.
    public static let resumeKeySeparator = "::"

    // MARK: A9 Recovery epochs, network changes, background

    /// A9: the window of a recovery epoch; an interface switch gives the replacement a fresh one.
    public static let recoveryWindow: Duration = .seconds(90)
    /// A9: after returning to the foreground, recovery for the active desktop starts this much later.
    public static let foregroundRecoveryDelay: Duration = .milliseconds(1500)
    /// A9: an existing socket is kept after the foreground only if a ping answers within this time.
    /// It is the `system.ping` timeout of the catalogue (3 s): the keep-or-replace ping is an ordinary
    /// probe, and its A8 timeout replaces the generation that carried it.
    public static let foregroundPingDeadline: Duration = .seconds(3)
    /// A9: the `system.ping` probe backoff inside an epoch (our choice; SPEC says "with backoff"): the
    /// n-th failed probe waits `recoveryProbeBackoff[n-1]` (the last repeats) before the next one. With a
    /// 90 s window this is about nine probes.
    public static let recoveryProbeBackoff: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16)]
    /// A9: the method recovery probes with.
    public static let probeMethod = "system.ping"

    // MARK: Reconnect (not in SPEC 1.6; our documented choice, see docs/ARCHITECTURE.md)

    /// Delays before reconnect attempts 1, 2, 3, ... after a connection failed (the last repeats).
    /// SPEC 1.6 leaves reconnect pacing to the recovery epochs (A9); until one takes over, the machine
    /// uses the pre-1.6 client's ladder (PROTOCOL.md §8). Reset by a successful registration.
    public static let reconnectDelays: [Duration] = [
        .zero, .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30),
    ]
    /// Jitter applied to every non-zero reconnect delay (±15 %, PROTOCOL.md §8), from the seeded generator.
    public static let reconnectJitter = 0.15

    /// A6: the delay before retrying a send that failed transiently on its `attempt`-th try.
    public static func sendRetryDelay(afterAttempt attempt: Int) -> Duration {
        let step = sendRetryStep * max(attempt, 1)
        return min(step, sendRetryCap)
    }
}
