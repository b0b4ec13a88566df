import Foundation
import Inspect
import RelayProtocol
import Testing
import Trace

/// `relaytrace export --format har` against what Chrome DevTools' HAR importer requires.
///
/// The rules below were read from devtools-frontend's `front_end/models/har/HARFormat.ts` (the classes
/// that wrap each HAR object and throw on a missing or malformed field) and `Importer.ts` (which turns
/// entries into network requests and WebSocket frames). Each check says in its own words which rule it
/// mirrors. The checker is written here from those rules; no DevTools code is used or run.
@Suite struct HARImportTests {
    // MARK: The importer's rules

    /// The problems DevTools' importer would have with `har`, each as "JSON path: what".
    static func importerProblems(_ har: JSONValue) -> [String] {
        var problems: [String] = []
        func fail(_ path: String, _ what: String) { problems.append("\(path): \(what)") }

        // Every HAR object is wrapped by a class whose base constructor throws unless it gets an object.
        func object(_ v: JSONValue?, _ path: String) -> [String: JSONValue]? {
            guard case .object(let o)? = v else { fail(path, "expected an object, got \(v.map { $0.jsonText } ?? "nothing")"); return nil }
            return o
        }
        // Required numbers go through a Number() cast that throws on NaN (a missing member is NaN). We
        // demand a real finite JSON number, stricter than the cast (which would accept "12").
        func number(_ v: JSONValue?, _ path: String) -> Double? {
            switch v {
            case .int(let i)?: return Double(i)
            case .double(let d)? where d.isFinite: return d
            default: fail(path, "expected a number, got \(v.map { $0.jsonText } ?? "nothing")"); return nil
            }
        }
        // Optional numbers (optionalNumber) are cast only when present, and then must not be NaN.
        func optionalNumber(_ v: JSONValue?, _ path: String) { if v != nil { _ = number(v, path) } }
        // Required strings are String()-cast: a missing member becomes the text "undefined", which does
        // not throw but loses the value, so we demand a real string.
        func string(_ v: JSONValue?, _ path: String) -> String? {
            guard case .string(let s)? = v else { fail(path, "expected a string, got \(v.map { $0.jsonText } ?? "nothing")"); return nil }
            return s
        }
        // Optional strings (optionalString) are only cast when present; we want them to be strings then.
        func optionalString(_ v: JSONValue?, _ path: String) { if v != nil { _ = string(v, path) } }
        // Dates go through `new Date(...)`, which throws "Invalid date format" when it gives NaN. We
        // demand the ISO 8601 form `YYYY-MM-DDTHH:MM:SS(.fff)Z` that Date parses the same everywhere.
        func date(_ v: JSONValue?, _ path: String) -> Int64? {
            guard let s = string(v, path) else { return nil }
            let u = Array(s.utf8)
            let digitsAt = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
            let shaped = (u.count == 20 || u.count == 24) && u.last == UInt8(ascii: "Z") && u[4] == UInt8(ascii: "-") && u[7] == UInt8(ascii: "-")
                && u[10] == UInt8(ascii: "T") && u[13] == UInt8(ascii: ":") && u[16] == UInt8(ascii: ":")
                && digitsAt.allSatisfy { (0x30...0x39).contains(u[$0]) }
                && (u.count == 20 || (u[19] == UInt8(ascii: ".") && (20...22).allSatisfy { (0x30...0x39).contains(u[$0]) }))
            guard shaped, let ns = unixNanoseconds(rfc3339: s) else { fail(path, "not an ISO 8601 UTC date: \(s)"); return nil }
            return ns
        }
        // Headers, query strings and cookies are read when they are arrays; each element is wrapped (so
        // must be an object) and its name and value String()-cast.
        func pairs(_ v: JSONValue?, _ path: String) {
            guard case .array(let a)? = v else { fail(path, "expected an array"); return }
            for (i, h) in a.enumerated() {
                guard let o = object(h, "\(path)[\(i)]") else { continue }
                _ = string(o["name"], "\(path)[\(i)].name")
                _ = string(o["value"], "\(path)[\(i)].value")
            }
        }

        // HARRoot: the document is an object whose `log` is an object.
        guard let root = object(har, "$"), let log = object(root["log"], "$.log") else { return problems }
        // HARLog: `version` String()-cast; `creator` wrapped (an object) with `name` and `version`.
        _ = string(log["version"], "$.log.version")
        if let creator = object(log["creator"], "$.log.creator") {
            _ = string(creator["name"], "$.log.creator.name")
            _ = string(creator["version"], "$.log.creator.version")
        }
        // HARLog: `pages` is read when it is an array; each HARPage needs a valid date and a
        // `pageTimings` object.
        if let pages = log["pages"] {
            guard case .array(let ps) = pages else { fail("$.log.pages", "expected an array"); return problems }
            for (i, p) in ps.enumerated() {
                guard let page = object(p, "$.log.pages[\(i)]") else { continue }
                _ = date(page["startedDateTime"], "$.log.pages[\(i)].startedDateTime")
                _ = object(page["pageTimings"], "$.log.pages[\(i)].pageTimings")
            }
        }
        // HARLog throws "log.entries is expected to be an array" otherwise.
        guard case .array(let entries)? = log["entries"] else { fail("$.log.entries", "expected an array"); return problems }

        for (n, value) in entries.enumerated() {
            let at = "$.log.entries[\(n)]"
            guard let e = object(value, at) else { continue }
            // HAREntry: `startedDateTime` through safeDate; `time` through safeNumber (milliseconds).
            let started = date(e["startedDateTime"], "\(at).startedDateTime")
            let time = number(e["time"], "\(at).time")
            if let time, time < 0 { fail("\(at).time", "negative duration \(time)") }
            // HAREntry: optional strings.
            for k in ["pageref", "serverIPAddress", "connection", "comment", "_connectionId", "_fromCache", "_priority"] {
                optionalString(e[k], "\(at).\(k)")
            }
            // HAREntry._initiator is wrapped whenever typeof says "object", which is also true of null
            // (the wrapper then throws): it must be absent or a real object.
            if let initiator = e["_initiator"] { _ = object(initiator, "\(at)._initiator") }

            // HARRequest: method, url, httpVersion String()-cast; headers, queryString, cookies
            // arrays of objects; postData (when truthy) an object with mimeType and text; headersSize
            // and bodySize through safeNumber.
            if let q = object(e["request"], "\(at).request") {
                _ = string(q["method"], "\(at).request.method")
                _ = string(q["url"], "\(at).request.url")
                _ = string(q["httpVersion"], "\(at).request.httpVersion")
                pairs(q["headers"], "\(at).request.headers")
                pairs(q["queryString"], "\(at).request.queryString")
                pairs(q["cookies"], "\(at).request.cookies")
                if let pd = q["postData"], pd != .null, pd != .bool(false) {
                    if let p = object(pd, "\(at).request.postData") {
                        _ = string(p["mimeType"], "\(at).request.postData.mimeType")
                        _ = string(p["text"], "\(at).request.postData.text")
                    }
                }
                _ = number(q["headersSize"], "\(at).request.headersSize")
                _ = number(q["bodySize"], "\(at).request.bodySize")
            }
            // HARResponse: status through safeNumber; statusText, httpVersion (lower-cased into the
            // protocol), redirectURL String()-cast; headers and cookies arrays; `content` wrapped with
            // `size` through safeNumber and `mimeType` String()-cast; headersSize, bodySize through
            // safeNumber; `_transferSize` an optional number, `_error` an optional string.
            if let r = object(e["response"], "\(at).response") {
                _ = number(r["status"], "\(at).response.status")
                _ = string(r["statusText"], "\(at).response.statusText")
                _ = string(r["httpVersion"], "\(at).response.httpVersion")
                pairs(r["headers"], "\(at).response.headers")
                pairs(r["cookies"], "\(at).response.cookies")
                if let c = object(r["content"], "\(at).response.content") {
                    _ = number(c["size"], "\(at).response.content.size")
                    _ = string(c["mimeType"], "\(at).response.content.mimeType")
                    optionalNumber(c["compression"], "\(at).response.content.compression")
                    optionalString(c["text"], "\(at).response.content.text")
                }
                _ = string(r["redirectURL"], "\(at).response.redirectURL")
                _ = number(r["headersSize"], "\(at).response.headersSize")
                _ = number(r["bodySize"], "\(at).response.bodySize")
                optionalNumber(r["_transferSize"], "\(at).response._transferSize")
                optionalString(r["_error"], "\(at).response._error")
            }
            // HARTimings: send, wait, receive through safeNumber; blocked, dns, connect, ssl optional
            // numbers. The importer adds up the non-negative phases (milliseconds) and ends the
            // request at the larger of that sum and `time`, so a sum past `time` would stretch the
            // socket beyond what was recorded.
            if let t = object(e["timings"], "\(at).timings") {
                var sum = 0.0
                for k in ["send", "wait", "receive"] {
                    if let v = number(t[k], "\(at).timings.\(k)"), v > 0 { sum += v }
                }
                for k in ["blocked", "dns", "connect", "ssl"] {
                    optionalNumber(t[k], "\(at).timings.\(k)")
                    // ssl is counted inside connect.
                    if k != "ssl", let v = t[k]?.doubleValue, v > 0 { sum += v }
                }
                if let time, sum > time + 1e-6 { fail("\(at).timings", "phases add up to \(sum) ms, more than time \(time) ms") }
            }

            // `_resourceType` is looked up by name; "websocket" makes the request a WebSocket (its
            // Messages tab); anything else would be guessed from the MIME type or the URL.
            if e["_resourceType"] != "websocket" { fail("\(at)._resourceType", "expected \"websocket\"") }
            // `_webSocketMessages` is read only when it is an array, and dropped whole if any element
            // is not an object. A message is kept only with a numeric `time`, a `type` of send,
            // receive or error, a numeric `opcode` and a `data` string (each optional cast throws on a
            // present NaN). `time` is what DevTools keeps for a frame: Unix seconds (its own export
            // writes the frame's wall time in seconds), not milliseconds.
            guard case .array(let messages)? = e["_webSocketMessages"] else { fail("\(at)._webSocketMessages", "expected an array"); continue }
            for (i, m) in messages.enumerated() {
                let mp = "\(at)._webSocketMessages[\(i)]"
                guard let o = object(m, mp) else { continue }
                let type = string(o["type"], "\(mp).type")
                if let type, !["send", "receive", "error"].contains(type) { fail("\(mp).type", "\(type) is not send, receive or error") }
                let opcode = number(o["opcode"], "\(mp).opcode")
                let data = string(o["data"], "\(mp).data")
                guard let t = number(o["time"], "\(mp).time") else { continue }
                // Seconds, within the entry's own span (a millisecond value would be 1000 times off).
                if let started, let time {
                    let from = Double(started) / 1e9 - 0.001
                    let to = Double(started) / 1e9 + time / 1000 + 0.001
                    if t < from || t > to { fail("\(mp).time", "\(t) is outside the entry's span \(from)...\(to) (Unix seconds)") }
                }
                // Opcodes: 1 text (data is the text), 2 binary and 8 close (data is base64, as the
                // DevTools protocol carries every non-text payload), -1 for an error entry.
                if let opcode, let type {
                    let allowed: Set<Double> = type == "error" ? [-1] : [1, 2, 8]
                    if !allowed.contains(opcode) { fail("\(mp).opcode", "\(opcode) for a \(type) message") }
                    if (opcode == 2 || opcode == 8), let data, decodeBase64(data) == nil { fail("\(mp).data", "not base64") }
                }
            }
        }
        return problems
    }

