import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC A9: recovery epochs, network path changes, background and foreground, `desktop_online` pushes.
@Suite struct A9RecoveryTests {
    private func opens(_ actions: [ClientAction]) -> [Generation] {
        actions.compactMap { if case .openTransport(let g, _, _) = $0 { g } else { nil } }
    }

    private func probes(_ actions: [ClientAction]) -> [(Generation, RpcRequest)] {
        actions.compactMap { a in
            guard case .send(let g, _, _) = a, case .rpcRequest(let r)? = a.sentMessage, r.method == "system.ping" else { return nil }
            return (g, r)
        }
    }

    private func index(_ actions: [ClientAction], _ match: (ClientAction) -> Bool) -> Int? {
        actions.firstIndex(where: match)
    }

    private func stopAndFinish(_ h: inout ClientHarness, failingCalls: [CallID] = [],
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        h.stop(failingCalls: failingCalls, sourceLocation: sourceLocation)
        h.finish(sourceLocation: sourceLocation)
    }

    /// Answers the newest probe on the current generation with `result` or the relay's -32010.
    private func answerProbe(_ h: inout ClientHarness, _ probe: (Generation, RpcRequest), online: Bool) {
        let frame = online
            ? RelayFrames.response(id: probe.1.id, result: ["pong": true], traceparent: probe.1.traceparent)
            : RelayFrames.errorResponse(id: probe.1.id, code: -32010, message: "Desktop is offline", traceparent: probe.1.traceparent)
        h.feed(.transportFrame(probe.0, frame))
    }

