public import RelayProtocol

/// The development relay (PROTOCOL.md §1-§6) as a deterministic, sans-IO state machine.
///
/// ``handle(_:at:)`` takes one ``RelayInput`` with the `Moment` it happened at and returns the
/// ``RelayAction``s a driver performs. Session IDs and tokens come from a `SeededRandom` built from
/// ``DevRelayConfiguration/seed``; timestamps are ``DevRelayConfiguration/wallClockOrigin`` + now.
/// The same configuration and inputs give byte-identical actions.
///
/// Routing: phones (`X-Client-Type: mobile`) and desktops of the same user (JWT `sub`) meet here.
/// `rpc.request` from a phone goes to its target desktop with `clientId` (the phone's device ID) added
/// to the payload; the desktop's `rpc.response` carries that `clientId` back and is routed to the phone
/// with `clientId` removed. Desktop `event`s get a per-user `eventId` and go to the user's phones (and
/// the replay buffer); phone `event`s go to the target desktop. See docs/FAULTS.md for faults.
public struct DevRelay: Sendable {
    /// The fixed configuration.
    public let configuration: DevRelayConfiguration
    /// The live relay sessions by ID.
    public private(set) var sessions: [String: RelaySession] = [:]
    /// The accepted sockets by ID.
    public internal(set) var connections: [ConnectionID: RelayConnection] = [:]
    /// The last `eventId` handed out per user (kept across a simulated restart, so phones' `lastEventId`
    /// stays meaningful).
    public private(set) var lastEventIds: [String: Int64] = [:]
    /// The installed fault rules, with their remaining counts, in installation order.
    public var activeFaults: [RelayFault] { rules.map(\.fault) }
    /// The time of the last input handled.
    public internal(set) var now: Moment = .zero

    var rng: SeededRandom
    var buffers: [String: EventBuffer] = [:]
    /// (user, device) -> the newest socket of that device.
    var devices: [DeviceKey: ConnectionID] = [:]
    var armed: [RelayTimer: Moment] = [:]
    var delayed: [UInt64: DelayedFrame] = [:]
    var lastSlot: UInt64 = 0
    var rules: [Rule] = []
    var lastRuleSerial: UInt64 = 0
    var out: [RelayAction] = []
    /// The relay's own simulated desktops by serial, and by (account, device).
    public internal(set) var simulated: [UInt64: SimulatedPeer] = [:]
    var simulatedByKey: [DeviceKey: UInt64] = [:]
    var simulatedOwner: [ConnectionID: UInt64] = [:]
    var lastDesktopSerial: UInt64 = 0
    var lastSimulatedConnection: UInt64 = 0
    var queue: [Delivery] = []
    var inFlight: [UInt64: Delivery] = [:]
    var lastLinkSlot: UInt64 = 0
    var draining = false
    var started = false
    var desktopRules: [DesktopFault] = []
    /// Simulated desktops whose link codes any account may redeem.
    var openCodeDesktops: Set<DeviceKey> = []
    /// The link codes issued, by code.
    public internal(set) var linkCodes: [String: IssuedLinkCode] = [:]
    /// Every link made, in order.
    public internal(set) var linkRecords: [DeviceLinkRecord] = []
    /// (account, phone) -> the desktop it linked last.
    var links: [DeviceKey: String] = [:]
    var linkRng: SeededRandom

    struct DeviceKey: Hashable, Sendable {
        var userId: String
        var deviceId: String
    }

    struct Rule: Sendable, Hashable {
        var serial: UInt64
        var fault: RelayFault
    }

    enum DelayedFrame: Sendable, Hashable {
        case outgoing(ConnectionID, WireFrame)
        case incoming(ConnectionID, JSONValue, type: String)
        case incomingBinary(ConnectionID, [UInt8])
    }

    /// Creates a relay with no sessions and no sockets.
    public init(configuration: DevRelayConfiguration) {
        self.configuration = configuration
        rng = SeededRandom(seed: configuration.seed)
        // A generator of its own, so session IDs and tokens do not depend on how many codes were issued.
        linkRng = SeededRandom(seed: configuration.seed ^ 0x4C49_4E4B_434F_4445)
    }

    /// The simulated desktops, by serial.
    public var simulatedDesktops: [SimulatedPeer] { simulated.keys.sorted().compactMap { simulated[$0] } }

