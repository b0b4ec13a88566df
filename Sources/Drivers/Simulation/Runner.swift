public import Capture
public import DevRelay
import OfflineQueue
public import RelayClient
public import RelayProtocol
import Trace

/// How a simulation is set up.
public struct SimulationSetup: Sendable {
    /// The seed of everything: the client's generator, and (derived from it) the relay's, the desktop's
    /// and the network's.
    public var seed: UInt64
    /// How long to run (virtual time).
    public var duration: Duration
    /// The client's configuration (its seed is replaced by `seed`).
    public var client: ClientConfiguration
    /// UI inputs, in time order.
    public var steps: [ScenarioStep]
    /// Faults for the relay, the desktop and the client's environment.
    public var faults: FaultScript
    /// The stored login at start-up (nil: none; the JWT still comes with `start`).
    public var storedLogin: StoredLogin?
    /// Resume credentials in the client's store at start-up (nil: none).
    public var storedResume: ResumeCredentials?
    /// One-way network latency between the client and the relay, and between the relay and its
    /// simulated desktops.
    public var latency: Duration = .milliseconds(15)
    /// How long the UI takes to process a delivered snapshot.
    public var snapshotProcessing: Duration = .milliseconds(40)
    /// How the desktop behaves.
    public var desktopSnapshotInterval: Duration = .seconds(3)
    /// Lifetime of a JWT the simulated auth server issues on refresh.
    public var refreshedTokenLifetime: Duration = .seconds(3600)
    /// SPEC Part B: the phone's SQLite file (nil: none). A real file: it survives the client restarts
    /// below. The offline queue reads its pending rows from it at start (when `offlineQueueInUse`); links
    /// are written to its `linked_devices`.
    public var offlineQueuePath: String?
    /// Whether the client loads the offline queue from the file at start (`offlineQueue(.loaded)`).
    public var offlineQueueInUse = true
    /// When the user links the desktop (docs/DEVICE_LINK.md): the code the desktop shows is typed or its
    /// QR scanned at that moment (nil: no link).
    public var link: SimulatedLink?
    /// The desktop that offers link codes and its account (the phone's, so the account check passes).
    public var linkDesktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
    /// Moments at which the client process is killed and started again (its sockets vanish, its memory is
    /// lost; the keychain's resume tokens and the offline queue's file survive).
    public var clientRestarts: [Moment] = []

    /// A setup with the defaults above.
    public init(seed: UInt64, duration: Duration, client: ClientConfiguration, steps: [ScenarioStep] = [],
                faults: FaultScript = FaultScript(directives: [])) {
        self.seed = seed
        self.duration = duration
        self.client = client
        self.steps = steps
        self.faults = faults
    }
}

/// What a simulation did.
public struct SimulationResult: Sendable {
    /// Every input the client machine handled, with its time, in order.
    public var inputs: Int
    /// Every action the client machine returned, with its time, in order (kept when `keepActions`).
    public var actions: [(time: Moment, action: ClientAction)]
    /// Counters for a summary.
    public var counts: [String: Int]
    /// The virtual time at the end.
    public var end: Moment
}

/// Runs the relay client machine, the development relay and the simulated desktop together in one
/// process on virtual time (FoundationDB-style): every message crosses a simulated network with a fixed
/// latency, every timer fires at its deadline, faults apply on cue, and the client's inputs and actions
/// go to a ``ClientCapture`` exactly as a live capture writes them. Same setup, same seed: same events,
/// same trace bytes.
public struct Simulation {
    /// The set-up.
    public let setup: SimulationSetup
    /// The client under test.
    public private(set) var client: RelayClientMachine
    /// The relay (and, inside it, the simulated desktops).
    public private(set) var relay: DevRelay
    /// The client's resume-token store (the keychain).
    public private(set) var tokens = ResumeTokenStore()
    /// The virtual time.
    public private(set) var now: Moment = .zero

    private enum Event {
        case client(ClientInput)
        case clientTimer(TimerID)
        case relay(RelayInput)
        case relayTimer(RelayTimer)
        case fault(Fault)
        case step(ClientInput)
        case restartClient
        case enterLinkCode(scanned: Bool)
    }

