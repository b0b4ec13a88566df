import RelayProtocol
import Testing
import WatchLink

/// SPEC C3-C5, C8: the phone's receiver: exclusive cumulative acknowledgement, duplicates, buffering.
@Suite struct PhoneReceiverTests {
    /// A receiver that has executed everything below `expected` from `token`.
    private func receiver(expecting expected: UInt64, _ token: IncarnationToken = tokenA) -> PhoneReceiver {
        PhoneReceiver(liveSession: live, checkpoint: ReceiverCheckpoint(incarnation: token, expected: expected))
    }

    @Test func ackIsOnePastTheLastExecutedNotTheLastReceived() {
        var r = receiver(expecting: 41)
        let actions = r.handle(.command(envelope(41)))
        #expect(actions == [.execute(envelope(41)), .sendAck(CommandAck(next: 42, incarnation: tokenA))])
        #expect(r.expected == 42)
    }

    @Test func commandEqualToTheExpectedNumberExecutesAndOneBelowIsADuplicate() {
        var r = receiver(expecting: 42)
        // Boundary: one below the expected number is a duplicate, discarded, not executed.
        let below = r.handle(.command(envelope(41)))
        #expect(below == [.discarded(41, .duplicate(expected: 42)), .sendAck(CommandAck(next: 42, incarnation: tokenA))])
        // Boundary: equal to the expected number is still expected, and executes.
        let equal = r.handle(.command(envelope(42)))
        #expect(equal.executed == [42])
        #expect(equal.acks == [43])
        // Executed once: a second copy is now below the acknowledgement.
        #expect(r.handle(.command(envelope(42))).executed.isEmpty)
    }

    @Test func aGapParksTheAckOnTheMissingCommand() {
        var r = receiver(expecting: 42)
        for seq: UInt64 in [43, 44, 46] {
            let actions = r.handle(.command(envelope(seq)))
            #expect(actions == [.buffered(seq, expected: 42), .sendAck(CommandAck(next: 42, incarnation: tokenA))])
        }
        #expect(r.buffer.keys.sorted() == [43, 44, 46])
        #expect(r.expected == 42, "the acknowledgement names the missing command, it does not creep forward")
    }

