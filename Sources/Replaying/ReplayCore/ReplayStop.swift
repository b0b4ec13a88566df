public import RelayProtocol
public import Trace

/// Where a replay stopped, or why it could not go on.
public enum ReplayStop: Sendable, Equatable, CustomStringConvertible {
    /// Every record was replayed and matched.
    case finished
    /// The replayed client did something other than the recorded one.
    case diverged(Divergence)
    /// A breakpoint or `run(until:)` condition held before this record.
    case paused(at: Int, reason: String)
    /// The trace file is damaged from this record on (the chunk holding it does not read back); every
    /// record before it was replayed and matched.
    case damaged(at: Int, TraceError)
    /// A condition given to `run(until:)` (or a breakpoint) can never hold on this replay, e.g. an RPC
    /// method on a watch-channel trace: nothing was replayed. `condition` is its description.
    case refused(condition: String, reason: String)

    /// One line.
    public var description: String {
        switch self {
        case .finished: "finished: no divergence"
        case .diverged(let d): "diverged at record \(d.record)"
        case .paused(let i, let why): "paused before record \(i): \(why)"
        case .damaged(let i, let error): "the trace is damaged at record \(i): \(error.description)"
        case .refused(let c, let why): "refused the condition \(c): \(why)"
        }
    }
}

/// A replay that cannot start: the trace is unreadable or is not a trace of the replayer's machine.
public struct ReplayError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// The trace error underneath, if any.
    public var traceError: TraceError?
    /// When the trace opened but its records stop early (no trailer, a cut or damaged chunk): how many
    /// intact records come before the problem (`Replayer(path:allowDamaged: true)` replays those).
    public var intactRecords: Int?
    /// Creates an error.
    public init(message: String, traceError: TraceError? = nil, intactRecords: Int? = nil) {
        self.message = message
        self.traceError = traceError
        self.intactRecords = intactRecords
    }
    /// The message.
    public var description: String { message }
}

/// A condition to stop a replay before a record, for a replay whose state is a `Subject` (the relay
/// client's `RelayClientMachine`, the watch channel's `WatchReplaySnapshot`): a `state` condition reads
/// it, the others read the records.
///
/// Which conditions apply is the replayer's to say (`InteractiveReplay/refusal(_:)`): `time`, `record`,
/// `timer` and `state` apply to every replay; `messageType`, `method` and `eventType` name relay frames,
/// and a replay of another channel refuses them (its `run(until:)` returns ``ReplayStop/refused(condition:reason:)``)
/// rather than never pausing.
public enum ReplayCondition<Subject>: Sendable, CustomStringConvertible {
    /// Stop at the first record at or after this time (only there: continuing goes on).
    case time(Moment)
    /// Stop before this record index (only there: continuing from it goes on to the end).
    case record(Int)
    /// Stop before a frame whose message `type` is this (`rpc.request`, `registered`, ...).
    case messageType(String)
    /// Stop before an `rpc.request` (or call input) for this method.
    case method(String)
    /// Stop before an `event` frame with this `eventType`.
    case eventType(String)
    /// Stop before a record of this timer firing (its JSON name: `heartbeat`, `watchdog`, `interest.renewal`,
    /// or on the watch channel `stalledAck`, `heartbeat`).
    case timer(String)
    /// Stop when the replay's state satisfies this, checked before each record.
    case state(@Sendable (Subject) -> Bool, String)

    /// e.g. `method session.list`.
    public var description: String {
        switch self {
        case .time(let t): "time \(t)"
        case .record(let n): "record \(n)"
        case .messageType(let t): "message type \(t)"
        case .method(let m): "method \(m)"
        case .eventType(let e): "event \(e)"
        case .timer(let t): "timer \(t)"
        case .state(_, let what): "state: \(what)"
        }
    }

    /// The same condition for a replay of another machine; nil for a `state` condition (its predicate
    /// reads this machine).
    public func retargeted<Other>(to _: Other.Type = Other.self) -> ReplayCondition<Other>? {
        switch self {
        case .time(let t): .time(t)
        case .record(let n): .record(n)
        case .messageType(let t): .messageType(t)
        case .method(let m): .method(m)
        case .eventType(let e): .eventType(e)
        case .timer(let t): .timer(t)
        case .state: nil
        }
    }

    /// For the conditions that read only where a record lies (`time`, `record`) or what it is (`timer`,
    /// on `channel` when one is given): whether it holds before `records[index]`. Nil for the others, which
    /// the replayer decides.
    public func holdsByPosition(in records: ReplayRecords, before index: Int, timerChannel channel: TraceChannel? = nil) -> Bool? {
        switch self {
        // The first record at or after `t` only (a breakpoint, not every record after it).
        case .time(let t): return records[index].time >= t && (index == 0 || records[index - 1].time < t)
        case .record(let n): return index == n
        case .timer(let name):
            let r = records[index]
            guard r.kind == .timerFired, channel.map({ r.channel == $0 }) ?? true else { return false }
            return (try? JSONValue(parsing: r.payload))?["timer"]?.stringValue == name
        case .messageType, .method, .eventType, .state:
            return nil
        }
    }
}

