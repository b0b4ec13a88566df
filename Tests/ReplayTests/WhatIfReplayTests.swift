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

    @Test(arguments: ["tour", "lease", "invalid-resume", "handover", "background", "rpc-timeout-replaced"])
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
