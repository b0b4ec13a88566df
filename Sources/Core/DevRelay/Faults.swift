public import RelayProtocol

/// Which way a frame travels, seen from the relay.
public enum FrameDirection: String, Sendable, Hashable {
    /// Relay -> client (what the relay sends).
    case toClient = "to-client"
    /// Client -> relay (what the relay receives).
    case fromClient = "from-client"
}

/// Which frames a fault applies to: direction, peer kind, and optionally the message type, the RPC
/// method (of an `rpc.request`) and the event type (of an `event`).
public struct FrameMatch: Sendable, Hashable, CustomStringConvertible {
    /// The direction.
    public var direction: FrameDirection
    /// The kind of peer (nil: both). Scripts default to `mobile`, the client under test.
    public var peer: ClientKind?
    /// The message `type` (`rpc.request`, `pong`, ...), or `binary` for PTC1 frames; nil: any.
    public var messageType: String?
    /// The `method` of an `rpc.request`; nil: any.
    public var method: String?
    /// The `eventType` of an `event`; nil: any.
    public var eventType: String?

    /// Creates a match.
    public init(direction: FrameDirection, peer: ClientKind? = .mobile, messageType: String? = nil,
                method: String? = nil, eventType: String? = nil) {
        self.direction = direction
        self.peer = peer
        self.messageType = messageType
        self.method = method
        self.eventType = eventType
    }

    /// Whether a frame with these properties matches.
    public func matches(direction d: FrameDirection, peer k: ClientKind, messageType t: String,
                        method m: String?, eventType e: String?) -> Bool {
        if d != direction { return false }
        if let peer, peer != k { return false }
        if let messageType, messageType != t { return false }
        if let method, method != m { return false }
        if let eventType, eventType != e { return false }
        return true
    }

    /// `to-client type=pong peer=mobile` (the script form of its arguments).
    public var description: String {
        var s = direction.rawValue
        if let messageType { s += " type=\(messageType)" }
        if let method { s += " method=\(method)" }
        if let eventType { s += " event=\(eventType)" }
        s += " peer=\(peer?.rawValue ?? "any")"
        return s
    }
}

/// A fault-script directive aimed at the relay (applied with ``RelayInput/fault(_:)``).
///
/// Rule-like effects (drop, delay, invalid resume, ownership failure, refused upgrades, and the
/// triggered forms of close and restart) are installed and apply to the next matching events until
/// `count` is used up or `until` passes; `close-client` and `restart` without a trigger happen at once.
public struct RelayFault: Sendable, Hashable {
    /// What the relay does.
    public enum Effect: Sendable, Hashable {
        /// Drop matching frames silently.
        case drop(FrameMatch)
        /// Hold matching frames back for this long, then deliver (to-client) or process (from-client) them.
        case delay(FrameMatch, by: Duration)
        /// Answer the next registers with `error/invalidResume` (the socket stays open).
        case invalidResume
        /// Send `error/deviceOwnershipFailed` right after the next `registered`.
        case deviceOwnershipFailed
        /// Close client sockets with this code (nil: an empty close frame): with a trigger, the socket
        /// that sent the matching frame; without, every registered socket of kind `peer` (nil: all).
        case closeClient(code: UInt16?, reason: String, peer: ClientKind?)
        /// Lose every relay session, replay buffer and binding, and close every socket (1012).
        case restart
        /// Refuse upgrades with this HTTP status (401, 429, 500).
        case refuseUpgrades(status: Int)
    }

    /// The effect.
    public var effect: Effect
    /// For `closeClient`, `restart`: fire when a frame from a client matches this (instead of at once).
    public var trigger: FrameMatch?
    /// How many times the fault applies; nil: unlimited for drop, delay and refused upgrades, once
    /// for the others.
    public var count: Int?
    /// The end of the fault's window: it no longer applies at or after this moment.
    public var until: Moment?

    /// Creates a relay fault.
    public init(_ effect: Effect, trigger: FrameMatch? = nil, count: Int? = nil, until: Moment? = nil) {
        self.effect = effect
        self.trigger = trigger
        self.count = count
        self.until = until
    }
}

/// A fault-script directive aimed at the simulated desktop (applied with ``DesktopInput/fault(_:)``).
public struct DesktopFault: Sendable, Hashable {
    /// What the desktop does.
    public enum Effect: Sendable, Hashable {
        /// Stop answering this method (`ignore-pings` is `system.ping`).
        case ignore(method: String)
        /// Close the socket (nil code: 1000) and stay offline until `reconnect` or `until`.
        case disconnect(code: UInt16?)
        /// Connect again after a `disconnect`.
        case reconnect
    }

