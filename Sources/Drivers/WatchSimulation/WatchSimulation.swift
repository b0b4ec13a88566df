public import RelayProtocol
public import WatchCapture
import WatchLink

/// The datagram channel between watch and phone: seeded loss, duplication and delay (delays overlap, so
/// datagrams reorder), and stretches when the phone is out of reach (nothing crosses).
public struct WatchChannelFaults: Sendable, Hashable {
    /// Percent of datagrams lost.
    public var lossPercent: UInt64 = 10
    /// Percent of datagrams delivered twice.
    public var duplicatePercent: UInt64 = 5
    /// Shortest one-way delay.
    public var minDelay: Duration = .milliseconds(5)
    /// Longest one-way delay.
    public var maxDelay: Duration = .milliseconds(400)
    /// Defaults: 10 % lost, 5 % duplicated, 5-400 ms.
    public init() {}
}

/// A watch simulation's set-up: the seed, how long, the workout's pace, and the scenario's events.
public struct WatchSimulationSetup: Sendable {
    /// The seed of everything (tap pace, channel faults, incarnation tokens, set IDs).
    public var seed: UInt64
    /// How long to run (virtual time).
    public var duration: Duration
    /// The channel's faults.
    public var channel = WatchChannelFaults()
    /// Stretches when the phone is out of reach, as (from, to) offsets from the start.
    public var outOfReach: [(from: Duration, to: Duration)] = []
    /// Watch app relaunches: when, and how far the watch's wall clock was set back at the relaunch.
    public var watchRestarts: [(at: Duration, clockSetBack: Duration)] = []
    /// How many exercises of ``SampleWorkout`` the user does.
    public var exercises = 5
    /// The time between two set taps (jittered by 25 %): a set plus its rest, at a human pace.
    public var setPace: Duration = .seconds(80)
    /// The wall clock at the start, ms since the epoch (2026-01-15T12:00:00Z, as ``Trace/TraceWriterOptions/simulatedWallClockStart``).
    public var wallClockStartMilliseconds: UInt64 = 1_768_478_400_000

    /// A set-up with the defaults above.
    public init(seed: UInt64, duration: Duration) {
        self.seed = seed
        self.duration = duration
    }
}

/// What a watch simulation did.
public struct WatchSimulationResult: Sendable {
    /// Counters: taps, confirmed, sends, resends, executed, buffered, duplicatesDiscarded, resyncs,
    /// snapshotsSent, snapshotsApplied, snapshotsRejected, datagramsLost, datagramsDuplicated, restarts,
    /// abandoned (commands still queued on the watch when its app died).
    public var counts: [String: Int]
    /// The set IDs of the `.completeSet` commands the phone executed, in execution order.
    public var executedSetIds: [String]
    /// The set IDs the user tapped, in tap order.
    public var tappedSetIds: [String]
    /// The set IDs of commands still queued on the watch when its app died (they may or may not have
    /// reached the phone before; the ones that did not are lost with the app, as SPEC C14 allows).
    public var abandonedSetIds: [String]
    /// The virtual time at the end.
    public var end: Moment
}

/// The watch and the phone in one process on virtual time: a `WatchSender` and `SnapshotReceiver` on
/// the wrist, a `PhoneReceiver` and `SnapshotSender` on the phone, a seeded lossy, duplicating,
/// reordering datagram channel between them, and a lifter tapping sets at a human pace. Every input and
/// action goes through a ``WatchChannelCapture``. Same set-up, same seed: same events, same trace bytes.
public struct WatchSimulation {
    /// The set-up.
    public let setup: WatchSimulationSetup
    /// The virtual time.
    public private(set) var now: Moment = .zero

    private enum Event {
        case tap(Int)
        case toPhone(CommandEnvelope)
        case ackToWatch(CommandAck)
        case snapshotToWatch(WorkoutSnapshot)
        case stallTimer(Moment)
        case heartbeat(Moment)
        case reachability(Bool)
        case restartWatch(clockSetBack: Duration)
        case stopPhone
    }