    private var queue = TimedQueue<Event>()
    private var clientTimers: [TimerID: Moment] = [:]
    private var relayTimers: [RelayTimer: Moment] = [:]
    private var connectionOf: [Generation: ConnectionID] = [:]
    private var generationOf: [ConnectionID: Generation] = [:]
    /// The last link code the relay issued (what the desktop shows).
    private var shownCode: LinkCodeOffer?
    private var lastConnection: UInt64 = 0
    private var counts: [String: Int] = [:]
    private var inputCount = 0
    private var actions: [(time: Moment, action: ClientAction)] = []
    private var lastLogin: StoredLogin?
    private var issuedTokens = 0
    private let capture: ClientCapture?
    private let keepActions: Bool
    private var store: OfflineQueueStore?
    private var restarts = 0
    private let userId = "user-sim"

    /// A simulation of `setup`, capturing into `capture` (nil: no trace), keeping the client's actions in
    /// the result when `keepActions` (for tests).
    public init(setup: SimulationSetup, capture: ClientCapture?, keepActions: Bool = false) {
        self.setup = setup
        self.capture = capture
        self.keepActions = keepActions
        var config = setup.client
        config.seed = setup.seed
        client = RelayClientMachine(configuration: config)
        var relayConfiguration = DevRelayConfiguration(seed: setup.seed &+ 1)
        relayConfiguration.desktopSnapshotInterval = setup.desktopSnapshotInterval
        relayConfiguration.desktopLatency = setup.latency
        // The phone's desktop is up from the start (a linking phone's: the one that offers the code).
        let startDesktop = config.desktopId.isEmpty ? setup.linkDesktopId : config.desktopId
        relayConfiguration.desktopsAtStart = [StartingDesktop(deviceId: startDesktop, userId: userId, offersLinkCode: setup.link != nil)]
        relay = DevRelay(configuration: relayConfiguration)
        lastLogin = setup.storedLogin
        if let path = setup.offlineQueuePath {
            do { store = try OfflineQueueStore(path: path) } catch { counts["offlineQueueErrors", default: 0] += 1 }
        }
    }

    /// The phone's development JWT: user, device ID and token-binding hash claims the relay checks.
    public static func phoneJWT(userId: String, deviceId: String, serial: Int) -> String {
        let binding = UpgradeCheck.base64URLEncode(UpgradeCheck.sha256(Array(deviceId.lowercased().utf8)))
        return UpgradeCheck.developmentJWT(claims: ["sub": .string(userId), "device_id": .string(deviceId.lowercased()),
                                                   "tbh": .string(binding), "jti": .int(Int64(serial))])
    }

    /// Runs to the end of the set-up's duration, then stops the client and drains what is left.
    public mutating func run() -> SimulationResult {
        let end = Moment.zero + setup.duration
        // The app launches: the desktop connects; the client reads its identity, claims its resume key
        // and starts.
        schedule(.relay(.start), at: .zero)
        schedule(.client(.networkPath(.satisfied(.wifi))), at: .zero)
        schedule(.client(.identity(.start)), at: .zero)
        for f in setup.faults.schedule { schedule(.fault(f.fault), at: f.at) }
        for s in setup.steps where s.at <= end { schedule(.step(s.input), at: s.at) }
        if let resume = setup.storedResume {
            // The keychain already holds credentials for this pair (from an earlier launch).
            let first = tokens.claim(client.configuration.resumeKey)
            try? tokens.write(resume, for: client.configuration.resumeKey, ownership: first.ownership)
        }
        scheduleClientStart(at: .zero)
        for t in setup.clientRestarts where t <= end { schedule(.restartClient, at: t) }
        if let link = setup.link, link.at <= end { schedule(.enterLinkCode(scanned: link.scanned), at: link.at) }

        while let next = queue.nextTime, next <= end {
            guard let (t, event) = queue.pop() else { break }
            now = t
            dispatch(event)
        }
        now = end
        feedClient(.stop)
        return SimulationResult(inputs: inputCount, actions: actions, counts: counts, end: end)
    }

