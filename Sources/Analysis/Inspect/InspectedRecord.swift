public import RelayProtocol
import Synchronization
public import Trace
import Sync

/// A trace record with what the inspection commands derive from it: the parsed JSON payload, the relay
/// message type and its salient fields, the decoded PTC1 frame, and (after `RpcCorrelator`) the
/// request a response answers.
public struct InspectedRecord: Sendable {
    /// The record's number in the trace (0-based, header excluded).
    public var number: UInt64
    /// The record.
    public var record: TraceRecord
    /// The payload parsed as JSON, for JSON kinds and text frames that parse (built on first use when the
    /// record was made with `deferringJSON`).
    public var json: JSONValue? { derived.json }
    /// Why a text frame's payload is not JSON.
    public var jsonError: String?
    /// The relay message `type` of a text frame.
    public var type: String?
    /// The `eventType` of an `event` message.
    public var eventType: String?
    /// The RPC method of a request (or, once correlated, of the request a response answers).
    public var method: String?
    /// The RPC id of a request or response.
    public var rpcId: String?
    /// The relay's `eventId` of an inbound event.
    public var eventId: Int64?
    /// The decoded PTC1 frame of a binary frame (decoded on first use when the record was made with
    /// `deferringJSON`).
    public var terminal: TerminalFrame? { derived.terminal }
    /// For a correlated `rpc.response`: the time since its request.
    public var latency: Duration?
    private let derived: Derived

    /// The members a deferred text frame's fields are read from.
    private static let shallowKeys = ["type", "eventType", "id", "method", "eventId"]

    /// Derives the fields of `entry`.
    public init(_ entry: TraceEntry) { self.init(number: entry.number, record: entry.record) }

    /// Derives the fields of record `number`. With `deferringJSON`, a text frame is validated in full but
    /// read only as deep as its fields need (``ShallowJSON``), and the payload's JSON tree is built when
    /// ``json`` is first used: every field, error and value is the same, only later.
    public init(number: UInt64, record r: TraceRecord, deferringJSON: Bool = false) {
        self.number = number
        self.record = r
        var storage = Derived.none
        switch r.kind {
        case .frameText:
            if deferringJSON {
                let parsed = r.payload.withUnsafeBytes { b in
                    Result { () throws(JSONParseError) in try ShallowJSON(parsing: b, expanding: "payload", keeping: Self.shallowKeys) }
                }
                switch parsed {
                case .success(let shallow):
                    storage = .deferredJSON(DeferredPayload(r.payload))
                    // As the lookups below on the built tree: the last of repeated keys, `payload`'s member
                    // first when it has one (of any value), else the top-level one.
                    type = shallow.member("type")?.scalar?.stringValue
                    let inner = shallow.member("payload")
                    func field(_ key: String) -> String? {
                        if let m = inner?.member(key) { return m.scalar?.stringValue }
                        return shallow.member(key)?.scalar?.stringValue
                    }
                    eventType = field("eventType")
                    if type == "rpc.request" || type == "rpc.response" { rpcId = field("id") }
                    if type == "rpc.request" { method = field("method") }
                    eventId = shallow.member("eventId")?.scalar?.intValue
                case .failure(let error):
                    jsonError = error.description
                }
            } else {
                do {
                    let j = try JSONValue(parsing: r.payload)
                    storage = .built(j)
                    type = j["type"]?.stringValue
                    let inner = j["payload"]
                    eventType = (inner?["eventType"] ?? j["eventType"])?.stringValue
                    if type == "rpc.request" || type == "rpc.response" {
                        rpcId = (inner?["id"] ?? j["id"])?.stringValue
                    }
                    if type == "rpc.request" { method = (inner?["method"] ?? j["method"])?.stringValue }
                    eventId = j["eventId"]?.intValue
                } catch {
                    jsonError = error.description
                }
            }
        case .frameBinary:
            storage = deferringJSON ? .deferredTerminal(DeferredPayload(r.payload)) : .terminal(try? TerminalFrame(decoding: r.payload))
        case .marker, .ping, .pong, .unknown:
            break
        case .transportOpened:
            // Empty in machine traces; wire traces record the upgrade response (status, headers).
            if !r.payload.isEmpty {
                storage = deferringJSON ? .deferredJSON(DeferredPayload(r.payload)) : .built(try? JSONValue(parsing: r.payload))
            }
        case .header, .transportOpen, .transportClosed, .transportFailed, .timerFired, .input, .action, .dropped, .writerStopped:
            storage = deferringJSON ? .deferredJSON(DeferredPayload(r.payload)) : .built(try? JSONValue(parsing: r.payload))
        }
        derived = storage
    }

