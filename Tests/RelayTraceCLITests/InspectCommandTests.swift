import Foundation
import RelayProtocol
import Testing
import Trace
import Inspect

/// Runs a bash script (pipes, env, stdin) with `$RT` set to the binary.
func sh(_ script: String) throws -> (status: Int32, stdout: String, stderr: String) {
    let bin = productsDirectory().appendingPathComponent("relaytrace").path
    return try runProcess("/bin/bash", ["-c", "set -o pipefail; RT='\(bin)'; " + script])
}

func jsonLines(_ s: String) throws -> [JSONValue] { try s.split(separator: "\n").map { try JSONValue(parsing: String($0)) } }

func tempPath(_ ext: String) -> String {
    FileManager.default.temporaryDirectory.path + "/relaytrace-out-\(getpid())-\(UUID().uuidString).\(ext)"
}

/// A copy of `path` with one byte flipped inside its second chunk.
func corruptCopy(_ path: String) throws -> String {
    let chunk = try #require(try TraceReader(path: path).index?[1])
    var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    bytes[Int(chunk.frameOffset) + 5] ^= 0x10
    let bad = path + ".bad"
    try Data(bytes).write(to: URL(fileURLWithPath: bad))
    return bad
}

@Suite struct InspectCommandErrorTests {
    static let commands: [[String]] = [["show", "F", "0"], ["stats", "F"], ["timeline", "F"], ["diff", "F", "F"],
                                       ["export", "F", "--format", "jsonl", "-o", "/dev/null"], ["redact", "F", "OUT"], ["lint", "F"], ["frames", "F", "--gen", "1"],
                                       ["view", "F", "--listen", "127.0.0.1:0", "--for", "1s"]]

    @Test(arguments: commands)
    func missingFileIs66(template: [String]) throws {
        let out = tempPath("rtrace")
        let r = try relaytrace(template.map { $0 == "F" ? "/nonexistent/x.rtrace" : ($0 == "OUT" ? out : $0) })
        #expect(r.status == 66, "\(template) \(r.stderr)")
        #expect(r.stderr.contains("No such file or directory"))
    }

