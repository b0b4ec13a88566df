import RelayProtocol
import Testing
import WatchLink

/// The JSON wire codec of the watch link (what the datagrams carry).
@Suite struct WatchWireTests {
    @Test func everyDatagramRoundTripsAndSixtyFourBitValuesStayExact() throws {
        var rng = SeededRandom(seed: 7)
        let snapshot = SampleWorkout.snapshot(rng: &rng)
        let token = IncarnationToken.random(using: &rng)
        let datagrams: [WatchDatagram] = [
            .command(CommandEnvelope(sequence: .max - 1, incarnation: token, command: WatchCommand(
                session: SessionID("S"), payload: .completeSet(SetEntry(exerciseIndex: 1, setOffset: 2, setId: "id", weightGrams: 1, reps: 2))))),
            .command(CommandEnvelope(sequence: 0, incarnation: token, command: WatchCommand(session: SessionID("S"), payload: .adjustRest(deltaSeconds: Int64.min)))),
            .ack(CommandAck(next: (1 << 53) + 1, incarnation: token)),
            .snapshot(snapshot),
            .snapshot(WorkoutSnapshot(revision: 1, state: snapshot.state, ack: nil)),
        ]
        for d in datagrams {
            let bytes = WatchWire.encode(d)
            #expect(try WatchWire.decode(bytes) == d)
            #expect(bytes.count < WatchWire.maxDatagramBytes)
        }
        #expect(String(decoding: WatchWire.encode(datagrams[2]), as: UTF8.self).contains(#""next":"9007199254740993""#))
    }

    @Test func badDatagramsAreTypedErrorsNamingTheJSONPath() {
        let cases: [(String, String)] = [
            (#"{"type":"ack","next":"12","incarnation":"xyz"}"#, "$.incarnation"),
            (#"{"type":"ack","next":12,"incarnation":"0123456789abcdef0123456789abcdef"}"#, "$.next"),
            (#"{"type":"ack","next":"-1","incarnation":"0123456789abcdef0123456789abcdef"}"#, "$.next"),
            (#"{"type":"ack","next":"18446744073709551616","incarnation":"0123456789abcdef0123456789abcdef"}"#, "$.next"),
            (#"{"type":"nack"}"#, "$.type"),
            (#"[1]"#, "$"),
            (#"{"type":"snapshot","revision":"1","state":{"sessionId":"s","phase":"napping","currentExerciseIndex":0,"elapsedSeconds":0,"exercises":[]}}"#, "$.state.phase"),
            (#"{"type":"snapshot","revision":"1","state":{"sessionId":"s","phase":"lifting","currentExerciseIndex":0,"elapsedSeconds":0,"exercises":[{"plannedSets":1,"completedSets":0,"setIds":[3]}]}}"#, "$.state.exercises[0].setIds[0]"),
            ("not json", "$"),
        ]
        for (text, path) in cases {
            do {
                _ = try WatchWire.decode(Array(text.utf8))
                Issue.record("decoded: \(text)")
            } catch {
                #expect(error.path == path, "\(text): \(error)")
            }
        }
        #expect(throws: WatchWireError.self) { try WatchWire.decode([UInt8](repeating: 0x20, count: 70_000)) }
    }
}
