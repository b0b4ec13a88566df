public import RelayProtocol

/// What the simulated desktop is built with.
public struct SimulatedDesktopConfiguration: Sendable, Hashable {
    /// The desktop's device ID (sent lower-cased).
    public var deviceId: String
    /// The device name in its `register`.
    public var deviceName: String
    /// The user (JWT `sub`); must be the phone's user for the relay to route between them.
    public var userId: String
    /// The bearer JWT; nil: an unsigned development JWT with `sub` and `device_id`.
    public var jwt: String?
    /// The seed of the desktop's `SeededRandom` (response delays, job IDs, span IDs).
    public var seed: UInt64
    /// `chat:timeline-updated` cadence while a lease is active.
    public var snapshotInterval: Duration
    /// A lease not renewed within this window expires (the phone renews every 20 s, SPEC A11).
    public var leaseWindow: Duration
    /// Responses other than `system.ping` wait a uniformly drawn delay in this range (milliseconds).
    public var responseDelayMilliseconds: ClosedRange<Int64>
    /// The desktop's own `heartbeat` period (keeps the relay's 60 s idle timer away).
    public var heartbeatInterval: Duration
    /// How long after an unexpected close the desktop connects again.
    public var reconnectDelay: Duration
    /// The time between the job events of a job-creating mutation.
    public var jobStepInterval: Duration
    /// Whether it asks the relay for a link code once registered, and for a fresh one when its code is
    /// used or expires (docs/DEVICE_LINK.md).
    public var offersLinkCode: Bool

    /// Creates a configuration with the documented defaults (3 s snapshots, 45 s lease window, 20-200 ms
    /// responses, 20 s heartbeat, 1 s reconnect, 500 ms job steps).
    public init(deviceId: String, deviceName: String = "Simulated Desktop", userId: String, jwt: String? = nil, seed: UInt64 = 1,
                snapshotInterval: Duration = .seconds(3), leaseWindow: Duration = .seconds(45),
                responseDelayMilliseconds: ClosedRange<Int64> = 20...200, heartbeatInterval: Duration = .seconds(20),
                reconnectDelay: Duration = .seconds(1), jobStepInterval: Duration = .milliseconds(500), offersLinkCode: Bool = false) {
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.userId = userId
        self.jwt = jwt
        self.seed = seed
        self.snapshotInterval = snapshotInterval
        self.leaseWindow = leaseWindow
        self.responseDelayMilliseconds = responseDelayMilliseconds
        self.heartbeatInterval = heartbeatInterval
        self.reconnectDelay = reconnectDelay
        self.jobStepInterval = jobStepInterval
        self.offersLinkCode = offersLinkCode
    }
}

/// A timer of the simulated desktop.
public enum DesktopTimer: Sendable, Hashable, CustomStringConvertible {
    /// Connect again (after an unexpected close, or at the end of a `disconnect` window).
    case reconnect
    /// Send the next `heartbeat`.
    case heartbeat
    /// Send the prepared response in this slot.
    case respond(slot: UInt64)
    /// Emit the next event of this job.
    case jobStep(jobId: String)
    /// Emit the next `chat:timeline-updated` for this session (or end its expired lease).
    case timeline(sessionId: String)
    /// The link code on show expired: ask for a fresh one.
    case linkCode

    /// `respond(3)`, `timeline(sess-1)`, ...
    public var description: String {
        switch self {
        case .reconnect: "reconnect"
        case .heartbeat: "heartbeat"
        case .respond(let s): "respond(\(s))"
        case .jobStep(let j): "jobStep(\(j))"
        case .timeline(let s): "timeline(\(s))"
        case .linkCode: "linkCode"
        }
    }
}

/// What happens to the simulated desktop.
public enum DesktopInput: Sendable, Hashable {
    /// Start: connect for the first time.
    case start
    /// The relay accepted the upgrade of the connection the last `connect` asked for.
    case connected
    /// The relay refused that upgrade (HTTP status).
    case refused(status: Int)
    /// A message from the relay.
    case frame(WireFrame)
    /// The relay closed the socket or it died.
    case closed(code: UInt16?, reason: String)
    /// An armed timer reached its deadline.
    case timerFired(DesktopTimer)
    /// A fault-script directive aimed at the desktop takes effect now.
    case fault(DesktopFault)
}

