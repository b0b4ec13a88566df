import Dispatch
import Foundation
import Glibc
import Inspect
import RelayProtocol
import Testing
import Trace

/// Chromium, its driver and python selenium (tools/setup-browser.sh installs them; tools/test.sh runs it).
let browserToolsMissing: String? = {
    for path in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: path) {
        return "\(path) is not installed: tools/setup-browser.sh installs Debian's chromium and chromium-driver (tools/test.sh runs it)"
    }
    guard let python = interopPython else { return "no .venv/bin/python: tools/setup-browser.sh makes it" }
    guard (try? runProcess(python, ["-c", "import selenium"]))?.status == 0 else {
        return "python selenium is not in .venv: tools/setup-browser.sh installs it"
    }
    return nil
}()

/// `relaytrace view` (and the page `timeline --html` saves) driven in a real headless Chromium by
/// tools/viewer/browser_checks.py with selenium: the first records, a filter that narrows, a click that
/// shows a frame's JSON, a click on a timeline mark, zoom that changes the tick labels down to
/// milliseconds, j/k/n and /, the divergence of a diverging trace, and no console error. The page's load
/// and redraw times on a 24 h trace are measured and printed (tools/bench-viewer.sh writes them to
/// docs/BENCHMARKS.md), never asserted.
@Suite("relaytrace view in a real Chromium", .serialized,
       .enabled(if: browserToolsMissing == nil, "browser tests skipped: \(browserToolsMissing ?? "")"))
struct ViewerBrowserTests {
    static let golden = packageRoot.appendingPathComponent("Traces/tour.rtrace").path

    /// Every record of a trace, correlated as the viewer's list shows them.
    static func records(_ path: String) throws -> [InspectedRecord] {
        let reader = try TraceReader(path: path)
        var c = RpcCorrelator()
        var out: [InspectedRecord] = []
        while let e = try reader.next() {
            var r = InspectedRecord(e)
            c.correlate(&r)
            out.append(r)
        }
        return out
    }

    /// The checks' expectations, from the trace as the inspect layer reads it.
    static func expectations(_ path: String, url: String, filter: String, limitFirst: Int = 3, click: Int? = nil,
                             divergence: Int? = nil, kind: String = "machine", rows: JSONValue = [:], markKinds: [String] = [],
                             measure: Bool = false, countMatches: Bool = true) throws -> JSONValue {
        let all = try records(path)
        let f = try ViewerQueryForTests.filter(filter)
        let matches = all.filter(f.matches)
        // A record with a redaction placeholder if there is one early, else record 3.
        let clicked = click ?? all.prefix(40).first { $0.record.payloadText.contains(Redactor.placeholderPrefix) }.map { Int($0.number) } ?? 3
        let c = all[clicked]
        var contains: [String] = []
        if let t = c.type { contains.append("\"type\": \"\(t)\"") }
        contains.append("\"kind\": \"\(c.record.kind.name)\"")
        let redactions = c.record.payloadText.components(separatedBy: Redactor.placeholderPrefix).count - 1
        return .object([
            "url": .string(url),
            "first": .array(all.prefix(5).map { .object(["i": .int(Int64($0.number)), "ty": .string($0.typeName)]) }),
            "filter": .object(["q": .string(filter), "first": .array(matches.prefix(limitFirst).map { .int(Int64($0.number)) }),
                               "count": countMatches ? .int(Int64(matches.count)) : .null]),
            "click": .object(["i": .int(Int64(clicked)), "contains": .array(contains.map { .string($0) }), "redacted": .int(Int64(min(redactions, 1)))]),
            "divergence": divergence.map { .int(Int64($0)) } ?? .null,
            "kind": .string(kind), "rows": rows, "markKinds": .array(markKinds.map { .string($0) }), "measure": .bool(measure),
        ])
    }

    /// Runs the python checks on `caseJSON`; every check must pass. Returns the timing line.
    @discardableResult
    static func runChecks(_ caseJSON: JSONValue, label: String) throws -> JSONValue? {
        let python = try #require(interopPython)
        let file = tempPath("json")
        defer { unlink(file) }
        try caseJSON.jsonText.write(toFile: file, atomically: true, encoding: .utf8)
        let script = packageRoot.appendingPathComponent("tools/viewer/browser_checks.py").path
        let checks = try Child(python, [script, file])
        defer { checks.kill() }
        let status = checks.waitForExit(within: .seconds(240))
        let report = "\(label): python exited \(status.map(String.init) ?? "(killed)")\n--- stdout\n\(checks.stdout.text)--- stderr\n\(checks.stderr.text)"
        var seen: [String] = []
        var timing: JSONValue?
        for line in checks.stdout.text.split(separator: "\n") {
            guard let j = try? JSONValue(parsing: String(line)), let name = j["check"]?.stringValue else { continue }
            seen.append(name)
            if name == "timing" { timing = j }
            #expect(j["ok"]?.boolValue == true, "\(label): \(name) failed: \(j["detail"]?.stringValue ?? "")\n\(report)")
        }
        for name in ["loaded", "first-rows", "kind", "timeline-rows", "mark-kinds", "filter", "keys-j-k", "click-frame", "click-mark", "zoom-ticks", "console"] {
            #expect(seen.contains(name), "\(label): check \(name) did not run\n\(report)")
        }
        #expect(status == 0, "\(report)")
        if let timing { print("viewer timing (\(label)): \(timing.jsonText)") }
        return timing
    }

