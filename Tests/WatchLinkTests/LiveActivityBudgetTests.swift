import RelayProtocol
import Testing
import WatchLink

/// SPEC C13: the 4 KB Live Activity budget covers static attributes plus content state together.
@Suite struct LiveActivityBudgetTests {
    private func sample() -> WorkoutSnapshot {
        var rng = SeededRandom(seed: 13)
        return SampleWorkout.snapshot(rng: &rng)
    }

    @Test func theSampleIsATwentyExerciseWorkoutBetweenExercises() {
        let s = sample()
        #expect(s.state.exercises.count == 20)
        #expect(SampleWorkout.attributes.exerciseNames.count == 20)
        #expect(s.state.phase == .betweenExercises)
        #expect(s.state.exercises.allSatisfy { $0.setIds.count == Int($0.plannedSets) })
    }

    @Test func theStrippedSnapshotFitsWithTheAttributes() {
        let budget = LiveActivityBudget(attributes: SampleWorkout.attributes, snapshot: sample(), stripped: true)
        #expect(budget.fits, "\(budget)")
        #expect(budget.limit == 4096)
        // The figures of this model (the seed measured 1435 bytes for its content state).
        #expect(budget.contentStateBytes == 1452)
        #expect(budget.attributeBytes == 387)
    }

    @Test func theUnstrippedSnapshotExceedsTheBudget() {
        // The useful test: it breaks the moment stripping stops working, not when a lock screen goes quiet.
        let budget = LiveActivityBudget(attributes: SampleWorkout.attributes, snapshot: sample(), stripped: false)
        #expect(!budget.fits, "\(budget)")
        #expect(budget.contentStateBytes > 4096, "the content state alone is over (the seed measured 4211)")
        #expect(budget.contentStateBytes == 4248)
    }

    @Test func strippingRemovesExactlyTheWatchOnlyFields() throws {
        let s = sample()
        let stripped = s.contentState(stripped: true)
        let full = s.contentState(stripped: false)
        let strippedKeys = Set(try #require(stripped.objectValue).keys)
        let fullKeys = Set(try #require(full.objectValue).keys)
        #expect(fullKeys.subtracting(strippedKeys) == ["revision", "ack", "sessionId"])
        let exercise = try #require(stripped["exercises"]?[0]?.objectValue)
        #expect(exercise["setIds"] == nil)
        #expect(full["exercises"]?[0]?["setIds"]?.arrayValue?.count == 5)
        // 64-bit values that exceed 2^53 travel as strings, so no JSON reader rounds them.
        #expect(full["ack"]?["next"] == "1718003911843")
        #expect(full["revision"] == "1717999000412")
    }

    @Test func theBudgetCountsAttributesAndContentTogether() {
        // A content state that fits alone but not with large attributes is over.
        var big = SampleWorkout.attributes
        big.exerciseNames = Array(repeating: String(repeating: "x", count: 150), count: 20)
        let budget = LiveActivityBudget(attributes: big, snapshot: sample(), stripped: true)
        #expect(budget.contentStateBytes < 4096)
        #expect(!budget.fits, "\(budget)")
        #expect(budget.totalBytes == budget.attributeBytes + budget.contentStateBytes)
    }
}