    @Test(arguments: commands)
    func corruptFileIs65(template: [String]) throws {
        let path = try writeRelayTrace()
        let bad = try corruptCopy(path)
        let out = tempPath("rtrace")
        defer { for p in [path, bad, out] { try? FileManager.default.removeItem(atPath: p) } }
        let r = try relaytrace(template.map { $0 == "F" ? bad : ($0 == "OUT" ? out : $0) })
        #expect(r.status == 65 || (template[0] == "show" && r.status == 0), "\(template) \(r.status) \(r.stderr)")
        if r.status == 65 { #expect(r.stderr.contains("byte offset")) }
    }

    @Test(arguments: [
        (["frames", "x", "--gen", "abc"], "--gen: 'abc' is not a generation number"),
        (["frames", "x", "--since", "1x"], "--since: cannot read '1x'; write seconds (90, 1.5) or units (1m30s, 1h, 250ms)"),
        (["frames", "x", "--since", "10", "--until", "5"], "--until (5.000s) is before --since (10.000s)"),
        (["frames", "x", "--dir", "up"], "The value 'up' is invalid for '--dir <dir>'"),
        (["show", "x"], "Missing expected argument '<n>'"),
        (["show", "x", "first"], "'first' is not a record number"),
        (["stats", "x", "--format", "csv"], "The value 'csv' is invalid"),
        (["timeline", "x", "--width", "5"], "--width must be a number of columns from 40 to 1000"),
        (["diff", "x"], "Missing expected argument '<b>'"),
        (["diff", "x", "y", "--max", "0"], "--max must be a positive number"),
        (["export", "x", "-o", "y"], "Missing expected option '--format <format>'"),
        (["export", "x", "--format", "pcapng"], "Missing expected option '-o <out>'"),
        (["export", "x", "--format", "xml", "-o", "y"], "The value 'xml' is invalid for '--format <format>'"),
        (["redact", "x", "x"], "IN and OUT are the same file"),
        (["lint"], "Missing expected argument '<file>'"),
        (["timeline", "x", "--html", "y", "--since", "1m"], "--since/--until draw part of the ASCII picture"),
        (["view", "x", "--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
        (["view", "x", "--for", "soon"], "--for 'soon' is not a time (e.g. 30s, 2m)"),
        (["view", "-"], "view reads a trace file by its index"),
    ] as [([String], String)])
    func usageErrors(args: [String], message: String) throws {
        let r = try relaytrace(args)
        #expect(r.status == 64, "\(args) \(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("Error: \(message)"), "\(r.stderr)")
        #expect(r.stderr.contains("\nUsage: relaytrace \(args[0])"))
    }

    @Test func helpListsEveryCommand() throws {
        let r = try relaytrace(["--help"])
        for c in ["show", "stats", "timeline", "view", "diff", "export", "redact", "lint"] { #expect(r.stdout.contains("  \(c) "), "\(c)") }
        let e = try relaytrace(["export", "--help"])
        #expect(e.status == 0)
        #expect(e.stdout.contains("-o, --output <out>"))
    }
}

@Suite struct FramesFilterTests {
    @Test func filtersCombine() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        func lines(_ extra: [String]) throws -> [JSONValue] {
            let r = try relaytrace(["frames", path, "--format", "jsonl"] + extra)
            #expect(r.status == 0, "\(extra) \(r.stderr)")
            return try jsonLines(r.stdout)
        }
        #expect(try lines([]).count == relayTraceRecordCount)
        let g2 = try lines(["--gen", "2"])
        #expect(g2.count == 8)
        #expect(g2.allSatisfy { $0["gen"] == 2 })
        #expect(try lines(["--gen", "2,3"]).count == 11)
        let outbound = try lines(["--gen", "2", "--dir", "out"])
        #expect(outbound.allSatisfy { $0["dir"] == "out" } && outbound.count == 5)
        // Correlation: the response carries the request's method and its latency.
        let responses = try lines(["--type", "rpc.response"])
        #expect(responses.count == 3)
        #expect(responses[0]["method"] == "session.list")
        #expect(responses[0]["latencyMs"]?.doubleValue.map { abs($0 - 120) < 0.001 } == true)
        #expect(responses[2]["method"] == "system.ping")
        let list = try lines(["--method", "session.list"])
        #expect(list.map { $0["type"] } == ["rpc.request", "rpc.response"])
        #expect(try lines(["--rpc-id", "R2"]).count == 2)
        #expect(try lines(["--type", "transportClosed,transportOpen"]).count == 5)
        let status = try lines(["--event", "device-status"])
        #expect(status.count == 1 && status[0]["summary"]?.stringValue?.contains("status=online") == true)
        let interest = try lines(["--event", "chat:timeline-interest"])
        #expect(interest.count == 3)
        #expect(interest[0]["summary"]?.stringValue?.contains("lease=sess-8d1c") == true)
        // Time window in seconds and in units.
        let window = try lines(["--since", "30", "--until", "1m"])
        #expect(window.count == (try lines(["--since", "0m30s", "--until", "60000ms"])).count)
        #expect(window.count == 12)
        #expect(try lines(["--since", "59", "--until", "1m0.5s"]).map { $0["index"] } == [35, 36, 37, 38])
        #expect(try lines(["--grep", "hello world"]).map { $0["kind"] } == ["frameBinary"])
        #expect(try lines(["--channel", "watch"]).map { $0["text"] } == ["watch marker"])
        #expect(try lines(["--gen", "1", "--type", "heartbeat", "--since", "10", "--until", "20"]).count == 3)
        let ptc = try lines(["--type", "frameBinary"])
        #expect(ptc[0]["session"] == "t1" && ptc[0]["dataBytes"] == 11 && ptc[0]["preview"] == "hello world")
    }

    /// On a terminal (script(1) gives a pty) the default is a coloured table, unless NO_COLOR.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"),
                   "no /usr/bin/script (util-linux) to give relaytrace a terminal"))
    func onATerminalTheTableIsColouredUnlessNoColor() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tty = try sh("unset NO_COLOR; script -qec \"$RT frames '\(path)' --gen 2\" /dev/null")
        #expect(tty.stdout.contains("\u{1B}[36m") && tty.stdout.contains("resumed"))
        let ttyNo = try sh("NO_COLOR=1 script -qec \"$RT frames '\(path)' --gen 2\" /dev/null")
        #expect(!ttyNo.stdout.contains("\u{1B}[3") && ttyNo.stdout.contains("resumed"))
    }

