/// The phone side of the command channel (SPEC C3-C5, C8, C11), a sans-IO machine.
///
/// It keeps TCP's RCV.NXT (``expected``) per incarnation. A command below it is a duplicate and is
/// discarded; the command equal to it goes to the execution step, and then every buffered command that
/// now follows without a gap, in order, in the same call (one contiguous batch); a command above it is
/// buffered. Every command input is answered with one ``ReceiverAction/sendAck(_:)``, after the batch.
///
/// The execution step advances the receiver first (``expected`` = one past the command) and only then
/// applies the session guard (C11), so a command for an ended session consumes its number instead of
/// parking the acknowledgement on it forever. Every place ``expected`` can move (in-order arrival, buffer
/// drain, resynchronisation) goes through that one step.
///
/// A token never seen before resynchronises: the incoming command is the new baseline, and whatever was
/// buffered from the old incarnation is discarded; no gap is computed across incarnations. A token seen
/// before but retired is a late command of an earlier launch and is discarded.
public struct PhoneReceiver: Sendable {
    /// The incarnation being received, once a command has arrived.
    public private(set) var incarnation: IncarnationToken?
    /// RCV.NXT: the next sequence number expected from ``incarnation`` (one past the last executed).
    public private(set) var expected: UInt64?
    /// Early commands waiting for the gap before them to close, by sequence number.
    public private(set) var buffer: [UInt64: CommandEnvelope] = [:]
    /// The workout session commands may act on; nil when none is live.
    public private(set) var liveSession: SessionID?
    /// Tokens of earlier incarnations (most recent last, at most
    /// ``WatchLinkConstants/retiredIncarnationMemory``).
    public private(set) var retired: [IncarnationToken] = []

    private var out: [ReceiverAction] = []

    /// A receiver with `liveSession` live, restoring `checkpoint` (the state stored with the last executed
    /// command) when given.
    public init(liveSession: SessionID? = nil, checkpoint: ReceiverCheckpoint? = nil) {
        self.liveSession = liveSession
        incarnation = checkpoint?.incarnation
        expected = checkpoint?.expected
    }

    /// The state to store atomically with the effects of the commands executed so far, if any.
    public var checkpoint: ReceiverCheckpoint? {
        guard let incarnation, let expected else { return nil }
        return ReceiverCheckpoint(incarnation: incarnation, expected: expected)
    }

    /// The acknowledgement the phone would send now, if it has received anything.
    public var ack: CommandAck? { checkpoint.map { CommandAck(next: $0.expected, incarnation: $0.incarnation) } }

    /// Handles one input; returns the actions to perform, in order.
    public mutating func handle(_ input: ReceiverInput) -> [ReceiverAction] {
        out.removeAll(keepingCapacity: true)
        switch input {
        case .command(let envelope):
            receive(envelope)
        case .sessionStarted(let session):
            liveSession = session
        case .sessionEnded(let session):
            if liveSession == session { liveSession = nil }
        }
        return out
    }

    private mutating func receive(_ c: CommandEnvelope) {
        guard c.sequence < .max else {
            // "One past" must exist; no sender hands out UInt64.max (PersistedCounter.maxValue).
            out.append(.discarded(c.sequence, .malformedSequence))
            if let ack { out.append(.sendAck(ack)) }
            return
        }
        guard let current = incarnation, let next = expected, current == c.incarnation else {
            if retired.contains(c.incarnation) {
                out.append(.discarded(c.sequence, .retiredIncarnation(c.incarnation)))
                return
            }
            resynchronise(to: c)
            return
        }
        if c.sequence < next {
            // C4: below the expected number: a duplicate, never executed again.
            out.append(.discarded(c.sequence, .duplicate(expected: next)))
        } else if c.sequence == next {
            executionStep(c)
            drain()
        } else if c.sequence - next >= WatchLinkConstants.receiveWindow {
            out.append(.discarded(c.sequence, .outsideWindow(expected: next)))
        } else if buffer[c.sequence] != nil {
            out.append(.discarded(c.sequence, .alreadyBuffered(expected: next)))
        } else {
            // C5: early: held until the gap before it closes.
            buffer[c.sequence] = c
            out.append(.buffered(c.sequence, expected: next))
        }
        if let ack { out.append(.sendAck(ack)) }
    }

