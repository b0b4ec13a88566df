import RelayClient
import RelayProtocol
import Testing

/// A tiny virtual-time driver for ``AuthFlow``: it performs `arm`/`cancel` on its own timer table (as a
/// real driver would) and fires due timers in deadline order when time advances.
private struct AuthDriver {
    var flow = AuthFlow()
    var now = Moment.zero
    var timers: [AuthTimer: Moment] = [:]
    var log: [(Moment, AuthEffect)] = []

    @discardableResult
    mutating func feed(_ input: AuthInput) -> [AuthEffect] {
        let effects = flow.handle(input, at: now)
        for effect in effects {
            log.append((now, effect))
            switch effect {
            case .arm(let t, let deadline): timers[t] = deadline
            case .cancel(let t): timers[t] = nil
            default: break
            }
        }
        return effects
    }

    /// Advances to `target`, firing every timer due on the way; returns the effects of those fires.
    @discardableResult
    mutating func advance(to target: Moment) -> [AuthEffect] {
        var out: [AuthEffect] = []
        while let (timer, deadline) = timers.filter({ $0.value <= target }).min(by: { $0.value < $1.value }) {
            timers[timer] = nil
            now = deadline
            out += feed(.timerFired(timer))
        }
        now = target
        return out
    }

    mutating func advance(by d: Duration) -> [AuthEffect] { advance(to: now + d) }

    /// The single HTTP request among `effects`.
    func request(_ effects: [AuthEffect]) -> AuthRequest? {
        let requests = effects.compactMap { if case .http(let r) = $0 { r } else { nil } }
        return requests.count == 1 ? requests[0] : nil
    }
}