    /// The `payload` of an `event` message (the event's own payload).
    public var eventPayload: JSONValue? { json?["payload"]?["payload"] }

    /// The name of an `input` or `action` record's JSON (`{"input": name}` / `{"action": name}`).
    public var inputOrActionName: String? { (json?["action"] ?? json?["input"])?.stringValue }

    /// The RPC request id a client record names: an `rpcTimeout` timer armed, cancelled or fired, or a
    /// `call` input given its request id. Nil for other records (an RPC frame's own id is ``rpcId``).
    public var namedRequestId: String? {
        switch record.kind {
        case .timerFired: return json?["timer"]?.stringValue == "rpcTimeout" ? json?["requestId"]?.stringValue : nil
        case .action:
            guard let t = json?["timer"], t["timer"]?.stringValue == "rpcTimeout" else { return nil }
            return t["requestId"]?.stringValue
        case .input: return inputOrActionName == "call" ? json?["requestId"]?.stringValue : nil
        default: return nil
        }
    }

    /// One line naming the record's content: method and id for RPCs, status for device events, lease
    /// session for interest, session and size for PTC1, the compact JSON for other records.
    public var summary: String {
        let r = record
        switch r.kind {
        case .frameText:
            // The JSON this record parsed already (`json`, the same parser on the same bytes) decoded as the
            // dissector would decode it: one parse for the listing's json and summary, not two. Without it
            // (not JSON, or not valid UTF-8) the dissector reads the text and names the error.
            var s: String
            if let j = json {
                do throws(MessageDecodeError) {
                    s = DissectedFrame.message(try RelayMessage(decoding: j)).summary
                } catch {
                    s = DissectedFrame.malformedText(error).summary
                }
            } else {
                s = WireFrame.text(r.payloadText).dissect().summary
            }
            if type == "rpc.response" {
                if let method { s += " method=\(method)" }
                if let latency { s += " latency=\(Self.milliseconds(latency))" }
            }
            if let eventType, let p = eventPayload {
                switch eventType {
                case "device-status":
                    if let st = p["status"]?.stringValue { s += " status=\(st)" }
                    if let why = p["reason"]?.stringValue { s += " reason=\(why)" }
                case "chat:timeline-interest":
                    if let sid = p["sessionId"]?.stringValue { s += " lease=\(sid)" }
                    if let app = p["appSessionId"]?.stringValue { s += " app=\(app)" }
                    if let a = p["active"]?.boolValue { s += a ? " active" : " inactive" }
                default: break
                }
            }
            return s
        case .frameBinary:
            return WireFrame.binary(r.payload).dissect().summary
        case .ping, .pong:
            return r.payload.isEmpty ? "\(r.kind.name) (no data)" : "\(r.kind.name) \(r.payload.count) bytes: \(Self.controlData(r.payload))"
        case .transportOpen:
            guard let j = json, let url = j["url"]?.stringValue else { break }
            var s = url
            if let d = j["deviceId"]?.stringValue { s += " device=\(d)" }
            if let d = j["desktopId"]?.stringValue { s += " desktop=\(d)" }
            if let c = j["clientType"]?.stringValue { s += " \(c)" }
            if let p = j["peer"]?.stringValue { s += " from \(p)" }
            return s
        case .transportOpened:
            if let status = json?["status"]?.intValue { return "upgraded \(status)" }
            return "open"
        case .transportClosed:
            guard let j = json else { break }
            let who = r.direction == .outbound ? "by the client" : "by the relay"
            let code = j["code"]?.intValue.map { String($0) } ?? "no code"
            let reason = j["reason"]?.stringValue ?? ""
            return "closed \(who): \(code)" + (reason.isEmpty ? "" : " \"\(reason)\"") + (j["clean"]?.boolValue == false ? " (no close handshake)" : "")
        case .transportFailed:
            guard let j = json, let e = j["error"]?.stringValue else { break }
            if let status = j["status"]?.intValue { return "refused \(status): \(e)" }
            return "failed: \(e)"
        default:
            if let d = diagnosticText { return d }
        }
        let text = json.map { Self.readableTimes($0).jsonText } ?? r.payloadText
        return text.count > 160 ? String(text.prefix(160)) + "..." : text
    }

