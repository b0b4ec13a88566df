import RelayClient
import RelayProtocol
import Testing

/// Drives a ``TimelineInterestCoordinator`` on virtual time: applies arm/cancel effects to its own timer
/// table, fires due timers in deadline order when advanced, and records sends and other effects.
private struct InterestDriver {
    struct Sent: Equatable, CustomStringConvertible {
        var at: Moment
        var desktopId: String
        var sessionId: String
        var active: Bool
        var description: String { "\(at) \(desktopId) \(sessionId) \(active)" }
    }

    var coordinator: TimelineInterestCoordinator
    private(set) var now: Moment = .zero
    private(set) var timers: [InterestTimer: Moment] = [:]
    private(set) var sent: [Sent] = []
    private(set) var others: [InterestEffect] = []
    private var sentRead = 0

    init(appSessionId: String = "APP-7F3C") {
        coordinator = TimelineInterestCoordinator(appSessionId: appSessionId)
    }

    mutating func apply(_ effects: [InterestEffect]) {
        for e in effects {
            switch e {
            case .arm(let t, let d):
                timers[t] = d
            case .cancel(let t):
                #expect(timers.removeValue(forKey: t) != nil, "cancel of a timer that is not armed: \(t)")
            case .send(let desktopId, let interest):
                #expect(interest.appSessionId == coordinator.appSessionId)
                sent.append(Sent(at: now, desktopId: desktopId, sessionId: interest.sessionId, active: interest.active))
            case .gaveUp, .diagnostic:
                others.append(e)
            }
        }
    }

    /// Runs one input at time `t` (advancing the clock, firing due timers first).
    mutating func at(_ t: Double, _ input: (inout TimelineInterestCoordinator, Moment) -> [InterestEffect]) {
        advance(to: t)
        apply(input(&coordinator, now))
    }

    /// Fires every timer due up to `t`, in deadline order.
    mutating func advance(to t: Double) {
        let target = Moment.seconds(t)
        while let next = timers.min(by: { $0.value != $1.value ? $0.value < $1.value : $0.key.description < $1.key.description }),
              next.value <= target {
            now = next.value
            timers[next.key] = nil
            apply(coordinator.timerFired(next.key, at: now))
        }
        if target > now { now = target }
    }

    /// The sends since the last call.
    mutating func takeSent() -> [Sent] {
        defer { sentRead = sent.count }
        return Array(sent[sentRead...])
    }

    mutating func takeOthers() -> [InterestEffect] {
        defer { others.removeAll() }
        return others
    }

    /// The driver's and the coordinator's timer tables agree.
    func checkTimersAgree() {
        let mine = timers.map { "\($0.key)@\($0.value)" }.sorted()
        let theirs = coordinator.armedTimers.map { "\($0.timer)@\($0.deadline)" }.sorted()
        #expect(mine == theirs)
    }
}

private let desk = "desk-9a7e"

private func s(_ at: Double, _ session: String, _ active: Bool, desktop: String = desk) -> InterestDriver.Sent {
    .init(at: .seconds(at), desktopId: desktop, sessionId: session, active: active)
}

/// A driver with the desktop registered at t = 0.
private func registeredDriver() -> InterestDriver {
    var d = InterestDriver()
    d.at(0) { c, t in c.registered(desktopId: desk, at: t) }
    return d
}