    private struct PlannedTap {
        var command: WatchCommand
        var confirm: ConfirmationContext?
    }

    private var rng: SeededRandom
    private var events = TimedQueue<Event>()
    private let capture: WatchChannelCapture?
    private var watch: WatchSender
    private var snapshots = SnapshotReceiver()
    private var phone: PhoneReceiver
    private var snapshotSender: SnapshotSender
    private var state: WorkoutState
    private var watchFloor: UInt64?
    private var reachable = true
    private var plan: [PlannedTap] = []
    private var counts: [String: Int] = [:]
    private var executed: [String] = []
    private var tapped: [String] = []
    private var abandoned: [String] = []
    private let session: SessionID
    private let names: [String]

    /// A simulation of `setup`, capturing into `capture` (nil: no trace).
    public init(setup: WatchSimulationSetup, capture: WatchChannelCapture?) {
        self.setup = setup
        self.capture = capture
        rng = SeededRandom(seed: setup.seed)
        session = SessionID(rng.uuidString())
        let chosen = Array(SampleWorkout.exercises.prefix(max(1, min(setup.exercises, SampleWorkout.exercises.count))))
        names = chosen.map(\.name)
        var progress: [ExerciseProgress] = []
        for e in chosen {
            var ids: [String] = []
            for _ in 0..<e.sets { ids.append(rng.uuidString()) }
            progress.append(ExerciseProgress(plannedSets: e.sets, completedSets: 0, workingWeightGrams: e.grams, targetReps: e.reps, setIds: ids))
        }
        state = WorkoutState(sessionId: session, phase: .warmUp, currentExerciseIndex: 0, elapsedSeconds: 0,
                             restEndsAtMilliseconds: nil, exercises: progress)
        phone = PhoneReceiver(liveSession: session)
        snapshotSender = SnapshotSender(clockMilliseconds: setup.wallClockStartMilliseconds, storedFloor: nil)
        watch = WatchSender(clockMilliseconds: setup.wallClockStartMilliseconds, storedFloor: nil, rng: &rng, reachable: true)
    }

    /// Runs to the end of the set-up's duration.
    public mutating func run() -> WatchSimulationResult {
        let end = Moment.zero + setup.duration
        // Launches: the phone (with the live session), then the watch.
        capture?.record(.phoneLaunched(PhoneLaunch(clockMilliseconds: setup.wallClockStartMilliseconds, revisionFloor: nil,
                                                   liveSession: session, checkpoint: nil)), at: now)
        capture?.record(.watchLaunched(WatchLaunch(clockMilliseconds: setup.wallClockStartMilliseconds, storedFloor: nil,
                                                   reachable: true, incarnation: watch.incarnation)), at: now)
        feedSnapshotSender(.update(state))
        schedulePlan()
        for stretch in setup.outOfReach {
            events.push(.reachability(false), at: .zero + stretch.from)
            events.push(.reachability(true), at: .zero + stretch.to)
        }
        for r in setup.watchRestarts { events.push(.restartWatch(clockSetBack: r.clockSetBack), at: .zero + r.at) }
        while let (t, event) = events.pop() {
            guard t <= end else { break }
            now = t
            dispatch(event)
        }
        now = max(now, end)
        return WatchSimulationResult(counts: counts, executedSetIds: executed, tappedSetIds: tapped, abandonedSetIds: abandoned, end: now)
    }

    // MARK: The lifter

