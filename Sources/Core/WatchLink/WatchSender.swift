public import RelayProtocol

/// The watch side of the command channel (SPEC C2-C8, C14), a sans-IO machine.
///
/// Every tap gets the next sequence number at once, is confirmed at once (when the caller can name the
/// set), and waits in ``queue`` under that number until an acknowledgement moves past it. Numbers come
/// from a ``PersistedCounter`` seeded from a millisecond clock with the last number ever spent as the
/// floor; the floor is persisted (``WatchAction/persist(_:)``) before the number goes on the wire.
///
/// Sending: while the phone is reachable, unsent commands go out in order. Until the phone has
/// acknowledged the first command of this incarnation, only that command is in flight, so the phone's
/// resynchronisation (which takes the first command it sees from a new token as the baseline) always
/// takes the incarnation's first command. Recovery is small on purpose (C7): when the acknowledgement has
/// not moved for 5 s, exactly the one command it names is resent, under its original number.
public struct WatchSender: Sendable {
    /// This launch's token (C8). Drawn from the caller's generator, or given by the caller; never stored.
    public let incarnation: IncarnationToken
    /// The sequence counter (C8, C12).
    public private(set) var counter: PersistedCounter
    /// The first sequence number of this incarnation.
    public let baseline: UInt64
    /// The acknowledgement as the watch knows it (TCP's SND.UNA): the lowest number not yet known to be
    /// executed. Commands strictly below it are discarded; the command equal to it is still expected.
    public private(set) var acknowledged: UInt64
    /// Whether the phone has acknowledged anything from this incarnation.
    public private(set) var synchronised = false
    /// Whether the phone is reachable (as the transport last reported).
    public private(set) var reachable: Bool
    /// The commands not yet acknowledged, in sequence order, contiguous from ``acknowledged``.
    public private(set) var queue: [QueuedCommand] = []
    /// The deadline of the stalled-acknowledgement timer, if armed.
    public private(set) var stallDeadline: Moment?
    /// The time of the last input handled.
    public private(set) var now: Moment = .zero

    private var out: [WatchAction] = []

    /// A watch app launch: the counter is seeded from `clockMilliseconds` (the wall clock in ms, read by
    /// the caller) with `storedFloor` (the value loaded from ``WatchLinkConstants/commandSequenceStorageKey``,
    /// nil when none), and the incarnation token is drawn from `rng` (then as
    /// ``init(clockMilliseconds:storedFloor:incarnation:reachable:)``).
    public init(clockMilliseconds: UInt64, storedFloor: UInt64?, rng: inout SeededRandom, reachable: Bool = false) {
        self.init(clockMilliseconds: clockMilliseconds, storedFloor: storedFloor,
                  incarnation: .random(using: &rng), reachable: reachable)
    }

    /// A watch app launch with its incarnation token given (the sans-IO form: the launch's entropy is an
    /// input). The counter is seeded from `clockMilliseconds` with `storedFloor` as in
    /// ``init(clockMilliseconds:storedFloor:rng:reachable:)``. The token must be fresh for every launch
    /// (C8: never stored, never reused); the caller draws it, or a replay passes the one a trace recorded
    /// so the replayed launch is the recorded one.
    public init(clockMilliseconds: UInt64, storedFloor: UInt64?, incarnation: IncarnationToken, reachable: Bool = false) {
        self.incarnation = incarnation
        counter = PersistedCounter(key: WatchLinkConstants.commandSequenceStorageKey,
                                   clockMilliseconds: clockMilliseconds, storedFloor: storedFloor)
        baseline = counter.next
        acknowledged = counter.next
        self.reachable = reachable
    }

    /// Handles one input at `time`; returns the actions to perform, in order.
    public mutating func handle(_ input: WatchInput, at time: Moment) -> [WatchAction] {
        out.removeAll(keepingCapacity: true)
        now = max(now, time)
        switch input {
        case .tap(let command, let context):
            tap(command, context)
        case .reachability(let isReachable):
            reachable = isReachable
            if isReachable {
                flush()
                if !queue.isEmpty, stallDeadline == nil { armStall() }
            } else {
                cancelStall()
            }
        case .ackReceived(let ack):
            receive(ack)
        case .sendFailed(let sequence):
            sendFailed(sequence)
        case .timerFired(.stalledAck):
            stallFired()
        }
        return out
    }

    /// The command the acknowledgement names (the one the 5 s rule would resend), if queued.
    public var namedByAck: QueuedCommand? {
        queue.first.flatMap { $0.envelope.sequence == acknowledged ? $0 : nil }
    }

    // MARK: - Inputs

    private mutating func tap(_ command: WatchCommand, _ context: ConfirmationContext?) {
        guard queue.count < WatchLinkConstants.maxQueuedCommands else {
            out.append(.tapRefused(command, .queueFull(queued: queue.count)))
            return
        }
        guard let (sequence, record) = counter.take() else {
            out.append(.tapRefused(command, .counterExhausted))
            return
        }
        if case .completeSet(let entry) = command.payload, let context,
           let confirmation = TapConfirmation(completing: entry, in: context) {
            out.append(.confirm(confirmation))
        }
        out.append(.persist(record))
        queue.append(QueuedCommand(envelope: CommandEnvelope(sequence: sequence, incarnation: incarnation,
                                                             command: command)))
        flush()
    }

    private mutating func receive(_ ack: CommandAck) {
        guard ack.incarnation == incarnation else {
            out.append(.diagnostic(.ackForOtherIncarnation(ack)))
            return
        }
        guard ack.next <= counter.next, ack.next >= baseline else {
            out.append(.diagnostic(.ackOutsideSentRange(ack, baseline: baseline, next: counter.next)))
            return
        }
        // An acknowledgement that does not move is no news (the stall clock keeps running).
        guard ack.next > acknowledged else { return }
        acknowledged = ack.next
        synchronised = true
        // C4: strictly below the acknowledgement is done; equal is still expected.
        let done = queue.prefix { $0.envelope.sequence < ack.next }.count
        queue.removeFirst(done)
        if queue.isEmpty { cancelStall() } else { armStall() }
        flush()
    }

