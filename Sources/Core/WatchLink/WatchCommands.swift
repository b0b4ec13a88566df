public import RelayProtocol

/// A random token the watch app draws once per launch and stamps on every command (SPEC C8).
///
/// It merges Kafka's producer ID and epoch into one field: the phone resynchronises when it sees a token
/// it has not seen before. It is never stored: a relaunch always draws a new one. 128 bits, from the
/// ``SeededRandom`` the caller passes, so a replay draws the same token.
public struct IncarnationToken: Sendable, Hashable, CustomStringConvertible {
    /// The high 64 bits.
    public var high: UInt64
    /// The low 64 bits.
    public var low: UInt64

    /// A token with the given bits (for decoding and tests).
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh token drawn from `rng`.
    public static func random(using rng: inout SeededRandom) -> IncarnationToken {
        IncarnationToken(high: rng.next(), low: rng.next())
    }

    /// 32 lower-case hex digits.
    public var description: String {
        let h = String(high, radix: 16), l = String(low, radix: 16)
        return String(repeating: "0", count: 16 - h.count) + h + String(repeating: "0", count: 16 - l.count) + l
    }
}

/// The workout session a command was made for (SPEC C11): the phone's session guard compares it with the
/// live session.
public struct SessionID: Sendable, Hashable, CustomStringConvertible {
    /// The identifier, e.g. an upper-case UUID.
    public var rawValue: String
    /// Wraps `rawValue`.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The raw value.
    public var description: String { rawValue }
}

/// One completed set as the wrist shows it: the values come from the crown and the screen, never from
/// the last snapshot (SPEC C1).
public struct SetEntry: Sendable, Hashable {
    /// The exercise's position in the workout.
    public var exerciseIndex: UInt32
    /// The set's position within the exercise (0-based); used when `setId` is absent.
    public var setOffset: UInt32
    /// The phone's identifier of the set, when the watch has one; nil falls back to `setOffset`.
    public var setId: String?
    /// The weight shown, in grams; nil when the wrist shows none (e.g. body weight).
    public var weightGrams: Int64?
    /// The repetitions shown; nil when the wrist shows none.
    public var reps: Int64?

    /// A set entry.
    public init(exerciseIndex: UInt32, setOffset: UInt32, setId: String? = nil, weightGrams: Int64?, reps: Int64?) {
        self.exerciseIndex = exerciseIndex
        self.setOffset = setOffset
        self.setId = setId
        self.weightGrams = weightGrams
        self.reps = reps
    }
}

/// What a command asks the phone to do.
public enum CommandPayload: Sendable, Hashable {
    /// Log a completed set.
    case completeSet(SetEntry)
    /// Lengthen (positive) or shorten (negative) the running rest by this many seconds; adjustments stack,
    /// which is why order matters (SPEC C5).
    case adjustRest(deltaSeconds: Int64)
    /// Skip the exercise at this index.
    case skipExercise(exerciseIndex: UInt32)
    /// End the workout.
    case endWorkout
}

/// A command as the user made it on the wrist: what to do, for which session.
public struct WatchCommand: Sendable, Hashable {
    /// The session the command was made for (SPEC C11).
    public var session: SessionID
    /// What to do.
    public var payload: CommandPayload
    /// A command for `session`.
    public init(session: SessionID, payload: CommandPayload) {
        self.session = session
        self.payload = payload
    }
}

/// A command on the wire: its sequence number, the sender's incarnation token, and the command.
public struct CommandEnvelope: Sendable, Hashable, CustomStringConvertible {
    /// The sequence number (SPEC C2): 64-bit, only goes up within an incarnation, kept across resends.
    public var sequence: UInt64
    /// The launch of the watch app that sent it (SPEC C8).
    public var incarnation: IncarnationToken
    /// The command.
    public var command: WatchCommand

    /// An envelope.
    public init(sequence: UInt64, incarnation: IncarnationToken, command: WatchCommand) {
        self.sequence = sequence
        self.incarnation = incarnation
        self.command = command
    }

    /// `#<sequence>@<token prefix> <payload>`.
    public var description: String {
        "#\(sequence)@\(String(incarnation.description.prefix(8))) \(command.payload)"
    }
}

/// The phone's exclusive cumulative acknowledgement (SPEC C3, TCP's RCV.NXT): the next sequence number
/// it expects from the incarnation named, i.e. one past the last command it executed (or rejected).
public struct CommandAck: Sendable, Hashable, CustomStringConvertible {
    /// The next sequence number expected. Everything strictly below it was executed or rejected.
    public var next: UInt64
    /// The incarnation the number belongs to.
    public var incarnation: IncarnationToken

    /// An acknowledgement.
    public init(next: UInt64, incarnation: IncarnationToken) {
        self.next = next
        self.incarnation = incarnation
    }

    /// `ack <next>@<token prefix>`.
    public var description: String { "ack \(next)@\(String(incarnation.description.prefix(8)))" }
}
