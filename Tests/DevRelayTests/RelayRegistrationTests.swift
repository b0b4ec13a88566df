import DevRelay
import RelayProtocol
import Testing

@Suite struct RelayRegistrationTests {
    @Test func registerCreatesASessionWith32And48CharacterIds() throws {
        var h = RelayHarness()
        let (c, r) = try h.phone()
        #expect(r.sessionId.count == 32 && isAlphanumeric(r.sessionId))
        #expect(r.resumeToken.count == 48 && isAlphanumeric(r.resumeToken))
        #expect(r.relaySessionId == r.sessionId)
        #expect(r.expiresAt == "2026-01-16T12:00:00.000Z")  // origin + 24 h
        #expect(h.relay.sessions[r.sessionId]?.deviceId == phoneId)
        #expect(h.relay.connections[c]?.sessionId == r.sessionId)
    }

    @Test func legacyClientsGetTheLegacyForm() {
        var h = RelayHarness()
        let c = h.open(.mobile, device: phoneId)
        let actions = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "Old phone")), form: .legacy)
        let json = actions.json(to: c).first
        #expect(json?["type"] == "registered")
        #expect(json?["relaySessionId"] == nil)
        #expect(json?["sessionId"]?.stringValue?.count == 32)
        #expect(h.relay.connections[c]?.form == .legacy)
    }

    @Test func validResumeAnswersResumedWithoutANewTokenOrExtension() throws {
        var h = RelayHarness()
        let (c1, r) = try h.phone()
        h.advance(to: .seconds(30))
        h.feed(.closed(c1, code: 1001, reason: ""))
        let c2 = h.open(.mobile, device: phoneId, target: desktopId)
        let actions = h.send(c2, .register(RegisterPayload(deviceId: phoneId.uppercased(), deviceName: "Phone", relaySessionId: r.sessionId,
                                                           resumeToken: r.resumeToken, relayProtocolVersion: "1.6")))
        #expect(actions.messages(to: c2) == [.resumed(Resumed(sessionId: r.sessionId, expiresAt: r.expiresAt))])
        #expect(h.relay.sessions.count == 1)
    }

    @Test func legacyResumeWithSessionIdWorks() throws {
        var h = RelayHarness()
        let c = h.open(.mobile, device: phoneId)
        let reg = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "Old")), form: .legacy).messages(to: c)
        guard case .registered(let r)? = reg.first else { Issue.record("no registered"); return }
        let c2 = h.open(.mobile, device: phoneId)
        let again = h.send(c2, .register(RegisterPayload(deviceId: phoneId, deviceName: "Old", relaySessionId: r.sessionId, resumeToken: r.resumeToken)),
                           form: .legacy)
        #expect(again.messages(to: c2).first == .resumed(Resumed(sessionId: r.sessionId, expiresAt: r.expiresAt)))
    }

    @Test(arguments: ["token", "user", "device", "session", "expired"])
    func invalidResumeKeepsTheSocketOpenAndUnregistered(_ what: String) throws {
        var h = RelayHarness()
        let (c1, r) = try h.phone()
        var token = r.resumeToken
        var session = r.sessionId
        var user = userA
        var device = phoneId
        switch what {
        case "token": token = String(token.reversed())
        case "user": user = "mallory"
        case "device": device = "00000000-0000-4000-8000-000000000000"
        case "session": session = String(session.reversed())
        default:
            h.feed(.closed(c1, code: nil, reason: ""))
            h.advance(by: .seconds(24 * 3600))
        }
        let c2 = h.open(.mobile, device: device, user: user)
        let actions = h.send(c2, .register(RegisterPayload(deviceId: device, deviceName: "P", relaySessionId: session, resumeToken: token,
                                                           relayProtocolVersion: "1.6")))
        #expect(actions.errors(to: c2) == [.invalidResume])
        #expect(actions.closes(of: c2).isEmpty)
        #expect(h.relay.connections[c2]?.isRegistered == false)
        // The client may register again on the same socket.
        let fresh = h.send(c2, .register(RegisterPayload(deviceId: device, deviceName: "P", relayProtocolVersion: "1.6")))
        #expect(fresh.messages(to: c2).contains { if case .registered = $0 { true } else { false } })
    }

    @Test func aSecondSuccessfulRegisterClosesTheSocket() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        let actions = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", relayProtocolVersion: "1.6")))
        #expect(actions.closes(of: c).count == 1)
        #expect(actions.messages(to: c).isEmpty)
        #expect(h.relay.connections[c] == nil)
    }

    @Test func registerDeviceMustMatchTheHeader() {
        var h = RelayHarness()
        let c = h.open(.mobile, device: phoneId)
        let actions = h.send(c, .register(RegisterPayload(deviceId: desktopId, deviceName: "P")))
        #expect(actions.errors(to: c) == [.invalidDeviceId])
        #expect(h.sendText(c, #"{"type":"register","payload":{"deviceName":"P"}}"#).errors(to: c) == [.missingDeviceId])
    }

    @Test func heartbeatAndRpcExtendTheSlidingTTLAndSweepRemovesExpired() throws {
        var h = RelayHarness()
        let (c, r) = try h.phone()
        h.advance(to: .seconds(50))
        h.send(c, .heartbeat(HeartbeatPayload()))
        #expect(h.relay.sessions[r.sessionId]?.expiresAt == .seconds(50 + 86400))
        h.advance(to: .seconds(100))
        h.send(c, .rpcRequest(RpcRequest(id: "1", method: "system.ping")))
        #expect(h.relay.sessions[r.sessionId]?.expiresAt == .seconds(100 + 86400))
        h.send(c, .ping)   // a text ping does not extend it
        #expect(h.relay.sessions[r.sessionId]?.expiresAt == .seconds(100 + 86400))
        h.feed(.closed(c, code: nil, reason: ""))
        h.advance(to: .seconds(100 + 86400 - 1))
        #expect(h.relay.sessions[r.sessionId] != nil)
        h.advance(to: .seconds(100 + 86400 + 300))
        #expect(h.relay.sessions[r.sessionId] == nil)
        #expect(h.timers[.sweep] != nil)
    }

    @Test func sameSeedSameIds() throws {
        var a = RelayHarness(seed: 11), b = RelayHarness(seed: 11), c = RelayHarness(seed: 12)
        let ra = try a.phone().1, rb = try b.phone().1, rc = try c.phone().1
        #expect(ra == rb)
        #expect(ra.sessionId != rc.sessionId)
    }
}

