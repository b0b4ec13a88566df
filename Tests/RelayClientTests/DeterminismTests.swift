import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// House rule 1: the same seed and inputs give byte-identical actions.
@Suite struct DeterminismTests {
    /// A session that exercises every source of randomness: request IDs, trace IDs and reconnect jitter.
    /// Returns every action, in order, as text.
    private func run(seed: UInt64) -> [String] {
        var h = ClientHarness(seed: seed, exhaustiveTimers: true)
        var actions: [ClientAction] = []
        func step(_ drive: (inout ClientHarness) -> Void) {
            drive(&h)
            actions += h.takeActions()
        }
        step { $0.feed(TestIdentity.start(resume: TestIdentity.storedResume)) }
        let g = h.machine.lastGeneration
        step { $0.feed(.transportOpened(g)) }
        step { $0.feed(.transportFrame(g, RelayFrames.resumed())) }
        for i in 1...20 {
            step { $0.feed(.call(CallRequest(callId: CallID(UInt64(i)), method: i.isMultiple(of: 2) ? "session.list" : "system.ping"))) }
            step { $0.advance(by: .milliseconds(700)) }
        }
        for _ in 0..<5 {  // handshake timeouts walk the jittered reconnect ladder
            step { $0.advanceToNextTimer() }
        }
        step { $0.advance(by: .seconds(40)) }
        step { $0.feed(.stop) }
        h.finish()
        return actions.map { "\($0)" }
    }

    @Test func sameSeedAndInputsGiveIdenticalActions() {
        let a = run(seed: 42)
        let b = run(seed: 42)
        #expect(a.count > 50)
        #expect(a == b)
    }

    @Test func anotherSeedGivesOtherIdsAndJitter() {
        #expect(run(seed: 42) != run(seed: 43))
    }
}

/// The timer table's hand-written `TimerID` hash: equal timers hash equally, and a table keyed by every
/// kind of timer (including ones that differ only in a payload left out of the hash) keeps them apart.
@Suite struct TimerIDHashTests {
    private static let all: [TimerID] = [
        .handshake(Generation(1)), .handshake(Generation(2)), .heartbeat(Generation(1)), .watchdog(Generation(1)),
        .reRegister(Generation(1)), .sendRetry(Generation(1), slot: 1), .sendRetry(Generation(2), slot: 1),
        .rpcTimeout(requestId: "a", ownership: 1), .rpcTimeout(requestId: "b", ownership: 1),
        .rpcTimeout(requestId: "a", ownership: 2), .reconnect(attempt: 1), .reconnect(attempt: 2),
        .epochDeadline(epoch: 1), .auth(.poll), .auth(.refresh), .interest(.renewal(desktopId: "d")),
        .interest(.retry(desktopId: "d")), .interest(.renewal(desktopId: "e")), .probe(epoch: 1), .foregroundRecovery,
    ]

    @Test func equalTimersHashEquallyAndDistinctOnesStayApart() {
        var table: [TimerID: Int] = [:]
        for (i, id) in Self.all.enumerated() { table[id] = i }
        #expect(table.count == Self.all.count)
        for (i, id) in Self.all.enumerated() {
            #expect(table[id] == i)
            let copy = id
            #expect(copy.hashValue == id.hashValue)
        }
        for (i, id) in Self.all.enumerated() { table[id] = nil; #expect(table.count == Self.all.count - i - 1) }
    }
}
