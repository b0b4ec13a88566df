public import RelayProtocol

/// The relay client as a deterministic, sans-IO state machine (SPEC Part A, sections A4-A8).
///
/// It never reads a clock, a socket, a random generator or the keychain: ``handle(_:at:)`` takes one
/// ``ClientInput`` with the ``Moment`` it happened at and returns the ``ClientAction``s a driver must
/// perform. Randomness (request IDs, trace IDs, jitter) comes from a ``SeededRandom`` built from
/// ``ClientConfiguration/seed``, so the same seed and inputs give byte-identical actions.
///
/// Connection life: ``ClientInput/start(_:)`` opens generation 1; `transportOpened` sends `register`;
/// `registered`/`resumed` arms the heartbeat (5 s) and the watchdog (15 s); a failure closes the
/// generation and opens the next after the reconnect ladder. See docs/ARCHITECTURE.md.
public struct RelayClientMachine: Sendable {
    /// The fixed configuration.
    public let configuration: ClientConfiguration
    /// The timing (the SPEC's unless a what-if experiment changed it).
    public let tuning: ClientTuning
    /// The connection state: the phase with the data that belongs to it (the current socket, its held
    /// sends, the registration attempt it is bound to, the reconnect ladder, a held `start`).
    var state: ConnectionState = .idle(pendingStart: nil)
    /// The connection phase.
    public var phase: ConnectionPhase { state.phase }
    /// The current transport generation (nil when no socket is current).
    public var generation: Generation? { state.generation }
    /// The last generation handed out (0 before the first socket).
    public internal(set) var lastGeneration = Generation(0)
    /// The calls in flight or waiting for registration.
    public internal(set) var pendingCalls = PendingCalls()
    /// The resume credentials the client holds (SPEC A7).
    public internal(set) var resumeCredentials: ResumeCredentials?
    /// The ownership generation the token store granted this client.
    public internal(set) var resumeOwnership: UInt64 = 0
    /// The times of the invalid resumes still inside the rolling window (SPEC A7).
    public internal(set) var recentInvalidResumes: [Moment] = []
    /// The highest relay `eventId` seen (sent as `lastEventId` in `register`).
    public private(set) var lastEventId: Int64?
    /// The time of the last input handled.
    public private(set) var now: Moment = .zero
    /// The time of the last inbound message on the current generation (its opening counts as one);
    /// `.zero` when no socket is current.
    public var lastInbound: Moment { state.lastInbound ?? .zero }
    /// How many reconnects have been attempted since the last successful registration (0 while
    /// registered and before the first start).
    public var reconnectAttempt: Int { state.reconnectAttempt }

    /// A9: the last network path reported (assumed usable until the monitor says otherwise).
    public internal(set) var networkPath: NetworkPath = .satisfied(.other)
    /// A9: the app's lifecycle state.
    public internal(set) var appState: AppState = .active
    /// A9: whether desktop-backed media is playing.
    public internal(set) var mediaPlaying = false
    /// A9: what the app shows for the desktop.
    public internal(set) var desktopStatus: DesktopStatus = .unknown
    /// A9: the open recovery epoch, if any.
    public internal(set) var epoch: RecoveryEpoch?
    /// A9: the last epoch number handed out.
    public internal(set) var lastEpochId: UInt64 = 0

    /// A1: the identity gate.
    public internal(set) var identity = IdentityGate()
    /// A2: the login and token-refresh flow.
    public internal(set) var auth = AuthFlow()
    /// A3: the chosen region and the origin every attempt is bound to.
    public internal(set) var region = RegionBinding()
    /// A11: the timeline-interest coordinator.
    public internal(set) var interest: TimelineInterestCoordinator
    /// A10: event ingress.
    public internal(set) var ingress = EventIngress<StandardSnapshotDecoder>()

    /// SPEC Part B: the offline queue's pending mutations, in order (mirrors the store).
    public internal(set) var offlineQueue: [OfflineMutation] = []
    /// Whether the driver loaded the offline queue (then keyed mutations made offline are queued).
    public internal(set) var offlineQueueInUse = false
    /// The key of the queued mutation in flight.
    public internal(set) var offlineDraining: String?