    /// C8: a token not seen before: new baseline, the old incarnation's buffer discarded.
    private mutating func resynchronise(to c: CommandEnvelope) {
        if let old = incarnation {
            retired.append(old)
            if retired.count > WatchLinkConstants.retiredIncarnationMemory { retired.removeFirst() }
        }
        out.append(.resynchronised(Resynchronisation(from: incarnation, to: c.incarnation, baseline: c.sequence,
                                                     discardedBuffered: buffer.count)))
        buffer.removeAll()
        incarnation = c.incarnation
        executionStep(c)
        drain()
        if let ack { out.append(.sendAck(ack)) }
    }

    /// C5: everything now contiguous with the acknowledgement, in order, in this same call.
    private mutating func drain() {
        while let next = expected, let c = buffer.removeValue(forKey: next) {
            executionStep(c)
        }
    }

    /// C3 + C11: the receiver advances to one past the command first; then the session guard decides.
    private mutating func executionStep(_ c: CommandEnvelope) {
        expected = c.sequence + 1
        if let live = liveSession, c.command.session == live {
            out.append(.execute(c))
        } else {
            out.append(.rejected(c, .sessionNotLive(named: c.command.session, live: liveSession)))
        }
    }
}

/// The receiver state the phone stores with the effects of executed commands (one transaction), so a
/// phone restart does not take a command of the same watch launch for a new incarnation.
public struct ReceiverCheckpoint: Sendable, Hashable {
    /// The incarnation being received.
    public var incarnation: IncarnationToken
    /// RCV.NXT.
    public var expected: UInt64
    /// A checkpoint.
    public init(incarnation: IncarnationToken, expected: UInt64) {
        self.incarnation = incarnation
        self.expected = expected
    }
}

/// What happens to the phone receiver.
public enum ReceiverInput: Sendable, Hashable {
    /// A command arrived from the watch.
    case command(CommandEnvelope)
    /// The phone started (or resumed) this workout session: commands for it execute.
    case sessionStarted(SessionID)
    /// The phone ended this session: commands naming it are rejected from now on.
    case sessionEnded(SessionID)
}

/// What the phone receiver asks its driver to do, or reports.
public enum ReceiverAction: Sendable, Hashable {
    /// Execute the command now (write the set to the database). Its number is already consumed.
    case execute(CommandEnvelope)
    /// The session guard rejected the command; its number is consumed all the same (C11).
    case rejected(CommandEnvelope, Rejection)
    /// The command was buffered: it arrived before `expected`'s command.
    case buffered(UInt64, expected: UInt64)
    /// The command was dropped without effect.
    case discarded(UInt64, DiscardReason)
    /// A new incarnation was seen and became the baseline.
    case resynchronised(Resynchronisation)
    /// Reply to the watch with this acknowledgement (also carried by the next snapshot).
    case sendAck(CommandAck)
}

/// Why the session guard rejected a command.
public enum Rejection: Sendable, Hashable {
    /// The command names a session that is not the live one (ended, or none live).
    case sessionNotLive(named: SessionID, live: SessionID?)
}

/// Why a command was dropped.
public enum DiscardReason: Sendable, Hashable {
    /// Below the expected number: already executed or rejected.
    case duplicate(expected: UInt64)
    /// The same number is already buffered.
    case alreadyBuffered(expected: UInt64)
    /// Too far ahead to buffer (``WatchLinkConstants/receiveWindow``); it will come again by resend.
    case outsideWindow(expected: UInt64)
    /// From an earlier launch of the watch app.
    case retiredIncarnation(IncarnationToken)
    /// `UInt64.max`, which no sender hands out.
    case malformedSequence
}

/// A resynchronisation on a new incarnation (C8).
public struct Resynchronisation: Sendable, Hashable {
    /// The incarnation left behind, if any.
    public var from: IncarnationToken?
    /// The new incarnation.
    public var to: IncarnationToken
    /// The sequence number taken as the new baseline.
    public var baseline: UInt64
    /// How many buffered commands of the old incarnation were discarded.
    public var discardedBuffered: Int

    /// A resynchronisation report.
    public init(from: IncarnationToken?, to: IncarnationToken, baseline: UInt64, discardedBuffered: Int) {
        self.from = from
        self.to = to
        self.baseline = baseline
        self.discardedBuffered = discardedBuffered
    }
}
