public import RelayProtocol

/// The phase of a workout; every change is sent to the watch at once (SPEC C9).
public enum WorkoutPhase: String, Sendable, Hashable, CaseIterable {
    /// Before the first working set.
    case warmUp
    /// A set is under way.
    case lifting
    /// Resting between sets.
    case resting
    /// Between two exercises.
    case betweenExercises
    /// The workout is over.
    case finished
}

/// One exercise's progress in the shared snapshot type.
public struct ExerciseProgress: Sendable, Hashable {
    /// Sets planned (Live Activity).
    public var plannedSets: UInt32
    /// Sets done (Live Activity).
    public var completedSets: UInt32
    /// The working weight in grams, if any (Live Activity).
    public var workingWeightGrams: Int64?
    /// The target repetitions, if any (Live Activity).
    public var targetReps: Int64?
    /// Watch-only: the phone's identifiers of the sets, which `.completeSet` commands point to.
    public var setIds: [String]

    /// An exercise's progress.
    public init(plannedSets: UInt32, completedSets: UInt32, workingWeightGrams: Int64?, targetReps: Int64?,
                setIds: [String]) {
        self.plannedSets = plannedSets
        self.completedSets = completedSets
        self.workingWeightGrams = workingWeightGrams
        self.targetReps = targetReps
        self.setIds = setIds
    }
}

/// The workout state the phone publishes: the content state of the Live Activity and, with the
/// watch-only fields, what the watch draws.
public struct WorkoutState: Sendable, Hashable {
    /// Watch-only: the session commands must name (C11).
    public var sessionId: SessionID
    /// The phase (Live Activity).
    public var phase: WorkoutPhase
    /// The exercise under way (Live Activity).
    public var currentExerciseIndex: UInt32
    /// Seconds since the workout started (Live Activity).
    public var elapsedSeconds: Int64
    /// When the running rest ends, ms since the epoch (Live Activity).
    public var restEndsAtMilliseconds: UInt64?
    /// Every exercise's progress.
    public var exercises: [ExerciseProgress]

    /// A state.
    public init(sessionId: SessionID, phase: WorkoutPhase, currentExerciseIndex: UInt32, elapsedSeconds: Int64,
                restEndsAtMilliseconds: UInt64?, exercises: [ExerciseProgress]) {
        self.sessionId = sessionId
        self.phase = phase
        self.currentExerciseIndex = currentExerciseIndex
        self.elapsedSeconds = elapsedSeconds
        self.restEndsAtMilliseconds = restEndsAtMilliseconds
        self.exercises = exercises
    }
}

/// What travels phone -> watch (SPEC C9): the state under a revision, plus the newest acknowledgement of
/// the command channel (C14: the next snapshot carries the ack back).
///
/// The same type feeds the Live Activity (C13), whose budget is 4 KB for attributes and content state
/// together; ``contentState(stripped:)`` with `stripped: true` leaves out every watch-only field
/// (revision, acknowledgement, session ID, set IDs).
public struct WorkoutSnapshot: Sendable, Hashable {
    /// The revision (C9, C10): newest wins; equal is applied; strictly older is rejected.
    public var revision: UInt64
    /// The state.
    public var state: WorkoutState
    /// Watch-only: the phone's acknowledgement of the command channel, if it has received a command.
    public var ack: CommandAck?

    /// A snapshot.
    public init(revision: UInt64, state: WorkoutState, ack: CommandAck?) {
        self.revision = revision
        self.state = state
        self.ack = ack
    }

    /// The content state as JSON (ActivityKit encodes its `ContentState` as JSON); `stripped` leaves out
    /// the watch-only fields. 64-bit numbers that may exceed 2^53 (revision, ack) travel as decimal strings.
    public func contentState(stripped: Bool) -> JSONValue {
        var o: [String: JSONValue] = [
            "phase": .string(state.phase.rawValue),
            "currentExerciseIndex": .int(Int64(state.currentExerciseIndex)),
            "elapsedSeconds": .int(state.elapsedSeconds),
            "exercises": .array(state.exercises.map { $0.json(stripped: stripped) }),
        ]
        if let rest = state.restEndsAtMilliseconds { o["restEndsAt"] = .string(String(rest)) }
        if !stripped {
            o["revision"] = .string(String(revision))
            o["sessionId"] = .string(state.sessionId.rawValue)
            if let ack {
                o["ack"] = .object(["next": .string(String(ack.next)), "incarnation": .string(ack.incarnation.description)])
            }
        }
        return .object(o)
    }
}

extension ExerciseProgress {
    func json(stripped: Bool) -> JSONValue {
        var o: [String: JSONValue] = [
            "plannedSets": .int(Int64(plannedSets)),
            "completedSets": .int(Int64(completedSets)),
        ]
        if let w = workingWeightGrams { o["weightGrams"] = .int(w) }
        if let r = targetReps { o["targetReps"] = .int(r) }
        if !stripped {
            o["setIds"] = .array(setIds.map { .string($0) })
        }
        return .object(o)
    }
}

/// The static attributes of the workout's Live Activity.
public struct LiveActivityAttributes: Sendable, Hashable {
    /// The workout's name.
    public var workoutName: String
    /// When it started, ms since the epoch.
    public var startedAtMilliseconds: UInt64
    /// The exercises' names, in order.
    public var exerciseNames: [String]

    /// Attributes.
    public init(workoutName: String, startedAtMilliseconds: UInt64, exerciseNames: [String]) {
        self.workoutName = workoutName
        self.startedAtMilliseconds = startedAtMilliseconds
        self.exerciseNames = exerciseNames
    }

    /// The attributes as JSON.
    public var json: JSONValue {
        .object([
            "workoutName": .string(workoutName),
            "startedAt": .string(String(startedAtMilliseconds)),
            "exerciseNames": .array(exerciseNames.map { .string($0) }),
        ])
    }
}

/// The Live Activity data budget (SPEC C13): static attributes plus content state, together.
public struct LiveActivityBudget: Sendable, Hashable, CustomStringConvertible {
    /// Encoded size of the attributes, bytes.
    public var attributeBytes: Int
    /// Encoded size of the content state, bytes.
    public var contentStateBytes: Int
    /// The limit (``WatchLinkConstants/liveActivityBudgetBytes``).
    public var limit: Int

    /// The budget of `attributes` with `snapshot`'s content state, stripped or not.
    public init(attributes: LiveActivityAttributes, snapshot: WorkoutSnapshot, stripped: Bool) {
        attributeBytes = attributes.json.serialized().count
        contentStateBytes = snapshot.contentState(stripped: stripped).serialized().count
        limit = WatchLinkConstants.liveActivityBudgetBytes
    }

    /// Attributes plus content state.
    public var totalBytes: Int { attributeBytes + contentStateBytes }
    /// Whether the total fits the limit (ActivityKit does not report an overrun: updates just stop).
    public var fits: Bool { totalBytes <= limit }

    /// `attributes A + content C = T of 4096 bytes (fits|over)`.
    public var description: String {
        "attributes \(attributeBytes) + content \(contentStateBytes) = \(totalBytes) of \(limit) bytes "
            + (fits ? "(fits)" : "(over by \(totalBytes - limit))")
    }
}
