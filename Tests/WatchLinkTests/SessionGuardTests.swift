import RelayProtocol
import Testing
import WatchLink

/// SPEC C11: the session guard runs inside the execution step, after the receiver has advanced.
@Suite struct SessionGuardTests {
    private func receiver(expecting expected: UInt64) -> PhoneReceiver {
        var r = PhoneReceiver(liveSession: ended, checkpoint: ReceiverCheckpoint(incarnation: tokenA, expected: expected))
        _ = r.handle(.sessionEnded(ended))
        _ = r.handle(.sessionStarted(live))
        return r
    }

    @Test func seq42ForAnEndedSessionAcks43AndExecutesNothing() {
        var r = receiver(expecting: 42)
        let actions = r.handle(.command(envelope(42, session: ended)))
        #expect(actions == [.rejected(envelope(42, session: ended), .sessionNotLive(named: ended, live: live)),
                            .sendAck(CommandAck(next: 43, incarnation: tokenA))])
        #expect(actions.executed.isEmpty)
        // The watch's resend of 42 (if the ack was lost) is now a duplicate, not a fresh rejection.
        #expect(r.handle(.command(envelope(42, session: ended))).first == .discarded(42, .duplicate(expected: 43)))
    }

    @Test func theNextCommandForTheLiveSessionExecutesNormally() {
        var r = receiver(expecting: 42)
        _ = r.handle(.command(envelope(42, session: ended)))
        let actions = r.handle(.command(envelope(43)))
        #expect(actions == [.execute(envelope(43)), .sendAck(CommandAck(next: 44, incarnation: tokenA))])
    }

    @Test func aDrainedCommandPassesTheGuardToo() {
        var r = receiver(expecting: 42)
        _ = r.handle(.command(envelope(43, session: ended)))
        _ = r.handle(.command(envelope(44)))
        let actions = r.handle(.command(envelope(42)))
        #expect(actions == [
            .execute(envelope(42)),
            .rejected(envelope(43, session: ended), .sessionNotLive(named: ended, live: live)),
            .execute(envelope(44)),
            .sendAck(CommandAck(next: 45, incarnation: tokenA)),
        ])
    }

    @Test func withNoLiveSessionEveryCommandIsRejectedAndConsumesItsNumber() {
        var r = PhoneReceiver()
        let first = r.handle(.command(envelope(7)))
        #expect(first.rejected == [7])
        #expect(first.acks == [8])
        _ = r.handle(.sessionStarted(live))
        #expect(r.handle(.command(envelope(8))).executed == [8])
    }

    @Test func endingAnotherSessionLeavesTheLiveOneLive() {
        var r = receiver(expecting: 1)
        _ = r.handle(.sessionEnded(SessionID("someone else")))
        #expect(r.liveSession == live)
        _ = r.handle(.sessionEnded(live))
        #expect(r.liveSession == nil)
        #expect(r.handle(.command(envelope(1))).rejected == [1])
    }
}
