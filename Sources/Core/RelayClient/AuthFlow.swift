public import RelayProtocol

/// The PKCE pair of one login. Both come from the driver's CSPRNG, never from the seeded generator:
/// they are secrets, and a trace that holds the seed must not be able to re-derive them.
public struct PKCEPair: Sendable, Hashable, CustomStringConvertible {
    /// The code verifier (secret), sent only with the code exchange.
    public var verifier: String
    /// The code challenge (S256 of the verifier), sent to `initiate-login`.
    public var challenge: String

    /// Creates a pair.
    public init(verifier: String, challenge: String) {
        self.verifier = verifier
        self.challenge = challenge
    }

    /// `pkce(challenge <challenge>)`; never shows the verifier.
    public var description: String { "pkce(challenge \(challenge))" }
}

/// One HTTP request of the auth flow, counting up from 1 across logins and refreshes.
public struct AuthRequestID: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt64
    /// Creates request `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates request `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: AuthRequestID, b: AuthRequestID) -> Bool { a.rawValue < b.rawValue }
    /// `auth#4`.
    public var description: String { "auth#\(rawValue)" }
}

/// What an auth request asks.
public enum AuthRequestKind: Sendable, Hashable {
    /// `GET /auth0/poll-status` for this polling ID; `poll` counts from 1.
    case pollStatus(pollingId: String, poll: Int)
    /// Exchange the authorization code for the app JWT with the PKCE verifier.
    case exchangeCode(code: String, verifier: String, pollingId: String)
    /// Refresh the app JWT, authenticated with the current one.
    case refresh(jwt: String)

    /// The request path on the region's REST origin.
    public var path: String {
        switch self {
        case .pollStatus: ClientConstants.loginPollPath
        case .exchangeCode: ClientConstants.loginExchangePath
        case .refresh: ClientConstants.tokenRefreshPath
        }
    }
}

/// An HTTP request the driver performs and answers with ``AuthInput/httpResponse(_:status:body:)`` or
/// ``AuthInput/httpFailed(_:reason:)`` (exactly one of them; the driver's HTTP timeout guarantees an end).
public struct AuthRequest: Sendable, Hashable {
    /// The request's handle.
    public var id: AuthRequestID
    /// What it asks.
    public var kind: AuthRequestKind

    /// Creates a request.
    public init(id: AuthRequestID, kind: AuthRequestKind) {
        self.id = id
        self.kind = kind
    }
}

/// The decoded body of a poll-status response.
public enum PollResult: Sendable, Hashable {
    /// The user has not finished the browser login yet.
    case pending
    /// The login completed; exchange this authorization code.
    case completed(code: String)
    /// The server says the login failed (denied, expired); stop polling.
    case failed(String)
}

/// The decoded body of an auth response (the driver decodes by the request's kind).
public enum AuthResponseBody: Sendable, Hashable {
    /// A poll-status body.
    case poll(PollResult)
    /// A token body (code exchange or refresh): the JWT and its expiry on the session clock.
    case token(StoredLogin)
    /// No body, or a body that did not decode as what the request expects.
    case none
}

/// Timers of ``AuthFlow``, armed with ``AuthEffect/arm(_:deadline:)``.
public enum AuthTimer: Sendable, Hashable, CustomStringConvertible {
    /// Send the next poll-status request.
    case poll
    /// Refresh the app JWT (also used for refresh retries).
    case refresh

    /// `poll` or `refresh`.
    public var description: String {
        switch self {
        case .poll: "poll"
        case .refresh: "refresh"
        }
    }
}

/// Why a login failed.
public enum LoginFailure: Sendable, Hashable, CustomStringConvertible {
    /// A2: 60 polls without a completed login.
    case pollLimit(polls: Int)
    /// The server reported the login as failed.
    case rejected(String)
    /// The code exchange failed (HTTP status, or nil for a transport error) with this detail.
    case exchangeFailed(status: Int?, String)
    /// The user cancelled the login.
    case cancelled

    /// A one-line description.
    public var description: String {
        switch self {
        case .pollLimit(let n): "no completed login after \(n) polls; start the login again"
        case .rejected(let why): "login rejected by the server: \(why)"
        case .exchangeFailed(let status, let why):
            "code exchange failed (\(status.map { "HTTP \($0)" } ?? "transport")): \(why); start the login again"
        case .cancelled: "login cancelled"
        }
    }
}

/// Why the session ended.
public enum SessionEndReason: Sendable, Hashable, CustomStringConvertible {
    /// A2: the refresh endpoint answered 401 or 403.
    case refreshRejected(status: Int)
    /// The user logged out.
    case loggedOut

