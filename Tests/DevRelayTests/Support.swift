import DevRelay
import RelayProtocol
import Testing

let userA = "user-alice"
let phoneId = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"
let desktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"

/// Drives a `DevRelay` on virtual time: feeds inputs, keeps the armed timers, fires them when time advances.
struct RelayHarness {
    var relay: DevRelay
    var now = Moment.zero
    var lastId: UInt64 = 0
    var timers: [RelayTimer: Moment] = [:]
    var log: [RelayAction] = []

    /// A relay that simulates no desktop (the routing tests bring their own), or one configured by
    /// `configure`.
    init(seed: UInt64 = 7, configure: (inout DevRelayConfiguration) -> Void = { $0.simulatedDesktops = .none }) {
        var configuration = DevRelayConfiguration(seed: seed)
        configure(&configuration)
        relay = DevRelay(configuration: configuration)
    }

    @discardableResult
    mutating func feed(_ input: RelayInput) -> [RelayAction] {
        let actions = relay.handle(input, at: now)
        track(actions)
        return actions
    }

    mutating func track(_ actions: [RelayAction]) {
        for a in actions {
            switch a {
            case .armTimer(let t, let d): timers[t] = d
            case .cancelTimer(let t): timers[t] = nil
            default: break
            }
        }
        log += actions
    }

    /// Advances to `target`, firing due timers in deadline order; returns every action.
    @discardableResult
    mutating func advance(to target: Moment) -> [RelayAction] {
        var all: [RelayAction] = []
        while let next = timers.filter({ $0.value <= target }).min(by: { ($0.value, $0.key.description) < ($1.value, $1.key.description) }) {
            timers[next.key] = nil
            now = max(now, next.value)
            all += feed(.timerFired(next.key))
        }
        now = max(now, target)
        return all
    }

    @discardableResult
    mutating func advance(by d: Duration) -> [RelayAction] { advance(to: now + d) }

    static func jwt(sub: String = userA, extra: [String: JSONValue] = [:]) -> String {
        var claims = extra
        claims["sub"] = .string(sub)
        return UpgradeCheck.developmentJWT(claims: claims)
    }

    static func request(kind: ClientKind, device: String, user: String = userA, target: String? = nil) -> UpgradeRequest {
        var h = [UpgradeHeader("Authorization", "Bearer \(jwt(sub: user))"), UpgradeHeader("X-Device-ID", device),
                 UpgradeHeader("X-Token-Binding", device), UpgradeHeader("X-Client-Type", kind.rawValue)]
        if let target { h.append(UpgradeHeader("X-Target-Desktop-Device-ID", target)) }
        return UpgradeRequest(headers: h)
    }

    /// Upgrades a new connection; returns its ID.
    mutating func open(_ kind: ClientKind, device: String, user: String = userA, target: String? = nil) -> ConnectionID {
        lastId += 1
        let c = ConnectionID(lastId)
        let actions = feed(.upgrade(c, Self.request(kind: kind, device: device, user: user, target: target)))
        #expect(actions.contains(.acceptUpgrade(c)))
        return c
    }

    @discardableResult
    mutating func send(_ c: ConnectionID, _ message: RelayMessage, form: ProtocolForm = .v1_6) -> [RelayAction] {
        feed(.frame(c, .text((try? message.encodedText(form: form)) ?? "")))
    }

    @discardableResult
    mutating func sendText(_ c: ConnectionID, _ text: String) -> [RelayAction] {
        feed(.frame(c, .text(text)))
    }

    /// Opens and registers a phone (1.6, targeting the test desktop); returns its ID and `registered`.
    mutating func phone(device: String = phoneId, user: String = userA, lastEventId: Int64? = nil,
                        target: String? = desktopId) throws -> (ConnectionID, Registered) {
        let c = open(.mobile, device: device, user: user, target: target)
        let actions = send(c, .register(RegisterPayload(deviceId: device, deviceName: "Phone", lastEventId: lastEventId,
                                                         relayProtocolVersion: "1.6", targetDesktopDeviceId: target)))
        let reg = actions.messages(to: c).compactMap { if case .registered(let r) = $0 { r } else { nil } }.first
        return (c, try #require(reg))
    }

    /// Opens and registers a desktop.
    mutating func desktop(device: String = desktopId, user: String = userA) -> ConnectionID {
        let c = open(.desktop, device: device, user: user)
        let actions = send(c, .register(RegisterPayload(deviceId: device, deviceName: "Desk", relayProtocolVersion: "1.6")))
        #expect(actions.messages(to: c).contains { if case .registered = $0 { true } else { false } })
        return c
    }
}

extension [RelayAction] {
    /// The frames sent to `c`.
    func frames(to c: ConnectionID) -> [WireFrame] {
        compactMap { if case .send(let d, let f) = $0, d == c { f } else { nil } }
    }

    /// The text frames sent to `c`, decoded.
    func messages(to c: ConnectionID) -> [RelayMessage] {
        frames(to: c).compactMap { if case .text(let t) = $0 { try? RelayMessage(decodingText: t) } else { nil } }
    }

    /// The text frames sent to `c` as JSON.
    func json(to c: ConnectionID) -> [JSONValue] {
        frames(to: c).compactMap { if case .text(let t) = $0 { try? JSONValue(parsing: t) } else { nil } }
    }

    /// The error codes sent to `c`.
    func errors(to c: ConnectionID) -> [RelayErrorCode] {
        messages(to: c).compactMap { if case .error(let e) = $0 { e.code } else { nil } }
    }

    /// The events sent to `c`.
    func events(to c: ConnectionID) -> [EventMessage] {
        messages(to: c).compactMap { if case .event(let e) = $0 { e } else { nil } }
    }

    /// Whether `c` was closed, and how.
    func closes(of c: ConnectionID) -> [(code: UInt16?, reason: String)] {
        compactMap { if case .close(let d, let code, let reason) = $0, d == c { (code, reason) } else { nil } }
    }
}

func isAlphanumeric(_ s: String) -> Bool {
    s.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
}
