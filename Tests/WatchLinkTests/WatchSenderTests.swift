import RelayProtocol
import Testing
import WatchLink

/// SPEC C2, C4, C6, C7, C8, C14: the watch's sender.
@Suite struct WatchSenderTests {
    private let t0: UInt64 = 1_718_000_000_000

    @Test func numbersStartAtTheClockAndOnlyGoUpPersistedBeforeSending() {
        var w = launchWatch(clock: t0)
        let first = w.handle(.tap(completeSet(8), confirm: nil), at: .zero)
        #expect(first.persisted == [t0])
        #expect(first.sent == [t0])
        let persistIndex = first.firstIndex { if case .persist = $0 { true } else { false } }
        let sendIndex = first.firstIndex { if case .send = $0 { true } else { false } }
        #expect(persistIndex! < sendIndex!, "the floor is stored before the number goes on the wire")
        _ = w.handle(ack(t0 + 1, for: w), at: .seconds(0.1))
        let second = w.handle(.tap(completeSet(9), confirm: nil), at: .seconds(1))
        #expect(second.sent == [t0 + 1])
    }

    @Test func ackStrictlyBelowIsDiscardedEqualIsStillExpected() {
        var w = launchWatch(clock: t0)
        _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        _ = w.handle(ack(t0 + 1, for: w), at: .zero)
        for r: Int64 in 2...3 { _ = w.handle(.tap(completeSet(r), confirm: nil), at: .zero) }
        #expect(w.queue.map(\.envelope.sequence) == [t0 + 1, t0 + 2])
        // Equal: the acknowledgement t0+1 names command t0+1, which stays queued.
        _ = w.handle(ack(t0 + 1, for: w), at: .seconds(1))
        #expect(w.queue.map(\.envelope.sequence) == [t0 + 1, t0 + 2])
        // One above: t0+1 is strictly below, discarded; t0+2 is equal, still expected.
        _ = w.handle(ack(t0 + 2, for: w), at: .seconds(2))
        #expect(w.queue.map(\.envelope.sequence) == [t0 + 2])
        #expect(w.acknowledged == t0 + 2)
        #expect(w.namedByAck?.envelope.sequence == t0 + 2)
    }

