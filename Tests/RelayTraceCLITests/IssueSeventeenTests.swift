import Foundation
import RelayProtocol
import Testing
import Trace

// MARK: 2. Incomplete traces are never silent

@Suite struct IncompleteTraceNoteTests {
    @Test(arguments: [["frames", "F", "--format", "jsonl"], ["stats", "F"], ["timeline", "F"], ["export", "F", "--format", "jsonl", "-o", "/dev/null", "--force"], ["lint", "F"]])
    func aKilledRecordersTraceIsNoted(template: [String]) throws {
        let path = try writeFailedSocketsTrace(close: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(template.map { $0 == "F" ? path : $0 })
        #expect(r.status == 0, "\(template) \(r.stderr)")
        #expect(r.stderr.contains("note: \(path) is incomplete (no valid index and trailer: its recorder did not close it): 8 intact records, the last at 7.050s"), "\(template) \(r.stderr)")
        // A complete trace gets no note.
        let whole = try writeFailedSocketsTrace()
        defer { try? FileManager.default.removeItem(atPath: whole) }
        #expect(!(try relaytrace(template.map { $0 == "F" ? whole : $0 })).stderr.contains("incomplete"))
    }

    @Test func aTraceCutInTheMiddleOfAFrameIsNotedAndItsRecordsShown() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "tour", "--duration", "10m", "-o", path]).status == 0)
        let index = try #require(try TraceReader(path: path).index)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        try #require(FileManager.default.createFile(atPath: path, contents: bytes.prefix(Int(index[4].offset) + Int(index[4].compressedSize) / 2)))
        let intact = index[4].firstRecord
        let r = try relaytrace(["frames", path, "--format", "jsonl"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try jsonLines(r.stdout).count == Int(intact))
        #expect(r.stderr.contains("is incomplete"), "\(r.stderr)")
        #expect(r.stderr.contains("\(intact) intact records"), "\(r.stderr)")
        #expect(r.stderr.contains("the file ends in the middle of a frame"), "\(r.stderr)")
        #expect(try relaytrace(["verify", path]).status == 65)
    }
}

// MARK: 3. Names are checked

@Suite struct NameCheckCommandTests {
    @Test(arguments: [
        (["frames", "H", "--type", "rpc.reqest"], "--type 'rpc.reqest' is not a message type or record kind; did you mean 'rpc.request'?"),
        (["frames", "H", "--type", "chat:timeline-interest"], "--type 'chat:timeline-interest' is not a message type or record kind; 'chat:timeline-interest' is an event type: use --event chat:timeline-interest"),
        (["frames", "H", "--event", "device-stat"], "--event 'device-stat' is not an event type; did you mean 'device-status'?"),
        (["frames", "H", "--method", "files.serch"], "--method 'files.serch' is not an RPC method; did you mean 'files.search'?"),
        (["frames", "H", "--dir", "inn"], "The value 'inn' is invalid for '--dir <dir>'. Did you mean 'in'?"),
        (["replay", "H", "--break", "phase=bogus"], "break phase='bogus' is not a connection phase (one of: idle, connecting"),
        (["replay", "H", "--break", "phase=registerd"], "break phase='registerd' is not a connection phase; did you mean 'registered'?"),
        (["replay", "H", "--break", "timer=hearbeat"], "break timer='hearbeat' is not a timer (watch traces: stalledAck, heartbeat); did you mean 'heartbeat'?"),
        (["replay", "H", "--break", "type=rpc.respnse"], "break type='rpc.respnse' is not a message type; did you mean 'rpc.response'?"),
        (["replay", "H", "--break", "type=error AND gen=1"], "break expression 'type=error AND gen=1' has spaces in its value"),
        (["replay", "H", "--set", "heartbeatIntervl=6s"], "--set 'heartbeatIntervl' is not a client constant; did you mean 'heartbeatInterval'?"),
    ] as [([String], String)])
    func unknownNamesAreUsageErrorsWithASuggestion(args: [String], message: String) throws {
        let r = try relaytrace(args.map { $0 == "H" ? goldenTrace("handover") : $0 })
        #expect(r.status == 64, "\(args) \(r.stderr)")
        #expect(r.stderr.hasPrefix("Error: \(message)"), "\(r.stderr)")
    }