/// SPEC A11: timeline interest leases.
@Suite struct A11InterestTests {
    @Test func aClaimStartsTheLeaseWithTheExactPayload() {
        var c = TimelineInterestCoordinator(appSessionId: "APP-7F3C")
        #expect(c.registered(desktopId: desk, at: .zero) == [], "nothing to re-issue without a lease")
        let effects = c.claim(ClaimID(1), desktopId: desk, baseSessionId: "sess-8d1c", at: .seconds(1))
        #expect(effects == [
            .send(desktopId: desk, TimelineInterest(appSessionId: "APP-7F3C", sessionId: "sess-8d1c", active: true)),
            .arm(.renewal(desktopId: desk), deadline: .seconds(21)),
        ])
        #expect(c.lease(for: desk) == InterestLease(sessionId: "sess-8d1c", since: .seconds(1), lastSent: .seconds(1),
                                                   nextRenewal: .seconds(21)))
        #expect(c.isLeased(desktopId: desk, sessionId: "sess-8d1c"))
        #expect(!c.isLeased(desktopId: desk, sessionId: "sess-other"))
        #expect(!c.isLeased(desktopId: "desk-other", sessionId: "sess-8d1c"))
        #expect(c.claims[ClaimID(1)]?.foregroundGeneration == 1)
        #expect(TimelineInterest.eventType == "chat:timeline-interest")
    }

    @Test func renewalsAreExactlyTwentySecondsApart() {
        var d = registeredDriver()
        d.at(3) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.advance(to: 83)
        #expect(d.takeSent() == [s(3, "S", true), s(23, "S", true), s(43, "S", true), s(63, "S", true), s(83, "S", true)])
        #expect(d.coordinator.lease(for: desk)?.since == .seconds(3))
        #expect(d.coordinator.lease(for: desk)?.lastSent == .seconds(83))
        #expect(d.coordinator.lease(for: desk)?.nextRenewal == .seconds(103))
        d.checkTimersAgree()
    }

    @Test func parentToSubagentHandOffKeepsTheLease() {
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }   // parent chat
        d.at(12) { c, t in c.claim(ClaimID(2), desktopId: desk, baseSessionId: "S", at: t) }  // sub-agent viewer
        #expect(d.coordinator.isLeased(desktopId: desk, sessionId: "S"))
        d.at(13) { c, t in c.release(ClaimID(1), at: t) }                                     // parent goes away
        #expect(d.coordinator.isLeased(desktopId: desk, sessionId: "S"))
        #expect(d.coordinator.lease(for: desk)?.since == .zero, "the same lease, not a new one")
        d.advance(to: 60)
        // No active:false, no gap: renewals continue on the original 20 s grid.
        #expect(d.takeSent() == [s(0, "S", true), s(20, "S", true), s(40, "S", true), s(60, "S", true)])
        // The last counting claim going ends the lease, once, and renewals stop.
        d.at(70) { c, t in c.release(ClaimID(2), at: t) }
        d.advance(to: 200)
        #expect(d.takeSent() == [s(70, "S", false)])
        #expect(d.coordinator.lease(for: desk) == nil)
        #expect(d.timers.isEmpty)
        d.checkTimersAgree()
    }

    @Test func theNewestClaimWinsAcrossTwoSessions() {
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S1", at: t) }
        d.at(3) { c, t in c.claim(ClaimID(2), desktopId: desk, baseSessionId: "S2", at: t) }
        // The old session is released first, then the new one leased; the renewal restarts from the move.
        #expect(d.takeSent() == [s(0, "S1", true), s(3, "S1", false), s(3, "S2", true)])
        #expect(d.coordinator.lease(for: desk)?.since == .seconds(3))
        d.advance(to: 23)
        #expect(d.takeSent() == [s(23, "S2", true)])
        // Newest means most recently made or confirmed: re-confirming the S1 view moves the lease back.
        d.at(30) { c, t in c.confirmVisible(ClaimID(1), at: t) }
        #expect(d.takeSent() == [s(30, "S2", false), s(30, "S1", true)])
        // Releasing it hands the lease to the remaining claim.
        d.at(31) { c, t in c.release(ClaimID(1), at: t) }
        #expect(d.takeSent() == [s(31, "S1", false), s(31, "S2", true)])
        d.advance(to: 51)
        #expect(d.takeSent() == [s(51, "S2", true)])
        d.checkTimersAgree()
    }

    @Test func aViewThatVanishedInTheBackgroundDoesNotReviveTheLease() {
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.at(10) { c, t in c.enteredBackground(at: t) }
        #expect(d.takeSent() == [s(0, "S", true), s(10, "S", false)])
        #expect(d.timers.isEmpty, "no renewals in the background")
        // The view never re-appears (it vanished while the app was away); its claim was never released.
        d.at(300) { c, t in c.enteredForeground(at: t) }
        #expect(d.coordinator.foregroundGeneration == 2)
        #expect(d.coordinator.claims[ClaimID(1)] != nil)
        #expect(d.coordinator.lease(for: desk) == nil)
        // Even a registration does not bring it back.
        d.at(301) { c, t in c.registered(desktopId: desk, at: t) }
        d.advance(to: 400)
        #expect(d.takeSent() == [])
        #expect(d.timers.isEmpty)
    }

    @Test func aViewThatReconfirmsAfterReturningLeasesAgain() {
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.at(10) { c, t in c.enteredBackground(at: t) }
        // A claim made while in the background belongs to the generation that ended: it does not count later.
        d.at(20) { c, t in c.claim(ClaimID(2), desktopId: desk, baseSessionId: "T", at: t) }
        d.at(30) { c, t in c.enteredForeground(at: t) }
        #expect(d.coordinator.lease(for: desk) == nil)
        d.at(31) { c, t in c.confirmVisible(ClaimID(1), at: t) }
        #expect(d.takeSent() == [s(0, "S", true), s(10, "S", false), s(31, "S", true)])
        #expect(d.coordinator.claims[ClaimID(1)]?.foregroundGeneration == 2)
        d.advance(to: 51)
        #expect(d.takeSent() == [s(51, "S", true)])
        // A duplicate foreground notice does not start a new generation (it would end every lease).
        d.at(52) { c, t in c.enteredForeground(at: t) }
        #expect(d.coordinator.foregroundGeneration == 2)
        #expect(d.coordinator.isLeased(desktopId: desk, sessionId: "S"))
        #expect(d.takeOthers() == [.diagnostic(.ignored("enteredForeground", reason: .alreadyInForeground))])
        d.checkTimersAgree()
    }

    @Test func inactiveSuspendsTheLeaseOnceAndActiveResumesIt() {
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.at(5) { c, t in c.suspend(at: t) }
        d.at(6) { c, t in c.suspend(at: t) }
        // A view confirmed while inactive is still in this foreground generation.
        d.at(7) { c, t in c.confirmVisible(ClaimID(1), at: t) }
        d.advance(to: 60)
        #expect(d.takeSent() == [s(0, "S", true), s(5, "S", false)], "one active:false, then no renewals")
        #expect(d.coordinator.lease(for: desk) == nil)
        #expect(d.coordinator.claims.count == 1, "claims survive suspension")
        d.at(60) { c, t in c.resume(at: t) }
        d.advance(to: 80)
        #expect(d.takeSent() == [s(60, "S", true), s(80, "S", true)])
        #expect(d.coordinator.lease(for: desk)?.since == .seconds(60))
        d.checkTimersAgree()
    }

    @Test func theLeaseIsReissuedAfterEveryRegistration() {
        var d = InterestDriver()
        // Claimed before the desktop registered: held, not sent.
        d.at(1) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        #expect(d.takeSent() == [])
        #expect(d.coordinator.lease(for: desk) == InterestLease(sessionId: "S", since: .seconds(1), lastSent: nil, nextRenewal: nil))
        #expect(d.timers.isEmpty)
        d.at(4) { c, t in c.registered(desktopId: desk, at: t) }
        #expect(d.takeSent() == [s(4, "S", true)])
        // Connection lost: renewals stop; nothing is sent until the next registration.
        d.at(10) { c, t in c.connectionLost(desktopId: desk, at: t) }
        #expect(d.timers.isEmpty)
        #expect(d.coordinator.lease(for: desk)?.nextRenewal == nil)
        d.advance(to: 50)
        #expect(d.takeSent() == [])
        d.at(50) { c, t in c.registered(desktopId: desk, at: t) }
        d.advance(to: 70)
        #expect(d.takeSent() == [s(50, "S", true), s(70, "S", true)])
        // A re-registration on a live connection re-issues too and restarts the renewal.
        d.at(75) { c, t in c.registered(desktopId: desk, at: t) }
        d.advance(to: 95)
        #expect(d.takeSent() == [s(75, "S", true), s(95, "S", true)])
        // A lease that ends while unregistered sends nothing, and nothing is re-issued afterwards.
        d.at(96) { c, t in c.connectionLost(desktopId: desk, at: t) }
        d.at(97) { c, t in c.release(ClaimID(1), at: t) }
        d.at(98) { c, t in c.registered(desktopId: desk, at: t) }
        d.advance(to: 200)
        #expect(d.takeSent() == [])
        d.checkTimersAgree()
    }

    @Test func retryBaseDelaysAreTheSpecLadder() {
        #expect((1...4).map { ClientConstants.interestRetryBaseDelay(attempt: $0) }
                == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)])
        #expect(ClientConstants.interestRetryBaseDelay(attempt: 9) == .seconds(2))
    }

    @Test(arguments: [1, 2, 3, 42, 1234, 0xDEAD_BEEF] as [UInt64])
    func aFailedDeliveryIsRetriedFourTimesWithBoundedJitteredDelays(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        var d = registeredDriver()
        d.at(1) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        #expect(d.takeSent() == [s(1, "S", true)])
        var delays: [Duration] = []
        var failedAt = d.now
        // Every send fails; each failure schedules the next retry until the budget is spent.
        for _ in 0..<10 {
            d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: failedAt, rng: &rng))
            guard let due = d.timers[.retry(desktopId: desk)] else { break }
            d.advance(to: due.seconds)
            let retry = d.takeSent()
            #expect(retry == [InterestDriver.Sent(at: due, desktopId: desk, sessionId: "S", active: true)])
            delays.append(due - failedAt)
            failedAt = due
        }
        #expect(delays.count == 4, "exactly four retries")
        let bases: [Duration] = [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)]
        for (delay, base) in zip(delays, bases) {
            #expect(delay >= base * 0.8, "seed \(seed): \(delay) below \(base) - 20 %")
            #expect(delay <= min(base * 1.2, .seconds(2)), "seed \(seed): \(delay) above min(\(base) + 20 %, 2 s)")
        }
        #expect(delays.allSatisfy { $0 <= .seconds(2) })
        #expect(delays.first != .milliseconds(250), "the delay is jittered")
        #expect(d.takeOthers() == [.gaveUp(desktopId: desk, TimelineInterest(appSessionId: "APP-7F3C", sessionId: "S", active: true))])
        // Given up: a further failure is ignored until the next renewal.
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        #expect(d.timers[.retry(desktopId: desk)] == nil)
        _ = d.takeOthers()
        // The renewal (21 s) is a fresh send with a fresh budget.
        d.advance(to: 21)
        #expect(d.takeSent() == [s(21, "S", true)])
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        let next = d.timers[.retry(desktopId: desk)]
        #expect(next.map { $0 - d.now >= .milliseconds(200) && $0 - d.now <= .milliseconds(300) } == true)
        d.checkTimersAgree()
    }

    @Test func retryDelaysComeFromTheCallersSeededGenerator() {
        func delays(seed: UInt64) -> [Duration] {
            var rng = SeededRandom(seed: seed)
            var c = TimelineInterestCoordinator(appSessionId: "A")
            _ = c.registered(desktopId: desk, at: .zero)
            _ = c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: .zero)
            var out: [Duration] = []
            var now = Moment.zero
            for _ in 0..<4 {
                for case .arm(.retry, let due) in c.deliveryFailed(desktopId: desk, at: now, rng: &rng) {
                    out.append(due - now)
                    now = due
                }
                _ = c.timerFired(.retry(desktopId: desk), at: now)
            }
            return out
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
        // Exactly one draw per retry: the delays follow the formula on a copy of the generator.
        var rng = SeededRandom(seed: 7)
        let expected = (1...4).map { ClientConstants.interestRetryDelay(attempt: $0, rng: &rng) }
        #expect(delays(seed: 7) == expected)
    }

    @Test func failuresWhileARetryIsPendingOrUnregisteredAreAbsorbed() {
        var rng = SeededRandom(seed: 5)
        var d = registeredDriver()
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S1", at: t) }
        d.at(1) { c, t in c.claim(ClaimID(2), desktopId: desk, baseSessionId: "S2", at: t) }
        // Both frames of the move failed: one retry, of the current interest (active S2).
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        #expect(d.takeOthers() == [.diagnostic(.ignored("deliveryFailed(\(desk))", reason: .retryScheduled))])
        #expect(d.takeSent() == [s(0, "S1", true), s(1, "S1", false), s(1, "S2", true)])
        d.advance(to: 2)
        let retriedMove = d.takeSent()
        #expect(retriedMove.count == 1 && retriedMove.first?.sessionId == "S2" && retriedMove.first?.active == true)
        // A failed active:false (last claim released) is retried as active:false.
        d.at(3) { c, t in c.release(ClaimID(2), at: t) }
        d.at(3) { c, t in c.release(ClaimID(1), at: t) }
        #expect(d.takeSent() == [s(3, "S2", false), s(3, "S1", true), s(3, "S1", false)])
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        d.advance(to: 4)
        let retriedRelease = d.takeSent()
        #expect(retriedRelease.count == 1 && retriedRelease.first?.sessionId == "S1" && retriedRelease.first?.active == false)
        // Not registered: nothing to retry.
        d.at(5) { c, t in c.connectionLost(desktopId: desk, at: t) }
        d.apply(d.coordinator.deliveryFailed(desktopId: desk, at: d.now, rng: &rng))
        #expect(d.takeOthers() == [.diagnostic(.ignored("deliveryFailed(\(desk))", reason: .desktopNotRegistered))])
        #expect(d.timers.isEmpty)
    }

    @Test func staleTimerFiresAreIgnored() {
        var d = registeredDriver()
        // Never armed.
        d.apply(d.coordinator.timerFired(.renewal(desktopId: desk), at: .zero))
        d.apply(d.coordinator.timerFired(.retry(desktopId: desk), at: .zero))
        d.at(0) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        _ = d.takeSent()
        // Early: the renewal is due at 20 s.
        d.advance(to: 19)
        d.apply(d.coordinator.timerFired(.renewal(desktopId: desk), at: .seconds(19)))
        // Cancelled by the release, then fired by a late driver.
        d.at(25) { c, t in c.release(ClaimID(1), at: t) }
        d.advance(to: 40)
        d.apply(d.coordinator.timerFired(.renewal(desktopId: desk), at: .seconds(40)))
        #expect(d.takeSent() == [s(20, "S", true), s(25, "S", false)])
        #expect(d.takeOthers() == [
            .diagnostic(.staleTimer(.renewal(desktopId: desk))), .diagnostic(.staleTimer(.retry(desktopId: desk))),
            .diagnostic(.staleTimer(.renewal(desktopId: desk))), .diagnostic(.staleTimer(.renewal(desktopId: desk))),
        ])
        // A renewal already handled and fired twice: the second is stale.
        d.at(40) { c, t in c.claim(ClaimID(2), desktopId: desk, baseSessionId: "S", at: t) }
        d.advance(to: 60)
        d.apply(d.coordinator.timerFired(.renewal(desktopId: desk), at: .seconds(60)))
        #expect(d.takeSent() == [s(40, "S", true), s(60, "S", true)])
        #expect(d.takeOthers() == [.diagnostic(.staleTimer(.renewal(desktopId: desk)))])
        d.checkTimersAgree()
    }

    @Test func eachDesktopHasItsOwnLease() {
        var d = registeredDriver()
        d.at(0) { c, t in c.registered(desktopId: "desk-2", at: t) }
        d.at(1) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.at(2) { c, t in c.claim(ClaimID(2), desktopId: "desk-2", baseSessionId: "T", at: t) }
        #expect(d.coordinator.isLeased(desktopId: desk, sessionId: "S"))
        #expect(d.coordinator.isLeased(desktopId: "desk-2", sessionId: "T"))
        d.at(10) { c, t in c.enteredBackground(at: t) }
        // Ends both, in desktop ID order (deterministic, whatever the hash seed).
        #expect(d.takeSent() == [s(1, "S", true), s(2, "T", true, desktop: "desk-2"),
                                 s(10, "T", false, desktop: "desk-2"), s(10, "S", false)])
        // A claim that moves to another desktop ends the lease on the first.
        d.at(20) { c, t in c.enteredForeground(at: t) }
        d.at(21) { c, t in c.claim(ClaimID(1), desktopId: desk, baseSessionId: "S", at: t) }
        d.at(22) { c, t in c.claim(ClaimID(1), desktopId: "desk-2", baseSessionId: "U", at: t) }
        #expect(d.takeSent() == [s(21, "S", true), s(22, "S", false), s(22, "U", true, desktop: "desk-2")])
        d.at(23) { c, t in c.release(ClaimID(9), at: t) }
        d.at(23) { c, t in c.confirmVisible(ClaimID(9), at: t) }
        #expect(d.takeOthers() == [.diagnostic(.unknownClaim(ClaimID(9), input: "release")),
                                   .diagnostic(.unknownClaim(ClaimID(9), input: "confirmVisible"))])
        d.checkTimersAgree()
    }

    @Test(arguments: [11, 12] as [UInt64])
    func aDayOfVirtualLifeKeepsTheInvariantsAndLeaksNoTimers(seed: UInt64) {
        var script = SeededRandom(seed: seed)
        var jitter = SeededRandom(seed: seed &+ 100)
        var d = InterestDriver()
        let desktops = ["desk-a", "desk-b"]
        let sessions = ["S1", "S2", "S3"]
        var time = 0.0
        var activeSends = 0
        while time < 86_400 {
            time += 1 + Double(script.next(upperBound: 30 as UInt64))
            let desktop = desktops[Int(script.next(upperBound: 2 as UInt64))]
            let claim = ClaimID(script.next(upperBound: 6 as UInt64))
            let session = sessions[Int(script.next(upperBound: 3 as UInt64))]
            switch script.next(upperBound: 12 as UInt64) {
            case 0, 1, 2: d.at(time) { c, t in c.claim(claim, desktopId: desktop, baseSessionId: session, at: t) }
            case 3: d.at(time) { c, t in c.confirmVisible(claim, at: t) }
            case 4, 5: d.at(time) { c, t in c.release(claim, at: t) }
            case 6: d.at(time) { c, t in c.enteredBackground(at: t) }
            case 7: d.at(time) { c, t in c.enteredForeground(at: t) }
            case 8: d.at(time) { c, t in script.next() % 2 == 0 ? c.suspend(at: t) : c.resume(at: t) }
            case 9: d.at(time) { c, t in c.connectionLost(desktopId: desktop, at: t) }
            case 10: d.at(time) { c, t in c.registered(desktopId: desktop, at: t) }
            default: d.at(time) { c, t in c.deliveryFailed(desktopId: desktop, at: t, rng: &jitter) }
            }
            let c = d.coordinator
            for desktop in desktops {
                let lease = c.lease(for: desktop)
                // The lease is for the newest counting claim of the desktop, or there is none.
                let newest = c.claims.values.filter { $0.desktopId == desktop && c.counts($0) }.max { $0.recency < $1.recency }
                #expect(lease?.sessionId == newest?.baseSessionId)
                // A renewal is armed exactly when a lease can be renewed, for the lease's next renewal.
                let renewal = d.timers[.renewal(desktopId: desktop)]
                #expect(renewal == ((lease != nil && c.isRegistered(desktop)) ? lease?.nextRenewal : nil))
                if let due = renewal { #expect(due - d.now <= .seconds(20) && due > d.now) }
                if let retry = d.timers[.retry(desktopId: desktop)] { #expect(retry - d.now <= .seconds(2)) }
            }
            activeSends = d.sent.filter(\.active).count
        }
        #expect(activeSends > 100, "the script exercised the lease")
        // Wind down: every view goes, every connection closes: nothing stays armed.
        for id in d.coordinator.claims.keys.sorted() { d.at(time) { c, t in c.release(id, at: t) } }
        for desktop in desktops { d.at(time) { c, t in c.connectionLost(desktopId: desktop, at: t) } }
        #expect(d.timers.isEmpty)
        #expect(d.coordinator.armedTimers.isEmpty)
        d.checkTimersAgree()
    }
}