/// What the simulated desktop wants done.
public enum DesktopAction: Sendable, Hashable {
    /// Open a socket to the relay with this upgrade request (answer with `connected` or `refused`).
    case connect(UpgradeRequest)
    /// Send a message on the socket.
    case send(WireFrame)
    /// Close the socket (nil code: an empty close frame).
    case close(code: UInt16?, reason: String)
    /// Arm (or move) a timer.
    case armTimer(DesktopTimer, deadline: Moment)
    /// Cancel a timer.
    case cancelTimer(DesktopTimer)
    /// One human-readable line.
    case log(String)
}

/// The desktop's socket state.
public enum DesktopPhase: Sendable, Hashable {
    /// Not started.
    case idle
    /// A `connect` is out.
    case connecting
    /// Upgraded, `register` sent.
    case registering
    /// Registered: answering requests.
    case ready
    /// Waiting to reconnect after a close.
    case waiting
    /// Disconnected by a fault until `reconnect` (or the window's end).
    case offline
}

/// A lease the desktop honours (SPEC A11): snapshots flow while it is active.
public struct TimelineLease: Sendable, Hashable {
    /// The phone's app session ID.
    public var appSessionId: String
    /// When it expires unless renewed.
    public var expiresAt: Moment
    /// The last revision sent for this session.
    public var revision: Int64
}

/// A simulated PlanToCode desktop, sans-IO: it talks to the relay over the desktop side of the protocol
/// (`X-Client-Type: desktop`, `register`, `rpc.request` with `clientId` in, `rpc.response` with that
/// `clientId` out, `event`s), answers every ``RpcCatalogue`` method with a canned result, honours
/// idempotency keys, emits job events for job-creating mutations and timeline snapshots while a lease is
/// active.
public struct SimulatedDesktop: Sendable {
    /// The fixed configuration.
    public let configuration: SimulatedDesktopConfiguration
    /// The socket state.
    public private(set) var phase: DesktopPhase = .idle
    /// The relay session, once registered.
    public private(set) var relaySessionId: String?
    /// Active timeline leases by chat session ID.
    public private(set) var leases: [String: TimelineLease] = [:]
    /// Results already given per idempotency key.
    public private(set) var idempotentResults: [String: JSONValue] = [:]
    /// Requests answered so far (including idempotent repeats), for tests and logs.
    public private(set) var answeredCount = 0
    /// Requests answered from `idempotentResults` (a repeated key: not executed again).
    public private(set) var idempotentReplays = 0
    /// The time of the last input.
    public private(set) var now: Moment = .zero
    /// The link code on show (``SimulatedDesktopConfiguration/offersLinkCode``), if any.
    public private(set) var linkCode: LinkCreated?
    /// The phones linked with its codes, in order.
    public private(set) var linkedPhones: [String] = []

    var rng: SeededRandom
    var armed: [DesktopTimer: Moment] = [:]
    var pending: [UInt64: String] = [:]
    var lastSlot: UInt64 = 0
    var jobs: [String: JobRun] = [:]
    var ignoreRules: [DesktopFault] = []
    var out: [DesktopAction] = []

    struct JobRun: Sendable, Hashable {
        var sessionId: String
        var taskType: String
        var step: Int
    }

    /// The methods that start a background job (result `{jobId}` and `job:*` events).
    public static let jobMethods: Set<String> = [
        "actions.createImplementationPlan", "actions.mergePlans", "workflows.startFileFinder", "workflows.startWebSearch",
    ]

    /// The number of `job:stream-progress` events a job emits between `job:status-changed` and `job:finalized`.
    public static let jobProgressSteps = 3

    /// Creates an idle desktop.
    public init(configuration: SimulatedDesktopConfiguration) {
        self.configuration = configuration
        rng = SeededRandom(seed: configuration.seed)
    }

