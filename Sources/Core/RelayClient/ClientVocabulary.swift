public import RelayProtocol

/// A transport generation: one per socket the client opens, counting up from 1 (SPEC A5).
///
/// Every input and action that concerns a socket carries its generation. Inputs of a generation that is
/// no longer current are ignored (and reported as a ``ClientDiagnostic/staleGeneration(_:current:input:)``).
public struct Generation: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The generation number.
    public var rawValue: UInt64
    /// Creates generation `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates generation `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: Generation, b: Generation) -> Bool { a.rawValue < b.rawValue }
    /// `g3` for generation 3.
    public var description: String { "g\(rawValue)" }
    /// The generation after this one.
    public var next: Generation { Generation(rawValue &+ 1) }
}

/// A caller's handle for one RPC call, chosen by the UI layer (unique per client for its lifetime).
public struct CallID: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The handle.
    public var rawValue: UInt64
    /// Creates handle `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates handle `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: CallID, b: CallID) -> Bool { a.rawValue < b.rawValue }
    /// `call#7` for handle 7.
    public var description: String { "call#\(rawValue)" }
}

/// One HTTP header of the upgrade request, in the order it is sent.
public struct HTTPHeader: Sendable, Hashable, CustomStringConvertible {
    /// The header name as sent.
    public var name: String
    /// The header value.
    public var value: String
    /// Creates a header.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
    /// `Name: value`.
    public var description: String { "\(name): \(value)" }
}

/// A timer the machine arms with ``ClientAction/armTimer(_:deadline:)`` and receives back as
/// ``ClientInput/timerFired(_:)``. Arming an armed timer moves its deadline; a fire of a timer that is not
/// armed (cancelled, or already fired) is stale and ignored.
public enum TimerID: Sendable, Hashable, CustomStringConvertible {
    /// A6: the handshake of this generation (open + register) must complete by the deadline.
    case handshake(Generation)
    /// A6: send the next `heartbeat` on this generation.
    case heartbeat(Generation)
    /// A6: check for inbound silence on this generation.
    case watchdog(Generation)
    /// A7: re-register without a token after `invalidResume`.
    case reRegister(Generation)
    /// A6: retry a send that failed transiently; `slot` names the held frame.
    case sendRetry(Generation, slot: UInt64)
    /// A8: the call with this request ID and ownership token times out.
    case rpcTimeout(requestId: String, ownership: UInt64)
    /// Open the next generation after a failure (reconnect attempt `attempt`, counting from 1).
    case reconnect(attempt: Int)
    /// A9: the deadline of recovery epoch `epoch`.
    case epochDeadline(epoch: UInt64)
    /// A2: a timer of the login / token-refresh flow.
    case auth(AuthTimer)
    /// A11: a timer of the timeline-interest coordinator.
    case interest(InterestTimer)
    /// A9: the next `system.ping` probe of recovery epoch `epoch`.
    case probe(epoch: UInt64)
    /// A9: recovery after returning to the foreground starts when this fires (1.5 s after).
    case foregroundRecovery

