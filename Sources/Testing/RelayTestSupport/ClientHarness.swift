public import RelayClient
public import RelayProtocol
public import Testing

/// A strict test harness for ``RelayClientMachine`` on virtual time, in the spirit of swift-nio's
/// `EmbeddedChannel` and TCA's `TestStore`: feed inputs, advance the clock (armed timers fire at their
/// deadlines, ties in arming order), take the actions and assert on them. Nothing sleeps; nothing reads the
/// wall clock.
///
/// The harness is exhaustive. Every action the machine emits must be read before the test feeds the next
/// input or advances the clock: with ``takeActions()`` (and an assertion on the result), or
/// by skipping it by name with ``skip(_:sourceLocation:)``. ``feed(_:sourceLocation:)``,
/// ``advance(by:sourceLocation:)``, ``advance(to:sourceLocation:)`` and
/// ``advanceToNextTimer(sourceLocation:)`` refuse while actions are unread: they record an issue at the
/// test's line that lists each unread action with the input (and the test line) that caused it, drop those
/// actions so that one mistake fails once, and go on. ``finish(allowingArmedTimers:sourceLocation:)`` does
/// the same for what is left at the end, and for armed timers.
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
    private var unread: [UnreadAction] = []

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

    /// The input that made the machine emit an action, and where the test fed it.
    public struct Cause: Sendable, CustomStringConvertible {
        /// The input the machine handled.
        public var input: ClientInput
        /// The harness call that fed it (`feed`, `advance(by:)`, ...).
        public var call: String
        /// The test line of that call.
        public var sourceLocation: SourceLocation

        /// `timerFired(heartbeat(g1)) fed by advance(by:) at A6RegistrationTests.swift:12`.
        public var description: String {
            "\(input) fed by \(call) at \(sourceLocation.fileName):\(sourceLocation.line)"
        }
    }

    /// An action nobody has read yet, with when and why it was emitted.
    public struct UnreadAction: Sendable, CustomStringConvertible {
        /// The virtual time it was emitted at.
        public var time: Moment
        /// The action.
        public var action: ClientAction
        /// The input that caused it.
        public var cause: Cause

        /// `  5.000s  send(...)  (caused by timerFired(...) fed by advance(by:) at File.swift:12)`.
        public var description: String { "\(time)  \(action)  (caused by \(cause))" }
    }

    /// A harness around a fresh machine with `configuration`, its clock at `start`.
    ///
    /// Unless `identity` is nil, the harness first lets the machine read its device identity (SPEC A1:
    /// nothing network-facing starts without it) with that outcome, and discards what that emits, so
    /// tests of the later rules start from "identity known". Pass nil to test A1 itself.
    public init(configuration: ClientConfiguration, start: Moment = .zero, exhaustiveTimers: Bool = false,
                identity: IdentityReadOutcome? = .available(deviceId: TestIdentity.deviceId, login: nil),
                sourceLocation: SourceLocation = #_sourceLocation) {
        machine = RelayClientMachine(configuration: configuration)
        now = start
        self.exhaustiveTimers = exhaustiveTimers
        if let identity {
            feed(.identity(.start), sourceLocation: sourceLocation)
            skip(.identity, sourceLocation: sourceLocation)
            feed(.identity(.identityRead(identity)), sourceLocation: sourceLocation)
            unread.removeAll()
        }
    }

    /// A harness with the standard test identity (``TestIdentity``) and `seed`.
    public init(seed: UInt64 = 1, exhaustiveTimers: Bool = false,
                identity: IdentityReadOutcome? = .available(deviceId: TestIdentity.deviceId, login: nil),
                sourceLocation: SourceLocation = #_sourceLocation) {
        self.init(configuration: TestIdentity.configuration(seed: seed), exhaustiveTimers: exhaustiveTimers,
                  identity: identity, sourceLocation: sourceLocation)
    }

    // MARK: Driving

    /// Feeds `input` at the current virtual time. Refuses (records an issue at the caller's line) while
    /// actions are unread.
    public mutating func feed(_ input: ClientInput, sourceLocation: SourceLocation = #_sourceLocation) {
        refuseWhileUnread("feed(\(input))", sourceLocation)
        handle(input, Cause(input: input, call: "feed", sourceLocation: sourceLocation))
    }

    /// Advances the clock by `duration`, firing every timer due on the way, in deadline order. Refuses
    /// (records an issue at the caller's line) while actions are unread.
    public mutating func advance(by duration: Duration, sourceLocation: SourceLocation = #_sourceLocation) {
        refuseWhileUnread("advance(by: \(duration))", sourceLocation)
        run(to: now + duration, call: "advance(by: \(duration))", sourceLocation)
    }

    /// Advances the clock to `target`, firing every timer due by then (including ones armed on the way).
    /// Refuses (records an issue at the caller's line) while actions are unread.
    public mutating func advance(to target: Moment, sourceLocation: SourceLocation = #_sourceLocation) {
        refuseWhileUnread("advance(to: \(target))", sourceLocation)
        run(to: target, call: "advance(to: \(target))", sourceLocation)
    }

    /// Advances to the next armed timer's deadline and fires it (and any tied with it); returns its ID.
    /// Refuses (records an issue at the caller's line) while actions are unread.
    @discardableResult
    public mutating func advanceToNextTimer(sourceLocation: SourceLocation = #_sourceLocation) -> TimerID? {
        refuseWhileUnread("advanceToNextTimer()", sourceLocation)
        guard let next = armedTimers.first else { return nil }
        run(to: next.deadline, call: "advanceToNextTimer()", sourceLocation)
        return next.id
    }

    /// The armed timers in firing order (deadline, then arming order).
    public var armedTimers: [(id: TimerID, deadline: Moment)] {
        timers.sorted { ($0.value.deadline, $0.value.sequence) < ($1.value.deadline, $1.value.sequence) }
            .map { ($0.key, $0.value.deadline) }
    }

    /// The deadline of `id`, if armed.
    public func deadline(of id: TimerID) -> Moment? { timers[id]?.deadline }

    // MARK: Reading

    /// Takes every unread action, in order. Assert on the result; to pass over actions that do not matter
    /// to the test, name them with ``skip(_:sourceLocation:)`` instead.
    public mutating func takeActions() -> [ClientAction] {
        defer { unread.removeAll() }
        return unread.map(\.action)
    }

    /// Takes the unread actions that satisfy `isTaken`, in order; the others stay unread.
    public mutating func takeActions(where isTaken: (ClientAction) -> Bool) -> [ClientAction] {
        var taken: [ClientAction] = []
        var kept: [UnreadAction] = []
        for entry in unread {
            if isTaken(entry.action) { taken.append(entry.action) } else { kept.append(entry) }
        }
        unread = kept
        return taken
    }

    /// Takes every unread action with the virtual time it was emitted at.
    public mutating func takeTimedActions() -> [(time: Moment, action: ClientAction)] {
        defer { unread.removeAll() }
        return unread.map { ($0.time, $0.action) }
    }

    /// Marks every unread action of the named kinds as read, because the test does not care about them.
    ///
    /// The skip is explicit and strict: each kind named must match at least one unread action, or an issue
    /// is recorded at the caller's line (a skip of something that did not happen hides nothing and is a
    /// stale test). Actions of other kinds stay unread, so the next `feed` or `advance` still refuses.
    public mutating func skip(_ kinds: ClientActionKind..., sourceLocation: SourceLocation = #_sourceLocation) {
        let named = Set(kinds)
        for kind in kinds where !unread.contains(where: { $0.action.kind == kind }) {
            Issue.record("skip(.\(kind)) skipped nothing: no unread \(kind) action.\(unreadListing)",
                         sourceLocation: sourceLocation)
        }
        unread.removeAll { named.contains($0.action.kind) }
    }

    /// Whether actions are waiting to be read.
    public var hasUnreadActions: Bool { !unread.isEmpty }

    /// The unread actions, with their causes (read-only: use ``takeActions()`` or
    /// ``skip(_:sourceLocation:)`` to read them).
    public var unreadActions: [UnreadAction] { unread }

    /// What is left over: the unread actions and, unless `allowingArmedTimers`, the armed timers; nil when
    /// nothing is.
    public func leftovers(allowingArmedTimers: Bool = false) -> HarnessLeftovers? {
        let leftTimers = allowingArmedTimers ? [] : armedTimers
        guard unread.isEmpty, leftTimers.isEmpty else {
            return HarnessLeftovers(unreadActions: unread, armedTimers: leftTimers, now: now)
        }
        return nil
    }

    /// Ends the test: records an issue at the caller's line when actions are unread or timers are armed,
    /// saying what was left, which input caused each unread action, and how to fix the test.
    public func finish(allowingArmedTimers: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
        if let leftovers = leftovers(allowingArmedTimers: allowingArmedTimers) {
            Issue.record("\(leftovers)", sourceLocation: sourceLocation)
        }
    }

    // MARK: Internals

    private var unreadListing: String {
        unread.isEmpty ? " Nothing is unread." : "\nUnread:\n" + unread.map { "  \($0)" }.joined(separator: "\n")
    }

    private mutating func refuseWhileUnread(_ call: String, _ sourceLocation: SourceLocation) {
        guard !unread.isEmpty else { return }
        let kinds = Set(unread.map(\.action.kind)).map { ".\($0)" }.sorted().joined(separator: ", ")
        Issue.record("""
            \(call) refused: \(unread.count) action(s) are unread.\(unreadListing)
            To fix: take them with `takeActions()` and assert on what matters, or skip them by name with \
            `skip(\(kinds))`.
            """, sourceLocation: sourceLocation)
        unread.removeAll()
    }

    private mutating func run(to target: Moment, call: String, _ sourceLocation: SourceLocation) {
        while let next = nextDueTimer(by: target) {
            timers[next.id] = nil
            now = max(now, next.deadline)
            let input = ClientInput.timerFired(next.id)
            handle(input, Cause(input: input, call: call, sourceLocation: sourceLocation))
        }
        now = max(now, target)
    }

    private mutating func handle(_ input: ClientInput, _ cause: Cause) {
        log.append(.input(now, input))
        absorb(machine.handle(input, at: now), cause)
    }

    private func nextDueTimer(by target: Moment) -> (id: TimerID, deadline: Moment)? {
        var best: (id: TimerID, deadline: Moment, sequence: UInt64)?
        for (id, t) in timers where t.deadline <= target {
            if let b = best, (b.deadline, b.sequence) <= (t.deadline, t.sequence) { continue }
            best = (id, t.deadline, t.sequence)
        }
        return best.map { ($0.id, $0.deadline) }
    }

    private mutating func absorb(_ actions: [ClientAction], _ cause: Cause) {
        for action in actions {
            log.append(.action(now, action))
            switch action {
            case .armTimer(let id, let deadline):
                sequence += 1
                timers[id] = (deadline, sequence)
                if exhaustiveTimers { unread.append(UnreadAction(time: now, action: action, cause: cause)) }
            case .cancelTimer(let id):
                timers[id] = nil
                if exhaustiveTimers { unread.append(UnreadAction(time: now, action: action, cause: cause)) }
            default:
                unread.append(UnreadAction(time: now, action: action, cause: cause))
            }
        }
    }
}