    @Test func aKnownNameAbsentFromTheTraceIsAWarning() throws {
        let r = try relaytrace(["frames", goldenTrace("handover"), "--method", "session.list", "--format", "jsonl"])
        #expect(r.status == 0)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("warning: no record matched --method session.list (with the other filters) in \(goldenTrace("handover"))"), "\(r.stderr)")
        let found = try relaytrace(["frames", goldenTrace("handover"), "--method", "files.search", "--format", "jsonl"])
        #expect(!found.stderr.contains("warning"), "\(found.stderr)")
    }

    @Test func relayRefusesAFaultScriptWhoseNameMatchesNothing() throws {
        let script = tempPath("faults")
        defer { try? FileManager.default.removeItem(atPath: script) }
        try "at 1s relay drop from-client type=chat:timeline-interest\n".write(toFile: script, atomically: true, encoding: .utf8)
        let r = try relaytrace(["simulate", "--scenario", "tour", "--duration", "5s", "--faults", script, "-o", tempPath("rtrace")])
        #expect(r.status != 0, "\(r.stdout)")
        #expect(r.stderr.contains("it is an event type: write event=chat:timeline-interest"), "\(r.stderr)")
    }
}

// MARK: 4. Repeated options

@Suite struct RepeatedOptionTests {
    @Test func everyBreakCounts() throws {
        let r = try relaytrace(["replay", goldenTrace("handover"), "--break", "record=46", "--break", "record=60", "--format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try JSONValue(parsing: r.stdout)["paused"]?["record"] == 46, "\(r.stdout)")
        // In --step every breakpoint pauses in turn (before: only the last --break counted).
        let s = try sh("printf 'continue\\ncontinue\\ncontinue\\nquit\\n' | \"$RT\" replay '\(goldenTrace("handover"))' --step --break method=files.search --break type=resumed")
        #expect(s.stdout.contains("paused before #44: method files.search"), "\(s.stdout)")
        #expect(s.stdout.contains("paused before #63: message type resumed"), "\(s.stdout)")
    }

    @Test func aRecordBreakpointPausesOnlyThere() throws {
        // Before: record=46 held at every record from 46 on, so continuing paused at #47, #48...
        let s = try sh("printf 'continue\\ncontinue\\nquit\\n' | \"$RT\" replay '\(goldenTrace("handover"))' --step --break record=46 --break record=60")
        #expect(s.stdout.contains("paused before #46: record 46"), "\(s.stdout)")
        #expect(s.stdout.contains("paused before #60: record 60"), "\(s.stdout)")
        #expect(!s.stdout.contains("paused before #47"), "\(s.stdout)")
        let t = try sh("printf 'continue\\ncontinue\\nquit\\n' | \"$RT\" replay '\(goldenTrace("handover"))' --step --break time=28")
        #expect(t.stdout.contains("paused before #44: time 28.000s"), "\(t.stdout)")
        #expect(!t.stdout.contains("paused before #45"), "\(t.stdout)")
        #expect(t.stdout.contains("finished: no divergence"), "\(t.stdout)")
    }

    @Test func repeatedFilterValuesAreOneList() throws {
        let both = try relaytrace(["frames", goldenTrace("handover"), "--method", "files.search", "--method", "system.ping", "--format", "jsonl"])
        let list = try relaytrace(["frames", goldenTrace("handover"), "--method", "files.search,system.ping", "--format", "jsonl"])
        #expect(both.status == 0)
        #expect(both.stdout == list.stdout)
        #expect(Set(try jsonLines(both.stdout).compactMap { $0["method"]?.stringValue }) == ["files.search", "system.ping"])
    }

    @Test(arguments: [
        (["frames", "H", "--dir", "in", "--dir", "out"], "'--dir' was given twice ('in' and 'out'); it takes one value"),
        (["replay", "H", "--perturb", "1", "--step"], "--perturb cannot go with --step; --perturb runs the whole trace per seed"),
        (["replay", "H", "--what-if", "--break", "record=3"], "--what-if cannot go with --break; --what-if runs the whole trace"),
        (["replay", "H", "--format", "json", "--step"], "--format json cannot go with --step"),
        (["replay", "H", "--shrink", "x.rtrace"], "--shrink goes with --perturb"),
        (["replay", "H", "--force"], "--force goes with --shrink"),
        (["timeline", "H", "--force"], "--force goes with --html"),
    ] as [([String], String)])
    func combinationsAreCheckedInOnePlace(args: [String], message: String) throws {
        let r = try relaytrace(args.map { $0 == "H" ? goldenTrace("handover") : $0 })
        #expect(r.status == 64, "\(args) \(r.stderr)")
        #expect(r.stderr.hasPrefix("Error: \(message)"), "\(r.stderr)")
    }
}

// MARK: 5. One overwrite policy

@Suite struct OverwritePolicyTests {
    @Test(arguments: [
        ["export", "H", "--format", "jsonl", "-o", "OUT"], ["timeline", "H", "--html", "OUT"], ["redact", "H", "OUT"],
        ["simulate", "--scenario", "tour", "--duration", "5s", "-o", "OUT"], ["capture", "--duration", "1s", "--plain", "-o", "OUT"],
        ["replay", "H", "--perturb", "1", "--shrink", "OUT"],
    ])
    func anExistingFileIsRefusedUnlessForce(template: [String]) throws {
        let out = tempPath("out")
        defer { for p in [out, out + ".faults.json"] { try? FileManager.default.removeItem(atPath: p) } }
        try "keep me".write(toFile: out, atomically: true, encoding: .utf8)
        let args = template.map { $0 == "H" ? goldenTrace("handover") : ($0 == "OUT" ? out : $0) }
        let r = try relaytrace(args)
        #expect(r.status == 74, "\(args) \(r.stderr)")
        #expect(r.stderr.contains("Error: \(out) exists; use --force to overwrite it"), "\(r.stderr)")
        #expect(!r.stdout.contains("embedded relay"), "capture started before checking: \(r.stdout)")
        #expect(FileManager.default.contents(atPath: out) == Data("keep me".utf8))
        if template[0] != "capture" && template[0] != "replay" {
            let forced = try relaytrace(args + ["--force"])
            #expect(forced.status == 0, "\(args) \(forced.stderr)")
            #expect(FileManager.default.contents(atPath: out) != Data("keep me".utf8))
        }
    }

    @Test func notesGoToStderr() throws {
        let out = tempPath("html")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try relaytrace(["timeline", goldenTrace("handover"), "--html", out])
        #expect(r.status == 0)
        #expect(r.stdout.isEmpty, "\(r.stdout)")
        #expect(r.stderr.contains("wrote \(out)"))
    }

    @Test func errorsNameTheFile() throws {
        let readme = GoldenTraceCommandTests.root + "/README.md"
        for command in [["info"], ["frames"], ["stats"], ["verify"]] {
            let r = try relaytrace(command + [readme])
            #expect(r.status == 65, "\(command) \(r.stderr)")
            #expect(r.stderr.hasPrefix("Error: \(readme)"), "\(command) \(r.stderr)")
        }
    }
}

// MARK: 6. Follow one RPC

@Suite struct FollowTests {
    @Test(arguments: ["1", handoverSearchId])
    func followTellsTheFailedSearchsStory(id: String) throws {
        let r = try relaytrace(["frames", goldenTrace("handover"), "--follow", id, "--format", "table"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("#      time       since     gen") == true, "\(r.stdout)")
        let numbers = lines.dropFirst().dropLast().compactMap { Int($0.prefix(6).trimmingCharacters(in: .whitespaces)) }
        // The call input, its timer, the request, the socket's close, the timer cancelled, callCompleted.
        #expect(numbers == [44, 45, 46, 48, 51, 52], "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("52 ") && $0.contains("+2.000s") })
        #expect(lines.last == "files.search (call 1, request \(handoverSearchId)) sent at 28.000s on g1: failed: connectionClosed (network interface changed) at 30.000s, 2.000s after it was sent")
        let json = try jsonLines(try relaytrace(["frames", goldenTrace("handover"), "--follow", id, "--format", "jsonl"]).stdout)
        #expect(json.map { $0["sinceStartMs"]?.doubleValue } == [0, 0, 0, 2000, 2000, 2000])
    }

    @Test func followOfAnAnsweredCallShowsTheResponseWithItsLatency() throws {
        let r = try relaytrace(["frames", goldenTrace("handover"), "--follow", "9DE8B147-CC4D-4561-A14A-EDB98AB4FDDD", "--format", "table"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("rpc.response"), "\(r.stdout)")
        #expect(r.stdout.contains("latency=60.0ms"), "\(r.stdout)")
        #expect(r.stdout.split(separator: "\n").last?.hasSuffix(": answered at 30.120s, 0.060s after it was sent") == true, "\(r.stdout)")
    }

    @Test func anUnknownIdIsAWarning() throws {
        let r = try relaytrace(["frames", goldenTrace("handover"), "--follow", "nope", "--format", "table"])
        #expect(r.status == 0)
        #expect(r.stderr.contains("warning: no request with id or call id 'nope' in the trace"), "\(r.stderr)")
    }

    @Test func rpcIdFindsTheResponseAndTheTimers() throws {
        let id = "9DE8B147-CC4D-4561-A14A-EDB98AB4FDDD"
        let rows = try jsonLines(try relaytrace(["frames", goldenTrace("handover"), "--rpc-id", id, "--format", "jsonl"]).stdout)
        #expect(rows.compactMap { $0["index"]?.intValue } == [68, 69, 70, 71])
        let failed = try relaytrace(["frames", goldenTrace("handover"), "--rpc-id", handoverSearchId, "--format", "jsonl"])
        #expect(failed.stderr.contains("'relaytrace frames \(goldenTrace("handover")) --follow \(handoverSearchId)' shows how it ended"), "\(failed.stderr)")
    }

    @Test func statsSaysWhyTheRequestWentUnansweredAndCountsOneHeartbeat() throws {
        let r = try relaytrace(["stats", goldenTrace("handover")])
        #expect(r.stdout.contains("unanswered rpc requests: 1\n  files.search id=\(handoverSearchId) on g1, sent 28.000s: failed: connectionClosed (network interface changed) at 30.000s (2.000s after it was sent)"), "\(r.stdout)")
        let j = try JSONValue(parsing: try relaytrace(["stats", goldenTrace("handover"), "--format", "json"]).stdout)
        #expect(j["unanswered"]?[0]?["why"] == "failed: connectionClosed (network interface changed)")
        #expect(j["openRequests"] == 1)
        let one = try writeFailedSocketsTrace()
        defer { try? FileManager.default.removeItem(atPath: one) }
        let s = try relaytrace(["stats", one])
        #expect(s.stdout.contains("heartbeats: 1 sent, 1 pong received; spacing: none (it takes two heartbeats on one socket)"), "\(s.stdout)")
        #expect(try JSONValue(parsing: try relaytrace(["stats", one, "--format", "json"]).stdout)["heartbeats"]?["sent"] == 1)
    }
}

// MARK: 7. Readable tables and sessions

@Suite struct ReadableOutputTests {
    @Test func deadlinesAreTimes() throws {
        let r = try relaytrace(["frames", goldenTrace("handover"), "--format", "table", "--type", "action", "--grep", "rpcTimeout"])
        #expect(r.stdout.contains(#""deadline":"at 118.000s""#), "\(r.stdout)")
        #expect(!r.stdout.contains("118000000000"))
        // The JSON keeps the number.
        let j = try jsonLines(try relaytrace(["frames", goldenTrace("handover"), "--format", "jsonl", "--type", "action", "--grep", "118000000000"]).stdout)
        #expect(j.first?["json"]?["deadline"] == 118_000_000_000)
    }

    @Test func stepEchoesPipedCommandsAndItsPromptShowsTheStatesTime() throws {
        // After #46 (28 s) the next record is at 30 s: the prompt shows the replay's clock, as state does.
        let s = try sh("printf 'next 47\\nstate\\nquit\\n' | \"$RT\" replay '\(goldenTrace("handover"))' --step")
        #expect(s.stdout.contains("(replay #0 t=0.000s) next 47\n"), "\(s.stdout)")
        #expect(s.stdout.contains("(replay #47 t=28.000s) state\n"), "\(s.stdout)")
        #expect(s.stdout.contains("time:       28.000s"), "\(s.stdout)")
        #expect(s.stdout.contains("next: #47 30.000s"), "\(s.stdout)")
    }
}

// MARK: 8. diff finds timing bugs

@Suite struct DiffTimesTests {
    @Test func twoSeedsDoNotDifferByTheRelaysSession() throws {
        let a = tempPath("rtrace"), b = tempPath("rtrace")
        defer { for p in [a, b] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(try relaytrace(["simulate", "--scenario", "handover", "--seed", "1", "-o", a]).status == 0)
        #expect(try relaytrace(["simulate", "--scenario", "handover", "--seed", "2", "-o", b]).status == 0)
        let r = try relaytrace(["diff", a, b, "--max", "1000"])
        #expect(!r.stdout.contains("$.sessionId:"), "\(r.stdout)")
        #expect(r.status == 0, "the relay's session was the only difference: \(r.stdout)")
    }

    @Test func timesCompareWithinTheTolerance() throws {
        let a = try writeRelayTrace()
        let b = try writeRelayTrace(RelayTraceVariant(shift: 0.5))
        defer { for p in [a, b] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(try relaytrace(["diff", a, b]).status == 0)  // times are not compared by default
        let r = try relaytrace(["diff", a, b, "--times", "100ms"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("first difference: g1 #0 (A record 0, B record 0) time (transportOpen relay out, apart by 0.500s): 0.010s != 0.510s"), "\(r.stdout)")
        #expect(try relaytrace(["diff", a, b, "--times", "1s"]).status == 0)
        let bad = try relaytrace(["diff", a, b, "--times", "soon"])
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("Error: --times 'soon' is not a tolerance"))
    }
}

// MARK: 9. The protocol is documented in the project

@Suite struct ProtocolDocumentTests {
    @Test func relayHelpPointsToADocumentThatExistsWithTheSectionsTheSourcesCite() throws {
        let help = try relaytrace(["relay", "--help"])
        #expect(help.stdout.contains("docs/PROTOCOL.md"), "\(help.stdout)")
        let doc = try String(contentsOfFile: GoldenTraceCommandTests.root + "/docs/PROTOCOL.md", encoding: .utf8)
        let sections = Set(doc.split(separator: "\n").filter { $0.hasPrefix("## ") }.compactMap { Int($0.dropFirst(3).prefix { $0.isNumber }) })
        // Every `PROTOCOL.md §N` a source file cites is a section of the document.
        let grep = try runProcess("/bin/bash", ["-c", "grep -rhoE 'PROTOCOL\\.md §[0-9]+' '\(GoldenTraceCommandTests.root)/Sources' | sort -u"])
        let cited = Set(grep.stdout.split(separator: "\n").compactMap { Int($0.split(separator: "§").last ?? "") })
        #expect(!cited.isEmpty)
        #expect(cited.isSubset(of: sections), "cited \(cited.sorted()), documented \(sections.sorted())")
    }
}
