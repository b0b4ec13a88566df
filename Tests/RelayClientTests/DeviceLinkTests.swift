import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// Device linking in the client machine (docs/DEVICE_LINK.md; seed 003's link flow, this project's wire
/// shapes).
@Suite struct DeviceLinkTests {
    static let desk = "0c5d7e1a-aaaa-4bbb-8ccc-123456789abc"

    /// A started phone with no linked desktop.
    static func unlinked() throws -> ClientHarness {
        let config = try ClientConfiguration(deviceId: TestIdentity.deviceId, deviceName: TestIdentity.deviceName, desktopId: "",
                                             relayURL: TestIdentity.relayURL, seed: 1)
        var h = ClientHarness(configuration: config)
        h.feed(TestIdentity.start())
        #expect(h.takeActions() == [.phaseChanged(.suspended(.notLinked))], "nothing to connect to")
        return h
    }

    static func accepted(linkedAt: String = "2026-01-15T12:00:05.250Z") -> WireFrame {
        .text(try! RelayMessage.link(.accepted(LinkAccepted(desktopDeviceId: desk.uppercased(), desktopName: "Studio Mac",
                                                            mobileDeviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", mobileName: "P",
                                                            linkedAt: linkedAt))).encodedText())
    }

    static func opens(_ actions: [ClientAction]) -> [(Generation, [HTTPHeader])] {
        actions.compactMap { if case .openTransport(let g, _, let h) = $0 { (g, h) } else { nil } }
    }

