import DevRelay
import RelayProtocol
import Testing

private let traceparent = try! TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

extension RelayHarness {
    /// A phone's `system.ping` and the response it got (waiting out the desktop's answer delay).
    mutating func ping(_ c: ConnectionID, id: String = "R1", method: String = "system.ping") -> RpcResponse? {
        var actions = send(c, .rpcRequest(RpcRequest(id: id, method: method, params: [:], traceparent: traceparent)))
        actions += advance(by: .seconds(1))
        return actions.messages(to: c).compactMap { if case .rpcResponse(let r) = $0, r.id == id { r } else { nil } }.first
    }

    /// The link codes the relay issued in `actions`.
    static func offers(_ actions: [RelayAction]) -> [LinkCodeOffer] {
        actions.compactMap { if case .linkCodeIssued(let o) = $0 { o } else { nil } }
    }
}

/// Any account, any desktop: the relay simulates the desktop a phone names, for the phone's account,
/// unless told otherwise or a real desktop serves it.
@Suite struct AnyDesktopTests {
    @Test func aRandomAccountAndDesktopGetTheirRPCsAnswered() throws {
        var h = RelayHarness { _ in }
        let desk = "0c5d7e1a-aaaa-4bbb-8ccc-123456789abc"
        let (c, _) = try h.phone(device: "11111111-2222-4333-8444-555555555555", user: "auth0|someone", target: desk)
        let response = h.ping(c)
        let r = try #require(response)
        #expect(r.error == nil)
        #expect(r.result == ["pong": true])
        #expect(r.traceparent?.traceId == traceparent.traceId)
        // One simulated desktop, of that account and ID, registered.
        let sims = h.relay.simulatedDesktops
        #expect(sims.map(\.userId) == ["auth0|someone"])
        #expect(sims.map(\.desktop.wireDeviceId) == [desk])
        #expect(sims.first?.desktop.phase == .ready)
        #expect(h.relay.connection(userId: "auth0|someone", deviceId: desk)?.id.isSimulated == true)
    }

    @Test func severalDesktopsEachWithTheirOwnJobsAndSnapshots() throws {
        var h = RelayHarness { _ in }
        let (a, _) = try h.phone(device: "11111111-0000-4000-8000-00000000000a", target: "d-one")
        let (b, _) = try h.phone(device: "11111111-0000-4000-8000-00000000000b", target: "d-two")
        var actions = h.send(a, .rpcRequest(RpcRequest(id: "J1", method: "actions.createImplementationPlan", params: ["sessionId": "s1"],
                                                        idempotencyKey: "k1", traceparent: traceparent)))
        actions += h.send(b, .event(EventMessage(eventType: EventNames.chatTimelineInterest,
                                                  payload: ["appSessionId": "app", "sessionId": "s2", "active": true])))
        actions += h.advance(by: .seconds(5))
        let toA = actions.events(to: a).map(\.eventType), toB = actions.events(to: b).map(\.eventType)
        #expect(toA.contains(EventNames.jobFinalized) && !toA.contains(EventNames.chatTimelineUpdated))
        #expect(toB.contains(EventNames.chatTimelineUpdated) && !toB.contains(EventNames.jobCreated))
        #expect(actions.events(to: a).allSatisfy { $0.sourceDeviceId == "d-one" })
        #expect(actions.events(to: b).allSatisfy { $0.sourceDeviceId == "d-two" })
        #expect(h.relay.simulatedDesktops.count == 2)
    }

    @Test func anOfflineDesktopReportsDesktopOfflineAndOnlyIt() throws {
        var h = RelayHarness { $0.offlineDesktops = ["d-off"] }
        let (off, _) = try h.phone(device: "11111111-0000-4000-8000-000000000001", target: "d-off")
        let (on, _) = try h.phone(device: "11111111-0000-4000-8000-000000000002", target: "d-on")
        #expect(h.ping(off)?.error?.code == -32010)
        #expect(h.ping(off)?.error?.message == "Desktop is offline")
        #expect(h.ping(on)?.error == nil)
    }

    @Test func aFixedSetSimulatesOnlyThoseDesktops() throws {
        var h = RelayHarness { $0.simulatedDesktops = .only(["d-fixed"]) }
        let (fixed, _) = try h.phone(device: "11111111-0000-4000-8000-000000000001", target: "D-FIXED")
        let (other, _) = try h.phone(device: "11111111-0000-4000-8000-000000000002", target: "d-other")
        #expect(h.ping(fixed)?.error == nil)
        #expect(h.ping(other)?.error?.code == -32010)
    }

