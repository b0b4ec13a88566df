import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC A7: resume tokens, the ownership store, invalidResume and the rolling invalid-resume loop.
@Suite struct A7ResumeTests {
    @Test func keyIsDeviceIdColonColonDesktopId() {
        #expect(ResumeTokenStore.key(deviceId: "dev-1", desktopId: "desk-2") == "dev-1::desk-2")
        #expect(TestIdentity.configuration().resumeKey
            == "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11::9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")
    }

    @Test func storeRejectsWritesFromAClientThatNoLongerOwnsTheKey() throws {
        var store = ResumeTokenStore()
        let key = "dev::desk"
        let old = store.claim(key)
        let a = ResumeCredentials(relaySessionId: "A", resumeToken: "tokenA")
        try store.write(a, for: key, ownership: old.ownership)
        let new = store.claim(key)
        #expect(new.credentials == a, "a new owner reads what is stored")
        #expect(new.ownership > old.ownership)
        let b = ResumeCredentials(relaySessionId: "B", resumeToken: "tokenB")
        try store.write(b, for: key, ownership: new.ownership)
        // The stale client cannot overwrite or delete the newer token.
        #expect(throws: ResumeTokenStoreError.self) {
            try store.write(ResumeCredentials(relaySessionId: "stale", resumeToken: "stale"), for: key, ownership: old.ownership)
        }
        #expect(throws: ResumeTokenStoreError.self) { try store.clear(key, ownership: old.ownership) }
        #expect(store.read(key) == b)
        // Ownership is per key: owning another key grants nothing here.
        let other = store.claim("dev::other")
        #expect(throws: ResumeTokenStoreError.self) { try store.write(a, for: key, ownership: other.ownership) }
    }

    @Test func registeredStoresTheNewTokenUnderTheClientsOwnership() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start(ownership: 7))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered(sessionId: "S" + String(repeating: "s", count: 31),
                                                                  token: String(repeating: "t", count: 48))))
        let actions = h.takeActions()
        #expect(actions.first == .storeResumeCredentials(
            key: TestIdentity.configuration().resumeKey,
            ResumeCredentials(relaySessionId: "S" + String(repeating: "s", count: 31),
                              resumeToken: String(repeating: "t", count: 48)),
            ownership: 7))
        h.stop()
        h.finish()
    }

    @Test func resumedKeepsTheTokenAndStoresNothing() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.resumed()))
        let actions = h.takeActions()
        #expect(!actions.contains { if case .storeResumeCredentials = $0 { true } else { false } })
        #expect(h.machine.resumeCredentials == TestIdentity.storedResume)
        #expect(h.machine.phase == .registered(Generation(1), relaySessionId: TestIdentity.storedResume.relaySessionId))
        h.stop()
        h.finish()
    }

    @Test func aStaleClientsTokenWriteIsRejectedByTheStore() throws {
        // Two clients for the same key: the older one registers late; its write must not land.
        var store = ResumeTokenStore()
        let key = TestIdentity.configuration().resumeKey
        let first = store.claim(key)
        var old = ClientHarness(seed: 1)
        old.feed(.start(StartParameters(jwt: "j", storedResume: nil, resumeOwnership: first.ownership)))
        let second = store.claim(key)
        var new = ClientHarness(seed: 2)
        new.feed(.start(StartParameters(jwt: "j", storedResume: nil, resumeOwnership: second.ownership)))
        new.skip(.openTransport, .phaseChanged)
        new.feed(.transportOpened(Generation(1)))
        new.skip(.phaseChanged, .send)
        new.feed(.transportFrame(Generation(1), RelayFrames.registered(token: String(repeating: "N", count: 48))))
        for a in new.takeActions() { try store.apply(a) }
        old.skip(.openTransport, .phaseChanged)
        old.feed(.transportOpened(Generation(1)))
        old.skip(.phaseChanged, .send)
        old.feed(.transportFrame(Generation(1), RelayFrames.registered(token: String(repeating: "O", count: 48))))
        var rejected = 0
        for a in old.takeActions() {
            do { try store.apply(a) } catch { rejected += 1 }
        }
        #expect(rejected == 1)
        #expect(store.read(key)?.resumeToken == String(repeating: "N", count: 48))
        for var h in [old, new] {
            h.stop()
            h.finish()
        }
    }

    @Test func invalidResumeReRegistersAfterTwoHundredMillisecondsWithoutAToken() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume, ownership: 3))
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.advance(by: .seconds(1))
        h.feed(.transportFrame(Generation(1), RelayFrames.error(.invalidResume)))
        #expect(h.takeActions() == [.clearResumeCredentials(key: TestIdentity.configuration().resumeKey, ownership: 3)])
        h.advance(to: Moment(nanoseconds: 1_199_999_999))
        #expect(h.takeActions().isEmpty)
        h.advance(to: .seconds(1.2))
        let sent = h.takeSentMessages()
        #expect(sent.count == 1)
        #expect(sent.first?.generation == Generation(1), "same socket: the relay keeps it open")
        guard case .register(let p)? = sent.first?.message else { Issue.record("no register"); return }
        #expect(p.relaySessionId == nil && p.resumeToken == nil)
        h.stop()
        h.finish()
    }

    /// Drives one invalid resume on a fresh generation at `time`, leaving the client registered again.
    /// Nothing may be unread when it is called; it reads everything it causes.
    private func invalidResume(_ h: inout ClientHarness, at time: Moment) {
        h.advance(to: time)
        if case .registered(let g, _) = h.machine.phase {
            h.skip(.send)
            h.feed(.transportClosed(g, code: 1006, reason: "relay restarted"))  // reconnects at once
        }
        let g = h.machine.lastGeneration
        let reconnect = h.takeActions()
        #expect(reconnect.isEmpty || reconnect.contains(.phaseChanged(.connecting(g))), "a fresh socket opens: \(reconnect)")
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.error(.invalidResume)))
        if case .registering = h.machine.phase {
            h.skip(.clearResumeCredentials)
            h.advance(by: .milliseconds(200))
            h.skip(.send)
            h.feed(.transportFrame(g, RelayFrames.registered()))
            h.skip(.storeResumeCredentials, .phaseChanged)
        } else {  // the loop ended: the client stopped
            h.skip(.clearResumeCredentials, .closeTransport, .phaseChanged)
        }
    }

    @Test func threeInvalidResumesWithinThirtySecondsEndTheLoop() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        h.skip(.openTransport, .phaseChanged)
        invalidResume(&h, at: .seconds(0))
        invalidResume(&h, at: .seconds(10))
        h.advance(to: .seconds(20))
        h.skip(.send)
        h.feed(.transportClosed(h.machine.generation!, code: 1006, reason: "relay restarted"))
        let g = h.machine.lastGeneration
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.error(.invalidResume)))
        let actions = h.takeActions()
        #expect(actions.contains(.closeTransport(g, code: 1001, reason: "invalidResumeLoop")))
        #expect(actions.last == .phaseChanged(.stopped(.invalidResumeLoop)))
        #expect(h.armedTimers.isEmpty)
        h.finish()
    }

    @Test func theWindowIsTrulyRollingNotMeasuredFromTheFirstFailureOfABurst() throws {
        // Failures at 0, 25, 35, 50. A window fixed at the first failure of a burst ([0,30), then [35,65))
        // never counts three; the rolling window (50-30, 50] holds 25, 35 and 50: the loop ends at 50.
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        h.skip(.openTransport, .phaseChanged)
        for t in [0.0, 25.0, 35.0] {
            invalidResume(&h, at: .seconds(t))
            #expect(h.machine.phase != .stopped(.invalidResumeLoop), "no loop yet at \(t) s")
        }
        invalidResume(&h, at: .seconds(50))
        #expect(h.machine.phase == .stopped(.invalidResumeLoop))
        h.finish()
    }

    @Test func failuresThirtySecondsApartDoNotCount() throws {
        // At 0, 15, 30, 45: each third failure is exactly 30 s after the first of its triple: outside.
        var h = ClientHarness()
        h.feed(TestIdentity.start(resume: TestIdentity.storedResume))
        h.skip(.openTransport, .phaseChanged)
        for t in [0.0, 15.0, 30.0, 45.0] { invalidResume(&h, at: .seconds(t)) }
        #expect(h.machine.phase != .stopped(.invalidResumeLoop))
        #expect(h.machine.recentInvalidResumes == [.seconds(30), .seconds(45)])
        h.stop()
        h.finish()
    }
}
