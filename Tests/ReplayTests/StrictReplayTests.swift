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
        #expect(replayer.records == entries.map(\.record))
        let whole = try Replayer(path: path)
        #expect(Array(whole.records.prefix(entries.count)) == replayer.records)
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
        let report = try WhatIfReplayer(header: replay.replayer.header, records: replay.replayer.records,
                                        machine: RelayClientMachine(configuration: config, tuning: tuning)).run()
        let failures = report.actions.compactMap { t, a -> Moment? in if case .connectionFailed(_, .handshakeTimeout) = a { t } else { nil } }
        #expect(failures.count == 1)
    }
}
