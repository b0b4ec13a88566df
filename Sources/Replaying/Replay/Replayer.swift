import Capture
public import RelayClient
public import RelayProtocol
public import Trace

/// What one ``Replayer/step()`` did: a ``ReplayStepEvent`` whose inputs are the relay client's.
public typealias ReplayEvent = ReplayStepEvent<ClientInput>

/// Strict replay of a relay-client trace (rr's lesson: record every source of nondeterminism, replay it
/// exactly, stop at the first divergence).
///
/// A fresh ``RelayClientMachine`` is built from the trace header (identity, seed); every recorded input is
/// fed at its recorded time, and every action the machine returns is encoded exactly as the capture layer
/// encodes it (``ClientRecordCodec``), redacted with the trace's own key, and compared with the recorded
/// action records that follow the input: JSON payloads canonically (key order ignored), binary frames byte
/// for byte. The first difference stops the replay with a ``Divergence`` report.
///
/// Stepping: ``step()``, ``run(until:)``, ``breakpoints``, and ``stepBack()`` (the machine is a value type:
/// a checkpoint every `checkpointInterval` records, then forward again to the record before). At most
/// `maxCheckpoints` are kept: past that, every other one is dropped and the interval doubles, so memory
/// stays bounded on a trace of any length and a step back replays at most the larger of
/// `checkpointInterval` and about `2 * records / maxCheckpoints` records.
///
/// Not thread-safe: use a replayer from one thread. The stored properties the replay touches for every
/// record (`machine`, `position`, `currentCheckpointInterval`, the divergence flag, the pending actions and
/// their head, the action buffer, the last input and its record) are `@exclusivity(unchecked)`: the runtime's dynamic exclusivity check cost about four calls per record,
/// 3.8 % of a strict replay's instructions (docs/BENCHMARKS.md, issue 19). No access to them can overlap
/// another: the replayer is used from one thread, and while it holds one of them it calls no code outside
/// this module (`onProgress`, conditions and breakpoints run between records, on copies of the machine).
public final class Replayer {
    /// The trace's header.
    public let header: TraceHeader
    /// Every record of the trace: read from the file a chunk at a time when the replayer was opened on a
    /// complete trace file, else held in memory.
    public let records: ReplayRecords
    /// The machine under replay.
    @exclusivity(unchecked) public private(set) var machine: RelayClientMachine
    /// The index of the next record to replay.
    @exclusivity(unchecked) public private(set) var position = 0
    /// Conditions that pause ``run(until:)`` (and the CLI's `continue`).
    public var breakpoints: [ReplayCondition<RelayClientMachine>] = []
    /// Records between checkpoints for stepping backward (at the start; see `maxCheckpoints`).
    public let checkpointInterval: Int
    /// The most checkpoints kept (at least 2): when a new one would exceed it, every other checkpoint is
    /// dropped and the interval between them doubles.
    public var maxCheckpoints = 1024
    /// Checkpoints held now.
    public var checkpointCount: Int { checkpoints.count }
    /// Records between checkpoints now.
    @exclusivity(unchecked) public private(set) var currentCheckpointInterval: Int
    /// How many records a divergence report shows before the divergent one.
    public var contextRecords = 8
    /// Called by ``run(until:)`` with the position each time it reaches a multiple of
    /// `progressInterval` (for a progress line; never by ``step()``).
    public var onProgress: ((Int) -> Void)?
    /// How many records apart ``onProgress`` is called.
    public var progressInterval = 16_384
    /// The divergence that stopped the replay, if any.
    public private(set) var divergence: Divergence? {
        didSet { hasDiverged = divergence != nil || damage != nil }
    }
    /// Where the trace file turned out to be damaged, if the replay got there (a file-backed replayer
    /// reads each chunk when it first needs it).
    public private(set) var damage: (record: Int, error: TraceError)? {
        didSet { hasDiverged = divergence != nil || damage != nil }
    }
    /// `divergence != nil || damage != nil`, kept as a flag: the loops test it once per record, and reading
    /// the optional struct out of the class copies (and then releases) every field it has.
    @exclusivity(unchecked) private var hasDiverged = false

