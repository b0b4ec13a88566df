import Foundation
import Inspect
import RelayProtocol
import Testing
import Trace

/// Every field of an inspected record, for comparing two ways of making it.
func fields(_ r: InspectedRecord) -> String {
    let json = r.json.map { String(decoding: $0.serialized(), as: UTF8.self) } ?? "-"
    let terminal = r.terminal.map { "\($0.sessionId):\($0.data.count)" } ?? "-"
    return "#\(r.number) \(r.record.kind) t=\(r.record.time) json=\(json) err=\(r.jsonError ?? "-") type=\(r.type ?? "-") "
        + "event=\(r.eventType ?? "-") method=\(r.method ?? "-") id=\(r.rpcId ?? "-") eventId=\(r.eventId.map(String.init) ?? "-") "
        + "terminal=\(terminal) latency=\(r.latency.map { "\($0)" } ?? "-")"
}

/// Text payloads that exercise every way the shallow read could differ from the full parse.
let trickyTexts: [String] = {
    var out = [
        #"{"type":"heartbeat","payload":{"activeSessionId":"s1"}}"#,
        #"{"payload":{},"type":"heartbeat"}"#,
        #"{"type":"pong"}"#,
        #"{"type":"rpc.request","payload":{"id":"R1","method":"session.list","params":{}}}"#,
        #"{"type":"rpc.response","payload":{"id":"R1","result":{"sessions":[]},"isFinal":true}}"#,
        #"{"type":"rpc.response","id":"R9","result":{},"isFinal":false}"#,
        #"{"type":"rpc.request","payload":{"id":7,"method":["x"]}}"#,
        #"{"type":"rpc.request","payload":"oops","id":"T","method":"top"}"#,
        #"{"type":"rpc.request","payload":{"id":null},"id":"T"}"#,
        #"{"type":"event","payload":{"eventType":"device-status","payload":{"status":"online"}},"eventId":42}"#,
        #"{"type":"event","payload":{"eventType":"x"},"eventId":42.0}"#,
        #"{"type":"event","payload":{"eventType":"x"},"eventId":1e300}"#,
        #"{"type":"event","eventType":"top-level","eventId":"7"}"#,
        #"{"type":"event","payload":{"eventType":{"deep":1}},"eventType":"top"}"#,
        #"{"type":"event","payload":{"eventType":"first"},"payload":{"eventType":"second"}}"#,
        #"{"type":"event","payload":{"eventType":"obj"},"payload":"str","eventType":"fallback"}"#,
        #"{"type":"a","type":"rpc.request","payload":{"id":"dup","method":"m"}}"#,
        #"{"ty\u0070e":"heartbeat"}"#,
        #"{"type":"hé\u00e9","payload":{"id":"é"}}"#,
        #"{"type":"error","code":"invalidResume","message":"no"}"#,
        // Escapes and Unicode that spell a value without its plain bytes: the byte test must leave them be.
        #"{"type":"heartbeat","payload":{"eventType":"device-status","id":"R1","method":"session.list"}}"#,
        #"{"type":"rpc.request","payload":{"id":"R1","method":"session.list"},"note":"K and ;"}"#,
        "{\"type\":\"event\",\"payload\":{\"eventType\":\"device-status\"},\"note\":\"\u{212A}elvin \u{037E} cafe\u{301}\"}",
        "{\"type\":\"heartbeat\",\"payload\":{\"activeSessionId\":\"caf\u{E9} hello \u{212A}\"}}",
        "[1,2,3]", "\"just a string\"", "42", "null", "", " ", "{}", "not json at all",
        "\u{FEFF}{\"type\":\"pong\"}",
        #"{"type":"pong"} trailing"#,
        #"{"type":"pong",}"#,
        #"{"type":"event","payload":{"eventType":"x","payload":{"a":[1,2,{"b":"\ud800"}]}}}"#,
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        "{\"type\":\"event\",\"payload\":" + String(repeating: "{\"a\":", count: 520) + "1" + String(repeating: "}", count: 520) + "}",
    ]
    // Every prefix of two messages: syntax errors at every offset.
    for m in [#"{"type":"rpc.request","payload":{"id":"R\u00312","method":"job.get","params":{"a":[true,false,null,-1.5e3]}}}"#,
              #"{"payload":{"eventType":"chat:timeline-updated","payload":{"blocks":["x"]}},"type":"event"}"#] {
        let u = Array(m.utf8)
        for n in 0..<u.count { out.append(String(decoding: u[0..<n], as: UTF8.self)) }
    }
    return out
}()

