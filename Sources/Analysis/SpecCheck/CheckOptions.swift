/// How strictly `check` measures: real clocks and networks jitter, so timing rules allow a tolerance.
///
/// Two kinds of timing are measured. An *interval between two of the client's own messages*
/// (heartbeats, lease renewals) may be off by `tolerance` either way: network jitter moves each message.
/// A *deadline* (handshake, watchdog, re-register, request timeout, lease re-issue) may be missed by
/// `tolerance`. A *reaction* to something the client received (the re-register 0.2 s after
/// `invalidResume`, the first heartbeat 5 s after `registered`) may come at most `earlyTolerance`
/// early: latency only ever makes a reaction look later, never sooner.
public struct CheckOptions: Sendable, Hashable {
    /// The default `tolerance`: 250 ms.
    public static let defaultTolerance: Duration = .milliseconds(250)
    /// The default `earlyTolerance`: 50 ms.
    public static let defaultEarlyTolerance: Duration = .milliseconds(50)

    /// How far a deadline may be missed, and an interval between two client messages be off.
    public var tolerance: Duration
    /// How much sooner than required a reaction to an inbound message may be seen.
    public var earlyTolerance: Duration
    /// Rules left out (`--skip`).
    public var skip: Set<CheckRule>

    /// Options with the given tolerances and skipped rules (defaults: 250 ms, 50 ms, none).
    public init(tolerance: Duration = CheckOptions.defaultTolerance, earlyTolerance: Duration = CheckOptions.defaultEarlyTolerance,
                skip: Set<CheckRule> = []) {
        self.tolerance = tolerance
        self.earlyTolerance = earlyTolerance
        self.skip = skip
    }
}