    /// The desktop this phone talks to: ``ClientConfiguration/desktopId`` (the linked desktop the app
    /// loaded at launch), then the one each link made; empty while none is linked.
    public internal(set) var desktopId: String
    /// The link in progress (docs/DEVICE_LINK.md), if any.
    public internal(set) var linkAttempt: LinkAttempt?

    var httpAttempts: [AuthRequestID: AttemptID] = [:]
    var lastInterestFrame: String?
    var rng: SeededRandom
    var jwt = ""
    var armed: [TimerID: ArmedTimer] = [:]
    var armSequence: UInt64 = 0
    var lastRetrySlot: UInt64 = 0
    var out: [ClientAction] = []

    struct ArmedTimer: Sendable, Hashable {
        var deadline: Moment
        var sequence: UInt64
    }

    /// Creates an idle machine with the SPEC's timing, or `tuning` for a what-if experiment.
    public init(configuration: ClientConfiguration, tuning: ClientTuning = .spec) {
        self.configuration = configuration
        self.tuning = tuning
        var rng = SeededRandom(seed: configuration.seed)
        // A11: one app-session ID per launch, from the seeded generator.
        self.interest = TimelineInterestCoordinator(appSessionId: rng.uuidString())
        self.rng = rng
        desktopId = configuration.desktopId
    }

    /// The resume-token key of the current pair: `<device ID>::<desktop ID>` (SPEC A7).
    public var resumeKey: String { ResumeTokenStore.key(deviceId: configuration.wireDeviceId, desktopId: desktopId) }

    /// The armed timers with their deadlines, in arming order.
    public var armedTimers: [(id: TimerID, deadline: Moment)] {
        armed.sorted { $0.value.sequence < $1.value.sequence }.map { ($0.key, $0.value.deadline) }
    }

    /// Handles one input at `time` and returns the actions to perform, in order.
    public mutating func handle(_ input: ClientInput, at time: Moment) -> [ClientAction] {
        var actions: [ClientAction] = []
        handle(input, at: time, into: &actions)
        return actions
    }

    /// Handles one input at `time`, appending the actions to `actions` (no allocation when it has room).
    public mutating func handle(_ input: ClientInput, at time: Moment, into actions: inout [ClientAction]) {
        swap(&out, &actions)
        defer { swap(&out, &actions) }
        if time < now {
            emit(.diagnostic(.timeWentBackwards(from: now, to: time)))
        } else {
            now = time
        }
        switch input {
        case .start(let parameters):
            handleStart(parameters)
        case .stop:
            stop(.stopped)
        case .transportOpened(let g):
            guard isCurrent(g, "transportOpened") else { return }
            switch state {
            case .linking:
                sendLinkRedeem(on: g)
            case .connecting(let socket, let registration, let attempt):
                enter(.registering(socket, registration: registration, reconnectAttempt: attempt))
                sendRegister(on: g)
            default:
                ignored("transportOpened")
            }
        case .transportFrame(let g, let frame):
            guard isCurrent(g, "frame") else { return }
            let t = now
            modifySocket { $0.lastInbound = t }
            receive(frame, on: g)
        case .transportClosed(let g, let code, let reason):
            guard isCurrent(g, "transportClosed") else { return }
            failConnection(.closedByPeer(code: code, reason: reason), socketAlreadyGone: true)
        case .transportFailed(let g, let failure):
            guard isCurrent(g, "transportFailed") else { return }
            if case .upgradeRefused(let status) = failure, status == 401, auth.session != nil {
                // A2: the relay refused our JWT: refresh it (joins a refresh already in flight).
                applyAuth(auth.handle(.refreshNow, at: now))
            }
            failConnection(.transport(failure), socketAlreadyGone: true)
        case .sendFailed(let g, let frame, let attempt, let transient, let reason):
            guard isCurrent(g, "sendFailed") else { return }
            if transient, case .text(let text) = frame, text == lastInterestFrame {
                // A11: a failed interest delivery follows the coordinator's retry policy, not A6's.
                applyInterest(interest.deliveryFailed(desktopId: desktopId, at: now, rng: &rng))
            } else if transient {
                lastRetrySlot += 1
                let slot = lastRetrySlot
                modifySocket { $0.heldSends[slot] = HeldSend(frame: frame, attempt: attempt + 1) }
                arm(.sendRetry(g, slot: slot), at: now + ClientConstants.sendRetryDelay(afterAttempt: attempt))
            } else {
                failConnection(.sendFailed(reason), socketAlreadyGone: false)
            }
        case .timerFired(let id):
            timerFired(id)
        case .call(let request):
            call(request)
        case .networkPath(let path):
            networkPathChanged(path)
        case .appState(let state):
            appStateChanged(state)
        case .desktopMediaPlaying(let playing):
            mediaPlaying = playing
        case .push(.desktopOnline(let pushed)):
            guard pushed == desktopId else { return ignored("desktop_online push for \(pushed)") }
            startRecovery(.desktopOnlinePush)
        case .identity(let input):
            applyIdentity(identity.handle(input))
        case .auth(let input):
            authInput(input)
        case .selectRegion(let r):
            selectRegion(r)
        case .interest(let input):
            interestInput(input)
        case .offlineQueue(.loaded(let mutations)):
            offlineQueueInUse = true
            offlineQueue = mutations
            drainOfflineQueue()
        case .link(let input):
            linkInput(input)
        case .snapshotProcessed:
            let leases = interest
            let desktop = desktopId
            applyIngress(ingress.snapshotProcessed(at: now) { leases.isLeased(desktopId: desktop, sessionId: $0) })
        }
    }