    /// For a diagnostic record (`{"action":"diagnostic",...}`, or `{"watch":"diagnostic",...}` on the
    /// watch channel): `diagnostic CODE: SENTENCE`, the sentence rendered from its code and fields; for one
    /// recorded before diagnostics were typed, `diagnostic: SENTENCE` from its `text`.
    public var diagnosticText: String? {
        guard let j = json, j["action"]?.stringValue == "diagnostic" || j["watch"]?.stringValue == "diagnostic" else { return nil }
        if let d = DiagnosticRecord(json: j, ignoring: ["action", "watch", "side"]) { return "diagnostic \(d.code): \(d.text)" }
        return j["text"]?.stringValue.map { "diagnostic: \($0)" }
    }

    /// `j` with every `deadline` member (nanoseconds on the trace's clock) written as a time,
    /// `"at 118.000s"`, for summaries a person reads (the record's JSON keeps the number).
    static func readableTimes(_ j: JSONValue) -> JSONValue {
        switch j {
        case .object(let o):
            var n: [String: JSONValue] = [:]
            for (k, v) in o {
                if k == "deadline", let ns = v.intValue { n[k] = .string("at \(Moment(nanoseconds: ns))") } else { n[k] = readableTimes(v) }
            }
            return .object(n)
        case .array(let a): return .array(a.map(readableTimes))
        default: return j
        }
    }

    /// A ping or pong's application data: as text when it is printable UTF-8, otherwise hex.
    static func controlData(_ data: [UInt8]) -> String {
        if data.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return "\"" + String(decoding: data, as: UTF8.self) + "\"" }
        return hexString(data)
    }

    /// `12.3ms`-style latency.
    public static func milliseconds(_ d: Duration) -> String {
        let ms = Double(d.nanoseconds) / 1e6
        return ms < 10 ? "\((ms * 100).rounded() / 100)ms" : "\((ms * 10).rounded() / 10)ms"
    }

    /// The JSON object of `frames --format jsonl` (and `export --format jsonl`): index, t (seconds),
    /// kind, channel, gen, dir, and for text frames type, eventType, method, id, eventId, json (or text and
    /// jsonError), latencyMs on correlated responses; for binary frames bytes (and session, dataBytes,
    /// preview for PTC1); summary for every record.
    public var jsonLine: JSONValue {
        let r = record
        var o: [String: JSONValue] = [
            "index": .int(Int64(bitPattern: number)),
            "t": .double(r.time.seconds),
            "kind": .string(r.kind.name),
            "channel": .string(r.channel.description),
            "gen": r.generation.map { .int(Int64(bitPattern: $0)) } ?? .null,
            "dir": r.direction.map { .string($0.description) } ?? .null,
            "summary": .string(summary),
        ]
        switch r.kind {
        case .frameText:
            o["type"] = type.map { .string($0) } ?? .null
            o["eventType"] = eventType.map { .string($0) } ?? .null
            o["method"] = method.map { .string($0) } ?? .null
            o["id"] = rpcId.map { .string($0) } ?? .null
            if let eventId { o["eventId"] = .int(eventId) }
            if let latency { o["latencyMs"] = .double(Double(latency.nanoseconds) / 1e6) }
            if let json { o["json"] = json } else {
                o["text"] = .string(r.payloadText)
                o["jsonError"] = .string(jsonError ?? "not JSON")
            }
        case .frameBinary:
            o["bytes"] = .int(Int64(r.payload.count))
            if let t = terminal {
                o["session"] = .string(t.sessionId)
                o["dataBytes"] = .int(Int64(t.data.count))
                o["preview"] = .string(t.printablePreview(maxBytes: 64))
            }
        case .marker:
            o["text"] = .string(r.payloadText)
        case .ping, .pong:
            o["bytes"] = .int(Int64(r.payload.count))
            o["dataHex"] = .string(hexString(r.payload))
        case .unknown:
            if !r.payload.isEmpty { o["bytes"] = .int(Int64(r.payload.count)) }
        case .transportOpened:
            if let json { o["json"] = json } else if !r.payload.isEmpty { o["bytes"] = .int(Int64(r.payload.count)) }
        case .header, .transportOpen, .transportClosed, .transportFailed, .timerFired, .input, .action, .dropped, .writerStopped:
            if let json { o["json"] = json } else if !r.payload.isEmpty { o["text"] = .string(r.payloadText) }
        }
        return .object(o)
    }
}

