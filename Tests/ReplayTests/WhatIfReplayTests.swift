import Capture
import Foundation
import RelayClient
import RelayProtocol
import Replay
import Testing
import Trace

@Suite struct WhatIfReplayTests {
    private func load(_ name: String) throws -> (TraceHeader, [TraceRecord]) {
        let path = try simulatedTrace(name)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        return (reader.header, reader.readAll().entries.map(\.record))
    }

    private func completed(_ report: WhatIfReport) -> [(CallID, Bool)] {
        report.actions.compactMap { _, a in
            if case .callCompleted(let id, let outcome) = a {
                if case .success = outcome { return (id, true) }
                return (id, false)
            }
            return nil
        }
    }

    @Test(arguments: ["tour", "lease", "invalid-resume", "handover", "background", "rpc-timeout-replaced", "offline-queue"])
    func anUnchangedClientFindsACounterpartForEveryRecordedFrame(name: String) throws {
        let (header, records) = try load(name)
        let report = try WhatIfReplayer(header: header, records: records).run()
        #expect(report.unmatched.isEmpty, "\(report)")
        let recordedOut = records.filter { $0.kind == .frameText && $0.direction == .outbound }.count
        let actualOut = report.actions.filter { if case .send = $0.action { true } else { false } }.count
        #expect(actualOut == recordedOut, "the same client sends the same frames: \(actualOut) vs \(recordedOut)")
    }

    @Test func aClientWithAnotherSeedStillGetsEveryAnswer() throws {
        let (header, records) = try load("tour")
        var config = try ClientCapture.configuration(from: header)
        config.seed = header.seed &+ 1
        let report = try WhatIfReplayer(header: header, records: records, machine: RelayClientMachine(configuration: config)).run()
        #expect(report.unmatched.isEmpty, "\(report)")
        #expect(report.unanswered.isEmpty, "\(report)")
        let calls = completed(report)
        #expect(calls.count == 6)
        #expect(calls.allSatisfy { $0.1 }, "every call got its recorded answer under its own request ID and trace ID")
    }

    @Test func aCallTheChangedClientNeverMakesLeavesItsResponseReported() throws {
        let (header, records) = try load("tour")
        let dropped = try #require(records.firstIndex { $0.kind == .input && $0.payloadText.contains("\"method\":\"session.list\"") })
        var changed = records
        changed.remove(at: dropped)
        let report = try WhatIfReplayer(header: header, records: changed).run()
        #expect(report.unmatched.count == 1, "\(report)")
        #expect(report.unmatched.first?.type == "rpc.response")
        #expect(report.unmatched.first?.reason.contains("never sent") == true)
    }
}

extension WhatIfReplayTests {
    @Test func aClientRestartEndsOneClientAndStartsAFreshOneWithTheMarkersSeed() throws {
        let (header, records) = try load("offline-queue")
        let marker = try #require(records.firstIndex { $0.kind == .marker && $0.payloadText.hasPrefix("client restart seed=") })
        let restartAt = records[marker].time
        let replayer = try WhatIfReplayer(header: header, records: records)
        let report = replayer.run()
        #expect(report.unmatched.isEmpty, "\(report)")
        // The same frames in the same order, on both sides of the restart.
        func types(_ texts: [String]) -> [String] { texts.compactMap { try? RelayMessage(decodingText: $0).typeName } }
        let recorded = types(records.filter { $0.kind == .frameText && $0.direction == .outbound }.map(\.payloadText))
        let sent = types(report.actions.compactMap { if case .send(_, .text(let t), _) = $0.action { t } else { nil } })
        #expect(sent == recorded)
        // After the restart a fresh client starts over: it reads its identity, opens generation 1 again
        // and resumes with the token it persisted.
        let after = report.actions.filter { $0.time >= restartAt }.map(\.action)
        guard case .identity(.readIdentity)? = after.first else {
            Issue.record("a fresh client first reads its identity, got \(String(describing: after.first))")
            return
        }
        let opens = after.compactMap { if case .openTransport(let g, _, _) = $0 { g } else { nil } }
        #expect(opens.first == Generation(1))
        #expect("client restart seed=\(replayer.machine.configuration.seed)" == records[marker].payloadText)
        // Nothing of the dead client runs after the restart: no timer it armed fires later.
        let deadTimers = report.actions.filter { $0.time < restartAt }.compactMap { if case .armTimer(let id, let d) = $0.action, d > restartAt { id } else { nil } }
        #expect(!deadTimers.isEmpty, "the dead client had timers armed past its death")
    }