    @Test func formatsColoursAndStdin() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let json = try relaytrace(["frames", path, "--format", "json", "--gen", "2"])
        #expect(json.status == 0)
        #expect(try JSONValue(parsing: json.stdout).arrayValue?.count == 8)
        let empty = try relaytrace(["frames", path, "--format", "json", "--gen", "9"])
        #expect(try JSONValue(parsing: empty.stdout) == [])
        let raw = try relaytrace(["frames", path, "--format", "raw", "--type", "pong", "--gen", "1"])
        #expect(raw.stdout == String(repeating: "{\"type\":\"pong\"}\n", count: 5))
        let table = try relaytrace(["frames", path, "--format", "table"])
        #expect(table.stdout.split(separator: "\n").count == relayTraceRecordCount + 1)  // and the header row
        #expect(table.stdout.hasPrefix("#      time       gen  dir type            summary\n"))
        #expect(table.stdout.contains("rpc.response"))
        #expect(table.stdout.contains("method=session.list latency=120.0ms"))
        #expect(table.stdout.contains("PTC1            PTC1 session=t1 11 bytes \"hello world\""))
        #expect(!table.stdout.contains("\u{1B}["))  // not a terminal: no colours
        // The test runner may export NO_COLOR; unset it where colours are expected.
        let always = try sh("unset NO_COLOR; \"$RT\" frames '\(path)' --format table --color always")
        #expect(always.stdout.contains("\u{1B}[36m"))
        let noColor = try sh("NO_COLOR=1 \"$RT\" frames '\(path)' --format table --color always")
        #expect(noColor.status == 0 && !noColor.stdout.contains("\u{1B}["))
        // '-' reads stdin.
        let stdin = try sh("cat '\(path)' | \"$RT\" frames - --gen 2 --format jsonl")
        #expect(stdin.status == 0)
        #expect(try jsonLines(stdin.stdout).count == 8)
        let garbage = try sh("echo hello | \"$RT\" stats -")
        #expect(garbage.status == 65)
        // `| head` exits cleanly.
        let head = try sh("\"$RT\" frames '\(path)' --format table | head -1")
        #expect(head.status == 0 && head.stderr.isEmpty)
    }
}