    @Test func acksOfAnotherIncarnationOrBeyondWhatWasSentAreIgnored() {
        var w = launchWatch(clock: t0)
        _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        let foreign = CommandAck(next: t0 + 1, incarnation: tokenB)
        #expect(w.handle(.ackReceived(foreign), at: .zero) == [.diagnostic(.ackForOtherIncarnation(foreign))])
        let beyond = CommandAck(next: t0 + 2, incarnation: w.incarnation)
        #expect(w.handle(.ackReceived(beyond), at: .zero)
            == [.diagnostic(.ackOutsideSentRange(beyond, baseline: t0, next: t0 + 1))])
        #expect(w.queue.count == 1)
    }

    @Test func theStalledAckResendsExactlyTheNamedCommandUnderItsNumberAtFiveSeconds() {
        var w = launchWatch(clock: t0)
        _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        _ = w.handle(ack(t0 + 1, for: w), at: .seconds(1))
        for r: Int64 in 2...4 { _ = w.handle(.tap(completeSet(r), confirm: nil), at: .seconds(2)) }
        // The ack last moved at 1 s, when nothing was outstanding; the wait began at 2 s: deadline 7 s.
        #expect(w.stallDeadline == .seconds(7))
        // The phone has buffered t0+2 and t0+3 but lost t0+1; it keeps acknowledging t0+1.
        #expect(w.handle(ack(t0 + 1, for: w), at: .seconds(3)).isEmpty, "an ack that does not move is no news")
        #expect(w.stallDeadline == .seconds(7))
        let actions = w.handle(.timerFired(.stalledAck), at: .seconds(7))
        #expect(actions.resent == [t0 + 1], "exactly one command: the one the acknowledgement names")
        #expect(actions.sent == [t0 + 1])
        #expect(actions.last == .armTimer(.stalledAck, deadline: .seconds(12)))
        // The resend is the same envelope as the first send.
        guard case .send(let resent, true)? = actions.first else { Issue.record("no resend"); return }
        #expect(resent == w.queue[0].envelope)
        #expect(resent.sequence == t0 + 1)
    }

    @Test func theStallClockRestartsWhenTheAckMoves() {
        var w = launchWatch(clock: t0)
        let first = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        #expect(first.last == .armTimer(.stalledAck, deadline: .seconds(5)))
        _ = w.handle(.tap(completeSet(2), confirm: nil), at: .seconds(1))
        let moved = w.handle(ack(t0 + 1, for: w), at: .seconds(Double(4.999)))
        #expect(moved.contains(.armTimer(.stalledAck, deadline: .seconds(9.999))))
        let drained = w.handle(ack(t0 + 2, for: w), at: .seconds(5))
        #expect(drained == [.cancelTimer(.stalledAck)], "nothing left to wait for")
        #expect(w.stallDeadline == nil)
    }

    @Test func aFailedSendIsRequeuedUnderItsNumberAndTheNumberIsNeverHandedOutAgain() {
        var w = launchWatch(clock: t0)
        _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        _ = w.handle(ack(t0 + 1, for: w), at: .zero)
        _ = w.handle(.tap(completeSet(2), confirm: nil), at: .zero)
        #expect(w.handle(.sendFailed(sequence: t0 + 1), at: .zero).isEmpty)
        #expect(w.queue.first?.sent == false)
        // The next flush sends it again under t0+1, before the new command t0+2.
        let next = w.handle(.tap(completeSet(3), confirm: nil), at: .seconds(1))
        #expect(next.sent == [t0 + 1, t0 + 2])
        #expect(next.persisted == [t0 + 2])
        // A failure report for a number not queued changes nothing.
        #expect(w.handle(.sendFailed(sequence: t0), at: .seconds(1)) == [.diagnostic(.sendFailedForUnknownSequence(t0))])
    }

    @Test func untilTheFirstAckOnlyTheIncarnationsFirstCommandIsInFlight() {
        var w = launchWatch(clock: t0)
        let a = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        let b = w.handle(.tap(completeSet(2), confirm: nil), at: .zero)
        #expect(a.sent == [t0])
        #expect(b.sent.isEmpty, "the phone must take the incarnation's first command as its baseline")
        #expect(!w.synchronised)
        let acked = w.handle(ack(t0 + 1, for: w), at: .seconds(0.2))
        #expect(acked.sent == [t0 + 1])
        #expect(w.synchronised)
    }

    @Test func offlineTapIsConfirmedAtOnceWaitsUnderItsNumberAndDrainsInOrder() {
        var w = launchWatch(clock: t0, reachable: false)
        let context = ConfirmationContext(exerciseName: "Bench Press", setsOnExercise: 3)
        var confirmations: [TapConfirmation] = []
        for reps: Int64 in 1...3 {
            let actions = w.handle(.tap(completeSet(reps), confirm: context), at: .seconds(Double(reps)))
            confirmations += actions.confirmations
            #expect(actions.sent.isEmpty)
            #expect(actions.first == .confirm(actions.confirmations[0]), "confirmation comes first")
        }
        #expect(confirmations.map(\.reps) == [1, 2, 3])
        #expect(w.queue.map(\.envelope.sequence) == [t0, t0 + 1, t0 + 2])
        // Out of range: no stall timer runs.
        #expect(w.stallDeadline == nil)
        let back = w.handle(.reachability(true), at: .seconds(60))
        #expect(back.sent == [t0])
        #expect(back.last == .armTimer(.stalledAck, deadline: .seconds(65)))
        #expect(w.handle(ack(t0 + 1, for: w), at: .seconds(60.1)).sent == [t0 + 1, t0 + 2])
        _ = w.handle(ack(t0 + 3, for: w), at: .seconds(60.2))
        #expect(w.queue.isEmpty)
    }

    @Test func goingOutOfRangeStopsTheStallTimerAndComingBackRestartsIt() {
        var w = launchWatch(clock: t0)
        _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero)
        #expect(w.handle(.reachability(false), at: .seconds(1)) == [.cancelTimer(.stalledAck)])
        let back = w.handle(.reachability(true), at: .seconds(30))
        #expect(back == [.armTimer(.stalledAck, deadline: .seconds(35))], "already sent: the 5 s rule resends it")
        #expect(w.handle(.timerFired(.stalledAck), at: .seconds(35)).resent == [t0])
    }

    @Test func aFullQueueRefusesTheTapWithoutConfirmingIt() {
        var w = launchWatch(clock: t0, reachable: false)
        for _ in 0..<10_000 { _ = w.handle(.tap(completeSet(1), confirm: nil), at: .zero) }
        let context = ConfirmationContext(exerciseName: "Squat", setsOnExercise: 5)
        let refused = w.handle(.tap(completeSet(2), confirm: context), at: .zero)
        #expect(refused == [.tapRefused(completeSet(2), .queueFull(queued: 10_000))])
        #expect(w.counter.next == t0 + 10_000)
    }

    @Test func anExhaustedCounterRefusesTheTap() {
        var w = launchWatch(clock: t0, floor: .max - 1)
        #expect(w.counter.next == .max)
        #expect(w.handle(.tap(completeSet(1), confirm: nil), at: .zero) == [.tapRefused(completeSet(1), .counterExhausted)])
    }

    @Test func aGivenTokenIsTheLaunchesTokenAndTheGeneratorFormDrawsThenDelegates() {
        // The token is an input: the launch uses exactly the one given, on every command it numbers.
        var given = WatchSender(clockMilliseconds: t0, storedFloor: t0 + 41, incarnation: tokenB, reachable: true)
        #expect(given.incarnation == tokenB)
        #expect(given.baseline == t0 + 42, "the counter is seeded as with a drawn token: max(clock, floor + 1)")
        let sent = given.handle(.tap(completeSet(5), confirm: nil), at: .zero)
        let envelopes = sent.compactMap { if case .send(let c, _) = $0 { c } else { nil } }
        #expect(envelopes.map(\.incarnation) == [tokenB])
        // The generator form draws the token and is otherwise the same launch.
        var rng = SeededRandom(seed: 7), copy = SeededRandom(seed: 7)
        var drawn = WatchSender(clockMilliseconds: t0, storedFloor: t0 + 41, rng: &rng, reachable: true)
        let token = IncarnationToken.random(using: &copy)
        #expect(drawn.incarnation == token)
        #expect(rng.next() == copy.next(), "it draws exactly one token's worth from the generator")
        var same = WatchSender(clockMilliseconds: t0, storedFloor: t0 + 41, incarnation: token, reachable: true)
        #expect(drawn.handle(.tap(completeSet(5), confirm: nil), at: .zero) == same.handle(.tap(completeSet(5), confirm: nil), at: .zero))
    }
}

