import Foundation
import RelayProtocol
import Testing
import Trace

/// The golden trace `name` in Traces/.
func goldenTrace(_ name: String) -> String { GoldenTraceCommandTests.root + "/Traces/\(name).rtrace" }

/// The handover scenario's facts: `files.search` (call 1) is sent on g1 at 28 s and fails at 30 s when
/// the client closes g1 for the interface switch; the recovery epoch it opens ends at 30.120 s.
let handoverSearchId = "14452A08-5697-4892-A7A3-66C27B1C2E64"

/// A short trace of sockets that failed: g1 refused by TCP (no HTTP answer), g2 refused with 401, g3
/// opened with one heartbeat and its pong. `close: false` leaves it as a killed recorder does.
func writeFailedSocketsTrace(close: Bool = true) throws -> String {
    let path = tempPath("rtrace")
    let w = try TraceWriter(path: path, header: TraceHeader(seed: 1, wallClockStart: "2026-01-15T10:00:00Z", simulated: true, client: [:]))
    func rec(_ kind: RecordKind, _ s: Double, _ g: UInt64, _ json: String, _ dir: FrameDirection) {
        w.append(TraceRecord(kind: kind, time: .seconds(s), generation: g, direction: dir, payload: Array(json.utf8)))
    }
    rec(.transportOpen, 0, 1, #"{"url":"wss://relay.example/ws/device-link","headers":{"X-Device-ID":"5b0e6c8a"}}"#, .outbound)
    rec(.transportFailed, 0.1, 1, #"{"error":"connection refused"}"#, .inbound)
    rec(.transportOpen, 1, 2, #"{"url":"wss://relay.example/ws/device-link","headers":{}}"#, .outbound)
    rec(.transportFailed, 1.2, 2, #"{"error":"upgrade refused: HTTP 401","status":401}"#, .inbound)
    rec(.transportOpen, 2, 3, #"{"url":"wss://relay.example/ws/device-link","headers":{}}"#, .outbound)
    rec(.transportOpened, 2.1, 3, "", .inbound)
    w.append(.frame(.text(#"{"type":"heartbeat","payload":{}}"#), time: .seconds(7), generation: 3, direction: .outbound))
    w.append(.frame(.text(#"{"type":"pong"}"#), time: .seconds(7.05), generation: 3, direction: .inbound))
    if close { try w.close() } else { try leaveAsKilled(w, path) }
    return path
}

// MARK: 1. Failure cases drawn as they happened

@Suite struct FailureViewTests {
    @Test func timelineEndsTheFailedSearchAtTheCloseNotItsTimeout() throws {
        let r = try relaytrace(["timeline", goldenTrace("handover")])
        #expect(r.status == 0, "\(r.stderr)")
        // Before: drawn from 28 s to the end of the trace (60 s), past the close of g1 at 30 s.
        #expect(r.stdout.contains("g1: rpc at 28.000s (record 46): rpc.request id=\(handoverSearchId) method=files.search"), "\(r.stdout)")
        #expect(r.stdout.contains("-> failed: connectionClosed (network interface changed) at 30.000s (after 2.000s)"), "\(r.stdout)")
        #expect(r.stdout.contains("recovery: epoch at 30.000s"), "\(r.stdout)")
        #expect(r.stdout.contains("ended at 30.120s (0.120s after it opened): desktop online"), "\(r.stdout)")
        let g1 = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("g1 ") })
        // The span (? then =) stops at the close (x) near the middle, nothing after it.
        let row = String(g1.split(separator: "|", maxSplits: 1)[1])
        let x = try #require(row.firstIndex(of: "x"))
        #expect(row[row.index(after: x)...].allSatisfy { $0 == " " }, "\(g1)")
        #expect(row.contains("?=="), "\(g1)")
    }

    @Test func htmlDrawsTheSpanToTheCloseAndTheEpochAsABand() throws {
        let out = tempPath("html")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try relaytrace(["timeline", goldenTrace("handover"), "--html", out])
        #expect(r.status == 0, "\(r.stderr)")
        let html = try String(contentsOfFile: out, encoding: .utf8)
        // The saved viewer page's timeline data ([kind, start, end, record, count]): the epoch is a band
        // from 30 s to its end at 30.12 s; the unanswered files.search (record 46) spans 28 s to 30 s.
        #expect(html.contains(#"["epoch",30000000000,30120000000,"#), "\(html.count) bytes")
        #expect(html.contains(#"["rpcUnanswered",28000000000,30000000000,46,"#))
    }

    @Test func chromeTraceHasASliceForTheFailedSearchEndingAtThirtySeconds() throws {
        let out = tempPath("json")
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(try relaytrace(["export", goldenTrace("handover"), "--format", "chrome-trace", "-o", out]).status == 0)
        let doc = try JSONValue(parsing: try String(contentsOfFile: out, encoding: .utf8))
        let slices = (doc["traceEvents"]?.arrayValue ?? []).filter { $0["ph"] == "X" }
        let search = try #require(slices.first { $0["name"] == "files.search" }, "\(slices)")
        #expect(search["ts"]?.doubleValue == 28_000_000)
        #expect(search["dur"]?.doubleValue == 2_000_000)
        #expect(search["args"]?["outcome"]?.stringValue == "failed: connectionClosed (network interface changed)")
        #expect(slices.contains { $0["name"] == "system.ping" && $0["args"]?["outcome"] == "answered" })
    }

    @Test(.enabled(if: which("tshark") != nil, "tshark is not installed (tools/setup.sh installs it)"))
    func pcapngShowsHandshakesAndFailedConnections() throws {
        let path = try writeFailedSocketsTrace()
        let pcap = tempPath("pcapng")
        defer { for p in [path, pcap] { try? FileManager.default.removeItem(atPath: p) } }
        #expect(try relaytrace(["export", path, "--format", "pcapng", "-o", pcap]).status == 0)
        let tshark = try #require(which("tshark"))
        let r = try runProcess(tshark, ["-r", pcap, "-T", "fields", "-E", "separator=|", "-e", "frame.interface_name", "-e", "_ws.col.Protocol",
                                        "-e", "http.request.method", "-e", "http.response.code", "-e", "tcp.flags.reset", "-e", "frame.comment"])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = r.stdout.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        // g1: a SYN and a RST whose comment holds the failure.
        let g1 = rows.filter { $0.first == "gen1" }
        #expect(g1.count == 2, "\(r.stdout)")
        #expect(g1.last?.contains { $0.contains("connection refused") } == true, "\(r.stdout)")
        #expect(g1.last.map { ["1", "True", "true"].contains($0[4]) } == true, "\(r.stdout)")
        // g2: the upgrade GET and its 401.
        let g2 = rows.filter { $0.first == "gen2" }
        #expect(g2.map { $0[2] } == ["GET", ""], "\(r.stdout)")
        #expect(g2.map { $0[3] } == ["", "401"], "\(r.stdout)")
        // g3: GET, 101, then the two WebSocket messages.
        let g3 = rows.filter { $0.first == "gen3" }
        #expect(g3.count == 4, "\(r.stdout)")
        #expect(g3.first?[2] == "GET")
        #expect(g3.dropFirst().first?[3] == "101")
    }
}
