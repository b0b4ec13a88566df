public import RelayProtocol

/// A chat view's handle for its timeline claim, chosen by the UI layer (unique per view).
public struct ClaimID: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The handle.
    public var rawValue: UInt64
    /// Creates handle `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates handle `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: ClaimID, b: ClaimID) -> Bool { a.rawValue < b.rawValue }
    /// `claim#3` for handle 3.
    public var description: String { "claim#\(rawValue)" }
}

/// One visible chat view's claim on a desktop's timeline (SPEC A11).
public struct InterestClaim: Sendable, Hashable {
    /// The desktop the chat lives on.
    public var desktopId: String
    /// The base session the view shows (a sub-agent viewer claims its parent's base session).
    public var baseSessionId: String
    /// The foreground generation in which the view last confirmed visibility; the claim counts only
    /// while this is the current foreground generation.
    public var foregroundGeneration: UInt64
    /// When the view last confirmed visibility (claim or confirm).
    public var confirmedAt: Moment
    /// Recency rank: larger is newer (bumped by every claim and confirm).
    public var recency: UInt64

    /// Creates a claim record.
    public init(desktopId: String, baseSessionId: String, foregroundGeneration: UInt64, confirmedAt: Moment, recency: UInt64) {
        self.desktopId = desktopId
        self.baseSessionId = baseSessionId
        self.foregroundGeneration = foregroundGeneration
        self.confirmedAt = confirmedAt
        self.recency = recency
    }
}

/// The lease the coordinator holds for one desktop.
public struct InterestLease: Sendable, Hashable {
    /// The base session leased.
    public var sessionId: String
    /// When the lease started (for this session).
    public var since: Moment
    /// When `active: true` was last sent for it (nil while it could not be sent: desktop not registered).
    public var lastSent: Moment?
    /// When the next renewal is due (nil while the desktop is not registered).
    public var nextRenewal: Moment?

    /// Creates a lease record.
    public init(sessionId: String, since: Moment, lastSent: Moment? = nil, nextRenewal: Moment? = nil) {
        self.sessionId = sessionId
        self.since = since
        self.lastSent = lastSent
        self.nextRenewal = nextRenewal
    }
}

/// The coordinator's timers; the machine arms them on its clock and feeds the fire back with
/// ``TimelineInterestCoordinator/timerFired(_:at:)``.
public enum InterestTimer: Sendable, Hashable, CustomStringConvertible {
    /// Renew the desktop's lease.
    case renewal(desktopId: String)
    /// Retry the desktop's failed interest delivery.
    case retry(desktopId: String)

    /// e.g. `interestRenewal(9a7e…)`.
    public var description: String {
        switch self {
        case .renewal(let d): "interestRenewal(\(d))"
        case .retry(let d): "interestRetry(\(d))"
        }
    }
}

/// Something the coordinator noticed and ignored.
public enum InterestDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// A timer fired that is not armed, or before its deadline.
    case staleTimer(InterestTimer)
    /// An input named a claim the coordinator does not hold.
    case unknownClaim(ClaimID, input: String)
    /// An input that does not apply now (e.g. `deliveryFailed` for an unregistered desktop), and why.
    case ignored(String, reason: InterestIgnoredReason)

    /// The diagnostic a trace records (codes `interest.*`).
    public var record: DiagnosticRecord {
        switch self {
        case .staleTimer(let t): DiagnosticRecord("interest.staleTimer", ["timer": .string(t.description)])
        case .unknownClaim(let c, let input):
            DiagnosticRecord("interest.unknownClaim", ["claim": .int(Int64(bitPattern: c.rawValue)), "input": .string(input)])
        case .ignored(let what, let why): DiagnosticRecord("interest." + why.rawValue, ["input": .string(what)])
        }
    }

    /// The sentence of ``record``.
    public var description: String { record.text }
}

/// Why the interest coordinator ignored an input.
public enum InterestIgnoredReason: String, Sendable, Hashable {
    /// `enteredForeground` while in the foreground.
    case alreadyInForeground
    /// A delivery input for a desktop that is not registered.
    case desktopNotRegistered
    /// A delivery input with no interest to deliver.
    case nothingToDeliver
    /// A delivery failure while a retry is already scheduled.
    case retryScheduled
    /// A delivery failure after the coordinator gave up until the next renewal or registration.
    case gaveUp
}

/// What ``TimelineInterestCoordinator`` wants done.
public enum InterestEffect: Sendable, Hashable {
    /// Send `chat:timeline-interest` with this payload on the desktop's relay connection.
    case send(desktopId: String, TimelineInterest)
    /// Arm (or move) a timer.
    case arm(InterestTimer, deadline: Moment)
    /// Cancel an armed timer.
    case cancel(InterestTimer)
    /// Four retries of this interest frame failed; no more until the next renewal or registration.
    case gaveUp(desktopId: String, TimelineInterest)
    /// Something was ignored.
    case diagnostic(InterestDiagnostic)
}