    @Test func anUnchangedClientAcrossARestartSaysWhatTheRecordedOneSaid() throws {
        // The dead process's late frames reach the fresh client as recorded: it calls them stale (a frame
        // on the dead g2) or answers to no pending call, word for word as the recorded client did.
        let (header, records) = try load("offline-queue")
        let report = try WhatIfReplayer(header: header, records: records).run()
        let recorded = records.compactMap { r -> DiagnosticRecord? in
            guard r.kind == .action, let j = try? JSONValue(parsing: r.payload), j["action"] == "diagnostic" else { return nil }
            return DiagnosticRecord(json: j, ignoring: ["action"])
        }
        let replayed = report.actions.compactMap { if case .diagnostic(let d) = $0.action { d.record } else { nil } }
        #expect(recorded.contains { $0.code == "staleGeneration" && $0.fields["gen"] == 2 && $0.fields["input"] == "frame" },
                "the trace has a frame of the dead process")
        #expect(replayed == recorded)
    }

    @Test func recordNumbersInAReportAfterARestartAreTheTrace() throws {
        let (header, records) = try load("offline-queue")
        let marker = try #require(records.firstIndex { $0.kind == .marker })
        // The restarted client loads an empty offline queue: it never resends, so the recorded answer to
        // the resend has no counterpart. The report must name that answer's record in the whole trace.
        let loaded = try #require(records.indices.first { $0 > marker && records[$0].kind == .input && records[$0].payloadText.contains("offlineQueue.loaded") })
        var changed = records
        changed[loaded].payload = Array(#"{"input":"offlineQueue.loaded","mutations":[]}"#.utf8)
        func message(_ i: Int) -> RelayMessage? { try? RelayMessage(decodingText: records[i].payloadText) }
        let resend = try #require(records.indices.first { i in
            guard i > marker, records[i].kind == .frameText, records[i].direction == .outbound, case .rpcRequest? = message(i) else { return false }
            return true
        })
        guard case .rpcRequest(let request)? = message(resend) else { return }
        let answer = try #require(records.indices.first { i in
            guard i > resend, records[i].direction == .inbound, case .rpcResponse(let r)? = message(i) else { return false }
            return r.id == request.id
        })
        let report = try WhatIfReplayer(header: header, records: changed).run()
        #expect(report.unmatched.contains { $0.record == answer && $0.type == "rpc.response" }, "\(report); expected #\(answer)")
        #expect(report.unmatched.allSatisfy { $0.record > marker })
    }

    @Test func aFaultTargetCountsDeliveriesAcrossLives() throws {
        let (header, records) = try load("offline-queue")
        let restartAt = try #require(records.first { $0.kind == .marker }).time
        let p = try RelayPerturbation(header: header, records: records)
        let clean = p.run(faults: [], record: true)
        // The clean run's own records: inbound frames fed before the restart are the first life's deliveries.
        let frames = clean.records.filter { $0.kind == .frameText && $0.direction == .inbound }
        let firstLife = frames.filter { $0.time < restartAt }.count
        // The second life's first delivery: the first frame on a socket the fresh client opened (frames
        // on the dead process's sockets are fed as recorded, not delivered).
        let opened = clean.records.filter { $0.kind == .transportOpen && $0.time >= restartAt }
        let firstOfSecondLife = try #require(frames.first { f in
            f.time > restartAt && opened.contains { $0.generation == f.generation && $0.time <= f.time }
        })
        #expect(p.baselineDeliveries > firstLife)
        let killed = p.run(faults: [Fault(kind: .kill, target: firstLife, amount: .zero)], record: true)
        let close = try #require(killed.records.first { $0.kind == .transportClosed && $0.payloadText.contains("perturbation") })
        #expect(close.payloadText.contains("killed at inbound frame \(firstLife)"), "\(close.payloadText)")
        #expect(close.time == firstOfSecondLife.time, "the kill replaced the second life's first delivery")
        let before = { (r: PerturbedRun) in r.records.filter { $0.time < restartAt } }
        #expect(before(killed) == before(clean), "the first life is untouched")
    }

    @Test func anOpenTheRecordingNeverSawAnsweredStaysPending() throws {
        let (header, records) = try load("tour")
        // The recording ends while the second socket is connecting.
        let opens = records.indices.filter { records[$0].kind == .transportOpen }
        try #require(opens.count >= 2)
        let cut = Array(records[...opens[1]])
        let report = try WhatIfReplayer(header: header, records: cut).run()
        let recordedOut = cut.filter { $0.kind == .frameText && $0.direction == .outbound }.count
        let sent = report.actions.filter { if case .send = $0.action { true } else { false } }.count
        #expect(sent == recordedOut, "no register on a socket the recording never saw open")
        #expect(report.unanswered.contains { $0.contains("never answered in the recording either") }, "\(report)")
    }

    @Test func perturbationFollowsARestartInsteadOfRunningNothing() throws {
        let (header, records) = try load("offline-queue")
        let p = try RelayPerturbation(header: header, records: records)
        #expect(p.baselineDeliveries > 5, "the unperturbed run delivers the recorded answers of both lives")
        let clean = p.run(faults: [], record: true)
        #expect(clean.violation == nil, "a fresh client numbers its generations from 1 again: not a second live socket")
        #expect(clean.records.contains { $0.kind == .marker && $0.payloadText.hasPrefix("client restart seed=") })
        var broken = 0
        for seed in UInt64(1)...30 where p.run(seed: seed).violation != nil { broken += 1 }
        #expect(broken == 0)
    }

    @Test func strictReplayWithAnotherSeedDivergesAtTheFirstRequest() throws {
        let (header, records) = try load("tour")
        var other = header
        other.seed = header.seed &+ 1
        let replayer = try Replayer(header: other, records: records)
        guard case .diverged(let d) = replayer.run() else { Issue.record("must diverge"); return }
        let first = try #require(records.firstIndex { $0.kind == .frameText && $0.direction == .outbound && $0.payloadText.contains("rpc.request") })
        #expect(d.record <= first, "request IDs and trace IDs come from the seed: the first request (or its timer) differs")
        #expect(d.rule?.section == "A8")
    }
}
