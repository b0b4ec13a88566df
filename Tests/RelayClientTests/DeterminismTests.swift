import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// House rule 1: the same seed and inputs give byte-identical actions.
@Suite struct DeterminismTests {
    /// A session that exercises every source of randomness: request IDs, trace IDs and reconnect jitter.
    private func run(seed: UInt64) -> [String] {
        var h = ClientHarness(seed: seed, exhaustiveTimers: true)
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        let g = h.machine.lastGeneration
        h.feed(.transportOpened(g))
        h.feed(.transportFrame(g, RelayFrames.resumed()))
        for i in 1...20 {
            h.feed(.call(CallRequest(callId: CallID(UInt64(i)), method: i.isMultiple(of: 2) ? "session.list" : "system.ping")))
            h.advance(by: .milliseconds(700))
        }
        for _ in 0..<5 {  // handshake timeouts walk the jittered reconnect ladder
            h.advanceToNextTimer()
        }
        h.advance(by: .seconds(40))
        h.feed(.stop)
        return h.takeActions().map { "\($0)" }
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