    /// The app's start-up: the offline queue read from its file, a resume-key claim, `start`.
    private mutating func scheduleClientStart(at t: Moment) {
        if let store, setup.offlineQueueInUse, let pending = try? store.pending() {
            let mutations = pending.map { q in
                OfflineMutation(idempotencyKey: q.mutation.idempotencyKey, method: q.mutation.method,
                                params: (try? JSONValue(parsing: q.mutation.paramsJSON)) ?? .object([:]),
                                createdAt: Moment(nanoseconds: q.mutation.createdAt))
            }
            schedule(.client(.offlineQueue(.loaded(mutations))), at: t)
        }
        let claim = tokens.claim(client.configuration.resumeKey)
        let jwt = lastLogin?.jwt ?? Simulation.phoneJWT(userId: userId, deviceId: client.configuration.deviceId, serial: 0)
        schedule(.client(.start(StartParameters(jwt: jwt, storedResume: claim.credentials, resumeOwnership: claim.ownership))), at: t)
    }

    /// The client process dies and starts again: its sockets vanish (the relay sees them drop), its
    /// timers and memory are gone; a new machine starts from the keychain and the offline queue's file.
    /// The trace gets a `client restart seed=N` marker, from which a replay builds the new machine.
    private mutating func restartClient() {
        restarts += 1
        counts["restarts", default: 0] += 1
        for (g, c) in connectionOf.sorted(by: { $0.key < $1.key }) {
            schedule(.relay(.closed(c, code: 1006, reason: "client process killed")), at: now + setup.latency)
            generationOf[c] = nil
            connectionOf[g] = nil
        }
        clientTimers.removeAll()
        var config = client.configuration
        config.seed = setup.seed &+ UInt64(restarts) &* 1_000_003
        capture?.mark("client restart seed=\(config.seed)", at: now)
        let path = client.networkPath
        client = RelayClientMachine(configuration: config)
        feedClient(.networkPath(path))
        feedClient(.identity(.start))
        scheduleClientStart(at: now)
    }

    // MARK: Dispatch

    private mutating func schedule(_ e: Event, at t: Moment) {
        queue.push(e, at: max(t, now))
    }

    private mutating func dispatch(_ event: Event) {
        switch event {
        case .client(let input), .step(let input):
            feedClient(input)
        case .clientTimer(let id):
            guard clientTimers[id] == now else { return }
            clientTimers[id] = nil
            feedClient(.timerFired(id))
        case .relay(let input):
            perform(relay.handle(input, at: now))
        case .relayTimer(let t):
            guard relayTimers[t] == now else { return }
            relayTimers[t] = nil
            perform(relay.handle(.timerFired(t), at: now))
        case .restartClient:
            restartClient()
        case .enterLinkCode(let scanned):
            // The user reads the code off the desktop (or points the camera at its QR).
            guard let code = shownCode else { return }
            feedClient(.link(scanned ? .scanCode(code.uri) : .enterCode(code.code)))
        case .fault(let fault):
            counts["faults", default: 0] += 1
            switch fault {
            case .relay(let f): perform(relay.handle(.fault(f), at: now))
            case .desktop(let f): perform(relay.handle(.desktopFault(f), at: now))
            case .client(let f): clientFault(f)
            }
        }
    }

    private mutating func clientFault(_ f: ClientFault) {
        for input in f.clientInputs(desktopId: client.desktopId, appState: client.appState) { feedClient(input) }
    }

    // MARK: The client

    private mutating func feedClient(_ input: ClientInput) {
        inputCount += 1
        capture?.record(input, at: now)
        let out = client.handle(input, at: now)
        capture?.record(actions: out, at: now)
        if keepActions { for a in out { actions.append((now, a)) } }
        for a in out { performClient(a) }
    }