    /// Hashes the case and its distinguishing number in one combine where it can: the machine's timer table
    /// hashes a `TimerID` on every arm, cancel and fire. Equal timers hash equally (`==` stays synthesised and
    /// compares every payload; a payload left out of the hash, such as an rpc timeout's request ID, only
    /// allows a collision, never a wrong answer).
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .handshake(let g): hasher.combine(g.rawValue &<< 4)
        case .heartbeat(let g): hasher.combine(g.rawValue &<< 4 | 1)
        case .watchdog(let g): hasher.combine(g.rawValue &<< 4 | 2)
        case .reRegister(let g): hasher.combine(g.rawValue &<< 4 | 3)
        case .sendRetry(_, let slot): hasher.combine(slot &<< 4 | 4)
        case .rpcTimeout(_, let ownership): hasher.combine(ownership &<< 4 | 5)
        case .reconnect(let attempt): hasher.combine(UInt64(truncatingIfNeeded: attempt) &<< 4 | 6)
        case .epochDeadline(let e): hasher.combine(e &<< 4 | 7)
        case .auth(let t): hasher.combine(UInt64(8)); hasher.combine(t)
        case .interest(let t): hasher.combine(UInt64(9)); hasher.combine(t)
        case .probe(let e): hasher.combine(e &<< 4 | 10)
        case .foregroundRecovery: hasher.combine(UInt64(11))
        }
    }

    /// A stable, human-readable name, e.g. `heartbeat(g3)`.
    public var description: String {
        switch self {
        case .handshake(let g): "handshake(\(g))"
        case .heartbeat(let g): "heartbeat(\(g))"
        case .watchdog(let g): "watchdog(\(g))"
        case .reRegister(let g): "reRegister(\(g))"
        case .sendRetry(let g, let slot): "sendRetry(\(g),\(slot))"
        case .rpcTimeout(let id, let own): "rpcTimeout(\(id),\(own))"
        case .reconnect(let attempt): "reconnect(\(attempt))"
        case .epochDeadline(let e): "epochDeadline(\(e))"
        case .probe(let e): "probe(\(e))"
        case .foregroundRecovery: "foregroundRecovery"
        case .auth(let t): "auth.\(t)"
        case .interest(let t): "interest.\(t)"
        }
    }

    /// The generation this timer belongs to, when it belongs to one.
    public var generation: Generation? {
        switch self {
        case .handshake(let g), .heartbeat(let g), .watchdog(let g), .reRegister(let g), .sendRetry(let g, _): g
        case .rpcTimeout, .reconnect, .epochDeadline, .probe, .foregroundRecovery, .auth, .interest: nil
        }
    }
}

/// What the relay's stored resume state is for one (phone, desktop) pair (SPEC A7).
public struct ResumeCredentials: Sendable, Hashable {
    /// The relay session to resume (`relaySessionId`, 32 characters).
    public var relaySessionId: String
    /// The resume token (48 characters); not rotated on resume.
    public var resumeToken: String
    /// Creates credentials.
    public init(relaySessionId: String, resumeToken: String) {
        self.relaySessionId = relaySessionId
        self.resumeToken = resumeToken
    }
}

/// What the driver hands the machine when it starts a session.
public struct StartParameters: Sendable, Hashable {
    /// The app JWT for `Authorization: Bearer`.
    public var jwt: String
    /// The resume credentials read from the store for this client's key, if any.
    public var storedResume: ResumeCredentials?
    /// The ownership generation the resume-token store granted this client for its key (SPEC A7).
    public var resumeOwnership: UInt64
    /// Creates start parameters.
    public init(jwt: String, storedResume: ResumeCredentials? = nil, resumeOwnership: UInt64) {
        self.jwt = jwt
        self.storedResume = storedResume
        self.resumeOwnership = resumeOwnership
    }
}

/// An RPC call from the UI layer (SPEC A8).
public struct CallRequest: Sendable, Hashable {
    /// The caller's handle; the outcome comes back under it.
    public var callId: CallID
    /// The method name; must be in ``RpcCatalogue``.
    public var method: String
    /// The parameters (camelCase keys only).
    public var params: JSONValue
    /// The idempotency key; required for keyed methods.
    public var idempotencyKey: String?
    /// A request ID chosen by the caller; when nil the machine draws a UUID from its seeded generator.
    public var requestId: String?
    /// Creates a call.
    public init(callId: CallID, method: String, params: JSONValue = .object([:]), idempotencyKey: String? = nil,
                requestId: String? = nil) {
        self.callId = callId
        self.method = method
        self.params = params
        self.idempotencyKey = idempotencyKey
        self.requestId = requestId
    }
}

/// How a transport failed before or instead of closing cleanly.
public enum TransportFailure: Sendable, Hashable, CustomStringConvertible {
    /// The relay refused the upgrade with this HTTP status (401, 429, 500, ...).
    case upgradeRefused(status: Int)
    /// A network-level error (DNS, connect, reset, TLS), described.
    case network(String)

    /// A one-line description.
    public var description: String {
        switch self {
        case .upgradeRefused(let s): "upgrade refused with HTTP \(s)"
        case .network(let m): m
        }
    }
}