/// SPEC A11 timeline-interest leases, as a sans-IO value type.
///
/// Rules (see docs/ARCHITECTURE.md):
/// - Each visible chat view holds a claim. A claim **counts** when the app is in the foreground, not
///   suspended (inactive), and the claim was made or last confirmed in the current foreground generation.
/// - One lease per desktop, for the base session of the **newest** counting claim, where newest means
///   most recently made *or confirmed* (``InterestClaim/recency``).
/// - A lease that starts sends `active: true`. A lease that moves to another session first sends
///   `active: false` for the old session, then `active: true` for the new one (safe whether the relay keys
///   leases by app session or by (app session, session)). The last counting claim going sends
///   `active: false`. Hand-offs within one session (parent chat to sub-agent viewer) send nothing.
/// - Sends happen only while the desktop is registered. An active lease is renewed every 20 s after the
///   last fresh send and re-issued after every registration; a lease that ends while the desktop is not
///   registered sends nothing (unrenewed, it lapses at the relay).
/// - ``enteredForeground(at:)`` from the background starts a new foreground generation;
///   ``enteredBackground(at:)`` and ``suspend(at:)`` end every lease (`active: false` once, renewals stop);
///   ``resume(at:)`` re-leases from the claims that still count (a fresh lease, `active: true`).
/// - ``deliveryFailed(desktopId:at:rng:)`` schedules up to 4 retries of the desktop's current interest
///   with ``ClientConstants/interestRetryDelay(attempt:rng:)``; the 5th failure gives up
///   (``InterestEffect/gaveUp(desktopId:_:)``) until the next fresh send.
public struct TimelineInterestCoordinator: Sendable {
    /// The app session ID sent in every interest frame (drawn by the machine once per app launch).
    public let appSessionId: String
    /// The claims held, by handle.
    public private(set) var claims: [ClaimID: InterestClaim] = [:]
    /// The current foreground generation (1 at launch; +1 on every return from the background).
    public private(set) var foregroundGeneration: UInt64 = 1
    /// Whether the app is in the foreground.
    public private(set) var isForeground = true
    /// Whether timeline interest is suspended (app inactive, SPEC A9).
    public private(set) var isSuspended = false
    /// The time of the last input handled.
    public private(set) var now: Moment = .zero

    private struct DesktopState: Sendable, Hashable {
        var registered = false
        var lease: InterestLease?
        /// The last interest frame sent (fresh or retry) on the current registration.
        var lastSent: TimelineInterest?
        /// Retries sent since the last fresh send.
        var retriesSent = 0
        var gaveUp = false
    }

    private var desktops: [String: DesktopState] = [:]
    private var armed: [InterestTimer: Moment] = [:]
    private var recencyCounter: UInt64 = 0
    private var out: [InterestEffect] = []

    /// Creates a coordinator for an app launched in the foreground (generation 1), with no claims and
    /// no desktop registered.
    public init(appSessionId: String) {
        self.appSessionId = appSessionId
    }

    // MARK: Queries

    /// The lease held for `desktopId`, if any.
    public func lease(for desktopId: String) -> InterestLease? { desktops[desktopId]?.lease }

    /// Whether the desktop's lease is for `sessionId` (what the event ingress asks at delivery).
    public func isLeased(desktopId: String, sessionId: String) -> Bool {
        desktops[desktopId]?.lease?.sessionId == sessionId
    }

    /// Whether `claim` counts now (foreground, not suspended, confirmed in this foreground generation).
    public func counts(_ claim: InterestClaim) -> Bool {
        isForeground && !isSuspended && claim.foregroundGeneration == foregroundGeneration
    }

    /// Whether the coordinator knows the desktop as registered.
    public func isRegistered(_ desktopId: String) -> Bool { desktops[desktopId]?.registered ?? false }

    /// The armed timers with their deadlines, by deadline then name.
    public var armedTimers: [(timer: InterestTimer, deadline: Moment)] {
        armed.map { ($0.key, $0.value) }.sorted {
            $0.1 != $1.1 ? $0.1 < $1.1 : $0.0.description < $1.0.description
        }
    }

    // MARK: Claims

    /// A view became visible (or re-claims): it holds `id` on `baseSessionId` of `desktopId`, counting for
    /// the current foreground generation, as the newest claim.
    public mutating func claim(_ id: ClaimID, desktopId: String, baseSessionId: String, at time: Moment) -> [InterestEffect] {
        begin(time)
        let previousDesktop = claims[id]?.desktopId
        recencyCounter += 1
        claims[id] = InterestClaim(desktopId: desktopId, baseSessionId: baseSessionId,
                                   foregroundGeneration: foregroundGeneration, confirmedAt: now, recency: recencyCounter)
        if desktops[desktopId] == nil { desktops[desktopId] = DesktopState() }
        if let previousDesktop, previousDesktop != desktopId { reconcile(previousDesktop) }
        reconcile(desktopId)
        return end()
    }