/// SPEC A2: the poll-status login, the code exchange, and the JWT refresh.
@Suite struct A2AuthTests {
    private let pkce = PKCEPair(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
                                challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    private let pollingId = "b2f6c0e4-pid"

    private func loggedInDriver(jwt: String = "jwt-1", expiry: Moment = .seconds(3600)) -> AuthDriver {
        var d = AuthDriver()
        d.feed(.resumeSession(StoredLogin(jwt: jwt, expiry: expiry)))
        return d
    }

    // MARK: Login

    @Test func loginOpensTheBrowserAndFirstPollsAfterTwoSeconds() throws {
        var d = AuthDriver()
        d.now = .seconds(10)
        #expect(d.feed(.startLogin(pkce: pkce, pollingId: pollingId)) == [
            .openBrowser(path: "/auth/auth0/initiate-login", pollingId: pollingId, challenge: pkce.challenge),
            .arm(.poll, deadline: .seconds(12)),
        ])
        #expect(d.advance(to: Moment(nanoseconds: 11_999_999_999)).isEmpty, "no poll before 2 s")
        let poll = try #require(d.request(d.advance(to: .seconds(12))))
        #expect(poll == AuthRequest(id: AuthRequestID(1), kind: .pollStatus(pollingId: pollingId, poll: 1)))
        #expect(poll.kind.path == "/auth0/poll-status")
    }

    @Test func pollsEveryTwoSecondsAtMostSixtyTimesThenFails() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        var sentAt: [Moment] = []
        var last: [AuthEffect] = []
        for _ in 0..<200 {  // far more rounds than needed: the limit must stop it, not the loop
            let fired = d.advance(by: .seconds(2))
            guard let poll = d.request(fired) else { break }
            guard case .pollStatus(_, let n) = poll.kind else { Issue.record("not a poll: \(poll)"); return }
            #expect(n == sentAt.count + 1)
            sentAt.append(d.now)
            last = d.feed(.httpResponse(poll.id, status: 200, body: .poll(.pending)))
        }
        #expect(sentAt.count == 60)
        #expect(sentAt == (1...60).map { Moment.seconds(Double(2 * $0)) }, "one poll every 2 s from t = 2 s")
        #expect(last == [.loginFailed(.pollLimit(polls: 60))])
        #expect(d.flow.login == .idle)
        #expect(d.flow.armedTimers.isEmpty && d.timers.isEmpty, "the 61st poll is never scheduled")
        #expect(d.advance(by: .seconds(600)).isEmpty)
    }

    @Test func theNextPollWaitsTwoSecondsAfterASlowPollsOutcome() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let first = try #require(d.request(d.advance(to: .seconds(2))))
        // The response takes 3.5 s: no second poll overlaps it.
        #expect(d.advance(to: .seconds(5.5)).isEmpty)
        #expect(d.feed(.httpResponse(first.id, status: 200, body: .poll(.pending))) == [.arm(.poll, deadline: .seconds(7.5))])
        let second = try #require(d.request(d.advance(to: .seconds(7.5))))
        #expect(second.kind == .pollStatus(pollingId: pollingId, poll: 2))
    }

    @Test func failedPollsCountAndPollingGoesOn() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let p1 = try #require(d.request(d.advance(by: .seconds(2))))
        #expect(d.feed(.httpResponse(p1.id, status: 502, body: .none)) == [.arm(.poll, deadline: .seconds(4))])
        let p2 = try #require(d.request(d.advance(by: .seconds(2))))
        #expect(d.feed(.httpFailed(p2.id, reason: "offline")) == [.arm(.poll, deadline: .seconds(6))])
        let p3 = try #require(d.request(d.advance(by: .seconds(2))))
        #expect(p3.kind == .pollStatus(pollingId: pollingId, poll: 3))
    }

    @Test func completedPollExchangesTheCodeWithTheVerifier() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let p1 = try #require(d.request(d.advance(by: .seconds(2))))
        d.feed(.httpResponse(p1.id, status: 200, body: .poll(.pending)))
        let p2 = try #require(d.request(d.advance(by: .seconds(2))))
        let exchange = try #require(d.request(d.feed(.httpResponse(p2.id, status: 200, body: .poll(.completed(code: "ac-77"))))))
        #expect(exchange == AuthRequest(id: AuthRequestID(3),
                                        kind: .exchangeCode(code: "ac-77", verifier: pkce.verifier, pollingId: pollingId)))
        #expect(d.timers.isEmpty, "no poll after completion")
        d.now = .seconds(4.2)
        let login = StoredLogin(jwt: "jwt-new", expiry: .seconds(4.2 + 3600))
        #expect(d.feed(.httpResponse(exchange.id, status: 200, body: .token(login))) == [
            .loggedIn(login),
            .arm(.refresh, deadline: .seconds(4.2 + 3300)),
        ])
        #expect(d.flow.session == login)
        #expect(d.flow.login == .idle)
    }

    @Test func theSixtiethPollMayStillComplete() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        for n in 1...60 {
            let poll = try #require(d.request(d.advance(by: .seconds(2))))
            let body: PollResult = n == 60 ? .completed(code: "late") : .pending
            let effects = d.feed(.httpResponse(poll.id, status: 200, body: .poll(body)))
            if n == 60 {
                #expect(d.request(effects)?.kind == .exchangeCode(code: "late", verifier: pkce.verifier, pollingId: pollingId))
            }
        }
    }

    @Test func serverRejectionAndFailedExchangeEndTheLogin() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let p1 = try #require(d.request(d.advance(by: .seconds(2))))
        #expect(d.feed(.httpResponse(p1.id, status: 200, body: .poll(.failed("access_denied"))))
                == [.loginFailed(.rejected("access_denied"))])
        #expect(d.timers.isEmpty)

        var e = AuthDriver()
        e.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let q1 = try #require(e.request(e.advance(by: .seconds(2))))
        let exchange = try #require(e.request(e.feed(.httpResponse(q1.id, status: 200, body: .poll(.completed(code: "c"))))))
        #expect(e.feed(.httpResponse(exchange.id, status: 400, body: .none))
                == [.loginFailed(.exchangeFailed(status: 400, "the server refused the code"))])
        #expect(e.flow.session == nil)
        #expect(e.flow.armedTimers.isEmpty)
    }

    @Test func cancellingALoginStopsPollingAndIgnoresItsLateReply() throws {
        var d = AuthDriver()
        d.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        let p1 = try #require(d.request(d.advance(by: .seconds(2))))
        d.feed(.httpResponse(p1.id, status: 200, body: .poll(.pending)))
        #expect(d.feed(.cancelLogin) == [.cancel(.poll), .loginFailed(.cancelled)])
        #expect(d.advance(by: .seconds(10)).isEmpty)
        #expect(d.feed(.httpResponse(p1.id, status: 200, body: .poll(.completed(code: "x"))))
                == [.ignored(.staleResponse(AuthRequestID(rawValue: 1)))])
        #expect(d.flow.session == nil)
    }

    @Test func secretsStayOutOfDescriptions() {
        #expect(!pkce.description.contains(pkce.verifier))
        #expect(!StoredLogin(jwt: "eyJsecret", expiry: .zero).description.contains("eyJsecret"))
    }

    // MARK: Refresh timer

    @Test func refreshTimerIsThreeHundredSecondsBeforeAFarExpiry() {
        var d = AuthDriver()
        d.now = .seconds(100)
        #expect(d.feed(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(100 + 3600))))
                == [.arm(.refresh, deadline: .seconds(100 + 3300))])
    }

    @Test func refreshTimerIsFiveSecondsWhenExpiryIsWithinThreeHundredSeconds() {
        var d = AuthDriver()
        d.now = .seconds(100)
        #expect(d.feed(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(100 + 120))))
                == [.arm(.refresh, deadline: .seconds(105))])
    }

    @Test func refreshTimerIsFiveSecondsWhenExpiryIsInThePast() {
        var d = AuthDriver()
        d.now = .seconds(100)
        #expect(d.feed(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(40))))
                == [.arm(.refresh, deadline: .seconds(105))])
    }

    @Test func refreshTimerBoundaryAroundTheFiveSecondFloor() {
        var exact = AuthDriver()
        exact.now = .seconds(100)
        #expect(exact.feed(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(405))))
                == [.arm(.refresh, deadline: .seconds(105))])
        var later = AuthDriver()
        later.now = .seconds(100)
        #expect(later.feed(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(406))))
                == [.arm(.refresh, deadline: .seconds(106))])
    }

    @Test func successfulRefreshUpdatesTheTokenAndArmsTheNextRefresh() throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        let refresh = try #require(d.request(d.advance(to: .seconds(3300))))
        #expect(refresh.kind == .refresh(jwt: "jwt-1"))
        #expect(refresh.kind.path == "/auth/token/refresh")
        d.now = .seconds(3301)
        let fresh = StoredLogin(jwt: "jwt-2", expiry: .seconds(3301 + 3600))
        #expect(d.feed(.httpResponse(refresh.id, status: 200, body: .token(fresh)))
                == [.tokenUpdated(fresh), .arm(.refresh, deadline: .seconds(3301 + 3300))])
        #expect(d.flow.session == fresh)
        let next = try #require(d.request(d.advance(to: .seconds(3301 + 3300))))
        #expect(next.kind == .refresh(jwt: "jwt-2"))
    }

    // MARK: One refresh at a time

    @Test func onlyOneRefreshRunsAtATime() throws {
        var d = loggedInDriver()
        d.now = .seconds(10)
        let effects = d.feed(.refreshNow)
        #expect(effects.first == .cancel(.refresh), "the scheduled refresh is replaced, not doubled")
        let refresh = try #require(d.request(effects))
        #expect(d.flow.refreshInFlight == refresh.id)
        // More triggers while it is in flight join it: nothing is sent.
        #expect(d.feed(.refreshNow).isEmpty)
        #expect(d.feed(.refreshNow).isEmpty)
        #expect(d.advance(by: .seconds(4000)).isEmpty, "no timer fires a second refresh meanwhile")
        let all = d.log.compactMap { if case .http(let r) = $0.1 { r } else { nil } }
        #expect(all == [refresh])
        // After it ends, the next trigger starts a new one.
        d.feed(.httpResponse(refresh.id, status: 200, body: .token(StoredLogin(jwt: "jwt-2", expiry: d.now + .seconds(3600)))))
        #expect(d.request(d.feed(.refreshNow))?.kind == .refresh(jwt: "jwt-2"))
    }

    @Test func refreshTimerFiringWhileARefreshIsInFlightIsStale() throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        _ = try #require(d.request(d.feed(.refreshNow)))
        // A driver race: the cancelled timer's fire arrives anyway.
        d.now = .seconds(3300)
        #expect(d.feed(.timerFired(.refresh)) == [.ignored(.staleTimer(.refresh))])
    }

    // MARK: Ending the session

    @Test(arguments: [401, 403])
    func unauthorizedRefreshEndsTheSession(status: Int) throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        let refresh = try #require(d.request(d.advance(to: .seconds(3300))))
        #expect(d.feed(.httpResponse(refresh.id, status: status, body: .none))
                == [.sessionEnded(.refreshRejected(status: status))])
        #expect(d.flow.session == nil)
        #expect(d.flow.refreshInFlight == nil)
        #expect(d.flow.armedTimers.isEmpty && d.timers.isEmpty, "no refresh after the session ended")
        #expect(d.feed(.refreshNow) == [.ignored(.noSession(input: "refreshNow"))])
    }

    @Test func serverErrorDoesNotEndTheSessionAndRetriesWithBoundedBackoff() throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        var refresh = try #require(d.request(d.advance(to: .seconds(3300))))
        var retryDelays: [Duration] = []
        for round in 0..<7 {
            let failedAt = d.now
            let effects = round.isMultiple(of: 2)
                ? d.feed(.httpResponse(refresh.id, status: 500, body: .none))
                : d.feed(.httpFailed(refresh.id, reason: "timed out"))
            guard case .arm(.refresh, let deadline)? = effects.first, effects.count == 1 else {
                Issue.record("expected only a retry timer, got \(effects)"); return
            }
            retryDelays.append(deadline - failedAt)
            #expect(d.flow.session != nil, "a 500 keeps the session")
            refresh = try #require(d.request(d.advance(to: deadline)))
            #expect(refresh.kind == .refresh(jwt: "jwt-1"))
        }
        #expect(retryDelays == [.seconds(5), .seconds(10), .seconds(20), .seconds(40), .seconds(60), .seconds(60), .seconds(60)])
        #expect(!d.log.contains { if case .sessionEnded = $0.1 { true } else { false } })
        // A success resets the backoff.
        d.feed(.httpResponse(refresh.id, status: 200, body: .token(StoredLogin(jwt: "jwt-2", expiry: d.now + .seconds(10)))))
        #expect(d.flow.refreshFailures == 0)
    }

    @Test func aTriggerDuringTheRetryBackoffJoinsTheScheduledRetry() throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        let refresh = try #require(d.request(d.advance(to: .seconds(3300))))
        d.feed(.httpResponse(refresh.id, status: 503, body: .none))
        d.now = .seconds(3301)
        #expect(d.feed(.refreshNow).isEmpty, "does not bypass the 5 s backoff")
        #expect(d.flow.armedTimers == [.refresh: .seconds(3305)])
        let retry = try #require(d.request(d.advance(to: .seconds(3305))))
        #expect(retry.id == AuthRequestID(2))
    }

    @Test func aTokenlessSuccessIsAFailureNotAnUpdate() throws {
        var d = loggedInDriver(expiry: .seconds(3600))
        let refresh = try #require(d.request(d.advance(to: .seconds(3300))))
        #expect(d.feed(.httpResponse(refresh.id, status: 200, body: .none)) == [.arm(.refresh, deadline: .seconds(3305))])
        #expect(d.flow.session?.jwt == "jwt-1")
    }

    @Test func logoutEndsTheSessionAndAnInFlightRefreshReplyIsIgnored() throws {
        var d = loggedInDriver()
        let refresh = try #require(d.request(d.feed(.refreshNow)))
        #expect(d.feed(.logout) == [.sessionEnded(.loggedOut)])
        #expect(d.feed(.httpResponse(refresh.id, status: 200, body: .token(StoredLogin(jwt: "late", expiry: .seconds(9999)))))
                == [.ignored(.staleResponse(AuthRequestID(rawValue: 1)))])
        #expect(d.flow.session == nil)

        var e = loggedInDriver()
        #expect(e.feed(.logout) == [.cancel(.refresh), .sessionEnded(.loggedOut)])
        #expect(e.flow.armedTimers.isEmpty)
    }

    // MARK: Stale timers

    @Test func staleTimersAreIgnored() {
        var d = AuthDriver()
        #expect(d.feed(.timerFired(.poll)) == [.ignored(.staleTimer(.poll))])
        #expect(d.feed(.timerFired(.refresh)) == [.ignored(.staleTimer(.refresh))])
        // A fire from an earlier arming, arriving before the current deadline, is stale too.
        var e = loggedInDriver(expiry: .seconds(3600))
        e.now = .seconds(1000)
        #expect(e.feed(.timerFired(.refresh)) == [.ignored(.staleTimer(.refresh))])
        #expect(e.flow.refreshInFlight == nil)
        #expect(e.flow.armedTimers == [.refresh: .seconds(3300)], "the real timer stays armed")
        // A cancelled poll timer that fires anyway sends nothing.
        var f = AuthDriver()
        f.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        f.feed(.cancelLogin)
        f.now = .seconds(2)
        #expect(f.feed(.timerFired(.poll)) == [.ignored(.staleTimer(.poll))])
        #expect(f.flow.lastRequest == AuthRequestID(0))
    }

    @Test func loginIsRefusedWhileLoggedInOrAlreadyLoggingIn() {
        var d = loggedInDriver()
        #expect(d.feed(.startLogin(pkce: pkce, pollingId: pollingId)) == [.ignored(.alreadyLoggedIn)])
        var e = AuthDriver()
        e.feed(.startLogin(pkce: pkce, pollingId: pollingId))
        #expect(e.feed(.startLogin(pkce: pkce, pollingId: "other")) == [.ignored(.loginInProgress)])
    }
}