    private mutating func sendFailed(_ sequence: UInt64) {
        guard let i = index(of: sequence) else {
            out.append(.diagnostic(.sendFailedForUnknownSequence(sequence)))
            return
        }
        // C6: re-queued under the number already spent on it; the counter never hands it out again.
        queue[i].sent = false
        counter.protect(sequence)
    }

    private mutating func stallFired() {
        stallDeadline = nil
        guard reachable, let named = namedByAck else { return }
        // C7: exactly one command, the one the acknowledgement names, under its original number.
        queue[0].sent = true
        out.append(.send(named.envelope, resend: true))
        armStall()
    }

    // MARK: - Sending

    private mutating func flush() {
        guard reachable else { return }
        var sentAny = false
        for i in queue.indices where !queue[i].sent {
            // Until the phone has seen this incarnation, only its first command is in flight.
            if !synchronised, queue[i].envelope.sequence != baseline { break }
            queue[i].sent = true
            out.append(.send(queue[i].envelope, resend: false))
            sentAny = true
        }
        if sentAny, stallDeadline == nil { armStall() }
    }

    private func index(of sequence: UInt64) -> Int? {
        guard let first = queue.first?.envelope.sequence, sequence >= first else { return nil }
        let offset = sequence - first
        guard offset < UInt64(queue.count) else { return nil }
        return Int(offset)
    }

    private mutating func armStall() {
        let deadline = now + WatchLinkConstants.stalledAckTimeout
        stallDeadline = deadline
        out.append(.armTimer(.stalledAck, deadline: deadline))
    }

    private mutating func cancelStall() {
        guard stallDeadline != nil else { return }
        stallDeadline = nil
        out.append(.cancelTimer(.stalledAck))
    }
}

/// A command waiting on the watch for its acknowledgement.
public struct QueuedCommand: Sendable, Hashable {
    /// The command with its number.
    public var envelope: CommandEnvelope
    /// Whether it is on the wire (sent and not reported failed since).
    public var sent = false
}

/// The watch sender's timer.
public enum WatchTimer: Sendable, Hashable {
    /// C7: the acknowledgement has not moved for 5 s.
    case stalledAck
}

/// What happens to the watch sender.
public enum WatchInput: Sendable, Hashable {
    /// The user tapped: `command` for its session; `confirm` is what the wrist shows (name, number of
    /// sets), nil when the caller wants no confirmation.
    case tap(WatchCommand, confirm: ConfirmationContext?)
    /// The transport reports the phone reachable or not.
    case reachability(Bool)
    /// An acknowledgement arrived (in a reply or in a snapshot).
    case ackReceived(CommandAck)
    /// The transport could not send the command with this number.
    case sendFailed(sequence: UInt64)
    /// A timer armed by ``WatchAction/armTimer(_:deadline:)`` fired.
    case timerFired(WatchTimer)
}

/// What the watch sender asks its driver to do.
public enum WatchAction: Sendable, Hashable {
    /// Show the check mark and play the haptic now (C1, C14).
    case confirm(TapConfirmation)
    /// Store the counter floor (before the number goes on the wire).
    case persist(CounterFloorRecord)
    /// Send a command; `resend` when it went out before under the same number.
    case send(CommandEnvelope, resend: Bool)
    /// The tap was not accepted (nothing confirmed, nothing sent).
    case tapRefused(WatchCommand, TapRefusal)
    /// Arm (or re-arm) a timer.
    case armTimer(WatchTimer, deadline: Moment)
    /// Cancel a timer.
    case cancelTimer(WatchTimer)
    /// Something worth a log line.
    case diagnostic(WatchDiagnostic)
}

/// Why a tap was refused.
public enum TapRefusal: Sendable, Hashable {
    /// The watch already holds ``WatchLinkConstants/maxQueuedCommands`` unacknowledged commands.
    case queueFull(queued: Int)
    /// The sequence counter is exhausted (a corrupt floor near `UInt64.max`).
    case counterExhausted
}

/// Log-worthy events of the watch sender.
public enum WatchDiagnostic: Sendable, Hashable {
    /// An acknowledgement for another launch's token was ignored.
    case ackForOtherIncarnation(CommandAck)
    /// An acknowledgement naming a number this incarnation never spent was ignored.
    case ackOutsideSentRange(CommandAck, baseline: UInt64, next: UInt64)
    /// A send failure for a number not in the queue was ignored.
    case sendFailedForUnknownSequence(UInt64)

    /// The diagnostic a trace records: a stable code and structured fields, worded by `DiagnosticCatalogue`
    /// when shown.
    public var record: DiagnosticRecord {
        func ack(_ a: CommandAck) -> [String: JSONValue] {
            ["next": .int(Int64(bitPattern: a.next)), "incarnation": .string(a.incarnation.description)]
        }
        return switch self {
        case .ackForOtherIncarnation(let a): DiagnosticRecord("ackForOtherIncarnation", ack(a))
        case .ackOutsideSentRange(let a, let baseline, let next):
            DiagnosticRecord("ackOutsideSentRange", ack(a).merging(["baseline": .int(Int64(bitPattern: baseline)),
                                                                    "sentNext": .int(Int64(bitPattern: next))]) { a, _ in a })
        case .sendFailedForUnknownSequence(let s): DiagnosticRecord("sendFailedForUnknownSequence", ["sequence": .int(Int64(bitPattern: s))])
        }
    }
}