@Suite struct DeferredRecordTests {
    @Test func aDeferredRecordHasEveryFieldAndValueOfAnEagerOne() {
        var n: UInt64 = 0
        var records: [TraceRecord] = trickyTexts.map { .frame(.text($0), time: .seconds(1), generation: 1, direction: .inbound) }
        records.append(TraceRecord(kind: .frameText, time: .zero, payload: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]))  // invalid UTF-8
        for k in [RecordKind.input, .action, .timerFired, .transportClosed, .marker, .transportOpened, .unknown(77), .frameBinary] {
            records.append(TraceRecord(kind: k, time: .zero, payload: Array(#"{"input":"call","x":[1]}"#.utf8)))
            records.append(TraceRecord(kind: k, time: .zero, payload: Array("PTC1".utf8) + [0, 2] + Array("t1data".utf8)))
            records.append(TraceRecord(kind: k, time: .zero, payload: [0xFF, 0xFE]))
        }
        for r in records {
            let eager = InspectedRecord(number: n, record: r)
            let deferred = InspectedRecord(number: n, record: r, deferringJSON: true)
            #expect(fields(deferred) == fields(eager), "\(r.payloadText.prefix(80))")
            #expect(deferred.summary == eager.summary)
            #expect(deferred.jsonLine == eager.jsonLine)
            n += 1
        }
    }
}

/// A relay-like trace with the tricky frames mixed into ordinary traffic, over several generations and
/// both channels, written with summaries; returns its bytes.
func writeMixedTrace(seed: UInt64, count: Int, chunk: Int) throws -> [UInt8] {
    let path = FileManager.default.temporaryDirectory.path + "/relaytrace-fast-\(getpid())-\(UUID().uuidString).rtrace"
    defer { try? FileManager.default.removeItem(atPath: path) }
    var o = TraceWriterOptions()
    o.chunkTargetSize = chunk
    o.flushInterval = .seconds(3600)
    o.wallClockFlush = false
    o.redaction = .raw
    let w = try TraceWriter(path: path, header: TraceHeader(seed: 1, wallClockStart: "2026-01-15T10:00:00Z", simulated: true), options: o)
    var rng = SeededRandom(seed: seed)
    var t: Int64 = 0
    let methods = ["session.list", "system.ping", "job.get"]
    // Every tricky frame once, in both directions, then ordinary traffic with more of them mixed in.
    for (k, text) in trickyTexts.enumerated() {
        t += Int64(rng.next(upperBound: UInt64(50_000_000)))
        w.append(.frame(.text(text), time: Moment(nanoseconds: t), generation: UInt64(1 + k % 3), direction: k % 2 == 0 ? .inbound : .outbound))
    }
    for i in 0..<count {
        t += Int64(rng.next(upperBound: UInt64(400_000_000)))
        let g = UInt64(1 + rng.next(upperBound: UInt64(3)))
        let time = Moment(nanoseconds: t)
        let roll = rng.next(upperBound: UInt64(20))
        let id = "R\(rng.next(upperBound: UInt64(30)))"
        let text: String
        switch roll {
        case 0...3: text = #"{"payload":{"activeSessionId":"s"},"type":"heartbeat"}"#
        case 4...5: text = #"{"type":"pong"}"#
        case 6...7: text = #"{"payload":{"id":"\#(id)","method":"\#(methods[i % 3])","params":{}},"type":"rpc.request"}"#
        case 8...9: text = #"{"payload":{"id":"\#(id)","isFinal":\#(i % 4 != 0),"result":{"hello":"world é"}},"type":"rpc.response"}"#
        case 10...11: text = #"{"eventId":\#(i),"payload":{"eventType":"\#(i % 2 == 0 ? "device-status" : "chat:timeline-interest")","payload":{"status":"online"}},"type":"event"}"#
        case 12:
            w.append(.frame(.binary(Array("PTC1".utf8) + [0, 2] + Array("t1hello world \(i)".utf8)), time: time, generation: g, direction: .inbound))
            continue
        case 13:
            w.append(TraceRecord(kind: [.timerFired, .input, .action, .marker, .unknown(14), .unknown(15)][i % 6], time: time,
                                 channel: i % 5 == 0 ? .watch : .relay, payload: Array(#"{"timer":"heartbeat","note":"session.list"}"#.utf8)))
            continue
        case 14:
            w.append(TraceRecord(kind: i % 2 == 0 ? .transportClosed : .transportOpen, time: time, generation: g, direction: .inbound,
                                 payload: Array(#"{"code":1006,"reason":"watchdog"}"#.utf8)))
            continue
        default: text = trickyTexts[Int(rng.next(upperBound: UInt64(trickyTexts.count)))]
        }
        w.append(.frame(.text(text), time: time, generation: g, direction: rng.next(upperBound: UInt64(2)) == 0 ? .inbound : .outbound,
                        channel: i % 17 == 0 ? .watch : .relay))
    }
    try w.close()
    return [UInt8](try #require(FileManager.default.contents(atPath: path)))
}

/// The filters the routes are compared under.
func comparedFilters() -> [(String, FrameFilter)] {
    var out: [(String, FrameFilter)] = [("none", FrameFilter())]
    func add(_ name: String, _ make: (inout FrameFilter) -> Void) {
        var f = FrameFilter()
        make(&f)
        out.append((name, f))
    }
    add("--type heartbeat") { $0.types = ["heartbeat"] }
    add("--type rpc.response") { $0.types = ["rpc.response"] }
    add("--type rpc.request,event") { $0.types = ["rpc.request", "event"] }
    add("--type frameBinary,transportClosed") { $0.types = ["frameBinary", "transportClosed"] }
    add("--type frameText") { $0.types = ["frameText"] }
    add("--type unknown(14)") { $0.types = ["unknown(14)"] }
    add("--type hé") { $0.types = ["héé"] }
    add("--event device-status") { $0.events = ["device-status"] }
    add("--event top-level,obj") { $0.events = ["top-level", "fallback", "first", "second"] }
    add("--method session.list") { $0.methods = ["session.list"] }
    add("--method m") { $0.methods = ["m", "top"] }
    add("--rpc-id R1,dup,T") { $0.rpcIds = ["R1", "dup", "T", "é"] }
    add("--grep hello") { $0.grep = "hello" }
    add("--grep session.list") { $0.grep = "session.list" }
    add("--grep é") { $0.grep = "é" }
    add("--grep K") { $0.grep = "K" }
    add("--grep ;") { $0.grep = ";" }
    add("--grep café") { $0.grep = "caf\u{E9}" }
    add("--type heartbeat,--method session.list") { $0.types = ["heartbeat", "rpc.request"]; $0.methods = ["session.list"] }
    add("--grep \"type\"") { $0.grep = #""type""# }
    add("--gen 2") { $0.generations = [2] }
    add("--dir in") { $0.direction = .inbound }
    add("--channel watch") { $0.channel = .watch }
    add("--since 20") { $0.since = .seconds(20) }
    add("--until 15") { $0.until = .seconds(15) }
    add("--since 10 --until 30 --type rpc.response") { $0.since = .seconds(10); $0.until = .seconds(30); $0.types = ["rpc.response"] }
    add("--since 5 --method session.list") { $0.since = .seconds(5); $0.methods = ["session.list"] }
    add("--gen 1 --type heartbeat --dir out") { $0.generations = [1]; $0.types = ["heartbeat"]; $0.direction = .outbound }
    return out
}

/// The lines a route prints: record number and the `frames --format jsonl` object.
struct Listing: Equatable {
    var lines: [String] = []
    var error: TraceError?
    var problems: [TraceError] = []
}

func plainListing(_ bytes: [UInt8], _ f: FrameFilter, salvage: Bool = false) -> Listing? {
    guard let r = try? TraceReader(bytes: bytes, options: .init(salvage: salvage)) else { return nil }
    var l = Listing()
    l.error = FrameListing.plain(r, f, render: { String(decoding: $0.jsonLine.serialized(), as: UTF8.self) }) { n, s in
        l.lines.append("\(n) \(s)")
        return true
    }
    l.problems = r.problems
    return l
}

func fastListing(_ bytes: [UInt8], _ f: FrameFilter, salvage: Bool = false, workers: Int = 2) -> Listing? {
    guard let r = try? TraceReader(bytes: bytes, options: .init(salvage: salvage)) else { return nil }
    var lines: [String] = []
    let (error, problems) = FrameListing.fast(r, f, workers: workers, render: { String(decoding: $0.jsonLine.serialized(), as: UTF8.self) }) { n, s in
        lines.append("\(n) \(s)")
        return true
    }
    return Listing(lines: lines, error: error, problems: problems)
}

@Suite struct FrameListingTests {
    static let traces: [(String, [UInt8])] = {
        var out = goldenTraceBytes()
        for (seed, chunk) in [(1, 1024), (2, 16 << 10), (3, 1 << 20)] as [(UInt64, Int)] {
            if let b = try? writeMixedTrace(seed: seed, count: 700, chunk: chunk) { out.append(("mixed \(seed), \(chunk)-byte chunks", b)) }
        }
        return out
    }()

    @Test func theFastRouteListsWhatThePlainRouteLists() throws {
        #expect(Self.traces.count >= 18)
        var nonEmpty = 0
        for (name, bytes) in Self.traces {
            for (what, f) in comparedFilters() {
                let plain = try #require(plainListing(bytes, f))
                #expect(plain.error == nil, "\(name) \(what)")
                let fast = fastListing(bytes, f, workers: 1 + nonEmpty % 3)
                #expect(fast == plain, "\(name) \(what): plain \(plain.lines.count) lines, fast \(fast?.lines.count ?? -1); first difference \(firstDifference(plain, fast))")
                if !plain.lines.isEmpty { nonEmpty += 1 }
            }
        }
        #expect(nonEmpty > 150, "the filters select something")
    }

    @Test func onDamagedTracesTheFastRouteListsAndFailsAsThePlainRoute() throws {
        var compared = 0
        let filters = comparedFilters()
        for (i, (name, bytes)) in Self.traces.enumerated() where name.hasPrefix("mixed") || i % 4 == 0 {
            for (k, (what, damaged)) in damagedVariants(bytes, seed: UInt64(200 + i), count: 12).enumerated() {
                let (fname, f) = filters[(k * 7 + i) % filters.count]
                for salvage in [false, true] {
                    guard let plain = plainListing(damaged, f, salvage: salvage) else { continue }
                    let fast = fastListing(damaged, f, salvage: salvage)
                    // A window's output depends only on the chunks it meets; everything else must agree.
                    if f.since != nil || f.until != nil { continue }
                    #expect(fast == plain, "\(name), \(what), \(fname), salvage \(salvage): \(firstDifference(plain, fast)); errors \(String(describing: plain.error)) / \(String(describing: fast?.error))")
                    compared += 1
                }
            }
        }
        #expect(compared > 100)
    }

    @Test func statsOfTheFastRouteAreThoseOfThePlainRoute() throws {
        for (name, bytes) in Self.traces {
            for (since, until) in [(nil, nil), (Moment.seconds(10), nil), (.seconds(3), .seconds(40))] as [(Moment?, Moment?)] {
                var plain = TraceStats()
                let pe = InspectedRecords.plain(try TraceReader(bytes: bytes), since: since, until: until) { plain.add($0); return true }
                let (fast, fe) = TraceStats.read(try TraceReader(bytes: bytes), since: since, until: until, workers: 2)
                #expect(fe == pe)
                #expect(fast.json == plain.json, "\(name) \(String(describing: since))...\(String(describing: until))")
                #expect(fast.text == plain.text)
            }
        }
        // Damaged: the figures of what could be read, and the same error.
        for (i, (name, bytes)) in Self.traces.enumerated() where name.hasPrefix("mixed") {
            for (what, damaged) in damagedVariants(bytes, seed: UInt64(300 + i), count: 8) {
                guard let r1 = try? TraceReader(bytes: damaged), let r2 = try? TraceReader(bytes: damaged) else { continue }
                var plain = TraceStats()
                let pe = InspectedRecords.plain(r1) { plain.add($0); return true }
                let (fast, fe) = TraceStats.read(r2, workers: 2)
                #expect(fe == pe, "\(name) \(what)")
                #expect(fast.json == plain.json, "\(name) \(what)")
            }
        }
    }

    @Test func recordsForTheOtherCommandsAreThePlainRoutesRecords() throws {
        for (name, bytes) in Self.traces {
            for (since, until) in [(nil, nil), (Moment.seconds(10), nil), (nil, Moment.seconds(12)), (.seconds(3), .seconds(40))] as [(Moment?, Moment?)] {
                var plain: [String] = []
                let pe = InspectedRecords.plain(try TraceReader(bytes: bytes), since: since, until: until) { plain.append(fields($0)); return true }
                var fast: [String] = []
                let fe = InspectedRecords.read(try TraceReader(bytes: bytes), since: since, until: until, workers: 2) { fast.append(fields($0)); return true }
                #expect(fe == pe)
                #expect(fast == plain, "\(name) \(String(describing: since))...\(String(describing: until))")
            }
        }
    }
}

func firstDifference(_ a: Listing, _ b: Listing?) -> String {
    guard let b else { return "no listing" }
    for (x, y) in zip(a.lines, b.lines) where x != y { return "plain \(x.prefix(300)) / fast \(y.prefix(300))" }
    if a.lines.count != b.lines.count { return "lengths \(a.lines.count) / \(b.lines.count)" }
    return a.error != b.error ? "errors" : (a.problems != b.problems ? "problems" : "none")
}

/// The golden traces of Traces/.
func goldenTraceBytes() -> [(String, [UInt8])] {
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
        dir.deleteLastPathComponent()
    }
    let traces = dir.appendingPathComponent("Traces")
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: traces.path)) ?? []).filter { $0.hasSuffix(".rtrace") }.sorted()
    return names.compactMap { n in FileManager.default.contents(atPath: traces.appendingPathComponent(n).path).map { (n, [UInt8]($0)) } }
}

/// Seeded damage: bit flips, cuts, garbage, removed chunks.
func damagedVariants(_ bytes: [UInt8], seed: UInt64, count: Int) -> [(String, [UInt8])] {
    var rng = SeededRandom(seed: seed)
    var out: [(String, [UInt8])] = []
    let index = (try? TraceReader(bytes: bytes))?.index ?? []
    for k in 0..<count {
        var d = bytes
        let at = Int(rng.next(upperBound: UInt64(bytes.count)))
        switch k % 4 {
        case 0, 1:
            d[at] ^= 1 << UInt8(rng.next(upperBound: UInt64(8)))
            out.append(("flip at \(at)", d))
        case 2:
            out.append(("cut at \(at)", Array(d[..<at])))
        default:
            guard index.count > 2 else { continue }
            let victim = index[Int(rng.next(upperBound: UInt64(index.count - 1)))]
            d.removeSubrange(Int(victim.offset)..<Int(victim.endOffset))
            out.append(("chunk \(victim.sequence) cut out", d))
        }
    }
    return out
}
