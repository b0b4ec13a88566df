import Foundation
import Testing

/// Every inspection command works on every trace in Traces/, with the documented exit codes.
@Suite struct GoldenTraceCommandTests {
    static let root: String = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
            dir.deleteLastPathComponent()
        }
        return dir.path
    }()

    static let traces: [String] = {
        let dir = root + "/Traces"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".rtrace") }.sorted()
    }()

    @Test func thereAreGoldenTraces() {
        #expect(GoldenTraceCommandTests.traces.count >= 14)
    }

    @Test(arguments: traces)
    func everyCommandWorksOnTheGoldenTrace(name: String) throws {
        let path = GoldenTraceCommandTests.root + "/Traces/" + name
        for args in [["info", path], ["verify", path], ["frames", path, "--format", "jsonl"], ["frames", path, "--format", "table", "--dir", "out"],
                     ["show", path, "5"], ["stats", path, "--format", "json"], ["timeline", path], ["diff", path, path],
                     ["lint", path], ["replay", path], ["replay", path, "--what-if"]] {
            let r = try relaytrace(args)
            #expect(r.status == 0, "relaytrace \(args.joined(separator: " ")): \(r.stderr)\(r.stdout.suffix(2000))")
        }
        for format in ["pcapng", "har", "jsonl", "chrome-trace"] {
            let out = tempPath(format)
            defer { try? FileManager.default.removeItem(atPath: out) }
            let r = try relaytrace(["export", path, "--format", format, "-o", out])
            #expect(r.status == 0, "export \(format): \(r.stderr)")
            let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
            #expect(size > 0)
        }
    }
}
