import RelayProtocol
import Testing
import WatchLink

/// SPEC C2-C8, C14 together: a seeded lossy, duplicating, reordering channel between the machines, over
/// thousands of commands, with out-of-range stretches, failed sends and watch restarts (clock sometimes
/// going backwards), on virtual time. Invariant: every command executes at most once, in tap order; every
/// command of a launch that lived until its queue drained executes exactly once; no number ever names two
/// commands; the watch's applied snapshot revisions never go down.
@Suite struct ExactlyOncePropertyTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func everyCommandExecutesExactlyOnceInOrder(seed: UInt64) throws {
        var sim = Simulation(seed: seed)
        sim.run(commands: 2_000)
        let report = sim.report
        #expect(report.duplicatesExecuted.isEmpty, "seed \(seed): executed twice: \(report.duplicatesExecuted.prefix(5))")
        #expect(report.outOfOrder.isEmpty, "seed \(seed): out of order: \(report.outOfOrder.prefix(5))")
        #expect(report.missing.isEmpty, "seed \(seed): never executed: \(report.missing.prefix(5))")
        #expect(report.reusedNumbers.isEmpty, "seed \(seed): a number named two commands: \(report.reusedNumbers.prefix(5))")
        #expect(report.revisionWentDown == false, "seed \(seed)")
        #expect(report.restarts >= 2, "seed \(seed): the run exercised restarts")
        #expect(report.executed + report.abandoned == 2_000, "seed \(seed): executed or died with the app")
        #expect(report.executed > 1_200, "seed \(seed): most commands were not abandoned")
        #expect(report.resends > 0 && report.dropped > 0 && report.duplicated > 0)
    }

    @Test func anInclusiveAckWouldBeCaught() {
        // The property is not vacuous: treating the acknowledgement as inclusive (dropping the command it
        // names) loses commands, and the invariant sees it.
        var sim = Simulation(seed: 9, inclusiveAckBug: true)
        sim.run(commands: 300)
        #expect(!sim.report.missing.isEmpty)
    }
}

/// The discrete-event simulation behind the property test.
struct Simulation {
    struct Report {
        var duplicatesExecuted: [Int] = []
        var outOfOrder: [Int] = []
        var missing: [Int] = []
        var reusedNumbers: [UInt64] = []
        var revisionWentDown = false
        var restarts = 0
        var executed = 0
        var abandoned = 0
        var resends = 0
        var dropped = 0
        var duplicated = 0
    }

    enum Event {
        case tap(Int)
        case toPhone(CommandEnvelope)
        case ackToWatch(CommandAck, launch: Int)
        case snapshotToWatch(WorkoutSnapshot, launch: Int)
        case watchStall(launch: Int, deadline: Moment)
        case heartbeat(deadline: Moment)
        case reachability(Bool)
        case restart
    }

    var rng: SeededRandom
    let inclusiveAckBug: Bool
    var now: Moment = .zero
    var queue: [(time: Moment, order: UInt64, event: Event)] = []   // a binary min-heap
    var order: UInt64 = 0

    var clockMs: UInt64 = 1_718_000_000_000
    var storedFloor: UInt64?
    var watch: WatchSender
    var launch = 0
    var reachable = true
    var snapshots = SnapshotReceiver()
    var phone = PhoneReceiver(liveSession: live)
    var snapshotSender: SnapshotSender

    var commandOfSequence: [UInt64: Int] = [:]
    var abandoned: Set<Int> = []
    var executedIds: [Int] = []
    var lastRevision: UInt64 = 0
    var report = Report()

    init(seed: UInt64, inclusiveAckBug: Bool = false) {
        rng = SeededRandom(seed: seed)
        self.inclusiveAckBug = inclusiveAckBug
        watch = WatchSender(clockMilliseconds: clockMs, storedFloor: nil, rng: &rng, reachable: true)
        snapshotSender = SnapshotSender(clockMilliseconds: clockMs, storedFloor: nil)
    }

    mutating func run(commands: Int) {
        var t = Moment.zero
        for id in 0..<commands {
            t = t + .milliseconds(Int64(draw(2_000)))
            schedule(.tap(id), at: t)
            if draw(100) == 0 {   // ~1 % of taps begin an out-of-range stretch
                schedule(.reachability(false), at: t + .milliseconds(1))
                schedule(.reachability(true), at: t + .seconds(Int64(10 + draw(50))))
            }
            if draw(400) == 0 { schedule(.restart, at: t + .milliseconds(3)) }
        }
        // After the last tap the phone is back in range for good and nobody restarts the app.
        let settle = t + .seconds(70)
        schedule(.reachability(true), at: settle)
        _ = handle(snapshotSender.handle(.update(workout(.lifting)), at: .zero))
        while let next = pop() {
            now = max(now, next.time)
            if now > settle + .seconds(3_600) { break }
            if now > settle, watch.queue.isEmpty, !hasPendingTaps { break }
            process(next.event)
        }
        finishReport(commands: commands)
    }

    mutating func draw(_ bound: UInt64) -> UInt64 { rng.next(upperBound: bound) }

    var hasPendingTaps: Bool { queue.contains { if case .tap = $0.event { true } else { false } } }

    // MARK: Events

