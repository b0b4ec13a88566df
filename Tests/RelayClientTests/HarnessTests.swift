import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// The harness itself: virtual time, timer order, exhaustive finish.
@Suite struct HarnessTests {
    @Test func finishFailsOnUnreadActionsAndArmedTimersAndSaysHowToFix() {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        do {
            try h.finish()
            Issue.record("finish must fail with unread actions and an armed handshake timer")
        } catch {
            #expect(error.unreadActions.count == 2)
            #expect(error.armedTimers.map(\.id) == [.handshake(Generation(1))])
            #expect(error.description.contains("To fix"))
            #expect(error.description.contains("handshake(g1) due at 10.000s"))
        }
        _ = h.takeActions()
        #expect(throws: HarnessLeftovers.self) { try h.finish() }
        #expect(throws: Never.self) { try h.finish(allowingArmedTimers: true) }
    }

    @Test func timersFireAtTheirDeadlinesInDeadlineThenArmingOrder() {
        var h = ClientHarness(exhaustiveTimers: true)
        let g = h.connectAndRegister()
        // Heartbeat (5 s) and watchdog (15 s) are armed; a ping call adds a 3 s timeout.
        h.feed(.call(CallRequest(callId: CallID(1), method: "system.ping", requestId: "P")))
        _ = h.takeActions()
        #expect(h.armedTimers.map(\.id) == [.rpcTimeout(requestId: "P", ownership: 1), .heartbeat(g), .watchdog(g)])
        #expect(h.advanceToNextTimer() == .rpcTimeout(requestId: "P", ownership: 1))
        #expect(h.now == .seconds(3))
        _ = h.takeActions()
        h.feed(.stop)
        _ = h.takeActions()
        #expect(h.armedTimers.isEmpty)
    }
}