    /// The armed timers and their deadlines, sorted by deadline.
    public var armedTimers: [(timer: RelayTimer, deadline: Moment)] {
        armed.map { ($0.key, $0.value) }.sorted { ($0.deadline, $0.timer.description) < ($1.deadline, $1.timer.description) }
    }

    /// The events kept for replay for `userId`, oldest first.
    public func bufferedEvents(forUser userId: String) -> [BufferedEvent] {
        buffers[userId].map { Array($0.events) } ?? []
    }

    /// The socket of a device (lower-cased ID) of a user, if connected.
    public func connection(userId: String, deviceId: String) -> RelayConnection? {
        devices[DeviceKey(userId: userId, deviceId: deviceId)].flatMap { connections[$0] }
    }

    /// `expiresAt` text for a moment: the configured wall clock origin + `moment`, RFC 3339 UTC.
    public func wallClock(_ moment: Moment) -> String {
        WallClock.rfc3339(originMilliseconds: configuration.wallClockOrigin, at: moment)
    }

    /// Handles one input at `time` and returns the actions to perform, in order.
    public mutating func handle(_ input: RelayInput, at time: Moment) -> [RelayAction] {
        var actions: [RelayAction] = []
        handle(input, at: time, into: &actions)
        return actions
    }

    /// Handles one input at `time`, appending the actions to `actions`.
    public mutating func handle(_ input: RelayInput, at time: Moment, into actions: inout [RelayAction]) {
        swap(&out, &actions)
        defer { swap(&out, &actions) }
        if time > now { now = time }
        if armed[.sweep] == nil { arm(.sweep, at: now + RelayConstants.sweepInterval) }
        defer { drainQueue() }
        switch input {
        case .start:
            startDesktops()
        case .desktopFault(let f):
            applyDesktopFault(f)
        case .upgrade(let c, let request):
            upgrade(c, request)
        case .frame(let c, let frame):
            guard connections[c] != nil else { return log("\(c) frame for an unknown connection ignored") }
            connections[c]?.lastFrameAt = now
            switch frame {
            case .text(let text): receiveText(c, text)
            case .binary(let bytes): receiveBinary(c, bytes, faults: true)
            }
        case .closed(let c, let code, let reason):
            guard connections[c] != nil else { return }
            log("\(c) closed by peer (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : ", \(reason)"))")
            removeConnection(c)
        case .timerFired(let t):
            guard let deadline = armed[t], deadline <= now else { return }
            armed[t] = nil
            timerFired(t)
        case .fault(let f):
            applyFault(f)
        }
    }

    // MARK: - Upgrade and connections

    mutating func upgrade(_ c: ConnectionID, _ request: UpgradeRequest) {
        guard connections[c] == nil else { return log("\(c) upgrade on a connection already open ignored") }
        if let status = consumeRule({ if case .refuseUpgrades(let s) = $0.effect { return s } else { return nil } }) {
            emit(.refuseUpgrade(c, status: status, reason: "fault: refuse-upgrades"))
            return log("\(c) refused \(status) (fault)")
        }
        let identity: UpgradeIdentity
        switch UpgradeCheck.check(request) {
        case .failure(let refusal):
            emit(.refuseUpgrade(c, status: refusal.status, reason: refusal.message))
            return log("\(c) refused \(refusal.status): \(refusal.message)")
        case .success(let id):
            identity = id
        }
        let key = DeviceKey(userId: identity.userId, deviceId: identity.deviceId)
        if identity.kind == .desktop, !c.isSimulated, simulatedByKey[key] != nil {
            retireSimulatedDesktop(key)
        }
        if let old = devices[key], connections[old] != nil {
            // §1: the same device connecting again: the older socket gets an empty close frame. The
            // device stays connected, so no `device-status: disconnected` is sent.
            emit(.close(old, code: nil, reason: ""))
            log("\(old) replaced by \(c) (same device): closed")
            removeConnection(old, announce: false)
        }
        connections[c] = RelayConnection(id: c, identity: identity, at: now, rateLimited: !request.inProcess)
        devices[key] = c
        emit(.acceptUpgrade(c))
        // A simulated desktop has no socket to go silent.
        if !c.isSimulated { arm(.idle(c), at: now + RelayConstants.idleTimeout) }
        log("\(c) accepted \(identity.kind.rawValue) \(identity.deviceId) of user \(identity.userId)")
    }

