public import RelayProtocol

/// A realistic 20-exercise workout, mid-way (between exercises 11 and 12), for the Live Activity budget
/// tests (SPEC C13) and for scenarios. Deterministic: identifiers come from the generator passed.
public enum SampleWorkout {
    /// The exercises: name, planned sets, working weight in grams (nil for body weight), target reps.
    public static let exercises: [(name: String, sets: UInt32, grams: Int64?, reps: Int64?)] = [
        ("Back Squat", 5, 120_000, 5), ("Romanian Deadlift", 3, 100_000, 8), ("Bench Press", 4, 90_000, 5),
        ("Barbell Row", 3, 80_000, 8), ("Overhead Press", 3, 52_500, 6), ("Pull-Up", 3, nil, 8),
        ("Walking Lunge", 3, 24_000, 12), ("Incline Dumbbell Press", 3, 30_000, 10),
        ("Seated Cable Row", 3, 65_000, 12), ("Leg Press", 3, 180_000, 10), ("Leg Curl", 3, 45_000, 12),
        ("Lateral Raise", 3, 10_000, 15), ("Face Pull", 3, 22_500, 15), ("Barbell Curl", 3, 35_000, 10),
        ("Triceps Pushdown", 3, 27_500, 12), ("Calf Raise", 3, 90_000, 15), ("Hip Thrust", 3, 110_000, 10),
        ("Dips", 3, nil, 10), ("Hanging Leg Raise", 3, nil, 12), ("Farmer's Carry", 2, 32_000, nil),
    ]

    /// The attributes of the workout's Live Activity.
    public static let attributes = LiveActivityAttributes(workoutName: "Full Body Strength B",
                                                          startedAtMilliseconds: 1_718_000_000_000,
                                                          exerciseNames: exercises.map(\.name))

    /// The snapshot between exercises 11 and 12: the first 11 exercises done, the rest planned, with a
    /// set ID per planned set, the acknowledgement of a clock-seeded command counter, and a clock-seeded
    /// revision.
    public static func snapshot(rng: inout SeededRandom) -> WorkoutSnapshot {
        let progress = exercises.enumerated().map { index, e in
            ExerciseProgress(plannedSets: e.sets, completedSets: index < 11 ? e.sets : 0,
                             workingWeightGrams: e.grams, targetReps: e.reps,
                             setIds: (0..<e.sets).map { _ in rng.uuidString() })
        }
        let state = WorkoutState(sessionId: SessionID(rng.uuidString()), phase: .betweenExercises,
                                 currentExerciseIndex: 11, elapsedSeconds: 3_912,
                                 restEndsAtMilliseconds: nil, exercises: progress)
        let ack = CommandAck(next: 1_718_003_911_843, incarnation: .random(using: &rng))
        return WorkoutSnapshot(revision: 1_717_999_000_412, state: state, ack: ack)
    }
}