    private let redactor: Redactor
    private let initialMachine: RelayClientMachine
    /// The records of the last input's actions, not yet redacted: a recorded action is already redacted and
    /// redaction is idempotent, so an action whose raw bytes equal the recorded ones matches without being
    /// redacted; only the others (those carrying a secret, or a real difference) are redacted, by `redacted`.
    @exclusivity(unchecked) private var pending: [TraceRecord] = []
    @exclusivity(unchecked) private var pendingHead = 0
    @exclusivity(unchecked) private var lastInputRecord: Int?
    private var checkpoints: [Checkpoint] = []
    @exclusivity(unchecked) private var actionBuffer: [ClientAction] = []
    /// The last few payloads redacted, with their results: redaction is a pure function of the redactor
    /// (fixed for the replay), the kind and the bytes, and the same secret-bearing record (the
    /// `transportOpen` with the JWT and token binding) comes back with every generation.
    private var redactionMemo: [(kind: RecordKind, payload: [UInt8], redacted: [UInt8])] = []
    private var redactionMemoNext = 0
    private static let redactionMemoCapacity = 8
    /// Where a `run` last paused, and what it passes when run again from there.
    private var pauses = ReplayPauses()

    private struct Checkpoint {
        var position: Int
        var machine: RelayClientMachine
        var pending: [TraceRecord]
        var lastInputRecord: Int?
    }

    /// A replayer of `records` under `header`; `tuning` changes the client's timing (a what-if
    /// experiment: the replay then diverges where the change first shows).
    public convenience init(header: TraceHeader, records: [TraceRecord], checkpointInterval: Int = 512, tuning: ClientTuning = .spec) throws(ReplayError) {
        try self.init(header: header, records: ReplayRecords(records), checkpointInterval: checkpointInterval, tuning: tuning)
    }

    /// A replayer of `records` (in memory or read from a file as needed) under `header`.
    public init(header: TraceHeader, records: ReplayRecords, checkpointInterval: Int = 512, tuning: ClientTuning = .spec) throws(ReplayError) {
        self.header = header
        self.records = records
        self.checkpointInterval = max(1, checkpointInterval)
        currentCheckpointInterval = max(1, checkpointInterval)
        let configuration: ClientConfiguration
        do { configuration = try ClientCapture.configuration(from: header) } catch {
            throw ReplayError(message: "the trace header does not describe a relay client: \(error)")
        }
        machine = RelayClientMachine(configuration: configuration, tuning: tuning)
        initialMachine = machine
        redactor = header.redaction.redactor
        checkpoints.append(Checkpoint(position: 0, machine: machine, pending: [], lastInputRecord: nil))
    }

    /// A replayer of the trace file at `path`.
    ///
    /// A complete trace (closed by its writer: valid index and trailer) is read a chunk at a time as the
    /// replay goes, so memory stays small whatever its size; a chunk found damaged on the way stops the
    /// replay there (``ReplayStop/damaged(at:_:)``). An incomplete trace (the recorder died, or the file
    /// was cut) is read whole first: it throws unless `allowDamaged`, in which case it replays up to the
    /// end or the damage. `allowDamaged` does not change how a complete trace is read: a damaged chunk in
    /// it always stops the replay where it is met.
    public convenience init(path: String, allowDamaged: Bool = false, checkpointInterval: Int = 512, tuning: ClientTuning = .spec) throws(ReplayError) {
        let opened = try ReplayRecords.open(path: path, allowDamaged: allowDamaged)
        try self.init(header: opened.header, records: opened.records, checkpointInterval: checkpointInterval, tuning: tuning)
        readProblem = opened.readProblem
    }

    /// Why an incomplete trace opened with `allowDamaged` ends where it does (the records stop before the
    /// problem); nil for a complete trace.
    public private(set) var readProblem: TraceError?

    /// Whether every record has been replayed.
    public var isAtEnd: Bool { position >= records.count }

    // MARK: Stepping

    /// Replays the next record. Returns nil at the end, or once the replay has diverged or met damage.
    @discardableResult
    public func step() -> ReplayEvent? {
        switch advance() {
        case .end: return nil
        case .fed(let record, let actions):
            guard let input = lastFedInput else { return nil }
            return .fed(record: record, input: input, actions: actions)
        case .matched(let record): return .matched(record: record)
        case .skipped(let record): return .skipped(record: record)
        case .diverged: return divergence.map { .diverged($0) }
        case .damaged: return damage.map { .damaged(record: $0.record, $0.error) }
        }
    }

