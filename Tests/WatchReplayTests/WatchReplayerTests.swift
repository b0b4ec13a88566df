import Foundation
import RelayProtocol
import Replay
import Testing
import Trace
import WatchCapture
import WatchLink
import WatchReplay
import WatchSimulation
import ReplayTesting

/// A watch scenario simulated into a temporary trace file.
struct WatchTraceFile {
    let path: String
    let header: TraceHeader
    let records: [TraceRecord]

    init(_ name: String, seed: UInt64, duration: Duration? = nil) throws {
        let scenario = try #require(WatchScenario.named(name))
        path = FileManager.default.temporaryDirectory
            .appendingPathComponent("watchreplay-\(name)-\(seed)-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        _ = try WatchScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: path)
        let reader = try TraceReader(path: path)
        header = reader.header
        records = reader.readAll().entries.map(\.record)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// The decoded input of record `i`, if it is a watch-channel input.
    func input(_ i: Int) -> WatchChannelInput? { (try? WatchRecordCodec.decodeInput(records[i])) ?? nil }

    /// Whether record `i` is a watch-channel input record.
    func isInput(_ i: Int) -> Bool { input(i) != nil }
}

/// The JSON object of `record` with `change` applied, as the record's new payload.
func edited(_ record: TraceRecord, _ change: (inout [String: JSONValue]) -> Void) throws -> TraceRecord {
    guard case .object(var o) = try JSONValue(parsing: record.payload) else { throw WatchReplayTestError.notAnObject }
    change(&o)
    var r = record
    r.payload = JSONValue.object(o).serialized()
    return r
}

enum WatchReplayTestError: Error { case notAnObject }

/// Writes `records` as a complete trace at `path` under `header` (with the header's redaction key, so the
/// already redacted records stay as they are).
func writeTrace(_ records: [TraceRecord], header: TraceHeader, to path: String) throws {
    var options = TraceWriterOptions()
    options.redactionKey = header.redaction.key
    let writer = try TraceWriter(path: path, header: header, options: options)
    for r in records { writer.append(r) }
    _ = try writer.close()
}

/// Where a strict replay of `records` under `header` diverged; nil when it did not.
func divergence(_ header: TraceHeader, _ records: [TraceRecord]) throws -> Divergence? {
    let r = try WatchReplayer(header: header, records: records)
    r.run()
    return r.divergence
}

/// Strict replay of watch-channel traces: every scenario replays without divergence; a changed, removed
/// or unexplained record stops the replay exactly there.
@Suite struct WatchReplayerTests {
    @Test(arguments: ["watch-offline", "watch-restart"], [1, 2, 7] as [UInt64])
    func everyWatchScenarioReplaysStrictlyFromTheFile(name: String, seed: UInt64) throws {
        let trace = try WatchTraceFile(name, seed: seed)
        defer { trace.remove() }
        let r = try WatchReplayer(path: trace.path)
        #expect(r.records.isFileBacked, "a complete trace is read a chunk at a time")
        #expect(r.records.count == trace.records.count)
        #expect(r.run() == .finished, "\(r.divergence?.description ?? "")")
        #expect(r.isAtEnd)
        #expect(r.position == trace.records.count)
        // Every input was fed and every recorded action matched one the machines did.
        let inputs = trace.records.indices.filter { trace.isInput($0) }.count
        let actions = trace.records.filter { WatchRecordCodec.isAction($0) }.count
        #expect(r.inputsFed == inputs)
        #expect(r.actionsMatched == actions)
        #expect(actions > 500, "a real workout: \(actions) actions")
        #expect(r.phoneLaunches == 1)
        #expect(r.watchLaunches == (name == "watch-restart" ? 2 : 1))
        // The replayed watch is the last launch's: its token is the recorded one.
        let launches = trace.records.indices.compactMap { i -> WatchLaunch? in
            if case .watchLaunched(let l)? = trace.input(i) { l } else { nil }
        }
        let lastLaunch = try #require(launches.last)
        #expect(r.watch?.incarnation == lastLaunch.incarnation)
        #expect(r.description.contains("incarnation \(lastLaunch.incarnation)"))
        // The workout ended: the phone executed the watch's last command and the watch knows it.
        let watch = try #require(r.watch), phone = try #require(r.phone)
        #expect(watch.queue.isEmpty, "\(r.description)")
        #expect(phone.expected == watch.acknowledged)
        #expect(r.snapshotSender?.heartbeatDeadline == nil, "the heartbeat stopped with the workout")
        // In memory, the same.
        let inMemory = try WatchReplayer(header: trace.header, records: trace.records)
        #expect(!inMemory.records.isFileBacked)
        #expect(inMemory.run() == .finished)
        #expect(inMemory.actionsMatched == actions)
    }

    @Test func steppingReportsEachRecordAndTheStateReadsBack() throws {
        let trace = try WatchTraceFile("watch-offline", seed: 3, duration: .seconds(240))
        defer { trace.remove() }
        let r = try WatchReplayer(header: trace.header, records: trace.records)
        #expect(r.description.contains("watch:     not launched"))
        var fed = 0, matched = 0, skipped = 0
        while let e = r.step() {
            switch e {
            case .fed(let i, let input, _):
                #expect(trace.input(i) == input)
                fed += 1
            case .matched(let i):
                #expect(WatchRecordCodec.isAction(trace.records[i]))
                matched += 1
            case .skipped: skipped += 1
            case .diverged(let d): Issue.record("\(d)")
            case .damaged(let i, let e): Issue.record("damaged at \(i): \(e)")
            }
            if r.position == 2 {
                // After the two launches: both sides exist, nothing sent yet.
                #expect(r.description.contains("phone:     no command received yet"), "\(r.description)")
                #expect(r.description.contains("queue 0 (0 on the wire)"), "\(r.description)")
            }
        }
        #expect(fed + matched + skipped == trace.records.count)
        #expect(r.step() == nil)
        let watch = try #require(r.watch), phone = try #require(r.phone)
        let text = r.description
        #expect(text.contains("next sequence \(watch.counter.next), acknowledged \(watch.acknowledged)"))
        #expect(text.contains("expects #\(try #require(phone.expected)) from incarnation \(watch.incarnation)"))
        #expect(text.contains("the watch holds revision \(try #require(r.snapshotReceiver.current?.revision))"))
        #expect(r.snapshot.json["watch"]?["incarnation"]?.stringValue == watch.incarnation.description)
        #expect(r.snapshot.json["phone"]?["expected"]?.stringValue == String(try #require(phone.expected)))
    }

    @Test(arguments: [#""watch":"execute""#, #""watch":"sendSnapshot""#, #""timer":"stalledAck","watch":"armTimer""#,
                      #""watch":"snapshotApplied""#, #""watch":"confirm""#, #""watch":"sendAck""#])
    func aChangedActionDivergesExactlyThereAsDifferent(action: String) throws {
        let trace = try WatchTraceFile("watch-offline", seed: 4)
        defer { trace.remove() }
        // The first such action after the first 200 records.
        let target = try #require(trace.records.indices.first { i in
            i > 200 && WatchRecordCodec.isAction(trace.records[i]) && trace.records[i].payloadText.contains(action)
        })
        var records = trace.records
        records[target] = try edited(records[target]) { $0["tampered"] = .bool(true) }
        let r = try WatchReplayer(header: trace.header, records: records)
        r.run()
        let d = try #require(r.divergence)
        #expect(d.record == target)
        #expect(d.kind == .different)
        #expect(d.time == trace.records[target].time)
        #expect(d.jsonDifferences == ["$.tampered: expected true, missing"])
        #expect(d.rule != nil, "every watch action names its SPEC Part C rule")
        #expect(d.rule?.section.hasPrefix("C") == true)
        #expect(d.context.last == "> #\(target) \(r.describe(records[target]))")
        #expect(d.context.count == 9)
        #expect(r.position == target, "the replay stops at the divergent record")
        #expect(r.actionsMatched == records[..<target].filter { WatchRecordCodec.isAction($0) }.count)
    }

    @Test func aRemovedActionIsExtraOrDifferentAtTheRecordItWasRemovedFrom() throws {
        let trace = try WatchTraceFile("watch-restart", seed: 5)
        defer { trace.remove() }
        // The last action of an input (the next record is an input): the machine's action is left over.
        let last = try #require(trace.records.indices.dropFirst(300).first { i in
            i + 1 < trace.records.count && WatchRecordCodec.isAction(trace.records[i]) && trace.isInput(i + 1)
        })
        var records = trace.records
        let removed = records.remove(at: last)
        var d = try #require(try divergence(trace.header, records))
        #expect(d.record == last)
        #expect(d.kind == .extra)
        #expect(d.actual.hasSuffix(removed.payloadText))
        // An action in the middle of an input's actions: its successor is compared with it.
        let middle = try #require(trace.records.indices.dropFirst(300).first { i in
            i + 1 < trace.records.count && WatchRecordCodec.isAction(trace.records[i]) && WatchRecordCodec.isAction(trace.records[i + 1])
                && trace.records[i].payload != trace.records[i + 1].payload
        })
        records = trace.records
        records.remove(at: middle)
        d = try #require(try divergence(trace.header, records))
        #expect(d.record == middle)
        #expect(d.kind == .different)
        #expect(d.actual.hasSuffix(trace.records[middle].payloadText))
        // An input removed: the actions recorded after it are missing from the replay.
        let tap = try #require(trace.records.indices.dropFirst(300).first { i in
            if case .watch(.tap)? = trace.input(i) { true } else { false }
        })
        records = trace.records
        records.remove(at: tap)
        d = try #require(try divergence(trace.header, records))
        #expect(d.record == tap)
        #expect(d.kind == .missing)
        #expect(d.expected.hasSuffix(trace.records[tap + 1].payloadText))
    }

    @Test(arguments: [0, 1])
    func aChangedLaunchTokenDivergesAtTheFirstDatagramItNumbers(launch: Int) throws {
        let trace = try WatchTraceFile("watch-restart", seed: 6)
        defer { trace.remove() }
        let launches = trace.records.indices.filter { if case .watchLaunched? = trace.input($0) { true } else { false } }
        #expect(launches.count == 2)
        let at = launches[launch]
        guard case .watchLaunched(let recorded)? = trace.input(at) else { throw WatchReplayTestError.notAnObject }
        var records = trace.records
        let other = IncarnationToken(high: recorded.incarnation.high ^ 1, low: recorded.incarnation.low)
        records[at] = try edited(records[at]) { $0["incarnation"] = .string(other.description) }
        let r = try WatchReplayer(header: trace.header, records: records)
        r.run()
        let d = try #require(r.divergence)
        // The first record after the launch that carries the recorded token: the watch's first send.
        let first = try #require(trace.records.indices.first { $0 > at && trace.records[$0].payloadText.contains(recorded.incarnation.description) })
        #expect(WatchRecordCodec.isAction(trace.records[first]))
        #expect(d.record == first)
        #expect(d.kind == .different)
        #expect(d.jsonDifferences.contains("$.datagram.incarnation: expected \"\(recorded.incarnation)\", got \"\(other)\""), "\(d.jsonDifferences)")
        #expect(d.rule?.section == "C14")
    }

    @Test func aTimerFiredOffItsDeadlineOrAnAckNotFromTheAppliedSnapshotDiverges() throws {
        let trace = try WatchTraceFile("watch-offline", seed: 8)
        defer { trace.remove() }
        // A heartbeat moved 1 ms later (its actions too, so only the timing is wrong).
        let beat = try #require(trace.records.indices.first { trace.records[$0].kind == .timerFired && trace.records[$0].payloadText.contains("heartbeat") })
        var records = trace.records
        var i = beat
        repeat {
            records[i].time = records[i].time + .milliseconds(1)
            i += 1
        } while i < records.count && WatchRecordCodec.isAction(records[i])
        var d = try #require(try divergence(trace.header, records))
        #expect(d.record == beat)
        #expect(d.kind == .different)
        #expect(d.actual.contains("heartbeat is armed for \(trace.records[beat].time)"), "\(d.actual)")
        #expect(d.rule?.section == "C9")
        // The ack the watch is handed after an applied snapshot is not the snapshot's.
        let handover = try #require(trace.records.indices.first { if case .ackFromSnapshot? = trace.input($0) { true } else { false } })
        records = trace.records
        records[handover] = try edited(records[handover]) { o in
            guard case .object(var ack)? = o["ack"], let next = ack["next"]?.stringValue, let n = UInt64(next) else { return }
            ack["next"] = .string(String(n + 1))
            o["ack"] = .object(ack)
        }
        d = try #require(try divergence(trace.header, records))
        #expect(d.record == handover)
        #expect(d.kind == .different)
        #expect(d.rule?.section == "C14")
        // And the handover left out: the applied snapshot's ack goes nowhere.
        records = trace.records
        records.remove(at: handover)
        d = try #require(try divergence(trace.header, records))
        #expect(d.record == handover)
        #expect(d.kind == .extra)
        #expect(d.actual.hasPrefix("ack via snapshot"))
    }

    @Test func anUndecodableInputOrAnInputBeforeItsLaunchStopsThere() throws {
        let trace = try WatchTraceFile("watch-offline", seed: 9, duration: .seconds(300))
        defer { trace.remove() }
        let tap = try #require(trace.records.indices.first { if case .watch(.tap)? = trace.input($0) { true } else { false } })
        var records = trace.records
        records[tap] = try edited(records[tap]) { $0["watch"] = .string("wave") }
        var d = try #require(try divergence(trace.header, records))
        #expect(d.record == tap)
        #expect(d.kind == .undecodable)
        #expect(d.actual.contains("unknown watch input 'wave'"), "\(d.actual)")
        // Without the watch's launch, its first input has no machine.
        let launch = try #require(trace.records.indices.first { if case .watchLaunched? = trace.input($0) { true } else { false } })
        records = trace.records
        records.remove(at: launch)
        d = try #require(try divergence(trace.header, records))
        #expect(d.kind == .undecodable)
        #expect(d.actual.contains("no watch launch record"), "\(d.actual)")
    }

    @Test func aRelayTraceIsRefusedWithAClearError() throws {
        let header = TraceHeader(seed: 1, redaction: TraceHeader.Redaction(Redactor(policy: .raw, key: [])),
                                 wallClockStart: "2026-01-15T12:00:00Z", simulated: true,
                                 client: ["deviceId": "phone-1", "deviceName": "Phone", "desktopId": "d", "relayURL": "wss://relay.example"])
        let records = [TraceRecord(kind: .input, time: .zero, channel: .relay, payload: Array(#"{"input":"start"}"#.utf8))]
        #expect(throws: ReplayError.self) { try WatchReplayer(header: header, records: records) }
        do {
            _ = try WatchReplayer(header: header, records: records)
        } catch {
            #expect(error.message.contains("$.client.channel is missing (expected \"watch\")"), "\(error.message)")
        }
        var relayChannel = header
        relayChannel.client = ["channel": "relay"]
        #expect(throws: ReplayError.self) { try WatchReplayer(header: relayChannel, records: records) }
        #expect(!WatchReplayer.isWatchTrace(header))
    }

    @Test func aCutTraceIsRefusedUnlessAllowedAndADamagedChunkStopsTheReplayThere() throws {
        let trace = try WatchTraceFile("watch-restart", seed: 10)
        defer { trace.remove() }
        let index = try #require(try TraceReader(path: trace.path).index)
        #expect(index.count > 6)
        let bytes = try #require(FileManager.default.contents(atPath: trace.path))
        // Cut in the middle of chunk 5: as a recorder killed mid-write leaves it.
        let cut = trace.path + ".cut"
        defer { try? FileManager.default.removeItem(atPath: cut) }
        try #require(FileManager.default.createFile(atPath: cut, contents: bytes.prefix(Int(index[5].offset) + Int(index[5].compressedSize) / 2)))
        #expect(throws: ReplayError.self) { try WatchReplayer(path: cut) }
        do { _ = try WatchReplayer(path: cut) } catch {
            #expect(error.intactRecords == Int(index[5].firstRecord))
            #expect(error.traceError?.code == .truncated, "\(error.message)")
        }
        let allowed = try WatchReplayer(path: cut, allowDamaged: true)
        #expect(!allowed.records.isFileBacked)
        #expect(allowed.run() == .finished)
        #expect(allowed.records.count == Int(index[5].firstRecord))
        #expect(allowed.readProblem != nil)
        // A complete trace with one flipped bit in chunk 4: replayed up to it, then damaged there.
        var flipped = bytes
        flipped[Int(index[4].frameOffset) + 20] ^= 0x80
        let damaged = trace.path + ".damaged"
        defer { try? FileManager.default.removeItem(atPath: damaged) }
        try #require(FileManager.default.createFile(atPath: damaged, contents: flipped))
        let r = try WatchReplayer(path: damaged)
        #expect(r.records.isFileBacked)
        guard case .damaged(let at, let error) = r.run() else { Issue.record("not damaged: \(r.position)"); return }
        #expect(at == Int(index[4].firstRecord))
        #expect(error.code == .checksumMismatch)
        #expect(r.position == at)
        #expect(r.step() == nil)
    }

    @Test func aPerturbedRunWrittenAsATraceReplaysAndAMutantsShrunkRunDivergesWhereTheMutantActs() throws {
        let trace = try WatchTraceFile("watch-offline", seed: 1)
        defer { trace.remove() }
        let p = try WatchPerturbation(header: trace.header, records: trace.records)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("perturbed-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: out + ".faults.json")
        }
        // The production machines under faults (a restart among them): the run's own records replay strictly.
        let run = p.run(faults: [Fault(kind: .restart, target: 5), Fault(kind: .drop, target: 9), Fault(kind: .duplicate, target: 12, amount: .milliseconds(300))], record: true)
        #expect(run.violation == nil)
        try PerturbationOutput.write(header: p.header, records: run.records, run: run, to: out)
        let replayed = try WatchReplayer(path: out)
        #expect(replayed.run() == .finished, "\(replayed.divergence?.description ?? "")")
        #expect(replayed.watchLaunches == 2)
        #expect(replayed.actionsMatched == run.records.filter { WatchRecordCodec.isAction($0) }.count)
        // A shrunk failure of a mutant receiver (inclusive ack): replayed against the production receiver,
        // it diverges at the first acknowledgement the mutant sent, one too far.
        p.receiverFactory = { launch in
            InclusiveAckReceiver(inner: PhoneReceiver(liveSession: launch.liveSession, checkpoint: launch.checkpoint))
        }
        let failing = try #require((1...500 as ClosedRange<UInt64>).lazy.map { p.run(seed: $0) }.first { $0.violation != nil })
        let (shrunk, _) = p.shrink(failing)
        try PerturbationOutput.write(header: p.header, records: shrunk.records, run: shrunk, to: out)
        let r = try WatchReplayer(path: out)
        r.run()
        let d = try #require(r.divergence)
        let firstAck = try #require(shrunk.records.indices.first { WatchRecordCodec.isAction(shrunk.records[$0]) && shrunk.records[$0].payloadText.contains("\"sendAck\"") })
        #expect(d.record == firstAck)
        #expect(d.kind == .different)
        #expect(d.rule?.section == "C3")
        #expect(d.jsonDifferences.count == 1 && d.jsonDifferences.first?.hasPrefix("$.datagram.next:") == true, "\(d.jsonDifferences)")
    }
    /// A hand-made trace of relaunches: a relaunched watch holds no snapshot (an older revision is applied
    /// again), and a phone launched with a checkpoint goes on from it (no resynchronisation).
    @Test func launchesRebuildTheMachinesFromTheRecordedValues() throws {
        let session = SessionID("S-1"), a = IncarnationToken(high: 0xA, low: 1), b = IncarnationToken(high: 0xB, low: 2)
        let state = WorkoutState(sessionId: session, phase: .resting, currentExerciseIndex: 0, elapsedSeconds: 10,
                                 restEndsAtMilliseconds: nil, exercises: [])
        let command = CommandEnvelope(sequence: 41, incarnation: a, command: WatchCommand(session: session, payload: .adjustRest(deltaSeconds: 30)))
        var records: [TraceRecord] = []
        func input(_ i: WatchChannelInput, _ s: Double) { records.append(WatchRecordCodec.record(i, at: .seconds(s))) }
        func action(_ x: WatchChannelAction, _ s: Double) { records.append(WatchRecordCodec.record(x, at: .seconds(s))) }
        input(.phoneLaunched(PhoneLaunch(clockMilliseconds: 1_000, revisionFloor: nil, liveSession: session,
                                         checkpoint: ReceiverCheckpoint(incarnation: a, expected: 41))), 0)
        input(.watchLaunched(WatchLaunch(clockMilliseconds: 2_000, storedFloor: 40, reachable: false, incarnation: a)), 0)
        input(.snapshotReceived(WorkoutSnapshot(revision: 10, state: state, ack: nil)), 1)
        action(.snapshotReceiver(.applied(WorkoutSnapshot(revision: 10, state: state, ack: nil))), 1)
        input(.snapshotReceived(WorkoutSnapshot(revision: 9, state: state, ack: nil)), 2)
        action(.snapshotReceiver(.rejectedOlder(incoming: 9, holding: 10)), 2)
        input(.watchLaunched(WatchLaunch(clockMilliseconds: 3_000, storedFloor: 2_500, reachable: true, incarnation: b)), 3)
        input(.snapshotReceived(WorkoutSnapshot(revision: 9, state: state, ack: nil)), 4)
        action(.snapshotReceiver(.applied(WorkoutSnapshot(revision: 9, state: state, ack: nil))), 4)
        // The phone, restored at expected #41 of incarnation a, executes #41 at once.
        input(.phone(.command(command)), 5)
        action(.phone(.execute(command)), 5)
        action(.phone(.sendAck(CommandAck(next: 42, incarnation: a))), 5)
        // As the drivers do, the phone's acknowledgement goes to its SnapshotSender next (C14).
        var sender = SnapshotSender(clockMilliseconds: 1_000, storedFloor: nil)
        input(.snapshotSender(.ack(CommandAck(next: 42, incarnation: a))), 5)
        for x in sender.handle(.ack(CommandAck(next: 42, incarnation: a)), at: .seconds(5)) { action(.snapshotSender(x), 5) }
        // The relaunched watch numbers from its floor, with its token.
        let tap = WatchCommand(session: session, payload: .endWorkout)
        input(.watch(.tap(tap, confirm: nil)), 6)
        action(.watch(.persist(CounterFloorRecord(key: WatchLinkConstants.commandSequenceStorageKey, value: 3_000))), 6)
        action(.watch(.send(CommandEnvelope(sequence: 3_000, incarnation: b, command: tap), resend: false)), 6)
        action(.watch(.armTimer(.stalledAck, deadline: .seconds(11))), 6)
        var header = TraceHeader(seed: 1, wallClockStart: "2026-01-15T12:00:00Z", client: ["channel": "watch"])
        header.simulated = true
        let r = try WatchReplayer(header: header, records: records)
        #expect(r.run() == .finished, "\(r.divergence?.description ?? "")")
        #expect(r.watchLaunches == 2)
        #expect(r.snapshotReceiver.current?.revision == 9)
        #expect(r.phone?.expected == 42)
        #expect(r.watch?.counter.next == 3_001)
    }
}

/// The driver's own handovers and timing, checked against the replayed machines, and the ends of a trace.
@Suite struct WatchReplayDriverCheckTests {
    private static func trace(_ name: String = "watch-restart") throws -> WatchTraceFile { try WatchTraceFile(name, seed: 3) }

    @Test func aStalledAckFireOffItsDeadlineDiverges() throws {
        let t = try Self.trace("watch-offline")
        defer { t.remove() }
        let fire = try #require(t.records.indices.first { if case .watch(.timerFired(.stalledAck))? = t.input($0) { true } else { false } })
        var moved = t.records
        moved[fire].time = moved[fire].time + .milliseconds(1)
        let d = try #require(try divergence(t.header, moved))
        #expect(d.record == fire && d.kind == .different)
        #expect(d.rule?.section == "C7")
        #expect(d.actual.contains("armed for"))
    }

    @Test func anAckFromASnapshotThatWasNeverAppliedDiverges() throws {
        let t = try Self.trace()
        defer { t.remove() }
        // A lone "ack via snapshot" before the first watch tap: no snapshot carrying an ack came before it.
        let tap = try #require(t.records.indices.first { if case .watch(.tap)? = t.input($0) { true } else { false } })
        var changed = t.records
        changed.insert(WatchRecordCodec.record(.ackFromSnapshot(CommandAck(next: 1, incarnation: IncarnationToken(high: 1, low: 1))), at: t.records[tap].time), at: tap)
        let d = try #require(try divergence(t.header, changed))
        #expect(d.record == tap && d.kind == .missing && d.rule?.section == "C14")
    }

    @Test func thePhonesAckMustGoToItsSnapshotSenderNext() throws {
        let t = try Self.trace()
        defer { t.remove() }
        let handover = try #require(t.records.indices.first { if case .snapshotSender(.ack)? = t.input($0) { true } else { false } })
        // Left out: the ack the replayed PhoneReceiver sent is never handed over.
        var without = t.records
        without.remove(at: handover)
        while handover < without.count, WatchRecordCodec.isAction(without[handover]) { without.remove(at: handover) }
        let d = try #require(try divergence(t.header, without))
        #expect(d.record == handover && d.kind == .extra && d.rule?.section == "C14", "\(d)")
        // Another ack handed over than the one sent.
        var other = t.records
        other[handover] = try edited(other[handover]) { o in
            guard case .object(var ack)? = o["ack"], let next = ack["next"]?.stringValue, let n = UInt64(next) else { return }
            ack["next"] = .string(String(n + 1))
            o["ack"] = .object(ack)
        }
        #expect(other[handover] != t.records[handover], "the edit must change the record: \(t.records[handover].payloadText)")
        let d2 = try #require(try divergence(t.header, other))
        #expect(d2.record == handover && d2.kind == .different && d2.rule?.section == "C14", "\(d2)")
    }

    @Test func aRelaunchMustLoadTheFloorTheWatchPersisted() throws {
        let t = try Self.trace()
        defer { t.remove() }
        let launches = t.records.indices.filter { if case .watchLaunched? = t.input($0) { true } else { false } }
        try #require(launches.count == 2)
        let relaunch = launches[1]
        guard case .watchLaunched(var l)? = t.input(relaunch) else { return }
        l.storedFloor = (l.storedFloor ?? 0) &- 1
        var changed = t.records
        changed[relaunch] = WatchRecordCodec.record(.watchLaunched(l), at: t.records[relaunch].time)
        let d = try #require(try divergence(t.header, changed))
        #expect(d.record == relaunch && d.kind == .different && d.rule?.section == "C2/C8", "\(d)")
    }

    @Test func aTraceEndingBetweenAnInputAndItsActionsIsExtraUnlessItIsIncomplete() throws {
        let t = try Self.trace("watch-offline")
        defer { t.remove() }
        let tap = try #require(t.records.indices.last { if case .watch(.tap)? = t.input($0) { true } else { false } })
        try #require(WatchRecordCodec.isAction(t.records[tap + 1]))
        let cut = Array(t.records[...tap])
        let d = try #require(try divergence(t.header, cut))
        #expect(d.record == cut.count && d.kind == .extra, "a closed trace says nothing followed")
        // The same records as a killed recorder leaves them (no index and trailer): the actions were lost.
        let path = t.path + ".killed"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try writeTrace(cut, header: t.header, to: path)
        let last = try #require(try TraceReader(path: path).index?.last)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        try #require(FileManager.default.createFile(atPath: path, contents: bytes.prefix(Int(last.endOffset))))
        #expect(throws: ReplayError.self) { try WatchReplayer(path: path) }
        let r = try WatchReplayer(path: path, allowDamaged: true)
        #expect(r.run() == .finished, "\(r.divergence?.description ?? "")")
        #expect(r.readProblem != nil)
    }

    @Test func aGapTheRecorderLeftOrAForeignRecordStopsTheReplayThere() throws {
        let t = try Self.trace("watch-offline")
        defer { t.remove() }
        let at = t.records.count / 2
        var gap = t.records
        gap.insert(TraceRecord(kind: .dropped, time: t.records[at].time, payload: Array(#"{"count":3}"#.utf8)), at: at)
        let d = try #require(try divergence(t.header, gap))
        #expect(d.record == at && d.kind == .undecodable && d.actual.contains("dropped"))
        var foreign = t.records
        foreign.insert(TraceRecord(kind: .transportOpened, time: t.records[at].time, channel: .watch, generation: 1), at: at)
        let d2 = try #require(try divergence(t.header, foreign))
        #expect(d2.record == at && d2.kind == .undecodable && d2.actual.contains("channel watch"))
    }
}

/// Bad input never crashes a watch replay: payloads damaged inside valid chunks stop it with a divergence
/// at or after the damaged record, or do not matter.
@Suite struct WatchReplayFuzzTests {
    @Test(arguments: ["watch-offline", "watch-restart"])
    func damagedPayloadsStopTheReplayAtOrAfterTheDamageAndNeverCrash(name: String) throws {
        let t = try WatchTraceFile(name, seed: 5, duration: .seconds(600))
        defer { t.remove() }
        var rng = SeededRandom(seed: 0x57A7)
        var diverged = 0
        let candidates = t.records.indices.filter { !t.records[$0].payload.isEmpty }
        for _ in 0..<300 {
            let victim = candidates[Int(rng.next(upperBound: UInt64(candidates.count)))]
            var damaged = t.records
            var p = damaged[victim].payload
            let i = Int(rng.next(upperBound: UInt64(p.count)))
            switch rng.next(upperBound: UInt64(3)) {
            case 0: p[i] = UInt8(truncatingIfNeeded: rng.next())
            case 1: p.insert(UInt8(truncatingIfNeeded: rng.next()), at: i)
            default: if p.count > 1 { p.remove(at: i) }
            }
            damaged[victim].payload = p
            let r = try WatchReplayer(header: t.header, records: damaged)
            switch r.run() {
            case .finished: continue
            case .diverged(let d):
                diverged += 1
                #expect(d.record >= victim, "no divergence before the damaged record #\(victim): #\(d.record)")
            case .paused, .damaged, .refused:
                Issue.record("an in-memory watch replay only finishes or diverges")
            }
        }
        #expect(diverged > 200, "most damage shows: \(diverged) of 300")
    }
}

/// Stepping a watch replay: conditions, breakpoints, and stepping back (from the start again).
@Suite struct WatchReplaySteppingTests {
    @Test func steppingForwardAndBackVisitsTheSameStatesInReverse() throws {
        let t = try WatchTraceFile("watch-restart", seed: 4, duration: .seconds(300))
        defer { t.remove() }
        let r = try WatchReplayer(header: t.header, records: t.records)
        var forward = [r.description]
        while r.step() != nil { forward.append(r.description) }
        #expect(r.divergence == nil && forward.count > 100)
        var backward = [r.description]
        while r.stepBack() { backward.append(r.description) }
        #expect(backward == forward.reversed())
        #expect(r.position == 0 && r.watch == nil && r.inputsFed == 0)
    }

    @Test func runUntilPausesBeforeTheFirstMatchingRecordAndContinuesPastIt() throws {
        let t = try WatchTraceFile("watch-offline", seed: 4)
        defer { t.remove() }
        let r = try WatchReplayer(header: t.header, records: t.records)
        guard case .paused(let at, _) = r.run(until: [.time(.seconds(120))]) else { Issue.record("must pause"); return }
        #expect(at == t.records.firstIndex { $0.time >= .seconds(120) })
        #expect(r.position == at)
        let fires = t.records.indices.filter { i in
            if case .watch(.timerFired(.stalledAck))? = t.input(i) { true } else { false }
        }
        try #require(fires.count >= 2)
        r.breakpoints = [.timer("stalledAck")]
        let firstAfter = try #require(fires.first { $0 >= at })
        guard case .paused(let fire, let why) = r.run(until: []) else { Issue.record("must pause at a stalled-ack fire"); return }
        #expect(fire == firstAfter && why == "timer stalledAck")
        guard case .paused(let next, _) = r.run(until: []) else { Issue.record("must pause at the next fire"); return }
        #expect(next == fires.first { $0 > fire }, "continuing from a pause goes past the condition that held there")
        r.breakpoints = []
        // Relay-only conditions are refused before anything is replayed, not left never to hold.
        let before = r.position
        for c: ReplayCondition<WatchReplaySnapshot> in [.messageType("registered"), .method("session.list"), .eventType("x")] {
            guard case .refused(let what, let why) = r.run(until: [.time(.seconds(1)), c]) else { Issue.record("\(c) must be refused"); continue }
            #expect(what == c.description && why.contains("no relay frames"))
            #expect(r.position == before)
        }
        r.breakpoints = [.method("session.list")]
        guard case .refused = r.run(until: []) else { Issue.record("a refused breakpoint refuses the run"); return }
        r.breakpoints = []
        #expect(r.run(until: []) == .finished)
    }

    @Test func aStateConditionReadsTheFourMachines() throws {
        let t = try WatchTraceFile("watch-offline", seed: 4)
        defer { t.remove() }
        let r = try WatchReplayer(header: t.header, records: t.records)
        guard case .paused(let at, let why) = r.run(until: [.state({ $0.phone != nil && $0.watch != nil }, "both launched")]) else {
            Issue.record("must pause once both sides are launched"); return
        }
        #expect(why == "state: both launched")
        #expect(r.watch != nil && r.phone != nil)
        // The record before the pause is the one that launched the second side.
        let r2 = try WatchReplayer(header: t.header, records: t.records)
        r2.seek(to: at - 1)
        #expect(r2.watch == nil || r2.phone == nil)
        #expect(r.run(until: []) == .finished)
    }
}

/// `WatchTraceReplay`, the Swift Testing helper for watch traces in users' test targets.
@Suite struct WatchTraceReplayHelperTests {
    @Test func pausesAtAStalledAckAndReplaysToTheEnd() throws {
        let t = try WatchTraceFile("watch-offline", seed: 6)
        defer { t.remove() }
        let replay = try WatchTraceReplay(named: t.path)
        let at = try replay.pause(before: .timer("stalledAck"))
        #expect(at == t.records.indices.first { if case .watch(.timerFired(.stalledAck))? = t.input($0) { true } else { false } })
        #expect(replay.replayer.watch?.queue.isEmpty == false, "a stall fires only with a command unacknowledged")
        #expect(replay.replayer.watch?.stallDeadline == t.records[at].time)
        replay.expectNoDivergence()
        #expect(replay.replayer.isAtEnd)
    }

    @Test func aChangedActionIsRecordedAsAnIssueNamingTheTrace() throws {
        let t = try WatchTraceFile("watch-offline", seed: 6, duration: .seconds(300))
        defer { t.remove() }
        let target = try #require(t.records.indices.first { WatchRecordCodec.isAction(t.records[$0]) && t.records[$0].payloadText.contains("\"persist\"") })
        var records = t.records
        records[target] = try edited(records[target]) { $0["value"] = "1" }
        let path = t.path + ".changed"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try writeTrace(records, header: t.header, to: path)
        let replay = try WatchTraceReplay(named: path)
        withKnownIssue("the changed persist diverges") {
            replay.expectNoDivergence()
        }
        #expect(replay.replayer.divergence?.record == target)
        #expect(throws: (any Error).self) { try WatchTraceReplay(named: "no-such-trace-\(UInt64.random(in: 0...UInt64.max))") }
    }
}