    // MARK: - Start, stop, connections

    mutating func handleStart(_ p: StartParameters) {
        switch phase {
        case .idle, .stopped: break
        default: return ignored("start")
        }
        guard identity.isReady else {
            // The start waits in the phase it arrived in (idle or stopped), for the identity.
            switch state {
            case .stopped(let reason, _, let n): state = .stopped(reason, pendingStart: p, reconnectAttempt: n)
            default: state = .idle(pendingStart: p)
            }
            return emit(.diagnostic(.waitingForIdentity))
        }
        jwt = p.jwt
        resumeCredentials = p.storedResume
        resumeOwnership = p.resumeOwnership
        recentInvalidResumes = []
        connectUnlessSuspended(reconnectAttempt: 0)
    }

    /// Opens the next socket, unless there is no network path or the app is in the background without
    /// desktop-backed media (then the matching suspension); `reconnectAttempt` is the ladder position
    /// the next phase starts from.
    mutating func connectUnlessSuspended(reconnectAttempt: Int) {
        if networkPath == .unsatisfied {
            suspend(.noNetworkPath, reconnectAttempt: reconnectAttempt)
        } else if appState == .background, !mediaPlaying {
            suspend(.background, reconnectAttempt: reconnectAttempt)
        } else {
            openNextGeneration(reconnectAttempt: reconnectAttempt)
        }
    }

    mutating func stop(_ reason: ClientStopReason) {
        if case .stopped = state, armed.isEmpty, pendingCalls.isEmpty { return ignored("stop") }
        if let g = generation {
            emit(.closeTransport(g, code: ClientConstants.closeCode, reason: reason.description))
            retire(g)
        }
        if linkAttempt != nil { abandonLink(.connectionFailed("client stopped")) }
        applyIngress(ingress.discardWaiting(at: now))
        // The login and its refresh outlive a stopped relay client; everything else stops here.
        for (id, _) in armedTimers {
            if case .auth = id { continue }
            cancel(id)
        }
        epoch = nil
        for call in pendingCalls.all {
            pendingCalls.remove(call.requestId, ownership: call.ownership)
            if call.purpose == .app {
                emit(.callCompleted(call.callId, .failure(.clientStopped(reason.description))))
            }
            if case .offline = call.purpose { offlineDraining = nil }
        }
        // A held start and the held sends go with the phase they belonged to.
        enter(.stopped(reason, pendingStart: nil, reconnectAttempt: reconnectAttempt))
    }

    /// Opens the next generation, `reconnectAttempt` being its place on the reconnect ladder.
    mutating func openNextGeneration(reconnectAttempt: Int) {
        // No desktop linked yet: nothing to connect to until a link code is entered.
        guard !desktopId.isEmpty else { return suspend(.notLinked, reconnectAttempt: reconnectAttempt) }
        let g = lastGeneration.next
        lastGeneration = g
        var url = configuration.relayURL
        var registration: AttemptID?
        if let origin = region.current, let attempt = try? region.beginAttempt(.registration) {
            url = origin.socketURL
            registration = attempt.id
        }
        emit(.openTransport(g, url: url, headers: upgradeHeaders()))
        arm(.handshake(g), at: now + tuning.handshakeTimeout)
        enter(.connecting(CurrentSocket(generation: g, openedAt: now), registration: registration, reconnectAttempt: reconnectAttempt))
    }