    private mutating func performClient(_ action: ClientAction) {
        switch action {
        case .openTransport(let g, let url, let headers):
            counts["opens", default: 0] += 1
            lastConnection += 1
            let c = ConnectionID(lastConnection)
            connectionOf[g] = c
            generationOf[c] = g
            let path = Simulation.path(of: url)
            schedule(.relay(.upgrade(c, UpgradeRequest(path: path, headers: headers.map { UpgradeHeader($0.name, $0.value) }))),
                     at: now + setup.latency)
        case .send(let g, let frame, _):
            counts["framesOut", default: 0] += 1
            if let c = connectionOf[g] { schedule(.relay(.frame(c, frame)), at: now + setup.latency) }
        case .closeTransport(let g, let code, let reason):
            if let c = connectionOf.removeValue(forKey: g) {
                generationOf[c] = nil
                schedule(.relay(.closed(c, code: code, reason: reason)), at: now + setup.latency)
            }
        case .armTimer(let id, let deadline):
            clientTimers[id] = deadline
            queue.push(.clientTimer(id), at: deadline)
        case .cancelTimer(let id):
            clientTimers[id] = nil
        case .storeResumeCredentials, .clearResumeCredentials:
            do { try tokens.apply(action) } catch { counts["staleTokenWrites", default: 0] += 1 }
        case .identity(.readIdentity):
            schedule(.client(.identity(.identityRead(.available(deviceId: client.configuration.deviceId, login: lastLogin)))),
                     at: now + .milliseconds(5))
        case .identity(.offerResetDeviceIdentity):
            schedule(.client(.identity(.resetConfirmed)), at: now + .seconds(1))
        case .httpRequest(let request, _):
            counts["http", default: 0] += 1
            answerHTTP(request)
        case .auth(.tokenUpdated(let login)), .auth(.loggedIn(let login)):
            lastLogin = login
        case .ingress(.deliverSnapshot):
            counts["snapshots", default: 0] += 1
            schedule(.client(.snapshotProcessed), at: now + setup.snapshotProcessing)
        case .ingress(.deliverControl):
            counts["events", default: 0] += 1
        case .callCompleted:
            counts["calls", default: 0] += 1
        case .offlineQueue(let effect):
            offlineStore(effect)
        case .offlineMutationFinished:
            counts["offlineFinished", default: 0] += 1
        case .link(.store(let desktop)):
            storeLink(desktop)
        case .link(.finished(let outcome)):
            if case .linked = outcome { counts["linked", default: 0] += 1 } else { counts["linkFailed", default: 0] += 1 }
        default:
            return
        }
    }

    /// Writes a linked desktop to `linked_devices` of the real SQLite file and claims the new pair's resume
    /// key, then tells the client (a store write takes 5 ms).
    private mutating func storeLink(_ desktop: LinkedDesktop) {
        guard let store else {
            return schedule(.client(.link(.storeFailed("no database"))), at: now + .milliseconds(5))
        }
        do {
            try store.recordLink(LinkedDevice(deviceId: desktop.deviceId, name: desktop.name, linkedAt: desktop.linkedAt,
                                              serverTimestamp: desktop.linkedAt),
                                 mobileDeviceId: client.configuration.wireDeviceId, code: client.linkAttempt?.code ?? "")
        } catch {
            return schedule(.client(.link(.storeFailed("\(error)"))), at: now + .milliseconds(5))
        }
        let claim = tokens.claim(ResumeTokenStore.key(deviceId: client.configuration.wireDeviceId, desktopId: desktop.deviceId))
        schedule(.client(.link(.stored(ownership: claim.ownership, storedResume: claim.credentials))), at: now + .milliseconds(5))
    }

