public import RelayProtocol

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

    // MARK: A2 Login and token refresh

    /// A2: the browser session opens this path (no callback URL: callback scheme nil).
    public static let loginInitiatePath = "/auth/auth0/initiate-login"
    /// A2: the app polls this path until the login completes.
    public static let loginPollPath = "/auth0/poll-status"
    /// A2: the code exchange endpoint. Not named by SPEC 1.6: our assumed path, confirm against the server.
    public static let loginExchangePath = "/auth0/finalize-login"
    /// A2: the app JWT refresh endpoint. Not named by SPEC 1.6: our assumed path, confirm against the server.
    public static let tokenRefreshPath = "/auth/token/refresh"
    /// A2: the poll-status loop polls every 2 s (the first poll 2 s after the browser opens; each next one
    /// 2 s after the previous poll's outcome, so at most one poll is in flight).
    public static let loginPollInterval: Duration = .seconds(2)
    /// A2: at most 60 polls; when the 60th comes back without a completed login, the login fails.
    public static let loginPollLimit = 60
    /// A2: the JWT refresh fires this long before the expiry ...
    public static let refreshLeadTime: Duration = .seconds(300)
    /// A2: ... but no sooner than this from now: delay = max(expiry - 300 s - now, 5 s).
    public static let refreshMinimumDelay: Duration = .seconds(5)
    /// A2 (our choice, the SPEC only says other errors do not end the session): after the n-th failed
    /// refresh in a row (transport error, or any status but 200/401/403) the next try is
    /// min(`refreshRetryBase` × 2^(n-1), `refreshRetryCap`) later: 5, 10, 20, 40, 60, 60, ... s. No jitter
    /// (the component has no generator); the delay is never below the 5 s floor.
    public static let refreshRetryBase: Duration = .seconds(5)
    /// A2 (our choice): the cap of the refresh retry backoff.
    public static let refreshRetryCap: Duration = .seconds(60)

    /// A2: the delay before the refresh of a JWT expiring at `expiry`, seen at `now`:
    /// max(expiry - 300 s - now, 5 s).
    public static func refreshDelay(expiry: Moment, now: Moment) -> Duration {
        max((expiry - refreshLeadTime) - now, refreshMinimumDelay)
    }

    /// A2 (our choice): the delay before retrying after the `failures`-th failed refresh in a row.
    public static func refreshRetryDelay(afterFailures failures: Int) -> Duration {
        let exponent = min(max(failures, 1) - 1, 16)
        return min(refreshRetryBase * (1 << exponent), refreshRetryCap)
    }

    // MARK: A3 Region

    /// A3: the base URL of region `us`; it drives the REST origin and the `/ws/device-link` socket.
    public static let usBaseURL = "https://api-us.plantocode.com"
    /// A3: the base URL of region `eu`; it drives the REST origin and the `/ws/device-link` socket.
    public static let euBaseURL = "https://api-eu.plantocode.com"

    // MARK: A10 Event ingress

    /// A10 (our bound, not a SPEC number): at most this many (session, run, thread) keys may have a snapshot
    /// waiting. A snapshot for a new key beyond it drops the oldest waiting one (``SnapshotDropReason/overflow``),
    /// so a UI that stops acknowledging cannot make the ingress grow without limit.
    public static let maxWaitingSnapshotKeys = 256

    // MARK: A11 Timeline interest (leases)

    /// A11: an active lease is re-sent (`chat:timeline-interest`, `active: true`) this often.
    public static let interestRenewalInterval: Duration = .seconds(20)
    /// A11: a failed delivery of an interest frame is retried at most this many times.
    public static let interestRetryLimit = 4
    /// A11: the base delay before the first retry.
    public static let interestRetryInitialDelay: Duration = .milliseconds(250)
    /// A11: no retry waits longer than this (after jitter).
    public static let interestRetryMaxDelay: Duration = .seconds(2)
    /// A11: every retry delay is jittered by ±20 %, from the caller's seeded generator.
    public static let interestRetryJitter = 0.2

    /// A11: the un-jittered delay before retry `attempt` (1...4): 0.25 s × 2^(attempt − 1), at most 2 s,
    /// i.e. 0.25, 0.5, 1, 2 s.
    public static func interestRetryBaseDelay(attempt: Int) -> Duration {
        let shift = min(max(attempt - 1, 0), 8)
        return min(interestRetryInitialDelay * (1 << shift), interestRetryMaxDelay)
    }

    /// A11: the delay before retry `attempt`: min(base × (1 + 0.2 × (2u − 1)), 2 s) with u uniform in [0, 1)
    /// drawn once from `rng` (``SeededRandom/jittered(_:fraction:)``), so it lies in
    /// [base × 0.8, min(base × 1.2, 2 s)].
    public static func interestRetryDelay(attempt: Int, rng: inout SeededRandom) -> Duration {
        let base = interestRetryBaseDelay(attempt: attempt)
        return min(rng.jittered(base, fraction: interestRetryJitter), interestRetryMaxDelay)
    }
}