    /// Starts `relaytrace view` on `path` and returns it with its URL.
    static func startViewer(_ path: String, _ extra: [String] = []) throws -> (Child, String) {
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        let viewer = try Child(binary, ["view", path, "--listen", "127.0.0.1:0", "--for", "300s"] + extra)
        guard let first = viewer.stdout.firstLine(within: .seconds(30)) else {
            viewer.kill()
            throw InteropFailure("relaytrace view printed nothing; stderr: \(viewer.stderr.text)")
        }
        guard first.hasPrefix("viewer on http://127.0.0.1:"), let url = first.split(separator: " ").dropFirst(2).first else {
            viewer.kill()
            throw InteropFailure("unexpected first line \"\(first)\"")
        }
        return (viewer, String(url))
    }

    @Test("a golden trace: list, filter, detail, timeline, zoom, keys", .timeLimit(.minutes(5)))
    func goldenTrace() throws {
        let (viewer, url) = try Self.startViewer(Self.golden)
        defer { viewer.kill() }
        let expect = try Self.expectations(Self.golden, url: url, filter: "type:rpc.request dir:out",
                                           rows: ["max": 6, "contains": ["sockets", "leases", "timers"]],
                                           markKinds: ["registered", "rpc", "heartbeat", "leaseRenew", "timer"])
        try Self.runChecks(expect, label: "tour.rtrace")
        #expect(viewer.terminate(within: .seconds(15)) == 0, "\(viewer.stderr.text)")
        #expect(viewer.stdout.text.contains("viewer stopped"))
    }

    @Test("the page timeline --html saves: the same list, filter and timeline from the file", .timeLimit(.minutes(5)))
    func savedPage() throws {
        let html = tempPath("html")
        defer { unlink(html) }
        let r = try relaytrace(["timeline", Self.golden, "--html", html])
        #expect(r.status == 0, "\(r.stderr)")
        let expect = try Self.expectations(Self.golden, url: "file://" + html, filter: "method:session.list",
                                           rows: ["max": 6, "contains": ["sockets", "leases"]], markKinds: ["rpc", "registered"])
        try Self.runChecks(expect, label: "saved tour page")
    }

    @Test("a diverging trace: the strict replay's divergence is marked", .timeLimit(.minutes(5)))
    func divergingTrace() throws {
        // The golden tour with one recorded action changed: the replay diverges there.
        let reader = try TraceReader(path: Self.golden)
        let entries = reader.readAll().entries
        let target = try #require(entries.first { $0.record.kind == .action && $0.record.payloadText.contains("\"armTimer\"") && $0.number > 40 })
        let tampered = tempPath("rtrace")
        defer { unlink(tampered) }
        var options = TraceWriterOptions()
        options.redactionKey = reader.header.redaction.key
        let writer = try TraceWriter(path: tampered, header: reader.header, options: options)
        for e in entries {
            var rec = e.record
            if e.number == target.number {
                var json = try JSONValue(parsing: rec.payloadText)
                if case .object(var o) = json, let d = o["deadline"]?.intValue { o["deadline"] = .int(d + 1_000_000); json = .object(o) }
                rec.payload = json.serialized()
            }
            writer.append(rec)
        }
        _ = try writer.close()
        let replay = try relaytrace(["replay", tampered, "--format", "json"])
        let divergence = try #require(try JSONValue(parsing: replay.stdout)["divergence"]?["record"]?.intValue)
        let (viewer, url) = try Self.startViewer(tampered, ["--replay"])
        defer { viewer.kill() }
        let expect = try Self.expectations(tampered, url: url, filter: "type:registered", divergence: Int(divergence))
        try Self.runChecks(expect, label: "diverging tour")
    }