    /// What `advance()` did: `step()`'s event without its payloads (the fed input is in `lastFedInput`, the
    /// divergence in `divergence`), so the loops of `run` and `seek`, which drop it at once, have no
    /// `ReplayEvent` to destroy per record.
    private enum Outcome {
        case end, fed(record: Int, actions: Int), matched(Int), skipped(Int), diverged, damaged
    }

    /// The input of the last `.fed` outcome.
    @exclusivity(unchecked) private var lastFedInput: ClientInput?

    /// Replays the next record (see `step()`).
    private func advance() -> Outcome {
        guard !hasDiverged else { return .end }
        guard position < records.count else {
            // An incomplete trace may end between an input and its actions: those were lost, not skipped.
            if pendingHead < pending.count && readProblem == nil { return diverge(extra: pending[pendingHead], at: records.count) }
            return .end
        }
        if position % currentCheckpointInterval == 0, checkpoints.last.map({ $0.position < position }) ?? true {
            if checkpoints.count >= max(2, maxCheckpoints) { thinCheckpoints() }
            // Thinning doubles the interval: this record may no longer be on it.
            if position % currentCheckpointInterval == 0 {
                checkpoints.append(Checkpoint(position: position, machine: machine, pending: Array(pending[pendingHead...]),
                                              lastInputRecord: lastInputRecord))
            }
        }
        let index = position
        let record: TraceRecord
        do { record = try records.record(at: index) } catch {
            damage = (index, error)
            return .damaged
        }
        if record.kind == .marker, record.channel == .relay, let seed = Replayer.restartSeed(record) {
            // The client process was restarted here: a new machine, as the driver built it.
            if pendingHead < pending.count { return diverge(extra: pending[pendingHead], at: index) }
            var config = machine.configuration
            config.seed = seed
            machine = RelayClientMachine(configuration: config, tuning: machine.tuning)
            pending.removeAll()
            pendingHead = 0
            position += 1
            return .skipped(index)
        }
        if record.kind == .dropped {
            // The recorder lost records here (its queue was full): no strict replay can go past the gap.
            return setDivergence(Divergence(record: index, time: record.time, generation: record.generation, kind: .undecodable,
                                            expected: describe(record),
                                            actual: "the recorder dropped records here; a strict replay cannot go past the gap",
                                            context: context(before: index), rule: nil))
        }
        if record.channel != .relay || !isClientRecord(record) {
            position += 1
            return .skipped(index)
        }
        if ClientRecordCodec.isAction(record) {
            guard pendingHead < pending.count else {
                return diverge(missing: record, at: index)
            }
            let raw = pending[pendingHead]
            if !Replayer.matchesExactly(recorded: record, actual: raw) {
                let actual = redacted(raw)
                guard Replayer.matches(recorded: record, actual: actual) else {
                    return diverge(expected: record, actual: actual, at: index)
                }
            }
            pendingHead += 1
            position += 1
            return .matched(index)
        }
        // An input: everything the previous input produced must have been recorded by now.
        if pendingHead < pending.count { return diverge(extra: pending[pendingHead], at: index) }
        let input: ClientInput?
        do { input = try ClientRecordCodec.decodeInput(record) } catch {
            return setDivergence(Divergence(record: index, time: record.time, generation: record.generation,
                                            kind: .undecodable, expected: describe(record), actual: "\(error)",
                                            context: context(before: index), rule: nil))
        }
        guard let input else {
            position += 1
            return .skipped(index)
        }
        actionBuffer.removeAll(keepingCapacity: true)
        machine.handle(input, at: record.time, into: &actionBuffer)
        pending.removeAll(keepingCapacity: true)
        pendingHead = 0
        for a in actionBuffer {
            pending.append(contentsOf: ClientRecordCodec.records(a, at: record.time))
        }
        lastInputRecord = index
        position += 1
        lastFedInput = input
        return .fed(record: index, actions: actionBuffer.count)
    }