/// What a test left behind: unread actions (with their causes) and armed timers.
public struct HarnessLeftovers: Sendable, CustomStringConvertible {
    /// Actions nobody took, each with the input that caused it.
    public var unreadActions: [ClientHarness.UnreadAction]
    /// Timers still armed.
    public var armedTimers: [(id: TimerID, deadline: Moment)]
    /// The virtual time at `finish`.
    public var now: Moment

    /// A message listing the leftovers, their causes, and how to fix the test.
    public var description: String {
        var lines = ["The test finished at \(now) with work left over."]
        if !unreadActions.isEmpty {
            lines.append("\(unreadActions.count) unread action(s):")
            lines += unreadActions.map { "  \($0)" }
        }
        if !armedTimers.isEmpty {
            lines.append("\(armedTimers.count) armed timer(s):")
            lines += armedTimers.map { "  \($0.id) due at \($0.deadline)" }
        }
        lines.append("To fix: take the actions with `takeActions()` and assert on them, or skip them by name with "
            + "`skip(...)`; stop the client with `feed(.stop)` (which cancels every timer) or advance past the "
            + "timers; or, if the timers are irrelevant to this test, call `finish(allowingArmedTimers: true)`.")
        return lines.joined(separator: "\n")
    }
}

/// The name of a ``ClientAction`` case, for skipping actions by name (``ClientHarness/skip(_:sourceLocation:)``).
public enum ClientActionKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `ClientAction.openTransport`.
    case openTransport
    /// `ClientAction.send`.
    case send
    /// `ClientAction.closeTransport`.
    case closeTransport
    /// `ClientAction.armTimer`.
    case armTimer
    /// `ClientAction.cancelTimer`.
    case cancelTimer
    /// `ClientAction.storeResumeCredentials`.
    case storeResumeCredentials
    /// `ClientAction.clearResumeCredentials`.
    case clearResumeCredentials
    /// `ClientAction.callCompleted`.
    case callCompleted
    /// `ClientAction.callProgress`.
    case callProgress
    /// `ClientAction.ingress`.
    case ingress
    /// `ClientAction.identity`.
    case identity
    /// `ClientAction.auth`.
    case auth
    /// `ClientAction.httpRequest`.
    case httpRequest
    /// `ClientAction.region`.
    case region
    /// `ClientAction.offlineQueue`.
    case offlineQueue
    /// `ClientAction.offlineMutationFinished`.
    case offlineMutationFinished
    /// `ClientAction.link`.
    case link
    /// `ClientAction.deliverTerminalOutput`.
    case deliverTerminalOutput
    /// `ClientAction.phaseChanged`.
    case phaseChanged
    /// `ClientAction.connectionFailed`.
    case connectionFailed
    /// `ClientAction.desktopStatusChanged`.
    case desktopStatusChanged
    /// `ClientAction.epochOpened`.
    case epochOpened
    /// `ClientAction.diagnostic`.
    case diagnostic

    /// The case name.
    public var description: String { rawValue }
}

extension ClientAction {
    /// The name of this action's case.
    public var kind: ClientActionKind {
        switch self {
        case .openTransport: .openTransport
        case .send: .send
        case .closeTransport: .closeTransport
        case .armTimer: .armTimer
        case .cancelTimer: .cancelTimer
        case .storeResumeCredentials: .storeResumeCredentials
        case .clearResumeCredentials: .clearResumeCredentials
        case .callCompleted: .callCompleted
        case .callProgress: .callProgress
        case .ingress: .ingress
        case .identity: .identity
        case .auth: .auth
        case .httpRequest: .httpRequest
        case .region: .region
        case .offlineQueue: .offlineQueue
        case .offlineMutationFinished: .offlineMutationFinished
        case .link: .link
        case .deliverTerminalOutput: .deliverTerminalOutput
        case .phaseChanged: .phaseChanged
        case .connectionFailed: .connectionFailed
        case .desktopStatusChanged: .desktopStatusChanged
        case .epochOpened: .epochOpened
        case .diagnostic: .diagnostic
        }
    }
}