    @Test("a wire trace (pings, pongs, a socket per client) and a watch-channel trace", .timeLimit(.minutes(5)))
    func wireAndWatchTraces() throws {
        let wire = try Self.writeWireTrace()
        defer { unlink(wire) }
        let (viewer, url) = try Self.startViewer(wire)
        defer { viewer.kill() }
        let expect = try Self.expectations(wire, url: url, filter: "type:ping,pong", kind: "wire",
                                           rows: ["max": 3, "contains": ["sockets 1", "sockets 2"]], markKinds: ["heartbeat", "rpc", "close"])
        try Self.runChecks(expect, label: "wire trace")

        let watch = tempPath("rtrace")
        defer { unlink(watch) }
        let sim = try relaytrace(["simulate", "--scenario", "watch-offline", "-o", watch])
        #expect(sim.status == 0, "\(sim.stderr)")
        let (w, wurl) = try Self.startViewer(watch)
        defer { w.kill() }
        let wexpect = try Self.expectations(watch, url: wurl, filter: "channel:watch", kind: "watch",
                                            rows: ["contains": ["watch"]], markKinds: ["watchFrame"], countMatches: false)
        try Self.runChecks(wexpect, label: "watch trace")
    }

    @Test("a 24 h tour: opens at once, packed rows, load and redraw times", .timeLimit(.minutes(8)))
    func dayLongTrace() throws {
        let day = tempPath("rtrace")
        defer { unlink(day) }
        let sim = try relaytrace(["simulate", "--scenario", "tour", "--duration", "24h", "-o", day])
        #expect(sim.status == 0, "\(sim.stderr)")
        let (viewer, url) = try Self.startViewer(day)
        defer { viewer.kill() }
        // The filter's first matches (not the count: the list fills in as the page scrolls).
        let expect = try Self.expectations(day, url: url, filter: "method:session.list",
                                           rows: ["max": 12, "contains": ["sockets", "leases", "recovery"]],
                                           markKinds: ["rpc", "heartbeat", "registered", "epoch"], measure: true, countMatches: false)
        let timing = try Self.runChecks(expect, label: "24 h tour")
        #expect(timing != nil, "no timing line")
    }

    /// A small wire trace as the recording proxy writes one (docs/TRACE_FORMAT.md section 14): two
    /// clients' sockets at once, messages both ways, pings and pongs, closes.
    static func writeWireTrace() throws -> String {
        let path = tempPath("rtrace")
        var header = TraceHeader(seed: 0, wallClockStart: "2026-01-15T10:00:00Z", simulated: false, client: [:])
        header.extra["wire"] = ["source": "proxy", "listen": "127.0.0.1:9000", "upstream": "ws://127.0.0.1:8787/ws/device-link"]
        let w = try TraceWriter(path: path, header: header, options: TraceWriterOptions())
        func rec(_ kind: RecordKind, _ s: Double, _ g: UInt64, _ dir: FrameDirection, _ payload: String) {
            w.append(TraceRecord(kind: kind, time: .seconds(s), generation: g, direction: dir, payload: Array(payload.utf8)))
        }
        for g in UInt64(1)...2 {
            let t = Double(g) * 0.5
            rec(.transportOpen, t, g, .outbound, #"{"url":"/ws/device-link","headers":{"X-Device-ID":"dev-\#(g)"},"headerOrder":["X-Device-ID"],"deviceId":"dev-\#(g)","clientType":"mobile"}"#)
            rec(.transportOpened, t + 0.01, g, .inbound, #"{"status":101}"#)
            rec(.frameText, t + 0.02, g, .outbound, #"{"type":"register","payload":{"deviceId":"dev-\#(g)"}}"#)
            rec(.frameText, t + 0.05, g, .inbound, #"{"type":"registered","payload":{"relaySessionId":"s\#(g)"}}"#)
            for i in 0..<5 {
                rec(.ping, t + 1 + Double(i) * 2, g, .inbound, "p\(i)")
                rec(.pong, t + 1.001 + Double(i) * 2, g, .outbound, "p\(i)")
            }
            rec(.frameText, t + 3, g, .outbound, #"{"type":"rpc.request","payload":{"id":"r\#(g)","method":"session.list","params":{}}}"#)
            rec(.frameText, t + 3.2, g, .inbound, #"{"type":"rpc.response","payload":{"id":"r\#(g)","result":{"sessions":[]}}}"#)
        }
        for g in UInt64(1)...2 { rec(.transportClosed, 12 + Double(g), g, .outbound, #"{"code":1000,"reason":"bye","clean":true}"#) }
        _ = try w.close()
        return path
    }
}

/// The viewer's filter language, as the tests expect it to read (the same terms as `frames`).
enum ViewerQueryForTests {
    static func filter(_ text: String) throws -> FrameFilter {
        var f = FrameFilter()
        for term in text.split(separator: " ") {
            let kv = term.split(separator: ":", maxSplits: 1).map(String.init)
            switch kv[0] {
            case "type": f.types = FrameFilter.list(kv[1])
            case "dir": f.direction = kv[1] == "in" ? .inbound : .outbound
            case "method": f.methods = FrameFilter.list(kv[1])
            case "channel": f.channel = kv[1] == "watch" ? .watch : .relay
            default: throw InteropFailure("the tests' filters use type:, dir:, method:, channel: only")
            }
        }
        return f
    }
}