    /// The wire device ID (lower-cased).
    public var wireDeviceId: String { lowercasedASCII(configuration.deviceId) }

    /// The armed timers and deadlines, sorted by deadline.
    public var armedTimers: [(timer: DesktopTimer, deadline: Moment)] {
        armed.map { ($0.key, $0.value) }.sorted { ($0.deadline, $0.timer.description) < ($1.deadline, $1.timer.description) }
    }

    /// The upgrade request the desktop sends: bearer JWT, `X-Device-ID`, `X-Token-Binding`,
    /// `X-Client-Type: desktop`.
    public func upgradeRequest() -> UpgradeRequest {
        let jwt = configuration.jwt ?? UpgradeCheck.developmentJWT(claims: ["sub": .string(configuration.userId), "device_id": .string(wireDeviceId)])
        return UpgradeRequest(path: RelayConstants.devicePath, headers: [
            UpgradeHeader("Authorization", "Bearer \(jwt)"),
            UpgradeHeader("X-Device-ID", wireDeviceId),
            UpgradeHeader("X-Token-Binding", wireDeviceId),
            UpgradeHeader("X-Client-Type", ClientKind.desktop.rawValue),
        ])
    }

    /// Handles one input at `time` and returns the actions, in order.
    public mutating func handle(_ input: DesktopInput, at time: Moment) -> [DesktopAction] {
        if time > now { now = time }
        out.removeAll(keepingCapacity: true)
        switch input {
        case .start:
            if phase == .idle { connect() }
        case .connected:
            guard phase == .connecting else { break }
            phase = .registering
            send(.register(RegisterPayload(deviceId: wireDeviceId, deviceName: configuration.deviceName,
                                           relayProtocolVersion: RelayProtocolVersion.current)))
        case .refused(let status):
            guard phase == .connecting else { break }
            log("upgrade refused with HTTP \(status)")
            scheduleReconnect()
        case .frame(let frame):
            guard phase == .registering || phase == .ready else { break }
            if case .text(let text) = frame { receive(text) }
        case .closed(let code, let reason):
            guard phase == .registering || phase == .ready || phase == .connecting else { break }
            log("socket closed (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : ", \(reason)"))")
            dropSocketState()
            scheduleReconnect()
        case .timerFired(let t):
            guard let deadline = armed[t], deadline <= now else { break }
            armed[t] = nil
            timerFired(t)
        case .fault(let f):
            applyFault(f)
        }
        return out
    }

    // MARK: - Connection

    private mutating func connect() {
        phase = .connecting
        out.append(.connect(upgradeRequest()))
    }

    private mutating func scheduleReconnect() {
        phase = .waiting
        arm(.reconnect, at: now + configuration.reconnectDelay)
    }

    private mutating func dropSocketState() {
        relaySessionId = nil
        linkCode = nil
        cancel(.linkCode)
        cancel(.heartbeat)
        for slot in pending.keys.sorted() { cancel(.respond(slot: slot)) }
        pending.removeAll()
        for s in leases.keys.sorted() { cancel(.timeline(sessionId: s)) }
        leases.removeAll()
    }

    private mutating func timerFired(_ t: DesktopTimer) {
        switch t {
        case .reconnect:
            if phase == .waiting || phase == .offline { connect() }
        case .heartbeat:
            guard phase == .ready else { return }
            send(.heartbeat(HeartbeatPayload()))
            arm(.heartbeat, at: now + configuration.heartbeatInterval)
        case .respond(let slot):
            if let text = pending.removeValue(forKey: slot), phase == .ready {
                out.append(.send(.text(text)))
            }
        case .jobStep(let jobId):
            jobStep(jobId)
        case .linkCode:
            guard phase == .ready else { return }
            linkCode = nil
            requestLinkCode()
        case .timeline(let sessionId):
            guard let lease = leases[sessionId] else { return }
            if now >= lease.expiresAt {
                leases[sessionId] = nil
                log("timeline lease for \(sessionId) expired")
            } else {
                sendSnapshot(sessionId)
            }
        }
    }