    @Test func fillingTheGapPartlyThenFullyDrainsInOneContiguousBatchEachTime() {
        var r = receiver(expecting: 42)
        for seq: UInt64 in [43, 45, 46] { _ = r.handle(.command(envelope(seq))) }
        // Partly: 42 closes the first gap; 43 drains with it; 45 and 46 wait for 44.
        let partly = r.handle(.command(envelope(42)))
        #expect(partly == [.execute(envelope(42)), .execute(envelope(43)),
                           .sendAck(CommandAck(next: 44, incarnation: tokenA))])
        // Fully: 44 and everything after it, in order, in one call, one acknowledgement after the batch.
        let fully = r.handle(.command(envelope(44)))
        #expect(fully == [.execute(envelope(44)), .execute(envelope(45)), .execute(envelope(46)),
                          .sendAck(CommandAck(next: 47, incarnation: tokenA))])
        #expect(r.buffer.isEmpty)
    }

    @Test func aBufferedCopyIsNotBufferedTwice() {
        var r = receiver(expecting: 10)
        _ = r.handle(.command(envelope(12)))
        #expect(r.handle(.command(envelope(12))) == [.discarded(12, .alreadyBuffered(expected: 10)),
                                                    .sendAck(CommandAck(next: 10, incarnation: tokenA))])
        #expect(r.handle(.command(envelope(10))).executed == [10])
        #expect(r.handle(.command(envelope(11))).executed == [11, 12])
    }

    @Test func theBufferIsBoundedByTheReceiveWindow() {
        var r = receiver(expecting: 1_000)
        // 1000 + 1023 is the last number inside the window of 1024; 1000 + 1024 is outside it.
        #expect(r.handle(.command(envelope(2_023))).first == .buffered(2_023, expected: 1_000))
        #expect(r.handle(.command(envelope(2_024))).first == .discarded(2_024, .outsideWindow(expected: 1_000)))
        #expect(r.buffer.count == 1)
    }

    @Test func theLargestSequenceNumberIsRefusedWithoutTrapping() {
        var r = receiver(expecting: 5)
        #expect(r.handle(.command(envelope(.max))).first == .discarded(.max, .malformedSequence))
        #expect(r.expected == 5)
        var fresh = PhoneReceiver(liveSession: live)
        #expect(fresh.handle(.command(envelope(.max))) == [.discarded(.max, .malformedSequence)])
        #expect(fresh.incarnation == nil)
    }

    @Test func theFirstCommandEverIsTheBaseline() {
        var r = PhoneReceiver(liveSession: live)
        let actions = r.handle(.command(envelope(1_718_000_000_000)))
        #expect(actions == [
            .resynchronised(Resynchronisation(from: nil, to: tokenA, baseline: 1_718_000_000_000, discardedBuffered: 0)),
            .execute(envelope(1_718_000_000_000)),
            .sendAck(CommandAck(next: 1_718_000_000_001, incarnation: tokenA)),
        ])
    }

    @Test func testNewIncarnationResynchronisesInsteadOfReportingATrillionSeqGap() {
        // The old launch: seeded from the clock at t0, executed up to 1_718_000_000_041, with two early
        // commands buffered behind a gap at ...042.
        let t0: UInt64 = 1_718_000_000_000
        var r = receiver(expecting: t0 + 42)
        _ = r.handle(.command(envelope(t0 + 44)))
        _ = r.handle(.command(envelope(t0 + 45)))
        #expect(r.buffer.count == 2)
        // The watch app relaunches ~11.6 days later: its counter is clock-seeded, so it jumps by the
        // milliseconds the app was down (1e9 here; ~1.7e12 against a counter that started at zero). A
        // strict in-order receiver would buffer it behind a gap that can never close.
        let relaunch: UInt64 = t0 + 1_000_000_000
        let actions = r.handle(.command(envelope(relaunch, tokenB)))
        #expect(actions == [
            .resynchronised(Resynchronisation(from: tokenA, to: tokenB, baseline: relaunch, discardedBuffered: 2)),
            .execute(envelope(relaunch, tokenB)),
            .sendAck(CommandAck(next: relaunch + 1, incarnation: tokenB)),
        ])
        #expect(r.buffer.isEmpty, "the old incarnation's buffer is discarded")
        #expect(!actions.contains { if case .buffered = $0 { true } else { false } })
        #expect(r.incarnation == tokenB)
        #expect(r.expected == relaunch + 1)
        // The next command of the new launch runs normally.
        #expect(r.handle(.command(envelope(relaunch + 1, tokenB))).executed == [relaunch + 1])
        // The old launch's missing command arrives late: its token is retired, nothing executes and the
        // new incarnation's state is untouched.
        let late = r.handle(.command(envelope(t0 + 42)))
        #expect(late == [.discarded(t0 + 42, .retiredIncarnation(tokenA))])
        #expect(r.incarnation == tokenB)
        #expect(r.expected == relaunch + 2)
    }

    @Test func aNewIncarnationWithALowerCounterAlsoResynchronises() {
        // A clock set back by the user: the floor keeps the counter above, but even a lower number under a
        // new token is a baseline, never a duplicate of the old stream.
        var r = receiver(expecting: 5_000)
        let actions = r.handle(.command(envelope(4_000, tokenB)))
        #expect(actions.executed == [4_000])
        #expect(actions.acks == [4_001])
    }

    @Test func retiredTokensAreRememberedBoundedly() {
        var r = PhoneReceiver(liveSession: live)
        for i in 0..<70 as Range<UInt64> {
            _ = r.handle(.command(envelope(100, IncarnationToken(high: 7, low: i))))
        }
        #expect(r.retired.count == 64)
        #expect(r.retired.first == IncarnationToken(high: 7, low: 5))
    }

    @Test func aCheckpointRestoresTheStreamAcrossAPhoneRestart() {
        var before = receiver(expecting: 10)
        _ = before.handle(.command(envelope(10)))
        let stored = before.checkpoint
        #expect(stored == ReceiverCheckpoint(incarnation: tokenA, expected: 11))
        var after = PhoneReceiver(liveSession: live, checkpoint: stored)
        #expect(after.handle(.command(envelope(10))).executed.isEmpty, "executed before the restart")
        #expect(after.handle(.command(envelope(11))).executed == [11])
    }
}
