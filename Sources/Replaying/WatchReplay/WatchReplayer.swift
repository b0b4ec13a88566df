public import ReplayCore
public import RelayProtocol
public import Trace
public import WatchCapture
public import WatchLink

/// What one ``WatchReplayer/step()`` did: a ``ReplayStepEvent`` whose inputs are the watch channel's (a
/// launch is fed to no machine yet: it builds them, with 0 actions).
public typealias WatchReplayEvent = ReplayStepEvent<WatchChannelInput>

/// Strict replay of a watch-channel trace (docs/TRACE_FORMAT.md §12), in the spirit of ``Replayer``.
///
/// The trace records the four WatchLink machines at their boundary: every input a driver handed a
/// machine, then the actions the machine returned. The replayer feeds every recorded input, at its
/// recorded time, to the machine it belongs to exactly as the drivers (`WatchSimulation`, the
/// perturbation engine) do: a watch launch builds a new ``WatchSender`` from the recorded clock, floor,
/// reachability *and incarnation token* (the token is an input: the simulation draws it from a generator
/// it shares with the channel's faults, which a replay cannot redraw) and a new ``SnapshotReceiver``; a
/// phone launch builds a new ``PhoneReceiver`` and ``SnapshotSender``; datagrams, timers and the other
/// inputs go to their machine. Every action returned is encoded with ``WatchRecordCodec`` (redacted with
/// the trace's key when the bytes differ) and compared with the recorded action records that follow the
/// input: byte for byte, else canonically (`RecordMatching.matches(recorded:actual:)`). The first difference
/// stops the replay with a ``Divergence``.
///
/// Where the driver's own steps depend on the machines, they are checked too: a recorded timer fire must
/// fall on the deadline the replayed machine armed (drivers fire only a timer still armed for that time);
/// the acknowledgement a replayed ``SnapshotReceiver`` applied must be what the trace hands to the watch
/// next (`ack via snapshot`, C14), and nothing else; an acknowledgement the replayed ``PhoneReceiver``
/// sent must be handed to the ``SnapshotSender`` before any other machine's input (the phone half of
/// C14); a watch relaunch must load the sequence floor the replayed ``WatchSender`` last persisted (C2,
/// C8). A `dropped` notice, or a record on channel `watch` of a kind the channel never writes, stops the
/// replay there (undecodable).
public final class WatchReplayer: CustomStringConvertible {
    /// The trace's header.
    public let header: TraceHeader
    /// Every record of the trace: read from the file a chunk at a time when the replayer was opened on a
    /// complete trace file, else held in memory.
    public let records: ReplayRecords
    /// The index of the next record to replay.
    public private(set) var position = 0
    /// The watch's command sender, once a watch launch was replayed.
    public private(set) var watch: WatchSender?
    /// The watch's snapshot receiver (a new one at every watch launch).
    public private(set) var snapshotReceiver = SnapshotReceiver()
    /// The phone's command receiver, once a phone launch was replayed.
    public private(set) var phone: PhoneReceiver?
    /// The phone's snapshot sender, once a phone launch was replayed.
    public private(set) var snapshotSender: SnapshotSender?
    /// Watch launches replayed.
    public private(set) var watchLaunches = 0
    /// Phone launches replayed.
    public private(set) var phoneLaunches = 0
    /// Inputs fed so far.
    public private(set) var inputsFed = 0
    /// Recorded actions matched so far.
    public private(set) var actionsMatched = 0
    /// The time of the last input fed.
    public private(set) var now: Moment = .zero
    /// How many records a divergence report shows before the divergent one.
    public var contextRecords = 8
    /// Called by ``run()`` with the position each time it reaches a multiple of `progressInterval` (for a
    /// progress line; never by ``step()``).
    public var onProgress: ((Int) -> Void)?
    /// How many records apart ``onProgress`` is called.
    public var progressInterval = 16_384
    /// The divergence that stopped the replay, if any.
    public private(set) var divergence: Divergence?
    /// Where the trace file turned out to be damaged, if the replay got there.
    public private(set) var damage: (record: Int, error: TraceError)?
    /// Why an incomplete trace opened with `allowDamaged` ends where it does (the records stop before the
    /// problem); nil for a complete trace.
    public private(set) var readProblem: TraceError?