    /// Replays until the end, a divergence, or (before a record) one of `conditions` or a breakpoint.
    /// The record it stops before is not replayed; calling it again from that same pause continues past
    /// it (a new condition that holds for the record right here, when not paused here, stops at once).
    @discardableResult
    public func run(until conditions: [ReplayCondition<RelayClientMachine>] = []) -> ReplayStop {
        let all = conditions + breakpoints
        let interval = max(1, progressInterval)
        while !hasDiverged {
            if !all.isEmpty, position < records.count,
               let stop = pauses.pause(before: position, all, holds: { holds($0, before: position) }) {
                return stop
            }
            if case .end = advance() { break }  // after a divergence or damage, the loop's test ends it
            if !hasDiverged, position % interval == 0, let onProgress { onProgress(position) }
        }
        if let divergence { return .diverged(divergence) }
        if let damage { return .damaged(at: damage.record, damage.error) }
        return .finished
    }

    /// Steps back one record: restores the checkpoint before it and replays forward to just before it.
    /// Returns false at the start.
    @discardableResult
    public func stepBack() -> Bool {
        guard position > 0 else { return false }
        seek(to: position - 1)
        return true
    }

    /// Moves to just before record `target` (0...records.count) by restoring the nearest checkpoint at or
    /// before it and replaying forward.
    public func seek(to target: Int) {
        let target = min(max(0, target), records.count)
        pauses.forget()
        let cp = checkpoints.last { $0.position <= target } ?? checkpoints[0]
        machine = cp.machine
        position = cp.position
        pending = cp.pending
        pendingHead = 0
        lastInputRecord = cp.lastInputRecord
        divergence = nil
        damage = nil
        checkpoints.removeAll { $0.position > cp.position }
        while position < target {
            if case .end = advance() { break }
        }
    }

    /// Keeps every other checkpoint (the first, at record 0, always) and doubles the interval: the kept
    /// ones sit at multiples of the new interval, and new ones follow at that spacing.
    private func thinCheckpoints() {
        guard currentCheckpointInterval <= Int.max / 2 else { return }
        currentCheckpointInterval *= 2
        checkpoints.removeAll { $0.position % currentCheckpointInterval != 0 }
    }

    /// Starts again from the first record.
    public func rewind() {
        pauses.forget()
        machine = initialMachine
        position = 0
        pending = []
        pendingHead = 0
        lastInputRecord = nil
        divergence = nil
        damage = nil
        checkpoints = [Checkpoint(position: 0, machine: machine, pending: [], lastInputRecord: nil)]
        currentCheckpointInterval = checkpointInterval
    }

    /// The state of the machine, readable.
    public var snapshot: ReplaySnapshot { ReplaySnapshot(machine: machine, position: position, records: records.count) }

    /// The seed of a `client restart seed=N` marker (the simulation's and live driver's restart marker).
    static func restartSeed(_ r: TraceRecord) -> UInt64? {
        let text = r.payloadText
        guard text.hasPrefix("client restart seed=") else { return nil }
        return UInt64(text.dropFirst("client restart seed=".count))
    }

    // MARK: Matching

    /// Whether a recorded action record and a replayed one say the same: kind, generation and direction
    /// equal; JSON payloads equal canonically (key order ignored); binary payloads equal byte for byte.
    public static func matches(recorded: TraceRecord, actual: TraceRecord) -> Bool {
        RecordMatching.matches(recorded: recorded, actual: actual)
    }

    /// Whether the records are equal in kind, generation, direction and payload bytes.
    private static func matchesExactly(recorded: TraceRecord, actual: TraceRecord) -> Bool {
        recorded.kind == actual.kind && recorded.generation == actual.generation
            && recorded.direction == actual.direction && sameBytes(recorded.payload, actual.payload)
    }

