public import ReplayCore
import RelayProtocol
public import Trace
public import WatchCapture
public import WatchLink

/// The phone's command receiver as the perturbation drives it: ``PhoneReceiver`` in production, a
/// deliberately broken variant in tests (the production type is not touched).
public protocol CommandReceiving: Sendable {
    /// Handles one input; returns the actions to perform, in order.
    mutating func handle(_ input: ReceiverInput) -> [ReceiverAction]
}

extension PhoneReceiver: CommandReceiving {}

/// Perturbation replay of a watch-channel trace.
///
/// The trace gives the script: the phone's launch (live session, initial workout state), the watch's
/// launches (the first, and every relaunch with its clock), every tap at its time, reachability changes,
/// session starts and ends, the end of the workout. The four WatchLink machines run again on virtual time
/// over a datagram channel that delivers every datagram once, 30 ms after it is sent (nothing crosses
/// while the phone is out of reach) — except where a fault says otherwise: drop, duplicate, reorder,
/// delay the n-th datagram sent, or relaunch the watch app right after it. After the script's end the
/// phone stays reachable and the run settles (up to 300 s) so the stall rule can resend what was lost.
///
/// Invariants, checked as the run goes and at its end:
/// - `exactly-once`: no command (incarnation, sequence) is consumed (executed or rejected by the session
///   guard) twice; at the end, every command tapped and not abandoned (still queued on the watch when
///   its app died) was consumed.
/// - `in-order`: within an incarnation, the first command consumed is the incarnation's first tap and
///   each next one is exactly one above the previous.
/// - `monotonic-snapshots`: within one watch launch, applied snapshot revisions never go down.
public final class WatchPerturbation: PerturbationReplay {
    /// The trace's header.
    public let header: TraceHeader
    /// The script read from the trace.
    let script: WatchScript
    /// The kinds seeded faults are drawn from.
    public static let kinds: [FaultKind] = [.drop, .duplicate, .reorder, .delay, .restart]
    /// The one-way latency of an unperturbed datagram.
    public static let latency: Duration = .milliseconds(30)
    /// How long a run may go on after the script's end to settle.
    public static let settle: Duration = .seconds(300)
    /// Makes the phone's command receiver for a phone launch; nil for ``PhoneReceiver``.
    public var receiverFactory: (@Sendable (PhoneLaunch) -> any CommandReceiving)?

    /// A perturbation replayer of a watch trace's `records`; throws when they hold no launches.
    public init(header: TraceHeader, records: [TraceRecord]) throws(PerturbationError) {
        self.header = header
        script = try WatchScript(records: records)
    }

    /// The number of taps in the script.
    public var tapCount: Int { script.events.filter { if case .tap = $0.event { true } else { false } }.count }

    /// Datagrams an unperturbed run sends (what seeded faults target).
    public private(set) lazy var baselineDeliveries: Int = run(faults: []).deliveries

    /// Runs with `faults`; `record` keeps the run's own records (through the watch capture codec).
    public func run(faults: [Fault], record: Bool = false) -> PerturbedRun {
        run(faults: faults, script: script, record: record)
    }

    func run(faults: [Fault], script: WatchScript, record: Bool) -> PerturbedRun {
        var engine = WatchPerturbationEngine(script: script, faults: faults, seed: header.seed, record: record,
                                             receiverFactory: receiverFactory)
        engine.run()
        return PerturbedRun(seed: nil, faults: faults, violation: engine.violation, deliveries: engine.sent, records: engine.records)
    }

    /// Shrinks a failing run: the fault list by delta debugging to a 1-minimal list that still breaks the
    /// same invariant, then the script's events (taps, reachability changes, relaunches, session changes,
    /// the end of the workout) the same way with the faults kept, the script ending at its last kept
    /// event; returns the run of the result with its records, and the number of taps left.
    public func shrink(_ failing: PerturbedRun) -> (run: PerturbedRun, taps: Int) {
        guard let broken = failing.violation?.invariant else { return (failing, tapCount) }
        let faults = DeltaDebugging.minimize(failing.faults) {
            run(faults: $0, script: script, record: false).violation?.invariant == broken
        }
        var kept = Array(script.events.indices)
        if run(faults: faults, script: script.keeping(Set(kept)), record: false).violation?.invariant == broken {
            kept = DeltaDebugging.minimize(kept, budget: 600) { keep in
                run(faults: faults, script: script.keeping(Set(keep)), record: false).violation?.invariant == broken
            }
        }
        let shrunk = script.keeping(Set(kept))
        var r = run(faults: faults, script: shrunk, record: true)
        if r.violation?.invariant != broken { r = run(faults: faults, script: script, record: true) }
        r.seed = failing.seed
        let taps = r.records.filter { if case .watch(.tap)? = try? WatchRecordCodec.decodeInput($0) { true } else { false } }.count
        return (r, taps)
    }
}