    @Test func lostPathClosesTheRelayFailsItsCallsAndOpensAnEpochThatEndsOffline() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list")))
        h.skip(.send)
        h.advance(to: .seconds(2))
        h.feed(.networkPath(.unsatisfied))
        #expect(h.takeActions() == [
            .closeTransport(g, code: 1001, reason: "network path lost"),
            .callCompleted(CallID(1), .failure(.connectionClosed("network path lost"))),
            .epochOpened(epoch: 1, reason: .pathLost, deadline: .seconds(92)),
            .desktopStatusChanged(.recovering(epoch: 1)),
            .desktopStatusChanged(.temporarilyOffline(.noNetworkPath)),
            .phaseChanged(.suspended(.noNetworkPath)),
        ])
        #expect(h.armedTimers.isEmpty, "no reconnect, no probe, no heartbeat without a path")
        h.advance(by: .seconds(120))
        #expect(h.takeActions().isEmpty)
        try stopAndFinish(&h)
    }

    @Test func restoredPathOpensOneSocketInAFreshEpochAndProbesAfterRegistration() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.feed(.networkPath(.unsatisfied))
        h.skip(.closeTransport, .epochOpened, .desktopStatusChanged, .phaseChanged)
        h.advance(to: .seconds(30))
        h.feed(.networkPath(.satisfied(.cellular)))
        let actions = h.takeActions()
        #expect(opens(actions) == [Generation(2)])
        #expect(actions.contains(.epochOpened(epoch: 2, reason: .pathRestored, deadline: .seconds(120))))
        h.feed(.transportOpened(Generation(2)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(2), RelayFrames.registered()))
        let probe = try #require(probes(h.takeActions()).first)
        answerProbe(&h, probe, online: true)
        #expect(h.takeActions() == [.desktopStatusChanged(.online)])
        #expect(h.machine.epoch == nil)
        try stopAndFinish(&h)
    }

    @Test func interfaceSwitchClosesTheOldRelayAndFailsItsCallsBeforeExactlyOneReplacementOpens() throws {
        var h = ClientHarness()
        h.feed(.networkPath(.satisfied(.wifi)))
        let g1 = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list")))
        h.skip(.send)
        h.feed(.call(CallRequest(callId: CallID(2), method: "job.list")))
        h.skip(.send)
        h.advance(to: .seconds(7))
        h.skip(.send)
        h.feed(.networkPath(.satisfied(.cellular)))
        let actions = h.takeActions()
        #expect(opens(actions) == [g1.next], "exactly one replacement")
        let close = try #require(index(actions) { $0 == .closeTransport(g1, code: 1001, reason: "network interface changed") })
        let failed = actions.indices.filter {
            if case .callCompleted(_, .failure(.connectionClosed)) = actions[$0] { true } else { false }
        }
        let open = try #require(index(actions) { if case .openTransport = $0 { true } else { false } })
        #expect(failed.count == 2)
        #expect(close < failed.min()! && failed.max()! < open, "close and fail first, then open: \(actions)")
        // The old socket's late news changes nothing; still exactly one live generation.
        h.feed(.transportClosed(g1, code: 1001, reason: "closed"))
        #expect(h.takeActions().map(\.kind) == [.diagnostic], "a stale close is only noted")
        h.feed(.transportFrame(g1, RelayFrames.pong))
        #expect(opens(h.takeActions()).isEmpty)
        #expect(h.machine.generation == g1.next)
        try stopAndFinish(&h)
    }

    @Test func interfaceSwitchDiscardsTheEpochAndTheReplacementGetsAFresh90SecondWindow() throws {
        var h = ClientHarness()
        h.feed(.networkPath(.satisfied(.wifi)))
        h.connectAndRegister()
        h.advance(to: .seconds(10))
        h.skip(.send)
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))  // epoch 1: deadline 100 s
        #expect(h.machine.epoch?.deadline == .seconds(100))
        h.skip(.epochOpened, .desktopStatusChanged, .send)
        h.advance(to: .seconds(50))
        h.skip(.connectionFailed, .closeTransport, .openTransport, .phaseChanged)
        h.feed(.networkPath(.satisfied(.cellular)))
        #expect(h.takeActions().contains(.epochOpened(epoch: 2, reason: .interfaceSwitch, deadline: .seconds(140))))
        #expect(h.deadline(of: .epochDeadline(epoch: 1)) == nil, "the old epoch is discarded")
        // The replacement registers; the desktop keeps answering -32010 until the fresh deadline.
        let g = h.machine.lastGeneration
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.registered()))
        var statusChanges: [(Moment, DesktopStatus)] = []
        while h.now < .seconds(150) {
            for (t, a) in h.takeTimedActions() {
                if case .desktopStatusChanged(let s) = a { statusChanges.append((t, s)) }
                if case .send = a, let p = probes([a]).first { answerProbe(&h, p, online: false) }
            }
            h.feed(.transportFrame(g, RelayFrames.pong))
            h.advance(by: .seconds(1))
        }
        #expect(h.takeSentMessages().map(\.message.typeName) == ["heartbeat"], "the last second sent a heartbeat only")
        #expect(statusChanges.last?.0 == .seconds(140))
        #expect(statusChanges.last?.1 == .temporarilyOffline(.deadline))
        try stopAndFinish(&h)
    }

    @Test func probesBackOffOneTwoFourEightSixteenSecondsInsideTheEpoch() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        var probeTimes: [Double] = []
        while h.now < .seconds(89) {
            for (t, a) in h.takeTimedActions() {
                if let p = probes([a]).first {
                    probeTimes.append(t.seconds)
                    answerProbe(&h, p, online: false)
                }
            }
            h.feed(.transportFrame(g, RelayFrames.pong))
            h.advance(by: .milliseconds(500))
        }
        #expect(Array(probeTimes.prefix(7)) == [0, 1, 3, 7, 15, 31, 47])
        #expect(probeTimes.allSatisfy { $0 < 90 })
        try stopAndFinish(&h)
    }

    /// A desktop that ignores pings: every probe times out after 3 s and its A8 timeout replaces the socket;
    /// the new registration does not ping at once (it used to, so the gaps stayed 3 s): the next probe
    /// waits out the backoff, so the gaps are 3 s + 1, 2, 4, 8, 16, 16... inside the 90 s window.
    @Test func probesBackOffWhenTheDesktopIgnoresPingsAndEachTimeoutReplacesTheSocket() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.advance(to: .seconds(10))
        h.skip(.send)
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))  // epoch 1, deadline 100 s
        var probeTimes: [Double] = []
        var probeGenerations: [Generation] = []
        var opened = 0
        // Every action is read into the inbox as it comes and looked at in order (with its time).
        var inbox: [(time: Moment, action: ClientAction)] = []
        while h.now < .seconds(105) {
            inbox += h.takeTimedActions()
            while !inbox.isEmpty {
                let (t, a) = inbox.removeFirst()
                if case .openTransport(let g, _, _) = a {
                    opened += 1
                    h.feed(.transportOpened(g))
                    inbox += h.takeTimedActions()
                    h.feed(.transportFrame(g, RelayFrames.registered()))
                    inbox += h.takeTimedActions()
                }
                if let p = probes([a]).first {
                    probeTimes.append(t.seconds - 10)
                    probeGenerations.append(p.0)
                }
            }
            if let g = h.machine.generation {  // the relay is alive
                h.feed(.transportFrame(g, RelayFrames.pong))
                inbox += h.takeTimedActions()
            }
            h.advance(by: .milliseconds(250))
        }
        #expect(probeTimes == [0, 4, 9, 16, 27, 46, 65, 84], "3 s timeout + backoff 1, 2, 4, 8, 16, 16, 16 s")
        #expect(Set(probeGenerations).count == probeGenerations.count, "each timeout replaced the socket (A8)")
        #expect(opened == 8, "one replacement per timed-out probe, not one every 3 s")
        #expect(h.machine.desktopStatus == .temporarilyOffline(.deadline))
        try stopAndFinish(&h)
    }

    /// The relay's `online` and a new epoch probe at once even while a backoff runs; nothing else does.
    @Test func onlyOnlineANewEpochOrTheForegroundCheckProbeAtOnce() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        let first = try #require(probes(h.takeActions()).first)
        answerProbe(&h, first, online: false)  // backoff 1 s
        h.advance(by: .milliseconds(200))
        h.feed(.transportClosed(g, code: 1006, reason: "gone"))  // the socket drops during the backoff
        let reopen = h.takeActions()
        let g2 = try #require(opens(reopen).first)
        h.feed(.transportOpened(g2))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g2, RelayFrames.registered()))
        #expect(probes(h.takeActions()).isEmpty, "a new registration waits out the backoff")
        h.advance(to: .seconds(1))
        #expect(probes(h.takeActions()).count == 1, "the backoff timer probes on the new socket")
        // It fails too; a new epoch (a push) probes at once, whatever the old epoch's backoff.
        h.advance(by: .milliseconds(100))
        let second = try #require(h.machine.epoch?.probeInFlight)
        h.feed(.transportFrame(g2, RelayFrames.errorResponse(id: second, code: -32010, message: "Desktop is offline", traceparent: nil)))
        #expect(h.deadline(of: .probe(epoch: 1)) == .seconds(3.1), "second failure: 2 s backoff")
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        #expect(probes(h.takeActions()).count == 1, "a new epoch probes at once")
        #expect(h.machine.epoch?.id == 2)
        try stopAndFinish(&h)
    }

    @Test func relayOnlinePingsAtOnceAndDisconnectedShowsTemporarilyOffline() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        let first = try #require(probes(h.takeActions()).first)
        answerProbe(&h, first, online: false)  // next probe in 1 s
        h.advance(by: .milliseconds(300))
        h.feed(.transportFrame(g, RelayFrames.event("device-status", payload: ["deviceId": .string(TestIdentity.desktopId), "status": "online"], eventId: 5)))
        let actions = h.takeActions()
        #expect(probes(actions).count == 1, "online: ping immediately, not after the backoff")
        #expect(h.deadline(of: .probe(epoch: 1)) == nil)
        h.feed(.transportFrame(g, RelayFrames.event("device-status", payload: ["deviceId": .string(TestIdentity.desktopId), "status": "disconnected"], eventId: 6)))
        let after = h.takeActions()
        #expect(after.contains(.desktopStatusChanged(.temporarilyOffline(.relayReportedDisconnected))))
        #expect(h.machine.epoch == nil)
        try stopAndFinish(&h)
    }

    @Test func unansweredEpochShowsTheDesktopTemporarilyOfflineAtTheDeadline() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.advance(to: .seconds(1))
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        var offlineAt: Moment?
        while h.now < .seconds(95) {
            for (t, a) in h.takeTimedActions() {
                if a == .desktopStatusChanged(.temporarilyOffline(.deadline)) { offlineAt = t }
                if let p = probes([a]).first { answerProbe(&h, p, online: false) }
            }
            h.feed(.transportFrame(g, RelayFrames.pong))
            h.advance(by: .seconds(1))
        }
        #expect(h.takeSentMessages().map(\.message.typeName) == ["heartbeat"], "the last second sent a heartbeat only")
        #expect(offlineAt == .seconds(91))
        try stopAndFinish(&h)
    }

    @Test func backgroundDisconnectsEveryRelayGracefullyAndFailsItsCalls() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list")))
        h.skip(.send)
        h.feed(.appState(.background))
        #expect(h.takeActions() == [
            .closeTransport(g, code: 1001, reason: "app in background"),
            .callCompleted(CallID(1), .failure(.connectionClosed("app in background"))),
            .phaseChanged(.suspended(.background)),
        ])
        h.advance(by: .seconds(600))
        #expect(opens(h.takeActions()).isEmpty, "no reconnect in the background")
        try stopAndFinish(&h)
    }

    @Test func backgroundKeepsTheRelayWhileDesktopMediaIsPlaying() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.desktopMediaPlaying(true))
        h.feed(.appState(.background))
        #expect(h.takeActions().isEmpty)
        #expect(h.machine.phase == .registered(g, relaySessionId: "NEWSESSION0123456789abcdefABCDEF"))
        try stopAndFinish(&h)
    }

    @Test func foregroundRecoveryStartsOneAndAHalfSecondsLaterAndReconnects() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.advance(to: .seconds(10))
        h.skip(.send)
        h.feed(.appState(.background))
        h.skip(.closeTransport, .phaseChanged)
        h.advance(to: .seconds(100))
        h.feed(.appState(.inactive))
        h.feed(.appState(.active))
        #expect(h.deadline(of: .foregroundRecovery) == .seconds(101.5))
        h.advance(to: Moment(nanoseconds: 101_499_999_999))
        #expect(h.takeActions().isEmpty)
        h.advance(to: .seconds(101.5))
        let actions = h.takeActions()
        #expect(actions.contains(.epochOpened(epoch: 1, reason: .foreground, deadline: .seconds(191.5))))
        #expect(opens(actions) == [Generation(2)])
        try stopAndFinish(&h)
    }

    @Test func foregroundKeepsAnExistingSocketOnlyIfAPingAnswersWithinThreeSeconds() throws {
        // Kept: media kept the socket in the background; the ping answers at 2.9 s.
        var kept = ClientHarness()
        let g = kept.connectAndRegister()
        kept.feed(.desktopMediaPlaying(true))
        kept.feed(.appState(.background))
        kept.advance(to: .seconds(4))
        kept.feed(.transportFrame(g, RelayFrames.pong))
        kept.feed(.appState(.active))
        kept.advance(to: .seconds(5.5))
        let probe = try #require(probes(kept.takeActions()).first)
        #expect(probe.0 == g)
        kept.advance(to: .seconds(8.4))
        answerProbe(&kept, probe, online: true)
        let keptActions = kept.takeActions()
        #expect(keptActions == [.desktopStatusChanged(.online)])
        #expect(kept.machine.generation == g)
        try stopAndFinish(&kept)

        // Replaced: no answer; at 3 s the generation is closed and exactly one replacement opens.
        var replaced = ClientHarness()
        let r = replaced.connectAndRegister()
        replaced.feed(.desktopMediaPlaying(true))
        replaced.feed(.appState(.background))
        replaced.advance(to: .seconds(4))
        replaced.feed(.transportFrame(r, RelayFrames.pong))
        replaced.feed(.appState(.active))
        replaced.advance(to: .seconds(5.5))
        #expect(probes(replaced.takeActions()).count == 1)
        replaced.advance(to: Moment(nanoseconds: 8_499_999_999))
        #expect(opens(replaced.takeActions()).isEmpty)
        replaced.advance(to: .seconds(8.5))
        let actions = replaced.takeActions()
        #expect(actions.contains { if case .connectionFailed(r, .rpcTimeout) = $0 { true } else { false } })
        #expect(actions.contains(.closeTransport(r, code: 1001, reason: actions.compactMap {
            if case .closeTransport(r, _, let reason) = $0 { reason } else { nil }
        }.first ?? "")))
        #expect(opens(actions) == [r.next])
        try stopAndFinish(&replaced)
    }

    @Test func desktopOnlinePushStartsTheSameRecoveryImmediately() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.feed(.appState(.background))
        h.skip(.closeTransport, .phaseChanged)
        h.advance(to: .seconds(20))
        h.feed(.push(.desktopOnline(desktopId: TestIdentity.desktopId)))
        let actions = h.takeActions()
        #expect(actions.contains(.epochOpened(epoch: 1, reason: .desktopOnlinePush, deadline: .seconds(110))))
        #expect(opens(actions) == [Generation(2)], "no 1.5 s delay")
        // A push for another desktop changes nothing.
        h.feed(.push(.desktopOnline(desktopId: "another-desktop")))
        #expect(h.takeActions().count == 1)
        try stopAndFinish(&h)
    }
}
