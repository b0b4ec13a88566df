import Foundation
import RelayProtocol
import Testing
import Trace

/// `relaytrace simulate` and `relaytrace replay`, run as a user would.
@Suite struct ReplayAndSimulateCommandTests {
    @Test func simulateWritesAVerifiableTraceAndTheSameBytesForTheSameSeed() throws {
        let a = tempPath("rtrace"), b = tempPath("rtrace")
        defer {
            try? FileManager.default.removeItem(atPath: a)
            try? FileManager.default.removeItem(atPath: b)
        }
        let r = try relaytrace(["simulate", "--scenario", "lease", "--seed", "5", "-o", a])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("simulated lease"))
        #expect(r.stdout.contains("next: relaytrace info"))
        #expect(try relaytrace(["verify", a]).status == 0)
        #expect(try relaytrace(["simulate", "--scenario", "lease", "--seed", "5", "-o", b]).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: a)) == Data(contentsOf: URL(fileURLWithPath: b)))
    }

    @Test func simulateUsageErrors() throws {
        for args in [["simulate", "--scenario", "nope"], ["simulate", "--duration", "soon"], ["simulate", "--seed", "-1"]] {
            let r = try relaytrace(args)
            #expect(r.status == 64, "\(args)")
            #expect(r.stderr.contains("Error:"))
        }
        let missing = try relaytrace(["simulate", "--faults", "/nonexistent/faults", "-o", tempPath("rtrace")])
        #expect(missing.status == 66)
        let badFaults = tempPath("faults")
        try "at soon relay restart\n".write(toFile: badFaults, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: badFaults) }
        let bad = try relaytrace(["simulate", "--faults", badFaults, "-o", tempPath("rtrace")])
        #expect(bad.status == 65)
        #expect(bad.stderr.contains("line 1"))
    }

    @Test func replayOfAKilledRecordersTraceNeedsAllowIncomplete() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "tour", "--duration", "10m", "-o", path]).status == 0)
        let index = try #require(try TraceReader(path: path).index)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        // Chunk 3 whole, chunk 4 half written: as a recorder killed mid-write leaves it.
        try #require(FileManager.default.createFile(atPath: path, contents: bytes.prefix(Int(index[4].offset) + Int(index[4].compressedSize) / 2)))
        let intact = index[4].firstRecord
        let refused = try relaytrace(["replay", path])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("truncated"), "\(refused.stderr)")
        #expect(refused.stderr.contains("The \(intact) records before the problem are intact; pass --allow-incomplete"), "\(refused.stderr)")
        let allowed = try relaytrace(["replay", "--allow-incomplete", path])
        #expect(allowed.status == 0, "\(allowed.stdout)\(allowed.stderr)")
        #expect(allowed.stdout.contains("replayed \(intact) records: no divergence"), "\(allowed.stdout)")
        #expect(allowed.stdout.contains("the trace is incomplete and ends there: truncated"), "\(allowed.stdout)")
    }

    @Test func replayOfADamagedCompleteTraceExitsSixtyFiveNamingTheRecord() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "tour", "--duration", "10m", "-o", path]).status == 0)
        let index = try #require(try TraceReader(path: path).index)
        let victim = index[index.count - 2]
        var bytes = try #require(FileManager.default.contents(atPath: path))
        bytes[Int(victim.frameOffset) + 20] ^= 0x80
        try #require(FileManager.default.createFile(atPath: path, contents: bytes))
        let r = try relaytrace(["replay", path])
        #expect(r.status == 65, "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("damaged at record #\(victim.firstRecord)"), "\(r.stderr)")
        #expect(r.stderr.contains("byte offset \(victim.offset)"), "\(r.stderr)")
        let whatIf = try relaytrace(["replay", "--what-if", path])
        #expect(whatIf.status == 65, "\(whatIf.stderr)")
        let asJSON = try relaytrace(["replay", path, "--format", "json"])
        #expect(asJSON.status == 65)
        let j = try JSONValue(parsing: asJSON.stdout)
        #expect(j["result"] == "damaged")
        #expect(j["damage"]?["record"]?.intValue == Int64(victim.firstRecord))
        #expect(j["damage"]?["offset"]?.intValue == Int64(victim.offset))
        #expect(j["damage"]?["code"] == "checksumMismatch")
        let stepped = try sh("printf 'continue\\nquit\\n' | \"$RT\" replay '\(path)' --step")
        #expect(stepped.status == 65, "\(stepped.stdout)")
        #expect(stepped.stdout.contains("the trace is damaged at record #\(victim.firstRecord)"))
    }

    @Test func replayExitsZeroOnAMatchingTraceAndOneOnADivergence() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "invalid-resume", "-o", path]).status == 0)
        let ok = try relaytrace(["replay", path])
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("no divergence"))

        // Change one recorded action: the replay must stop there with a report.
        let reader = try TraceReader(path: path)
        let entries = reader.readAll().entries
        let target = try #require(entries.first { $0.record.kind == .action && $0.record.payloadText.contains("\"reRegister\"") && $0.record.payloadText.contains("armTimer") })
        let tampered = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: tampered) }
        var options = TraceWriterOptions()
        options.redactionKey = reader.header.redaction.key
        let writer = try TraceWriter(path: tampered, header: reader.header, options: options)
        for e in entries {
            var r = e.record
            if e.number == target.number { r.payload = Array(r.payloadText.replacingOccurrences(of: "265000000", with: "300000000").utf8) }
            writer.append(r)
        }
        _ = try writer.close()
        let diverged = try relaytrace(["replay", tampered])
        #expect(diverged.status == 1)
        #expect(diverged.stdout.contains("divergence at record #\(target.number)"))
        #expect(diverged.stdout.contains("SPEC A7"))
        #expect(diverged.stdout.contains("$.deadline: expected 300000000, got 265000000"))

        // The same results as JSON, for scripts: same exit codes, the report's parts as members.
        let okJSON = try relaytrace(["replay", path, "--format", "json"])
        #expect(okJSON.status == 0)
        let ok1 = try JSONValue(parsing: okJSON.stdout)
        #expect(ok1["result"] == "finished")
        #expect(ok1["position"] == ok1["records"])
        let divJSON = try relaytrace(["replay", tampered, "--format", "json"])
        #expect(divJSON.status == 1)
        let d = try JSONValue(parsing: divJSON.stdout)
        #expect(d["result"] == "diverged")
        #expect(d["divergence"]?["record"]?.intValue == Int64(target.number))
        #expect(d["divergence"]?["kind"] == "different")
        #expect(d["divergence"]?["rule"]?["section"]?.stringValue?.hasPrefix("A7") == true)
        #expect(d["divergence"]?["differences"]?.arrayValue?.contains("$.deadline: expected 300000000, got 265000000") == true)
        #expect((d["divergence"]?["context"]?.arrayValue?.count ?? 0) > 1)
        let paused = try JSONValue(parsing: try relaytrace(["replay", path, "--until", "0.2", "--format", "json"]).stdout)
        #expect(paused["result"] == "paused")
        #expect(paused["state"]?["phase"]?.stringValue?.hasPrefix("registering") == true, "\(paused)")
        #expect(paused["state"]?["timers"]?.arrayValue?.isEmpty == false)
        let whatIf = try relaytrace(["replay", path, "--what-if", "--format", "json"])
        #expect(whatIf.status == 0)
        let w = try JSONValue(parsing: whatIf.stdout)
        #expect(w["result"] == "matched" && w["unmatched"]?.arrayValue?.isEmpty == true && (w["inputs"]?.intValue ?? 0) > 0)
        for bad in [["--step", "--format", "json"], ["--perturb", "1", "--format", "json"], ["--format", "yaml"]] {
            #expect(try relaytrace(["replay", path] + bad).status == 64, "\(bad)")
        }
    }

    @Test func replayStepIsDrivableThroughAPipe() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "invalid-resume", "-o", path]).status == 0)
        let r = try sh("printf 'next 3\\nbreak timer=reRegister\\ncontinue\\nstate\\nback 2\\ntimers\\ncontinue\\ncontinue\\nquit\\n' | \"$RT\" replay '\(path)' --step")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("paused before #18: timer reRegister"))
        #expect(r.stdout.contains("phase:      registering(g1)"))
        #expect(r.stdout.contains("reRegister(g1) at 0.265s"))
        #expect(r.stdout.contains("finished: no divergence"))
    }

    @Test func replayUntilPrintsTheStateThere() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "lease", "-o", path]).status == 0)
        let r = try relaytrace(["replay", path, "--until", "30s"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("lease:      sess-lease"))
        #expect(try relaytrace(["replay", path, "--break", "colour=blue"]).status == 64)
        #expect(try relaytrace(["replay", "/nonexistent.rtrace"]).status == 66)
    }

    @Test func whatIfReplayReportsCounterpartsAndRefusesStepping() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "tour", "-o", path]).status == 0)
        let r = try relaytrace(["replay", path, "--what-if"])
        #expect(r.status == 0, "\(r.stdout)")
        #expect(r.stdout.contains("recorded frames without a counterpart: 0"))
        #expect(try relaytrace(["replay", path, "--what-if", "--step"]).status == 64)
    }

    @Test func anExistingTraceIsNeverOverwrittenWithoutForce() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "lease", "-o", path]).status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let again = try relaytrace(["simulate", "--scenario", "tour", "-o", path])
        #expect(again.status == 74)
        #expect(again.stderr.contains("Error:"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the recorded trace is untouched")
        #expect(try relaytrace(["simulate", "--scenario", "tour", "-o", path, "--force"]).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) != before)
    }
}
