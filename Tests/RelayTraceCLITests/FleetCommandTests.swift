import Foundation
import Inspect
import RelayProtocol
import Testing
import Trace

/// A fresh empty directory under the temporary directory.
func tempDirectory() throws -> String {
    let dir = tempPath("d")
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
    return dir
}

/// The lines of a file as JSON values.
func jsonLines(file: String) throws -> [JSONValue] { try jsonLines(String(contentsOfFile: file, encoding: .utf8)) }

/// `export`, `stats`, `check` and `verify` over several traces (docs/CLI.md, "Many traces"): one result set
/// with the trace's columns, directories as their `*.rtrace` files, the worst exit code.
@Suite struct FleetCommandTests {
    @Test func exportOfSeveralTracesIsEachTracesOwnExportInOneTable() throws {
        let a = try writeRelayTrace()
        let b = try writeRelayTrace(RelayTraceVariant(shift: 2, idSuffix: "-b"))
        let outs = (0..<3).map { _ in tempPath("jsonl") }
        defer { for p in [a, b] + outs { try? FileManager.default.removeItem(atPath: p) } }
        let both = try relaytrace(["export", "--format", "jsonl", "-o", outs[0], a, b])
        #expect(both.status == 0, "\(both.stderr)")
        #expect(both.stderr == "wrote \(outs[0]): \(2 * relayTraceRecordCount) records from 2 traces\n")
        #expect(try relaytrace(["export", a, "--format", "jsonl", "-o", outs[1]]).status == 0)
        #expect(try relaytrace(["export", b, "--format", "jsonl", "-o", outs[2]]).status == 0)
        let rows = try jsonLines(file: outs[0])
        // Each trace's rows as its own export has them: numbered from 0, RPCs correlated within the trace.
        #expect(rows == (try jsonLines(file: outs[1])) + (try jsonLines(file: outs[2])))
        #expect(rows.map { $0["trace"] } == Array(repeating: .string(a), count: relayTraceRecordCount) + Array(repeating: .string(b), count: relayTraceRecordCount))
        #expect(rows[relayTraceRecordCount]["index"] == 0)
        #expect(rows[0]["traceId"] == .string(try TraceReader(path: a).identity))
        #expect(rows[relayTraceRecordCount]["traceId"] == .string(try TraceReader(path: b).identity))
        #expect(rows.filter { $0["latencyMs"] != nil }.count == 6)
        // b's times are 2 s later: ts says so on the wall clock.
        let firstB = rows[relayTraceRecordCount]
        #expect(rows[0]["ts"] == "2026-01-15T10:00:00.010000Z" && firstB["ts"] == "2026-01-15T10:00:02.010000Z")
    }

    @Test func aDirectoryIsItsRtraceFilesInNameOrder() throws {
        let dir = try tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["b.rtrace", "a.rtrace"] { try FileManager.default.moveItem(atPath: try writeRelayTrace(), toPath: "\(dir)/\(name)") }
        try "not a trace".write(toFile: "\(dir)/notes.txt", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: "\(dir)/sub", withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: "\(dir)/a.rtrace", toPath: "\(dir)/sub/c.rtrace")  // not recursed into
        let r = try relaytrace(["export", "--format", "jsonl", "-o", "-", dir])
        #expect(r.status == 0, "\(r.stderr)")
        var order: [String] = []
        for row in try jsonLines(r.stdout) { if let t = row["trace"]?.stringValue, order.last != t { order.append(t) } }
        #expect(order == ["\(dir)/a.rtrace", "\(dir)/b.rtrace"])
        let v = try relaytrace(["verify", dir + "/"])
        #expect(v.status == 0, "\(v.stderr)")
        #expect(v.stdout.split(separator: "\n").map { $0.prefix { $0 != ":" } } == ["\(dir)/a.rtrace", "\(dir)/b.rtrace"], "\(v.stdout)")
        #expect(v.stdout.split(separator: "\n").allSatisfy { $0.contains(": OK: \(relayTraceRecordCount) records") })
    }