/// What the trace says happened from outside the machines.
struct WatchScript: Sendable {
    enum Event: Sendable {
        case tap(WatchCommand, ConfirmationContext?)
        case reachability(Bool)
        case relaunch(WatchLaunch)
        case session(ReceiverInput)
        case stop
    }

    var phone: PhoneLaunch
    var watch: WatchLaunch
    var initialState: WorkoutState?
    var events: [(time: Moment, event: Event)] = []
    var end: Moment

    init(records: [TraceRecord]) throws(PerturbationError) {
        var phone: PhoneLaunch?
        var watch: WatchLaunch?
        var state: WorkoutState?
        var events: [(time: Moment, event: Event)] = []
        var end = Moment.zero
        for (i, r) in records.enumerated() where r.channel == .watch {
            end = max(end, r.time)
            guard r.kind == .input else { continue }
            let input: WatchChannelInput?
            do { input = try WatchRecordCodec.decodeInput(r) } catch {
                throw PerturbationError(message: "record #\(i): \(error)")
            }
            switch input {
            case .phoneLaunched(let l)?:
                if phone == nil { phone = l }
            case .watchLaunched(let l)?:
                if watch == nil { watch = l } else { events.append((r.time, .relaunch(l))) }
            case .watch(.tap(let c, let confirm))?:
                events.append((r.time, .tap(c, confirm)))
            case .watch(.reachability(let b))?:
                events.append((r.time, .reachability(b)))
            case .phone(.sessionStarted(let s))?:
                events.append((r.time, .session(.sessionStarted(s))))
            case .phone(.sessionEnded(let s))?:
                events.append((r.time, .session(.sessionEnded(s))))
            case .snapshotSender(.update(let s))?:
                if state == nil { state = s }
            case .snapshotSender(.stop)?:
                events.append((r.time, .stop))
            default:
                continue
            }
        }
        guard let phone, let watch else {
            throw PerturbationError(message: "the trace has no watch or phone launch record on channel watch: it is not a watch-channel trace (relaytrace simulate --scenario watch-offline writes one)")
        }
        self.phone = phone
        self.watch = watch
        initialState = state
        self.events = events
        self.end = end
    }

    /// The script with only the events at these indices, ending at the last of them.
    func keeping(_ keep: Set<Int>) -> WatchScript {
        var s = self
        s.events = events.indices.filter { keep.contains($0) }.map { events[$0] }
        s.end = s.events.last?.time ?? .zero
        return s
    }
}

/// One perturbed run of the watch channel.
struct WatchPerturbationEngine {
    private enum Event {
        case script(Int)
        case toPhone(CommandEnvelope)
        case ackToWatch(CommandAck)
        case snapshotToWatch(WorkoutSnapshot)
        case stall(Moment)
        case heartbeat(Moment)
        case restart
        case settled
    }

    let script: WatchScript
    private(set) var violation: InvariantViolation?
    private(set) var sent = 0
    private(set) var records: [TraceRecord] = []
    private let record: Bool
    private var faults: [Int: Fault] = [:]
    private var queue = TimedQueue<Event>()
    private var now = Moment.zero
    private var rng: SeededRandom
    private var watch: WatchSender
    private var snapshots = SnapshotReceiver()
    private var phone: any CommandReceiving
    private var snapshotSender: SnapshotSender
    private var state: WorkoutState?
    private var watchFloor: UInt64?
    private var reachable = true
    private var held: (Event, Moment)?
    // Invariant bookkeeping.
    private var tapped: [IncarnationToken: [UInt64]] = [:]
    private var abandoned: [IncarnationToken: Set<UInt64>] = [:]
    private var consumed: [IncarnationToken: Set<UInt64>] = [:]
    private var lastConsumed: [IncarnationToken: UInt64] = [:]
    private var lastRevision: UInt64?

    init(script: WatchScript, faults: [Fault], seed: UInt64, record: Bool,
         receiverFactory: (@Sendable (PhoneLaunch) -> any CommandReceiving)?) {
        self.script = script
        self.record = record
        for f in faults where self.faults[f.target] == nil { self.faults[f.target] = f }
        rng = SeededRandom(seed: seed ^ 0x5741_5443_4850_5254)
        let p = script.phone
        phone = receiverFactory?(p) ?? PhoneReceiver(liveSession: p.liveSession, checkpoint: p.checkpoint)
        snapshotSender = SnapshotSender(clockMilliseconds: p.clockMilliseconds, storedFloor: p.revisionFloor)
        state = script.initialState
        let w = script.watch
        watchFloor = w.storedFloor
        reachable = w.reachable
        watch = WatchSender(clockMilliseconds: w.clockMilliseconds, storedFloor: w.storedFloor, rng: &rng, reachable: w.reachable)
    }

