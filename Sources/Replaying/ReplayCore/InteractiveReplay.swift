public import RelayProtocol
public import Trace

/// What one step of an interactive replay came to.
public enum ReplayStepOutcome: Sendable, Equatable {
    /// Nothing was replayed: the replay is at its end, or stopped earlier.
    case atEnd
    /// One record was replayed and the replay goes on.
    case wentOn
    /// The record replayed ended the replay: a divergence or damage.
    case stopped(ReplayStop)
}

/// A replay a person (or a script) steps through: the relay client's `Replayer` and the watch channel's
/// `WatchReplayer`. The `--step` prompt of `relaytrace replay` drives either through this.
public protocol InteractiveReplay: AnyObject {
    /// What a `state` condition of this replay reads.
    associatedtype Subject
    /// The trace's records.
    var records: ReplayRecords { get }
    /// The index of the next record to replay.
    var position: Int { get }
    /// Conditions that pause ``run(until:)``.
    var breakpoints: [ReplayCondition<Subject>] { get set }
    /// Why an incomplete trace ends where it does; nil for a complete trace.
    var readProblem: TraceError? { get }
    /// The divergence that stopped the replay, if any.
    var divergence: Divergence? { get }
    /// Where the trace file turned out to be damaged, if the replay got there.
    var damage: (record: Int, error: TraceError)? { get }
    /// The replay's clock: the time of the last input replayed.
    var now: Moment { get }
    /// One line for a record.
    func describe(_ r: TraceRecord) -> String
    /// Replays one record.
    func stepOne() -> ReplayStepOutcome
    /// Steps back one record; false at the start.
    func stepBack() -> Bool
    /// Moves to just before record `target`.
    func seek(to target: Int)
    /// Replays until the end, a stop, or (before a record) one of `conditions` or a breakpoint.
    func run(until conditions: [ReplayCondition<Subject>]) -> ReplayStop
    /// Why `condition` can never hold on this replay, or nil when it can.
    func refusal(_ condition: ReplayCondition<Subject>) -> String?
}
