import DevRelay
import RelayProtocol
import Testing

@Suite struct RelayFaultTests {
    func script(_ text: String) throws -> [RelayFault] {
        try FaultScript.parse(text).schedule.compactMap { if case .relay(let f) = $0.fault { f } else { nil } }
    }

    @Test func dropToClientByTypeWithCount() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        for f in try script("at 0s relay drop to-client type=pong count=2") { h.feed(.fault(f)) }
        #expect(h.send(c, .ping).messages(to: c).isEmpty)
        #expect(h.send(c, .ping).messages(to: c).isEmpty)
        #expect(h.send(c, .ping).messages(to: c) == [.pong])
    }

    @Test func dropFromClientInAWindow() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        for f in try script("from 10s to 20s relay drop from-client type=ping") { h.feed(.fault(f)) }
        h.advance(to: .seconds(15))
        #expect(h.send(c, .ping).messages(to: c).isEmpty)
        h.advance(to: .seconds(20))
        #expect(h.send(c, .ping).messages(to: c) == [.pong])
        #expect(h.relay.activeFaults.isEmpty)
    }

    @Test func delayToClientHoldsTheFrame() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        for f in try script("at 0s relay delay to-client type=rpc.response by=2s") { h.feed(.fault(f)) }
        let now = h.send(c, .rpcRequest(RpcRequest(id: "1", method: "system.ping")))
        #expect(now.frames(to: c).isEmpty)
        #expect(h.advance(by: .milliseconds(1999)).frames(to: c).isEmpty)
        #expect(h.advance(by: .milliseconds(1)).messages(to: c).count == 1)
    }

    @Test func delayFromClientProcessesLater() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        h.feed(.fault(RelayFault(.delay(FrameMatch(direction: .fromClient, messageType: "heartbeat"), by: .seconds(1)))))
        #expect(h.send(c, .heartbeat(HeartbeatPayload())).frames(to: c).isEmpty)
        #expect(h.advance(by: .seconds(1)).messages(to: c) == [.pong])
    }

    @Test func invalidResumeForTheNextNRegisters() throws {
        var h = RelayHarness()
        for f in try script("on register relay invalid-resume count=2") { h.feed(.fault(f)) }
        let c = h.open(.mobile, device: phoneId)
        let reg = RegisterPayload(deviceId: phoneId, deviceName: "P", relayProtocolVersion: "1.6")
        #expect(h.send(c, .register(reg)).errors(to: c) == [.invalidResume])
        #expect(h.send(c, .register(reg)).errors(to: c) == [.invalidResume])
        #expect(h.send(c, .register(reg)).messages(to: c).contains { if case .registered = $0 { true } else { false } })
    }

    @Test func ownershipFailedFollowsTheNextRegistered() throws {
        var h = RelayHarness()
        for f in try script("at 0s relay ownership-failed") { h.feed(.fault(f)) }
        let c = h.open(.mobile, device: phoneId)
        let m = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", relayProtocolVersion: "1.6"))).messages(to: c)
        #expect(m.count == 2)
        if case .registered = m.first {} else { Issue.record("registered first") }
        if case .error(let e)? = m.last { #expect(e.code == .deviceOwnershipFailed) } else { Issue.record("then the error") }
        #expect(h.relay.activeFaults.isEmpty)
    }

    @Test func closeClientAtOnceWithCode() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (c, _) = try h.phone()
        let actions = h.feed(.fault(try #require(script("at 5s relay close-client code=4001").first)))
        #expect(actions.closes(of: c).first?.code == 4001)
        #expect(actions.closes(of: d).isEmpty)
    }

    @Test func closeClientOnATriggerMessage() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        for f in try script("on rpc.request method=system.ping relay close-client") { h.feed(.fault(f)) }
        #expect(h.send(c, .rpcRequest(RpcRequest(id: "1", method: "session.list"))).closes(of: c).isEmpty)
        let a = h.send(c, .rpcRequest(RpcRequest(id: "2", method: "system.ping")))
        #expect(a.closes(of: c).count == 1 && a.closes(of: c).first?.code == nil)
    }

    @Test func restartLosesEverySession() throws {
        var h = RelayHarness()
        let (c, r) = try h.phone()
        let a = h.feed(.fault(try #require(script("at 1m relay restart").first)))
        #expect(a.closes(of: c).first?.code == 1012)
        #expect(h.relay.sessions.isEmpty && h.relay.connections.isEmpty)
        let c2 = h.open(.mobile, device: phoneId)
        let m = h.send(c2, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", relaySessionId: r.sessionId, resumeToken: r.resumeToken,
                                                     relayProtocolVersion: "1.6")))
        #expect(m.errors(to: c2) == [.invalidResume])
    }

    @Test func refuseUpgrades() throws {
        var h = RelayHarness()
        h.feed(.fault(try #require(script("at 0s relay refuse-upgrades status=429 count=1").first)))
        let a = h.feed(.upgrade(ConnectionID(9), RelayHarness.request(kind: .mobile, device: phoneId)))
        #expect(a.contains { if case .refuseUpgrade(_, 429, _) = $0 { true } else { false } })
        _ = h.open(.mobile, device: phoneId)
    }
}
