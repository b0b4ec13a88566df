import RelayProtocol
import Testing
import WatchLink

/// SPEC C8, C10, C12: clock-and-floor seeded 64-bit counters.
@Suite struct CounterTests {
    private let t0: UInt64 = 1_718_000_000_000

    @Test func seedIsTheClockWhenNothingIsStoredAndTheFloorPlusOneWhenTheClockIsBehind() {
        #expect(PersistedCounter(key: "k", clockMilliseconds: t0, storedFloor: nil).next == t0)
        #expect(PersistedCounter(key: "k", clockMilliseconds: t0, storedFloor: t0 - 1).next == t0)
        // Boundary: the floor equal to the clock reading; the clock cannot repeat it.
        #expect(PersistedCounter(key: "k", clockMilliseconds: t0, storedFloor: t0).next == t0 + 1)
        // The clock went back an hour: the floor holds.
        #expect(PersistedCounter(key: "k", clockMilliseconds: t0 - 3_600_000, storedFloor: t0 + 41).next == t0 + 42)
        // A floor at the very top saturates instead of trapping; the counter is then exhausted.
        var top = PersistedCounter(key: "k", clockMilliseconds: t0, storedFloor: .max)
        #expect(top.take() == nil)
    }

    @Test func aWatchRestartWithTheClockGoingBackwardsNeverReusesANumber() {
        var store: [String: [UInt8]] = [:]
        var used: Set<UInt64> = []
        var rng = SeededRandom(seed: 8)
        var clock = t0
        for launch in 0..<20 {
            let floor = try? store[WatchLinkConstants.commandSequenceStorageKey]
                .map { try CounterFloorRecord.decode($0, key: WatchLinkConstants.commandSequenceStorageKey) }
            var w = WatchSender(clockMilliseconds: clock, storedFloor: floor ?? nil, rng: &rng, reachable: false)
            for _ in 0..<5 {
                for case .persist(let r) in w.handle(.tap(completeSet(1), confirm: nil), at: .zero) {
                    store[r.key] = r.bytes
                }
            }
            for q in w.queue { #expect(used.insert(q.envelope.sequence).inserted, "launch \(launch) reused a number") }
            // Alternately jump ahead and go back in time (a user fiddling with the clock).
            clock = launch.isMultiple(of: 2) ? clock - 60_000 : clock + 2
        }
        #expect(used.count == 100)
    }

    @Test func protectingAnOlderNumberCannotPullTheCounterBack() {
        var c = PersistedCounter(key: "k", clockMilliseconds: t0, storedFloor: nil)
        _ = c.take()
        _ = c.take()
        c.protect(t0)
        #expect(c.next == t0 + 2)
        #expect(c.highestUsed == t0 + 1)
        c.protect(t0 + 10)
        #expect(c.next == t0 + 11)
        #expect(c.take()?.value == t0 + 11)
    }

    @Test func theFloorIsStoredAsEightBigEndianBytesWithNoIntOnTheWay() throws {
        // ~1.7e12 does not fit 32 bits (arm64_32's Int); the codec is UInt64 throughout.
        #expect(t0 > UInt64(UInt32.max))
        let bytes = CounterFloorRecord.encode(t0)
        #expect(bytes == [0x00, 0x00, 0x01, 0x90, 0x00, 0xC7, 0x9C, 0x00])
        #expect(try CounterFloorRecord.decode(bytes, key: "k") == t0)
        #expect(try CounterFloorRecord.decode(CounterFloorRecord.encode(.max), key: "k") == .max)
        #expect(CounterFloorRecord(key: "k", value: t0).bytes == bytes)
    }

    @Test func aStoredFloorOfTheWrongLengthIsATypedErrorNamingTheKey() {
        #expect(throws: CounterFloorError(key: "watchlink.commandSequence.floor", byteCount: 4)) {
            try CounterFloorRecord.decode([0, 0, 1, 0], key: "watchlink.commandSequence.floor")
        }
        let message = CounterFloorError(key: "watchlink.commandSequence.floor", byteCount: 4).description
        #expect(message.contains("watchlink.commandSequence.floor"))
        #expect(message.contains("4 bytes"))
        #expect(message.contains("expected exactly 8"))
    }

    /// "Share a value" is the Musklr bug: one variable with two jobs. Here both counters live in one store,
    /// are seeded from the same clock readings (going backwards) over six restarts, and interleave; every
    /// stored slot remembers its writer, and neither counter ever loads or overwrites the other's value.
    @Test func theRevisionCounterAndTheCommandCounterNeverShareAValue() {
        let commandKey = WatchLinkConstants.commandSequenceStorageKey
        let revisionKey = WatchLinkConstants.snapshotRevisionStorageKey
        #expect(commandKey != revisionKey)
        var store: [String: (value: UInt64, writer: String)] = [:]
        var commandValues: [UInt64] = [], revisionValues: [UInt64] = []
        var rng = SeededRandom(seed: 10)
        for launch in 0..<6 {
            let clock = t0 - UInt64(launch) * 1_000
            let commandFloor = store[commandKey]
            let revisionFloor = store[revisionKey]
            #expect(commandFloor == nil || commandFloor?.writer == "command")
            #expect(revisionFloor == nil || revisionFloor?.writer == "revision")
            var watch = WatchSender(clockMilliseconds: clock, storedFloor: commandFloor?.value, rng: &rng, reachable: false)
            var phone = SnapshotSender(clockMilliseconds: clock, storedFloor: revisionFloor?.value)
            #expect(watch.counter.key == commandKey)
            #expect(phone.revisions.key == revisionKey)
            for i in 0..<(3 + launch) {
                for case .persist(let r) in watch.handle(.tap(completeSet(1), confirm: nil), at: .zero) {
                    #expect(r.key == commandKey)
                    commandValues.append(r.value)
                    store[r.key] = (r.value, "command")
                }
                let phase: WorkoutPhase = i.isMultiple(of: 2) ? .lifting : .resting
                for case .persist(let r) in phone.handle(.update(workout(phase)), at: .zero) {
                    #expect(r.key == revisionKey)
                    revisionValues.append(r.value)
                    store[r.key] = (r.value, "revision")
                }
            }
        }
        // Each counter is strictly increasing across every restart, on its own key, with its own values.
        #expect(commandValues.count == 33)
        #expect(revisionValues.count == 33)
        #expect(zip(commandValues, commandValues.dropFirst()).allSatisfy { $0 < $1 })
        #expect(zip(revisionValues, revisionValues.dropFirst()).allSatisfy { $0 < $1 })
        #expect(store[commandKey]?.value == commandValues.last)
        #expect(store[revisionKey]?.value == revisionValues.last)
    }
}

/// A workout state in `phase` for the live session.
func workout(_ phase: WorkoutPhase, elapsed: Int64 = 0) -> WorkoutState {
    WorkoutState(sessionId: live, phase: phase, currentExerciseIndex: 0, elapsedSeconds: elapsed,
                 restEndsAtMilliseconds: nil, exercises: [
                    ExerciseProgress(plannedSets: 3, completedSets: 0, workingWeightGrams: 50_000, targetReps: 8, setIds: ["S1"]),
                 ])
}
