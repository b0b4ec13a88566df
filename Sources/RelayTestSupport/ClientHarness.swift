public import RelayClient
public import RelayProtocol

/// A test harness for ``RelayClientMachine`` on virtual time, in the spirit of swift-nio's
/// `EmbeddedChannel` and TCA's `TestStore`: feed inputs, advance the clock (armed timers fire at their
/// deadlines, ties in arming order), take the actions, and ``finish(allowingArmedTimers:)`` fails on
/// anything left unread or armed. Nothing sleeps; nothing reads the wall clock.
///
/// Timer actions (`armTimer`, `cancelTimer`) drive the harness's scheduler and are kept out of
/// ``takeActions()`` unless `exhaustiveTimers` is set; ``armedTimers`` shows the schedule.
public struct ClientHarness: Sendable {
    /// The machine under test.
    public private(set) var machine: RelayClientMachine
    /// The virtual time.
    public private(set) var now: Moment
    /// Whether `armTimer`/`cancelTimer` actions are delivered by ``takeActions()`` too.
    public let exhaustiveTimers: Bool
    /// Every input and action so far, in order, with its time (for failure messages).
    public private(set) var log: [Entry] = []

    private var timers: [TimerID: (deadline: Moment, sequence: UInt64)] = [:]
    private var sequence: UInt64 = 0
    private var unread: [(time: Moment, action: ClientAction)] = []

    /// One line of the harness log.
    public enum Entry: Sendable, CustomStringConvertible {
        /// An input fed at a time.
        case input(Moment, ClientInput)
        /// An action emitted at a time.
        case action(Moment, ClientAction)
        /// `   12.000s -> input` / `   12.000s <- action`.
        public var description: String {
            switch self {
            case .input(let t, let i): "\(t) -> \(i)"
            case .action(let t, let a): "\(t)    <- \(a)"
            }
        }
    }

    /// A harness around a fresh machine with `configuration`, its clock at `start`.
    ///
    /// Unless `identity` is nil, the harness first lets the machine read its device identity (SPEC A1:
    /// nothing network-facing starts without it) with that outcome, and discards the identity actions,
    /// so tests of the later rules start from "identity known". Pass nil to test A1 itself.
    public init(configuration: ClientConfiguration, start: Moment = .zero, exhaustiveTimers: Bool = false,
                identity: IdentityReadOutcome? = .available(deviceId: TestIdentity.deviceId, login: nil)) {
        machine = RelayClientMachine(configuration: configuration)
        now = start
        self.exhaustiveTimers = exhaustiveTimers
        if let identity {
            feed(.identity(.start))
            feed(.identity(.identityRead(identity)))
            unread.removeAll()
        }
    }

    /// A harness with the standard test identity (``TestIdentity``) and `seed`.
    public init(seed: UInt64 = 1, exhaustiveTimers: Bool = false,
                identity: IdentityReadOutcome? = .available(deviceId: TestIdentity.deviceId, login: nil)) {
        self.init(configuration: TestIdentity.configuration(seed: seed), exhaustiveTimers: exhaustiveTimers,
                  identity: identity)
    }

    // MARK: Driving

    /// Feeds `input` at the current virtual time.
    public mutating func feed(_ input: ClientInput) {
        log.append(.input(now, input))
        let actions = machine.handle(input, at: now)
        absorb(actions)
    }

    /// Advances the clock by `duration`, firing every timer due on the way, in deadline order.
    public mutating func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    /// Advances the clock to `target`, firing every timer due by then (including ones armed on the way).
    public mutating func advance(to target: Moment) {
        while let next = nextDueTimer(by: target) {
            timers[next.id] = nil
            now = max(now, next.deadline)
            feed(.timerFired(next.id))
        }
        now = max(now, target)
    }

    /// Advances to the next armed timer's deadline and fires it (and any tied with it); returns its ID.
    @discardableResult
    public mutating func advanceToNextTimer() -> TimerID? {
        guard let next = timers.min(by: { ($0.value.deadline, $0.value.sequence) < ($1.value.deadline, $1.value.sequence) }) else {
            return nil
        }
        advance(to: next.value.deadline)
        return next.key
    }

    /// The armed timers in firing order (deadline, then arming order).
    public var armedTimers: [(id: TimerID, deadline: Moment)] {
        timers.sorted { ($0.value.deadline, $0.value.sequence) < ($1.value.deadline, $1.value.sequence) }
            .map { ($0.key, $0.value.deadline) }
    }

    /// The deadline of `id`, if armed.
    public func deadline(of id: TimerID) -> Moment? { timers[id]?.deadline }

    // MARK: Reading

    /// Takes every unread action, in order.
    public mutating func takeActions() -> [ClientAction] {
        defer { unread.removeAll() }
        return unread.map(\.action)
    }

    /// Takes every unread action with the virtual time it was emitted at.
    public mutating func takeTimedActions() -> [(time: Moment, action: ClientAction)] {
        defer { unread.removeAll() }
        return unread
    }

    /// Whether actions are waiting to be read.
    public var hasUnreadActions: Bool { !unread.isEmpty }

    /// Ends the test: throws when actions are unread or timers are armed, saying what was left and how to
    /// fix the test.
    public func finish(allowingArmedTimers: Bool = false) throws(HarnessLeftovers) {
        let leftTimers = allowingArmedTimers ? [] : armedTimers
        guard unread.isEmpty, leftTimers.isEmpty else {
            throw HarnessLeftovers(unreadActions: unread, armedTimers: leftTimers, now: now)
        }
    }

    // MARK: Internals

    private func nextDueTimer(by target: Moment) -> (id: TimerID, deadline: Moment)? {
        var best: (id: TimerID, deadline: Moment, sequence: UInt64)?
        for (id, t) in timers where t.deadline <= target {
            if let b = best, (b.deadline, b.sequence) <= (t.deadline, t.sequence) { continue }
            best = (id, t.deadline, t.sequence)
        }
        return best.map { ($0.id, $0.deadline) }
    }

    private mutating func absorb(_ actions: [ClientAction]) {
        for action in actions {
            log.append(.action(now, action))
            switch action {
            case .armTimer(let id, let deadline):
                sequence += 1
                timers[id] = (deadline, sequence)
                if exhaustiveTimers { unread.append((now, action)) }
            case .cancelTimer(let id):
                timers[id] = nil
                if exhaustiveTimers { unread.append((now, action)) }
            default:
                unread.append((now, action))
            }
        }
    }
}

/// What a test left behind: unread actions and armed timers.
public struct HarnessLeftovers: Error, Sendable, CustomStringConvertible {
    /// Actions nobody took.
    public var unreadActions: [(time: Moment, action: ClientAction)]
    /// Timers still armed.
    public var armedTimers: [(id: TimerID, deadline: Moment)]
    /// The virtual time at `finish`.
    public var now: Moment

    /// A message listing the leftovers and how to fix the test.
    public var description: String {
        var lines = ["The test finished at \(now) with work left over."]
        if !unreadActions.isEmpty {
            lines.append("\(unreadActions.count) unread action(s):")
            lines += unreadActions.map { "  \($0.time)  \($0.action)" }
        }
        if !armedTimers.isEmpty {
            lines.append("\(armedTimers.count) armed timer(s):")
            lines += armedTimers.map { "  \($0.id) due at \($0.deadline)" }
        }
        lines.append("To fix: take the actions with `takeActions()` and assert on them; stop the client with "
            + "`feed(.stop)` (which cancels every timer) or advance past the timers; or, if the timers are "
            + "irrelevant to this test, call `finish(allowingArmedTimers: true)`.")
        return lines.joined(separator: "\n")
    }
}