    /// Standard padded base64, or nil.
    static func decodeBase64(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 4 == 0 else { return nil }
        func val(_ c: UInt8) -> UInt32? {
            switch c {
            case 0x41...0x5A: UInt32(c - 0x41)
            case 0x61...0x7A: UInt32(c - 0x61 + 26)
            case 0x30...0x39: UInt32(c - 0x30 + 52)
            case UInt8(ascii: "+"): 62
            case UInt8(ascii: "/"): 63
            default: nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i < u.count {
            let pad = i + 4 == u.count ? u[i..<(i + 4)].reversed().prefix { $0 == UInt8(ascii: "=") }.count : 0
            guard pad <= 2 else { return nil }
            var n: UInt32 = 0
            for j in 0..<4 {
                let c = u[i + j]
                if j >= 4 - pad { n <<= 6; continue }
                guard let v = val(c) else { return nil }
                n = n << 6 | v
            }
            out += [UInt8(n >> 16), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)].prefix(3 - pad)
            i += 4
        }
        return out
    }

    // MARK: What the trace says the HAR must hold

    /// A socket as the trace records it: its generation, opening time, frames and close.
    struct Socket {
        var generation: UInt64
        var start: Moment
        var frames: [(time: Moment, outbound: Bool, binary: Bool, payload: [UInt8])] = []
        var close: (time: Moment, code: Int64?)?
    }

    /// The sockets of the trace at `path` (each `transportOpen` starts one) and its wall-clock start.
    static func sockets(_ path: String) throws -> (sockets: [Socket], startNs: Int64) {
        let reader = try TraceReader(path: path)
        let startNs = try #require(unixNanoseconds(rfc3339: reader.header.wallClockStart))
        var sockets: [Socket] = []
        var current: [UInt64: Int] = [:]
        while let e = try reader.next() {
            let r = e.record
            guard r.channel == .relay, let g = r.generation else { continue }
            if r.kind == .transportOpen {
                sockets.append(Socket(generation: g, start: r.time))
                current[g] = sockets.count - 1
                continue
            }
            guard let i = current[g] else { continue }
            switch r.kind {
            case .frameText, .frameBinary:
                sockets[i].frames.append((r.time, r.direction == .outbound, r.kind == .frameBinary, r.payload))
            case .transportClosed:
                sockets[i].close = (r.time, (try? JSONValue(parsing: r.payload))?["code"]?.intValue)
            default: break
            }
        }
        return (sockets, startNs)
    }

    /// Exports `path` as HAR with the CLI and checks it against the importer's rules and the trace.
    static func checkExport(_ path: String, _ label: String) throws {
        let out = tempPath("har")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try relaytrace(["export", path, "--format", "har", "-o", out])
        try #require(r.status == 0, "export \(label): \(r.stderr)")
        let har = try JSONValue(parsing: String(contentsOfFile: out, encoding: .utf8))
        let problems = importerProblems(har)
        #expect(problems.isEmpty, "\(label): \(problems.prefix(10).joined(separator: "\n"))")

        // Nothing of the trace's sockets is lost: one entry per socket, in order, and per entry every
        // frame in order with its direction, opcode, time (Unix seconds) and data.
        let (sockets, startNs) = try Self.sockets(path)
        let entries = try #require(har["log"]?["entries"]?.arrayValue)
        try #require(entries.count == sockets.count, "\(label): \(entries.count) entries for \(sockets.count) sockets")
        for (n, (entry, socket)) in zip(entries, sockets).enumerated() {
            #expect(entry["_relaytraceGeneration"]?.intValue == Int64(socket.generation), "\(label) entry \(n)")
            #expect(entry["startedDateTime"]?.stringValue == rfc3339(unixNanoseconds: startNs + socket.start.nanoseconds))
            let messages = entry["_webSocketMessages"]?.arrayValue ?? []
            let data = messages.filter { $0["opcode"] == 1 || $0["opcode"] == 2 }
            try #require(data.count == socket.frames.count, "\(label) entry \(n): \(data.count) messages for \(socket.frames.count) frames")
            for (m, f) in zip(data, socket.frames) {
                #expect(m["type"]?.stringValue == (f.outbound ? "send" : "receive"))
                #expect(m["opcode"]?.intValue == (f.binary ? 2 : 1))
                let seconds = Double(startNs + f.time.nanoseconds) / 1e9
                #expect(m["time"]?.doubleValue.map { abs($0 - seconds) < 1e-6 } == true, "\(label) entry \(n): time \(m["time"]?.jsonText ?? "-") for \(seconds)")
                if f.binary {
                    #expect(m["data"]?.stringValue.flatMap(decodeBase64) == f.payload)
                } else {
                    #expect(m["data"]?.stringValue == String(decoding: f.payload, as: UTF8.self))
                }
            }
            // A close that travels in a frame (not 1005, 1006, 1015) is one message, opcode 8, at the
            // close's time, whose payload starts with the code. (A frame can still arrive after the
            // client sent its close, so it need not be the last message.)
            let closes = messages.filter { $0["opcode"] == 8 }
            if let sc = socket.close, let code = sc.code, ![1005, 1006, 1015].contains(code) {
                let close = try #require(closes.first, "\(label) entry \(n): no close message for \(code)")
                #expect(closes.count == 1)
                let seconds: Double = Double(startNs + sc.time.nanoseconds) / 1e9
                let closeTime: Double = try #require(close["time"]?.doubleValue)
                #expect(abs(closeTime - seconds) < 1e-6)
                let payload = try #require(close["data"]?.stringValue.flatMap(decodeBase64))
                #expect(payload.count >= 2 && Int64(payload[0]) << 8 | Int64(payload[1]) == code)
                #expect(entry["_relaytraceClose"]?["code"]?.intValue == code)
            } else {
                #expect(closes.isEmpty)
            }
        }
    }

    // MARK: Tests

    static let goldenTraces: [String] = GoldenTraceCommandTests.traces

    @Test(arguments: goldenTraces)
    func goldenTraceExportsAHARTheDevToolsImporterAccepts(name: String) throws {
        try Self.checkExport(GoldenTraceCommandTests.root + "/Traces/" + name, name)
    }

    /// The fixture trace has what the golden traces lack: a binary PTC1 frame and a 1006 close.
    @Test func fixtureTraceWithBinaryFramesExportsAnImportableHAR() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.checkExport(path, "fixture")
    }

