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