    @Test func aTraceThatCannotBeReadIsReportedByNameAndTheOthersAreStillRead() throws {
        let a = try writeRelayTrace()
        let bad = try corruptCopy(a)
        let missing = tempPath("rtrace")
        let out = tempPath("jsonl")
        defer { for p in [a, bad, out] { try? FileManager.default.removeItem(atPath: p) } }
        let r = try relaytrace(["export", "--format", "jsonl", "-o", out, missing, a, bad, a])
        #expect(r.status == 66, "\(r.stderr)")  // the worst: a file that cannot be opened (66) over damage (65)
        #expect(r.stderr.contains("Error: io: cannot open \(missing): No such file or directory"), "\(r.stderr)")
        #expect(r.stderr.contains("Error: \(bad): "), "\(r.stderr)")
        let rows = try jsonLines(file: out)
        let perTrace = Dictionary(grouping: rows) { $0["trace"]?.stringValue ?? "" }.mapValues(\.count)
        #expect(perTrace[a] == 2 * relayTraceRecordCount)
        #expect((perTrace[bad] ?? 0) > 0 && (perTrace[bad] ?? 0) < relayTraceRecordCount)  // the records before the damage
        #expect(r.stderr.hasSuffix("wrote \(out): \(rows.count) records from 3 traces\n"), "\(r.stderr)")
        let damaged = try relaytrace(["export", "--format", "jsonl", "-o", "-", a, bad])
        #expect(damaged.status == 65)
        // No trace opened: no output file.
        let none = try relaytrace(["export", "--format", "jsonl", "-o", out + ".none", missing, missing])
        #expect(none.status == 66)
        #expect(!FileManager.default.fileExists(atPath: out + ".none"))
    }