    /// Performs an offline-queue write on the real SQLite file.
    private mutating func offlineStore(_ effect: OfflineQueueEffect) {
        guard let store else { return }
        do {
            switch effect {
            case .enqueue(let m):
                counts["offlineQueued", default: 0] += 1
                _ = try store.enqueue(NewMutation(method: m.method, paramsJSON: m.params.jsonText, idempotencyKey: m.idempotencyKey,
                                                  createdAt: m.createdAt.nanoseconds))
            case .markSent(let key):
                if let q = try store.mutation(idempotencyKey: key) { try store.markSent(q.id) }
            case .markAnswered(let key, let result, let ts):
                if let q = try store.mutation(idempotencyKey: key) {
                    try store.markAnswered(q.id, serverTimestamp: ts ?? now.nanoseconds / 1_000_000, resultJSON: result.jsonText)
                }
            case .markFailed(let key, let reason):
                if let q = try store.mutation(idempotencyKey: key) { try store.markFailed(q.id, reason: reason) }
            }
        } catch {
            counts["offlineQueueErrors", default: 0] += 1
        }
    }

    /// The simulated REST server: refreshes succeed with a new JWT; polls complete at once.
    private mutating func answerHTTP(_ request: AuthRequest) {
        let at = now + .milliseconds(80)
        switch request.kind {
        case .refresh:
            issuedTokens += 1
            let login = StoredLogin(jwt: Simulation.phoneJWT(userId: userId, deviceId: client.configuration.deviceId, serial: issuedTokens),
                                    expiry: at + setup.refreshedTokenLifetime)
            schedule(.client(.auth(.httpResponse(request.id, status: 200, body: .token(login)))), at: at)
        case .pollStatus:
            schedule(.client(.auth(.httpResponse(request.id, status: 200, body: .poll(.completed(code: "sim-code"))))), at: at)
        case .exchangeCode:
            issuedTokens += 1
            let login = StoredLogin(jwt: Simulation.phoneJWT(userId: userId, deviceId: client.configuration.deviceId, serial: issuedTokens),
                                    expiry: at + setup.refreshedTokenLifetime)
            schedule(.client(.auth(.httpResponse(request.id, status: 200, body: .token(login)))), at: at)
        }
    }

    // MARK: Relay and desktop

    private mutating func perform(_ actions: [RelayAction]) {
        for a in actions {
            switch a {
            case .acceptUpgrade(let c):
                if let g = generationOf[c] {
                    schedule(.client(.transportOpened(g)), at: now + setup.latency)
                }
            case .refuseUpgrade(let c, let status, _):
                if let g = generationOf.removeValue(forKey: c) {
                    connectionOf[g] = nil
                    schedule(.client(.transportFailed(g, .upgradeRefused(status: status))), at: now + setup.latency)
                }
            case .send(let c, let frame):
                if let g = generationOf[c] {
                    schedule(.client(.transportFrame(g, frame)), at: now + setup.latency)
                }
            case .close(let c, let code, let reason):
                if let g = generationOf.removeValue(forKey: c) {
                    connectionOf[g] = nil
                    schedule(.client(.transportClosed(g, code: code, reason: reason)), at: now + setup.latency)
                }
            case .armTimer(let t, let deadline):
                relayTimers[t] = deadline
                queue.push(.relayTimer(t), at: deadline)
            case .cancelTimer(let t):
                relayTimers[t] = nil
            case .log:
                continue
            case .linkCodeIssued(let offer):
                shownCode = offer
            }
        }
    }

    /// The path of a `wss://host/path` URL.
    static func path(of url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://") else { return RelayConstants.devicePath }
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }
}

extension ClientFault {
    /// The inputs a driver feeds the client for this directive (`app background` from the foreground goes
    /// through `inactive`; `app foreground` is `inactive` then `active`), given the app's current state.
    public func clientInputs(desktopId: String, appState: AppState) -> [ClientInput] {
        switch self {
        case .path(.wifi): [.networkPath(.satisfied(.wifi))]
        case .path(.cellular): [.networkPath(.satisfied(.cellular))]
        case .path(.none): [.networkPath(.unsatisfied)]
        case .app(.background): appState == .active ? [.appState(.inactive), .appState(.background)] : [.appState(.background)]
        case .app(.inactive): [.appState(.inactive)]
        case .app(.active): [.appState(.active)]
        case .app(.foreground): [.appState(.inactive), .appState(.active)]
        case .media(let on): [.desktopMediaPlaying(on)]
        case .pushDesktopOnline: [.push(.desktopOnline(desktopId: desktopId))]
        }
    }
}