    /// `a == b`, eight bytes at a time (the element-wise `==` of two arrays costs about ten instructions a
    /// byte, and every replayed action is compared whole).
    private static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                guard let p = x.baseAddress, let q = y.baseAddress else { return true }  // both empty
                let n = x.count
                var i = 0
                while n - i >= 8 {
                    if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) != q.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
                        return false
                    }
                    i += 8
                }
                while i < n {
                    if p.load(fromByteOffset: i, as: UInt8.self) != q.load(fromByteOffset: i, as: UInt8.self) { return false }
                    i += 1
                }
                return true
            }
        }
    }

    /// A replayed action record as the capture layer writes it: redacted with the trace's key.
    private func redacted(_ r: TraceRecord) -> TraceRecord {
        var r = r
        for m in redactionMemo where m.kind == r.kind && m.payload == r.payload {
            r.payload = m.redacted
            return r
        }
        let redacted = redactor.redact(payload: r.payload, kind: r.kind)
        let entry = (kind: r.kind, payload: r.payload, redacted: redacted)
        if redactionMemo.count < Self.redactionMemoCapacity {
            redactionMemo.append(entry)
        } else {
            redactionMemo[redactionMemoNext] = entry
            redactionMemoNext = (redactionMemoNext + 1) % Self.redactionMemoCapacity
        }
        r.payload = redacted
        return r
    }

    private func isClientRecord(_ r: TraceRecord) -> Bool {
        switch r.kind {
        case .header, .marker, .dropped, .writerStopped, .unknown: false
        default: true
        }
    }

    // MARK: Conditions

    private func holds(_ c: ReplayCondition<RelayClientMachine>, before index: Int) -> Bool {
        if let byPosition = c.holdsByPosition(in: records, before: index) { return byPosition }
        let r = records[index]
        switch c {
        case .messageType(let type):
            guard r.kind == .frameText else { return false }
            return (try? JSONValue(parsing: r.payload))?["type"]?.stringValue == type
        case .method(let m):
            guard let json = try? JSONValue(parsing: r.payload) else { return false }
            if r.kind == .frameText { return json["payload"]?["method"]?.stringValue == m && json["type"] == "rpc.request" }
            if r.kind == .input { return json["input"] == "call" && json["method"]?.stringValue == m }
            return false
        case .eventType(let e):
            guard r.kind == .frameText, let json = try? JSONValue(parsing: r.payload), json["type"] == "event" else { return false }
            return json["payload"]?["eventType"]?.stringValue == e
        case .state(let predicate, _):
            let machine = machine  // a copy, so that no access to the stored machine is held while the caller's code runs
            return predicate(machine)
        case .time, .record, .timer:
            return false  // answered by holdsByPosition
        }
    }

    // MARK: Divergence

    private func diverge(expected: TraceRecord, actual: TraceRecord, at index: Int) -> Outcome {
        setDivergence(Divergence(record: index, time: expected.time, generation: expected.generation ?? actual.generation,
                                 kind: .different, expected: describe(expected), actual: describe(actual),
                                 context: context(before: index), rule: SpecRule.of(expected) ?? SpecRule.of(actual)))
    }

    private func diverge(missing recorded: TraceRecord, at index: Int) -> Outcome {
        setDivergence(Divergence(record: index, time: recorded.time, generation: recorded.generation, kind: .missing,
                                 expected: describe(recorded), actual: "(nothing: the replayed client did not do this)",
                                 context: context(before: index), rule: SpecRule.of(recorded)))
    }

    private func diverge(extra raw: TraceRecord, at index: Int) -> Outcome {
        let actual = redacted(raw)
        return setDivergence(Divergence(record: index, time: actual.time, generation: actual.generation, kind: .extra,
                                 expected: "(nothing: the trace has no such action here)", actual: describe(actual),
                                 context: context(before: index), rule: SpecRule.of(actual)))
    }

    private func setDivergence(_ d: Divergence) -> Outcome {
        divergence = d
        return .diverged
    }

    private func context(before index: Int) -> [String] {
        let from = max(0, index - contextRecords)
        return (from..<min(index + 1, records.count)).map { "\($0 == index ? ">" : " ") #\($0) \(describe(records[$0]))" }
    }

    /// One line for a record: time, kind, generation, direction, payload text (binary: its size).
    public func describe(_ r: TraceRecord) -> String { Self.describe(r) }

    /// A record as one line (time, kind, generation, direction, payload).
    public static func describe(_ r: TraceRecord) -> String {
        var head = "\(r.time) \(r.kind)"
        if let g = r.generation { head += " g\(g)" }
        if let d = r.direction { head += " \(d)" }
        if r.kind == .frameBinary { return head + " \(r.payload.count) bytes" }
        let text = r.payloadText
        return text.isEmpty ? head : head + " " + text
    }
}

extension Replayer: InteractiveReplay {
    /// The machine's clock.
    public var now: Moment { machine.now }

    /// ``step()``'s outcome without its payloads.
    public func stepOne() -> ReplayStepOutcome {
        guard let event = step() else { return .atEnd }
        return event.stop.map { .stopped($0) } ?? .wentOn
    }

    /// Nil: every condition can hold on a relay-client replay (a `state` condition reads the machine).
    public func refusal(_ condition: ReplayCondition<RelayClientMachine>) -> String? { nil }
}
