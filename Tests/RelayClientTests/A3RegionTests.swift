import RelayClient
import Testing

/// SPEC A3: region base URLs, persist-before-publish, attempts bound to their origin.
@Suite struct A3RegionTests {
    @Test func usRegionDrivesRestOriginAndSocketURL() {
        #expect(Region.us.baseURL == "https://api-us.plantocode.com")
        #expect(Region.us.restOrigin == "https://api-us.plantocode.com")
        #expect(Region.us.host == "api-us.plantocode.com")
        #expect(Region.us.socketURL == "wss://api-us.plantocode.com/ws/device-link")
    }

    @Test func euRegionDrivesRestOriginAndSocketURL() {
        #expect(Region.eu.baseURL == "https://api-eu.plantocode.com")
        #expect(Region.eu.restOrigin == "https://api-eu.plantocode.com")
        #expect(Region.eu.host == "api-eu.plantocode.com")
        #expect(Region.eu.socketURL == "wss://api-eu.plantocode.com/ws/device-link")
    }

    @Test func socketURLsPassTheRelayURLPolicy() throws {
        for region in Region.allCases {
            try RelayURLPolicy.validate(region.socketURL, allowInsecureLoopback: false)
            // And a client configuration accepts it as its relay URL.
            let config = try ClientConfiguration(deviceId: "d", deviceName: "n", desktopId: "x",
                                                 relayURL: region.socketURL, seed: 1)
            #expect(config.relayURL == region.socketURL)
        }
    }

    @Test func persistedValuesParseAndUnknownOnesAreRefusedWithAHint() throws {
        #expect(try Region.parse(persisted: "us") == .us)
        #expect(try Region.parse(persisted: "eu") == .eu)
        let error = #expect(throws: RegionError.self) { try Region.parse(persisted: "EU-West") }
        #expect(error?.code == .unknownRegion)
        #expect(error?.message.contains("'EU-West'") == true)
        #expect(error?.message.contains("choose a region again") == true)
    }

    @Test func choosingARegionPersistsItBeforePublishing() {
        var binding = RegionBinding()
        #expect(binding.current == nil)
        let effects = binding.select(.eu)
        #expect(effects == [.persistRegion(.eu), .publishRegion(RegionOrigin(region: .eu, epoch: 1))])
        #expect(binding.current == RegionOrigin(region: .eu, epoch: 1))
    }

    @Test func switchingPersistsBeforePublishingAndRetiresPendingAttemptsInBetween() throws {
        var binding = RegionBinding(persisted: .us)
        let a = try binding.beginAttempt(.registration)
        let b = try binding.beginAttempt(.rest(path: "/api/devices"))
        let effects = binding.select(.eu)
        let usOrigin = RegionOrigin(region: .us, epoch: 1)
        #expect(effects == [
            .persistRegion(.eu),
            .retireAttempts([a.id, b.id], origin: usOrigin),
            .publishRegion(RegionOrigin(region: .eu, epoch: 2)),
        ])
    }

    @Test func choosingTheCurrentRegionAgainChangesNothing() throws {
        var binding = RegionBinding(persisted: .us)
        let a = try binding.beginAttempt(.registration)
        #expect(binding.select(.us).isEmpty)
        #expect(binding.complete(a.id) == .current(RegionOrigin(region: .us, epoch: 1)))
    }

    @Test func attemptsAreBoundToTheOriginTheyUsed() throws {
        var binding = RegionBinding(persisted: .us)
        let a = try binding.beginAttempt(.registration)
        #expect(a.id == AttemptID(1))
        #expect(a.origin.socketURL == "wss://api-us.plantocode.com/ws/device-link")
        #expect(binding.origin(of: a.id) == RegionOrigin(region: .us, epoch: 1))
        #expect(binding.isCurrent(a.origin))
        _ = binding.select(.eu)
        // The binding survives the switch: the attempt still names the origin it used.
        #expect(binding.origin(of: a.id) == RegionOrigin(region: .us, epoch: 1))
        #expect(!binding.isCurrent(a.origin))
        let b = try binding.beginAttempt(.rest(path: "/api/devices"))
        #expect(b.id == AttemptID(2))
        #expect(b.origin.restOrigin == "https://api-eu.plantocode.com")
        #expect(binding.isCurrent(b.origin))
    }

    @Test func replyForAnAttemptOnThePreviousOriginCompletesNothing() throws {
        var binding = RegionBinding(persisted: .us)
        let old = try binding.beginAttempt(.registration)
        _ = binding.select(.eu)
        let new = try binding.beginAttempt(.registration)
        // The old origin's reply arrives while the new attempt is in flight: rejected.
        let verdict = binding.complete(old.id)
        #expect(verdict == .staleOrigin(attempt: RegionOrigin(region: .us, epoch: 1),
                                        current: RegionOrigin(region: .eu, epoch: 2)))
        #expect(!verdict.completes)
        // The new attempt is untouched by the old reply and completes normally.
        #expect(binding.origin(of: new.id) == RegionOrigin(region: .eu, epoch: 2))
        let newVerdict = binding.complete(new.id)
        #expect(newVerdict == .current(RegionOrigin(region: .eu, epoch: 2)))
        #expect(newVerdict.completes)
        #expect(binding.pendingAttemptCount == 0)
    }

    @Test func switchingAwayAndBackStillRejectsTheFirstSelectionsReply() throws {
        var binding = RegionBinding(persisted: .us)
        let old = try binding.beginAttempt(.registration)
        _ = binding.select(.eu)
        _ = binding.select(.us)
        #expect(binding.current == RegionOrigin(region: .us, epoch: 3))
        #expect(!binding.isCurrent(old.origin), "same URL, but a replaced selection")
        #expect(!binding.complete(old.id).completes)
    }

    @Test func aReplyCompletesAtMostOnceAndAbandonedAttemptsAreForgotten() throws {
        var binding = RegionBinding(persisted: .eu)
        let a = try binding.beginAttempt(.registration)
        let b = try binding.beginAttempt(.registration)
        #expect(binding.pendingAttemptCount == 2)
        #expect(binding.complete(a.id).completes)
        #expect(binding.complete(a.id) == .unknown(a.id), "a duplicate reply completes nothing")
        let abandoned = binding.abandon(b.id)
        let abandonedTwice = binding.abandon(b.id)
        #expect(abandoned)
        #expect(!abandonedTwice)
        #expect(binding.complete(b.id) == .unknown(b.id))
        #expect(binding.complete(AttemptID(99)) == .unknown(AttemptID(99)))
        #expect(binding.pendingAttemptCount == 0)
    }

    @Test func noAttemptBeforeARegionIsChosen() throws {
        var binding = RegionBinding()
        let error = #expect(throws: RegionError.self) { try binding.beginAttempt(.registration) }
        #expect(error?.code == .noRegionChosen)
        #expect(binding.lastAttempt == AttemptID(0))
        _ = binding.select(.us)
        #expect(try binding.beginAttempt(.registration).origin == RegionOrigin(region: .us, epoch: 1))
    }
}
