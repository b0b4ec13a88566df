import Capture
import Foundation
import ReplayTesting
import RelayClient
import RelayProtocol
import Replay
import Simulation
import Testing
import Trace

/// Writes a scenario's trace into a temp file and returns its path.
func simulatedTrace(_ name: String, seed: UInt64 = 1, duration: Duration? = nil) throws -> String {
    let scenario = try #require(Scenario.named(name))
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("replay-\(name)-\(seed)-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
    _ = try ScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: path)
    return path
}

@Suite struct StrictReplayTests {
    @Test(arguments: Scenario.all.map(\.name))
    func everyScenarioReplaysStrictlyWithNoDivergence(name: String) throws {
        let path = try simulatedTrace(name)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path)
        let stop = replayer.run()
        #expect(stop == .finished, "\(replayer.divergence?.description ?? "")")
        #expect(replayer.isAtEnd)
    }

    @Test func aChangedClientDivergesAtTheFirstRecordItChangesWithAClearReport() throws {
        let path = try simulatedTrace("lease")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        var records = reader.readAll().entries.map(\.record)
        // Tamper with the recorded renewal deadline, as if the client had used another constant.
        let index = try #require(records.firstIndex { r in
            guard r.kind == .action, let j = try? JSONValue(parsing: r.payload) else { return false }
            return j["action"] == "armTimer" && j["timer"]?["timer"] == "interest.renewal"
        })
        var json = try JSONValue(parsing: records[index].payload)
        guard case .object(var o) = json, let d = o["deadline"]?.intValue else { Issue.record("no deadline"); return }
        o["deadline"] = .int(d + 5_000_000_000)
        json = .object(o)
        records[index].payload = json.serialized()
        let replayer = try Replayer(header: reader.header, records: records)
        guard case .diverged(let divergence) = replayer.run() else {
            Issue.record("a changed interest renewal must diverge")
            return
        }
        #expect(divergence.record == index)
        #expect(divergence.kind == .different)
        #expect(divergence.rule?.section == "A11")
        #expect(divergence.jsonDifferences == ["$.deadline: expected \(d + 5_000_000_000), got \(d)"])
        let report = divergence.description
        #expect(report.contains("record #\(index)"))
        #expect(report.contains("context:"))
        #expect(report.contains("SPEC A11"))
    }

    @Test func aSecretBearingRecordRedactedAgainIsStillComparedWithItsOwnRecording() throws {
        // Every generation opens the transport with the same JWT, so its redaction is remembered after the first;
        // a later recording that differs must still diverge there, and the unchanged ones still match.
        let path = try simulatedTrace("tour", duration: .seconds(300))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        var records = reader.readAll().entries.map(\.record)
        let opens = records.indices.filter { records[$0].kind == .transportOpen }
        try #require(opens.count >= 3)
        #expect(Set(opens.map { records[$0].payload }).count == 1)
        #expect(try Replayer(header: reader.header, records: records).run() == .finished)
        let tampered = opens[2]
        let text = records[tampered].payloadText
        let placeholder = try #require(text.range(of: "Bearer rt:redacted:"))
        var changed = text
        changed.replaceSubrange(placeholder.upperBound..<text.index(placeholder.upperBound, offsetBy: 1),
                                with: text[placeholder.upperBound] == "0" ? "1" : "0")
        records[tampered].payload = Array(changed.utf8)
        let replayer = try Replayer(header: reader.header, records: records)
        guard case .diverged(let divergence) = replayer.run() else {
            Issue.record("a changed transportOpen must diverge")
            return
        }
        #expect(divergence.record == tampered)
        #expect(divergence.kind == .different)
    }

    @Test func aDamagedTraceReplaysUpToTheDamageOnlyWhenAllowed() throws {
        let path = try simulatedTrace("tour", duration: .seconds(300))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bytes = try #require(FileManager.default.contents(atPath: path))
        let cut = path + ".cut"
        defer { try? FileManager.default.removeItem(atPath: cut) }
        try #require(FileManager.default.createFile(atPath: cut, contents: bytes.prefix(bytes.count * 2 / 3)))
        let (entries, error) = try TraceReader(path: cut).readAll()
        #expect(error != nil)
        #expect(entries.count > 0)
        #expect(throws: ReplayError.self) { try Replayer(path: cut) }
        let replayer = try Replayer(path: cut, allowDamaged: true)
        #expect(Array(replayer.records) == entries.map(\.record))
        #expect(!replayer.records.isFileBacked, "an incomplete trace is read whole, up to its damage")
        let whole = try Replayer(path: path)
        #expect(whole.records.isFileBacked, "a complete trace is read a chunk at a time")
        #expect(Array(whole.records.prefix(entries.count)) == Array(replayer.records))
    }

    @Test func anIncompleteTraceCutBetweenAnInputAndItsActionsReplaysToItsEndOnlyWhenAllowed() throws {
        let path = try simulatedTrace("lease")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        // A timer that fired in the second half, with the actions it caused: keep the firing, lose the rest.
        let fired = try #require((records.count / 2..<(records.count - 1)).first {
            records[$0].kind == .timerFired && ClientRecordCodec.isAction(records[$0 + 1])
        })
        let kept = Array(records[...fired])
        let complete = path + ".complete"
        defer { try? FileManager.default.removeItem(atPath: complete) }
        var options = TraceWriterOptions()
        options.redactionKey = reader.header.redaction.key
        let writer = try TraceWriter(path: complete, header: reader.header, options: options)
        for r in kept { writer.append(r) }
        _ = try writer.close()
        // Closed by its writer, the trace says nothing followed the firing: the client's actions are extra.
        guard case .diverged(let extra) = try Replayer(path: complete).run() else {
            Issue.record("a complete trace that ends before the actions of its last input must diverge")
            return
        }
        #expect(extra.kind == .extra && extra.record == kept.count)

        // Without index and trailer (the recorder was killed), the actions were lost, not skipped.
        let killed = path + ".killed"
        defer { try? FileManager.default.removeItem(atPath: killed) }
        let lastChunk = try #require(try TraceReader(path: complete).index?.last)
        let bytes = try #require(FileManager.default.contents(atPath: complete))
        try #require(FileManager.default.createFile(atPath: killed, contents: bytes.prefix(Int(lastChunk.endOffset))))
        do {
            _ = try Replayer(path: killed)
            Issue.record("an incomplete trace must be refused unless allowed")
        } catch {
            #expect(error.intactRecords == kept.count)
        }
        let replayer = try Replayer(path: killed, allowDamaged: true)
        #expect(replayer.records.count == kept.count)
        #expect(replayer.run() == .finished)
        #expect(replayer.readProblem != nil)
    }

    @Test func aCompleteTraceWithADamagedChunkReplaysUpToItAndStopsThere() throws {
        let path = try simulatedTrace("tour", duration: .seconds(600))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        let index = try #require(reader.index)
        #expect(index.count >= 6)
        let victim = index[index.count / 2]
        var bytes = try #require(FileManager.default.contents(atPath: path))
        let at = Int(victim.frameOffset) + Int(victim.compressedSize) / 2
        bytes[at] ^= 0x04
        let damaged = path + ".flipped"
        defer { try? FileManager.default.removeItem(atPath: damaged) }
        try #require(FileManager.default.createFile(atPath: damaged, contents: bytes))

        let replayer = try Replayer(path: damaged)
        #expect(replayer.records.isFileBacked)
        let stop = replayer.run()
        guard case .damaged(let record, let error) = stop else {
            Issue.record("expected the replay to stop at the damaged chunk, got \(stop)")
            return
        }
        #expect(record == Int(victim.firstRecord))
        #expect(error.code == .checksumMismatch)
        #expect(error.offset == victim.offset)
        #expect(replayer.position == Int(victim.firstRecord), "every record before the chunk was replayed")
        #expect(replayer.divergence == nil)
        #expect(replayer.step() == nil)
        #expect(replayer.records[record].kind == .unknown(0))
        #expect(replayer.records[record].payloadText.contains("CRC-32C"))

        // The same records in memory replay the same way up to there: the states agree.
        let good = try Replayer(path: path)
        good.seek(to: record)
        #expect("\(good.snapshot)" == "\(replayer.snapshot)")
        // Stepping back from the damage works and can come forward again to it.
        replayer.seek(to: record - 5)
        #expect(replayer.damage == nil)
        guard case .damaged(record, _) = replayer.run() else {
            Issue.record("the damage must be met again")
            return
        }
    }

    @Test func aFileBackedReplayVisitsTheStatesOfAnInMemoryOneOverManyChunks() throws {
        let path = try simulatedTrace("tour", duration: .seconds(600))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        let file = try Replayer(path: path, checkpointInterval: 64)
        let memory = try Replayer(header: reader.header, records: records, checkpointInterval: 64)
        #expect(file.records.isFileBacked && !memory.records.isFileBacked)
        #expect(try #require(reader.index).count >= 6)
        var forward: [String] = []
        while true {
            #expect("\(file.snapshot)" == "\(memory.snapshot)")
            forward.append("\(file.snapshot)")
            let a = file.step(), b = memory.step()
            #expect(a == b)
            if a == nil { break }
        }
        #expect(file.isAtEnd && file.divergence == nil)
        // Backward over every chunk boundary, by checkpoint and forward replay from the file.
        var backward: [String] = ["\(file.snapshot)"]
        while file.stepBack() { backward.append("\(file.snapshot)") }
        #expect(backward == forward.reversed())
    }

    @Test func aGapTheRecorderLeftStopsTheReplayThereWithWhatHappened() throws {
        let path = try simulatedTrace("lease")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        var records = reader.readAll().entries.map(\.record)
        let at = records.count / 2
        records.insert(TraceRecord(kind: .dropped, time: records[at].time, payload: Array(#"{"count":12}"#.utf8)), at: at)
        let replayer = try Replayer(header: reader.header, records: records)
        guard case .diverged(let d) = replayer.run() else { Issue.record("a gap must stop a strict replay"); return }
        #expect(d.record == at && d.kind == .undecodable)
        #expect(d.actual.contains("dropped records"))
    }

    @Test func aMissingActionAndAnExtraActionAreBothReported() throws {
        let path = try simulatedTrace("background")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        let heartbeat = try #require(records.firstIndex { $0.kind == .frameText && $0.direction == .outbound && $0.payloadText.contains("heartbeat") })
        var withoutHeartbeat = records
        withoutHeartbeat.remove(at: heartbeat)
        let r1 = try Replayer(header: reader.header, records: withoutHeartbeat)
        guard case .diverged(let extra) = r1.run() else { Issue.record("must diverge"); return }
        #expect(extra.kind == .extra || extra.kind == .different)
        #expect(extra.actual.contains("heartbeat"))

        var withDuplicate = records
        withDuplicate.insert(records[heartbeat], at: heartbeat + 1)
        let r2 = try Replayer(header: reader.header, records: withDuplicate)
        guard case .diverged(let missing) = r2.run() else { Issue.record("must diverge"); return }
        #expect(missing.record == heartbeat + 1)
    }

    @Test func stepsForwardAndBackwardVisitTheSameStatesInReverse() throws {
        let path = try simulatedTrace("handover")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path, checkpointInterval: 16)
        var forward: [String] = ["\(replayer.snapshot)"]
        while replayer.step() != nil { forward.append("\(replayer.snapshot)") }
        #expect(replayer.divergence == nil)
        #expect(forward.count > 50)
        var backward: [String] = ["\(replayer.snapshot)"]
        while replayer.stepBack() { backward.append("\(replayer.snapshot)") }
        #expect(backward == forward.reversed())
    }

    @Test func runReportsProgressEveryIntervalUpToWhereItStops() throws {
        let path = try simulatedTrace("tour", duration: .seconds(600))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path)
        replayer.progressInterval = 100
        var seen: [Int] = []
        replayer.onProgress = { seen.append($0) }
        let stopAt = replayer.records.count / 2 + 17
        guard case .paused(let at, _) = replayer.run(until: [.record(stopAt)]) else {
            Issue.record("must pause at record \(stopAt)")
            return
        }
        #expect(at == stopAt)
        #expect(seen == Array(stride(from: 100, through: stopAt, by: 100)))
        seen = []
        for _ in 0..<150 { replayer.step() }
        #expect(seen.isEmpty, "stepping reports no progress")
        let from = stopAt + 150
        #expect(replayer.run() == .finished)
        #expect(seen == Array(stride(from: (from / 100 + 1) * 100, through: replayer.records.count, by: 100)))
    }

    @Test func boundedCheckpointsThinOutAndSteppingBackStillRetracesEveryState() throws {
        let path = try simulatedTrace("lease")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path, checkpointInterval: 2)
        replayer.maxCheckpoints = 5
        var forward: [String] = ["\(replayer.snapshot)"]
        var most = 0
        while replayer.step() != nil {
            forward.append("\(replayer.snapshot)")
            most = max(most, replayer.checkpointCount)
        }
        #expect(replayer.divergence == nil)
        #expect(forward.count > 100)
        #expect(most <= 5, "never more checkpoints than allowed")
        #expect(replayer.currentCheckpointInterval >= 2 * (forward.count / 2 / 5), "the interval doubled as the trace went on")
        var backward: [String] = ["\(replayer.snapshot)"]
        while replayer.stepBack() {
            backward.append("\(replayer.snapshot)")
            #expect(replayer.checkpointCount <= 5)
        }
        #expect(backward == forward.reversed())
        replayer.rewind()
        #expect(replayer.currentCheckpointInterval == 2 && replayer.checkpointCount == 1)
    }

    @Test func runUntilStopsBeforeTheFirstMatchingRecord() throws {
        let path = try simulatedTrace("invalid-resume")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path)
        guard case .paused(let at, _) = replayer.run(until: [.timer("reRegister")]) else { Issue.record("must pause"); return }
        let fired = replayer.records[at]
        #expect(fired.kind == .timerFired)
        // The re-register fires 0.2 s after the invalidResume arrived.
        let refusal = try #require(replayer.records[..<at].last { $0.kind == .frameText && $0.payloadText.contains("invalidResume") })
        #expect(fired.time - refusal.time == .milliseconds(200))
        #expect(replayer.machine.resumeCredentials == nil, "the token was dropped before the re-register")
        #expect(replayer.run() == .finished)
    }

    @Test func breakpointsOnMethodsAndStatePause() throws {
        let path = try simulatedTrace("tour")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replayer = try Replayer(path: path)
        replayer.breakpoints = [.method("session.update")]
        guard case .paused(let at, let why) = replayer.run() else { Issue.record("must pause"); return }
        #expect(why == "method session.update")
        #expect(replayer.records[at].payloadText.contains("session.update"))
        replayer.breakpoints = [.state({ $0.networkPath == .satisfied(.cellular) }, "on cellular")]
        guard case .paused(_, let why2) = replayer.run() else { Issue.record("must pause on cellular"); return }
        #expect(why2 == "state: on cellular")
        #expect(replayer.machine.networkPath == .satisfied(.cellular))
        replayer.breakpoints = []
        #expect(replayer.run() == .finished)
    }
}

