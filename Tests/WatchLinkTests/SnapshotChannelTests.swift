import RelayProtocol
import Testing
import WatchLink

/// SPEC C9, C10: snapshots are state: a revision, newest wins, heartbeat every 15 s and at phase changes.
@Suite struct SnapshotChannelTests {
    private let t0: UInt64 = 1_718_000_000_000

    private func sent(_ actions: [SnapshotSenderAction]) -> [(WorkoutSnapshot, SnapshotDelivery)] {
        actions.compactMap { if case .send(let s, let d) = $0 { (s, d) } else { nil } }
    }

    @Test func theFirstStateIsDeliveredAtOnceUnderAClockSeededRevision() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        let actions = p.handle(.update(workout(.warmUp)), at: .zero)
        #expect(actions == [
            .persist(CounterFloorRecord(key: "watchlink.snapshotRevision.floor", value: t0)),
            .send(WorkoutSnapshot(revision: t0, state: workout(.warmUp), ack: nil), .phaseChange),
            .armTimer(.heartbeat, deadline: .seconds(15)),
        ])
    }

    @Test func theHeartbeatIsAFullDeliveryFifteenSecondsAfterTheLastAndCarriesTheCurrentState() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        _ = p.handle(.update(workout(.lifting)), at: .zero)
        // Same phase: no delivery now; the next heartbeat carries it.
        #expect(p.handle(.update(workout(.lifting, elapsed: 9)), at: .seconds(9)).isEmpty)
        #expect(p.heartbeatDeadline == .seconds(15))
        let beat = p.handle(.timerFired(.heartbeat), at: .seconds(15))
        let s = sent(beat)
        #expect(s.count == 1)
        #expect(s.first?.0 == WorkoutSnapshot(revision: t0 + 1, state: workout(.lifting, elapsed: 9), ack: nil))
        #expect(s.first?.1 == .heartbeat)
        #expect(beat.last == .armTimer(.heartbeat, deadline: .seconds(30)))
    }

    @Test func aPhaseChangeIsDeliveredAtOnceAndRestartsTheHeartbeat() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        _ = p.handle(.update(workout(.lifting)), at: .zero)
        let change = p.handle(.update(workout(.resting)), at: .seconds(7))
        #expect(sent(change).map(\.1) == [.phaseChange])
        #expect(sent(change).first?.0.revision == t0 + 1)
        #expect(change.last == .armTimer(.heartbeat, deadline: .seconds(22)))
    }

    @Test func aNewAckIsSentAtOnceUnderTheSameRevision() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        _ = p.handle(.update(workout(.lifting)), at: .zero)
        let a = CommandAck(next: 500, incarnation: tokenA)
        let reply = p.handle(.ack(a), at: .seconds(1))
        #expect(reply == [.send(WorkoutSnapshot(revision: t0, state: workout(.lifting), ack: a), .ackReply)])
        // An acknowledgement that does not move sends nothing.
        #expect(p.handle(.ack(CommandAck(next: 499, incarnation: tokenA)), at: .seconds(2)).isEmpty)
        #expect(p.handle(.ack(a), at: .seconds(2)).isEmpty)
        // The next full delivery carries the newest acknowledgement (C14).
        #expect(sent(p.handle(.timerFired(.heartbeat), at: .seconds(15))).first?.0.ack == a)
    }

    @Test func theWatchRejectsStrictlyOlderAndAppliesEqualAndNewer() {
        var w = SnapshotReceiver()
        let s40 = WorkoutSnapshot(revision: 40, state: workout(.lifting), ack: nil)
        #expect(w.receive(s40) == .applied(s40))
        // Boundary: one older is rejected.
        let s39 = WorkoutSnapshot(revision: 39, state: workout(.resting), ack: nil)
        #expect(w.receive(s39) == .rejectedOlder(incoming: 39, holding: 40))
        #expect(w.current == s40)
        // Boundary: equal is applied (only full deliveries increment; this one brings a new ack).
        let equal = WorkoutSnapshot(revision: 40, state: workout(.lifting), ack: CommandAck(next: 9, incarnation: tokenA))
        #expect(w.receive(equal) == .applied(equal))
        #expect(w.current?.ack?.next == 9)
        let s41 = WorkoutSnapshot(revision: 41, state: workout(.resting), ack: nil)
        #expect(w.receive(s41) == .applied(s41))
    }

    @Test func aLostSnapshotIsRepairedByTheNextAndNeverResent() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        var w = SnapshotReceiver()
        let first = sent(p.handle(.update(workout(.lifting)), at: .zero))
        _ = w.receive(first[0].0)
        // The phase-change snapshot is lost on the way.
        let lost = sent(p.handle(.update(workout(.resting)), at: .seconds(3)))
        #expect(lost.count == 1)
        // Nothing re-sends it: the sender has no resend path; the next heartbeat is a new full delivery.
        let next = sent(p.handle(.timerFired(.heartbeat), at: .seconds(18)))
        #expect(next.count == 1)
        #expect(next[0].0.revision == lost[0].0.revision + 1, "a new revision, not the lost one again")
        #expect(w.receive(next[0].0) == .applied(next[0].0))
        #expect(w.current?.state.phase == .resting)
        // The lost one, delivered late, is now strictly older and rejected: late state cannot make the wrist older.
        #expect(w.receive(lost[0].0) == .rejectedOlder(incoming: t0 + 1, holding: t0 + 2))
    }

    @Test func aPhoneRestartMidWorkoutPublishesAboveWhatTheWatchHolds() {
        // Musklr's bug: a per-process counter starting at zero published revision 1 while the watch held 40.
        var w = SnapshotReceiver()
        var before = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        var floor: UInt64?
        for i in 0..<40 {
            for a in before.handle(.update(workout(i.isMultiple(of: 2) ? .lifting : .resting)), at: .seconds(Double(i))) {
                if case .persist(let r) = a { floor = r.value }
                if case .send(let s, _) = a { _ = w.receive(s) }
            }
        }
        #expect(w.current?.revision == t0 + 39)
        // The phone restarts with its clock 10 minutes behind: the floor still puts it above.
        var after = SnapshotSender(clockMilliseconds: t0 - 600_000, storedFloor: floor)
        let first = sent(after.handle(.update(workout(.lifting)), at: .zero))
        #expect(first[0].0.revision == t0 + 40)
        #expect(w.receive(first[0].0) == .applied(first[0].0))
    }

    @Test func stopCancelsTheHeartbeatAndNothingIsSentBeforeAState() {
        var p = SnapshotSender(clockMilliseconds: t0, storedFloor: nil)
        #expect(p.handle(.timerFired(.heartbeat), at: .zero).isEmpty)
        #expect(p.handle(.ack(CommandAck(next: 1, incarnation: tokenA)), at: .zero).isEmpty, "held for the first full delivery")
        let first = sent(p.handle(.update(workout(.lifting)), at: .zero))
        #expect(first.first?.0.ack == CommandAck(next: 1, incarnation: tokenA))
        #expect(p.handle(.stop, at: .seconds(1)) == [.cancelTimer(.heartbeat)])
        #expect(p.handle(.stop, at: .seconds(2)).isEmpty)
    }
}