/// SPEC C1: the confirmation states only what the wrist shows, from the caller.
@Suite struct ConfirmationTests {
    @Test func theConfirmationShowsTheCrownValueNotTheLastSnapshots() {
        // The phone's last snapshot says 50 kg; the lifter turned the crown to 55 kg and tapped.
        var rng = SeededRandom(seed: 1)
        let snapshot = SampleWorkout.snapshot(rng: &rng)
        var receiver = SnapshotReceiver()
        _ = receiver.receive(snapshot)
        var w = launchWatch(reachable: false)
        let crown = WatchCommand(session: live, payload: .completeSet(
            SetEntry(exerciseIndex: 2, setOffset: 1, weightGrams: 55_000, reps: 8)))
        let actions = w.handle(.tap(crown, confirm: ConfirmationContext(exerciseName: "Bench Press", setsOnExercise: 4)),
                               at: .zero)
        #expect(actions.confirmations == [TapConfirmation(exerciseName: "Bench Press", setNumber: 2, weightGrams: 55_000, reps: 8)])
        #expect(snapshot.state.exercises[2].workingWeightGrams != 55_000)
        #expect(actions.confirmations.first?.description == "✓ Bench Press set 2: 55 kg × 8")
    }

    @Test func theSetNumberIsDroppedOnceTheOffsetPassesTheSetsOnTheExercise() {
        let context = ConfirmationContext(exerciseName: "Row", setsOnExercise: 3)
        let last = TapConfirmation(completing: SetEntry(exerciseIndex: 0, setOffset: 2, weightGrams: 60_000, reps: 8), in: context)
        #expect(last?.setNumber == 3)
        let extra = TapConfirmation(completing: SetEntry(exerciseIndex: 0, setOffset: 3, weightGrams: 60_000, reps: 8), in: context)
        #expect(extra?.setNumber == nil)
        #expect(extra?.description == "✓ Row: 60 kg × 8", "the confirmation stays, the untrue number goes")
    }

    @Test func aSetTheWatchCannotNameIsNotConfirmedAtAll() {
        let entry = SetEntry(exerciseIndex: 0, setOffset: 0, weightGrams: 60_000, reps: 8)
        #expect(TapConfirmation(completing: entry, in: ConfirmationContext(exerciseName: nil, setsOnExercise: 3)) == nil)
        #expect(TapConfirmation(completing: entry, in: ConfirmationContext(exerciseName: "", setsOnExercise: 3)) == nil)
        var w = launchWatch(reachable: false)
        let actions = w.handle(.tap(WatchCommand(session: live, payload: .completeSet(entry)),
                                    confirm: ConfirmationContext(exerciseName: nil, setsOnExercise: 3)), at: .zero)
        #expect(actions.confirmations.isEmpty)
        #expect(w.queue.count == 1, "the command still goes to the phone")
    }

    @Test func numbersTheWristDoesNotShowAreDropped() {
        let entry = SetEntry(exerciseIndex: 5, setOffset: 0, weightGrams: nil, reps: 10)
        let c = TapConfirmation(completing: entry, in: ConfirmationContext(exerciseName: "Pull-Up", setsOnExercise: 3))
        #expect(c?.description == "✓ Pull-Up set 1: 10")
        let fractional = TapConfirmation(exerciseName: "Curl", setNumber: nil, weightGrams: 12_250, reps: nil)
        #expect(fractional.description == "✓ Curl: 12.25 kg")
    }
}