/// A deliberately changed client constant makes the right trace diverge at the right record.
@Suite struct ChangedConstantTests {
    @Test func aSixSecondHeartbeatDivergesTheLeaseTraceAtItsFirstHeartbeatTimer() throws {
        var tuning = ClientTuning.spec
        tuning.heartbeatInterval = .seconds(6)
        let replay = try TraceReplay(named: "lease")
        let expected = try #require(replay.replayer.records.firstIndex { r in
            r.kind == .action && r.payloadText.contains("\"armTimer\"") && r.payloadText.contains("\"heartbeat\"")
        })
        let changed = try Replayer(header: replay.replayer.header, records: replay.replayer.records, tuning: tuning)
        guard case .diverged(let d) = changed.run() else { Issue.record("a 6 s heartbeat must diverge"); return }
        #expect(d.record == expected)
        #expect(d.rule?.section == "A6")
        #expect(d.jsonDifferences.count == 1)
        #expect(d.jsonDifferences.first?.hasPrefix("$.deadline:") == true)
    }

    @Test func aLongerHandshakeTimeoutDivergesTheHandshakeTraceWhereTheTimerIsArmed() throws {
        var tuning = ClientTuning.spec
        tuning.handshakeTimeout = .seconds(12)
        let replay = try TraceReplay(named: "handshake-timeout")
        let expected = try #require(replay.replayer.records.firstIndex { r in
            r.kind == .action && r.payloadText.contains("\"armTimer\"") && r.payloadText.contains("\"handshake\"")
        })
        let changed = try Replayer(header: replay.replayer.header, records: replay.replayer.records, tuning: tuning)
        guard case .diverged(let d) = changed.run() else { Issue.record("a 12 s handshake must diverge"); return }
        #expect(d.record == expected)
        #expect(d.rule?.section == "A6")
        // The same change in a what-if run: the client still registers, one socket later.
        var config = try ClientCapture.configuration(from: replay.replayer.header)
        config.seed = replay.replayer.header.seed
        let report = try WhatIfReplayer(header: replay.replayer.header, records: Array(replay.replayer.records),
                                        machine: RelayClientMachine(configuration: config, tuning: tuning)).run()
        let failures = report.actions.compactMap { t, a -> Moment? in if case .connectionFailed(_, .handshakeTimeout) = a { t } else { nil } }
        #expect(failures.count == 1)
    }
}
