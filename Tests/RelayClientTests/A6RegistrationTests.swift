import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC A6: registration, handshake timeout, send retry, heartbeat, watchdog.
@Suite struct A6RegistrationTests {
    private func registerPayload(_ actions: [ClientAction]) -> RegisterPayload? {
        for a in actions { if case .register(let p)? = a.sentMessage { return p } }
        return nil
    }

    @Test func registerIsThe16FormWithoutResumeWhenNothingIsStored() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        let actions = h.takeActions()
        #expect(actions.first == .phaseChanged(.registering(Generation(1))))
        let p = try #require(registerPayload(actions))
        #expect(p == RegisterPayload(deviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", deviceName: "Alice's iPhone",
                                     relaySessionId: nil, resumeToken: nil, lastEventId: nil,
                                     relayProtocolVersion: "1.6", targetDesktopDeviceId: TestIdentity.desktopId))
        // The text on the wire is the 1.6 form.
        guard case .send(Generation(1), .text(let text), 1) = actions.last else { Issue.record("no send"); return }
        let json = try JSONValue(parsing: text)
        #expect(json["type"] == "register")
        #expect(json["payload"]?["relayProtocolVersion"] == "1.6")
        #expect(json["payload"]?["sessionId"] == nil, "1.6 sends relaySessionId, never the legacy sessionId")
        h.stop()
        h.finish()
    }

    @Test func registerCarriesTheStoredSessionAndToken() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        let p = try #require(registerPayload(h.takeActions()))
        #expect(p.relaySessionId == "Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D")
        #expect(p.resumeToken == "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA")
        h.stop()
        h.finish()
    }

    @Test func handshakeTimesOutAtExactlyTenSeconds() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.advance(to: Moment(nanoseconds: 9_999_999_999))
        #expect(h.takeActions().isEmpty, "nothing happens before 10 s")
        h.advance(to: .seconds(10))
        let actions = h.takeActions()
        #expect(actions.prefix(2) == [
            .connectionFailed(Generation(1), .handshakeTimeout),
            .closeTransport(Generation(1), code: 1001, reason: "handshake timeout"),
        ])
        #expect(actions.contains { if case .openTransport(Generation(2), _, _) = $0 { true } else { false } })
        h.stop()
        h.finish()
    }

    @Test func registrationCancelsTheHandshakeTimeout() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.advance(by: .seconds(9))
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        #expect(h.deadline(of: .handshake(Generation(1))) == nil)
        h.advance(by: .seconds(2))
        #expect(!h.takeActions().contains { if case .connectionFailed = $0 { true } else { false } })
        h.stop()
        h.finish()
    }

    @Test func transientSendFailureIsRetriedAfterMinOfQuarterSecondTimesAttemptAndOneAndAHalf() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        let frame = WireFrame.text(#"{"type":"heartbeat","payload":{}}"#)
        let expected: [Double] = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.5, 1.5]
        var attempt = 1
        for delay in expected {
            let failedAt = h.now
            h.feed(.sendFailed(g, frame: frame, attempt: attempt, transient: true, reason: "EAGAIN"))
            let retry = try #require(h.armedTimers.first { if case .sendRetry = $0.id { true } else { false } })
            #expect(retry.deadline - failedAt == .milliseconds(Int64(delay * 1000)), "attempt \(attempt)")
            h.advance(to: retry.deadline)
            let sends = h.takeActions().filter { if case .send(_, frame, _) = $0 { true } else { false } }
            #expect(sends == [.send(g, frame, attempt: attempt + 1)])
            attempt += 1
            h.feed(.transportFrame(g, RelayFrames.pong))  // keep the watchdog quiet
        }
        h.stop()
        h.finish()
    }

    @Test func permanentSendFailureFailsTheConnection() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.sendFailed(g, frame: .text("{}"), attempt: 1, transient: false, reason: "EPIPE"))
        let actions = h.takeActions()
        #expect(actions.prefix(2) == [
            .connectionFailed(g, .sendFailed("EPIPE")),
            .closeTransport(g, code: 1001, reason: "send failed: EPIPE"),
        ])
        h.stop()
        h.finish()
    }

    @Test func heartbeatEveryFiveSecondsOnlyAfterRegistration() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.advance(by: .seconds(6))
        #expect(!h.takeActions().contains { $0.sentMessage == .heartbeat(HeartbeatPayload()) },
                "no heartbeat before registration")
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        var times: [Moment] = []
        for _ in 0..<4 {
            h.advance(by: .seconds(5))
            for (t, a) in h.takeTimedActions() where a.sentMessage == .heartbeat(HeartbeatPayload()) { times.append(t) }
            h.feed(.transportFrame(Generation(1), RelayFrames.pong))
        }
        #expect(times == [.seconds(11), .seconds(16), .seconds(21), .seconds(26)])
        h.stop()
        h.finish()
    }

    @Test func watchdogFailsTheConnectionAfterFifteenSecondsOfInboundSilence() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.advance(to: Moment(nanoseconds: 14_999_999_999))
        #expect(!h.takeActions().contains { if case .connectionFailed = $0 { true } else { false } })
        h.advance(to: .seconds(15))
        let actions = h.takeActions()
        #expect(actions.contains(.connectionFailed(g, .watchdog)))
        #expect(actions.contains(.closeTransport(g, code: 1001, reason: "watchdog: no inbound traffic")))
        h.stop()
        h.finish()
    }

    @Test func inboundTrafficPushesTheWatchdogBack() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.advance(to: .seconds(10))
        h.skip(.send)
        h.feed(.transportFrame(g, RelayFrames.pong))
        h.advance(to: Moment(nanoseconds: 24_999_999_999))
        #expect(!h.takeActions().contains { if case .connectionFailed = $0 { true } else { false } })
        h.advance(to: .seconds(25))
        #expect(h.takeActions().contains(.connectionFailed(g, .watchdog)))
        h.stop()
        h.finish()
    }

    @Test func textPingFromTheRelayIsAnsweredWithPong() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.transportFrame(g, RelayFrames.text(.ping)))
        #expect(h.takeSentMessages().map(\.message) == [.pong])
        h.stop()
        h.finish()
    }

    @Test func reconnectFollowsTheLadderAndResetsOnRegistration() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        var opens: [Moment] = []
        // Every handshake times out: attempts at 0, then 10 s later immediately, then +0.5 s (±15 %), ...
        for _ in 0..<6 {
            h.advanceToNextTimer()
            for (t, a) in h.takeTimedActions() { if case .openTransport = a { opens.append(t) } }
        }
        #expect(opens.count >= 3)
        #expect(opens[0] == .seconds(10), "first reconnect is immediate")
        let second = (opens[1] - opens[0]).seconds
        #expect(second >= 10.425 && second <= 10.575, "handshake 10 s + 0.5 s ±15 %: \(second)")
        let third = (opens[2] - opens[1]).seconds
        #expect(third >= 10.85 && third <= 11.15, "handshake 10 s + 1 s ±15 %: \(third)")
        // A successful registration resets the ladder: the next failure reconnects at once.
        #expect(h.machine.phase == .waitingToReconnect(attempt: 4))
        #expect(h.advanceToNextTimer() == .reconnect(attempt: 4))
        h.skip(.openTransport, .phaseChanged)
        let g = h.machine.lastGeneration
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        #expect(h.machine.reconnectAttempt == 0)
        h.feed(.transportClosed(g, code: nil, reason: "reset"))
        #expect(h.takeActions().contains { if case .openTransport(g.next, _, _) = $0 { true } else { false } })
        h.stop()
        h.finish()
    }
}