    private let redactor: Redactor
    /// The actions the last input produced, encoded, not yet matched.
    private var pending: [TraceRecord] = []
    private var pendingHead = 0
    /// The acknowledgement of the snapshot the replayed receiver just applied, which the driver hands to
    /// the watch as the next input (C14); nil when none is due.
    private var dueSnapshotAck: (ack: CommandAck, revision: UInt64)?
    /// The acknowledgements the replayed PhoneReceiver sent that the driver has yet to hand to the
    /// SnapshotSender (C14, the phone half): only SnapshotSender inputs may come before them.
    private var dueSenderAcks: [CommandAck] = []
    /// The last sequence floor the replayed WatchSender asked to persist: a later watch launch must load
    /// it (C2, C8: the floor survives a relaunch).
    private var lastWatchFloor: UInt64?

    /// Whether `header` says the trace is a watch-channel trace (`client.channel` = `watch`).
    public static func isWatchTrace(_ header: TraceHeader) -> Bool {
        header.client["channel"]?.stringValue == "watch"
    }

    /// A replayer of `records` under `header`.
    public convenience init(header: TraceHeader, records: [TraceRecord]) throws(ReplayError) {
        try self.init(header: header, records: ReplayRecords(records))
    }

    /// A replayer of `records` (in memory or read from a file as needed) under `header`. Throws when the
    /// trace is not a watch-channel trace: its header's `client.channel` is not `watch` (a header that
    /// names no channel is accepted when a record is on channel `watch`).
    public init(header: TraceHeader, records: ReplayRecords) throws(ReplayError) {
        self.header = header
        self.records = records
        redactor = header.redaction.redactor
        let channel = header.client["channel"]
        if channel?.stringValue != "watch" {
            let named = channel.map { "is \($0.jsonText)" } ?? "is missing"
            guard channel == nil, records.contains(where: { $0.channel == .watch }) else {
                throw ReplayError(message: "the trace header does not describe a watch-channel trace: $.client.channel \(named) (expected \"watch\") and no record is on channel watch; a relay-client trace replays with Replayer (relaytrace replay FILE picks the replayer from the header)")
            }
        }
    }

    /// A replayer of the trace file at `path`.
    ///
    /// As ``Replayer/init(path:allowDamaged:checkpointInterval:tuning:)``: a complete trace is read a chunk
    /// at a time as the replay goes, and a chunk found damaged on the way stops the replay there
    /// (``ReplayStop/damaged(at:_:)``); an incomplete trace (the recorder died, or the file was cut) is read
    /// whole first and refused unless `allowDamaged`, in which case it replays up to its last intact record.
    public convenience init(path: String, allowDamaged: Bool = false) throws(ReplayError) {
        let opened = try ReplayRecords.open(path: path, allowDamaged: allowDamaged)
        try self.init(header: opened.header, records: opened.records)
        readProblem = opened.readProblem
    }

    /// Whether every record has been replayed.
    public var isAtEnd: Bool { position >= records.count }

    // MARK: Replaying

