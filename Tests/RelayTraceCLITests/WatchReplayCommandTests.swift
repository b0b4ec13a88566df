import Foundation
import RelayProtocol
import Testing
import Trace

/// `relaytrace replay FILE` on watch-channel traces, run as a user would.
@Suite struct WatchReplayCommandTests {
    /// Simulates `scenario` with `seed` into a new temporary file.
    static func simulate(_ scenario: String, seed: Int) throws -> String {
        let path = tempPath("rtrace")
        let r = try relaytrace(["simulate", "--scenario", scenario, "--seed", String(seed), "-o", path])
        #expect(r.status == 0, "\(r.stderr)")
        return path
    }

    /// Rewrites the trace at `path` into a new file, records changed by `change` (nil drops one).
    static func rewrite(_ path: String, _ change: (Int, TraceRecord) -> TraceRecord?) throws -> String {
        let reader = try TraceReader(path: path)
        let out = tempPath("rtrace")
        var options = TraceWriterOptions()
        options.redactionKey = reader.header.redaction.key
        let writer = try TraceWriter(path: out, header: reader.header, options: options)
        for (n, e) in reader.readAll().entries.enumerated() {
            if let r = change(n, e.record) { writer.append(r) }
        }
        _ = try writer.close()
        return out
    }

    @Test(arguments: ["watch-offline", "watch-restart"], [3, 11])
    func everyWatchScenarioReplaysWithNoDivergence(scenario: String, seed: Int) throws {
        let path = try Self.simulate(scenario, seed: seed)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let count = try TraceReader(path: path).readAll().entries.count
        let r = try relaytrace(["replay", path])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("replayed \(count) records: no divergence (channel watch: "), "\(r.stdout)")
        #expect(r.stdout.contains("\(scenario == "watch-restart" ? 2 : 1) watch launch(es), 1 phone launch(es)"), "\(r.stdout)")
        let j = try JSONValue(parsing: try relaytrace(["replay", path, "--format", "json"]).stdout)
        #expect(j["result"] == "finished")
        #expect(j["channel"] == "watch")
        #expect(j["records"]?.intValue == Int64(count))
        #expect(j["position"] == j["records"])
        #expect((j["actions"]?.intValue ?? 0) > 500)
        #expect(j["state"]?["watch"]?["queued"]?.intValue == 0)
    }

    @Test func aChangedOrRemovedActionExitsOneWithTheReportAndTheJSON() throws {
        let path = try Self.simulate("watch-offline", seed: 4)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let records = try TraceReader(path: path).readAll().entries.map(\.record)
        let target = try #require(records.indices.first { $0 > 300 && records[$0].kind == .action && records[$0].payloadText.hasSuffix(#""watch":"execute"}"#) })
        let changed = try Self.rewrite(path) { n, r in
            guard n == target else { return r }
            var c = r
            c.payload = Array(r.payloadText.replacingOccurrences(of: #""watch":"execute"}"#, with: #""watch":"execute","x":1}"#).utf8)
            return c
        }
        defer { try? FileManager.default.removeItem(atPath: changed) }
        let r = try relaytrace(["replay", changed])
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("divergence at record #\(target), t=\(records[target].time) (different)"), "\(r.stdout)")
        #expect(r.stdout.contains("SPEC C3/C5"))
        #expect(r.stdout.contains("$.x: expected 1, missing"))
        #expect(r.stdout.contains("To investigate: relaytrace replay \(changed) --until"), "the real file name, not FILE: \(r.stdout)")
        #expect(r.stdout.contains("or relaytrace show \(changed) \(target)."), "\(r.stdout)")
        #expect(r.stdout.contains("--step"), "watch traces step too")
        #expect(r.stdout.contains("the machines where the replay stopped (before record #\(target)):"))
        let j = try JSONValue(parsing: try relaytrace(["replay", changed, "--format", "json"]).stdout)
        #expect(j["result"] == "diverged")
        #expect(j["divergence"]?["record"]?.intValue == Int64(target))
        #expect(j["divergence"]?["kind"] == "different")
        #expect(j["divergence"]?["rule"]?["section"] == "C3/C5")
        #expect(j["position"]?.intValue == Int64(target))
        // The last action of an input removed: the replayed machine's action is extra, at that record.
        func isAction(_ i: Int) -> Bool { records[i].kind == .action }
        let last = try #require(records.indices.first { i in
            i > 300 && i + 1 < records.count && isAction(i) && !isAction(i + 1) && records[i + 1].kind != .marker
        })
        let removed = try Self.rewrite(path) { n, r in n == last ? nil : r }
        defer { try? FileManager.default.removeItem(atPath: removed) }
        let x = try JSONValue(parsing: try relaytrace(["replay", removed, "--format", "json"]).stdout)
        #expect(x["divergence"]?["record"]?.intValue == Int64(last))
        #expect(x["divergence"]?["kind"] == "extra")
        #expect(x["divergence"]?["actual"]?.stringValue?.hasSuffix(records[last].payloadText) == true)
    }

    @Test func relayOnlyOptionsAreUsageErrorsNamingWhatWatchTracesTake() throws {
        let path = try Self.simulate("watch-restart", seed: 2)
        defer { try? FileManager.default.removeItem(atPath: path) }
        for args in [["--set", "heartbeatInterval=6s"], ["--what-if"]] {
            let r = try relaytrace(["replay", path] + args)
            #expect(r.status == 64, "\(args): \(r.stdout)\(r.stderr)")
            #expect(r.stderr.contains("is a watch-channel trace: it takes strict replay"), "\(args): \(r.stderr)")
            #expect(r.stderr.contains("--perturb"))
        }
        for args in [["--break", "type=registered"], ["--break", "phase=registered"], ["--break", "method=session.list"]] {
            let r = try relaytrace(["replay", path] + args)
            #expect(r.status == 64, "\(args): \(r.stdout)\(r.stderr)")
            #expect(r.stderr.contains("break on time=, record= or timer="), "\(args): \(r.stderr)")
        }
        // --perturb still runs on it.
        let p = try relaytrace(["replay", path, "--perturb", "1..3"])
        #expect(p.status == 0, "\(p.stdout)\(p.stderr)")
        #expect(p.stdout.contains("channel watch"))
    }

    @Test func aCutWatchTraceNeedsAllowIncompleteAndADamagedOneExitsSixtyFive() throws {
        let path = try Self.simulate("watch-offline", seed: 5)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let index = try #require(try TraceReader(path: path).index)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        let cut = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: cut) }
        try #require(FileManager.default.createFile(atPath: cut, contents: bytes.prefix(Int(index[6].offset) + Int(index[6].compressedSize) / 2)))
        let intact = index[6].firstRecord
        let refused = try relaytrace(["replay", cut])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("The \(intact) records before the problem are intact; pass --allow-incomplete"), "\(refused.stderr)")
        let allowed = try relaytrace(["replay", "--allow-incomplete", cut])
        #expect(allowed.status == 0, "\(allowed.stdout)\(allowed.stderr)")
        #expect(allowed.stdout.contains("replayed \(intact) records: no divergence (channel watch"), "\(allowed.stdout)")
        #expect(allowed.stdout.contains("the trace is incomplete and ends there: truncated"), "\(allowed.stdout)")
        let allowedJSON = try JSONValue(parsing: try relaytrace(["replay", "--allow-incomplete", cut, "--format", "json"]).stdout)
        #expect(allowedJSON["result"] == "finished")
        #expect(allowedJSON["incomplete"]?.stringValue?.hasPrefix("truncated") == true, "\(allowedJSON)")

        var flipped = bytes
        let victim = index[index.count - 3]
        flipped[Int(victim.frameOffset) + 20] ^= 0x80
        let damaged = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: damaged) }
        try #require(FileManager.default.createFile(atPath: damaged, contents: flipped))
        let r = try relaytrace(["replay", damaged])
        #expect(r.status == 65, "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("damaged at record #\(victim.firstRecord)"), "\(r.stderr)")
        let j = try JSONValue(parsing: try relaytrace(["replay", damaged, "--format", "json"]).stdout)
        #expect(j["result"] == "damaged")
        #expect(j["damage"]?["record"]?.intValue == Int64(victim.firstRecord))
        #expect(j["damage"]?["code"] == "checksumMismatch")
    }

    @Test func untilAndBreakPauseAWatchReplayAndStepIsDrivableThroughAPipe() throws {
        let path = try Self.simulate("watch-restart", seed: 2)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let until = try relaytrace(["replay", path, "--until", "60"])
        #expect(until.status == 0, "\(until.stderr)")
        #expect(until.stdout.contains("paused before record #"), "\(until.stdout)")
        #expect(until.stdout.contains("watch:     launch 1"))
        let j = try JSONValue(parsing: try relaytrace(["replay", path, "--break", "timer=stalledAck", "--format", "json"]).stdout)
        #expect(j["result"] == "paused")
        #expect(j["paused"]?["reason"] == "timer stalledAck")
        let r = try sh("printf 'next 3\\nbreak timer=stalledAck\\ncontinue\\nstate\\nback 2\\nwhere\\ncontinue\\ndelete\\ncontinue\\nquit\\n' | \"$RT\" replay '\(path)' --step")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("breakpoints: timer stalledAck"))
        #expect(r.stdout.contains("timerFired {\"side\":\"watch\",\"timer\":\"stalledAck\""), "\(r.stdout)")
        #expect(r.stdout.contains("stall deadline"), "state shows the machines")
        #expect(r.stdout.contains("finished: no divergence"))
        let paused = r.stdout.components(separatedBy: "paused before #").count - 1
        #expect(paused == 2, "paused at the fire, and again after stepping back before it: \(paused)")
    }

    @Test func relayOnlyBreakConditionsAreRefusedOnAWatchTraceNotLeftNeverToHold() throws {
        let path = try Self.simulate("watch-restart", seed: 2)
        defer { try? FileManager.default.removeItem(atPath: path) }
        for expr in ["method=session.list", "type=registered", "event=session-updated", "phase=registered", "gen=1"] {
            let r = try relaytrace(["replay", path, "--break", expr])
            #expect(r.status == 64, "\(expr): \(r.stdout)\(r.stderr)")
            #expect(r.stderr.contains("is a watch-channel trace: break on time=, record= or timer="), "\(expr): \(r.stderr)")
            #expect(r.stdout.isEmpty, "nothing replayed: \(r.stdout)")
        }
        let r = try sh("printf 'break method=session.list\nbreak timer=stalledAck\ncontinue\nquit\n' | \"$RT\" replay '\(path)' --step")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("error: a watch trace: break on time=, record= or timer= (stalledAck, heartbeat); 'method session.list' is for relay-client traces"), "\(r.stdout)")
        #expect(r.stdout.contains("breakpoints: timer stalledAck\n"), "the refused one is not added: \(r.stdout)")
        #expect(r.stdout.contains("paused before #"))
    }
}
