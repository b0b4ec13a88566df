import RelayProtocol
import Testing
import Trace
import WatchCapture
import WatchLink

/// The watch channel's trace vocabulary: every input of the four machines survives a round trip through
/// its record; datagrams are frames with the right direction; actions land in `action` records.
@Suite struct WatchRecordCodecTests {
    static let token = IncarnationToken(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let other = IncarnationToken(high: .max, low: 0)
    static let session = SessionID("5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11")
    static let big: UInt64 = 18_446_744_073_709_551_614   // UInt64.max - 1: above 2^53, exact only as a string

    static func set(_ setId: String?, _ w: Int64?, _ r: Int64?) -> WatchCommand {
        WatchCommand(session: session, payload: .completeSet(SetEntry(exerciseIndex: 3, setOffset: 1, setId: setId, weightGrams: w, reps: r)))
    }

    static let state = WorkoutState(
        sessionId: session, phase: .resting, currentExerciseIndex: 2, elapsedSeconds: 1_234, restEndsAtMilliseconds: big,
        exercises: [ExerciseProgress(plannedSets: 4, completedSets: 2, workingWeightGrams: 90_000, targetReps: 5, setIds: ["a", "b", "c", "d"]),
                    ExerciseProgress(plannedSets: 3, completedSets: 0, workingWeightGrams: nil, targetReps: nil, setIds: [])])

    static let inputs: [WatchChannelInput] = [
        .watchLaunched(WatchLaunch(clockMilliseconds: 1_718_000_000_000, storedFloor: big, reachable: true, incarnation: token)),
        .watchLaunched(WatchLaunch(clockMilliseconds: 0, storedFloor: nil, reachable: false, incarnation: other)),
        .watch(.tap(set("set-1", 52_500, 8), confirm: ConfirmationContext(exerciseName: "Bench Press", setsOnExercise: 4))),
        .watch(.tap(set(nil, nil, nil), confirm: ConfirmationContext(exerciseName: nil, setsOnExercise: 0))),
        .watch(.tap(set(nil, -1, 0), confirm: nil)),
        .watch(.tap(WatchCommand(session: session, payload: .adjustRest(deltaSeconds: -30)), confirm: nil)),
        .watch(.tap(WatchCommand(session: session, payload: .skipExercise(exerciseIndex: UInt32.max)), confirm: nil)),
        .watch(.tap(WatchCommand(session: SessionID(""), payload: .endWorkout), confirm: nil)),
        .watch(.reachability(true)), .watch(.reachability(false)),
        .watch(.ackReceived(CommandAck(next: big, incarnation: token))),
        .watch(.sendFailed(sequence: big)),
        .watch(.timerFired(.stalledAck)),
        .ackFromSnapshot(CommandAck(next: 1_718_000_000_001, incarnation: token)),
        .phoneLaunched(PhoneLaunch(clockMilliseconds: 1_718_000_000_000, revisionFloor: big, liveSession: session,
                                   checkpoint: ReceiverCheckpoint(incarnation: token, expected: big))),
        .phoneLaunched(PhoneLaunch(clockMilliseconds: 5, revisionFloor: nil, liveSession: nil, checkpoint: nil)),
        .phone(.command(CommandEnvelope(sequence: big, incarnation: token, command: set("s", 1, 2)))),
        .phone(.command(CommandEnvelope(sequence: 0, incarnation: other, command: WatchCommand(session: session, payload: .endWorkout)))),
        .phone(.sessionStarted(session)), .phone(.sessionEnded(session)),
        .snapshotSender(.update(state)),
        .snapshotSender(.ack(CommandAck(next: 7, incarnation: other))),
        .snapshotSender(.timerFired(.heartbeat)),
        .snapshotSender(.stop),
        .snapshotReceived(WorkoutSnapshot(revision: big, state: state, ack: CommandAck(next: 9, incarnation: token))),
        .snapshotReceived(WorkoutSnapshot(revision: 1, state: state, ack: nil)),
    ]

    @Test(arguments: inputs)
    func everyInputRoundTripsExactly(_ input: WatchChannelInput) throws {
        let record = WatchRecordCodec.record(input, at: .seconds(12.5))
        #expect(record.channel == .watch)
        #expect(record.time == .seconds(12.5))
        #expect(try WatchRecordCodec.decodeInput(record) == input)
        // The payload is JSON a reader can open, and naming the side when it is not a raw datagram.
        let json = try JSONValue(parsing: record.payload)
        if record.kind == .input || record.kind == .timerFired {
            #expect(json["watch"]?.stringValue != nil)
            #expect(["watch", "phone"].contains(json["side"]?.stringValue ?? ""))
        }
    }

    @Test func datagramsAreFramesWithTheirDirection() throws {
        let command = WatchRecordCodec.record(Self.inputs[16], at: .zero)
        #expect(command.kind == .frameText && command.direction == .outbound)
        #expect(try JSONValue(parsing: command.payload)["type"] == "command")
        #expect(try JSONValue(parsing: command.payload)["seq"] == "18446744073709551614")
        let ack = WatchRecordCodec.record(.watch(.ackReceived(CommandAck(next: 5, incarnation: Self.token))), at: .zero)
        #expect(ack.kind == .frameText && ack.direction == .inbound)
        #expect(ack.payloadText == #"{"incarnation":"0123456789abcdeffedcba9876543210","next":"5","type":"ack"}"#)
        let snapshot = WatchRecordCodec.record(Self.inputs[24], at: .zero)
        #expect(snapshot.kind == .frameText && snapshot.direction == .inbound)
        // The ack handed on from a snapshot is not a datagram: an input record, told apart by `via`.
        let fromSnapshot = WatchRecordCodec.record(.ackFromSnapshot(CommandAck(next: 5, incarnation: Self.token)), at: .zero)
        #expect(fromSnapshot.kind == .input)
        #expect(try JSONValue(parsing: fromSnapshot.payload)["via"] == "snapshot")
        #expect(WatchRecordCodec.record(.watch(.timerFired(.stalledAck)), at: .zero).kind == .timerFired)
        #expect(WatchRecordCodec.record(.snapshotSender(.timerFired(.heartbeat)), at: .zero).kind == .timerFired)
    }

    @Test func aDatagramInTheWrongDirectionOrBadJSONIsATypedErrorWithAPath() {
        var r = WatchRecordCodec.record(.watch(.ackReceived(CommandAck(next: 5, incarnation: Self.token))), at: .zero)
        r.direction = .outbound
        #expect(throws: WatchWireError.self) { try WatchRecordCodec.decodeInput(r) }
        let bad = TraceRecord(kind: .input, time: .zero, channel: .watch, payload: Array(#"{"watch":"tap","side":"watch","command":{"session":"s","payload":{"kind":"completeSet","exerciseIndex":-1,"setOffset":0}}}"#.utf8))
        do {
            _ = try WatchRecordCodec.decodeInput(bad)
            Issue.record("a negative exercise index decoded")
        } catch {
            #expect(error.path == "$.command.payload.exerciseIndex")
        }
        let unknown = TraceRecord(kind: .input, time: .zero, channel: .watch, payload: Array(#"{"watch":"dance","side":"phone"}"#.utf8))
        #expect(throws: WatchWireError.self) { try WatchRecordCodec.decodeInput(unknown) }
        let notJSON = TraceRecord(kind: .input, time: .zero, channel: .watch, payload: [0xFF, 0x00])
        #expect(throws: WatchWireError.self) { try WatchRecordCodec.decodeInput(notJSON) }
        // Records of the relay channel and non-inputs are not watch inputs.
        #expect((try? WatchRecordCodec.decodeInput(TraceRecord(kind: .input, time: .zero, channel: .relay, payload: Array("{}".utf8)))) == .some(nil))
        #expect((try? WatchRecordCodec.decodeInput(TraceRecord(kind: .marker, time: .zero, channel: .watch, payload: []))) == .some(nil))
    }

    static let actions: [(WatchChannelAction, String)] = [
        (.watch(.confirm(TapConfirmation(exerciseName: "Bench Press", setNumber: 2, weightGrams: 55_000, reps: 8))), "confirm"),
        (.watch(.persist(CounterFloorRecord(key: "k", value: big))), "persist"),
        (.watch(.send(CommandEnvelope(sequence: 4, incarnation: token, command: set(nil, 1, 1)), resend: true)), "send"),
        (.watch(.tapRefused(set(nil, 1, 1), .queueFull(queued: 10_000))), "tapRefused"),
        (.watch(.tapRefused(set(nil, 1, 1), .counterExhausted)), "tapRefused"),
        (.watch(.armTimer(.stalledAck, deadline: .seconds(5))), "armTimer"),
        (.watch(.cancelTimer(.stalledAck)), "cancelTimer"),
        (.watch(.diagnostic(.ackForOtherIncarnation(CommandAck(next: 1, incarnation: other)))), "diagnostic"),
        (.watch(.diagnostic(.ackOutsideSentRange(CommandAck(next: 1, incarnation: token), baseline: 2, next: 3))), "diagnostic"),
        (.watch(.diagnostic(.sendFailedForUnknownSequence(9))), "diagnostic"),
        (.phone(.execute(CommandEnvelope(sequence: 4, incarnation: token, command: set(nil, 1, 1)))), "execute"),
        (.phone(.rejected(CommandEnvelope(sequence: 42, incarnation: token, command: set(nil, 1, 1)), .sessionNotLive(named: session, live: nil))), "rejected"),
        (.phone(.buffered(6, expected: 5)), "buffered"),
        (.phone(.discarded(3, .duplicate(expected: 5))), "discarded"), (.phone(.discarded(3, .alreadyBuffered(expected: 5))), "discarded"),
        (.phone(.discarded(3_000, .outsideWindow(expected: 5))), "discarded"), (.phone(.discarded(3, .retiredIncarnation(other))), "discarded"),
        (.phone(.discarded(.max, .malformedSequence)), "discarded"),
        (.phone(.resynchronised(Resynchronisation(from: other, to: token, baseline: big, discardedBuffered: 2))), "resynchronised"),
        (.phone(.sendAck(CommandAck(next: 5, incarnation: token))), "sendAck"),
        (.snapshotSender(.persist(CounterFloorRecord(key: "r", value: 1))), "persist"),
        (.snapshotSender(.send(WorkoutSnapshot(revision: 3, state: state, ack: nil), .heartbeat)), "sendSnapshot"),
        (.snapshotSender(.armTimer(.heartbeat, deadline: .seconds(15))), "armTimer"),
        (.snapshotSender(.cancelTimer(.heartbeat)), "cancelTimer"),
        (.snapshotSender(.revisionsExhausted), "revisionsExhausted"),
        (.snapshotReceiver(.applied(WorkoutSnapshot(revision: 3, state: state, ack: nil))), "snapshotApplied"),
        (.snapshotReceiver(.rejectedOlder(incoming: 2, holding: 3)), "snapshotRejected"),
    ]

    /// A watch diagnostic is recorded as a code and fields; the sentence is rendered when shown, in the
    /// words the untyped records held.
    @Test func watchDiagnosticsAreRecordedAsCodesAndRenderTheirOldSentence() throws {
        let cases: [(WatchDiagnostic, String, String)] = [
            (.ackForOtherIncarnation(CommandAck(next: 1, incarnation: Self.other)), "ackForOtherIncarnation",
             "ignored ack 1@ffffffff: another incarnation"),
            (.ackOutsideSentRange(CommandAck(next: 7, incarnation: Self.token), baseline: 2, next: 3), "ackOutsideSentRange",
             "ignored ack 7@01234567: outside the sent range 2..<3"),
            (.sendFailedForUnknownSequence(9), "sendFailedForUnknownSequence", "ignored a send failure for #9: not queued"),
        ]
        for (d, code, sentence) in cases {
            let r = WatchRecordCodec.record(.watch(.diagnostic(d)), at: .seconds(1))
            let json = try JSONValue(parsing: r.payload)
            #expect(json["code"]?.stringValue == code && json["text"] == nil && json["watch"] == "diagnostic" && json["side"] == "watch")
            let back = try #require(DiagnosticRecord(json: json, ignoring: ["watch", "side"]))
            #expect(back == d.record && back.text == sentence)
        }
    }

    @Test func everyActionIsAnActionRecordNamedWithItsSide() throws {
        for (action, name) in Self.actions {
            let r = WatchRecordCodec.record(action, at: .seconds(1))
            #expect(r.kind == .action && r.channel == .watch && WatchRecordCodec.isAction(r))
            let json = try JSONValue(parsing: r.payload)
            #expect(json["watch"]?.stringValue == name)
            let side: String = switch action {
            case .watch, .snapshotReceiver: "watch"
            case .phone, .snapshotSender: "phone"
            }
            #expect(json["side"]?.stringValue == side)
            // Actions are not inputs.
            #expect(try WatchRecordCodec.decodeInput(r) == nil)
        }
    }

    @Test func aSendCarriesTheSameDatagramTheDeliveryFrameHolds() throws {
        let envelope = CommandEnvelope(sequence: 1_718_000_000_123, incarnation: Self.token, command: Self.set("x", 100_000, 5))
        let send = WatchRecordCodec.record(.watch(.send(envelope, resend: false)), at: .zero)
        let delivered = WatchRecordCodec.record(.phone(.command(envelope)), at: .zero + .milliseconds(40))
        let embedded = try #require(try JSONValue(parsing: send.payload)["datagram"])
        #expect(embedded.serialized() == delivered.payload)
    }
}