    /// A one-line description.
    public var description: String {
        switch self {
        case .refreshRejected(let s): "token refresh rejected with HTTP \(s)"
        case .loggedOut: "logged out"
        }
    }
}

/// Everything that happens to ``AuthFlow``; each is handled at a ``Moment``.
public enum AuthInput: Sendable, Hashable {
    /// Start a login without a callback URL. `pollingId` identifies this login to poll-status; like the
    /// PKCE pair it comes from the driver's CSPRNG.
    case startLogin(pkce: PKCEPair, pollingId: String)
    /// The user dismissed the login.
    case cancelLogin
    /// A stored login was found at start-up (``IdentityEffect/ready(deviceId:login:)`` with a login):
    /// schedule its refresh.
    case resumeSession(StoredLogin)
    /// Something wants a fresh JWT now (e.g. the relay refused the upgrade with 401). Joins a refresh in
    /// flight instead of starting a second one, and joins the scheduled retry while backing off after a
    /// failed refresh (it never shortens the backoff).
    case refreshNow
    /// The user logged out.
    case logout
    /// A response to a request.
    case httpResponse(AuthRequestID, status: Int, body: AuthResponseBody)
    /// A request failed without a response (network error, driver timeout).
    case httpFailed(AuthRequestID, reason: String)
    /// An armed timer reached its deadline.
    case timerFired(AuthTimer)
}

/// Why ``AuthFlow`` ignored an input: a code and its fields, worded by `DiagnosticCatalogue` when shown.
public enum AuthIgnored: Sendable, Hashable {
    /// `cancelLogin` with no login in progress.
    case noLoginInProgress
    /// `resumeSession` while a session is already active.
    case sessionActive
    /// `refreshNow` or `logout` (`input`) with no session.
    case noSession(input: String)
    /// A timer fired that is not armed for this time.
    case staleTimer(AuthTimer)
    /// `startLogin` while a login is in progress.
    case loginInProgress
    /// `startLogin` while logged in.
    case alreadyLoggedIn
    /// A response for a request that is not pending.
    case staleResponse(AuthRequestID)
    /// A failure of a request that is not pending.
    case staleFailure(AuthRequestID)

    /// The diagnostic a trace records (codes `auth.*`).
    public var record: DiagnosticRecord {
        switch self {
        case .noLoginInProgress: DiagnosticRecord("auth.noLoginInProgress")
        case .sessionActive: DiagnosticRecord("auth.sessionActive")
        case .noSession(let input): DiagnosticRecord("auth.noSession", ["input": .string(input)])
        case .staleTimer(let t): DiagnosticRecord("auth.staleTimer", ["timer": .string(t.description)])
        case .loginInProgress: DiagnosticRecord("auth.loginInProgress")
        case .alreadyLoggedIn: DiagnosticRecord("auth.alreadyLoggedIn")
        case .staleResponse(let id): DiagnosticRecord("auth.staleResponse", ["request": .int(Int64(bitPattern: id.rawValue))])
        case .staleFailure(let id): DiagnosticRecord("auth.staleFailure", ["request": .int(Int64(bitPattern: id.rawValue))])
        }
    }
}

/// What ``AuthFlow`` wants done, in order.
public enum AuthEffect: Sendable, Hashable {
    /// Open the browser session on `path` (callback scheme nil) with this polling ID and PKCE challenge.
    case openBrowser(path: String, pollingId: String, challenge: String)
    /// Perform this HTTP request on the region's REST origin.
    case http(AuthRequest)
    /// Arm (or move) a timer.
    case arm(AuthTimer, deadline: Moment)
    /// Cancel an armed timer.
    case cancel(AuthTimer)
    /// The login completed: store the login (WhenUnlockedThisDeviceOnly) and use the JWT.
    case loggedIn(StoredLogin)
    /// The login failed; the flow is idle again.
    case loginFailed(LoginFailure)
    /// A refresh succeeded: store and use the new JWT.
    case tokenUpdated(StoredLogin)
    /// The session ended. The machine closes every relay socket with 1001, fails every pending call with a
    /// session-ended failure, deletes the stored login, and shows the login screen.
    case sessionEnded(SessionEndReason)
    /// An input that does not apply was ignored (stale timer, response to no pending request, ...).
    case ignored(AuthIgnored)
}