    /// Replays the next record. Returns nil at the end, or once the replay has diverged or met damage.
    @discardableResult
    public func step() -> WatchReplayEvent? {
        guard divergence == nil, damage == nil else { return nil }
        guard position < records.count else {
            // An incomplete trace may end between an input and its actions: those were lost, not skipped.
            guard readProblem == nil else { return nil }
            if pendingHead < pending.count { return extra(pending[pendingHead], at: records.count) }
            if let due = dueSnapshotAck { return unhandedAck(due, at: records.count, time: now) }
            if let ack = dueSenderAcks.first { return unhandedSenderAck(ack, at: records.count, time: now) }
            return nil
        }
        let index = position
        let record: TraceRecord
        do { record = try records.record(at: index) } catch {
            damage = (index, error)
            return .damaged(record: index, error)
        }
        if record.kind == .dropped {
            // The recorder lost records here: no strict replay can go past the gap.
            return undecodable(record, at: index, because: "the recorder dropped records here (its queue was full: \(record.payloadText)); a strict replay cannot go past the gap")
        }
        guard record.channel == .watch else {
            position += 1
            return .skipped(record: index)
        }
        switch record.kind {
        case .frameBinary, .transportOpen, .transportOpened, .transportClosed, .transportFailed, .header:
            return undecodable(record, at: index, because: "a \(record.kind) record on channel watch: the watch channel records datagrams as text frames, timer fires, inputs, actions and markers only")
        default:
            break
        }
        if WatchRecordCodec.isAction(record) {
            guard pendingHead < pending.count else {
                // The acknowledgement of an applied snapshot goes to the watch before anything else.
                if let due = dueSnapshotAck { return unhandedAck(due, at: index, time: record.time) }
                return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .missing,
                                          expected: describe(record), actual: "(nothing: the replayed machine did not do this)",
                                          context: context(before: index), rule: Self.rule(of: record)))
            }
            let raw = pending[pendingHead]
            if !RecordMatching.matches(recorded: record, actual: raw) {
                var actual = raw
                actual.payload = redactor.redact(payload: raw.payload, kind: raw.kind)
                guard RecordMatching.matches(recorded: record, actual: actual) else {
                    return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .different,
                                              expected: describe(record), actual: describe(actual),
                                              context: context(before: index),
                                              rule: Self.rule(of: record) ?? Self.rule(of: actual)))
                }
            }
            pendingHead += 1
            actionsMatched += 1
            position += 1
            return .matched(record: index)
        }
        let input: WatchChannelInput?
        do { input = try WatchRecordCodec.decodeInput(record) } catch {
            return undecodable(record, at: index, because: error.description)
        }
        guard let input else {
            position += 1
            return .skipped(record: index)
        }
        // An input: everything the previous input produced must have been recorded by now.
        if pendingHead < pending.count { return extra(pending[pendingHead], at: index) }
        if let due = dueSnapshotAck {
            guard case .ackFromSnapshot(let ack) = input else { return unhandedAck(due, at: index, time: record.time) }
            guard ack == due.ack else {
                return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .different,
                                          expected: describe(record),
                                          actual: "ack via snapshot \(WatchWire.ackJSON(due.ack).jsonText): the ack of revision \(due.revision), which the replayed SnapshotReceiver applied",
                                          context: context(before: index), rule: Self.c14))
            }
        } else if case .ackFromSnapshot = input {
            return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .missing,
                                      expected: describe(record),
                                      actual: "(nothing: the replayed SnapshotReceiver applied no snapshot carrying an ack just before)",
                                      context: context(before: index), rule: Self.c14))
        }
        if let ack = dueSenderAcks.first {
            guard case .snapshotSender(let s) = input else { return unhandedSenderAck(ack, at: index, time: record.time) }
            if case .ack(let handed) = s {
                guard handed == ack else {
                    return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .different,
                                              expected: describe(record),
                                              actual: "ack \(WatchWire.ackJSON(ack).jsonText): the one the replayed PhoneReceiver sent",
                                              context: context(before: index), rule: Self.c14))
                }
                dueSenderAcks.removeFirst()
            }
        } else if case .snapshotSender(.ack) = input {
            return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .missing,
                                      expected: describe(record),
                                      actual: "(nothing: the replayed PhoneReceiver sent no acknowledgement to hand over)",
                                      context: context(before: index), rule: Self.c14))
        }
        dueSnapshotAck = nil
        pending.removeAll(keepingCapacity: true)
        pendingHead = 0
        let t = record.time
        var actions: [WatchChannelAction] = []
        switch input {
        case .watchLaunched(let l):
            if watchLaunches > 0, let floor = lastWatchFloor, l.storedFloor != floor {
                return diverge(Divergence(record: index, time: record.time, generation: nil, kind: .different,
                                          expected: describe(record),
                                          actual: "a launch loading the floor \(floor) the replayed WatchSender last persisted",
                                          context: context(before: index),
                                          rule: SpecRule(section: "C2/C8", summary: "the sequence floor persists across relaunches")))
            }
            watch = WatchSender(clockMilliseconds: l.clockMilliseconds, storedFloor: l.storedFloor,
                                incarnation: l.incarnation, reachable: l.reachable)
            snapshotReceiver = SnapshotReceiver()
            watchLaunches += 1
        case .phoneLaunched(let l):
            phone = PhoneReceiver(liveSession: l.liveSession, checkpoint: l.checkpoint)
            snapshotSender = SnapshotSender(clockMilliseconds: l.clockMilliseconds, storedFloor: l.revisionFloor)
            phoneLaunches += 1
        case .watch(let w):
            guard var machine = watch else { return notLaunched(record, at: index, "WatchSender", "watch") }
            if case .timerFired(.stalledAck) = w, machine.stallDeadline != t {
                return timerOffDeadline(record, at: index, armed: machine.stallDeadline, machine: "WatchSender's stalled-ack timer",
                                        rule: SpecRule(section: "C7", summary: "5 s stalled ack resends exactly the named command"))
            }
            actions = machine.handle(w, at: t).map { .watch($0) }
            watch = machine
        case .ackFromSnapshot(let ack):
            guard var machine = watch else { return notLaunched(record, at: index, "WatchSender", "watch") }
            actions = machine.handle(.ackReceived(ack), at: t).map { .watch($0) }
            watch = machine
        case .phone(let p):
            guard var machine = phone else { return notLaunched(record, at: index, "PhoneReceiver", "phone") }
            let out = machine.handle(p)
            for case .sendAck(let ack) in out { dueSenderAcks.append(ack) }
            actions = out.map { .phone($0) }
            phone = machine
        case .snapshotSender(let s):
            guard var machine = snapshotSender else { return notLaunched(record, at: index, "SnapshotSender", "phone") }
            if case .timerFired(.heartbeat) = s, machine.heartbeatDeadline != t {
                return timerOffDeadline(record, at: index, armed: machine.heartbeatDeadline, machine: "SnapshotSender's heartbeat",
                                        rule: Self.c9)
            }
            actions = machine.handle(s, at: t).map { .snapshotSender($0) }
            snapshotSender = machine
        case .snapshotReceived(let s):
            guard watch != nil else { return notLaunched(record, at: index, "SnapshotReceiver", "watch") }
            let outcome = snapshotReceiver.receive(s)
            if case .applied(let applied) = outcome, let ack = applied.ack { dueSnapshotAck = (ack, applied.revision) }
            actions = [.snapshotReceiver(outcome)]
        }
        for case .watch(.persist(let r)) in actions { lastWatchFloor = r.value }
        for a in actions { pending.append(WatchRecordCodec.record(a, at: t)) }
        now = max(now, t)
        inputsFed += 1
        position += 1
        return .fed(record: index, input: input, actions: actions.count)
    }

    /// Replays until the end, a divergence, or damage.
    @discardableResult
    public func run() -> ReplayStop { run(until: []) }

    /// Replays until the end, a divergence, damage, or (before a record) one of `conditions` or a
    /// breakpoint. ``ReplayCondition/time(_:)``, ``ReplayCondition/record(_:)``,
    /// ``ReplayCondition/timer(_:)`` with the watch channel's timer names (`stalledAck`, `heartbeat`) and
    /// ``ReplayCondition/state(_:_:)`` over the four machines (``WatchReplaySnapshot``) apply; a condition
    /// that names relay frames (message type, method, event type) is refused before anything is replayed
    /// (``ReplayStop/refused(condition:reason:)``, see ``refusal(_:)``). As ``Replayer/run(until:)``: the
    /// record it stops before is not replayed, and running again from that same pause goes past the
    /// conditions that held there.
    @discardableResult
    public func run(until conditions: [ReplayCondition<WatchReplaySnapshot>]) -> ReplayStop {
        let all = conditions + breakpoints
        if let refused = ReplayPauses.refusal(all, refusal) { return refused }
        let interval = max(1, progressInterval)
        while divergence == nil, damage == nil {
            if !all.isEmpty, position < records.count,
               let stop = pauses.pause(before: position, all, holds: { holds($0, before: position) }) {
                return stop
            }
            guard step() != nil else { break }
            if divergence == nil, damage == nil, position % interval == 0, let onProgress { onProgress(position) }
        }
        if let divergence { return .diverged(divergence) }
        if let damage { return .damaged(at: damage.record, damage.error) }
        return .finished
    }

    /// Conditions that pause ``run(until:)``.
    public var breakpoints: [ReplayCondition<WatchReplaySnapshot>] = []
    private var pauses = ReplayPauses()

    /// Why `condition` can never hold on a watch replay: the message type, method and event type
    /// conditions name relay frames. Nil for the others.
    public func refusal(_ condition: ReplayCondition<WatchReplaySnapshot>) -> String? { Self.refusal(of: condition) }

    /// ``refusal(_:)``, before a replayer exists.
    public static func refusal(of condition: ReplayCondition<WatchReplaySnapshot>) -> String? {
        switch condition {
        case .time, .record, .timer, .state: nil
        case .messageType, .method, .eventType:
            "a watch-channel trace has no relay frames; break on time, record, timer (stalledAck, heartbeat) or the machines' state"
        }
    }

    private func holds(_ c: ReplayCondition<WatchReplaySnapshot>, before index: Int) -> Bool {
        if let byPosition = c.holdsByPosition(in: records, before: index, timerChannel: .watch) { return byPosition }
        if case .state(let predicate, _) = c { return predicate(snapshot) }
        return false
    }

    /// Starts again from the first record (the machines unlaunched).
    public func rewind() {
        position = 0
        watch = nil
        snapshotReceiver = SnapshotReceiver()
        phone = nil
        snapshotSender = nil
        watchLaunches = 0
        phoneLaunches = 0
        inputsFed = 0
        actionsMatched = 0
        now = .zero
        divergence = nil
        damage = nil
        pending = []
        pendingHead = 0
        dueSnapshotAck = nil
        dueSenderAcks = []
        lastWatchFloor = nil
        pauses.forget()
    }

    /// Moves to just before record `target` (0...records.count): from the start again when it lies behind
    /// (watch traces are small: no checkpoints), then forward.
    public func seek(to target: Int) {
        let target = min(max(0, target), records.count)
        if target < position || divergence != nil || damage != nil { rewind() }
        pauses.forget()
        while position < target, step() != nil {}
    }

    /// Steps back one record (replays from the start to the record before). Returns false at the start.
    @discardableResult
    public func stepBack() -> Bool {
        guard position > 0 else { return false }
        seek(to: position - 1)
        return true
    }

    // MARK: State

    /// A readable picture of the four machines now.
    public var snapshot: WatchReplaySnapshot {
        WatchReplaySnapshot(position: position, records: records.count, time: now, watch: watch, watchLaunches: watchLaunches,
                            snapshotReceiver: snapshotReceiver, phone: phone, snapshotSender: snapshotSender,
                            phoneLaunches: phoneLaunches)
    }

    /// ``snapshot``'s description.
    public var description: String { snapshot.description }

    /// One line for a record: time, kind, direction, payload text.
    public func describe(_ r: TraceRecord) -> String {
        var head = "\(r.time) \(r.kind)"
        if let d = r.direction { head += " \(d)" }
        if r.kind == .frameBinary { return head + " \(r.payload.count) bytes" }
        let text = r.payloadText
        return text.isEmpty ? head : head + " " + text
    }

    // MARK: Divergence

    private func diverge(_ d: Divergence) -> WatchReplayEvent {
        divergence = d
        return .diverged(d)
    }

    private func extra(_ raw: TraceRecord, at index: Int) -> WatchReplayEvent {
        var actual = raw
        actual.payload = redactor.redact(payload: raw.payload, kind: raw.kind)
        return diverge(Divergence(record: index, time: actual.time, generation: nil, kind: .extra,
                                  expected: "(nothing: the trace has no such action here)", actual: describe(actual),
                                  context: context(before: index), rule: Self.rule(of: actual)))
    }

    private func unhandedAck(_ due: (ack: CommandAck, revision: UInt64), at index: Int, time: Moment) -> WatchReplayEvent {
        diverge(Divergence(record: index, time: time, generation: nil, kind: .extra,
                           expected: "(nothing: the trace hands no acknowledgement from the snapshot to the watch here)",
                           actual: "ack via snapshot \(WatchWire.ackJSON(due.ack).jsonText): the replayed SnapshotReceiver applied revision \(due.revision) carrying this ack, which goes to the WatchSender next",
                           context: context(before: index), rule: Self.c14))
    }

    private func unhandedSenderAck(_ ack: CommandAck, at index: Int, time: Moment) -> WatchReplayEvent {
        diverge(Divergence(record: index, time: time, generation: nil, kind: .extra,
                           expected: "(nothing: the trace hands the SnapshotSender no acknowledgement here)",
                           actual: "ack \(WatchWire.ackJSON(ack).jsonText): the replayed PhoneReceiver sent it, and the driver hands it to the SnapshotSender next",
                           context: context(before: index), rule: Self.c14))
    }

    private func undecodable(_ record: TraceRecord, at index: Int, because why: String) -> WatchReplayEvent {
        diverge(Divergence(record: index, time: record.time, generation: nil, kind: .undecodable,
                           expected: describe(record), actual: why, context: context(before: index), rule: nil))
    }

    private func notLaunched(_ record: TraceRecord, at index: Int, _ machine: String, _ side: String) -> WatchReplayEvent {
        undecodable(record, at: index, because: "no \(machine) to feed: the trace has no \(side) launch record before this input")
    }

    private func timerOffDeadline(_ record: TraceRecord, at index: Int, armed: Moment?, machine: String, rule: SpecRule) -> WatchReplayEvent {
        diverge(Divergence(record: index, time: record.time, generation: nil, kind: .different,
                           expected: describe(record),
                           actual: armed.map { "the replayed \(machine) is armed for \($0), not \(record.time)" }
                               ?? "the replayed \(machine) is not armed",
                           context: context(before: index), rule: rule))
    }

    private func context(before index: Int) -> [String] {
        let from = max(0, index - contextRecords)
        return (from..<min(index + 1, records.count)).map { "\($0 == index ? ">" : " ") #\($0) \(describe(records[$0]))" }
    }

    // MARK: Rules

    private static let c9 = SpecRule(section: "C9", summary: "snapshots: newest revision wins, full delivery at a phase change and every 15 s")
    private static let c14 = SpecRule(section: "C14", summary: "offline: queued under its number, drained in order, ack back in the next snapshot")

    /// The SPEC Part C rule a watch-channel record most likely concerns.
    public static func rule(of r: TraceRecord) -> SpecRule? {
        guard r.channel == .watch, let json = try? JSONValue(parsing: r.payload) else { return nil }
        switch r.kind {
        case .frameText:
            switch json["type"]?.stringValue {
            case "command": return SpecRule(section: "C3-C5", summary: "in order, duplicates below the expected number, early ones buffered")
            case "ack": return SpecRule(section: "C4", summary: "the watch drops strictly below the ack; equal is still expected")
            case "snapshot": return c9
            default: return nil
            }
        case .timerFired:
            return json["timer"]?.stringValue == "heartbeat" ? c9 : SpecRule(section: "C7", summary: "5 s stalled ack resends exactly the named command")
        case .input, .action:
            break
        default:
            return nil
        }
        let name = json["watch"]?.stringValue ?? "", side = json["side"]?.stringValue ?? ""
        switch (side, name) {
        case ("watch", "launch"): return SpecRule(section: "C8", summary: "a token per launch, the counter seeded from the clock and the floor")
        case ("watch", "confirm"): return SpecRule(section: "C1", summary: "confirmed at once from the caller's values")
        case ("watch", "persist"): return SpecRule(section: "C2/C8", summary: "the sequence floor persisted before the number goes on the wire")
        case ("watch", "send"):
            if json["resend"]?.boolValue == true { return SpecRule(section: "C7", summary: "5 s stalled ack resends exactly the named command") }
            return c14
        case ("watch", "tapRefused"), ("watch", "ack"): return c14
        case ("watch", "armTimer"), ("watch", "cancelTimer"): return SpecRule(section: "C7", summary: "5 s stalled ack resends exactly the named command")
        case ("watch", "diagnostic"): return SpecRule(section: "C4/C8", summary: "acks of another incarnation or outside the sent range are ignored")
        case ("watch", "snapshotApplied"), ("watch", "snapshotRejected"): return c9
        case ("phone", "execute"): return SpecRule(section: "C3/C5", summary: "executed in order; buffered commands drained in one batch")
        case ("phone", "rejected"): return SpecRule(section: "C11", summary: "session guard after the receiver advanced")
        case ("phone", "buffered"): return SpecRule(section: "C5", summary: "early commands buffered, drained in order in one batch")
        case ("phone", "discarded"):
            switch json["reason"]?.stringValue {
            case "duplicate": return SpecRule(section: "C4", summary: "below the expected number is a duplicate")
            case "retiredIncarnation": return SpecRule(section: "C8", summary: "a retired incarnation's late command is discarded")
            default: return SpecRule(section: "C5", summary: "early commands buffered, drained in order in one batch")
            }
        case ("phone", "resynchronised"), ("phone", "launch"): return SpecRule(section: "C8", summary: "a new token resynchronises; the old buffer is discarded")
        case ("phone", "sendAck"): return SpecRule(section: "C3", summary: "exclusive cumulative ack, one past the last executed")
        case ("phone", "persist"), ("phone", "revisionsExhausted"): return SpecRule(section: "C10", summary: "the revision counter survives restarts under its own key")
        case ("phone", "sendSnapshot"), ("phone", "armTimer"), ("phone", "cancelTimer"), ("phone", "update"), ("phone", "ack"), ("phone", "stop"):
            return c9
        case ("phone", "sessionStarted"), ("phone", "sessionEnded"): return SpecRule(section: "C11", summary: "session guard after the receiver advanced")
        default: return nil
        }
    }
}

