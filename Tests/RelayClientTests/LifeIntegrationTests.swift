import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// Issue "client life" at the machine level: identity, auth, region, ingress and interest hosted by
/// `RelayClientMachine`, and their consequences for sockets and calls.
@Suite struct LifeIntegrationTests {
    private func opens(_ actions: [ClientAction]) -> [(Generation, String)] {
        actions.compactMap { if case .openTransport(let g, let url, _) = $0 { (g, url) } else { nil } }
    }

    private func interestSends(_ actions: [(time: Moment, action: ClientAction)]) -> [(Moment, Generation, TimelineInterest)] {
        actions.compactMap { t, a in
            guard case .send(let g, _, _) = a, case .event(let e)? = a.sentMessage, e.eventType == "chat:timeline-interest",
                  let lease = try? TimelineInterest(json: e.payload) else { return nil }
            return (t, g, lease)
        }
    }

    private func stopAndFinish(_ h: inout ClientHarness, allowingArmedTimers: Bool = false,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        h.stop(sourceLocation: sourceLocation)
        h.finish(allowingArmedTimers: allowingArmedTimers, sourceLocation: sourceLocation)
    }

    // MARK: A1

    @Test func nothingNetworkFacingStartsBeforeTheDeviceIdIsKnown() throws {
        var h = ClientHarness(identity: nil)
        h.feed(TestIdentity.start())
        #expect(h.takeActions() == [.diagnostic(.waitingForIdentity)])
        h.feed(.identity(.start))
        #expect(h.takeActions() == [.identity(.readIdentity)])
        h.feed(.identity(.identityRead(.lockedBeforeFirstUnlock)))
        #expect(opens(h.takeActions()).isEmpty, "before the first unlock nothing opens")
        h.feed(.appState(.inactive))
        h.feed(.appState(.active))
        #expect(opens(h.takeActions()).isEmpty, "only protected-data-available re-reads before the first unlock")
        h.feed(.identity(.protectedDataAvailable))
        #expect(h.takeActions() == [.identity(.readIdentity)])
        h.feed(.identity(.identityRead(.available(deviceId: TestIdentity.deviceId, login: nil))))
        let actions = h.takeActions()
        #expect(actions.first == .identity(.ready(deviceId: TestIdentity.deviceId, login: nil)))
        #expect(opens(actions).map(\.0) == [Generation(1)], "the held start runs once the identity is known")
        try stopAndFinish(&h)
    }

    @Test func jwtLockedKeepsTheLoginAndRechecksWhenTheAppBecomesActive() throws {
        var h = ClientHarness(identity: nil)
        h.feed(.identity(.start))
        h.skip(.identity)
        h.feed(.identity(.identityRead(.jwtLocked(deviceId: TestIdentity.deviceId))))
        let locked = h.takeActions()
        #expect(!locked.contains { if case .identity(.ready) = $0 { true } else { false } })
        #expect(!locked.contains { if case .auth(.sessionEnded) = $0 { true } else { false } }, "no logout")
        h.feed(.appState(.inactive))
        h.feed(.appState(.active))
        #expect(h.takeActions().contains(.identity(.readIdentity)))
        h.finish()
    }

    @Test func unreadableIdentityOffersAResetAndStartsNothing() throws {
        var h = ClientHarness(identity: nil)
        h.feed(.identity(.start))
        #expect(h.takeActions() == [.identity(.readIdentity)])
        h.feed(.identity(.identityRead(.unreadable)))
        #expect(h.takeActions() == [.identity(.offerResetDeviceIdentity)])
        h.feed(TestIdentity.start())
        #expect(h.takeActions() == [.diagnostic(.waitingForIdentity)])
        h.finish()
    }

    @Test func identityOfAnotherDeviceDoesNotStartThisClient() throws {
        var h = ClientHarness(identity: nil)
        h.feed(TestIdentity.start())
        #expect(h.takeActions() == [.diagnostic(.waitingForIdentity)])
        h.feed(.identity(.start))
        h.skip(.identity)
        h.feed(.identity(.identityRead(.available(deviceId: "00000000-0000-4000-8000-000000000000", login: nil))))
        let actions = h.takeActions()
        #expect(opens(actions).isEmpty)
        #expect(actions.contains { if case .diagnostic(.identityMismatch) = $0 { true } else { false } })
        h.finish()
    }

    // MARK: A2