    @Test(arguments: ["pcapng", "har", "chrome-trace"])
    func oneTraceFormatsRefuseSeveralTraces(format: String) throws {
        let a = try writeRelayTrace()
        let dir = try tempDirectory()
        let out = tempPath(format)
        defer { for p in [a, dir, out] { try? FileManager.default.removeItem(atPath: p) } }
        for inputs in [[a, a], [dir]] {
            let r = try relaytrace(["export", "--format", format, "-o", out] + inputs)
            #expect(r.status == 64)
            #expect(r.stderr.hasPrefix("Error: --format \(format) writes one trace's file; give one trace (--format jsonl exports many into one table)\nUsage: relaytrace export <file> ..."), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test func stdinCanBeGivenOnce() throws {
        for command in [["export", "--format", "jsonl", "-o", "-"], ["stats"], ["check"], ["verify"]] {
            let r = try relaytrace(command + ["-", "-"])
            #expect(r.status == 64, "\(command)")
            #expect(r.stderr.hasPrefix("Error: '-' (stdin) can be given once\n"), "\(r.stderr)")
        }
    }

    @Test func statsOfSeveralTracesIsOneRowOrSectionPerTrace() throws {
        let a = try writeRelayTrace()
        let b = try writeSampleTrace()
        defer { for p in [a, b] { try? FileManager.default.removeItem(atPath: p) } }
        let jsonl = try relaytrace(["stats", "--format", "jsonl", a, b])
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        let rows = try jsonLines(jsonl.stdout)
        #expect(rows.count == 2)
        for (row, path) in zip(rows, [a, b]) {
            guard case .object(var o) = row else { Issue.record("not an object"); continue }
            #expect(o.removeValue(forKey: "trace") == .string(path))
            #expect(o.removeValue(forKey: "traceId") == .string(try TraceReader(path: path).identity))
            #expect(o.removeValue(forKey: "complete") == true)
            #expect(o.removeValue(forKey: "error") == .null)
            #expect(o.removeValue(forKey: "start") == .string(rfc3339(unixNanoseconds: unixNanoseconds(rfc3339: try TraceReader(path: path).header.wallClockStart)!, fractionDigits: 6)))
            // The rest is the trace's own stats --format json.
            #expect(JSONValue.object(o) == (try JSONValue(parsing: try relaytrace(["stats", path, "--format", "json"]).stdout)))
        }
        #expect(rows[0]["types"]?["heartbeat"]?["count"] == 5)
        let text = try relaytrace(["stats", a, b])
        let alone = [try relaytrace(["stats", a]).stdout, try relaytrace(["stats", b]).stdout]
        #expect(text.stdout == "==> \(a) <==\n" + alone[0] + "\n==> \(b) <==\n" + alone[1])
        let json = try JSONValue(parsing: try relaytrace(["stats", "--format", "json", a, b]).stdout)
        #expect(json.arrayValue?.compactMap { $0["trace"]?.stringValue } == [a, b])
        #expect(json.arrayValue?.first?["records"] == .int(Int64(relayTraceRecordCount)))
    }

    @Test func checkOfSeveralTracesIsOneRowPerFindingAndExitsWithTheWorst() throws {
        let broken = try writeSampleTrace()
        let clean = goldenTrace("tour")
        defer { try? FileManager.default.removeItem(atPath: broken) }
        let alone = try JSONValue(parsing: try relaytrace(["check", broken, "--format", "json"]).stdout)
        let findings = try #require(alone["findings"]?.arrayValue)
        #expect(findings.count >= 4)
        #expect(try relaytrace(["check", clean]).status == 0)
        let r = try relaytrace(["check", "--format", "jsonl", clean, broken, clean])
        #expect(r.status == 1, "\(r.stderr)")  // the worst: a broken rule in one trace
        let rows = try jsonLines(r.stdout)
        #expect(rows.count == findings.count)
        let start = try #require(unixNanoseconds(rfc3339: try TraceReader(path: broken).header.wallClockStart))
        for (row, finding) in zip(rows, findings) {
            guard case .object(var o) = row else { Issue.record("not an object"); continue }
            #expect(o.removeValue(forKey: "trace") == .string(broken))
            #expect(o.removeValue(forKey: "traceId") == .string(try TraceReader(path: broken).identity))
            let t = try #require(finding["t"]?.doubleValue)
            #expect(o.removeValue(forKey: "ts") == .string(rfc3339(unixNanoseconds: start + Int64((t * 1e9).rounded()), fractionDigits: 6)))
            #expect(JSONValue.object(o) == finding)
        }
        let text = try relaytrace(["check", clean, broken])
        #expect(text.stdout.hasPrefix("==> \(clean) <==\n"))
        #expect(text.stdout.contains("\n\n==> \(broken) <==\n"))
        let json = try JSONValue(parsing: try relaytrace(["check", "--format", "json", clean, broken]).stdout)
        #expect(json.arrayValue?.map { $0["result"] } == ["held", "broken"])
    }

    @Test func verifyOfSeveralTracesIsOneRowPerTraceOpenedOrNot() throws {
        let a = try writeRelayTrace()
        let bad = try corruptCopy(a)
        let missing = tempPath("rtrace")
        defer { for p in [a, bad] { try? FileManager.default.removeItem(atPath: p) } }
        let r = try relaytrace(["verify", "--format", "jsonl", a, bad, missing])
        #expect(r.status == 66)
        let rows = try jsonLines(r.stdout)
        #expect(rows.map { $0["trace"] } == [.string(a), .string(bad), .string(missing)])
        #expect(rows.map { $0["status"] } == ["ok", "damaged", "unreadable"])
        #expect(rows.map { $0["exitCode"] } == [0, 65, 66])
        #expect(rows[0]["records"] == .int(Int64(relayTraceRecordCount)) && rows[0]["complete"] == true && rows[0]["error"] == .null)
        #expect(rows[1]["error"]?.stringValue?.contains("verification failed") == true)
        #expect(rows[2]["traceId"] == .null)
        let text = try relaytrace(["verify", a, bad])
        #expect(text.status == 65)
        #expect(text.stdout.hasPrefix("\(a): OK: \(relayTraceRecordCount) records in "), "\(text.stdout)")
        #expect(text.stderr.hasPrefix("Error: \(bad): verification failed: "), "\(text.stderr)")
        // One trace: as always, no name before OK.
        #expect(try relaytrace(["verify", a]).stdout.hasPrefix("OK: \(relayTraceRecordCount) records"))
    }
}

/// The export's columns (docs/COLUMNS.md) against the schemas shipped in docs/schema/.
@Suite struct ExportSchemaTests {
    static let schemaDir = GoldenTraceCommandTests.root + "/docs/schema"