    @Test func aRealDesktopTakesOverFromTheSimulatedOneAndGetsTheRequests() throws {
        var h = RelayHarness { _ in }
        let (p, _) = try h.phone()
        #expect(h.ping(p)?.result == ["pong": true])
        let real = h.desktop()
        #expect(h.relay.simulatedDesktops.isEmpty, "the simulated desktop stepped aside")
        let actions = h.send(p, .rpcRequest(RpcRequest(id: "R9", method: "session.list", params: [:], traceparent: traceparent)))
        let forwarded = actions.json(to: real)
        #expect(forwarded.first?["payload"]?["method"] == "session.list")
        #expect(forwarded.first?["payload"]?["clientId"]?.stringValue == phoneId)
        // The real desktop's answer goes back to the phone, clientId stripped.
        let back = h.sendText(real, #"{"type":"rpc.response","payload":{"id":"R9","result":{"sessions":[]},"isFinal":true,"clientId":"\#(phoneId)"}}"#)
        let response = back.json(to: p).first
        #expect(response?["payload"]?["id"] == "R9")
        #expect(response?["payload"]?["clientId"] == nil)
        // PTC1 from the real desktop reaches a phone bound to the session.
        _ = h.send(p, .terminalBind(TerminalBind(sessionId: "t1")))
        let frame = try TerminalFrame(sessionId: "t1", data: Array("ls\n".utf8)).encoded()
        #expect(h.feed(.frame(real, .binary(frame))).frames(to: p) == [.binary(frame)])
    }

    @Test func desktopFaultsReachDesktopsSimulatedLater() throws {
        var h = RelayHarness { _ in }
        for f in try FaultScript.parse("at 0s desktop ignore-pings\n").directives {
            if case .desktop(let d) = f.fault { h.feed(.desktopFault(d)) }
        }
        let (p, _) = try h.phone()
        #expect(h.ping(p) == nil, "the desktop simulated after the fault ignores pings too")
        #expect(h.ping(p, id: "R2", method: "session.list")?.error == nil)
    }
}

/// Device linking through the relay (docs/DEVICE_LINK.md).
@Suite struct RelayLinkTests {
    /// A relay whose desktop `desktopId` of `userA` offers link codes from the start.
    static func linkingRelay(account: String? = userA) -> (RelayHarness, LinkCodeOffer) {
        var h = RelayHarness { $0.desktopsAtStart = [StartingDesktop(deviceId: desktopId, userId: account, offersLinkCode: true)] }
        let offers = RelayHarness.offers(h.feed(.start))
        #expect(offers.count == 1)
        return (h, offers[0])
    }

    /// An accepted, unregistered phone socket without a target.
    static func linkSocket(_ h: inout RelayHarness, device: String = phoneId, user: String = userA) -> ConnectionID {
        h.open(.mobile, device: device, user: user)
    }

    @Test func theLinkDesktopsCodeLinksAPhoneOfItsAccountThenRelaysBetweenThem() throws {
        var (h, offer) = Self.linkingRelay()
        #expect(DeviceLink.normalised(offer.code) == offer.code)
        #expect(offer.uri == "relaytrace://link?code=\(offer.code)")
        #expect(offer.userId == userA && offer.desktopDeviceId == desktopId)
        #expect(offer.expiresAt == h.now + .seconds(600))
        let c = Self.linkSocket(&h)
        let typed = String(offer.code.lowercased().map { $0 == "-" ? " " : $0 })
        let actions = h.send(c, .link(.redeem(LinkRedeem(code: typed, deviceId: phoneId, deviceName: "Alice's iPhone"))))
        let accepted = actions.messages(to: c).compactMap { if case .link(.accepted(let a)) = $0 { a } else { nil } }
        #expect(accepted.map(\.desktopDeviceId) == [desktopId])
        #expect(accepted.first?.mobileName == "Alice's iPhone")
        #expect(h.relay.linkRecords.map(\.desktopDeviceId) == [desktopId])
        // The desktop hears of it and shows a fresh code.
        #expect(h.relay.simulatedDesktops.first?.desktop.linkedPhones == [phoneId])
        #expect(RelayHarness.offers(actions).count == 1)
        // The same socket registers without naming a target: the link decides.
        let reg = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", relayProtocolVersion: "1.6")))
        #expect(reg.messages(to: c).contains { if case .registered = $0 { true } else { false } })
        #expect(h.ping(c)?.result == ["pong": true])
    }

