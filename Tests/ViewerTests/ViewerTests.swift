import Foundation
import Inspect
import Net
import RelayProtocol
import Testing
import Trace
@testable import Viewer

/// The package root (this file is Tests/ViewerTests/ViewerTests.swift).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let tourTrace = packageRoot.appendingPathComponent("Traces/tour.rtrace").path

/// Every record of a trace, correlated as `frames` does.
func allRecords(_ path: String) throws -> [InspectedRecord] {
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

func get(_ s: ViewerService, _ path: String, _ query: [String: String] = [:]) throws -> (status: Int, json: JSONValue) {
    let r = s.handle(HTTPRequest(method: "GET", path: path, query: query))
    return (r.status, try JSONValue(parsing: String(decoding: r.body, as: UTF8.self)))
}

@Suite struct HTTPRequestTests {
    @Test func parsesTargetQueryAndHeaders() throws {
        let head = Array("GET /api/search?q=type%3Arpc.request+dir:in&from=5 HTTP/1.1\r\nHost: 127.0.0.1:8790\r\nConnection: close".utf8)
        let r = try #require(HTTPRequest(head: head))
        #expect(r.method == "GET" && r.path == "/api/search")
        #expect(r.query == ["q": "type:rpc.request dir:in", "from": "5"])
        #expect(r.headers["host"] == "127.0.0.1:8790" && r.headers["connection"] == "close")
    }

    @Test func refusesMalformedHeads() {
        for bad in ["GET /x", "GET x HTTP/1.1", "GET /a%zz HTTP/1.1", "GET /a HTTP/1.1\r\nno colon", "GET /?q=%ff%fe HTTP/1.1", ""] {
            #expect(HTTPRequest(head: Array(bad.utf8)) == nil, "\(bad)")
        }
        #expect(ViewerHTTPServer.hostName("[::1]:8790") == "[::1]")
        #expect(ViewerHTTPServer.hostName("localhost:1") == "localhost")
        #expect(ViewerHTTPServer.hostName("evil.example") == "evil.example")
    }
}

@Suite struct ViewerQueryTests {
    @Test func termsBecomeTheFramesFilters() throws {
        let f = try ViewerQuery.filter(#"type:rpc.request,event dir:out gen:2,3 method:session.list since:1m until:2m30s channel:relay "two  words" id:r-1 event:device-status"#)
        #expect(f.types == ["rpc.request", "event"])
        #expect(f.direction == .outbound)
        #expect(f.generations == [2, 3])
        #expect(f.methods == ["session.list"])
        #expect(f.since == .seconds(60) && f.until == .seconds(150))
        #expect(f.channel == .relay)
        #expect(f.rpcIds == ["r-1"] && f.events == ["device-status"])
        #expect(f.grep == "two  words")
        #expect(try ViewerQuery.filter("hello world url:x").grep == "hello world url:x")
        #expect(try ViewerQuery.filter("") == FrameFilter())
    }

    @Test func badTermsSayHowToWriteThem() {
        let cases = ["gen:x": "not a generation number", "dir:up": "dir: is in", "since:soon": "since:", "channel:tv": "channel: is relay or watch",
                     "method:": "needs a value", "since:2m until:1m": "before since:"]
        for (text, needle) in cases {
            #expect(throws: FilterError.self, "\(text)") { try ViewerQuery.filter(text) }
            do { _ = try ViewerQuery.filter(text) } catch { #expect(error.message.contains(needle), "\(text): \(error.message)") }
        }
    }
}

@Suite struct TimelineLayoutTests {
    /// A trace of generations: g1 0-10 s, g2 12-20 s (after g1: same row), g3 15-30 s (overlaps g2: a
    /// second row), g4 31-40 s (first row again); heartbeats every 100 ms on g4.
    func timeline() -> Timeline {
        var t = Timeline(labels: false)
        var n: UInt64 = 0
        func add(_ kind: RecordKind, _ s: Double, _ g: UInt64, _ payload: String = "", dir: FrameDirection = .inbound) {
            t.add(InspectedRecord(number: n, record: TraceRecord(kind: kind, time: .seconds(s), generation: g, direction: dir, payload: Array(payload.utf8))))
            n += 1
        }
        for (g, a, b) in [(UInt64(1), 0.0, 10.0), (2, 12, 20), (3, 15, 30), (4, 31, 40)] {
            add(.transportOpen, a, g, #"{"url":"ws://x"}"#, dir: .outbound)
            add(.transportOpened, a + 0.1, g)
            if g == 4 { for i in 0..<80 { add(.frameText, a + 0.2 + Double(i) * 0.1, g, #"{"type":"heartbeat"}"#, dir: .outbound) } }
            add(.frameText, a + 0.5, g, #"{"type":"rpc.request","payload":{"id":"r\#(g)","method":"m"}}"#, dir: .outbound)
            add(.frameText, a + 1.5, g, #"{"type":"rpc.response","payload":{"id":"r\#(g)","result":{}}}"#)
            add(.transportClosed, b, g, #"{"code":1000,"reason":""}"#)
        }
        t.finish()
        return t
    }

    @Test func generationsThatNeverOverlapShareARow() {
        let l = TimelineLayout(timeline())
        #expect(l.rows.map(\.name) == ["sockets 1", "sockets 2"])
        #expect(l.rows[0].lanes.map(\.name) == ["g1", "g2", "g4"])
        #expect(l.rows[1].lanes.map(\.name) == ["g3"])
        #expect(l.rows[0].lanes[1].start == .seconds(12) && l.rows[0].lanes[1].end == .seconds(20))
    }

    @Test func aWindowHoldsAtMostAMarkPerPixelAndCountsEveryMark() throws {
        let l = TimelineLayout(timeline())
        let full = l.window(from: l.start, to: l.end, width: 40)
        let row = full[0]
        #expect(row.aggregated)
        #expect(row.marks.filter { $0.end == nil }.count <= 40 * TimelineMark.Kind.allCases.count)
        #expect(Set(row.marks.map { "\(Int(($0.time.nanoseconds - l.start.nanoseconds) / ((l.end.nanoseconds - l.start.nanoseconds) / 40)))-\($0.kind)" }).count == row.marks.count)
        #expect(Set(row.marks.map(\.kind)).isSuperset(of: [.heartbeat, .open, .close]))
        #expect(row.marks.reduce(0) { $0 + $1.count } == row.total)
        #expect(row.total == l.rows[0].markCount)
        // At 200 pixels the RPC span of g1 (1 s of 40 s: 5 pixels) is kept as a span with its end.
        let wide = l.window(from: l.start, to: l.end, width: 200)[0]
        #expect(!wide.aggregated)
        let rpc = try #require(wide.marks.first { $0.kind == .rpc && $0.time == .seconds(0.5) })
        #expect(rpc.end == .seconds(1.5) && rpc.count == 1)
        // Zoomed into g4's heartbeats: raw marks, no aggregation, only what is in the window.
        let zoomed = l.window(from: .seconds(32), to: .seconds(33), width: 1000)[0]
        #expect(!zoomed.aggregated)
        #expect(zoomed.marks.allSatisfy { $0.count == 1 && $0.time <= .seconds(33) && ($0.end ?? $0.time) >= .seconds(32) })
        #expect(zoomed.marks.filter { $0.kind == .heartbeat }.count == 10 || zoomed.marks.filter { $0.kind == .heartbeat }.count == 11)
        #expect(zoomed.lanes.map(\.name) == ["g4"])
    }
}

@Suite struct ViewerServiceTests {
    @Test func recordsSearchDetailAndTimelineOnAGoldenTrace() throws {
        let s = try ViewerService(path: tourTrace, background: false)
        let all = try allRecords(tourTrace)
        let info = try get(s, "/api/info")
        #expect(info.status == 200 && info.json["records"]?.intValue == Int64(all.count))
        #expect(info.json["header"]?["redaction"]?["key"] == nil)  // the redaction key is not served
        #expect(info.json["kind"] == "machine")

        // A page of rows: the same records, correlated (a response names its request's method).
        let page = try get(s, "/api/records", ["from": "10", "count": "50"])
        let rows = try #require(page.json["rows"]?.arrayValue)
        #expect(rows.count == 50)
        for (row, rec) in zip(rows, all[10..<60]) {
            #expect(row == ViewerJSON.row(rec), "record \(rec.number)")
        }
        #expect(try get(s, "/api/records", ["from": String(all.count - 3), "count": "50"]).json["rows"]?.arrayValue?.count == 3)

        // By time: the first record at or after the middle record's time.
        let mid = all[all.count / 2]
        let seek = try get(s, "/api/records", ["t": String(mid.record.time.nanoseconds)])
        #expect(seek.json["index"]?.intValue == Int64(all.firstIndex { $0.record.time >= mid.record.time }!))

        // Search: the frames filter's matches, in order, in pages.
        let f = try ViewerQuery.filter("type:rpc.request dir:out")
        let expected = all.filter(f.matches).map(\.number)
        #expect(!expected.isEmpty)
        var got: [UInt64] = []
        var from = 0
        var calls = 0
        while calls < 100 {
            let r = try get(s, "/api/search", ["q": "type:rpc.request dir:out", "from": String(from), "limit": "3"])
            got += (r.json["rows"]?.arrayValue ?? []).compactMap { $0["i"]?.intValue.map(UInt64.init) }
            from = Int(r.json["next"]?.intValue ?? 0)
            calls += 1
            if r.json["done"]?.boolValue == true { break }
        }
        #expect(got == expected)
        #expect(try get(s, "/api/search", ["q": "gen:x"]).status == 400)

        // One record in full: show's object.
        let detail = try get(s, "/api/record", ["n": "5"])
        #expect(detail.json == all[5].detail)
        #expect(try get(s, "/api/record", ["n": String(all.count)]).status == 400)

        // The timeline at two zoom levels, bounded by the width.
        let t = try get(s, "/api/timeline", ["width": "300"])
        #expect(t.json["state"] == "ready")
        let trows = try #require(t.json["rows"]?.arrayValue)
        #expect(!trows.isEmpty)
        #expect(trows.allSatisfy { ($0["marks"]?.arrayValue?.filter { $0[2]?.isNull == true }.count ?? 0) <= 300 })
        let stats = try get(s, "/api/stats")
        #expect(stats.json["stats"]?["records"]?.intValue == Int64(all.count) || stats.json["text"]?.stringValue?.isEmpty == false)
        #expect(s.handle(HTTPRequest(method: "GET", path: "/nope")).status == 404)
        let page0 = s.handle(HTTPRequest(method: "GET", path: "/"))
        #expect(page0.status == 200 && String(decoding: page0.body, as: UTF8.self).contains("<canvas id=\"timeline\""))
    }

    @Test func theSavedPageEmbedsTheSameRowsAndDetails() throws {
        let reader = try TraceReader(path: tourTrace)
        let saved = SavedPage(reader: reader, title: "tour")
        let all = try allRecords(tourTrace)
        let rows = try #require(saved.data["rows"]?.arrayValue)
        #expect(rows.count == all.count)
        #expect(saved.data["details"]?.arrayValue?[7] == all[7].detail)
        var row = rows[3]
        if case .object(var o) = row { o["x"] = nil; row = .object(o) }
        #expect(row == ViewerJSON.row(all[3]))
        let html = saved.html(title: "tour </script><b>")
        #expect(html.contains("id=\"embedded\"") && html.contains("tour &lt;/script&gt;&lt;b&gt;") && !html.contains("tour </script>"))
        #expect(html.components(separatedBy: "</script>").count == 3)  // the data's and the script's only
        // A saved page of fewer records says so.
        let small = SavedPage(reader: try TraceReader(path: tourTrace), title: "t", maxRecords: 10)
        #expect(small.data["rows"]?.arrayValue?.count == 10)
        #expect(small.data["info"]?["truncated"]?.stringValue?.contains("first 10 of \(all.count) records") == true)
    }
}

/// The server on a real loopback socket: keep-alive, refusals, the Host check.
@Suite struct ViewerHTTPServerTests {
    func exchange(_ port: UInt16, _ requests: [String]) throws -> [String] {
        let stream = try TCP.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        defer { stream.close() }
        var answers: [String] = []
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        for request in requests {
            let bytes = Array(request.utf8)
            try bytes.withUnsafeBytes { p in try stream.write(p, timeout: .seconds(5)) }
            // One response: head, then Content-Length bytes.
            while true {
                if let end = ViewerHTTPServer.headEnd(buffer) {
                    let head = String(decoding: buffer[0..<end], as: UTF8.self)
                    let length = request.hasPrefix("HEAD ") ? 0 : head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                    if buffer.count >= end + 4 + length {
                        answers.append(String(decoding: buffer[0..<(end + 4 + length)], as: UTF8.self))
                        buffer.removeFirst(end + 4 + length)
                        break
                    }
                }
                let n = try chunk.withUnsafeMutableBytes { p in try stream.read(into: p, timeout: .seconds(10)) }
                if n == 0 { return answers }
                buffer += chunk[0..<n]
            }
        }
        return answers
    }

    @Test func servesKeepAliveAndRefusesWhatItShouldNot() throws {
        let service = try ViewerService(path: tourTrace, background: false)
        let server = try ViewerHTTPServer(host: "127.0.0.1", port: 0) { service.handle($0) }
        let thread = try NetThread { server.serve() }
        defer {
            server.stop()
            thread.join()
        }
        let port = server.listener.port
        let host = "Host: 127.0.0.1:\(port)\r\n"
        let a = try exchange(port, ["GET /api/info HTTP/1.1\r\n\(host)\r\n", "GET /api/records?from=0&count=2 HTTP/1.1\r\n\(host)\r\n",
                                    "HEAD / HTTP/1.1\r\n\(host)Connection: close\r\n\r\n"])
        try #require(a.count == 3)
        #expect(a[0].hasPrefix("HTTP/1.1 200 OK\r\n") && a[0].contains("Content-Type: application/json") && a[0].contains("\"records\":"))
        #expect(a[1].contains("\"rows\":[{"))
        #expect(a[2].hasPrefix("HTTP/1.1 200 OK\r\n") && a[2].contains("Connection: close") && a[2].hasSuffix("\r\n\r\n"))
        #expect(try exchange(port, ["GET / HTTP/1.1\r\nHost: attacker.example:\(port)\r\n\r\n"]).first?.hasPrefix("HTTP/1.1 403") == true)
        #expect(try exchange(port, ["POST /api/info HTTP/1.1\r\n\(host)Content-Length: 0\r\n\r\n"]).first?.hasPrefix("HTTP/1.1 405") == true)
        #expect(try exchange(port, ["GET /missing HTTP/1.1\r\n\(host)\r\n"]).first?.hasPrefix("HTTP/1.1 404") == true)
        #expect(try exchange(port, ["BROKEN\r\n\r\n"]).first?.hasPrefix("HTTP/1.1 400") == true)
        #expect(try exchange(port, ["GET /api/search?q=dir:sideways HTTP/1.1\r\n\(host)\r\n"]).first?.hasPrefix("HTTP/1.1 400") == true)
    }
}