    /// The checker itself finds each kind of breakage (so a passing export means something).
    @Test func checkerRejectsWhatTheImporterRejects() throws {
        var exporter = HARExporter(wallClockStartNs: 1_768_471_200_000_000_000)
        func add(_ kind: RecordKind, _ s: Double, _ payload: String, _ dir: FrameDirection?) {
            exporter.add(InspectedRecord(number: 0, record: TraceRecord(kind: kind, time: .seconds(s), generation: 1, direction: dir, payload: Array(payload.utf8))))
        }
        add(.transportOpen, 0, #"{"url":"wss://relay.example/ws","headers":{"A":"1"}}"#, .outbound)
        add(.transportOpened, 0.1, "", .inbound)
        add(.frameText, 0.2, #"{"type":"ping"}"#, .outbound)
        let good = exporter.finish()
        #expect(Self.importerProblems(good).isEmpty)

        func broken(_ change: (inout [String: JSONValue]) -> Void) -> JSONValue {
            guard case .object(var entry)? = good["log"]?["entries"]?[0] else { return .null }
            change(&entry)
            return ["log": ["version": "1.2", "creator": ["name": "x", "version": "1"], "entries": [.object(entry)]]]
        }
        func messages(_ m: JSONValue) -> (inout [String: JSONValue]) -> Void { { $0["_webSocketMessages"] = [m] } }
        let cases: [(String, JSONValue)] = [
            ("no time", broken { $0["time"] = nil }),
            ("bad date", broken { $0["startedDateTime"] = "yesterday" }),
            ("no timings.wait", broken { $0["timings"]?.remove("wait") }),
            ("no response.content", broken { $0["response"]?.remove("content") }),
            ("no request.headersSize", broken { $0["request"]?.remove("headersSize") }),
            ("null initiator", broken { $0["_initiator"] = .null }),
            ("header not an object", broken { $0["request"]?.set("headers", ["A: 1"]) }),
            ("milliseconds", broken(messages(["type": "send", "time": 1_768_471_200_200.0, "opcode": 1, "data": "x"]))),
            ("bad type", broken(messages(["type": "sent", "time": 1_768_471_200.2, "opcode": 1, "data": "x"]))),
            ("binary not base64", broken(messages(["type": "receive", "time": 1_768_471_200.2, "opcode": 2, "data": "PTC1 raw!"]))),
            ("not websocket", broken { $0["_resourceType"] = "fetch" }),
        ]
        for (label, har) in cases {
            #expect(!Self.importerProblems(har).isEmpty, "\(label) passed the checker")
        }
    }

    /// A refused upgrade, a failure after opening, and a generation number used twice.
    @Test func failuresAndReusedGenerationsStayImportable() throws {
        var exporter = HARExporter(wallClockStartNs: 1_768_471_200_000_000_000)
        func add(_ kind: RecordKind, _ s: Double, _ g: UInt64, _ payload: String, _ dir: FrameDirection?) {
            exporter.add(InspectedRecord(number: 0, record: TraceRecord(kind: kind, time: .seconds(s), generation: g, direction: dir, payload: Array(payload.utf8))))
        }
        add(.transportOpen, 0, 1, #"{"url":"wss://relay.example/ws","headers":{"B":"2","A":"1"},"headerOrder":["B","A"]}"#, .outbound)
        add(.transportFailed, 0.5, 1, #"{"error":"upgrade refused (403)","status":403}"#, .inbound)
        add(.transportOpen, 1, 2, #"{"url":"wss://relay.example/ws","headers":{}}"#, .outbound)
        add(.transportOpened, 1.25, 2, "", .inbound)
        add(.frameBinary, 1.5, 2, "PTC1", .inbound)
        add(.transportFailed, 2, 2, #"{"error":"connection reset"}"#, .inbound)
        add(.transportOpen, 3, 1, #"{"url":"wss://relay.example/ws","headers":{}}"#, .outbound)
        add(.transportOpened, 3.1, 1, "", .inbound)
        add(.transportClosed, 4, 1, #"{"code":1000,"reason":"bye"}"#, .outbound)
        let har = exporter.finish()
        #expect(Self.importerProblems(har) == [])
        let entries = try #require(har["log"]?["entries"]?.arrayValue)
        try #require(entries.map { $0["_relaytraceGeneration"]?.intValue } == [1, 2, 1])
        #expect(entries[0]["request"]?["headers"] == [["name": "B", "value": "2"], ["name": "A", "value": "1"]])
        #expect(entries[0]["response"]?["status"] == 403 && entries[0]["response"]?["_error"] == "upgrade refused (403)")
        #expect(entries[0]["_webSocketMessages"] == [])
        #expect(entries[1]["response"]?["status"] == 101)
        #expect(entries[1]["timings"]?["wait"]?.doubleValue == 250 && entries[1]["timings"]?["receive"]?.doubleValue == 750)
        #expect(entries[1]["_webSocketMessages"]?[1] == ["type": "error", "time": .double(1_768_471_202), "opcode": -1, "data": "connection reset"])
        #expect(entries[2]["_webSocketMessages"]?[0] == ["type": "send", "time": .double(1_768_471_204), "opcode": 8,
                                                          "data": .string(base64([0x03, 0xE8] + Array("bye".utf8)))])
        #expect(entries[2]["time"]?.doubleValue == 1000)
    }
}

extension JSONValue {
    /// Removes member `key` of an object.
    mutating func remove(_ key: String) { if case .object(var o) = self { o[key] = nil; self = .object(o) } }
    /// Sets member `key` of an object.
    mutating func set(_ key: String, _ value: JSONValue) { if case .object(var o) = self { o[key] = value; self = .object(o) } }
}
