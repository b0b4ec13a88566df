import Foundation
import RelayProtocol
import Testing
import Trace

/// The path of an executable on PATH, or nil.
func which(_ name: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let p = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: p) { return p }
    }
    return nil
}

/// The project's venv python when it can import duckdb (tools/setup-duckdb.sh installs it).
func duckdbPython() -> String? {
    var dir = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { dir.deleteLastPathComponent() }
    let python = dir.appendingPathComponent(".venv/bin/python").path
    guard FileManager.default.isExecutableFile(atPath: python),
        let r = try? runProcess(python, ["-c", "import duckdb"]), r.status == 0 else { return nil }
    return python
}

@Suite struct ExternalToolTests {
    @Test(.enabled(if: which("tshark") != nil, "tshark is not installed (tools/setup.sh installs it)"))
    func tsharkDecodesExportedPcapngAsWebSocketJSON() throws {
        let path = try writeRelayTrace()
        let pcap = tempPath("pcapng")
        defer { for p in [path, pcap] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(try relaytrace(["export", path, "--format", "pcapng", "-o", pcap]).status == 0)
        let tshark = try #require(which("tshark"))
        // Every message goes to the websocket dissector (text frames decoded as JSON), each upgrade and its
        // answer to the http one.
        let all = try runProcess(tshark, ["-r", pcap, "-o", "websocket.text_type:As JSON", "-T", "fields",
                                          "-e", "frame.interface_name", "-e", "websocket.opcode", "-e", "json.member", "-e", "http.response.code"])
        #expect(all.status == 0, "\(all.stderr)")
        let allRows = all.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        #expect(allRows.count == 34)
        let rows = allRows.filter { !$0[1].isEmpty }.map { Array($0.prefix(3)) }
        #expect(rows.count == 28)  // 26 messages and 2 closes
        #expect(allRows.filter { $0[1].isEmpty }.map { $0[3] } == ["", "101", "", "101", "", "101"], "\(all.stdout)")
        #expect(rows.filter { $0[1] == "1" }.allSatisfy { $0[2].contains("type") }, "text frames not decoded as JSON: \(all.stdout)")
        // One generation by interface name.
        let g2 = try runProcess(tshark, ["-r", pcap, "-o", "websocket.text_type:As JSON", "-Y", "frame.interface_name == \"gen2\"",
                                         "-T", "fields", "-e", "frame.interface_name", "-e", "json.value.string"])
        #expect(g2.status == 0, "\(g2.stderr)")
        let g2rows = g2.stdout.split(separator: "\n")
        #expect(g2rows.count == 8)  // the upgrade and its 101, 5 frames and the close
        #expect(g2rows.allSatisfy { $0.hasPrefix("gen2\t") })
        #expect(g2rows.contains { $0.contains("resumed") })
        #expect(g2rows.contains { $0.contains("system.ping") })
        #expect(!g2.stdout.contains("registered,"))
    }

    @Test(.enabled(if: duckdbPython() != nil, "no .venv with duckdb (tools/setup-duckdb.sh installs it)"))
    func duckdbCountsJSONLRowsPerTypeLikeStats() throws {
        let path = try writeRelayTrace()
        let jsonl = tempPath("jsonl")
        defer { for p in [path, jsonl] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(try relaytrace(["export", path, "--format", "jsonl", "-o", jsonl]).status == 0)
        let python = try #require(duckdbPython())
        let q = """
            import duckdb, json, sys
            rows = duckdb.sql("select kind, type, count(*) from read_json_auto('\(jsonl)', format='newline_delimited') group by all").fetchall()
            print(json.dumps([[k, t, n] for k, t, n in rows]))
            """
        let r = try runProcess(python, ["-c", q])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try #require(try JSONValue(parsing: r.stdout).arrayValue)
        let stats = try JSONValue(parsing: try relaytrace(["stats", path, "--format", "json"]).stdout)
        var kinds: [String: Int64] = [:]
        var types: [String: Int64] = [:]
        for row in rows {
            guard let k = row[0]?.stringValue, let n = row[2]?.intValue else { continue }
            kinds[k, default: 0] += n
            if let t = row[1]?.stringValue { types[t, default: 0] += n }
        }
        #expect(kinds == (stats["kinds"]?.objectValue ?? [:]).compactMapValues { $0["count"]?.intValue })
        #expect(types == (stats["types"]?.objectValue ?? [:]).compactMapValues { $0["count"]?.intValue })
        #expect(types["heartbeat"] == 5)
    }
}