    /// Forgets a socket; a registered desktop's departure is announced to the user's phones.
    mutating func removeConnection(_ c: ConnectionID, announce: Bool = true) {
        guard let conn = connections.removeValue(forKey: c) else { return }
        cancel(.idle(c))
        let key = DeviceKey(userId: conn.userId, deviceId: conn.deviceId)
        if devices[key] == c { devices[key] = nil }
        for (slot, frame) in delayed {
            switch frame {
            case .outgoing(let d, _), .incoming(let d, _, _), .incomingBinary(let d, _):
                if d == c {
                    delayed[slot] = nil
                    cancel(.delayedFrame(slot: slot))
                }
            }
        }
        if announce, conn.kind == .desktop, conn.isRegistered {
            publish(userId: conn.userId, source: conn.deviceId, eventType: EventNames.deviceStatus,
                    payload: DeviceStatus(deviceId: conn.deviceId, status: .disconnected, reason: "socket closed").json)
        }
    }

    private mutating func closeConnection(_ c: ConnectionID, code: UInt16?, reason: String) {
        emit(.close(c, code: code, reason: reason))
        log("\(c) closed by relay (\(code.map(String.init) ?? "empty close frame")): \(reason)")
        removeConnection(c)
    }

    // MARK: - Timers

    mutating func arm(_ t: RelayTimer, at deadline: Moment) {
        armed[t] = deadline
        out.append(.armTimer(t, deadline: deadline))
    }

    mutating func cancel(_ t: RelayTimer) {
        if armed.removeValue(forKey: t) != nil { out.append(.cancelTimer(t)) }
    }

    private mutating func timerFired(_ t: RelayTimer) {
        switch t {
        case .sweep:
            let expired = sessions.values.filter { $0.expiresAt <= now }.map(\.id).sorted()
            for id in expired { sessions[id] = nil }
            if !expired.isEmpty { log("swept \(expired.count) expired session(s)") }
            for user in buffers.keys.sorted() { buffers[user]?.prune(now: now) }
            arm(.sweep, at: now + RelayConstants.sweepInterval)
        case .idle(let c):
            guard let conn = connections[c] else { return }
            let due = conn.lastFrameAt + RelayConstants.idleTimeout
            if due <= now {
                closeConnection(c, code: nil, reason: "no frame for 60 s")
            } else {
                arm(.idle(c), at: due)
            }
        case .delayedFrame(let slot):
            guard let frame = delayed.removeValue(forKey: slot) else { return }
            switch frame {
            case .outgoing(let c, let f):
                if connections[c] != nil { emit(.send(c, f)) }
            case .incoming(let c, let json, let type):
                if connections[c] != nil { process(c, json, type: type) }
            case .incomingBinary(let c, let bytes):
                if connections[c] != nil { receiveBinary(c, bytes, faults: false) }
            }
        case .desktop(let serial, let timer):
            queue.append(.toDesktop(serial: serial, .timerFired(timer)))
        case .desktopLink(let slot):
            linkArrived(slot)
        }
    }

    // MARK: - Receiving

