import Foundation
import RelayProtocol
import Testing
import Trace

/// `relaytrace check`: output, JSON, options and the documented exit codes.
@Suite struct CheckCommandTests {
    @Test(arguments: GoldenTraceCommandTests.traces)
    func goldenTracesPass(name: String) throws {
        let r = try relaytrace(["check", GoldenTraceCommandTests.root + "/Traces/" + name])
        #expect(r.status == 0, "\(name): \(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasPrefix("machine trace: ") && r.stdout.contains("result: every rule judged held"), "\(r.stdout)")
    }

    /// The sample trace's client breaks several rules (a 1.5-less register, a mutation without key or
    /// traceparent): exit 1, each named with its record; JSON says the same.
    @Test func aBrokenClientExits1WithItsFindings() throws {
        let path = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = try relaytrace(["check", path])
        #expect(text.status == 1, "\(text.stdout)\(text.stderr)")
        for line in ["A6.register at record 2 (0.300s, gen 1): relayProtocolVersion absent; required relayProtocolVersion \"1.6\"",
                     "A8.idempotencyKey at record 4 (1.250s, gen 1): session.update without idempotencyKey",
                     "A8.traceparent at record 4 (1.250s, gen 1): no traceparent"] {
            #expect(text.stdout.contains(line), "\(text.stdout)")
        }
        #expect(text.stdout.contains("  A8.traceparent     BROKEN 1 of 1 "), "\(text.stdout)")
        let json = try relaytrace(["check", path, "--format", "json"])
        #expect(json.status == 1)
        let j = try JSONValue(parsing: json.stdout)
        #expect(j["result"] == "broken")
        let rules = Set(j["findings"]?.arrayValue?.compactMap { $0["rule"]?.stringValue } ?? [])
        #expect(rules.isSuperset(of: ["A6.register", "A8.idempotencyKey", "A8.traceparent", "A4.headers"]), "\(rules)")
        #expect(j["rules"]?.arrayValue?.count == 23)
        // Skipping the broken rules makes it pass.
        let skipped = try relaytrace(["check", path, "--skip", "A4,A6,A7,A8"])
        #expect(skipped.status == 0, "\(skipped.stdout)")
        #expect(skipped.stdout.contains("skipped"))
    }

    @Test func anIncompleteTraceIsCheckedWithANote() throws {
        let path = try writeSampleTrace(close: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(["check", path, "--skip", "A4,A6,A7,A8"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("note: the trace is incomplete"))
    }

    @Test func aDamagedTraceReportsWhatItCouldThenExits65() throws {
        let bad = try corruptCopy(GoldenTraceCommandTests.root + "/Traces/tour.rtrace")
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let r = try relaytrace(["check", bad])
        #expect(r.status == 65, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("note: the trace is damaged") && r.stdout.contains("rules:"), "\(r.stdout)")
        #expect(r.stderr.hasPrefix("Error: "))
    }

    @Test(arguments: [["--tolerance", "fast"], ["--early-tolerance", "-1s"], ["--skip", "A99"], ["--format", "xml"], []])
    func usageErrorsAre64(_ extra: [String]) throws {
        let args = extra.isEmpty ? ["check"] : ["check", GoldenTraceCommandTests.root + "/Traces/tour.rtrace"] + extra
        let r = try relaytrace(args)
        #expect(r.status == 64, "\(args) \(r.stderr)")
        #expect(r.stderr.hasPrefix("Error: "))
    }

    @Test func aMissingFileIs66() throws {
        let r = try relaytrace(["check", "/nonexistent/x.rtrace"])
        #expect(r.status == 66)
        #expect(r.stderr.contains("No such file or directory"))
    }

    @Test func aWatchTraceHasNoRelayRule() throws {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try relaytrace(["simulate", "--scenario", "watch-offline", "-o", path]).status == 0)
        let r = try relaytrace(["check", path, "--format", "json"])
        #expect(r.status == 0)
        let j = try JSONValue(parsing: r.stdout)
        #expect(j["notes"]?[0]?.stringValue?.contains("watch-channel trace") == true)
        #expect(j["rules"]?.arrayValue?.allSatisfy { $0["status"] == "notApplicable" } == true)
    }
}