    /// The JSON types a JSON Schema `type` allows.
    static func types(_ spec: JSONValue) -> Set<String>? {
        switch spec["type"] {
        case .string(let s)?: [s]
        case .array(let a)?: Set(a.compactMap(\.stringValue))
        default: nil
        }
    }

    static func jsonType(_ v: JSONValue) -> Set<String> {
        switch v {
        case .null: ["null"]
        case .bool: ["boolean"]
        case .int: ["integer", "number"]
        case .double: ["number"]
        case .string: ["string"]
        case .array: ["array"]
        case .object: ["object"]
        }
    }

    @Test func everyRowOfTheGoldenTracesFitsTheJSONSchema() throws {
        let schema = try JSONValue(parsing: String(contentsOfFile: Self.schemaDir + "/export.schema.json", encoding: .utf8))
        let properties = try #require(schema["properties"]?.objectValue)
        let required = Set(try #require(schema["required"]?.arrayValue).compactMap(\.stringValue))
        // Every golden trace, and the fixture with PTC1 frames and a marker.
        let fixture = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: fixture) }
        let r = try relaytrace(["export", "--format", "jsonl", "-o", "-", GoldenTraceCommandTests.root + "/Traces", fixture])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try jsonLines(r.stdout)
        #expect(Set(rows.compactMap { $0["trace"]?.stringValue }).count == 17)
        var seen = Set<String>()
        for row in rows {
            let o = try #require(row.objectValue)
            #expect(required.isSubset(of: o.keys), "missing \(required.subtracting(o.keys)) in \(row.jsonText)")
            for (k, v) in o {
                seen.insert(k)
                guard let spec = properties[k] else { Issue.record("column \(k) is not in the schema"); continue }
                if let allowed = Self.types(spec) {
                    #expect(!allowed.isDisjoint(with: Self.jsonType(v)), "\(k) = \(v.jsonText) is not \(allowed)")
                }
                if let choices = spec["enum"]?.arrayValue { #expect(choices.contains(v), "\(k) = \(v.jsonText)") }
            }
            #expect(o["traceId"]?.stringValue?.count == 16)
            if o["type"] != nil { #expect(o["kind"] == "frameText") }
            #expect((o["json"] == nil) == (o["payload"] == .null))
            if let ts = o["ts"]?.stringValue { #expect(unixNanoseconds(rfc3339: ts) != nil, "\(ts)") }
        }
        // They show every column but a WebSocket ping's data and a text frame that is not JSON.
        #expect(Set(properties.keys).subtracting(seen) == ["dataHex", "jsonError"])
    }

    @Test func theDuckDBAndSparkSchemasNameTheJSONSchemasColumns() throws {
        let schema = try JSONValue(parsing: String(contentsOfFile: Self.schemaDir + "/export.schema.json", encoding: .utf8))
        let columns = Set(try #require(schema["properties"]?.objectValue).keys)
        let sql = try String(contentsOfFile: Self.schemaDir + "/export.duckdb.sql", encoding: .utf8)
        let duck = sql.split(separator: "\n").compactMap { line -> String? in
            let t = line.trimmingCharacters(in: .whitespaces)
            guard t.hasPrefix("'"), let end = t.dropFirst().firstIndex(of: "'") else { return nil }
            return String(t[t.index(after: t.startIndex)..<end])
        }
        #expect(Set(duck) == columns && duck.count == columns.count, "\(duck)")
        let ddl = try String(contentsOfFile: Self.schemaDir + "/export.spark.ddl", encoding: .utf8)
        let spark = ddl.split(separator: ",").map { String($0.trimmingCharacters(in: .whitespacesAndNewlines).prefix { $0 != " " }) }
        #expect(spark == duck, "the Spark DDL lists the DuckDB columns in their order")
    }
}
