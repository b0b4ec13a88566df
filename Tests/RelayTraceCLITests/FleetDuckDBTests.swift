import Foundation
import RelayProtocol
import Testing

/// The fleet export read by DuckDB with the schema shipped in docs/schema/, and the three queries of
/// tools/fleet_queries.py (its DuckDB half; the Spark half runs in tools/fleet-queries.sh) on a few
/// simulated traces, against what the rows themselves say.
@Suite(.enabled(if: duckdbPython() != nil, "no .venv with duckdb (tools/setup-duckdb.sh installs it)"))
struct FleetDuckDBTests {
    static let schemaSQL = packageRoot.appendingPathComponent("docs/schema/export.duckdb.sql").path

    /// Runs python `code` (with `sys.argv[1:]` = `args`) and parses what it prints as JSON.
    static func python(_ code: String, _ args: [String]) throws -> JSONValue {
        let python = try #require(duckdbPython())
        let r = try runProcess(python, ["-c", code] + args)
        #expect(r.status == 0, "\(r.stderr)")
        return try JSONValue(parsing: r.stdout)
    }

    @Test(.timeLimit(.minutes(5)))
    func duckdbLoadsAFleetExportWithTheShippedTypes() throws {
        let jsonl = tempPath("jsonl")
        let bad = tempPath("jsonl")
        defer { for p in [jsonl, bad] { try? FileManager.default.removeItem(atPath: p) } }
        let e = try relaytrace(["export", "--format", "jsonl", "-o", jsonl, GoldenTraceCommandTests.root + "/Traces"])
        #expect(e.status == 0, "\(e.stderr)")
        let rows = try jsonLines(file: jsonl)
        let q = """
            import duckdb, json, sys
            con = duckdb.connect()
            con.execute(open(sys.argv[1]).read())
            con.execute("create table fleet as select * from relaytrace_export('" + sys.argv[2] + "')")
            types = {name: t for name, t, *_ in con.execute("describe fleet").fetchall()}
            counts = con.execute("select count(*), count(distinct trace), count(distinct traceId), count(kind), count(type), count(ts) from fleet").fetchone()
            codes = sorted(set(r[0] for r in con.execute("select json->>'$.code' from fleet where type = 'error'").fetchall()))
            same = con.execute("select count(*) from fleet where kind = 'frameText' and payload is not null and json_extract_string(payload, '$.type') is distinct from type").fetchone()[0]
            ids = con.execute("select count(*) from fleet where id is not null").fetchone()[0]
            print(json.dumps({"types": types, "counts": list(counts), "codes": codes, "typeMismatch": same, "ids": ids}))
            """
        let r = try Self.python(q, [Self.schemaSQL, jsonl])
        #expect(r["types"]?["json"] == "JSON" && r["types"]?["id"] == "VARCHAR" && r["types"]?["ts"] == "TIMESTAMP", "\(r)")
        #expect(r["types"]?["t"] == "DOUBLE" && r["types"]?["gen"] == "BIGINT" && r["types"]?["payload"] == "VARCHAR")
        let textFrames = rows.filter { $0["kind"] == "frameText" }
        #expect(r["counts"] == .array([.int(Int64(rows.count)), 16, 16, .int(Int64(rows.count)),
                                       .int(Int64(textFrames.filter { $0["type"]?.stringValue != nil }.count)), .int(Int64(rows.count))]))
        // ->> reads a JSON member as text (not the quoted JSON of a guessed MAP).
        #expect(r["codes"]?.arrayValue?.contains("invalidResume") == true, "\(r)")
        #expect(r["typeMismatch"] == 0)
        #expect(r["ids"] == .int(Int64(rows.filter { $0["id"]?.stringValue != nil }.count)))
        // A row that does not fit the types is an error, not a guess.
        try "{\"trace\":\"x\",\"index\":\"first\"}\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let python = try #require(duckdbPython())
        let refused = try runProcess(python, ["-c", "import duckdb, sys; con = duckdb.connect(); con.execute(open(sys.argv[1]).read()); con.execute(\"select * from relaytrace_export('\" + sys.argv[2] + \"')\").fetchall()", Self.schemaSQL, bad])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("first"), "\(refused.stderr)")
    }

    /// p-quantile by linear interpolation between the closest ranks (DuckDB quantile_cont, Spark percentile).
    static func quantile(_ sorted: [Double], _ p: Double) -> Double {
        let h = Double(sorted.count - 1) * p
        let lo = Int(h.rounded(.down))
        return lo + 1 < sorted.count ? sorted[lo] + (h - Double(lo)) * (sorted[lo + 1] - sorted[lo]) : sorted[lo]
    }

    static func close(_ a: JSONValue?, _ b: Double) -> Bool { a?.doubleValue.map { abs($0 - b) < 1e-5 } ?? false }

    @Test(.timeLimit(.minutes(5)))
    func theFleetQueriesFindTheLoopsGapsAndLatenciesTheRowsShow() throws {
        let dir = try tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "on register relay invalid-resume count=3\n".write(toFile: dir + "/loop.faults", atomically: true, encoding: .utf8)
        try "at 9s client app background\nat 11s client app foreground\n".write(toFile: dir + "/pause.faults", atomically: true, encoding: .utf8)
        let runs: [(name: String, scenario: String, seed: Int, faults: String?)] = [
            ("1-loop", "invalid-resume-loop", 1, nil), ("2-refused-once", "invalid-resume", 2, nil),
            ("3-tour-loop", "tour", 3, "loop"), ("4-lease-pause", "lease", 4, "pause"), ("5-tour", "tour", 5, nil),
        ]
        for run in runs {
            let faults = run.faults.map { ["--faults", "\(dir)/\($0).faults"] } ?? []
            let s = try relaytrace(["simulate", "--scenario", run.scenario, "--seed", String(run.seed), "-o", "\(dir)/\(run.name).rtrace"] + faults)
            #expect(s.status == 0, "\(s.stderr)")
        }
        let jsonl = dir + "/fleet.jsonl"
        let e = try relaytrace(["export", "--format", "jsonl", "-o", jsonl, dir])
        #expect(e.status == 0, "\(e.stderr)")
        let rows = try jsonLines(file: jsonl)
        let python = try #require(duckdbPython())
        let q = try runProcess(python, [packageRoot.appendingPathComponent("tools/fleet_queries.py").path, jsonl, "--engine", "duckdb"])
        #expect(q.status == 0, "\(q.stderr)")
        let report = try JSONValue(parsing: q.stdout)
        let results = try #require(report["duckdb"]?["results"])
        #expect(report["duckdb"]?["traces"] == 5 && report["duckdb"]?["rows"] == .int(Int64(rows.count)))

        // Loops: exactly the traces given three refusals; one refusal is not a loop.
        #expect(results["loops"]?.arrayValue?.compactMap { $0[0]?.stringValue } == ["\(dir)/1-loop.rtrace", "\(dir)/3-tour-loop.rtrace"], "\(results)")
        for loop in results["loops"]?.arrayValue ?? [] { #expect(loop[2]?.doubleValue == 3) }

        // Gaps: consecutive outbound heartbeats of a trace more than 5.5 s apart, as the rows say.
        var expectedGaps: [(String, Double, Double)] = []
        var last: [String: Double] = [:]
        for row in rows where row["kind"] == "frameText" && row["type"] == "heartbeat" && row["dir"] == "out" {
            let trace = row["trace"]?.stringValue ?? ""
            let t = row["t"]?.doubleValue ?? 0
            if let previous = last[trace], t - previous > 5.5 { expectedGaps.append((trace, t, t - previous)) }
            last[trace] = t
        }
        let gaps = try #require(results["gaps"]?.arrayValue)
        #expect(gaps.count == expectedGaps.count, "\(gaps) vs \(expectedGaps)")
        for (g, x) in zip(gaps, expectedGaps) {
            #expect(g[0]?.stringValue == x.0 && Self.close(g[1], x.1) && Self.close(g[2], x.2), "\(g) vs \(x)")
        }
        #expect(expectedGaps.contains { $0.0 == "\(dir)/4-lease-pause.rtrace" && $0.2 > 8 }, "the pause makes a gap")

        // Latency per method across the traces: count, p50 and p99 of the correlated responses.
        var latencies: [String: [Double]] = [:]
        for row in rows where row["type"] == "rpc.response" {
            if let ms = row["latencyMs"]?.doubleValue { latencies[row["method"]?.stringValue ?? "", default: []].append(ms) }
        }
        let rpc = try #require(results["rpc"]?.arrayValue)
        #expect(rpc.compactMap { $0[0]?.stringValue } == latencies.keys.sorted())
        for row in rpc {
            let xs = (latencies[row[0]?.stringValue ?? ""] ?? []).sorted()
            #expect(row[1]?.doubleValue == Double(xs.count))
            #expect(Self.close(row[2], Self.quantile(xs, 0.5)) && Self.close(row[3], Self.quantile(xs, 0.99)), "\(row) vs \(xs)")
        }
        #expect(latencies.count >= 3, "the tour's calls give several methods: \(latencies.keys.sorted())")
    }
}