    @Test func refreshTimerIsNeverSoonerThanFiveSecondsAndTracksExpiry() throws {
        // Expiry in 1000 s: refresh at 700 s. Expiry in 100 s (inside the 300 s lead): refresh at 5 s.
        let far = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                     login: StoredLogin(jwt: "jwt-far", expiry: .seconds(1000))))
        #expect(far.deadline(of: .auth(.refresh)) == .seconds(700))
        var near = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                      login: StoredLogin(jwt: "jwt-near", expiry: .seconds(100))))
        #expect(near.deadline(of: .auth(.refresh)) == .seconds(5))
        near.advance(to: .seconds(5))
        let actions = near.takeActions()
        guard case .httpRequest(let request, let origin)? = actions.first, case .refresh(let jwt) = request.kind else {
            Issue.record("expected the refresh request, got \(actions)")
            return
        }
        #expect(jwt == "jwt-near")
        #expect(origin == "https://api-eu.plantocode.com")
        far.finish(allowingArmedTimers: true)
        _ = near
    }

    @Test func refreshRefusedWith401Or403EndsTheSessionClosingRelaysAndFailingCalls() throws {
        for status in [401, 403] {
            var h = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                       login: StoredLogin(jwt: "jwt", expiry: .seconds(310))))
            let g = h.connectAndRegister()
            h.feed(.call(CallRequest(callId: CallID(9), method: "session.list")))
            h.skip(.send)
            h.advance(to: .seconds(10))  // refresh due at max(310 - 300 - 0, 5) = 10 s
            let request = try #require(h.takeActions().compactMap { if case .httpRequest(let r, _) = $0 { r } else { nil } }.first)
            h.feed(.auth(.httpResponse(request.id, status: status, body: .none)))
            let actions = h.takeActions()
            #expect(actions.contains(.auth(.sessionEnded(.refreshRejected(status: status)))))
            #expect(actions.contains(.closeTransport(g, code: 1001, reason: "sessionEnded")))
            #expect(actions.contains(.callCompleted(CallID(9), .failure(.clientStopped("sessionEnded")))))
            #expect(actions.contains(.clearResumeCredentials(key: TestIdentity.configuration().resumeKey, ownership: 1)))
            #expect(actions.last == .phaseChanged(.stopped(.sessionEnded)))
            #expect(h.machine.pendingCalls.isEmpty)
            h.finish()
        }
    }

    @Test func refreshFailingWith500DoesNotEndTheSession() throws {
        var h = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                   login: StoredLogin(jwt: "jwt", expiry: .seconds(310))))
        h.connectAndRegister()
        h.advance(to: .seconds(10))
        let request = try #require(h.takeActions().compactMap { if case .httpRequest(let r, _) = $0 { r } else { nil } }.first)
        h.feed(.auth(.httpResponse(request.id, status: 500, body: .none)))
        #expect(!h.takeActions().contains { if case .auth(.sessionEnded) = $0 { true } else { false } })
        #expect(h.machine.generation != nil)
        try stopAndFinish(&h, allowingArmedTimers: true)
    }

    @Test func upgradeRefusedWith401RefreshesTheJwtOnce() throws {
        var h = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                   login: StoredLogin(jwt: "old", expiry: .seconds(1000))))
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        func isRefresh(_ a: ClientAction) -> Bool { if case .httpRequest(let r, _) = a, case .refresh = r.kind { true } else { false } }
        h.feed(.transportFailed(Generation(1), .upgradeRefused(status: 401)))
        var refreshes = h.takeActions().filter(isRefresh)
        h.feed(.transportFailed(Generation(2), .upgradeRefused(status: 401)))
        refreshes += h.takeActions().filter(isRefresh)
        #expect(refreshes.count == 1, "only one JWT refresh at a time")
        guard case .httpRequest(let request, _)? = refreshes.first else { return }
        h.feed(.auth(.httpResponse(request.id, status: 200, body: .token(StoredLogin(jwt: "new", expiry: .seconds(2000))))))
        #expect(h.takeActions() == [.auth(.tokenUpdated(StoredLogin(jwt: "new", expiry: .seconds(2000))))])
        h.advanceToNextTimer()  // the reconnect
        let next = h.takeActions().compactMap { if case .openTransport(_, _, let headers) = $0 { headers } else { nil } }.first
        #expect(next?.first == HTTPHeader("Authorization", "Bearer new"))
        try stopAndFinish(&h, allowingArmedTimers: true)
    }

    // MARK: A3

    @Test func regionIsPersistedBeforeItIsPublishedAndDrivesTheSocketURL() throws {
        var h = ClientHarness()
        h.feed(.selectRegion(.us))
        let actions = h.takeActions()
        #expect(actions.count == 2)
        guard case .region(.persistRegion(.us)) = actions[0], case .region(.publishRegion(let origin)) = actions[1] else {
            Issue.record("expected persist then publish, got \(actions)")
            return
        }
        #expect(origin.region == .us)
        h.feed(TestIdentity.start())
        #expect(opens(h.takeActions()).map(\.1) == ["wss://api-us.plantocode.com/ws/device-link"])
        try stopAndFinish(&h)
    }

    @Test func switchingRegionReplacesTheRelayAndAnOldOriginReplyCompletesNothing() throws {
        var h = ClientHarness()
        h.feed(.selectRegion(.us))
        h.skip(.region)
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.selectRegion(.eu))
        let actions = h.takeActions()
        #expect(actions.contains(.closeTransport(Generation(1), code: 1001, reason: "region changed")))
        #expect(opens(actions).map(\.1) == ["wss://api-eu.plantocode.com/ws/device-link"], "exactly one socket on the new origin")
        // The old origin's registration reply arrives late: it completes nothing.
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        #expect(h.machine.phase == .connecting(Generation(2)))
        #expect(h.takeActions().map(\.kind) == [.diagnostic], "the late reply is only noted")
        h.feed(.transportOpened(Generation(2)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(2), RelayFrames.registered()))
        #expect(h.machine.phase == .registered(Generation(2), relaySessionId: "NEWSESSION0123456789abcdefABCDEF"))
        h.skip(.storeResumeCredentials, .phaseChanged)
        try stopAndFinish(&h)
    }

    @Test func restReplyForARequestOnThePreviousOriginCompletesNothing() throws {
        var h = ClientHarness(identity: .available(deviceId: TestIdentity.deviceId,
                                                   login: StoredLogin(jwt: "jwt", expiry: .seconds(100))))
        h.feed(.selectRegion(.us))
        h.skip(.region)
        h.advance(to: .seconds(5))
        let first = try #require(h.takeActions().compactMap { if case .httpRequest(let r, let o) = $0 { (r, o) } else { nil } }.first)
        #expect(first.1 == "https://api-us.plantocode.com")
        h.feed(.selectRegion(.eu))
        h.skip(.region)
        h.feed(.auth(.httpResponse(first.0.id, status: 200, body: .token(StoredLogin(jwt: "from-us", expiry: .seconds(5000))))))
        let actions = h.takeActions()
        #expect(!actions.isEmpty)
        #expect(actions.allSatisfy { if case .diagnostic = $0 { true } else { false } }, "the reply only yields a diagnostic: \(actions)")
        #expect(h.machine.auth.refreshInFlight != first.0.id, "the flow no longer waits on the old origin")
        #expect(h.machine.region.pendingAttemptCount <= 1, "no attempt leaks")
        h.finish(allowingArmedTimers: true)
    }

    // MARK: A10 / A11 through the machine

    @Test func leaseIsSentRenewedEveryTwentySecondsAndReissuedAfterEveryRegistration() throws {
        var h = ClientHarness()
        let g1 = h.connectAndRegister()
        h.feed(.interest(.claim(ClaimID(1), baseSessionId: "sess-1")))
        var sends: [(Moment, Generation, TimelineInterest)] = interestSends(h.takeTimedActions())
        for _ in 0..<3 {
            h.advance(by: .seconds(10))
            sends += interestSends(h.takeTimedActions())
            h.feed(.transportFrame(g1, RelayFrames.pong))
            h.advance(by: .seconds(10))
            sends += interestSends(h.takeTimedActions())
            h.feed(.transportFrame(g1, RelayFrames.pong))
            sends += interestSends(h.takeTimedActions())
        }
        #expect(sends.map(\.0) == [.seconds(0), .seconds(20), .seconds(40), .seconds(60)])
        #expect(sends.allSatisfy { $0.2.sessionId == "sess-1" && $0.2.active && $0.2.appSessionId == h.machine.interest.appSessionId })
        // Reconnect: the lease is re-issued right after the new registration.
        h.feed(.transportClosed(g1, code: 1006, reason: "reset"))
        let g2 = h.machine.lastGeneration
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        h.feed(.transportOpened(g2))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g2, RelayFrames.registered()))
        let reissued = interestSends(h.takeTimedActions())
        #expect(reissued.map(\.1) == [g2])
        try stopAndFinish(&h)
    }

    @Test func snapshotsAreDeliveredOnlyForALeasedChatAndOneAtATime() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        func snapshot(_ session: String, revision: Int64, id: Int64) -> WireFrame {
            RelayFrames.event("chat:timeline-updated", payload: ["sessionId": .string(session), "runId": "r", "threadId": "t",
                                                                 "revision": .int(revision), "blocks": []], eventId: id)
        }
        h.feed(.transportFrame(g, snapshot("left-chat", revision: 1, id: 1)))
        #expect(h.takeActions().contains { if case .ingress(.droppedSnapshot(_, _, .notLeased)) = $0 { true } else { false } })
        h.feed(.interest(.claim(ClaimID(1), baseSessionId: "open-chat")))
        h.skip(.send)
        var actions: [ClientAction] = []
        for frame in [snapshot("open-chat", revision: 1, id: 2), snapshot("open-chat", revision: 2, id: 3),
                      snapshot("open-chat", revision: 3, id: 4),
                      RelayFrames.event("job:created", payload: ["jobId": "j", "sessionId": "s"], eventId: 5)] {
            h.feed(.transportFrame(g, frame))
            actions += h.takeActions()
        }
        let delivered = actions.compactMap { if case .ingress(.deliverSnapshot(let s)) = $0 { s.revision } else { nil } }
        #expect(delivered == [1], "one at a time")
        #expect(actions.contains { if case .ingress(.deliverControl(let e)) = $0 { e.eventType == "job:created" } else { false } },
                "control events never wait behind snapshots")
        h.feed(.snapshotProcessed)
        let next = h.takeActions().compactMap { if case .ingress(.deliverSnapshot(let s)) = $0 { s.revision } else { nil } }
        #expect(next == [3], "the newest replaced the waiting one")
        h.feed(.snapshotProcessed)
        try stopAndFinish(&h)
    }

    @Test func inactiveSuspendsInterestAndAVanishedViewDoesNotReviveTheLeaseAfterTheBackground() throws {
        var h = ClientHarness()
        h.feed(.desktopMediaPlaying(true))  // keep the socket, so only interest changes
        let g = h.connectAndRegister()
        h.feed(.interest(.claim(ClaimID(1), baseSessionId: "chat")))
        h.skip(.send)
        h.feed(.appState(.inactive))
        #expect(interestSends(h.takeTimedActions()).map(\.2.active) == [false])
        h.feed(.appState(.background))
        h.advance(by: .seconds(4))
        h.feed(.transportFrame(g, RelayFrames.pong))
        h.feed(.appState(.inactive))
        h.feed(.appState(.active))
        #expect(interestSends(h.takeTimedActions()).isEmpty, "the view did not confirm in this foreground generation")
        h.feed(.interest(.confirmVisible(ClaimID(1))))
        #expect(interestSends(h.takeTimedActions()).map(\.2.active) == [true])
        try stopAndFinish(&h)
    }

    @Test func failedInterestDeliveryIsRetriedFourTimesWithBoundedJitter() throws {
        var h = ClientHarness(seed: 7)
        let g = h.connectAndRegister()
        h.feed(.interest(.claim(ClaimID(1), baseSessionId: "chat")))
        var frame = try #require(h.takeActions().compactMap { if case .send(_, let f, _) = $0 { f } else { nil } }.first)
        var delays: [Double] = []
        for _ in 0..<5 {
            let failedAt = h.now
            h.feed(.sendFailed(g, frame: frame, attempt: 1, transient: true, reason: "EAGAIN"))
            guard let retry = h.armedTimers.first(where: { if case .interest(.retry) = $0.id { true } else { false } }) else { break }
            delays.append((retry.deadline - failedAt).seconds)
            h.advance(to: retry.deadline)
            frame = try #require(h.takeActions().compactMap { if case .send(_, let f, _) = $0 { f } else { nil } }.first)
            h.feed(.transportFrame(g, RelayFrames.pong))
        }
        #expect(delays.count == 4)
        let gaveUp = h.takeActions()
        #expect(gaveUp.count == 1 && gaveUp.allSatisfy { if case .diagnostic(.interestGaveUp(let i)) = $0 { i.sessionId == "chat" } else { false } },
                "the fifth failure gives up, and says so: \(gaveUp)")
        for (i, (d, base)) in zip(delays, [0.25, 0.5, 1.0, 2.0]).enumerated() {
            #expect(d >= base * 0.8 - 1e-9 && d <= min(base * 1.2, 2.0) + 1e-9, "retry \(i + 1): \(d)")
        }
        try stopAndFinish(&h)
    }
}