/// Everything that happens to the client machine. Each input is handled at a ``Moment``.
public enum ClientInput: Sendable, Hashable {
    /// Start (or restart) the session: open the first socket.
    case start(StartParameters)
    /// Stop the session: close the socket (1001), cancel every timer, fail every pending call.
    case stop
    /// The socket of this generation completed its upgrade.
    case transportOpened(Generation)
    /// A message arrived on this generation.
    case transportFrame(Generation, WireFrame)
    /// The peer closed this generation (close code if one was received).
    case transportClosed(Generation, code: UInt16?, reason: String)
    /// This generation failed (refused upgrade, network error).
    case transportFailed(Generation, TransportFailure)
    /// A send on this generation failed; `attempt` echoes the action's attempt number.
    case sendFailed(Generation, frame: WireFrame, attempt: Int, transient: Bool, reason: String)
    /// An armed timer reached its deadline.
    case timerFired(TimerID)
    /// The UI calls an RPC method.
    case call(CallRequest)
    /// A9: the network path monitor reported a path (or its loss).
    case networkPath(NetworkPath)
    /// A9: the app's lifecycle state changed.
    case appState(AppState)
    /// A9: whether desktop-backed media is playing (keeps relays connected in the background).
    case desktopMediaPlaying(Bool)
    /// A9: a silent push arrived.
    case push(PushNotification)
    /// A1: the identity store and the system's protected-data notifications.
    case identity(IdentityInput)
    /// A2: login, token refresh and their HTTP answers.
    case auth(AuthInput)
    /// A3: the user chose a region.
    case selectRegion(Region)
    /// A11: a chat view's timeline claim changed.
    case interest(InterestInput)
    /// A10: the UI finished processing the snapshot it was given.
    case snapshotProcessed
    /// SPEC Part B: what the offline queue's store holds.
    case offlineQueue(OfflineQueueInput)
    /// Device linking (seed 003): a code typed or scanned, and the store's answer to `link(.store)`.
    case link(LinkInput)
}

/// A11: what chat views tell the timeline-interest coordinator (for the client's target desktop).
public enum InterestInput: Sendable, Hashable {
    /// A chat view became visible and claims interest in `baseSessionId`.
    case claim(ClaimID, baseSessionId: String)
    /// The view confirmed it is still visible (in the current foreground generation).
    case confirmVisible(ClaimID)
    /// The view went away.
    case release(ClaimID)
}

/// A9: what the network path monitor reports.
public enum NetworkPath: Sendable, Hashable, CustomStringConvertible {
    /// No usable path.
    case unsatisfied
    /// A usable path over this interface.
    case satisfied(NetworkInterface)

    /// `unsatisfied` or `satisfied(wifi)`.
    public var description: String {
        switch self {
        case .unsatisfied: "unsatisfied"
        case .satisfied(let i): "satisfied(\(i.rawValue))"
        }
    }
}

/// A9: the interface a path uses.
public enum NetworkInterface: String, Sendable, Hashable {
    /// Wi-Fi.
    case wifi
    /// Cellular.
    case cellular
    /// Wired Ethernet.
    case wired
    /// Anything else (loopback, VPN-only, unknown).
    case other
}

/// A9: the app's lifecycle state (UIKit's scene activation states).
public enum AppState: String, Sendable, Hashable {
    /// In the foreground and receiving events.
    case active
    /// In the foreground but not receiving events (a sheet, the app switcher, a call).
    case inactive
    /// In the background.
    case background
}

/// A9: silent pushes the client reacts to.
public enum PushNotification: Sendable, Hashable {
    /// `desktop_online`: the desktop is back; start recovery at once.
    case desktopOnline(desktopId: String)
}