    /// SPEC A4: the upgrade headers, exactly and in this order.
    func upgradeHeaders() -> [HTTPHeader] {
        [
            HTTPHeader("Authorization", "Bearer \(jwt)"),
            HTTPHeader("X-Device-ID", configuration.wireDeviceId),
            HTTPHeader("X-Token-Binding", configuration.wireDeviceId),
            HTTPHeader("X-Client-Type", ClientConstants.clientType),
            HTTPHeader("X-Target-Desktop-Device-ID", desktopId),
        ]
    }

    /// Fails the current generation: reports it, closes the socket unless it is already gone, cancels the
    /// generation's timers and schedules the reconnect. Calls sent on it stay pending until their own
    /// timeouts (a response cannot arrive on another socket; their timeout then touches nothing else).
    mutating func failConnection(_ failure: ConnectionFailure, socketAlreadyGone: Bool) {
        guard let g = generation else { return }
        emit(.connectionFailed(g, failure))
        if linkAttempt?.generation == g, linkAttempt?.accepted == nil { abandonLink(.connectionFailed(failure.description)) }
        if !socketAlreadyGone {
            emit(.closeTransport(g, code: ClientConstants.closeCode, reason: failure.description))
        }
        retire(g)
        scheduleReconnect()
    }

    /// Makes `g`, the current socket, no longer current: drops it with its held sends, abandons the
    /// registration attempt it was bound to and cancels its timers. The machine is then in the transient
    /// ``ConnectionState/retired(reported:reconnectAttempt:)``; the caller enters the next phase.
    mutating func retire(_ g: Generation) {
        let registration = state.registrationAttempt
        state = .retired(reported: state.phase, reconnectAttempt: state.reconnectAttempt)
        if linkAttempt?.generation == g {
            if linkAttempt?.accepted == nil { abandonLink(.connectionFailed("the link socket \(g) closed")) } else { linkAttempt?.generation = nil }
        }
        if let registration { region.abandon(registration) }
        applyInterest(interest.connectionLost(desktopId: desktopId, at: now))
        for (id, _) in armedTimers where id.generation == g { cancel(id) }
    }

    mutating func scheduleReconnect() {
        let attempt = reconnectAttempt + 1
        let ladder = tuning.reconnectDelays.isEmpty ? ClientConstants.reconnectDelays : tuning.reconnectDelays
        let base = ladder[min(attempt - 1, ladder.count - 1)]
        if base == .zero {
            openNextGeneration(reconnectAttempt: attempt)
            return
        }
        let delay = rng.jittered(base, fraction: ClientConstants.reconnectJitter)
        enter(.waitingToReconnect(attempt: attempt))
        arm(.reconnect(attempt: attempt), at: now + delay)
    }

    // MARK: - Registration (A6, A7)

    private mutating func sendRegister(on g: Generation) {
        let payload = RegisterPayload(
            deviceId: configuration.wireDeviceId,
            deviceName: configuration.deviceName,
            relaySessionId: resumeCredentials?.relaySessionId,
            resumeToken: resumeCredentials?.resumeToken,
            lastEventId: lastEventId,
            relayProtocolVersion: ClientConstants.relayProtocolVersion,
            targetDesktopDeviceId: desktopId)
        send(.register(payload), on: g)
        arm(.handshake(g), at: now + tuning.handshakeTimeout)
    }

    private mutating func registered(on g: Generation, relaySessionId: String) {
        cancel(.handshake(g))
        cancel(.reRegister(g))
        guard case .registering(var socket, _, _) = state else { return }
        // The socket (with its held sends) carries on; the ladder ends.
        socket.lastInbound = now
        enter(.registered(socket, relaySessionId: relaySessionId))
        arm(.heartbeat(g), at: now + tuning.heartbeatInterval)
        arm(.watchdog(g), at: now + tuning.watchdogTimeout)
        for call in pendingCalls.all where call.sentOn == nil {
            sendCall(call, on: g)
        }
        registeredDuringEpoch()
        drainOfflineQueue()
        applyInterest(interest.registered(desktopId: desktopId, at: now))
    }

