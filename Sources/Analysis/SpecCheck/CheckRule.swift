import RelayProtocol

/// The SPEC numbers the wire rules measure against, each stated once, with its section of SPEC.md Part A
/// (and PROTOCOL.md where the SPEC leaves a wire fact open). The RPC methods, their keys and timeouts
/// come from `RpcCatalogue` (RelayProtocol), which holds them once for the whole project.
///
/// These are the SPEC's requirements, not the client model's settings: the checker never reads
/// `ClientConstants`, so a wrong constant in the model is caught by `check` on its own traces.
public enum SpecNumbers {
    /// A4: the value of `X-Client-Type` a phone sends.
    public static let phoneClientType = "mobile"
    /// PROTOCOL.md §1: the value of `X-Client-Type` a desktop sends (its sockets are not judged).
    public static let desktopClientType = "desktop"
    /// A3/A4: the socket's path on the region's origin.
    public static let deviceLinkPath = "/ws/device-link"
    /// A4: the WebSocket version of the upgrade.
    public static let webSocketVersion = "13"
    /// A6: the `relayProtocolVersion` of `register`.
    public static let relayProtocolVersion = "1.6"
    /// A6: from opening a socket (or sending a `register`) to `registered`/`resumed`.
    public static let handshakeTimeout: Duration = .seconds(10)
    /// A6: after registration the client sends `heartbeat` this often.
    public static let heartbeatInterval: Duration = .seconds(5)
    /// A6: the watchdog fails the connection after this long without inbound traffic.
    public static let watchdogSilence: Duration = .seconds(15)
    /// A7: after `invalidResume` the client re-registers, without a token, this much later.
    public static let reRegisterDelay: Duration = .milliseconds(200)
    /// A7: this many invalid resumes within `invalidResumeWindow` end the loop.
    public static let invalidResumeLoopCount = 3
    /// A7: the rolling window of the invalid-resume loop.
    public static let invalidResumeWindow: Duration = .seconds(30)
    /// A11: an active lease (`chat:timeline-interest`, `active: true`) is renewed this often.
    public static let leaseRenewal: Duration = .seconds(20)
    /// A11: the event type of a lease.
    public static let leaseEventType = "chat:timeline-interest"
    /// docs/DEVICE_LINK.md (this project's linking design for seed 003's link code): a phone redeems a
    /// code with this message on a *link socket*, whose upgrade names no desktop yet.
    public static let linkRedeem = "link.redeem"
    /// PROTOCOL.md §3: the message types a client sends to the relay (and the phone's `link.redeem`).
    public static let clientMessageTypes: Set<String> = [
        "register", "heartbeat", "ping", "pong", "rpc.request", "event", "event-ack", "terminal.binary.bind",
        "terminal.binary.unbind", linkRedeem,
    ]
    /// A6: what a client may send on a socket before it is registered (text-level ping answers included,
    /// and `link.redeem`, which a link socket sends unregistered).
    public static let beforeRegistration: Set<String> = ["register", "ping", "pong", linkRedeem]
    /// A4: the header naming the desktop (absent on a link socket).
    public static let targetDesktopHeader = "X-Target-Desktop-Device-ID"
    /// A4: the application headers of the upgrade request, exactly these.
    public static let upgradeHeaders = ["Authorization", "X-Device-ID", "X-Token-Binding", "X-Client-Type", targetDesktopHeader]
    /// Headers of HTTP and the WebSocket handshake itself (RFC 6455 §4.1, RFC 9110), which a WebSocket
    /// stack adds on its own: not application headers, so not judged by A4's exact set.
    public static let transportHeaders: Set<String> = [
        "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
        "sec-websocket-protocol", "user-agent", "origin", "accept", "accept-encoding", "accept-language",
        "cache-control", "pragma", "content-length",
    ]
}