/// Why an RPC call failed.
public enum CallFailure: Sendable, Hashable, CustomStringConvertible {
    /// A8: the method is not in the catalogue; nothing was sent.
    case unknownMethod(String)
    /// A8: the method needs an idempotency key and none was given; nothing was sent.
    case missingIdempotencyKey(method: String)
    /// A8: a key containing `_` at this JSON path; nothing was sent.
    case snakeCaseKey(path: String)
    /// A8: a call with this request ID is already in flight; nothing was sent.
    case duplicateRequestId(String)
    /// A8: no final response within the method's timeout.
    case timedOut(after: Duration)
    /// The desktop (or relay) answered with a JSON-RPC error.
    case remote(code: Int, message: String, data: JSONValue?)
    /// The socket that carried the call was closed by the client (path lost, interface switch, stop).
    case connectionClosed(String)
    /// The client gave up (e.g. `invalidResumeLoop`) or was stopped.
    case clientStopped(String)

    /// A one-line description.
    public var description: String {
        switch self {
        case .unknownMethod(let m): "unknown method \(m)"
        case .missingIdempotencyKey(let m): "\(m) needs an idempotency key"
        case .snakeCaseKey(let p): "snake_case key at \(p)"
        case .duplicateRequestId(let id): "request ID \(id) already in flight"
        case .timedOut(let d): "timed out after \(d.seconds) s"
        case .remote(let code, let message, _): "remote error \(code): \(message)"
        case .connectionClosed(let why): "connection closed: \(why)"
        case .clientStopped(let why): "client stopped: \(why)"
        }
    }
}

/// The outcome of an RPC call.
public enum CallOutcome: Sendable, Hashable {
    /// The final `result`.
    case success(JSONValue)
    /// The call failed.
    case failure(CallFailure)
    /// SPEC Part B: no relay was registered, so the keyed mutation went into the offline queue; its end
    /// comes as ``ClientAction/offlineMutationFinished(idempotencyKey:_:)``.
    case queued(idempotencyKey: String)
}

/// Why a connection (one generation) was failed by the client.
public enum ConnectionFailure: Sendable, Hashable, CustomStringConvertible {
    /// A6: no `registered`/`resumed` within the handshake timeout.
    case handshakeTimeout
    /// A6: no inbound traffic within the watchdog timeout.
    case watchdog
    /// A8: a call sent on this generation timed out.
    case rpcTimeout(requestId: String)
    /// A6: a send failed for a reason that is not transient.
    case sendFailed(String)
    /// The peer closed the socket.
    case closedByPeer(code: UInt16?, reason: String)
    /// The transport failed.
    case transport(TransportFailure)
    /// The relay reported `deviceOwnershipFailed` after registration.
    case deviceOwnershipFailed

    /// A short reason, also used as the close reason.
    public var description: String {
        switch self {
        case .handshakeTimeout: "handshake timeout"
        case .watchdog: "watchdog: no inbound traffic"
        case .rpcTimeout(let id): "rpc timeout \(id)"
        case .sendFailed(let r): "send failed: \(r)"
        case .closedByPeer(let code, let reason): "closed by peer (\(code.map(String.init) ?? "no code") \(reason))"
        case .transport(let f): "transport failed: \(f)"
        case .deviceOwnershipFailed: "deviceOwnershipFailed"
        }
    }
}

/// Why the client stopped for good (until the next ``ClientInput/start(_:)``).
public enum ClientStopReason: Sendable, Hashable, CustomStringConvertible {
    /// A7: three invalid resumes within the rolling window.
    case invalidResumeLoop
    /// ``ClientInput/stop`` was handled.
    case stopped
    /// A2: the session ended (the token refresh was refused with 401/403, or logout).
    case sessionEnded

    /// The reason's name.
    public var description: String {
        switch self {
        case .invalidResumeLoop: "invalidResumeLoop"
        case .stopped: "stopped"
        case .sessionEnded: "sessionEnded"
        }
    }
}

/// The connection phase, reported with ``ClientAction/phaseChanged(_:)`` whenever it changes.
public enum ConnectionPhase: Sendable, Hashable, CustomStringConvertible {
    /// Not started.
    case idle
    /// The socket of this generation is being opened.
    case connecting(Generation)
    /// The socket is open; `register` is sent or about to be re-sent.
    case registering(Generation)
    /// Registered (or resumed) with the relay.
    case registered(Generation, relaySessionId: String)
    /// A socket of this generation is open (or opening) to link a desktop with a code
    /// (docs/DEVICE_LINK.md): `link.redeem` instead of `register`.
    case linking(Generation)
    /// Waiting to open the next socket (reconnect attempt `attempt`).
    case waitingToReconnect(attempt: Int)
    /// A9: no socket on purpose until the reason goes away (no network path, app in the background).
    case suspended(SuspendReason)
    /// Stopped, for this reason.
    case stopped(ClientStopReason)