    /// A3: a `registered`/`resumed` completes the attempt only if it was bound to the current origin.
    private mutating func registrationCompletes(on g: Generation) -> Bool {
        guard case .registering(let socket, let registration, let n) = state, let attempt = registration else { return true }
        state = .registering(socket, registration: nil, reconnectAttempt: n)
        let verdict = region.complete(attempt)
        if !verdict.completes { emit(.diagnostic(.staleRegistration(g, attempt: attempt))) }
        return verdict.completes
    }

    /// SPEC A7: forget the token, re-register without it after 0.2 s, and end the loop at the third
    /// invalid resume inside a truly rolling 30 s window (every earlier failure younger than 30 s counts).
    private mutating func invalidResume(on g: Generation) {
        guard case .registering = state else {
            return emit(.diagnostic(.unexpectedMessage(g, type: "error/invalidResume", phase: phase.description)))
        }
        if resumeCredentials != nil {
            resumeCredentials = nil
            emit(.clearResumeCredentials(key: resumeKey, ownership: resumeOwnership))
        }
        let t = now
        recentInvalidResumes.removeAll { t - $0 >= ClientConstants.invalidResumeWindow }
        recentInvalidResumes.append(now)
        if recentInvalidResumes.count >= ClientConstants.invalidResumeLoopCount {
            return stop(.invalidResumeLoop)
        }
        cancel(.handshake(g))
        arm(.reRegister(g), at: now + tuning.invalidResumeReRegisterDelay)
    }

    // MARK: - Inbound

    private mutating func receive(_ frame: WireFrame, on g: Generation) {
        switch frame {
        case .binary(let bytes):
            do {
                emit(.deliverTerminalOutput(try TerminalFrame(decoding: bytes)))
            } catch {
                emit(.diagnostic(.undecodableFrame(g, "\(error)")))
            }
        case .text(let text):
            // Parsed, guarded against snake_case keys anywhere and decoded in one step; a snapshot's
            // payload stays raw (validated) until delivery (SPEC A10).
            let message: RelayMessage
            do { message = try RelayMessage(decodingInbound: text) } catch {
                switch error {
                case .syntax(let e): return emit(.diagnostic(.undecodableFrame(g, "\(e)")))
                case .snakeCase(let e): return emit(.diagnostic(.droppedSnakeCaseMessage(g, path: e.path)))
                case .message(let e): return emit(.diagnostic(.undecodableFrame(g, "\(e)")))
                }
            }
            receive(message, on: g)
        }
    }

    private mutating func receive(_ message: RelayMessage, on g: Generation) {
        if case .linking = state { return linkReceive(message, on: g) }
        switch message {
        case .registered(let r):
            guard case .registering = state else { return unexpected(message, on: g) }
            guard registrationCompletes(on: g) else { return }
            let credentials = ResumeCredentials(relaySessionId: r.relaySessionId ?? r.sessionId, resumeToken: r.resumeToken)
            resumeCredentials = credentials
            emit(.storeResumeCredentials(key: resumeKey, credentials, ownership: resumeOwnership))
            registered(on: g, relaySessionId: credentials.relaySessionId)
        case .resumed(let r):
            guard case .registering = state else { return unexpected(message, on: g) }
            guard registrationCompletes(on: g) else { return }
            registered(on: g, relaySessionId: r.sessionId)
        case .error(let e):
            switch e.code {
            case .invalidResume:
                invalidResume(on: g)
            case .deviceOwnershipFailed:
                failConnection(.deviceOwnershipFailed, socketAlreadyGone: false)
            default:
                emit(.diagnostic(.relayError(g, code: e.code.rawValue, message: e.message)))
            }
        case .rpcResponse(let r):
            response(r, on: g)
        case .event(let e):
            if let id = e.eventId { lastEventId = max(lastEventId ?? id, id) }
            let leases = interest
            let desktop = desktopId
            applyIngress(ingress.accept(e, at: now) { leases.isLeased(desktopId: desktop, sessionId: $0) })
            if e.eventType == EventNames.deviceStatus, let status = try? DeviceStatus(json: e.payload),
               status.deviceId == desktopId {
                relayReported(status.status)
            }
        case .pong:
            return  // inbound traffic already fed the watchdog
        case .ping:
            send(.pong, on: g)
        default:
            unexpected(message, on: g)
        }
    }

