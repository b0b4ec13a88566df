public import RelayProtocol

/// The phone side of the snapshot channel (SPEC C9, C10), a sans-IO machine.
///
/// Snapshots are state, not events: no acknowledgement, no resend, no gap detection. A *full delivery*
/// takes a new revision from a persisted, clock-and-floor seeded counter under its own storage key
/// (never the command counter's): at start, at every phase change, and as a heartbeat 15 s after the
/// last full delivery. A lost one is repaired by the next. Between full deliveries, a new
/// acknowledgement is sent at once as an *ack reply*: the last full delivery's state and revision
/// (unchanged: only full deliveries increment it) with the newest acknowledgement, which is why the
/// watch applies an equal revision. A stale snapshot is never resent: every send carries the current
/// revision.
public struct SnapshotSender: Sendable {
    /// The revision counter (C10).
    public private(set) var revisions: PersistedCounter
    /// The newest state given.
    public private(set) var state: WorkoutState?
    /// The newest acknowledgement given.
    public private(set) var ack: CommandAck?
    /// The last full delivery.
    public private(set) var lastFull: WorkoutSnapshot?
    /// The heartbeat deadline, if armed.
    public private(set) var heartbeatDeadline: Moment?

    private var now: Moment = .zero
    private var out: [SnapshotSenderAction] = []

    /// A phone app launch: the revision counter is seeded from `clockMilliseconds` with `storedFloor` (the
    /// value loaded from ``WatchLinkConstants/snapshotRevisionStorageKey``, nil when none).
    public init(clockMilliseconds: UInt64, storedFloor: UInt64?) {
        revisions = PersistedCounter(key: WatchLinkConstants.snapshotRevisionStorageKey,
                                     clockMilliseconds: clockMilliseconds, storedFloor: storedFloor)
    }

    /// Handles one input at `time`; returns the actions to perform, in order.
    public mutating func handle(_ input: SnapshotSenderInput, at time: Moment) -> [SnapshotSenderAction] {
        out.removeAll(keepingCapacity: true)
        now = max(now, time)
        switch input {
        case .update(let newState):
            let phaseChanged = newState.phase != lastFull?.state.phase
            state = newState
            if phaseChanged { fullDelivery(.phaseChange) }
        case .ack(let newAck):
            if let old = ack, old.incarnation == newAck.incarnation, newAck.next <= old.next { break }
            ack = newAck
            if var reply = lastFull {
                reply.ack = newAck
                out.append(.send(reply, .ackReply))
            }
        case .timerFired(.heartbeat):
            heartbeatDeadline = nil
            if state != nil { fullDelivery(.heartbeat) }
        case .stop:
            if heartbeatDeadline != nil {
                heartbeatDeadline = nil
                out.append(.cancelTimer(.heartbeat))
            }
        }
        return out
    }

    private mutating func fullDelivery(_ reason: SnapshotDelivery) {
        guard let state else { return }
        guard let (revision, record) = revisions.take() else {
            out.append(.revisionsExhausted)
            return
        }
        let snapshot = WorkoutSnapshot(revision: revision, state: state, ack: ack)
        lastFull = snapshot
        out.append(.persist(record))
        out.append(.send(snapshot, reason))
        let deadline = now + WatchLinkConstants.snapshotHeartbeatInterval
        heartbeatDeadline = deadline
        out.append(.armTimer(.heartbeat, deadline: deadline))
    }
}

/// What happens to the snapshot sender.
public enum SnapshotSenderInput: Sendable, Hashable {
    /// The workout state changed; a phase change (or the first state) is delivered at once.
    case update(WorkoutState)
    /// The command receiver's acknowledgement moved.
    case ack(CommandAck)
    /// A timer armed by the sender fired.
    case timerFired(SnapshotTimer)
    /// The workout is over: stop the heartbeat.
    case stop
}

/// The snapshot sender's timer.
public enum SnapshotTimer: Sendable, Hashable {
    /// C9: 15 s after the last full delivery.
    case heartbeat
}

/// Why a snapshot was sent.
public enum SnapshotDelivery: Sendable, Hashable {
    /// A full delivery at a phase change (or the first state).
    case phaseChange
    /// A full delivery as the 15 s heartbeat.
    case heartbeat
    /// The last full delivery again, unchanged revision, with a newer acknowledgement.
    case ackReply
}

/// What the snapshot sender asks its driver to do.
public enum SnapshotSenderAction: Sendable, Hashable {
    /// Store the revision floor (before the snapshot goes on the wire).
    case persist(CounterFloorRecord)
    /// Send the snapshot (fire and forget).
    case send(WorkoutSnapshot, SnapshotDelivery)
    /// Arm (or re-arm) a timer.
    case armTimer(SnapshotTimer, deadline: Moment)
    /// Cancel a timer.
    case cancelTimer(SnapshotTimer)
    /// The revision counter is exhausted (a corrupt floor near `UInt64.max`); nothing was sent.
    case revisionsExhausted
}

/// The watch side of the snapshot channel (SPEC C9): newest wins, an equal revision is applied, a strictly
/// older one is rejected.
public struct SnapshotReceiver: Sendable {
    /// The snapshot the watch draws, if any.
    public private(set) var current: WorkoutSnapshot?

    /// A receiver holding nothing.
    public init() {}

    /// Receives `snapshot`; on `.applied` the caller hands its ``WorkoutSnapshot/ack`` to the
    /// ``WatchSender``.
    public mutating func receive(_ snapshot: WorkoutSnapshot) -> SnapshotOutcome {
        if let held = current, snapshot.revision < held.revision {
            return .rejectedOlder(incoming: snapshot.revision, holding: held.revision)
        }
        current = snapshot
        return .applied(snapshot)
    }
}

/// The outcome of receiving a snapshot.
public enum SnapshotOutcome: Sendable, Hashable {
    /// Applied (newer or equal revision).
    case applied(WorkoutSnapshot)
    /// Rejected: strictly older than the one held.
    case rejectedOlder(incoming: UInt64, holding: UInt64)
}
