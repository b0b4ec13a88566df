/// What the wrist knows about the set it is confirming, passed by the caller at the tap (SPEC C1).
public struct ConfirmationContext: Sendable, Hashable {
    /// The exercise's name as shown; nil when the watch cannot name the set (then nothing is confirmed).
    public var exerciseName: String?
    /// How many sets the exercise has, as shown; a set offset at or past it drops the set number.
    public var setsOnExercise: UInt32

    /// A context.
    public init(exerciseName: String?, setsOnExercise: UInt32) {
        self.exerciseName = exerciseName
        self.setsOnExercise = setsOnExercise
    }
}

/// The check mark and haptic shown at once when a set is tapped (SPEC C1, C14).
///
/// Its numbers are the ones the caller passed (what the crown and screen show at the tap), never the last
/// snapshot's: a prediction limited to what the lifter already sees. A number that cannot be stated
/// truthfully is dropped, and the confirmation itself remains.
public struct TapConfirmation: Sendable, Hashable, CustomStringConvertible {
    /// The exercise's name.
    public var exerciseName: String
    /// The 1-based set number; nil once the offset goes past the exercise's number of sets.
    public var setNumber: UInt32?
    /// The weight shown, in grams; nil when none is shown.
    public var weightGrams: Int64?
    /// The repetitions shown; nil when none are shown.
    public var reps: Int64?

    /// A confirmation.
    public init(exerciseName: String, setNumber: UInt32?, weightGrams: Int64?, reps: Int64?) {
        self.exerciseName = exerciseName
        self.setNumber = setNumber
        self.weightGrams = weightGrams
        self.reps = reps
    }

    /// The confirmation of completing `entry` in `context`; nil when the watch cannot name the set.
    public init?(completing entry: SetEntry, in context: ConfirmationContext) {
        guard let name = context.exerciseName, !name.isEmpty else { return nil }
        exerciseName = name
        setNumber = entry.setOffset < context.setsOnExercise ? entry.setOffset + 1 : nil
        weightGrams = entry.weightGrams
        reps = entry.reps
    }

    /// E.g. `✓ Bench Press set 2: 55 kg × 8`; dropped numbers are left out.
    public var description: String {
        var s = "✓ \(exerciseName)"
        if let n = setNumber { s += " set \(n)" }
        var parts: [String] = []
        if let w = weightGrams { parts.append(TapConfirmation.kilograms(w)) }
        if let r = reps { parts.append("\(r)") }
        if !parts.isEmpty { s += ": " + parts.joined(separator: " × ") }
        return s
    }

    static func kilograms(_ grams: Int64) -> String {
        let whole = grams / 1000, frac = (grams % 1000).magnitude
        if frac == 0 { return "\(whole) kg" }
        var f = String(frac)
        f = String(repeating: "0", count: 3 - f.count) + f
        while f.hasSuffix("0") { f.removeLast() }
        return "\(grams < 0 && whole == 0 ? "-" : "")\(whole).\(f) kg"
    }
}