/// Pairs `rpc.response` frames with their `rpc.request` by id (requests outbound, responses inbound):
/// a response gets the request's method and its latency. A request stays open until a response that
/// is not `isFinal: false`. At most `capacity` requests are kept open (the oldest are forgotten).
public struct RpcCorrelator: Sendable {
    private var open: [String: (method: String?, time: Moment, order: UInt64)] = [:]
    private var counter: UInt64 = 0
    /// The most requests kept waiting for a response.
    public let capacity: Int

    /// A correlator keeping at most `capacity` open requests.
    public init(capacity: Int = 65_536) { self.capacity = max(1, capacity) }

    /// Requests still waiting for a response.
    public var openRequests: Int { open.count }

    /// The requests still open: id, method, time sent.
    public var pending: [(id: String, method: String?, time: Moment)] {
        open.sorted { $0.value.order < $1.value.order }.map { ($0.key, $0.value.method, $0.value.time) }
    }

    /// Feeds one record; fills `method` and `latency` on a response whose request was seen.
    public mutating func correlate(_ rec: inout InspectedRecord) {
        guard rec.record.kind == .frameText, let id = rec.rpcId else { return }
        if rec.type == "rpc.request" {
            if open.count >= capacity, let oldest = open.min(by: { $0.value.order < $1.value.order }) {
                open[oldest.key] = nil
            }
            counter += 1
            open[id] = (rec.method, rec.record.time, counter)
        } else if rec.type == "rpc.response", let req = open[id] {
            rec.method = req.method
            rec.latency = rec.record.time - req.time
            let partial = rec.json?["isFinal"]?.boolValue == false || rec.json?["payload"]?["isFinal"]?.boolValue == false
            if !partial { open[id] = nil }
        }
    }
}

/// What an ``InspectedRecord`` derives from its payload: nothing, the JSON or the PTC1 frame built, or
/// either built on first use.
private enum Derived: Sendable {
    case none
    case built(JSONValue?)
    case terminal(TerminalFrame?)
    case deferredJSON(DeferredPayload)
    case deferredTerminal(DeferredPayload)

    var json: JSONValue? {
        switch self {
        case .none, .terminal, .deferredTerminal: nil
        case .built(let j): j
        case .deferredJSON(let d): d.json
        }
    }

    var terminal: TerminalFrame? {
        switch self {
        case .none, .built, .deferredJSON: nil
        case .terminal(let t): t
        case .deferredTerminal(let d): d.terminal
        }
    }
}

/// What a ``DeferredPayload`` has made so far (`.some(nil)`: tried, and it is not one).
private struct DeferredCache: Sendable {
    var json: JSONValue??
    var terminal: TerminalFrame??
}

/// A payload's JSON (for JSON kinds and text frames) or PTC1 frame (for binary frames), made once, when
/// first asked for (nil when it is not one). It is its own lock (one allocation per deferred record).
private final class DeferredPayload: Locked<DeferredCache>, @unchecked Sendable {
    private let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        super.init(DeferredCache())
    }

    var json: JSONValue? {
        withLock { c in
            if let known = c.json { return known }
            let v = try? JSONValue(parsing: bytes)
            c.json = .some(v)
            return v
        }
    }

    var terminal: TerminalFrame? {
        withLock { c in
            if let known = c.terminal { return known }
            let v = try? TerminalFrame(decoding: bytes)
            c.terminal = .some(v)
            return v
        }
    }
}