    /// The view of `id` confirms it is visible: the claim counts for the current foreground generation
    /// and becomes the newest.
    public mutating func confirmVisible(_ id: ClaimID, at time: Moment) -> [InterestEffect] {
        begin(time)
        guard var c = claims[id] else {
            out.append(.diagnostic(.unknownClaim(id, input: "confirmVisible")))
            return end()
        }
        recencyCounter += 1
        c.foregroundGeneration = foregroundGeneration
        c.confirmedAt = now
        c.recency = recencyCounter
        claims[id] = c
        reconcile(c.desktopId)
        return end()
    }

    /// The view of `id` went away.
    public mutating func release(_ id: ClaimID, at time: Moment) -> [InterestEffect] {
        begin(time)
        guard let c = claims.removeValue(forKey: id) else {
            out.append(.diagnostic(.unknownClaim(id, input: "release")))
            return end()
        }
        reconcile(c.desktopId)
        return end()
    }

    // MARK: App life

    /// The app came back from the background: a new foreground generation starts, so claims confirmed
    /// before it stop counting until their views confirm again. Ignored when already in the foreground.
    public mutating func enteredForeground(at time: Moment) -> [InterestEffect] {
        begin(time)
        guard !isForeground else {
            out.append(.diagnostic(.ignored("enteredForeground", reason: .alreadyInForeground)))
            return end()
        }
        isForeground = true
        foregroundGeneration += 1
        reconcileAll()
        return end()
    }

    /// The app went to the background: no claim counts, every lease ends (`active: false`).
    public mutating func enteredBackground(at time: Moment) -> [InterestEffect] {
        begin(time)
        isForeground = false
        reconcileAll()
        return end()
    }

    /// The app became inactive (SPEC A9): timeline interest is suspended; every lease ends with one
    /// `active: false`, and renewals and retries stop. Claims are kept.
    public mutating func suspend(at time: Moment) -> [InterestEffect] {
        begin(time)
        isSuspended = true
        reconcileAll()
        return end()
    }

    /// The app became active again: claims that still count (same foreground generation) lease again.
    public mutating func resume(at time: Moment) -> [InterestEffect] {
        begin(time)
        isSuspended = false
        reconcileAll()
        return end()
    }

    // MARK: Connection

    /// The desktop's relay connection registered (or re-registered): an active lease is re-issued at once.
    public mutating func registered(desktopId: String, at time: Moment) -> [InterestEffect] {
        begin(time)
        var d = desktops[desktopId] ?? DesktopState()
        d.registered = true
        d.lastSent = nil
        desktops[desktopId] = d
        if let lease = d.lease { sendFresh(desktopId, sessionId: lease.sessionId, active: true) }
        return end()
    }

    /// The desktop's relay connection is gone: nothing can be sent until ``registered(desktopId:at:)``;
    /// renewal and retry timers are cancelled. The lease itself is kept (the claims still hold).
    public mutating func connectionLost(desktopId: String, at time: Moment) -> [InterestEffect] {
        begin(time)
        guard var d = desktops[desktopId] else { return end() }
        d.registered = false
        d.lastSent = nil
        d.retriesSent = 0
        d.gaveUp = false
        d.lease?.nextRenewal = nil
        desktops[desktopId] = d
        cancel(.renewal(desktopId: desktopId))
        cancel(.retry(desktopId: desktopId))
        return end()
    }

    /// The last interest frame for `desktopId` could not be sent. Schedules retry n (1...4) of the desktop's
    /// current interest after ``ClientConstants/interestRetryDelay(attempt:rng:)`` (one draw from `rng`);
    /// after the 4th retry failed, gives up until the next renewal or registration. A failure while a retry
    /// is already scheduled is absorbed by it.
    public mutating func deliveryFailed(desktopId: String, at time: Moment, rng: inout SeededRandom) -> [InterestEffect] {
        begin(time)
        let what = "deliveryFailed(\(desktopId))"
        guard var d = desktops[desktopId], d.registered else {
            out.append(.diagnostic(.ignored(what, reason: .desktopNotRegistered)))
            return end()
        }
        guard let message = currentInterest(desktopId, d) else {
            out.append(.diagnostic(.ignored(what, reason: .nothingToDeliver)))
            return end()
        }
        guard armed[.retry(desktopId: desktopId)] == nil else {
            out.append(.diagnostic(.ignored(what, reason: .retryScheduled)))
            return end()
        }
        guard !d.gaveUp else {
            out.append(.diagnostic(.ignored(what, reason: .gaveUp)))
            return end()
        }
        guard d.retriesSent < ClientConstants.interestRetryLimit else {
            d.gaveUp = true
            desktops[desktopId] = d
            out.append(.gaveUp(desktopId: desktopId, message))
            return end()
        }
        let delay = ClientConstants.interestRetryDelay(attempt: d.retriesSent + 1, rng: &rng)
        arm(.retry(desktopId: desktopId), at: now + delay)
        return end()
    }