    // MARK: - Receiving

    private mutating func receive(_ text: String) {
        guard let json = try? JSONValue(parsing: text), let message = try? RelayMessage(decoding: json) else {
            return log("undecodable frame ignored")
        }
        switch message {
        case .registered(let r):
            relaySessionId = r.sessionId
            becomeReady()
        case .resumed(let r):
            relaySessionId = r.sessionId
            becomeReady()
        case .rpcRequest(let request):
            guard phase == .ready else { return }
            let clientId = json["payload"]?["clientId"]?.stringValue ?? json["clientId"]?.stringValue
            answer(request, clientId: clientId)
        case .event(let e):
            if e.eventType == EventNames.chatTimelineInterest, let lease = try? e.decodePayload(as: TimelineInterest.self) {
                timelineInterest(lease)
            }
        case .error(let e):
            log("relay error \(e.code): \(e.message)")
        case .link(.created(let c)):
            linkCode = c
            log("link code \(c.code) on show until \(c.expiresAt)")
            arm(.linkCode, at: now + DeviceLink.codeLifetime)
        case .link(.accepted(let a)):
            linkedPhones.append(a.mobileDeviceId)
            log("linked phone \(a.mobileDeviceId) (\(a.mobileName))")
            if linkCode != nil, configuration.offersLinkCode {
                // A code links one phone: show a fresh one.
                linkCode = nil
                requestLinkCode()
            }
        default:
            break
        }
    }

    private mutating func becomeReady() {
        phase = .ready
        arm(.heartbeat, at: now + configuration.heartbeatInterval)
        log("registered as \(wireDeviceId)")
        if configuration.offersLinkCode { requestLinkCode() }
    }

    private mutating func requestLinkCode() {
        cancel(.linkCode)
        send(.link(.create(deviceName: configuration.deviceName)))
    }

    // MARK: - RPC

    private mutating func answer(_ request: RpcRequest, clientId: String?) {
        if ignores(request.method) { return log("ignoring \(request.method) \(request.id) (fault)") }
        var result: JSONValue
        var error: RpcErrorBody?
        if let key = request.idempotencyKey, let earlier = idempotentResults[key] {
            result = earlier
            idempotentReplays += 1
        } else if RpcCatalogue.method(named: request.method) == nil {
            result = .null
            error = RpcErrorBody(.methodNotFound, message: "method \(request.method) not found")
        } else {
            result = cannedResult(request)
            if let key = request.idempotencyKey { idempotentResults[key] = result }
        }
        answeredCount += 1
        var payload: [String: JSONValue] = ["id": .string(request.id), "isFinal": true]
        if let error {
            payload["error"] = .object(["code": .int(Int64(error.code)), "message": .string(error.message)])
        } else {
            payload["result"] = result
        }
        if let tp = request.traceparent { payload["traceparent"] = .string(tp.child(using: &rng).header) }
        if let clientId { payload["clientId"] = .string(clientId) }
        let text = JSONValue.object(["type": .string(RelayMessage.TypeName.rpcResponse), "payload": .object(payload)]).jsonText
        if request.method == "system.ping" {
            out.append(.send(.text(text)))
            return
        }
        let range = configuration.responseDelayMilliseconds
        let span = UInt64(max(0, range.upperBound - range.lowerBound)) + 1
        let delay = Duration.milliseconds(range.lowerBound + Int64(rng.next(upperBound: span)))
        lastSlot += 1
        pending[lastSlot] = text
        arm(.respond(slot: lastSlot), at: now + delay)
        // A new job's events start right after its response.
        if error == nil, let jobId = result["jobId"]?.stringValue, jobs[jobId]?.step == 0, armed[.jobStep(jobId: jobId)] == nil {
            arm(.jobStep(jobId: jobId), at: now + delay + .milliseconds(1))
        }
    }