    /// Every planned set, in order, at a jittered human pace; two rest adjustments; the end of the workout.
    private mutating func schedulePlan() {
        var t = Moment.zero + .seconds(20)
        for (e, progress) in state.exercises.enumerated() {
            for offset in 0..<Int(progress.plannedSets) {
                let entry = SetEntry(exerciseIndex: UInt32(e), setOffset: UInt32(offset), setId: progress.setIds[offset],
                                     weightGrams: progress.workingWeightGrams, reps: progress.targetReps)
                plan.append(PlannedTap(command: WatchCommand(session: session, payload: .completeSet(entry)),
                                       confirm: ConfirmationContext(exerciseName: names[e], setsOnExercise: progress.plannedSets)))
                events.push(.tap(plan.count - 1), at: t)
                if plan.count == 3 || plan.count == 9 {
                    // The lifter wants 30 s more rest after this set.
                    plan.append(PlannedTap(command: WatchCommand(session: session, payload: .adjustRest(deltaSeconds: 30)), confirm: nil))
                    events.push(.tap(plan.count - 1), at: t + .seconds(12))
                }
                t = t + rng.jittered(setup.setPace, fraction: 0.25)
            }
        }
        plan.append(PlannedTap(command: WatchCommand(session: session, payload: .endWorkout), confirm: nil))
        events.push(.tap(plan.count - 1), at: t)
        events.push(.stopPhone, at: t + .seconds(60))
    }

    // MARK: Dispatch

    private mutating func dispatch(_ event: Event) {
        switch event {
        case .tap(let i):
            let p = plan[i]
            count("taps")
            if case .completeSet(let entry) = p.command.payload, let id = entry.setId { tapped.append(id) }
            feedWatch(.tap(p.command, confirm: p.confirm))
        case .toPhone(let c):
            guard reachable else { return count("datagramsLost") }
            feedPhone(.command(c))
        case .ackToWatch(let ack):
            guard reachable else { return count("datagramsLost") }
            feedWatch(.ackReceived(ack))
        case .snapshotToWatch(let s):
            guard reachable else { return count("datagramsLost") }
            capture?.record(.snapshotReceived(s), at: now)
            let outcome = snapshots.receive(s)
            capture?.record(.snapshotReceiver(outcome), at: now)
            if case .applied(let applied) = outcome {
                count("snapshotsApplied")
                if let ack = applied.ack {
                    capture?.record(.ackFromSnapshot(ack), at: now)
                    performWatch(watch.handle(.ackReceived(ack), at: now))
                }
            } else {
                count("snapshotsRejected")
            }
        case .stallTimer(let deadline):
            guard watch.stallDeadline == deadline else { return }
            feedWatch(.timerFired(.stalledAck))
        case .heartbeat(let deadline):
            guard snapshotSender.heartbeatDeadline == deadline else { return }
            feedSnapshotSender(.timerFired(.heartbeat))
        case .reachability(let r):
            reachable = r
            feedWatch(.reachability(r))
        case .restartWatch(let setBack):
            restartWatch(clockSetBack: setBack)
        case .stopPhone:
            feedSnapshotSender(.stop)
        }
    }

    /// The watch app dies and launches again: its queue and its snapshot are gone, the counter floor
    /// survives, the token is new, and the wall clock may have been set back.
    private mutating func restartWatch(clockSetBack: Duration) {
        count("restarts")
        let died = watch.queue.count
        counts["abandoned", default: 0] += died
        for q in watch.queue {
            if case .completeSet(let e) = q.envelope.command.payload, let id = e.setId { abandoned.append(id) }
        }
        capture?.mark("watch app relaunched; \(died) queued command(s) died with it", at: now)
        let clock = wallClock() &- UInt64(max(0, clockSetBack.nanoseconds / 1_000_000))
        watch = WatchSender(clockMilliseconds: clock, storedFloor: watchFloor, rng: &rng, reachable: reachable)
        snapshots = SnapshotReceiver()
        capture?.record(.watchLaunched(WatchLaunch(clockMilliseconds: clock, storedFloor: watchFloor, reachable: reachable,
                                                   incarnation: watch.incarnation)), at: now)
    }

    private func wallClock() -> UInt64 {
        setup.wallClockStartMilliseconds + UInt64(max(0, now.nanoseconds / 1_000_000))
    }

    private mutating func count(_ key: String) { counts[key, default: 0] += 1 }

    // MARK: The watch

    private mutating func feedWatch(_ input: WatchInput) {
        capture?.record(.watch(input), at: now)
        performWatch(watch.handle(input, at: now))
    }