/// SPEC A2 as a sans-IO value type: the login without callback URL (poll-status loop, code exchange)
/// and the app JWT refresh (one at a time, timer max(expiry - 300 s - now, 5 s), 401/403 end the session).
///
/// No clock and no randomness inside: inputs come with their ``Moment``; timers are ``AuthTimer``s the
/// flow arms and cancels through effects and keeps in its own table, so a fire of a timer that is not
/// armed (or fires before its deadline, i.e. from an earlier arming) is stale and ignored.
public struct AuthFlow: Sendable, Hashable {
    /// Where the login stands.
    public enum LoginState: Sendable, Hashable {
        /// No login in progress.
        case idle
        /// Polling; `polls` were sent so far, `inFlight` is the poll awaiting its outcome.
        case polling(polls: Int, inFlight: AuthRequestID?)
        /// Exchanging the code.
        case exchanging(AuthRequestID)
    }

    /// Where the login stands.
    public private(set) var login: LoginState = .idle
    /// The current session's login (nil when logged out).
    public private(set) var session: StoredLogin?
    /// The refresh request in flight, if any (at most one).
    public private(set) var refreshInFlight: AuthRequestID?
    /// Failed refreshes in a row (reset by a success).
    public private(set) var refreshFailures = 0
    /// The last request ID handed out (0 before the first).
    public private(set) var lastRequest = AuthRequestID(0)
    private var armed: [AuthTimer: Moment] = [:]
    private var pkce: PKCEPair?
    private var pollingId = ""

    /// An idle flow with no session.
    public init() {}

    /// The armed timers and their deadlines.
    public var armedTimers: [AuthTimer: Moment] { armed }

    /// Handles one input at `now` and returns the effects, in order.
    public mutating func handle(_ input: AuthInput, at now: Moment) -> [AuthEffect] {
        var out: [AuthEffect] = []
        switch input {
        case .startLogin(let pair, let id):
            startLogin(pair, pollingId: id, now: now, &out)
        case .cancelLogin:
            guard login != .idle else { return [.ignored(.noLoginInProgress)] }
            endLogin(&out)
            out.append(.loginFailed(.cancelled))
        case .resumeSession(let stored):
            guard session == nil else { return [.ignored(.sessionActive)] }
            session = stored
            scheduleRefresh(expiry: stored.expiry, now: now, &out)
        case .refreshNow:
            guard let session else { return [.ignored(.noSession(input: "refreshNow"))] }
            // Joins the refresh in flight, or the retry already scheduled after a failure (a trigger storm,
            // e.g. the relay refusing every upgrade with 401, must not bypass the backoff).
            guard refreshInFlight == nil, refreshFailures == 0 else { return [] }
            disarm(.refresh, &out)
            sendRefresh(session, &out)
        case .logout:
            guard session != nil else { return [.ignored(.noSession(input: "logout"))] }
            endSession(.loggedOut, &out)
        case .httpResponse(let id, let status, let body):
            response(id, status: status, body: body, now: now, &out)
        case .httpFailed(let id, let reason):
            failure(id, reason: reason, now: now, &out)
        case .timerFired(let timer):
            guard let deadline = armed[timer], deadline <= now else {
                return [.ignored(.staleTimer(timer))]
            }
            armed[timer] = nil
            fired(timer, now: now, &out)
        }
        return out
    }

    // MARK: Login

    private mutating func startLogin(_ pair: PKCEPair, pollingId id: String, now: Moment, _ out: inout [AuthEffect]) {
        guard login == .idle else { return out.append(.ignored(.loginInProgress)) }
        guard session == nil else { return out.append(.ignored(.alreadyLoggedIn)) }
        pkce = pair
        pollingId = id
        login = .polling(polls: 0, inFlight: nil)
        out.append(.openBrowser(path: ClientConstants.loginInitiatePath, pollingId: id, challenge: pair.challenge))
        arm(.poll, at: now + ClientConstants.loginPollInterval, &out)
    }

    private mutating func sendPoll(_ out: inout [AuthEffect]) {
        guard case .polling(let polls, nil) = login else { return }
        let id = nextRequest()
        login = .polling(polls: polls + 1, inFlight: id)
        out.append(.http(AuthRequest(id: id, kind: .pollStatus(pollingId: pollingId, poll: polls + 1))))
    }

    /// The outcome of poll `id`: nil result = not completed (pending, error status, transport failure).
    private mutating func pollOutcome(_ result: PollResult?, now: Moment, _ out: inout [AuthEffect]) {
        guard case .polling(let polls, _) = login, let pair = pkce else { return }
        switch result {
        case .completed(let code):
            let id = nextRequest()
            login = .exchanging(id)
            out.append(.http(AuthRequest(id: id, kind: .exchangeCode(code: code, verifier: pair.verifier,
                                                                      pollingId: pollingId))))
        case .failed(let why):
            endLogin(&out)
            out.append(.loginFailed(.rejected(why)))
        case .pending, nil:
            if polls >= ClientConstants.loginPollLimit {
                endLogin(&out)
                out.append(.loginFailed(.pollLimit(polls: polls)))
            } else {
                login = .polling(polls: polls, inFlight: nil)
                arm(.poll, at: now + ClientConstants.loginPollInterval, &out)
            }
        }
    }