    // MARK: Timers

    /// An armed timer reached its deadline. A timer that is not armed, or fires before its deadline, is
    /// stale and ignored (diagnostic).
    public mutating func timerFired(_ timer: InterestTimer, at time: Moment) -> [InterestEffect] {
        begin(time)
        guard let deadline = armed[timer], deadline <= now else {
            out.append(.diagnostic(.staleTimer(timer)))
            return end()
        }
        armed[timer] = nil
        switch timer {
        case .renewal(let desktopId):
            if let d = desktops[desktopId], d.registered, let lease = d.lease {
                sendFresh(desktopId, sessionId: lease.sessionId, active: true)
            }
        case .retry(let desktopId):
            guard var d = desktops[desktopId], d.registered, let message = currentInterest(desktopId, d) else { break }
            d.retriesSent += 1
            d.lastSent = message
            if message.active { d.lease?.lastSent = now }
            desktops[desktopId] = d
            out.append(.send(desktopId: desktopId, message))
        }
        return end()
    }

    // MARK: - Internals

    private mutating func begin(_ time: Moment) {
        if time > now { now = time }
        out.removeAll(keepingCapacity: true)
    }

    private mutating func end() -> [InterestEffect] {
        let effects = out
        out.removeAll(keepingCapacity: true)
        return effects
    }

    /// What a retry re-sends: the active lease, or else the `active: false` that was last sent.
    private func currentInterest(_ desktopId: String, _ d: DesktopState) -> TimelineInterest? {
        if let lease = d.lease { return TimelineInterest(appSessionId: appSessionId, sessionId: lease.sessionId, active: true) }
        if let last = d.lastSent, !last.active { return last }
        return nil
    }

    /// The base session of the newest counting claim on `desktopId`.
    private func target(_ desktopId: String) -> String? {
        var best: InterestClaim?
        for c in claims.values where c.desktopId == desktopId && counts(c) {
            if best.map({ c.recency > $0.recency }) ?? true { best = c }
        }
        return best?.baseSessionId
    }

    private mutating func reconcileAll() {
        for desktopId in desktops.keys.sorted() { reconcile(desktopId) }
    }

    /// Brings the desktop's lease in line with its claims, sending what changed.
    private mutating func reconcile(_ desktopId: String) {
        let want = target(desktopId)
        let have = desktops[desktopId]?.lease?.sessionId
        guard want != have else { return }
        if let have {
            desktops[desktopId]?.lease = nil
            cancel(.renewal(desktopId: desktopId))
            if desktops[desktopId]?.registered == true {
                sendFresh(desktopId, sessionId: have, active: false)
            } else {
                cancel(.retry(desktopId: desktopId))
            }
        }
        if let want {
            desktops[desktopId, default: DesktopState()].lease =
                InterestLease(sessionId: want, since: now, lastSent: nil, nextRenewal: nil)
            if desktops[desktopId]?.registered == true { sendFresh(desktopId, sessionId: want, active: true) }
        }
    }

    /// A send that is not a retry: resets the retry budget; an `active: true` (re)arms the renewal.
    private mutating func sendFresh(_ desktopId: String, sessionId: String, active: Bool) {
        guard var d = desktops[desktopId], d.registered else { return }
        let message = TimelineInterest(appSessionId: appSessionId, sessionId: sessionId, active: active)
        d.lastSent = message
        d.retriesSent = 0
        d.gaveUp = false
        cancel(.retry(desktopId: desktopId))
        out.append(.send(desktopId: desktopId, message))
        if active {
            let due = now + ClientConstants.interestRenewalInterval
            d.lease?.lastSent = now
            d.lease?.nextRenewal = due
            desktops[desktopId] = d
            arm(.renewal(desktopId: desktopId), at: due)
        } else {
            desktops[desktopId] = d
        }
    }

    private mutating func arm(_ timer: InterestTimer, at deadline: Moment) {
        armed[timer] = deadline
        out.append(.arm(timer, deadline: deadline))
    }

    private mutating func cancel(_ timer: InterestTimer) {
        if armed.removeValue(forKey: timer) != nil { out.append(.cancel(timer)) }
    }
}