@Suite struct ShowStatsTimelineTests {
    @Test func showOneRecord() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(["show", path, "4"])
        #expect(r.status == 0, "\(r.stderr)")
        let j = try JSONValue(parsing: r.stdout)
        #expect(j["type"] == "registered")
        #expect(j["index"] == 4)
        #expect(j["redacted"] == ["$.json.resumeToken"])
        #expect(j["json"]?["resumeToken"]?.stringValue?.hasPrefix("rt:redacted:") == true)
        #expect(r.stdout.contains("\n  \"index\": 4,"))  // pretty
        let bin = try JSONValue(parsing: try relaytrace(["show", path, "22"]).stdout)
        #expect(bin["data"] == "hello world")
        let open = try JSONValue(parsing: try relaytrace(["show", path, "0"]).stdout)
        #expect(open["redacted"] == ["$.json.headers[0].value"])
        let past = try relaytrace(["show", path, "999"])
        #expect(past.status == 64)
        #expect(past.stderr.contains("record 999 is past the end"))
    }

    @Test func statsJSON() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(["stats", path, "--format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        let j = try JSONValue(parsing: r.stdout)
        #expect(j["records"] == .int(Int64(relayTraceRecordCount)))
        #expect(j["types"]?["heartbeat"]?["count"] == 5)
        #expect(j["types"]?["pong"]?["count"] == 5)
        #expect(j["types"]?["pong"]?["bytes"] == 75)
        #expect(j["kinds"]?["transportOpen"]?["count"] == 3)
        #expect(j["events"]?["chat:timeline-interest"]?["count"] == 3)
        #expect(j["rpc"]?["session.list"]?["p50Ms"]?.doubleValue.map { abs($0 - 120) < 0.001 } == true)
        #expect(j["rpc"]?["session.update"]?["errors"] == 1)
        #expect(j["rpc"]?["system.ping"]?["maxMs"]?.doubleValue.map { abs($0 - 50) < 0.001 } == true)
        #expect(j["reconnects"] == 2)
        let gens = try #require(j["generations"]?.arrayValue)
        #expect(gens.count == 3)
        #expect(gens[0]["closeReason"] == "1006 watchdog")
        #expect(gens[0]["registered"]?.doubleValue == 0.5)
        #expect(gens[1]["resumed"] == true)
        #expect(gens[1]["closeReason"] == "by client 1001 background")
        #expect(gens[1]["durationS"]?.doubleValue.map { abs($0 - 29) < 1e-9 } == true)
        #expect(gens[2]["registered"] == .null)
        #expect(j["heartbeatIntervals"]?["count"] == 4)
        #expect(j["heartbeatIntervals"]?["meanMs"]?.doubleValue.map { abs($0 - 5000) < 0.001 } == true)
        #expect(j["leases"]?["renewals"]?["sess-8d1c"] == 3)
        #expect(j["leases"]?["late"] == 1)
        #expect(j["leases"]?["gaps"] == 0)
        let text = try relaytrace(["stats", path])
        #expect(text.stdout.contains("generations: 3, reconnects: 2"))
        #expect(text.stdout.contains("g3: open 59.000s, registration NEVER completed"))
    }

    @Test func timelineASCIIAndHTML() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(["timeline", path, "--width", "80"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        for lane in ["g1 ", "g2 ", "g3 ", "leases ", "recovery "] {
            #expect(lines.contains { $0.hasPrefix(lane) && $0.contains("| ") }, "lane \(lane)")
        }
        #expect(lines.filter { $0.contains("| ") }.allSatisfy { $0.count <= 80 })
        let g1 = try #require(lines.first { $0.hasPrefix("g1 ") })
        for glyph in ["R", "=", "!", ".", "x"] { #expect(g1.contains(glyph), "g1 lacks \(glyph)") }
        #expect(r.stdout.contains("g1: closed at 30.000s"))
        #expect(r.stdout.contains("[leaseLate] 54.500s"))
        #expect(r.stdout.contains("[twoLiveGenerations] 59.500s"))
        #expect(r.stdout.contains("[registrationIncomplete] 60.500s"))
        #expect(r.stdout.contains("[timerNotArmed] 8.000s"))
        #expect(!r.stdout.contains("[timerNotArmed] 5.000s"))  // the heartbeat timer was armed
        #expect(try relaytrace(["timeline", path, "--strict"]).status == 1)

        let html = tempPath("html")
        defer { try? FileManager.default.removeItem(atPath: html) }
        let h = try relaytrace(["timeline", path, "--html", html])
        #expect(h.status == 0)
        // The viewer's page saved with its data: g3 overlaps g2, so the generations take two rows; the
        // armed timer and the watch-channel marker have their lanes. The note goes to stderr.
        #expect(h.stdout.isEmpty)
        #expect(h.stderr.contains("7 lanes in 6 rows, 4 check(s) failed"), "\(h.stderr)")
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>"), "\(page.prefix(200))")
        #expect(page.contains("<script type=\"application/json\" id=\"embedded\">"))
        #expect(page.contains(#""rowNames":["sockets 1","sockets 2","leases","recovery","timers","watch"]"#))
        #expect(page.contains(#"["g2","#))
        #expect(page.contains("session.list"))
        #expect(page.contains("addEventListener('wheel'"))
        #expect(!page.contains("<script src") && !page.contains("<link rel=\"stylesheet\""))  // self-contained
        #expect(page.contains("connect-src 'none'"))
        #expect(page.contains("twoLiveGenerations"))
    }
}

@Suite struct DiffExportRedactLintTests {
    @Test func diffIgnoresVolatileAndFindsRealChanges() throws {
        let a = try writeRelayTrace()
        let b = try writeRelayTrace(RelayTraceVariant(shift: 0.25, idSuffix: "x"))
        let c = try writeRelayTrace(RelayTraceVariant(firstMethod: "session.get"))
        defer { for p in [a, b, c] { try? FileManager.default.removeItem(atPath: p) } }
        let same = try relaytrace(["diff", a, b])
        #expect(same.status == 0, "\(same.stdout)")
        #expect(same.stdout.hasPrefix("no differences (\(relayTraceRecordCount) records in A"))
        let differ = try relaytrace(["diff", a, c])
        #expect(differ.status == 1)
        #expect(differ.stdout.hasPrefix("first difference: g1 #4 (A record 5, B record 5) $.payload.method: \"session.list\" != \"session.get\""))
        #expect(differ.stdout.contains("1 difference(s)"))
        // Not ignoring ids any more: the suffixed ids differ.
        let strict = try relaytrace(["diff", a, b, "--ignore", "nothing"])
        #expect(strict.status == 0)  // --ignore only adds keys
    }

    @Test func exportsJSONLHARChromeAndPcapng() throws {
        let path = try writeRelayTrace()
        let outs = ["jsonl", "har", "json", "pcapng"].map { tempPath($0) }
        defer { for p in [path] + outs { try? FileManager.default.removeItem(atPath: p) } }
        let j = try relaytrace(["export", path, "--format", "jsonl", "-o", outs[0]])
        #expect(j.status == 0, "\(j.stderr)")
        #expect(j.stderr == "wrote \(outs[0]): \(relayTraceRecordCount) records\n")
        // The lines of frames --format jsonl with the trace's columns, ts and payload (docs/COLUMNS.md).
        let frames = try jsonLines(try relaytrace(["frames", path, "--format", "jsonl"]).stdout)
        let rows = try jsonLines(try String(contentsOfFile: outs[0], encoding: .utf8))
        #expect(rows.count == frames.count)
        let traceId = try TraceReader(path: path).identity
        for (row, frame) in zip(rows, frames) {
            guard case .object(var o) = row else { Issue.record("not an object: \(row)"); continue }
            #expect(o.removeValue(forKey: "trace") == .string(path))
            #expect(o.removeValue(forKey: "traceId") == .string(traceId))
            let t = try #require(frame["t"]?.doubleValue)
            let ts = try #require(o.removeValue(forKey: "ts")?.stringValue)
            #expect(unixNanoseconds(rfc3339: ts) == unixNanoseconds(rfc3339: "2026-01-15T10:00:00Z")! + Int64((t * 1e6).rounded()) * 1000, "\(ts) for t \(t)")
            let payload = o.removeValue(forKey: "payload")
            if let json = frame["json"] {
                #expect(try payload?.stringValue.map { try JSONValue(parsing: $0) } == json)
            } else {
                #expect(payload == .null)
            }
            #expect(JSONValue.object(o) == frame)
        }
        #expect(rows[5]["ts"] == "2026-01-15T10:00:02.000000Z" && rows[5]["type"] == "rpc.request")

        #expect(try relaytrace(["export", path, "--format", "har", "-o", outs[1]]).status == 0)
        let har = try JSONValue(parsing: String(contentsOfFile: outs[1], encoding: .utf8))
        let entries = try #require(har["log"]?["entries"]?.arrayValue)
        #expect(entries.count == 3)
        #expect(entries.allSatisfy { $0["_resourceType"] == "websocket" })
        #expect(entries[0]["request"]?["url"] == "wss://relay.example/ws/device-link")
        #expect(entries[0]["startedDateTime"] == "2026-01-15T10:00:00.010Z")
        let msgs = try #require(entries[0]["_webSocketMessages"]?.arrayValue)
        #expect(msgs.count == 20)
        #expect(msgs[0]["type"] == "send" && msgs[0]["opcode"] == 1)
        #expect(msgs[1]["type"] == "receive")
        #expect(msgs[0]["time"]?.doubleValue.map { abs($0 - 1_768_471_200.3) < 1e-3 } == true)
        let binary = try #require(msgs.first { $0["opcode"] == 2 })
        #expect(binary["data"] == .string(base64(Array("PTC1".utf8) + [0, 2] + Array("t1hello world".utf8))))

        #expect(try relaytrace(["export", path, "--format", "chrome-trace", "-o", outs[2]]).status == 0)
        let trace = try JSONValue(parsing: String(contentsOfFile: outs[2], encoding: .utf8))
        let events = try #require(trace["traceEvents"]?.arrayValue)
        let rpc = events.filter { $0["ph"] == "X" }
        #expect(rpc.map { $0["name"] } == ["session.list", "session.update", "system.ping"])
        #expect(rpc[0]["dur"]?.doubleValue.map { abs($0 - 120_000) < 0.01 } == true)
        #expect(events.contains { $0["ph"] == "b" && $0["cat"] == "lease" })
        #expect(events.contains { $0["ph"] == "e" && $0["cat"] == "lease" })
        let threads: [String] = events.filter { $0["name"] == "thread_name" }.compactMap { $0["args"]?["name"]?.stringValue }
        #expect(threads.contains("gen 2"))
        #expect(events.filter { $0["ph"] == "B" }.count == events.filter { $0["ph"] == "E" }.count)

        #expect(try relaytrace(["export", path, "--format", "pcapng", "-o", outs[3]]).status == 0)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: outs[3])))
        var at = 0
        var types: [UInt32] = []
        func u32(_ i: Int) -> UInt32 { UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24 }
        while at + 12 <= bytes.count {
            let len = Int(u32(at + 4))
            #expect(len >= 12 && len % 4 == 0 && u32(at + len - 4) == UInt32(len))
            types.append(u32(at))
            if u32(at) == 1 { #expect(bytes[at + 8] == 252 && bytes[at + 9] == 0) }
            at += len
        }
        #expect(at == bytes.count)
        #expect(types.first == 0x0A0D_0D0A)
        #expect(types.filter { $0 == 1 }.count == 3)  // one interface per generation
        #expect(types.filter { $0 == 6 }.count == 34)  // 26 frames, 2 closes, and each of the 3 upgrades with its answer
    }

    @Test func redactRekeysAndStrengthens() throws {
        let path = try writeRelayTrace()
        let out = tempPath("rtrace")
        defer { for p in [path, out] { try? FileManager.default.removeItem(atPath: p) } }
        let r = try relaytrace(["redact", path, out, "--keys", "deviceName"])
        #expect(r.status == 0, "\(r.stderr)")
        let old = try TraceReader(path: path)
        let new = try TraceReader(path: out)
        #expect(new.header.redaction.keyID != old.header.redaction.keyID)
        #expect(r.stderr.contains("key id \(new.header.redaction.keyID) (new)"))  // a note: stderr
        #expect(new.header.client["deviceName"]?.stringValue?.hasPrefix("rt:redacted:") == true)
        let a = old.readAll().entries
        let b = new.readAll().entries
        #expect(a.count == b.count)
        let oldToken = try JSONValue(parsing: a[4].record.payload)["resumeToken"]
        let newToken = try JSONValue(parsing: b[4].record.payload)["resumeToken"]
        #expect(newToken != oldToken)
        #expect(newToken?.stringValue.map(Redactor.isPlaceholder) == true)
        // Equality survives the new key: the token the relay issued equals the one presented on resume.
        #expect(try JSONValue(parsing: b[29].record.payload)["payload"]?["resumeToken"] == newToken)
        #expect(try JSONValue(parsing: b[3].record.payload)["payload"]?["deviceName"]?.stringValue?.hasPrefix("rt:redacted:") == true)
        #expect(zip(a, b).allSatisfy { $0.record.time == $1.record.time && $0.record.kind == $1.record.kind })
        #expect(try relaytrace(["redact", path, out]).status == 74)  // exists, no --force
        #expect(try relaytrace(["redact", path, out, "--force", "--keep-key"]).status == 0)
        #expect(try TraceReader(path: out).header.redaction.keyID == old.header.redaction.keyID)
        // Semantically the same trace.
        #expect(try relaytrace(["diff", path, out]).status == 0)
    }

    @Test func lintFindsSecretsOnlyInRawTraces() throws {
        let redacted = try writeRelayTrace()
        let raw = try writeRelayTrace(RelayTraceVariant(raw: true))
        let cleaned = tempPath("rtrace")
        defer { for p in [redacted, raw, cleaned] { try? FileManager.default.removeItem(atPath: p) } }
        let ok = try relaytrace(["lint", redacted])
        #expect(ok.status == 0, "\(ok.stdout)")
        #expect(ok.stdout == "no secrets found in \(relayTraceRecordCount) records\n")
        let bad = try relaytrace(["lint", raw])
        #expect(bad.status == 1)
        #expect(bad.stdout.contains("record 0 (transportOpen, 0.010s) $.headers[0].value: bearer eyJhbG... (100 chars)"))
        #expect(bad.stdout.contains("record 4 (frameText, 0.500s) $.resumeToken: secretKey h7GfK2... (48 chars)"))
        #expect(bad.stdout.contains("record 29 (frameText, 31.300s) $.payload.resumeToken: secretKey"))
        #expect(bad.stdout.contains("3 secret(s) found"))
        #expect(!bad.stdout.contains("Qm3x8c"))  // a 32-character session id is not a credential
        let json = try JSONValue(parsing: try relaytrace(["lint", raw, "--format", "json"]).stdout)
        #expect(json["findings"]?.arrayValue?.count == 3)
        // redact turns the raw trace into a clean one.
        #expect(try relaytrace(["redact", raw, cleaned]).status == 0)
        #expect(try relaytrace(["lint", cleaned]).status == 0)
    }
}