@Suite struct RelayMessageRuleTests {
    @Test func camelCaseViolationIsRejectedAndDropped() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (c, _) = try h.phone()
        let actions = h.sendText(c, #"{"type":"rpc.request","payload":{"id":"1","method":"session.get","params":{"session_id":"x"}}}"#)
        #expect(actions.errors(to: c) == [.invalidPayload])
        #expect(actions.frames(to: d).isEmpty)
    }

    @Test func unknownTypesAndUnparsableJSON() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        #expect(h.sendText(c, #"{"type":"teleport"}"#).errors(to: c) == [.unknownMessageType])
        #expect(h.sendText(c, #"{"type":"registered","sessionId":"x","resumeToken":"y","expiresAt":"z"}"#).errors(to: c) == [.unknownMessageType])
        #expect(h.sendText(c, #"{"type":"ping""#).errors(to: c) == [.invalidJson])
        #expect(h.sendText(c, #"{"type":"rpc.request","payload":{"id":"1"}}"#).errors(to: c) == [.missingMethod])
        #expect(h.sendText(c, #"{"type":"rpc.request"}"#).errors(to: c) == [.missingPayload])
    }

    @Test func errorsCarryAWallClockTimestamp() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        h.advance(to: .seconds(1.5))
        let m = h.sendText(c, "nope").messages(to: c)
        guard case .error(let e)? = m.first else { Issue.record("no error"); return }
        #expect(e.timestamp == "2026-01-15T12:00:01.500Z")
    }

    @Test func requestsBeforeRegisterNeedARegistration() {
        var h = RelayHarness()
        let c = h.open(.mobile, device: phoneId)
        #expect(h.send(c, .rpcRequest(RpcRequest(id: "1", method: "system.ping"))).errors(to: c) == [.authRequired])
    }

    @Test func wallClockFormatsRFC3339WithMilliseconds() {
        #expect(WallClock.rfc3339(epochMilliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(WallClock.rfc3339(epochMilliseconds: 951_782_400_123) == "2000-02-29T00:00:00.123Z")
        #expect(WallClock.rfc3339(epochMilliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(WallClock.rfc3339(originMilliseconds: 1_768_478_400_000, at: .seconds(86400)) == "2026-01-16T12:00:00.000Z")
    }
}