    mutating func run() {
        log(.phoneLaunched(script.phone))
        log(.watchLaunched(WatchLaunch(clockMilliseconds: script.watch.clockMilliseconds, storedFloor: script.watch.storedFloor,
                                       reachable: reachable, incarnation: watch.incarnation)))
        if let state { feedSnapshotSender(.update(state)) }
        for i in script.events.indices { queue.push(.script(i), at: script.events[i].time) }
        queue.push(.settled, at: script.end)
        let horizon = script.end + WatchPerturbation.settle
        var settling = false
        while violation == nil, let (t, e) = queue.pop() {
            if t > horizon { break }
            if settling, watch.queue.isEmpty { break }
            now = t
            if case .settled = e { settling = true }
            dispatch(e)
        }
        guard violation == nil else { return }
        // At the end: every command tapped and not abandoned was consumed.
        for (token, seqs) in tapped {
            let gone = abandoned[token] ?? [], done = consumed[token] ?? []
            if let missing = seqs.first(where: { !gone.contains($0) && !done.contains($0) }) {
                fail("exactly-once", "command #\(missing)@\(String(token.description.prefix(8))) was tapped, never abandoned, and never executed (the watch's queue holds \(watch.queue.count))")
                return
            }
        }
    }

    // MARK: Events

    private mutating func dispatch(_ e: Event) {
        switch e {
        case .script(let i):
            switch script.events[i].event {
            case .tap(let c, let confirm):
                feedWatch(.tap(c, confirm: confirm))
            case .reachability(let b):
                reachable = b
                feedWatch(.reachability(b))
            case .relaunch(let l):
                relaunch(clock: l.clockMilliseconds)
            case .session(let input):
                feedPhone(input)
            case .stop:
                feedSnapshotSender(.stop)
            }
        case .settled:
            if !reachable {
                reachable = true
                feedWatch(.reachability(true))
            }
        case .toPhone(let c):
            guard reachable else { return }
            feedPhone(.command(c))
        case .ackToWatch(let ack):
            guard reachable else { return }
            feedWatch(.ackReceived(ack))
        case .snapshotToWatch(let s):
            guard reachable else { return }
            log(.snapshotReceived(s))
            let outcome = snapshots.receive(s)
            if record { records.append(WatchRecordCodec.record(.snapshotReceiver(outcome), at: now)) }
            if case .applied(let applied) = outcome {
                if let last = lastRevision, applied.revision < last {
                    fail("monotonic-snapshots", "applied revision \(applied.revision) after \(last) in the same watch launch")
                }
                lastRevision = applied.revision
                if let ack = applied.ack {
                    log(.ackFromSnapshot(ack))
                    performWatch(watch.handle(.ackReceived(ack), at: now))
                }
            }
        case .stall(let deadline):
            guard watch.stallDeadline == deadline else { return }
            feedWatch(.timerFired(.stalledAck))
        case .heartbeat(let deadline):
            guard snapshotSender.heartbeatDeadline == deadline else { return }
            feedSnapshotSender(.timerFired(.heartbeat))
        case .restart:
            let clock = script.phone.clockMilliseconds + UInt64(max(0, now.nanoseconds / 1_000_000))
            relaunch(clock: clock)
        }
    }

    /// The watch app dies and launches again: its queue and its snapshot are gone, the floor survives.
    private mutating func relaunch(clock: UInt64) {
        let old = watch.incarnation
        abandoned[old, default: []].formUnion(watch.queue.map(\.envelope.sequence))
        watch = WatchSender(clockMilliseconds: clock, storedFloor: watchFloor, rng: &rng, reachable: reachable)
        snapshots = SnapshotReceiver()
        lastRevision = nil
        log(.watchLaunched(WatchLaunch(clockMilliseconds: clock, storedFloor: watchFloor, reachable: reachable, incarnation: watch.incarnation)))
    }

    // MARK: Machines

    private mutating func feedWatch(_ input: WatchInput) {
        log(.watch(input))
        let actions = watch.handle(input, at: now)
        if case .tap = input, actions.contains(where: { if case .persist = $0 { true } else { false } }),
           let c = watch.queue.last?.envelope {
            tapped[c.incarnation, default: []].append(c.sequence)
        }
        performWatch(actions)
    }

    private mutating func performWatch(_ actions: [WatchAction]) {
        if record { for a in actions { records.append(WatchRecordCodec.record(.watch(a), at: now)) } }
        for a in actions {
            switch a {
            case .persist(let r):
                watchFloor = r.value
            case .send(let c, _):
                transmit(.toPhone(c))
            case .armTimer(.stalledAck, let deadline):
                queue.push(.stall(deadline), at: deadline)
            case .confirm, .tapRefused, .cancelTimer, .diagnostic:
                continue
            }
        }
    }

