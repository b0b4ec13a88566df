import DevRelay
import RelayProtocol
import Testing

@Suite struct RelayUpgradeTests {
    func refusal(_ request: UpgradeRequest) -> Int? {
        var h = RelayHarness()
        let actions = h.feed(.upgrade(ConnectionID(1), request))
        return actions.compactMap { if case .refuseUpgrade(_, let s, _) = $0 { s } else { nil } }.first
    }

    @Test func acceptsAWellFormedPhone() {
        var h = RelayHarness()
        let actions = h.feed(.upgrade(ConnectionID(1), RelayHarness.request(kind: .mobile, device: phoneId.uppercased(), target: desktopId)))
        #expect(actions.contains(.acceptUpgrade(ConnectionID(1))))
        let conn = h.relay.connections[ConnectionID(1)]
        #expect(conn?.deviceId == phoneId)   // lower-cased
        #expect(conn?.userId == userA)
        #expect(conn?.kind == .mobile)
        #expect(conn?.targetDesktopDeviceId == desktopId)
        #expect(actions.contains(.armTimer(.idle(ConnectionID(1)), deadline: .seconds(60))))
        #expect(actions.contains { if case .log(let l) = $0 { l.contains("accepted mobile") } else { false } })
    }

    @Test func missingOrMalformedBearerIs401() {
        let base = RelayHarness.request(kind: .mobile, device: phoneId)
        var noAuth = base
        noAuth.headers.removeAll { $0.name == "Authorization" }
        #expect(refusal(noAuth) == 401)
        for bad in ["Basic abc", "Bearer", "Bearer a.b", "Bearer a.!!!.c", "Bearer a.\(UpgradeCheck.base64URLEncode(Array("[1]".utf8))).c",
                    "Bearer a.\(UpgradeCheck.base64URLEncode(Array("{\"x\":1}".utf8))).c"] {
            var r = base
            r.headers[0] = UpgradeHeader("Authorization", bad)
            #expect(refusal(r) == 401, "\(bad)")
        }
    }

    @Test func headerNamesAreCaseInsensitive() {
        let r = UpgradeRequest(headers: [UpgradeHeader("authorization", "Bearer \(RelayHarness.jwt())"), UpgradeHeader("x-device-id", phoneId)])
        #expect(refusal(r) == nil)
    }

    @Test func missingDeviceIdIs401() {
        var r = RelayHarness.request(kind: .mobile, device: phoneId)
        r.headers.removeAll { $0.name == "X-Device-ID" }
        #expect(refusal(r) == 401)
    }

    @Test func wrongPathIs404AndUnknownClientTypeIs401() {
        var r = RelayHarness.request(kind: .mobile, device: phoneId)
        r.path = "/ws/other"
        #expect(refusal(r) == 404)
        r.path = "/ws/device-link?x=1"
        #expect(refusal(r) == nil)
        r.headers[3] = UpgradeHeader("X-Client-Type", "watch")
        #expect(refusal(r) == 401)
    }

    @Test func deviceIdClaimMustMatchHeader() {
        func with(_ claim: String) -> UpgradeRequest {
            UpgradeRequest(headers: [UpgradeHeader("Authorization", "Bearer \(RelayHarness.jwt(extra: ["device_id": .string(claim)]))"),
                                     UpgradeHeader("X-Device-ID", phoneId)])
        }
        #expect(refusal(with(phoneId.uppercased())) == nil)
        #expect(refusal(with(desktopId)) == 401)
    }

    @Test func tbhClaimMustBeSHA256OfTokenBinding() {
        let digest = UpgradeCheck.sha256(Array(phoneId.utf8))
        func with(_ tbh: String, binding: String? = phoneId) -> UpgradeRequest {
            var h = [UpgradeHeader("Authorization", "Bearer \(RelayHarness.jwt(extra: ["tbh": .string(tbh)]))"),
                     UpgradeHeader("X-Device-ID", phoneId)]
            if let binding { h.append(UpgradeHeader("X-Token-Binding", binding)) }
            return UpgradeRequest(headers: h)
        }
        #expect(refusal(with(UpgradeCheck.base64URLEncode(digest))) == nil)
        #expect(refusal(with(UpgradeCheck.base64URLEncode(digest) + "=")) == nil)
        #expect(refusal(with(hexString(digest))) == nil)
        #expect(refusal(with(UpgradeCheck.base64URLEncode(digest), binding: desktopId)) == 401)
        #expect(refusal(with(UpgradeCheck.base64URLEncode(digest), binding: nil)) == 401)
        #expect(refusal(with("not-a-digest")) == 401)
    }

    @Test func sha256MatchesTheKnownVector() {
        #expect(hexString(UpgradeCheck.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func base64URLRoundTrips() {
        var rng = SeededRandom(seed: 3)
        for n in 0..<20 {
            let b = rng.bytes(n)
            #expect(UpgradeCheck.base64URLDecode(Substring(UpgradeCheck.base64URLEncode(b))) == b)
        }
        #expect(UpgradeCheck.base64URLDecode("a") == nil)
        #expect(UpgradeCheck.base64URLDecode("ab=c") == nil)
    }
}