    private mutating func unexpected(_ message: RelayMessage, on g: Generation) {
        emit(.diagnostic(.unexpectedMessage(g, type: message.typeName, phase: phase.description)))
    }

    // MARK: - Calls (A8)

    private mutating func call(_ request: CallRequest) {
        if case .stopped(let reason) = phase {
            return emit(.callCompleted(request.callId, .failure(.clientStopped(reason.description))))
        }
        guard let method = RpcCatalogue.method(named: request.method) else {
            return emit(.callCompleted(request.callId, .failure(.unknownMethod(request.method))))
        }
        if method.needsIdempotencyKey, (request.idempotencyKey ?? "").isEmpty {
            return emit(.callCompleted(request.callId, .failure(.missingIdempotencyKey(method: method.name))))
        }
        if queueOffline(request, method: method) { return }
        if let failure = issue(method: method, params: request.params, idempotencyKey: request.idempotencyKey,
                               requestId: request.requestId, callId: request.callId, purpose: .app) {
            emit(.callCompleted(request.callId, .failure(failure)))
        }
    }

    /// Makes a pending call (request ID, traceparent, timeout) and sends it when registered; returns why
    /// it could not be made, having sent nothing.
    mutating func issue(method: RpcMethod, params: JSONValue, idempotencyKey: String?, requestId: String?,
                        callId: CallID, purpose: CallPurpose) -> CallFailure? {
        let requestId = requestId ?? rng.uuidString()
        if pendingCalls[requestId] != nil { return .duplicateRequestId(requestId) }
        let rpc = RpcRequest(id: requestId, method: method.name, params: params,
                             idempotencyKey: idempotencyKey, traceparent: TraceParent.random(using: &rng))
        // Only `params` can hold a key with `_` (the request's other keys are fixed), so the whole message is
        // built and guarded only when it does, for the violation's path in the message.
        if (try? CamelCaseGuard.check(params)) == nil {
            do {
                _ = try RelayMessage.rpcRequest(rpc).encoded()
            } catch {
                return .snakeCaseKey(path: error.path)
            }
        }
        let call = PendingCall(callId: callId, requestId: requestId, ownership: pendingCalls.nextOwnership(),
                               method: method.name, request: rpc, sentOn: nil, startedAt: now,
                               deadline: now + method.timeout, purpose: purpose)
        _ = pendingCalls.insert(call)
        arm(.rpcTimeout(requestId: requestId, ownership: call.ownership), at: call.deadline)
        if case .registered(let g, _) = phase {
            sendCall(call, on: g)
        }
        return nil
    }

    mutating func sendCall(_ call: PendingCall, on g: Generation) {
        send(.rpcRequest(call.request), on: g)
        pendingCalls.markSent(call.requestId, ownership: call.ownership, on: g)
    }

    private mutating func response(_ r: RpcResponse, on g: Generation) {
        guard let call = pendingCalls[r.id] else {
            return emit(.diagnostic(.unmatchedResponse(requestId: r.id)))
        }
        guard let sentOn = call.sentOn, sentOn == g else {
            return emit(.diagnostic(.responseOnOtherGeneration(requestId: r.id, sentOn: call.sentOn ?? Generation(0), receivedOn: g)))
        }
        if let received = r.traceparent, let sent = call.request.traceparent, received.traceId != sent.traceId {
            return emit(.diagnostic(.traceIdMismatch(requestId: r.id, expected: sent.traceId, received: received.traceId)))
        }
        if r.error == nil, r.isFinal == false {
            return emit(.callProgress(call.callId, r.result ?? .null))
        }
        pendingCalls.remove(call.requestId, ownership: call.ownership)
        cancel(.rpcTimeout(requestId: call.requestId, ownership: call.ownership))
        let outcome: CallOutcome = if let e = r.error {
            .failure(.remote(code: e.code, message: e.message, data: e.data))
        } else {
            .success(r.result ?? .null)
        }
        complete(call, outcome)
    }

    /// Reports a call's outcome to whoever made it.
    mutating func complete(_ call: PendingCall, _ outcome: CallOutcome) {
        switch call.purpose {
        case .app: emit(.callCompleted(call.callId, outcome))
        case .probe(let epochId): probeCompleted(epochId: epochId, outcome)
        case .offline(let key): offlineCompleted(key: key, outcome)
        }
    }