    /// The generation this phase concerns, if any.
    public var generation: Generation? {
        switch self {
        case .connecting(let g), .registering(let g), .registered(let g, _), .linking(let g): g
        case .idle, .waitingToReconnect, .suspended, .stopped: nil
        }
    }

    /// e.g. `registered(g2, Qm3x…)`.
    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting(let g): "connecting(\(g))"
        case .registering(let g): "registering(\(g))"
        case .registered(let g, let s): "registered(\(g), \(s))"
        case .linking(let g): "linking(\(g))"
        case .waitingToReconnect(let a): "waitingToReconnect(\(a))"
        case .suspended(let r): "suspended(\(r.rawValue))"
        case .stopped(let r): "stopped(\(r))"
        }
    }
}

/// A9: why the client holds no socket on purpose.
public enum SuspendReason: String, Sendable, Hashable {
    /// The phone has no network path.
    case noNetworkPath
    /// The app is in the background and no desktop-backed media is playing.
    case background
    /// No desktop is linked yet: the app waits for a link code (docs/DEVICE_LINK.md).
    case notLinked
}

/// A9: what the app shows for the target desktop.
public enum DesktopStatus: Sendable, Hashable, CustomStringConvertible {
    /// Not known yet.
    case unknown
    /// A recovery epoch is probing the desktop.
    case recovering(epoch: UInt64)
    /// The desktop answered a `system.ping`.
    case online
    /// The desktop is shown as temporarily offline, for this reason.
    case temporarilyOffline(OfflineReason)

    /// e.g. `temporarilyOffline(deadline)`.
    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .recovering(let e): "recovering(epoch \(e))"
        case .online: "online"
        case .temporarilyOffline(let r): "temporarilyOffline(\(r.rawValue))"
        }
    }
}

/// A9: why a desktop is shown as temporarily offline.
public enum OfflineReason: String, Sendable, Hashable {
    /// The recovery epoch's deadline passed without an answer.
    case deadline
    /// The relay reported the desktop `disconnected`.
    case relayReportedDisconnected
    /// Probing ended because the phone has no network path.
    case noNetworkPath
}

/// A9: why a recovery epoch was opened.
public enum EpochReason: String, Sendable, Hashable {
    /// The network path was lost.
    case pathLost
    /// The network path came back.
    case pathRestored
    /// The path moved to another interface (Wi-Fi <-> cellular).
    case interfaceSwitch
    /// The app came back to the foreground (1.5 s earlier).
    case foreground
    /// A `desktop_online` push.
    case desktopOnlinePush
    /// The relay reported the desktop `online`.
    case relayReportedOnline
}