    @Test func aCodeIsUsedOnceExpiresAfterTenMinutesAndBelongsToItsAccount() throws {
        var (h, offer) = Self.linkingRelay()
        let other = Self.linkSocket(&h, device: "22222222-0000-4000-8000-000000000002", user: "user-mallory")
        let mismatch = h.send(other, .link(.redeem(LinkRedeem(code: offer.code, deviceId: "22222222-0000-4000-8000-000000000002", deviceName: "M"))))
        #expect(mismatch.errors(to: other) == [DeviceLink.Refusal.accountMismatch])
        let first = Self.linkSocket(&h)
        _ = h.send(first, .link(.redeem(LinkRedeem(code: offer.code, deviceId: phoneId, deviceName: "P"))))
        let second = Self.linkSocket(&h, device: "33333333-0000-4000-8000-000000000003")
        let used = h.send(second, .link(.redeem(LinkRedeem(code: offer.code, deviceId: "33333333-0000-4000-8000-000000000003", deviceName: "Q"))))
        #expect(used.errors(to: second) == [DeviceLink.Refusal.used])
        let unknown = h.send(second, .link(.redeem(LinkRedeem(code: "ABCD-EFGH", deviceId: "33333333-0000-4000-8000-000000000003", deviceName: "Q"))))
        #expect(unknown.errors(to: second) == [DeviceLink.Refusal.invalid])
        // The fresh code, 600 s later, has expired; the desktop has already asked for another.
        let fresh = try #require(h.relay.linkCodes.values.first { $0.usedBy == nil })
        let later = h.advance(by: .seconds(600))
        #expect(RelayHarness.offers(later).count == 1, "a new code when the old one expires")
        let third = Self.linkSocket(&h, device: "44444444-0000-4000-8000-000000000004")
        let expired = h.send(third, .link(.redeem(LinkRedeem(code: fresh.code, deviceId: "44444444-0000-4000-8000-000000000004", deviceName: "R"))))
        #expect(expired.errors(to: third) == [DeviceLink.Refusal.expired])
    }

    @Test func anOpenCodeLinksAnyAccountToADesktopSimulatedForIt() throws {
        var (h, offer) = Self.linkingRelay(account: nil)
        #expect(offer.userId == nil)
        let c = Self.linkSocket(&h, device: phoneId, user: "auth0|anyone")
        let actions = h.send(c, .link(.redeem(LinkRedeem(code: offer.code, deviceId: phoneId, deviceName: "P"))))
        #expect(actions.messages(to: c).contains { if case .link(.accepted) = $0 { true } else { false } })
        _ = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", relayProtocolVersion: "1.6", targetDesktopDeviceId: desktopId)))
        #expect(h.ping(c)?.error == nil)
        #expect(h.relay.simulatedDesktops.map(\.userId).contains("auth0|anyone"))
    }

    @Test func aRealDesktopMakesCodesAndHearsOfTheLink() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let created = h.send(d, .link(.create(deviceName: "Studio Mac"))).messages(to: d)
        guard case .link(.created(let c))? = created.first else {
            Issue.record("link.created, got \(created)")
            return
        }
        #expect(DeviceLink.normalised(c.code) == c.code && RFC3339.epochMilliseconds(c.expiresAt) == 1_768_478_400_000 + 600_000)
        let p = Self.linkSocket(&h)
        let actions = h.send(p, .link(.redeem(LinkRedeem(code: c.code, deviceId: phoneId, deviceName: "Alice's iPhone"))))
        let toDesktop = actions.messages(to: d).compactMap { if case .link(.accepted(let a)) = $0 { a } else { nil } }
        #expect(toDesktop.map(\.mobileDeviceId) == [phoneId])
        #expect(toDesktop.first?.desktopName == "Studio Mac")
        // A phone cannot make codes, a desktop cannot redeem them, an unregistered desktop neither.
        #expect(h.send(p, .link(.create(deviceName: nil))).errors(to: p) == [.invalidPayload])
        #expect(h.send(d, .link(.redeem(LinkRedeem(code: c.code, deviceId: desktopId, deviceName: "D")))).errors(to: d) == [.invalidPayload])
        let fresh = h.open(.desktop, device: "d-new")
        #expect(h.send(fresh, .link(.create(deviceName: nil))).errors(to: fresh) == [.authRequired])
    }
}