/// The pause logic of a replay's `run(until:)`, shared by the replayers: which conditions hold before a
/// record, and which of them a run already paused for there.
///
/// A run stops before the first record where a condition holds; the record is not replayed. Running
/// again from that same pause passes the conditions that held there (so `continue` goes on), but stops
/// at once for any other condition that holds there. A seek or rewind forgets the pause.
public struct ReplayPauses: Sendable {
    private var pausedAt: Int?
    private var passed: Set<String> = []

    /// No pause yet.
    public init() {}

    /// Checks the conditions before record `position`: the stop when one holds there that this pause has
    /// not yet passed, else nil. `holds` is called only while one may hold.
    public mutating func pause<Subject>(before position: Int, _ conditions: [ReplayCondition<Subject>],
                                        holds: (ReplayCondition<Subject>) -> Bool) -> ReplayStop? {
        // Conditions are tested first without building anything; only a record where one holds pays for
        // the list of hits and their descriptions.
        guard !conditions.isEmpty, conditions.contains(where: holds) else { return nil }
        let alreadyPassed = position == pausedAt ? passed : []
        let hits = conditions.filter { holds($0) && !alreadyPassed.contains($0.description) }
        guard let hit = hits.first else { return nil }
        if pausedAt != position { passed = [] }
        pausedAt = position
        passed.formUnion(hits.map(\.description))
        return .paused(at: position, reason: hit.description)
    }

    /// The first of `conditions` that `refusal` refuses, as the stop a run returns; nil when all apply.
    public static func refusal<Subject>(_ conditions: [ReplayCondition<Subject>],
                                        _ refusal: (ReplayCondition<Subject>) -> String?) -> ReplayStop? {
        for c in conditions {
            if let why = refusal(c) { return .refused(condition: c.description, reason: why) }
        }
        return nil
    }

    /// Forgets the last pause (after a seek or rewind).
    public mutating func forget() {
        pausedAt = nil
        passed = []
    }
}

/// How a replayer compares a recorded action with the one it replayed.
public enum RecordMatching {
    /// Whether a recorded action record and a replayed one say the same: kind, generation and direction
    /// equal; JSON payloads equal canonically (key order ignored); binary payloads equal byte for byte.
    ///
    /// A diagnostic recorded before diagnostics were typed holds only its English (`text`); it matches a
    /// replayed diagnostic whose code and fields render to that sentence, so those traces still replay.
    public static func matches(recorded: TraceRecord, actual: TraceRecord) -> Bool {
        guard recorded.kind == actual.kind, recorded.generation == actual.generation,
              recorded.direction == actual.direction else { return false }
        if recorded.payload == actual.payload { return true }
        guard recorded.kind != .frameBinary,
              let a = try? JSONValue(parsing: recorded.payload), let b = try? JSONValue(parsing: actual.payload) else { return false }
        return a.canonicallyEquals(b) || legacyDiagnosticMatches(recorded: a, actual: b)
    }

    /// The record-kind members of a diagnostic record on each channel: `{"action":"diagnostic",...}` on the
    /// relay channel, `{"watch":"diagnostic","side":...,...}` on the watch channel.
    static let diagnosticKindMembers: Set<String> = ["action", "watch", "side"]

    /// `recorded` is an untyped diagnostic (`text` and its kind members only) whose sentence is what the
    /// typed diagnostic `actual` renders, with the same kind members.
    static func legacyDiagnosticMatches(recorded: JSONValue, actual: JSONValue) -> Bool {
        guard case .object(let r) = recorded, case .object(let x) = actual, let text = r["text"]?.stringValue,
              r["code"] == nil, r["action"]?.stringValue == "diagnostic" || r["watch"]?.stringValue == "diagnostic",
              let typed = DiagnosticRecord(json: actual, ignoring: diagnosticKindMembers) else { return false }
        var kind = r
        kind["text"] = nil
        guard kind.count == r.count - 1, kind.keys.allSatisfy(diagnosticKindMembers.contains),
              kind.allSatisfy({ x[$0.key] == $0.value }),
              x.keys.filter(diagnosticKindMembers.contains).count == kind.count else { return false }
        return DiagnosticCatalogue.matchesLegacyText(text, typed)
    }
}

/// What one step of a strict replay did (`Replayer.step()`, `WatchReplayer.step()`), for a channel whose
/// inputs are `Input`.
public enum ReplayStepEvent<Input: Sendable & Equatable>: Sendable, Equatable {
    /// Fed this input (record index) to the machine it belongs to; the machine returned `actions` actions.
    case fed(record: Int, input: Input, actions: Int)
    /// A recorded action matched the replayed machine's action.
    case matched(record: Int)
    /// A record that is neither an input nor an action of the channel (marker, header, another channel,
    /// writer notice) was passed over.
    case skipped(record: Int)
    /// The replay diverged here.
    case diverged(Divergence)
    /// The trace file is damaged at this record (see ``ReplayStop/damaged(at:_:)``).
    case damaged(record: Int, TraceError)

    /// The stop this step ended the replay with (a divergence or damage); nil when it went on.
    public var stop: ReplayStop? {
        switch self {
        case .diverged(let d): .diverged(d)
        case .damaged(let at, let error): .damaged(at: at, error)
        case .fed, .matched, .skipped: nil
        }
    }
}