/// Something the machine noticed and ignored or dropped; reported so traces explain themselves.
public enum ClientDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// A5: an input for a generation that is not current was ignored.
    case staleGeneration(Generation, current: Generation?, input: String)
    /// A timer fired that is not armed (cancelled or already handled).
    case staleTimer(TimerID)
    /// An inbound text frame that is not valid JSON or not a valid message.
    case undecodableFrame(Generation, String)
    /// PROTOCOL.md §2: an inbound message with a snake_case key was dropped.
    case droppedSnakeCaseMessage(Generation, path: String)
    /// An `rpc.response` for no pending call.
    case unmatchedResponse(requestId: String)
    /// A8: an `rpc.response` whose trace ID differs from the request's was rejected.
    case traceIdMismatch(requestId: String, expected: String, received: String)
    /// An `rpc.response` arrived on a generation other than the one that carried the request.
    case responseOnOtherGeneration(requestId: String, sentOn: Generation, receivedOn: Generation)
    /// A message that the current phase does not expect (e.g. a second `registered`).
    case unexpectedMessage(Generation, type: String, phase: String)
    /// The relay sent an `error` that needs no action.
    case relayError(Generation, code: String, message: String)
    /// An input arrived with a time earlier than the previous one; it was handled at the previous time.
    case timeWentBackwards(from: Moment, to: Moment)
    /// An input that does not apply in the current phase was ignored.
    case ignoredInput(String, phase: String)
    /// A1: `start` is held until the device identity is known.
    case waitingForIdentity
    /// A1: the identity store's device ID is not the one this client is configured for.
    case identityMismatch(configured: String, read: String)
    /// A1: the identity gate ignored an input.
    case identity(IdentityIgnored)
    /// A2: the login and refresh flow ignored an input.
    case auth(AuthIgnored)
    /// A11: the timeline-interest coordinator ignored an input.
    case interest(InterestDiagnostic)
    /// A3: a `registered`/`resumed` on this generation, for an attempt bound to a previous origin (`attempt`),
    /// completed nothing.
    case staleRegistration(Generation, attempt: AttemptID)
    /// A3: a reply to this login or refresh request, for an attempt bound to a previous origin, completed
    /// nothing.
    case staleReply(request: AuthRequestID, attempt: AttemptID)
    /// A11: the interest delivery was retried 4 times and given up until the next renewal or registration.
    case interestGaveUp(TimelineInterest)

    /// The diagnostic a trace records: a stable code and structured fields (generations and times as
    /// integers), never the English, which ``description`` renders from `DiagnosticCatalogue`.
    public var record: DiagnosticRecord {
        func gen(_ g: Generation) -> JSONValue { .int(Int64(bitPattern: g.rawValue)) }
        return switch self {
        case .staleGeneration(let g, let cur, let input):
            DiagnosticRecord("staleGeneration", ["gen": gen(g), "current": cur.map(gen) ?? .null, "input": .string(input)])
        case .staleTimer(let t): DiagnosticRecord("staleTimer", ["timer": .string(t.description)])
        case .undecodableFrame(let g, let why): DiagnosticRecord("undecodableFrame", ["gen": gen(g), "error": .string(why)])
        case .droppedSnakeCaseMessage(let g, let path): DiagnosticRecord("droppedSnakeCaseMessage", ["gen": gen(g), "path": .string(path)])
        case .unmatchedResponse(let id): DiagnosticRecord("unmatchedResponse", ["requestId": .string(id)])
        case .traceIdMismatch(let id, let e, let r):
            DiagnosticRecord("traceIdMismatch", ["requestId": .string(id), "expected": .string(e), "received": .string(r)])
        case .responseOnOtherGeneration(let id, let s, let r):
            DiagnosticRecord("responseOnOtherGeneration", ["requestId": .string(id), "sentOn": gen(s), "receivedOn": gen(r)])
        case .unexpectedMessage(let g, let type, let phase):
            DiagnosticRecord("unexpectedMessage", ["gen": gen(g), "type": .string(type), "phase": .string(phase)])
        case .relayError(let g, let code, let message):
            DiagnosticRecord("relayError", ["gen": gen(g), "relayCode": .string(code), "message": .string(message)])
        case .timeWentBackwards(let a, let b): DiagnosticRecord("timeWentBackwards", ["from": .int(a.nanoseconds), "to": .int(b.nanoseconds)])
        case .ignoredInput(let what, let phase): DiagnosticRecord("ignoredInput", ["input": .string(what), "phase": .string(phase)])
        case .waitingForIdentity: DiagnosticRecord("waitingForIdentity")
        case .identityMismatch(let c, let r): DiagnosticRecord("identityMismatch", ["configured": .string(c), "read": .string(r)])
        case .identity(let why): why.record
        case .auth(let why): why.record
        case .interest(let d): d.record
        case .staleRegistration(let g, let attempt): DiagnosticRecord("staleRegistration", ["gen": gen(g), "attempt": .int(Int64(bitPattern: attempt.rawValue))])
        case .staleReply(let id, let attempt): DiagnosticRecord("staleReply", ["request": .int(Int64(bitPattern: id.rawValue)), "attempt": .int(Int64(bitPattern: attempt.rawValue))])
        case .interestGaveUp(let i): DiagnosticRecord("interestGaveUp", ["sessionId": .string(i.sessionId)])
        }
    }

    /// The English sentence of ``record``.
    public var description: String { record.text }
}