    mutating func receiveText(_ c: ConnectionID, _ text: String) {
        guard var conn = connections[c] else { return }
        if conn.isRateLimited {
            // §2: a token bucket per client socket. A frame over the limit is refused out loud (an
            // `rpc.request` gets its error response, anything else an `error` frame), never dropped.
            let elapsed = (now - conn.tokensAt).seconds
            conn.tokens = min(RelayConstants.rateBucketCapacity, conn.tokens + elapsed * RelayConstants.rateRefillPerSecond)
            conn.tokensAt = now
            guard conn.tokens >= 1 else {
                let firstOfBurst = !conn.overRateLimit
                conn.overRateLimit = true
                connections[c] = conn
                return refuseOverRateLimit(c, text, retryAfter: (1 - conn.tokens) / RelayConstants.rateRefillPerSecond,
                                           logIt: firstOfBurst)
            }
            conn.tokens -= 1
            conn.overRateLimit = false
        }
        connections[c] = conn
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue(parsing: text)
        } catch {
            return sendError(c, .invalidJson, "invalid JSON at byte \(error.offset): \(error.message)")
        }
        if let violation = CamelCaseGuard.violations(in: json).first {
            return sendError(c, .invalidPayload, "snake_case key \"\(violation.key)\" at \(violation.path); message dropped, use camelCase keys")
        }
        let type = json["type"]?.stringValue ?? "?"
        let payload = json["payload"]
        let method = type == RelayMessage.TypeName.rpcRequest ? payload?["method"]?.stringValue : nil
        let eventType = type == RelayMessage.TypeName.event ? payload?["eventType"]?.stringValue : nil
        switch frameFault(direction: .fromClient, kind: conn.kind, type: type, method: method, eventType: eventType) {
        case .drop: return
        case .delay(let by): return hold(.incoming(c, json, type: type), for: by)
        case .pass: break
        }
        if triggeredFault(c, kind: conn.kind, type: type, method: method, eventType: eventType) { return }
        process(c, json, type: type)
    }

    mutating func receiveBinary(_ c: ConnectionID, _ bytes: [UInt8], faults: Bool) {
        guard let conn = connections[c] else { return }
        if faults {
            switch frameFault(direction: .fromClient, kind: conn.kind, type: "binary", method: nil, eventType: nil) {
            case .drop: return
            case .delay(let by): return hold(.incomingBinary(c, bytes), for: by)
            case .pass: break
            }
        }
        guard conn.kind == .desktop, conn.isRegistered else {
            return log("\(c) binary frame from a \(conn.isRegistered ? "phone" : "unregistered socket") ignored (PTC1 is desktop -> phone only)")
        }
        let sessionId: String
        do throws(TerminalFrameError) {
            sessionId = try TerminalFrame(decoding: bytes).sessionId
        } catch {
            return log("\(c) bad PTC1 frame dropped: \(error)")
        }
        for m in phones(of: conn.userId, desktop: conn.deviceId) where connections[m]?.boundTerminals.contains(sessionId) == true {
            send(m, .binary(bytes), type: "binary")
        }
    }

    private mutating func process(_ c: ConnectionID, _ json: JSONValue, type: String) {
        let message: RelayMessage
        do throws(MessageDecodeError) {
            message = try RelayMessage(decoding: json)
        } catch {
            return sendError(c, decodeErrorCode(type: type, path: error.path, json: json), "\(error.path): \(error.message)")
        }
        guard let conn = connections[c] else { return }
        switch message {
        case .register(let p):
            register(c, conn, p)
        case .heartbeat:
            extendSession(conn)
            send(c, .pong)
        case .ping:
            send(c, .pong)
        case .pong, .eventAck:
            break
        case .rpcRequest(let r):
            guard requireRegistered(conn) else { return }
            guard conn.kind == .mobile else { return log("\(c) rpc.request from a desktop ignored") }
            extendSession(conn)
            forwardRequest(conn, r, json)
        case .rpcResponse:
            guard requireRegistered(conn) else { return }
            guard conn.kind == .desktop else { return log("\(c) rpc.response from a phone ignored") }
            routeResponse(conn, json)
        case .event(let e):
            guard requireRegistered(conn) else { return }
            if conn.kind == .desktop {
                publish(userId: conn.userId, source: conn.deviceId, eventType: e.eventType, payload: e.payload)
            } else {
                forwardPhoneEvent(conn, e)
            }
        case .terminalBind(let b), .terminalUnbind(let b):
            guard requireRegistered(conn) else { return }
            guard conn.kind == .mobile else { return log("\(c) terminal bind from a desktop ignored") }
            if case .terminalBind = message {
                connections[c]?.boundTerminals.insert(b.sessionId)
                send(c, .terminalBound(sessionId: b.sessionId))
            } else {
                connections[c]?.boundTerminals.remove(b.sessionId)
            }
            if let d = desktop(for: conn) { send(d, .text(withClientId(json, conn.deviceId).jsonText), type: type) }
        case .link(let l):
            linkMessage(c, conn, l)
        case .terminalBound, .registered, .resumed, .error, .legacy, .unknown:
            sendError(c, .unknownMessageType, "unknown message type \"\(type)\" from a client; see docs/PROTOCOL.md §3")
        }
    }

    /// Answers a text frame refused for the rate limit: an `rpc.request` with its `rpc.response` carrying
    /// error -32011 (`data.retryAfterMs`, the request's traceparent echoed), any other frame with an
    /// `error` frame of code `rateLimited` naming its type. Both say when to retry.
    private mutating func refuseOverRateLimit(_ c: ConnectionID, _ text: String, retryAfter seconds: Double, logIt: Bool) {
        let retryMs = Int64((seconds * 1000).rounded(.up))
        let limit = "over the rate limit of \(Int(RelayConstants.rateBucketCapacity)) text frames per socket (refilled at \(Int(RelayConstants.rateRefillPerSecond))/s)"
        let json = try? JSONValue(parsing: text)
        let type = json?["type"]?.stringValue ?? "frame"
        if logIt { log("\(c) \(limit): refusing frames until the bucket refills (first: \(type))") }
        if let json, type == RelayMessage.TypeName.rpcRequest, case .rpcRequest(let r)? = try? RelayMessage(decoding: json) {
            let body = RpcErrorBody(.rateLimited, message: "Rate limited: \(limit); retry after \(retryMs) ms",
                                    data: .object(["retryAfterMs": .int(retryMs)]))
            return send(c, .rpcResponse(RpcResponse(id: r.id, result: nil, error: body, isFinal: true, traceparent: r.traceparent)))
        }
        sendError(c, RelayConstants.rateLimitedError, "\(type) not processed: \(limit); retry after \(retryMs) ms")
    }

    private func decodeErrorCode(type: String, path: String, json: JSONValue) -> RelayErrorCode {
        if json["type"]?.stringValue == nil { return .invalidPayload }
        if path == "$.payload" { return .missingPayload }
        switch type {
        case RelayMessage.TypeName.register where path == "$.payload.deviceId": return .missingDeviceId
        case RelayMessage.TypeName.rpcRequest where path == "$.payload.method": return .missingMethod
        case RelayMessage.TypeName.rpcRequest, RelayMessage.TypeName.rpcResponse: return .invalidRpcPayload
        case RelayMessage.TypeName.terminalBind where path.hasSuffix("sessionId"),
             RelayMessage.TypeName.terminalUnbind where path.hasSuffix("sessionId"):
            return .missingSessionId
        default: return .invalidPayload
        }
    }

    private mutating func requireRegistered(_ conn: RelayConnection) -> Bool {
        if conn.isRegistered { return true }
        sendError(conn.id, .authRequired, "register first: this socket has no relay session")
        return false
    }

    private mutating func extendSession(_ conn: RelayConnection) {
        if let id = conn.sessionId, sessions[id] != nil {
            sessions[id]?.expiresAt = now + RelayConstants.sessionTTL
        }
    }

    // MARK: - Registration

    private mutating func register(_ c: ConnectionID, _ conn: RelayConnection, _ p: RegisterPayload) {
        guard !p.deviceId.isEmpty else { return sendError(c, .missingDeviceId, "register has an empty deviceId") }
        guard lowercasedASCII(p.deviceId) == conn.deviceId else {
            return sendError(c, .invalidDeviceId, "register deviceId \(lowercasedASCII(p.deviceId)) is not X-Device-ID \(conn.deviceId)")
        }
        // invalid-resume and ownership-failed faults aim at the phone under test, never the desktop.
        if conn.kind == .mobile, consumeRule({ $0.effect == .invalidResume ? () : nil }) != nil {
            log("\(c) register answered invalidResume (fault)")
            return sendError(c, .invalidResume, "resume refused (fault); register again without a token")
        }
        var session: RelaySession
        var resumed = false
        if p.isResume, let id = p.relaySessionId, let token = p.resumeToken {
            guard let s = sessions[id], s.expiresAt > now, s.userId == conn.userId, s.deviceId == conn.deviceId,
                  s.resumeToken == token else {
                log("\(c) invalid resume of \(id)")
                return sendError(c, .invalidResume, "no live session \(id) for this user, device and token; register again without a token")
            }
            session = s
            resumed = true
        } else {
            session = RelaySession(id: rng.alphanumeric(RelayConstants.sessionIdLength),
                                   resumeToken: rng.alphanumeric(RelayConstants.resumeTokenLength),
                                   userId: conn.userId, deviceId: conn.deviceId, expiresAt: now + RelayConstants.sessionTTL)
        }
        if conn.isRegistered {
            // §4: a second successful register on one socket closes it.
            return closeConnection(c, code: RelayConstants.doubleRegisterCloseCode, reason: "second register on one socket")
        }
        if !resumed { sessions[session.id] = session }
        let form: ProtocolForm = p.relayProtocolVersion == nil ? .legacy : .v1_6
        connections[c]?.form = form
        connections[c]?.sessionId = session.id
        connections[c]?.deviceName = p.deviceName
        if let t = p.targetDesktopDeviceId, !t.isEmpty { connections[c]?.targetDesktopDeviceId = lowercasedASCII(t) }
        let expires = wallClock(session.expiresAt)
        if resumed {
            send(c, .resumed(Resumed(sessionId: session.id, expiresAt: expires)))
            log("\(c) resumed \(session.id)")
        } else {
            send(c, .registered(Registered(sessionId: session.id, relaySessionId: form == .v1_6 ? session.id : nil,
                                           resumeToken: session.resumeToken, expiresAt: expires)))
            log("\(c) registered \(session.id)")
        }
        if conn.kind == .mobile, consumeRule({ $0.effect == .deviceOwnershipFailed ? () : nil }) != nil {
            sendError(c, .deviceOwnershipFailed, "device \(conn.deviceId) is not owned by user \(conn.userId) (fault)")
        }
        if conn.kind == .desktop {
            publish(userId: conn.userId, source: conn.deviceId, eventType: EventNames.deviceStatus,
                    payload: DeviceStatus(deviceId: conn.deviceId, status: .online).json)
        } else {
            if let last = p.lastEventId { replay(c, userId: conn.userId, above: last) }
            // Any account, any desktop: the phone's target comes up (simulated) unless a real one serves it.
            if let phone = connections[c] { ensureDesktop(for: phone) }
        }
    }

    /// §5: replays buffered events above `last`, with `event-replay-gap` first when there is a hole.
    private mutating func replay(_ c: ConnectionID, userId: String, above last: Int64) {
        buffers[userId]?.prune(now: now)
        let issued = lastEventIds[userId] ?? 0
        guard issued > last else { return }
        let buffer = buffers[userId] ?? EventBuffer()
        let oldest = buffer.oldest?.eventId ?? issued + 1
        if last + 1 < oldest {
            let gap = EventReplayGap(lastEventId: last, oldestBufferedId: oldest, latestBufferedId: buffer.latest?.eventId ?? issued)
            send(c, .event(EventMessage(eventType: EventNames.eventReplayGap, payload: gap.json, eventId: nil,
                                        sourceDeviceId: nil, targetDeviceId: nil, timestamp: wallClock(now))))
        }
        let target = connections[c]?.targetDesktopDeviceId
        for e in buffer.events where e.eventId > last {
            if let target, let source = e.message.sourceDeviceId, source != target { continue }
            send(c, .text(e.text), type: RelayMessage.TypeName.event, eventType: e.message.eventType)
        }
    }

    // MARK: - Routing

    /// The target desktop's socket for a phone: its named target, else the user's registered desktop
    /// with the smallest device ID.
    private func desktop(for phone: RelayConnection) -> ConnectionID? {
        if let target = phone.targetDesktopDeviceId ?? links[DeviceKey(userId: phone.userId, deviceId: phone.deviceId)] {
            guard let c = devices[DeviceKey(userId: phone.userId, deviceId: target)], let d = connections[c],
                  d.kind == .desktop, d.isRegistered else { return nil }
            return c
        }
        return connections.values.filter { $0.userId == phone.userId && $0.kind == .desktop && $0.isRegistered }
            .min { $0.deviceId < $1.deviceId }?.id
    }

    /// The registered phones of `userId` that talk to `desktop` (or to any desktop), by connection ID.
    private func phones(of userId: String, desktop: String?) -> [ConnectionID] {
        connections.values.filter { c in
            c.userId == userId && c.kind == .mobile && c.isRegistered
                && (desktop == nil || c.targetDesktopDeviceId == nil || c.targetDesktopDeviceId == desktop)
        }.map(\.id).sorted()
    }

    private func withClientId(_ json: JSONValue, _ clientId: String) -> JSONValue {
        guard case .object(var top) = json, case .object(var payload)? = top["payload"] else { return json }
        payload["clientId"] = .string(clientId)
        top["payload"] = .object(payload)
        return .object(top)
    }

    private mutating func forwardRequest(_ phone: RelayConnection, _ r: RpcRequest, _ json: JSONValue) {
        if desktop(for: phone) == nil { ensureDesktop(for: phone) }
        guard let d = desktop(for: phone) else {
            // §4: the relay answers -32010 itself, echoing the request's traceparent.
            let response = RpcResponse(id: r.id, result: nil, error: RpcErrorBody(.desktopOffline, message: RelayConstants.desktopOfflineMessage),
                                       isFinal: true, traceparent: r.traceparent)
            return send(phone.id, .rpcResponse(response))
        }
        send(d, .text(withClientId(json, phone.deviceId).jsonText), type: RelayMessage.TypeName.rpcRequest, method: r.method)
    }

    private mutating func routeResponse(_ desktop: RelayConnection, _ json: JSONValue) {
        guard case .object(var top) = json else { return }
        var clientId: String?
        if case .object(var payload)? = top["payload"], let id = payload["clientId"]?.stringValue {
            clientId = id
            payload["clientId"] = nil
            top["payload"] = .object(payload)
        } else if let id = top["clientId"]?.stringValue {
            clientId = id
            top["clientId"] = nil
        }
        guard let clientId else {
            return sendError(desktop.id, .missingClientId, "rpc.response has no clientId; echo the clientId of the rpc.request")
        }
        guard let c = devices[DeviceKey(userId: desktop.userId, deviceId: lowercasedASCII(clientId))],
              let phone = connections[c], phone.isRegistered else {
            return log("\(desktop.id) rpc.response for \(clientId), which is not connected: dropped")
        }
        send(c, .text(JSONValue.object(top).jsonText), type: RelayMessage.TypeName.rpcResponse)
    }

    private mutating func forwardPhoneEvent(_ phone: RelayConnection, _ e: EventMessage) {
        guard let d = desktop(for: phone), let desk = connections[d] else {
            return log("\(phone.id) event \(e.eventType) with no desktop connected: dropped")
        }
        let forwarded = EventMessage(eventType: e.eventType, payload: e.payload, eventId: nil, sourceDeviceId: phone.deviceId,
                                     targetDeviceId: desk.deviceId, timestamp: wallClock(now))
        send(d, .event(forwarded))
    }

    /// Gives an event the user's next `eventId`, keeps it for replay, and sends it to the user's phones.
    mutating func publish(userId: String, source: String, eventType: String, payload: JSONValue) {
        let id = (lastEventIds[userId] ?? 0) + 1
        lastEventIds[userId] = id
        let message = EventMessage(eventType: eventType, payload: payload, eventId: id, sourceDeviceId: source,
                                   targetDeviceId: nil, timestamp: wallClock(now))
        guard let text = encode(.event(message)) else { return }
        if text.utf8.count <= RelayConstants.replayMaxEventBytes {
            buffers[userId, default: EventBuffer()].append(BufferedEvent(eventId: id, at: now, message: message, text: text), now: now)
        }
        for c in phones(of: userId, desktop: source) {
            send(c, .text(text), type: RelayMessage.TypeName.event, eventType: eventType)
        }
    }

    // MARK: - Sending

    private func encode(_ message: RelayMessage, form: ProtocolForm = .v1_6) -> String? {
        try? message.encodedText(form: form)
    }

    mutating func send(_ c: ConnectionID, _ message: RelayMessage) {
        let form = connections[c]?.form ?? .v1_6
        var eventType: String?
        var method: String?
        if case .event(let e) = message { eventType = e.eventType }
        if case .rpcRequest(let r) = message { method = r.method }
        guard let text = encode(message, form: form) else {
            return log("\(c) \(message.typeName) not sent: it has a snake_case key")
        }
        send(c, .text(text), type: message.typeName, method: method, eventType: eventType)
    }

    private mutating func send(_ c: ConnectionID, _ frame: WireFrame, type: String, method: String? = nil, eventType: String? = nil) {
        guard let conn = connections[c] else { return }
        switch frameFault(direction: .toClient, kind: conn.kind, type: type, method: method, eventType: eventType) {
        case .drop: return
        case .delay(let by): hold(.outgoing(c, frame), for: by)
        case .pass: emit(.send(c, frame))
        }
    }

    mutating func sendError(_ c: ConnectionID, _ code: RelayErrorCode, _ message: String) {
        send(c, .error(RelayErrorMessage(code: code, message: message, timestamp: wallClock(now))))
    }

    mutating func log(_ line: String) {
        out.append(.log("\(now) \(line)"))
    }

    // MARK: - Faults

    private mutating func applyFault(_ f: RelayFault) {
        if f.trigger == nil {
            switch f.effect {
            case .closeClient(let code, let reason, let peer):
                log("fault: close-client")
                for c in connections.keys.sorted() where peer == nil || connections[c]?.kind == peer {
                    closeConnection(c, code: code, reason: reason)
                }
                return
            case .restart:
                return restart()
            default:
                break
            }
        }
        if let until = f.until, until <= now { return }
        lastRuleSerial += 1
        rules.append(Rule(serial: lastRuleSerial, fault: f))
        log("fault installed: \(f.effect)")
    }

    /// Loses every session, buffer, binding and delayed frame, and closes every socket (1012).
    private mutating func restart() {
        log("fault: restart (all sessions lost)")
        for c in connections.keys.sorted() {
            emit(.close(c, code: RelayConstants.restartCloseCode, reason: "relay restart"))
            removeConnection(c, announce: false)
        }
        linkCodes.removeAll()
        sessions.removeAll()
        buffers.removeAll()
        devices.removeAll()
        for slot in delayed.keys.sorted() { cancel(.delayedFrame(slot: slot)) }
        delayed.removeAll()
    }

    private mutating func hold(_ frame: DelayedFrame, for by: Duration) {
        lastSlot += 1
        delayed[lastSlot] = frame
        arm(.delayedFrame(slot: lastSlot), at: now + by)
    }

    enum FrameFaultOutcome { case pass, drop, delay(Duration) }

    /// The first drop/delay rule matching this frame, its count consumed.
    private mutating func frameFault(direction: FrameDirection, kind: ClientKind, type: String, method: String?,
                                     eventType: String?) -> FrameFaultOutcome {
        guard !rules.isEmpty else { return .pass }
        var outcome = FrameFaultOutcome.pass
        _ = consumeRule { f -> Void? in
            guard f.trigger == nil else { return nil }
            switch f.effect {
            case .drop(let m) where m.matches(direction: direction, peer: kind, messageType: type, method: method, eventType: eventType):
                outcome = .drop
                return ()
            case .delay(let m, let by) where m.matches(direction: direction, peer: kind, messageType: type, method: method, eventType: eventType):
                outcome = .delay(by)
                return ()
            default:
                return nil
            }
        }
        return outcome
    }

    /// Fires a triggered close-client or restart matching this frame; true when the frame was consumed.
    private mutating func triggeredFault(_ c: ConnectionID, kind: ClientKind, type: String, method: String?, eventType: String?) -> Bool {
        guard !rules.isEmpty else { return false }
        let hit = consumeRule { f -> RelayFault.Effect? in
            guard let t = f.trigger, t.matches(direction: .fromClient, peer: kind, messageType: type, method: method, eventType: eventType) else { return nil }
            // Only close-client and restart act on the frame here; a triggered invalid-resume or
            // ownership-failed is consumed where the register is answered (consuming it here too would
            // spend two of its count per register).
            switch f.effect {
            case .closeClient, .restart: return f.effect
            default: return nil
            }
        }
        switch hit {
        case .closeClient(let code, let reason, _)?:
            closeConnection(c, code: code, reason: reason)
            return true
        case .restart?:
            restart()
            return true
        default:
            return false
        }
    }

    /// Finds the first live rule for which `select` returns a value, uses one of its count (removing
    /// it when spent), drops expired rules on the way, and returns the value.
    private mutating func consumeRule<T>(_ select: (RelayFault) -> T?) -> T? {
        var i = 0
        while i < rules.count {
            let f = rules[i].fault
            if let until = f.until, until <= now {
                rules.remove(at: i)
                continue
            }
            if let value = select(f) {
                if let n = f.count {
                    if n <= 1 { rules.remove(at: i) } else { rules[i].fault.count = n - 1 }
                } else if RelayDefaults.isOneShot(f) {
                    rules.remove(at: i)
                }
                return value
            }
            i += 1
        }
        return nil
    }
}

enum RelayDefaults {
    /// Without a count, drop/delay/refuse-upgrades apply until their window ends; the rest apply once.
    static func isOneShot(_ f: RelayFault) -> Bool {
        switch f.effect {
        case .drop, .delay, .refuseUpgrades: false
        case .invalidResume, .deviceOwnershipFailed, .closeClient, .restart: true
        }
    }
}