    private mutating func ignores(_ method: String) -> Bool {
        var i = 0
        while i < ignoreRules.count {
            let f = ignoreRules[i]
            if let until = f.until, until <= now {
                ignoreRules.remove(at: i)
                continue
            }
            if case .ignore(let m) = f.effect, m == method {
                if let n = f.count {
                    if n <= 1 { ignoreRules.remove(at: i) } else { ignoreRules[i].count = n - 1 }
                }
                return true
            }
            i += 1
        }
        return false
    }

    /// A plausible result for `request` (a small table per method family); starts a job for
    /// ``jobMethods``.
    private mutating func cannedResult(_ request: RpcRequest) -> JSONValue {
        let method = request.method
        let sessionId = request.params["sessionId"]?.stringValue ?? "sess-sim-1"
        if SimulatedDesktop.jobMethods.contains(method) {
            let jobId = "job-" + rng.hex(bytes: 6)
            jobs[jobId] = JobRun(sessionId: sessionId, taskType: method, step: 0)
            return ["jobId": .string(jobId)]
        }
        switch method {
        case "system.ping": return ["pong": true]
        case "session.list":
            return ["sessions": [SimulatedDesktop.session("sess-sim-1", "Refactor relay"), SimulatedDesktop.session("sess-sim-2", "Fix tests")]]
        case "session.get", "session.getOverview", "session.getContents":
            return ["session": SimulatedDesktop.session(sessionId, "Refactor relay")]
        case "session.create", "session.duplicate":
            return ["sessionId": .string("sess-" + rng.hex(bytes: 6))]
        case "job.list": return ["jobs": .array(jobs.keys.sorted().map { ["id": .string($0), "status": "running"] })]
        case "job.get": return ["job": ["id": request.params["jobId"] ?? "job-unknown", "status": "completed"]]
        case "actions.estimatePromptTokens": return ["estimatedTokens": 1842]
        case "actions.getImplementationPlanPrompt": return ["prompt": "Plan the change step by step."]
        case "files.search": return ["files": ["Sources/App/main.swift", "Sources/App/Relay.swift"]]
        case "files.getMetadata": return ["size": 2048, "modifiedAt": "2026-01-15T11:00:00.000Z"]
        case "app.getActiveSessionId": return ["sessionId": "sess-sim-1"]
        case "app.getProjectDirectory": return ["projectDirectory": "/home/dev/project"]
        case "app.getUserHomeDirectory": return ["homeDirectory": "/home/dev"]
        case "app.listFolders": return ["folders": ["/home/dev/project", "/home/dev/other"]]
        case "plan.generateMarkdown": return ["markdown": "# Plan\n\n1. Do the thing.\n"]
        case "terminal.start": return ["sessionId": .string("term-" + rng.hex(bytes: 4))]
        case "terminal.getAvailableShells": return ["shells": ["/bin/zsh", "/bin/bash"]]
        case "terminal.getDefaultShell": return ["shell": "/bin/zsh"]
        case "terminal.getActiveSessions": return ["sessions": []]
        case "terminal.getStatus", "terminal.getMetadata": return ["status": "running"]
        case "terminal.getLog": return ["log": ""]
        case "speech.transcribe": return ["text": "hello from the simulated desktop"]
        case "text.enhance", "text.refine": return ["text": request.params["text"] ?? "refined text"]
        case "session.getHistoryState": return ["version": 1, "entries": []]
        default:
            if method.hasPrefix("settings.get") || method.hasPrefix("systemPrompts.get") { return ["value": .null] }
            if method == "systemPrompts.isProjectCustomized" { return ["isCustomized": false] }
            return ["success": true]
        }
    }

    private static func session(_ id: String, _ name: String) -> JSONValue {
        ["id": .string(id), "name": .string(name), "projectDirectory": "/home/dev/project"]
    }

    // MARK: - Jobs