/// A rule of the SPEC that can be seen on the wire: what `relaytrace check` judges. Each rule names its
/// SPEC section; `requirement` says what it measures in one line.
public enum CheckRule: String, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// SPEC A4: only `wss` URLs (a loopback `ws` URL is accepted for development), path `/ws/device-link`.
    case url = "A4.url"
    /// SPEC A4: the upgrade carries exactly `Authorization: Bearer <JWT>`, `X-Device-ID`, `X-Token-Binding`
    /// (= the device ID), `X-Client-Type: mobile` and `X-Target-Desktop-Device-ID` (not on a link socket,
    /// docs/DEVICE_LINK.md), once each, WebSocket 13.
    case upgradeHeaders = "A4.headers"
    /// SPEC A5: one live generation per phone/desktop pair: a new socket opens only after the previous
    /// one is closed, and nothing is sent on a socket after its successor opened.
    case oneLiveGeneration = "A5.oneLive"
    /// SPEC A6: `register` carries deviceId (= X-Device-ID), deviceName, relayProtocolVersion "1.6",
    /// targetDesktopDeviceId (= X-Target-Desktop-Device-ID), and `relaySessionId` with `resumeToken`
    /// together or neither.
    case register = "A6.register"
    /// SPEC A6: after the upgrade the client registers first: nothing but `register` (and text ping
    /// answers) before `registered`/`resumed`.
    case registerFirst = "A6.registerFirst"
    /// SPEC A6 / PROTOCOL.md §4: one successful registration per socket (a second `register` on a
    /// registered socket makes the relay close it).
    case registerOnce = "A6.registerOnce"
    /// SPEC A6: a socket not registered 10 s after it opened (or after its last `register`) is given up.
    case handshake = "A6.handshake"
    /// SPEC A6: after registration, `heartbeat` every 5 s.
    case heartbeat = "A6.heartbeat"
    /// SPEC A6: a socket 15 s without inbound traffic is given up (the watchdog).
    case watchdog = "A6.watchdog"
    /// SPEC A7: after `error/invalidResume`, `register` again 0.2 s later without a token.
    case reRegister = "A7.reRegister"
    /// SPEC A7: the third invalid resume within a rolling 30 s ends the loop: no more `register`.
    case invalidResumeLoop = "A7.loop"
    /// SPEC A6/A7: a resuming `register` presents the session and token the relay issued last for the
    /// pair, never a token the relay refused.
    case resumeCredentials = "A7.resume"
    /// SPEC A8: no unknown method (the 65 of `RpcMethod`).
    case knownMethod = "A8.method"
    /// SPEC A8: the 22 mutations carry an `idempotencyKey`.
    case idempotencyKey = "A8.idempotencyKey"
    /// SPEC A8: every `rpc.request` carries a valid W3C `traceparent`.
    case traceparent = "A8.traceparent"
    /// SPEC A8: a response's trace ID matches its request's (the relay's side: the client must reject
    /// one that does not; a finding here is the peer's, and does not fail the check).
    case responseTraceId = "A8.responseTrace"
    /// SPEC A8: no key with `_` anywhere in what the client sends.
    case camelCase = "A8.camelCase"
    /// SPEC A8: no second in-flight request with the same ID on a socket.
    case requestId = "A8.requestId"
    /// SPEC A8: a request unanswered for its method's timeout fails and its socket is replaced.
    case timeout = "A8.timeout"
    /// SPEC A11: a lease is `chat:timeline-interest` with `appSessionId` and an `active` flag.
    case leaseMessage = "A11.leaseMessage"
    /// SPEC A11: an active lease is renewed every 20 s.
    case leaseRenewal = "A11.renewal"
    /// SPEC A11: an active lease is re-issued after every registration.
    case leaseReissue = "A11.reissue"
    /// PROTOCOL.md §2/§3/§6: the client sends JSON objects of the client-to-relay types in text frames,
    /// and no binary frames (those carry the desktop's terminal output only).
    case clientMessage = "P3.message"

    /// The section of SPEC.md (`A6`) or PROTOCOL.md (`P3`).
    public var section: String { String(rawValue.prefix { $0 != "." }) }

    /// Whether a finding of this rule is the relay's (or desktop's) doing rather than the client's.
    public var blamesPeer: Bool { self == .responseTraceId }

    /// What the rule requires, in one line.
    public var requirement: String {
        switch self {
        case .url: "only wss URLs (ws on loopback accepted), path \(SpecNumbers.deviceLinkPath)"
        case .upgradeHeaders: "exactly Authorization: Bearer, X-Device-ID, X-Token-Binding = device ID, X-Client-Type: mobile, X-Target-Desktop-Device-ID"
        case .oneLiveGeneration: "one live socket per phone/desktop pair"
        case .register: "register with deviceId, deviceName, relayProtocolVersion \(SpecNumbers.relayProtocolVersion), targetDesktopDeviceId"
        case .registerFirst: "nothing but register before registered/resumed"
        case .registerOnce: "one successful register per socket"
        case .handshake: "registered within \(seconds(SpecNumbers.handshakeTimeout)) or the socket given up"
        case .heartbeat: "heartbeat every \(seconds(SpecNumbers.heartbeatInterval)) after registration"
        case .watchdog: "a socket silent for \(seconds(SpecNumbers.watchdogSilence)) is given up"
        case .reRegister: "after invalidResume, register again \(seconds(SpecNumbers.reRegisterDelay)) later without a token"
        case .invalidResumeLoop: "the \(SpecNumbers.invalidResumeLoopCount)rd invalid resume within \(seconds(SpecNumbers.invalidResumeWindow)) ends the loop"
        case .resumeCredentials: "resume with the last session and token issued, never a refused token"
        case .knownMethod: "only the \(RpcCatalogue.methodCount) methods of RpcMethod"
        case .idempotencyKey: "the \(RpcCatalogue.idempotencyKeyedCount) mutations carry an idempotencyKey"
        case .traceparent: "every rpc.request carries a W3C traceparent"
        case .responseTraceId: "a response carries its request's trace ID"
        case .camelCase: "no snake_case key at any depth"
        case .requestId: "no second in-flight request with the same id"
        case .timeout: "an unanswered call's socket is replaced at the method's timeout"
        case .leaseMessage: "chat:timeline-interest with appSessionId and active"
        case .leaseRenewal: "an active lease is renewed every \(seconds(SpecNumbers.leaseRenewal))"
        case .leaseReissue: "an active lease is re-issued after every registration"
        case .clientMessage: "JSON objects of the client-to-relay types in text frames, no binary frames"
        }
    }

    /// The rule's ID, e.g. `A6.heartbeat`.
    public var description: String { rawValue }

    /// Rules in catalogue order.
    public static func < (a: CheckRule, b: CheckRule) -> Bool { a.order < b.order }

    private var order: Int { CheckRule.allCases.firstIndex(of: self) ?? 0 }

    /// The rules a `--skip` list names: rule IDs (`A6.heartbeat`) or whole sections (`A11`), any case.
    /// Nil when a name matches nothing (the caller reports it).
    public static func matching(_ names: [String]) -> Set<CheckRule>? {
        var out = Set<CheckRule>()
        for name in names {
            let hits = allCases.filter { $0.rawValue.lowercased() == name.lowercased() || $0.section.lowercased() == name.lowercased() }
            if hits.isEmpty { return nil }
            out.formUnion(hits)
        }
        return out
    }
}

/// A duration in seconds for requirement texts: `5 s`, `0.2 s` (trailing zeros dropped).
func seconds(_ d: Duration) -> String {
    let ns = d.nanoseconds
    if ns % 1_000_000_000 == 0 { return "\(ns / 1_000_000_000) s" }
    var s = String(Double(ns) / 1e9)
    while s.hasSuffix("0") { s.removeLast() }
    return s + " s"
}