    private mutating func feedPhone(_ input: ReceiverInput) {
        log(.phone(input))
        let actions = phone.handle(input)
        if record { for a in actions { records.append(WatchRecordCodec.record(.phone(a), at: now)) } }
        for a in actions {
            switch a {
            case .execute(let c):
                consume(c)
                execute(c.command.payload)
            case .rejected(let c, _):
                consume(c)
            case .sendAck(let ack):
                transmit(.ackToWatch(ack))
                feedSnapshotSender(.ack(ack))
            case .buffered, .discarded, .resynchronised:
                continue
            }
        }
    }

    private mutating func consume(_ c: CommandEnvelope) {
        let token = c.incarnation, tag = "#\(c.sequence)@\(String(token.description.prefix(8)))"
        if consumed[token]?.contains(c.sequence) == true {
            return fail("exactly-once", "command \(tag) consumed a second time")
        }
        consumed[token, default: []].insert(c.sequence)
        if let last = lastConsumed[token] {
            if c.sequence != last + 1 { fail("in-order", "command \(tag) consumed right after #\(last)") }
        } else if let first = tapped[token]?.first, c.sequence != first {
            fail("in-order", "command \(tag) consumed first in its incarnation, whose first tap was #\(first)")
        }
        lastConsumed[token] = c.sequence
    }

    /// The phone writes the command's effect and publishes the new state (as the simulation does).
    private mutating func execute(_ payload: CommandPayload) {
        guard var s = state else { return }
        let wall = script.phone.clockMilliseconds + UInt64(max(0, now.nanoseconds / 1_000_000))
        s.elapsedSeconds = now.nanoseconds / 1_000_000_000
        switch payload {
        case .completeSet(let entry):
            let e = Int(entry.exerciseIndex)
            if s.exercises.indices.contains(e) {
                s.exercises[e].completedSets = min(s.exercises[e].plannedSets, s.exercises[e].completedSets + 1)
                if s.exercises[e].completedSets == s.exercises[e].plannedSets {
                    s.phase = .betweenExercises
                    s.currentExerciseIndex = min(UInt32(s.exercises.count - 1), entry.exerciseIndex + 1)
                    s.restEndsAtMilliseconds = nil
                } else {
                    s.phase = .resting
                    s.currentExerciseIndex = entry.exerciseIndex
                    s.restEndsAtMilliseconds = wall + 90_000
                }
            }
        case .adjustRest(let delta):
            if let r = s.restEndsAtMilliseconds {
                s.restEndsAtMilliseconds = delta >= 0 ? r &+ UInt64(delta) &* 1000 : r - min(r, UInt64(delta.magnitude) &* 1000)
            }
        case .skipExercise(let i):
            s.currentExerciseIndex = i
            s.phase = .betweenExercises
        case .endWorkout:
            s.phase = .finished
            s.restEndsAtMilliseconds = nil
        }
        state = s
        feedSnapshotSender(.update(s))
    }

    private mutating func feedSnapshotSender(_ input: SnapshotSenderInput) {
        log(.snapshotSender(input))
        let actions = snapshotSender.handle(input, at: now)
        if record { for a in actions { records.append(WatchRecordCodec.record(.snapshotSender(a), at: now)) } }
        for a in actions {
            switch a {
            case .send(let s, _):
                transmit(.snapshotToWatch(s))
            case .armTimer(.heartbeat, let deadline):
                queue.push(.heartbeat(deadline), at: deadline)
            case .persist, .cancelTimer, .revisionsExhausted:
                continue
            }
        }
    }

    // MARK: The channel

    /// Datagram `sent` goes out: delivered after ``WatchPerturbation/latency`` unless a fault targets it.
    private mutating func transmit(_ e: Event) {
        guard reachable else { return }
        let k = sent
        sent += 1
        let at = now + WatchPerturbation.latency
        switch faults[k] {
        case nil:
            queue.push(e, at: at)
        case let f?:
            switch f.kind {
            case .drop:
                break
            case .duplicate:
                queue.push(e, at: at)
                queue.push(e, at: at + f.amount)
            case .delay:
                queue.push(e, at: at + f.amount)
            case .reorder:
                if let (h, t) = held { queue.push(h, at: t) }
                held = (e, at)
                return
            case .restart:
                queue.push(e, at: at)
                queue.push(.restart, at: now + .nanoseconds(1))
            case .kill:
                queue.push(e, at: at)
            }
        }
        if let (h, _) = held {
            // The held datagram arrives right after this one.
            held = nil
            queue.push(h, at: at)
        }
    }

    private mutating func fail(_ invariant: String, _ detail: String) {
        if violation == nil { violation = InvariantViolation(invariant: invariant, time: now, detail: detail) }
    }

    private mutating func log(_ input: WatchChannelInput) {
        if record { records.append(WatchRecordCodec.record(input, at: now)) }
    }
}
