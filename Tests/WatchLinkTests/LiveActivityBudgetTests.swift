import RelayProtocol
import Testing
import WatchLink

/// SPEC C13: the 4 KB Live Activity budget covers static attributes plus content state together.
@Suite struct LiveActivityBudgetTests {
    private func sample() -> WorkoutSnapshot {
        var rng = SeededRandom(seed: 13)
        return SampleWorkout.snapshot(rng: &rng)
    }

    @Test func figures() {
        let s = sample()
        print("unstripped", s.contentState(stripped: false).serialized().count,
              "stripped", s.contentState(stripped: true).serialized().count,
              "attrs", SampleWorkout.attributes.json.serialized().count)
    }
}