    private mutating func performWatch(_ actions: [WatchAction]) {
        capture?.record(actions: actions.map { .watch($0) }, at: now)
        for a in actions {
            switch a {
            case .confirm:
                count("confirmed")
            case .persist(let r):
                watchFloor = r.value
            case .send(let c, let resend):
                count(resend ? "resends" : "sends")
                transmit(.toPhone(c))
            case .armTimer(.stalledAck, let deadline):
                events.push(.stallTimer(deadline), at: deadline)
            case .tapRefused, .cancelTimer, .diagnostic:
                continue
            }
        }
    }

    // MARK: The phone

    private mutating func feedPhone(_ input: ReceiverInput) {
        capture?.record(.phone(input), at: now)
        let actions = phone.handle(input)
        capture?.record(actions: actions.map { .phone($0) }, at: now)
        for a in actions {
            switch a {
            case .execute(let c):
                count("executed")
                execute(c.command.payload)
            case .sendAck(let ack):
                transmit(.ackToWatch(ack))
                feedSnapshotSender(.ack(ack))
            case .buffered:
                count("buffered")
            case .discarded(_, .duplicate):
                count("duplicatesDiscarded")
            case .resynchronised:
                count("resyncs")
            case .rejected, .discarded:
                continue
            }
        }
    }

    /// The phone writes the set to its database and publishes the new state.
    private mutating func execute(_ payload: CommandPayload) {
        state.elapsedSeconds = now.nanoseconds / 1_000_000_000
        switch payload {
        case .completeSet(let entry):
            if let id = entry.setId { executed.append(id) }
            let e = Int(entry.exerciseIndex)
            guard state.exercises.indices.contains(e) else { return }
            state.exercises[e].completedSets = min(state.exercises[e].plannedSets, state.exercises[e].completedSets + 1)
            if state.exercises[e].completedSets == state.exercises[e].plannedSets {
                state.phase = .betweenExercises
                state.currentExerciseIndex = min(UInt32(state.exercises.count - 1), entry.exerciseIndex + 1)
                state.restEndsAtMilliseconds = nil
            } else {
                state.phase = .resting
                state.currentExerciseIndex = entry.exerciseIndex
                state.restEndsAtMilliseconds = wallClock() + 90_000
            }
        case .adjustRest(let delta):
            if let r = state.restEndsAtMilliseconds {
                state.restEndsAtMilliseconds = delta >= 0 ? r + UInt64(delta) * 1000 : r - min(r, UInt64(-delta) * 1000)
            }
        case .skipExercise(let i):
            state.currentExerciseIndex = i
            state.phase = .betweenExercises
        case .endWorkout:
            state.phase = .finished
            state.restEndsAtMilliseconds = nil
        }
        feedSnapshotSender(.update(state))
    }

    private mutating func feedSnapshotSender(_ input: SnapshotSenderInput) {
        capture?.record(.snapshotSender(input), at: now)
        let actions = snapshotSender.handle(input, at: now)
        capture?.record(actions: actions.map { .snapshotSender($0) }, at: now)
        for a in actions {
            switch a {
            case .send(let s, _):
                count("snapshotsSent")
                transmit(.snapshotToWatch(s))
            case .armTimer(.heartbeat, let deadline):
                events.push(.heartbeat(deadline), at: deadline)
            case .persist, .cancelTimer, .revisionsExhausted:
                continue
            }
        }
    }

    // MARK: The channel

    /// 10 % lost, 5 % twice, each copy 5-400 ms late; nothing crosses while out of reach.
    private mutating func transmit(_ event: Event) {
        let f = setup.channel
        guard reachable, rng.next(upperBound: 100) >= f.lossPercent else { return count("datagramsLost") }
        let copies = rng.next(upperBound: 100) < f.duplicatePercent ? 2 : 1
        if copies == 2 { count("datagramsDuplicated") }
        let span = UInt64(max(0, (f.maxDelay - f.minDelay).nanoseconds / 1_000_000)) + 1
        for _ in 0..<copies {
            events.push(event, at: now + f.minDelay + .milliseconds(Int64(rng.next(upperBound: span))))
        }
    }
}