    /// Fails every call that went out on `g` (the socket was closed on purpose: path lost, interface
    /// switch, background).
    mutating func failCalls(sentOn g: Generation, _ failure: CallFailure) {
        for call in pendingCalls.all where call.sentOn == g {
            pendingCalls.remove(call.requestId, ownership: call.ownership)
            cancel(.rpcTimeout(requestId: call.requestId, ownership: call.ownership))
            complete(call, .failure(failure))
        }
    }

    /// SPEC A8: a timeout fails that call and reconnects the generation that sent it, and touches nothing
    /// else when that generation was already replaced.
    private mutating func callTimedOut(requestId: String, ownership: UInt64) {
        guard let call = pendingCalls.remove(requestId, ownership: ownership) else { return }
        complete(call, .failure(.timedOut(after: call.deadline - call.startedAt)))
        if let sentOn = call.sentOn, sentOn == generation {
            failConnection(.rpcTimeout(requestId: requestId), socketAlreadyGone: false)
        }
    }

    // MARK: - Timers

    private mutating func timerFired(_ id: TimerID) {
        guard let timer = armed[id] else { return emit(.diagnostic(.staleTimer(id))) }
        guard timer.deadline <= now else { return ignored("early \(id)") }
        armed[id] = nil
        switch id {
        case .handshake(let g):
            guard generation == g else { return }
            failConnection(.handshakeTimeout, socketAlreadyGone: false)
        case .heartbeat(let g):
            guard generation == g, case .registered = state else { return }
            send(.heartbeat(HeartbeatPayload(activeSessionId: nil)), on: g)
            arm(.heartbeat(g), at: now + tuning.heartbeatInterval)
        case .watchdog(let g):
            guard generation == g else { return }
            let due = lastInbound + tuning.watchdogTimeout  // the socket of `g` is current
            if now >= due {
                failConnection(.watchdog, socketAlreadyGone: false)
            } else {
                arm(.watchdog(g), at: due)
            }
        case .reRegister(let g):
            guard generation == g, case .registering = state else { return }
            sendRegister(on: g)
        case .sendRetry(let g, let slot):
            // A held send lives with its socket: a retry of a socket no longer current finds nothing.
            guard generation == g else { return }
            var taken: HeldSend?
            modifySocket { taken = $0.heldSends.removeValue(forKey: slot) }
            guard let held = taken else { return }
            emit(.send(g, held.frame, attempt: held.attempt))
        case .rpcTimeout(let requestId, let ownership):
            callTimedOut(requestId: requestId, ownership: ownership)
        case .reconnect:
            guard case .waitingToReconnect(let attempt) = state else { return }
            openNextGeneration(reconnectAttempt: attempt)
        case .epochDeadline(let e):
            epochDeadlinePassed(e)
        case .probe(let e):
            probeBackoffEnded(e)
        case .foregroundRecovery:
            startRecovery(.foreground)
        case .auth(let t):
            applyAuth(auth.handle(.timerFired(t), at: now))
        case .interest(let t):
            applyInterest(interest.timerFired(t, at: now))
        }
    }

    mutating func arm(_ id: TimerID, at deadline: Moment) {
        armSequence += 1
        armed[id] = ArmedTimer(deadline: deadline, sequence: armSequence)
        emit(.armTimer(id, deadline: deadline))
    }

    mutating func cancel(_ id: TimerID) {
        if armed.removeValue(forKey: id) != nil { emit(.cancelTimer(id)) }
    }

    // MARK: - Helpers

    mutating func send(_ message: RelayMessage, on g: Generation) {
        do {
            emit(.send(g, .text(try message.encodedText()), attempt: 1))
        } catch {
            emit(.diagnostic(.droppedSnakeCaseMessage(g, path: error.path)))
        }
    }

    mutating func isCurrent(_ g: Generation, _ what: String) -> Bool {
        if g == generation { return true }
        emit(.diagnostic(.staleGeneration(g, current: generation, input: what)))
        return false
    }

    mutating func ignored(_ what: String) {
        emit(.diagnostic(.ignoredInput(what, phase: phase.description)))
    }

    mutating func emit(_ action: ClientAction) {
        out.append(action)
    }
}