    @Test func aTypedCodeOpensALinkSocketWithoutATargetAndSendsLinkRedeem() throws {
        var h = try Self.unlinked()
        h.feed(.link(.enterCode(" k7qf 3m9x ")))
        let opened = h.takeActions()
        let open = try #require(Self.opens(opened).first)
        #expect(open.0 == Generation(1))
        #expect(open.1.map(\.name) == ["Authorization", "X-Device-ID", "X-Token-Binding", "X-Client-Type"])
        #expect(h.deadline(of: .handshake(Generation(1))) == .seconds(10))
        #expect(opened.last == .phaseChanged(.linking(Generation(1))))
        h.feed(.transportOpened(Generation(1)))
        let sent = h.takeActions().compactMap(\.sentMessage)
        #expect(sent == [.link(.redeem(LinkRedeem(code: "K7QF-3M9X", deviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11",
                                                  deviceName: TestIdentity.deviceName)))])
    }

    @Test func acceptedIsStoredFirstThenTheRelaySocketToTheLinkedDesktopOpens() throws {
        var h = try Self.unlinked()
        h.feed(.link(.scanCode("relaytrace://link?code=K7QF-3M9X")))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.send)
        h.feed(.transportFrame(Generation(1), Self.accepted()))
        let stored = LinkedDesktop(deviceId: Self.desk, name: "Studio Mac", linkedAt: 1_768_478_405_250)
        let a = h.takeActions()
        #expect(a.contains(.link(.store(stored))))
        #expect(Self.opens(a).isEmpty, "nothing connects before the row is committed")
        #expect(h.machine.desktopId.isEmpty)
        h.feed(.link(.stored(ownership: 7, storedResume: nil)))
        let b = h.takeActions()
        #expect(b.contains(.closeTransport(Generation(1), code: 1001, reason: "linked desktop \(Self.desk)")))
        #expect(b.contains(.link(.finished(.linked(stored)))))
        let open = try #require(Self.opens(b).first)
        #expect(open.0 == Generation(2))
        #expect(open.1.last == HTTPHeader("X-Target-Desktop-Device-ID", Self.desk))
        h.feed(.transportOpened(Generation(2)))
        let register = h.takeActions().compactMap { if case .register(let p)? = $0.sentMessage { p } else { nil } }.first
        #expect(register?.targetDesktopDeviceId == Self.desk)
        h.feed(.transportFrame(Generation(2), RelayFrames.registered()))
        let keys = h.takeActions().compactMap { if case .storeResumeCredentials(let k, _, let o) = $0 { (k, o) } else { nil } }
        #expect(keys.map(\.0) == ["5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11::\(Self.desk)"])
        #expect(keys.map(\.1) == [7], "the ownership the store granted for the new pair")
    }

    @Test func aMalformedCodeFailsWithoutASocket() throws {
        var h = try Self.unlinked()
        for bad in ["hello", "K7QF-3M9", "K7QF-3M9XX", "K0QF-3M9X", "https://evil/?code=K7QF-3M9X"] {
            h.feed(bad.hasPrefix("https") ? .link(.scanCode(bad)) : .link(.enterCode(bad)))
            #expect(h.takeActions() == [.link(.finished(.failed(.malformedCode(bad))))], "\(bad)")
        }
    }

    @Test func aRefusalClosesTheLinkSocketAndWaitsForACodeAgain() throws {
        var h = try Self.unlinked()
        h.feed(.link(.enterCode("ABCD-EFGH")))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.send)
        h.feed(.transportFrame(Generation(1), RelayFrames.error(DeviceLink.Refusal.used, message: "used")))
        let a = h.takeActions()
        #expect(a.first == .link(.finished(.failed(.refused(code: "linkCodeUsed", message: "used")))))
        #expect(a.contains(.closeTransport(Generation(1), code: 1001, reason: "link refused")))
        #expect(a.last == .phaseChanged(.suspended(.notLinked)))
        #expect(h.machine.linkAttempt == nil)
    }

    @Test func anUnansweredLinkTimesOutAtTenSeconds() throws {
        var h = try Self.unlinked()
        h.feed(.link(.enterCode("ABCD-EFGH")))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.send)
        h.advance(by: .seconds(10))
        let a = h.takeActions()
        #expect(a.contains(.link(.finished(.failed(.connectionFailed("handshake timeout"))))))
        #expect(a.last == .phaseChanged(.suspended(.notLinked)))
    }

    @Test func aStoreFailureGivesUpTheLink() throws {
        var h = try Self.unlinked()
        h.feed(.link(.enterCode("ABCD-EFGH")))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.send)
        h.feed(.transportFrame(Generation(1), Self.accepted()))
        h.skip(.link)
        h.feed(.link(.storeFailed("disk full")))
        let a = h.takeActions()
        #expect(a.first == .link(.finished(.failed(.storeFailed("disk full")))))
        #expect(a.last == .phaseChanged(.suspended(.notLinked)))
        #expect(h.machine.desktopId.isEmpty)
    }

    @Test func linkingAnotherDesktopLeavesTheCurrentOneAndComesBackToItOnFailure() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        h.feed(.link(.enterCode("ABCD-EFGH")))
        let a = h.takeActions()
        #expect(a.first == .closeTransport(Generation(1), code: 1001, reason: "linking a desktop"))
        #expect(Self.opens(a).map(\.0) == [Generation(2)])
        h.feed(.link(.enterCode("ABCD-EFGH")))
        #expect(h.takeActions() == [.link(.finished(.failed(.busy)))])
        h.feed(.transportClosed(Generation(2), code: 1006, reason: "gone"))
        let b = h.takeActions()
        #expect(b.contains { if case .link(.finished(.failed(.connectionFailed))) = $0 { true } else { false } })
        let back = try #require(Self.opens(b).first)
        #expect(back.1.last == HTTPHeader("X-Target-Desktop-Device-ID", TestIdentity.desktopId), "back to the desktop it had")
    }

    /// The link socket closes after `link.accepted`: the phone goes back to the desktop it had on its own.
    /// When the store then fails, that socket is already the way back: it stays, nothing is opened beside
    /// it and nothing is dropped without a close (in the foreground or, once the app is in the background,
    /// through the usual background close).
    @Test(arguments: [false, true])
    func aStoreFailureAfterTheLinkSocketClosedKeepsTheWayBack(background: Bool) throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        h.feed(.link(.enterCode("ABCD-EFGH")))
        h.skip(.closeTransport, .openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(2)))
        h.skip(.send)
        h.feed(.transportFrame(Generation(2), Self.accepted()))
        #expect(h.takeActions() == [.link(.store(LinkedDesktop(deviceId: Self.desk, name: "Studio Mac", linkedAt: 1_768_478_405_250)))])
        h.feed(.transportClosed(Generation(2), code: 1006, reason: "gone"))
        let back = try #require(Self.opens(h.takeActions()).first, "the phone reconnects at once")
        #expect(back.1.last == HTTPHeader("X-Target-Desktop-Device-ID", TestIdentity.desktopId))
        let g = back.0
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        if background {
            h.feed(.appState(.background))
            let closed = h.takeActions()
            #expect(closed.contains(.closeTransport(g, code: 1001, reason: "app in background")), "\(closed)")
            h.feed(.link(.storeFailed("disk full")))
            #expect(h.takeActions() == [.link(.finished(.failed(.storeFailed("disk full"))))])
            #expect(h.machine.phase == .suspended(.background))
        } else {
            h.feed(.link(.storeFailed("disk full")))
            #expect(h.takeActions() == [.link(.finished(.failed(.storeFailed("disk full"))))], "the socket to the desktop stays")
            #expect(h.machine.phase == .registering(g) && h.machine.generation == g)
        }
        #expect(h.machine.desktopId == TestIdentity.desktopId && h.machine.linkAttempt == nil)
    }

    @Test func aCodeBeforeStartIsRefused() throws {
        var h = ClientHarness()
        h.feed(.link(.enterCode("ABCD-EFGH")))
        #expect(h.takeActions() == [.link(.finished(.failed(.notRunning)))])
    }
}