/// A readable picture of the four WatchLink machines at a point of a watch replay.
public struct WatchReplaySnapshot: Sendable, CustomStringConvertible {
    /// The next record.
    public var position: Int
    /// The records in the trace.
    public var records: Int
    /// The time of the last input fed.
    public var time: Moment
    /// The watch's command sender, if launched.
    public var watch: WatchSender?
    /// Watch launches so far.
    public var watchLaunches: Int
    /// The watch's snapshot receiver.
    public var snapshotReceiver: SnapshotReceiver
    /// The phone's command receiver, if launched.
    public var phone: PhoneReceiver?
    /// The phone's snapshot sender, if launched.
    public var snapshotSender: SnapshotSender?
    /// Phone launches so far.
    public var phoneLaunches: Int

    /// Each machine's key state: the watch's incarnation, next sequence, acknowledgement, queue and stall
    /// deadline; the snapshot the watch holds; the phone's expected sequence, incarnation and buffer; the
    /// snapshot sender's revisions and heartbeat.
    public var description: String {
        var lines = ["record:    \(position) of \(records)", "time:      \(time)"]
        if let w = watch {
            let sent = w.queue.filter(\.sent).count
            lines.append("watch:     launch \(watchLaunches), incarnation \(w.incarnation), \(w.reachable ? "phone reachable" : "phone out of reach")")
            lines.append("           next sequence \(w.counter.next), acknowledged \(w.acknowledged)\(w.synchronised ? "" : " (nothing acknowledged in this launch yet)")")
            lines.append("           queue \(w.queue.count) (\(sent) on the wire)\(w.queue.first.map { ", first #\($0.envelope.sequence)" } ?? ""), stall deadline \(w.stallDeadline.map { "\($0)" } ?? "none")")
        } else {
            lines.append("watch:     not launched")
        }
        if let s = snapshotReceiver.current {
            lines.append("snapshot:  the watch holds revision \(s.revision) (\(s.state.phase.rawValue))\(s.ack.map { ", ack \($0.next)@\(String($0.incarnation.description.prefix(8)))" } ?? "")")
        } else {
            lines.append("snapshot:  the watch holds none")
        }
        if let p = phone {
            if let token = p.incarnation, let expected = p.expected {
                lines.append("phone:     expects #\(expected) from incarnation \(token)")
            } else {
                lines.append("phone:     no command received yet")
            }
            let buffered = p.buffer.keys.sorted()
            lines.append("           buffered \(buffered.count)\(buffered.isEmpty ? "" : " (" + buffered.prefix(8).map { "#\($0)" }.joined(separator: ", ") + (buffered.count > 8 ? ", ..." : "") + ")"), live session \(p.liveSession?.rawValue ?? "none"), \(p.retired.count) retired incarnation(s)")
        } else {
            lines.append("phone:     not launched")
        }
        if let s = snapshotSender {
            lines.append("snapshots: next revision \(s.revisions.next), last full \(s.lastFull.map { "\($0.revision)" } ?? "none"), heartbeat \(s.heartbeatDeadline.map { "at \($0)" } ?? "not armed")\(phoneLaunches > 1 ? ", phone launch \(phoneLaunches)" : "")")
        }
        return lines.joined(separator: "\n")
    }

    /// The same picture as JSON: `record`, `records`, `timeNs`, `watch` (null, or {launch, incarnation,
    /// reachable, nextSequence, acknowledged, synchronised, queued, onTheWire, stallDeadlineNs}),
    /// `snapshotHeld` (null or {revision, phase}), `phone` (null, or {incarnation, expected, buffered,
    /// liveSession, retired}), `snapshotSender` (null, or {nextRevision, lastFull, heartbeatNs}). 64-bit
    /// counters are decimal strings, as in the trace.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["record": .int(Int64(position)), "records": .int(Int64(records)), "timeNs": .int(time.nanoseconds)]
        if let w = watch {
            o["watch"] = [
                "launch": .int(Int64(watchLaunches)), "incarnation": .string(w.incarnation.description), "reachable": .bool(w.reachable),
                "nextSequence": .string(String(w.counter.next)), "acknowledged": .string(String(w.acknowledged)),
                "synchronised": .bool(w.synchronised), "queued": .int(Int64(w.queue.count)),
                "onTheWire": .int(Int64(w.queue.filter(\.sent).count)),
                "stallDeadlineNs": w.stallDeadline.map { .int($0.nanoseconds) } ?? .null,
            ]
        } else {
            o["watch"] = .null
        }
        o["snapshotHeld"] = snapshotReceiver.current.map { ["revision": .string(String($0.revision)), "phase": .string($0.state.phase.rawValue)] } ?? .null
        if let p = phone {
            o["phone"] = [
                "incarnation": p.incarnation.map { .string($0.description) } ?? .null,
                "expected": p.expected.map { .string(String($0)) } ?? .null,
                "buffered": .array(p.buffer.keys.sorted().map { .string(String($0)) }),
                "liveSession": p.liveSession.map { .string($0.rawValue) } ?? .null, "retired": .int(Int64(p.retired.count)),
            ]
        } else {
            o["phone"] = .null
        }
        if let s = snapshotSender {
            o["snapshotSender"] = [
                "nextRevision": .string(String(s.revisions.next)), "lastFull": s.lastFull.map { .string(String($0.revision)) } ?? .null,
                "heartbeatNs": s.heartbeatDeadline.map { .int($0.nanoseconds) } ?? .null,
            ]
        } else {
            o["snapshotSender"] = .null
        }
        return .object(o)
    }
}

extension WatchReplayer: InteractiveReplay {
    /// ``step()``'s outcome without its payloads.
    public func stepOne() -> ReplayStepOutcome {
        guard let event = step() else { return .atEnd }
        return event.stop.map { .stopped($0) } ?? .wentOn
    }
}