    private mutating func jobStep(_ jobId: String) {
        guard var job = jobs[jobId] else { return }
        let base: [String: JSONValue] = ["jobId": .string(jobId), "sessionId": .string(job.sessionId)]
        var payload = base
        let eventType: String
        let steps = SimulatedDesktop.jobProgressSteps
        switch job.step {
        case 0:
            eventType = EventNames.jobCreated
            payload["taskType"] = .string(job.taskType)
            payload["status"] = "queued"
        case 1:
            eventType = EventNames.jobStatusChanged
            payload["status"] = "running"
        case 2..<(2 + steps):
            eventType = EventNames.jobStreamProgress
            let i = job.step - 1
            payload["progress"] = .double(Double(i) / Double(steps))
            payload["chunk"] = .string("step \(i) of \(steps)\n")
        default:
            eventType = EventNames.jobFinalized
            payload["status"] = "completed"
        }
        emitEvent(eventType, .object(payload))
        if eventType == EventNames.jobFinalized {
            jobs[jobId] = nil
        } else {
            job.step += 1
            jobs[jobId] = job
            arm(.jobStep(jobId: jobId), at: now + configuration.jobStepInterval)
        }
    }

    // MARK: - Timeline leases

    private mutating func timelineInterest(_ interest: TimelineInterest) {
        let id = interest.sessionId
        guard interest.active else {
            if leases.removeValue(forKey: id) != nil {
                cancel(.timeline(sessionId: id))
                log("timeline lease for \(id) released")
            }
            return
        }
        if var lease = leases[id] {
            lease.expiresAt = now + configuration.leaseWindow
            lease.appSessionId = interest.appSessionId
            leases[id] = lease
        } else {
            leases[id] = TimelineLease(appSessionId: interest.appSessionId, expiresAt: now + configuration.leaseWindow, revision: 0)
            log("timeline lease for \(id) taken")
            sendSnapshot(id)
        }
    }

    private mutating func sendSnapshot(_ sessionId: String) {
        guard var lease = leases[sessionId] else { return }
        lease.revision += 1
        leases[sessionId] = lease
        let count = Int(min(lease.revision, 8))
        let blocks: [JSONValue] = (1...count).map { i in
            ["id": .string("b\(i)"), "kind": "text", "text": .string("block \(i) at revision \(lease.revision)")]
        }
        let snapshot = TimelineUpdated(sessionId: sessionId, runId: "run-1", threadId: "thread-main", revision: lease.revision, blocks: .array(blocks))
        emitEvent(EventNames.chatTimelineUpdated, snapshot.json)
        let next = now + configuration.snapshotInterval
        arm(.timeline(sessionId: sessionId), at: min(next, lease.expiresAt))
    }

    // MARK: - Faults

    private mutating func applyFault(_ f: DesktopFault) {
        switch f.effect {
        case .ignore:
            if let until = f.until, until <= now { return }
            ignoreRules.append(f)
            log("fault: \(f.effect)")
        case .disconnect(let code):
            log("fault: disconnect")
            if phase == .registering || phase == .ready || phase == .connecting {
                out.append(.close(code: code ?? 1000, reason: "fault: desktop disconnect"))
            }
            dropSocketState()
            cancel(.reconnect)
            phase = .offline
            if let until = f.until { arm(.reconnect, at: until) }
        case .reconnect:
            guard phase == .offline else { return }
            cancel(.reconnect)
            log("fault: reconnect")
            connect()
        }
    }

    // MARK: - Output

    private mutating func emitEvent(_ eventType: String, _ payload: JSONValue) {
        guard phase == .ready else { return }
        send(.event(EventMessage(eventType: eventType, payload: payload)))
    }

    private mutating func send(_ message: RelayMessage) {
        guard let text = try? message.encodedText() else { return log("\(message.typeName) not sent: snake_case key") }
        out.append(.send(.text(text)))
    }

    private mutating func arm(_ t: DesktopTimer, at deadline: Moment) {
        armed[t] = deadline
        out.append(.armTimer(t, deadline: deadline))
    }

    private mutating func cancel(_ t: DesktopTimer) {
        if armed.removeValue(forKey: t) != nil { out.append(.cancelTimer(t)) }
    }

    private mutating func log(_ line: String) {
        out.append(.log("\(now) desktop \(line)"))
    }
}