    /// The effect.
    public var effect: Effect
    /// For `ignore`: how many requests to ignore (nil: all).
    public var count: Int?
    /// The end of the window: `ignore` stops, a `disconnect` reconnects, at this moment.
    public var until: Moment?

    /// Creates a desktop fault.
    public init(_ effect: Effect, count: Int? = nil, until: Moment? = nil) {
        self.effect = effect
        self.count = count
        self.until = until
    }
}

/// A fault-script directive the simulation runner applies to the client's driver inputs.
public enum ClientFault: Sendable, Hashable {
    /// The network path the client's monitor reports.
    public enum Path: String, Sendable, Hashable {
        /// Wi-Fi.
        case wifi
        /// Cellular.
        case cellular
        /// No usable path.
        case none
    }

    /// The app lifecycle change the runner feeds (`foreground` is `active` after `background`).
    public enum App: String, Sendable, Hashable {
        /// The app went to the background.
        case background
        /// The app became inactive (foreground, not receiving events).
        case inactive
        /// The app became active.
        case active
        /// The app came back to the foreground (the runner feeds `active`).
        case foreground
    }

    /// `path wifi|cellular|none`.
    case path(Path)
    /// `app background|inactive|active|foreground`.
    case app(App)
    /// `media on|off`: desktop-backed media playing.
    case media(Bool)
    /// `push desktop-online`: the silent `desktop_online` push.
    case pushDesktopOnline
}

/// Which machine a directive is for.
public enum FaultTarget: String, Sendable, Hashable, CaseIterable {
    /// The development relay.
    case relay
    /// The simulated desktop.
    case desktop
    /// The client (interpreted by the simulation runner).
    case client
}

/// One fault, tagged with its target.
public enum Fault: Sendable, Hashable {
    /// For the relay.
    case relay(RelayFault)
    /// For the desktop.
    case desktop(DesktopFault)
    /// For the client's driver.
    case client(ClientFault)

    /// The target machine.
    public var target: FaultTarget {
        switch self {
        case .relay: .relay
        case .desktop: .desktop
        case .client: .client
        }
    }
}

/// When a directive takes effect.
public enum FaultTiming: Sendable, Hashable {
    /// `at T`.
    case at(Moment)
    /// `from T1 to T2`: in effect from `from` until (not including) `to`.
    case window(from: Moment, to: Moment)
    /// `on TYPE [method=M] [event=E]`: installed at the start, fires on a matching client frame.
    case on(FrameMatch)
}

/// One line of a fault script.
public struct FaultDirective: Sendable, Hashable {
    /// The 1-based line number in the script.
    public var line: Int
    /// When.
    public var timing: FaultTiming
    /// What, for whom (windows and triggers already folded in: `until`, `trigger`).
    public var fault: Fault

    /// Creates a directive.
    public init(line: Int, timing: FaultTiming, fault: Fault) {
        self.line = line
        self.timing = timing
        self.fault = fault
    }

    /// The moment the runner hands the fault to its target: `at`, the window's start, or zero for `on`.
    public var dueAt: Moment {
        switch timing {
        case .at(let t): t
        case .window(let from, _): from
        case .on: .zero
        }
    }
}

/// A fault to deliver at a moment.
public struct ScheduledFault: Sendable, Hashable {
    /// When to deliver it.
    public var at: Moment
    /// The script line it came from.
    public var line: Int
    /// The fault.
    public var fault: Fault
}

/// A parsed fault script (docs/FAULTS.md): directives in script order.
public struct FaultScript: Sendable, Hashable {
    /// The directives in script order.
    public var directives: [FaultDirective]

    /// Creates a script from directives.
    public init(directives: [FaultDirective]) { self.directives = directives }

    /// Every fault with the moment it is due, sorted by time, then by line.
    public var schedule: [ScheduledFault] {
        directives.map { ScheduledFault(at: $0.dueAt, line: $0.line, fault: $0.fault) }
            .sorted { ($0.at, $0.line) < ($1.at, $1.line) }
    }

    /// The faults due in `(after, through]` (with `after` nil: `[.zero ... through]`), in schedule
    /// order: what the runner delivers when it advances virtual time from `after` to `through`.
    public func due(after: Moment?, through: Moment) -> [ScheduledFault] {
        schedule.filter { s in
            s.at <= through && (after.map { s.at > $0 } ?? true)
        }
    }

    /// The faults for one target, in schedule order.
    public func schedule(for target: FaultTarget) -> [ScheduledFault] {
        schedule.filter { $0.fault.target == target }
    }
}