    private mutating func endLogin(_ out: inout [AuthEffect]) {
        disarm(.poll, &out)
        login = .idle
        pkce = nil
        pollingId = ""
    }

    // MARK: Refresh

    private mutating func scheduleRefresh(expiry: Moment, now: Moment, _ out: inout [AuthEffect]) {
        arm(.refresh, at: now + ClientConstants.refreshDelay(expiry: expiry, now: now), &out)
    }

    private mutating func sendRefresh(_ current: StoredLogin, _ out: inout [AuthEffect]) {
        let id = nextRequest()
        refreshInFlight = id
        out.append(.http(AuthRequest(id: id, kind: .refresh(jwt: current.jwt))))
    }

    private mutating func refreshFailed(now: Moment, _ out: inout [AuthEffect]) {
        refreshInFlight = nil
        refreshFailures += 1
        arm(.refresh, at: now + ClientConstants.refreshRetryDelay(afterFailures: refreshFailures), &out)
    }

    private mutating func endSession(_ reason: SessionEndReason, _ out: inout [AuthEffect]) {
        disarm(.refresh, &out)
        session = nil
        refreshInFlight = nil
        refreshFailures = 0
        out.append(.sessionEnded(reason))
    }

    // MARK: Responses and timers

    private mutating func response(_ id: AuthRequestID, status: Int, body: AuthResponseBody, now: Moment,
                                   _ out: inout [AuthEffect]) {
        if id == refreshInFlight {
            switch (status, body) {
            case (200, .token(let fresh)):
                refreshInFlight = nil
                refreshFailures = 0
                session = fresh
                out.append(.tokenUpdated(fresh))
                scheduleRefresh(expiry: fresh.expiry, now: now, &out)
            case (401, _), (403, _):
                endSession(.refreshRejected(status: status), &out)
            default:
                refreshFailed(now: now, &out)
            }
            return
        }
        switch login {
        case .polling(_, let inFlight?) where inFlight == id:
            if (200..<300).contains(status), case .poll(let result) = body {
                pollOutcome(result, now: now, &out)
            } else {
                pollOutcome(nil, now: now, &out)
            }
        case .exchanging(let exchange) where exchange == id:
            endLogin(&out)
            if status == 200, case .token(let fresh) = body {
                session = fresh
                out.append(.loggedIn(fresh))
                scheduleRefresh(expiry: fresh.expiry, now: now, &out)
            } else {
                out.append(.loginFailed(.exchangeFailed(
                    status: status, status == 200 ? "the response carries no token" : "the server refused the code")))
            }
        default:
            out.append(.ignored(.staleResponse(id)))
        }
    }

    private mutating func failure(_ id: AuthRequestID, reason: String, now: Moment, _ out: inout [AuthEffect]) {
        if id == refreshInFlight { return refreshFailed(now: now, &out) }
        switch login {
        case .polling(_, let inFlight?) where inFlight == id:
            pollOutcome(nil, now: now, &out)
        case .exchanging(let exchange) where exchange == id:
            endLogin(&out)
            out.append(.loginFailed(.exchangeFailed(status: nil, reason)))
        default:
            out.append(.ignored(.staleFailure(id)))
        }
    }

    private mutating func fired(_ timer: AuthTimer, now: Moment, _ out: inout [AuthEffect]) {
        switch timer {
        case .poll:
            sendPoll(&out)
        case .refresh:
            guard let session, refreshInFlight == nil else { return }
            sendRefresh(session, &out)
        }
    }

    // MARK: Helpers

    private mutating func nextRequest() -> AuthRequestID {
        lastRequest = AuthRequestID(lastRequest.rawValue &+ 1)
        return lastRequest
    }

    private mutating func arm(_ timer: AuthTimer, at deadline: Moment, _ out: inout [AuthEffect]) {
        armed[timer] = deadline
        out.append(.arm(timer, deadline: deadline))
    }

    private mutating func disarm(_ timer: AuthTimer, _ out: inout [AuthEffect]) {
        guard armed.removeValue(forKey: timer) != nil else { return }
        out.append(.cancel(timer))
    }
}