@Suite struct RelayConnectionLifeTests {
    @Test func sameDeviceAgainClosesTheOlderSocketWithAnEmptyCloseFrame() throws {
        var h = RelayHarness()
        let (old, _) = try h.phone()
        let new = h.open(.mobile, device: phoneId, target: desktopId)
        #expect(h.log.closes(of: old).count == 1)
        #expect(h.log.closes(of: old).first?.code == nil)
        #expect(h.relay.connections[old] == nil)
        #expect(h.relay.connection(userId: userA, deviceId: phoneId)?.id == new)
    }

    @Test func aSilentSocketIsDroppedAfter60Seconds() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        h.advance(to: .seconds(50))
        h.send(c, .heartbeat(HeartbeatPayload()))          // frame at 50 s
        var actions = h.advance(to: .seconds(109))
        #expect(actions.closes(of: c).isEmpty)
        #expect(actions.contains(.armTimer(.idle(c), deadline: .seconds(110))))
        actions = h.advance(to: .seconds(110))
        #expect(actions.closes(of: c).count == 1)
        #expect(h.relay.connections[c] == nil)
    }

    @Test func peerCloseForgetsTheConnectionAndStaleInputsAreIgnored() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        h.feed(.closed(c, code: 1001, reason: "bye"))
        #expect(h.relay.connections[c] == nil)
        let actions = h.send(c, .ping)
        #expect(actions.frames(to: c).isEmpty)
        #expect(h.feed(.closed(c, code: 1001, reason: "again")).allSatisfy { if case .log = $0 { true } else { false } })
    }

    @Test func textPingAndHeartbeatGetPong() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()
        #expect(h.send(c, .ping).messages(to: c) == [.pong])
        #expect(h.send(c, .heartbeat(HeartbeatPayload(activeSessionId: "s"))).messages(to: c) == [.pong])
    }

    @Test func rateLimitRefusesTheExcessOutLoudAndRefills() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()   // the register used one token
        var pongs = 0, refused = 0
        var logs: [String] = []
        for _ in 0..<60 {
            let actions = h.send(c, .ping)
            pongs += actions.messages(to: c).filter { $0 == .pong }.count
            refused += actions.errors(to: c).filter { $0 == .rateLimited }.count
            logs += actions.compactMap { if case .log(let l) = $0, l.contains("rate limit") { l } else { nil } }
        }
        #expect(pongs == 49)
        #expect(refused == 11, "every frame over the limit is answered, none dropped")
        #expect(logs.count == 1, "the log names the burst once: \(logs)")
        let text = try #require(h.send(c, .ping).messages(to: c).compactMap { if case .error(let e) = $0 { e.message } else { nil } }.first)
        #expect(text.contains("ping not processed") && text.contains("retry after 40 ms"), "\(text)")
        h.advance(by: .milliseconds(200))                     // +5 tokens
        pongs = 0
        refused = 0
        for _ in 0..<10 {
            let actions = h.send(c, .ping)
            pongs += actions.messages(to: c).filter { $0 == .pong }.count
            refused += actions.errors(to: c).filter { $0 == .rateLimited }.count
        }
        #expect(pongs == 5)
        #expect(refused == 5)
    }

    @Test func anRpcOverTheLimitGetsItsOwnErrorResponseWithTheTraceparent() throws {
        var h = RelayHarness()
        _ = h.desktop()
        let (c, _) = try h.phone()
        for _ in 0..<49 { h.send(c, .ping) }
        let trace = try TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        let actions = h.send(c, .rpcRequest(RpcRequest(id: "R-limited", method: "system.ping", traceparent: trace)))
        let responses = actions.messages(to: c).compactMap { if case .rpcResponse(let r) = $0 { r } else { nil } }
        let response = try #require(responses.first)
        #expect(response.id == "R-limited")
        #expect(response.error?.code == RpcErrorCode.rateLimited.rawValue)
        #expect(response.error?.data?["retryAfterMs"] == .int(40))
        #expect(response.isFinal == true)
        #expect(response.traceparent == trace)
        #expect(actions.allSatisfy { if case .send(let d, _) = $0 { d == c } else { true } }, "nothing went to the desktop")
    }

    @Test func anInProcessPeerIsNotRateLimited() throws {
        var h = RelayHarness()
        var request = RelayHarness.request(kind: .desktop, device: desktopId)
        request.inProcess = true
        let d = ConnectionID(99)
        #expect(h.feed(.upgrade(d, request)).contains(.acceptUpgrade(d)))
        #expect(h.relay.connections[d]?.isRateLimited == false)
        var pongs = 0
        for _ in 0..<500 { pongs += h.send(d, .ping).messages(to: d).filter { $0 == .pong }.count }
        #expect(pongs == 500)
        let (c, _) = try h.phone()
        #expect(h.relay.connections[c]?.isRateLimited == true)
    }
}