/// Everything the client machine wants done. A driver performs them; the trace records them.
///
/// The machine is sans-I/O (like python-websockets' `Protocol`): it never performs anything itself, so each
/// case below says what the driver must do with it and which input, if any, the driver feeds back. A
/// driver performs the actions of one ``RelayClientMachine/handle(_:at:)`` call in the order they are
/// returned, before it feeds the next input. Feeding back means calling `handle` with that input later;
/// never from inside the performance of an action of the same batch.
public enum ClientAction: Sendable, Hashable {
    /// Open a WebSocket to `url` as this generation, sending exactly these upgrade headers (SPEC A4) and no
    /// others. The driver must then feed ``ClientInput/transportOpened(_:)`` when the upgrade completes, or
    /// ``ClientInput/transportFailed(_:_:)`` when it is refused or the network fails; afterwards each
    /// message it receives as ``ClientInput/transportFrame(_:_:)`` and the peer's close as
    /// ``ClientInput/transportClosed(_:code:reason:)``, all tagged with this generation.
    case openTransport(Generation, url: String, headers: [HTTPHeader])
    /// Send this frame, byte for byte, on the socket of this generation; `attempt` counts tries of the same
    /// message (SPEC A6). If the socket of that generation is gone, drop the frame. If the send fails, feed
    /// ``ClientInput/sendFailed(_:frame:attempt:transient:reason:)`` with this frame and attempt (transient
    /// for a timeout or a full buffer); the machine decides whether to retry. Nothing to feed on success.
    case send(Generation, WireFrame, attempt: Int)
    /// Close this generation's socket with this close code and reason, and forget it: the machine has
    /// already retired the generation, so whatever that socket still reports is stale and may be dropped
    /// (if fed, it is ignored with a ``ClientDiagnostic/staleGeneration(_:current:input:)`` diagnostic).
    case closeTransport(Generation, code: UInt16, reason: String)
    /// Arm the timer `id` to fire at `deadline` on the machine's clock, replacing any deadline it already
    /// has (one timer per ID). When it is due, feed ``ClientInput/timerFired(_:)`` with this ID, once
    /// (`ClientHarness` and the simulation fire ties in arming order).
    case armTimer(TimerID, deadline: Moment)
    /// Disarm the timer `id` (a no-op if it is not armed): its ``ClientInput/timerFired(_:)`` must not be
    /// fed afterwards. Nothing to feed back.
    case cancelTimer(TimerID)
    /// Write these resume credentials to durable storage under `key`, as owner `ownership`; the store must
    /// refuse the write when `ownership` is no longer the key's owner (SPEC A7; ``ResumeTokenStore``
    /// implements this). Nothing to feed back; the next start reads them into ``StartParameters``.
    case storeResumeCredentials(key: String, ResumeCredentials, ownership: UInt64)
    /// Delete the resume credentials under `key`, as owner `ownership`, with the same ownership check
    /// (A7, after `invalidResume`). Nothing to feed back.
    case clearResumeCredentials(key: String, ownership: UInt64)
    /// The call ``CallRequest/callId`` ended with this outcome (a result, a JSON-RPC error or a failure):
    /// hand it to the caller that issued the ``ClientInput/call(_:)``. It is the call's last action.
    case callCompleted(CallID, CallOutcome)
    /// A non-final response (`isFinal: false`) for a call: hand this partial result to its caller; the
    /// call stays pending until its ``callCompleted(_:_:)``.
    case callProgress(CallID, JSONValue)
    /// A10: hand the app what event ingress delivers. For ``IngressEffect/deliverSnapshot(_:)`` the driver
    /// must feed ``ClientInput/snapshotProcessed`` once the UI has finished with it (the next snapshot
    /// waits for that); control events are delivered at once; drops and rejections are for logs.
    case ingress(IngressEffect)
    /// A1: what the identity gate wants. For ``IdentityEffect/readIdentity`` read the identity store (off
    /// the main thread) and feed ``ClientInput/identity(_:)`` with ``IdentityInput/identityRead(_:)``; for
    /// ``IdentityEffect/offerResetDeviceIdentity`` show the offer and feed
    /// ``IdentityInput/resetConfirmed`` if the user accepts; for ``IdentityEffect/resetDeviceIdentity``
    /// delete the identity items and create a new device ID; ``IdentityEffect/ready(deviceId:login:)`` tells
    /// the app the identity and login state are known.
    case identity(IdentityEffect)
    /// A2: what the login / refresh flow reports: open the browser (``AuthEffect/openBrowser(path:pollingId:challenge:)``),
    /// store the login or the refreshed token (``AuthEffect/loggedIn(_:)``, ``AuthEffect/tokenUpdated(_:)``;
    /// keychain, WhenUnlockedThisDeviceOnly), show the login screen after ``AuthEffect/sessionEnded(_:)`` or
    /// ``AuthEffect/loginFailed(_:)``. Its HTTP requests come as ``httpRequest(_:origin:)`` and its timers
    /// as `armTimer`, so the driver performs nothing else for them here.
    case auth(AuthEffect)
    /// A2/A3: perform this HTTP request on `origin` (the chosen region's REST origin), then feed
    /// ``ClientInput/auth(_:)`` with ``AuthInput/httpResponse(_:status:body:)`` for its answer or
    /// ``AuthInput/httpFailed(_:reason:)`` when there is none (network error, the driver's own timeout).
    case httpRequest(AuthRequest, origin: String)
    /// A3: persist the chosen region (``RegionEffect/persistRegion(_:)``, UserDefaults), then publish the
    /// new origin to navigation state and the UI (``RegionEffect/publishRegion(_:)``), in the order given.
    /// HTTP requests bound to the previous origin may be cancelled: the machine has already counted them as
    /// failed, and a late answer completes nothing. Nothing to feed back.
    case region(RegionEffect)
    /// SPEC Part B: apply this write to the offline queue's durable store (enqueue, mark sent, answered or
    /// failed). Nothing to feed back; at launch the driver feeds what the store holds as
    /// ``ClientInput/offlineQueue(_:)``.
    case offlineQueue(OfflineQueueEffect)
    /// SPEC Part B: the queued mutation under `idempotencyKey` was answered or refused for good; tell the
    /// app (failures are reported only here).
    case offlineMutationFinished(idempotencyKey: String, CallOutcome)
    /// Device linking: for ``LinkEffect/store(_:)`` write the linked desktop to `linked_devices` (SPEC Part
    /// B), claim the pair's resume key, and feed ``ClientInput/link(_:)`` with
    /// ``LinkInput/stored(ownership:storedResume:)`` or ``LinkInput/storeFailed(_:)``;
    /// ``LinkEffect/finished(_:)`` tells the app how the link ended.
    case link(LinkEffect)
    /// Hand this PTC1 terminal output frame to the app's terminal view. Nothing to feed back.
    case deliverTerminalOutput(TerminalFrame)
    /// The connection phase changed: show it (status line, reconnect banner). Informational; the driver
    /// must not infer socket work from it (that comes as `openTransport` and `closeTransport`).
    case phaseChanged(ConnectionPhase)
    /// The client failed the connection of this generation, and why: for logs and the UI. When the socket
    /// still exists a `closeTransport` for it follows; the reconnect comes as a timer and `openTransport`.
    case connectionFailed(Generation, ConnectionFailure)
    /// A9: what the app should show for the desktop changed. Informational; nothing to feed back.
    case desktopStatusChanged(DesktopStatus)
    /// A9: a recovery epoch opened, with its deadline. Informational (the deadline is the machine's own
    /// timer); nothing to feed back.
    case epochOpened(epoch: UInt64, reason: EpochReason, deadline: Moment)
    /// Something was noticed and ignored: log it (the trace records it). The driver must not act on it.
    case diagnostic(ClientDiagnostic)
}
