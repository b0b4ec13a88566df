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

    @Test func rateLimitDropsTheExcessSilentlyAndRefills() throws {
        var h = RelayHarness()
        let (c, _) = try h.phone()   // the register used one token
        var pongs = 0
        for _ in 0..<60 { pongs += h.send(c, .ping).messages(to: c).count }
        #expect(pongs == 49)
        h.advance(by: .milliseconds(200))                     // +5 tokens
        pongs = 0
        for _ in 0..<10 { pongs += h.send(c, .ping).messages(to: c).count }
        #expect(pongs == 5)
    }
}
