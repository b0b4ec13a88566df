import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC A4 (the socket) and A5 (transport generations).
@Suite struct A4SocketTests {
    @Test func wssURLIsAccepted() throws {
        let c = try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "k",
                                        relayURL: "wss://api-us.plantocode.com/ws/device-link", seed: 1)
        #expect(c.relayURL == "wss://api-us.plantocode.com/ws/device-link")
    }

    @Test(arguments: ["ws://api-us.plantocode.com/ws/device-link", "ws://10.0.0.2:8080/ws/device-link",
                      "https://api-us.plantocode.com/ws/device-link", "http://127.0.0.1/ws", "api-us.plantocode.com/ws",
                      "wss:///ws/device-link"])
    func nonWssURLIsRefusedWithAClearError(url: String) {
        #expect(throws: ClientConfigurationError.self) {
            try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "k", relayURL: url, seed: 1)
        }
        // Even the loopback-development option does not admit these (none is ws to a loopback host).
        #expect(throws: ClientConfigurationError.self) {
            try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "k", relayURL: url,
                                    allowInsecureLoopback: true, seed: 1)
        }
    }

    @Test(arguments: ["ws://127.0.0.1:8080/ws/device-link", "ws://localhost:9000/ws/device-link",
                      "ws://[::1]:8080/ws/device-link", "ws://127.1.2.3/ws/device-link"])
    func plainWsToLoopbackNeedsTheExplicitOption(url: String) throws {
        do {
            _ = try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "k", relayURL: url, seed: 1)
            Issue.record("ws to loopback must be refused without allowInsecureLoopback")
        } catch {
            #expect(error.message.contains("allowInsecureLoopback"), "the error says which option admits it")
        }
        let c = try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "k", relayURL: url,
                                        allowInsecureLoopback: true, seed: 1)
        #expect(c.allowInsecureLoopback)
    }

    @Test func openActionCarriesExactlyTheUpgradeHeadersOfA4() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        let actions = h.takeActions()
        #expect(actions == [
            .openTransport(Generation(1), url: TestIdentity.relayURL, headers: [
                HTTPHeader("Authorization", "Bearer \(TestIdentity.jwt)"),
                HTTPHeader("X-Device-ID", "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"),
                HTTPHeader("X-Token-Binding", "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"),
                HTTPHeader("X-Client-Type", "mobile"),
                HTTPHeader("X-Target-Desktop-Device-ID", TestIdentity.desktopId),
            ]),
            .phaseChanged(.connecting(Generation(1))),
        ])
        h.stop()
        h.finish()
    }

    @Test func everySocketGetsTheNextGeneration() throws {
        var h = ClientHarness()
        let g1 = h.connectAndRegister()
        h.feed(.transportClosed(g1, code: nil, reason: "reset"))
        let actions = h.takeActions()
        #expect(actions.contains { if case .openTransport(Generation(2), _, _) = $0 { true } else { false } })
        #expect(h.machine.generation == Generation(2))
        h.stop()
        h.finish()
    }

    @Test func inputsOfAStaleGenerationAreIgnored() throws {
        var h = ClientHarness()
        let g1 = h.connectAndRegister()
        h.feed(.transportClosed(g1, code: 1006, reason: "gone"))
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        let g2 = try #require(h.machine.generation)
        #expect(g2 == Generation(2))
        let phaseBefore = h.machine.phase

        // Everything generation 1 says now is stale: no state change, one diagnostic each.
        for input: ClientInput in [
            .transportOpened(g1),
            .transportFrame(g1, RelayFrames.registered()),
            .transportClosed(g1, code: 1000, reason: "late"),
            .transportFailed(g1, .network("late")),
            .sendFailed(g1, frame: .text("{}"), attempt: 1, transient: true, reason: "late"),
        ] {
            h.feed(input)
            let actions = h.takeActions()
            #expect(actions.count == 1)
            guard case .diagnostic(.staleGeneration(g1, current: g2, input: _)) = actions.first else {
                Issue.record("expected a stale-generation diagnostic for \(input), got \(actions)")
                continue
            }
        }
        #expect(h.machine.phase == phaseBefore)
        #expect(h.machine.generation == g2)
        h.stop()
        h.finish()
    }

    @Test func aRetryPreparedForAnEarlierSocketNeverReachesItsSuccessor() throws {
        var h = ClientHarness()
        let g1 = h.connectAndRegister()
        h.advance(by: .seconds(5))  // heartbeat goes out on g1
        let heartbeat = try #require(h.takeActions().first { $0.sentMessage == .heartbeat(HeartbeatPayload(activeSessionId: nil)) })
        guard case .send(_, let frame, let attempt) = heartbeat else { Issue.record("not a send"); return }
        h.feed(.sendFailed(g1, frame: frame, attempt: attempt, transient: true, reason: "ENOBUFS"))
        #expect(h.deadline(of: .sendRetry(g1, slot: 1)) == Moment.seconds(5.25))
        h.feed(.transportClosed(g1, code: nil, reason: "reset"))  // g2 opens at once
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        #expect(h.deadline(of: .sendRetry(g1, slot: 1)) == nil, "the held send died with its generation")
        h.advance(by: .seconds(2))
        let sends = h.takeActions().filter { if case .send = $0 { true } else { false } }
        #expect(sends.isEmpty, "nothing prepared for g1 was sent on g2: \(sends)")
        h.stop()
        h.finish()
    }
}