    mutating func process(_ event: Event) {
        switch event {
        case .tap(let id):
            let command = WatchCommand(session: live, payload: .completeSet(
                SetEntry(exerciseIndex: 0, setOffset: UInt32(id % 5), weightGrams: 50_000, reps: Int64(id))))
            watchActions(watch.handle(.tap(command, confirm: nil), at: now))
        case .toPhone(let envelope):
            let actions = phone.handle(.command(envelope))
            for a in actions {
                switch a {
                case .execute(let c):
                    guard case .completeSet(let entry) = c.command.payload else { continue }
                    executedIds.append(Int(entry.reps ?? -1))
                case .sendAck(let ack):
                    var reported = ack
                    if inclusiveAckBug { reported.next += 1 }
                    transmit(.ackToWatch(reported, launch: launch))
                    _ = handle(snapshotSender.handle(.ack(reported), at: now))
                default: break
                }
            }
        case .ackToWatch(let ack, let l):
            guard l == launch else { return }
            watchActions(watch.handle(.ackReceived(ack), at: now))
        case .snapshotToWatch(let s, let l):
            guard l == launch else { return }
            if case .applied(let applied) = snapshots.receive(s) {
                if applied.revision < lastRevision { report.revisionWentDown = true }
                lastRevision = applied.revision
                if let ack = applied.ack { watchActions(watch.handle(.ackReceived(ack), at: now)) }
            }
        case .watchStall(let l, let deadline):
            guard l == launch, watch.stallDeadline == deadline else { return }
            watchActions(watch.handle(.timerFired(.stalledAck), at: now))
        case .heartbeat(let deadline):
            guard snapshotSender.heartbeatDeadline == deadline else { return }
            _ = handle(snapshotSender.handle(.timerFired(.heartbeat), at: now))
        case .reachability(let r):
            reachable = r
            watchActions(watch.handle(.reachability(r), at: now))
        case .restart:
            // The watch app dies: its queue is gone; the floor survives. The clock may have gone back.
            report.restarts += 1
            for q in watch.queue {
                if case .completeSet(let entry) = q.envelope.command.payload { abandoned.insert(Int(entry.reps ?? -1)) }
            }
            launch += 1
            let elapsed = UInt64(now.nanoseconds / 1_000_000)
            let skew = draw(2) == 0 ? 0 : draw(120_000)
            let clock = clockMs + elapsed - min(skew, clockMs + elapsed)
            watch = WatchSender(clockMilliseconds: clock, storedFloor: storedFloor, rng: &rng, reachable: reachable)
            snapshots = SnapshotReceiver()
            lastRevision = 0
        }
    }

    mutating func watchActions(_ actions: [WatchAction]) {
        for a in actions {
            switch a {
            case .persist(let r):
                storedFloor = r.value
            case .send(let c, let resend):
                if resend { report.resends += 1 }
                if case .completeSet(let entry) = c.command.payload {
                    let id = Int(entry.reps ?? -1)
                    if let known = commandOfSequence[c.sequence], known != id { report.reusedNumbers.append(c.sequence) }
                    commandOfSequence[c.sequence] = id
                }
                if draw(20) == 0 {
                    // The transport refuses the send: the watch re-queues it under its number.
                    let seq = c.sequence
                    watchActions(watch.handle(.sendFailed(sequence: seq), at: now))
                } else {
                    transmit(.toPhone(c))
                }
            case .armTimer(.stalledAck, let deadline):
                schedule(.watchStall(launch: launch, deadline: deadline), at: deadline)
            default: break
            }
        }
    }

    /// Snapshot-sender actions: sends go over the lossy channel; heartbeats are scheduled.
    mutating func handle(_ actions: [SnapshotSenderAction]) -> Int {
        for a in actions {
            switch a {
            case .send(let s, _): transmit(.snapshotToWatch(s, launch: launch))
            case .armTimer(.heartbeat, let deadline): schedule(.heartbeat(deadline: deadline), at: deadline)
            default: break
            }
        }
        return actions.count
    }

    /// The channel: 15 % lost, 8 % duplicated, each copy delayed 5-800 ms (so messages reorder); nothing
    /// crosses while the phone is out of range.
    mutating func transmit(_ event: Event) {
        guard reachable, draw(100) >= 15 else { report.dropped += 1; return }
        let copies = draw(100) < 8 ? 2 : 1
        if copies == 2 { report.duplicated += 1 }
        for _ in 0..<copies {
            schedule(event, at: now + .milliseconds(Int64(5 + draw(795))))
        }
    }

    // MARK: Invariants

    mutating func finishReport(commands: Int) {
        var seen: Set<Int> = []
        var last = -1
        for id in executedIds {
            if !seen.insert(id).inserted { report.duplicatesExecuted.append(id) }
            if id <= last { report.outOfOrder.append(id) }
            last = max(last, id)
        }
        report.executed = executedIds.count
        report.abandoned = abandoned.subtracting(seen).count
        for id in 0..<commands where !seen.contains(id) {
            // Still queued on the watch when the app died (the queue dies with it): allowed; nothing else.
            if abandoned.contains(id) { continue }
            report.missing.append(id)
        }
    }

    // MARK: Heap

    mutating func schedule(_ event: Event, at time: Moment) {
        order += 1
        queue.append((time, order, event))
        var i = queue.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            queue.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (time: Moment, event: Event)? {
        guard !queue.isEmpty else { return nil }
        queue.swapAt(0, queue.count - 1)
        let top = queue.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < queue.count, less(l, m) { m = l }
            if r < queue.count, less(r, m) { m = r }
            if m == i { break }
            queue.swapAt(i, m)
            i = m
        }
        return (top.time, top.event)
    }

    func less(_ a: Int, _ b: Int) -> Bool {
        (queue[a].time, queue[a].order) < (queue[b].time, queue[b].order)
    }
}
