public import RelayProtocol
public import Trace

/// One difference between two traces.
public struct TraceDifference: Sendable, Hashable, CustomStringConvertible {
    /// The stream: `g1` (the first generation of each trace), `g2`..., or `-` for records without one.
    public var stream: String
    /// The position in the stream (0-based).
    public var position: Int
    /// Record numbers in A and B (nil when the record is missing on that side).
    public var recordA: UInt64?
    /// Record number in B.
    public var recordB: UInt64?
    /// The JSON path (`$.payload.method`) or `record` for a whole record.
    public var path: String
    /// A's value (compact JSON or description), nil when missing.
    public var a: String?
    /// B's value.
    public var b: String?

    /// `g1 #4 (A record 7, B record 7) $.payload.method: "x" != "y"`.
    public var description: String {
        let where_ = "\(stream) #\(position) (A record \(recordA.map(String.init) ?? "-"), B record \(recordB.map(String.init) ?? "-"))"
        switch (a, b) {
        case (nil, let b?): return "\(where_) only in B: \(b)"
        case (let a?, nil): return "\(where_) only in A: \(a)"
        default: return "\(where_) \(path): \(a ?? "") != \(b ?? "")"
        }
    }
}

/// Semantic comparison of two traces. Records are grouped in streams: the k-th transport generation of
/// A is aligned with the k-th of B (generation numbers themselves may differ), records without a
/// generation form one more stream; within a stream records are compared in order. JSON payloads are
/// compared as values (key order ignored); redaction placeholders equal each other; members named in
/// `volatileKeys` are ignored at every depth, `topLevelVolatileKeys` at a payload's top level; times are
/// compared only with a ``timeTolerance``.
public struct TraceDiff: Sendable {
    /// Members whose values change from run to run and never count as differences (declared once here;
    /// `diff --ignore` adds more).
    public static let volatileKeys: Set<String> = [
        "timestamp", "expiresAt", "traceparent", "id", "idempotencyKey", "requestId", "eventId",
        "deadline", "wallClock", "time", "ownership", "callId", "claimId", "relaySessionId",
    ]

    /// Members ignored only at the top level of a payload: the relay's `sessionId` of `registered` and
    /// `resumed` (new every run, like `relaySessionId`), where a nested `sessionId` (the app's chat session
    /// of a lease) is compared.
    public static let topLevelVolatileKeys: Set<String> = ["sessionId"]

    /// The keys ignored.
    public var ignored: Set<String>
    /// When set, two aligned records whose times (since their trace's start) differ by more than this
    /// are a difference (`diff --times`): a changed backoff or timeout shows.
    public var timeTolerance: Duration?

    /// A diff ignoring `volatileKeys` plus `extra`, comparing times within `timeTolerance` when given.
    public init(ignoring extra: Set<String> = [], timeTolerance: Duration? = nil) {
        ignored = Self.volatileKeys.union(extra)
        self.timeTolerance = timeTolerance
    }

    /// A record reduced to what is compared.
    public struct Item: Sendable, Hashable {
        /// Record number.
        public var record: UInt64
        /// `kind channel dir`.
        public var head: String
        /// The JSON payload, normalised, or nil.
        public var json: JSONValue?
        /// The payload for non-JSON records.
        public var bytes: [UInt8]
        /// The record's time since its trace's start.
        public var time: Moment = .zero
    }

    /// The streams of a trace, keyed `g1`, `g2`... by order of first appearance, and `-`.
    public func streams(_ reader: TraceReader) throws(TraceError) -> [String: [Item]] {
        var order: [UInt64: Int] = [:]
        var out: [String: [Item]] = [:]
        while let e = try reader.next() {
            let r = e.record
            let key: String
            if let g = r.generation {
                if order[g] == nil { order[g] = order.count + 1 }
                key = "g\(order[g] ?? 0)"
            } else {
                key = "-"
            }
            let head = "\(r.kind.name) \(r.channel) \(r.direction?.description ?? "-")"
            var json: JSONValue? = nil
            if r.kind.hasJSONPayload, var j = try? JSONValue(parsing: r.payload) {
                if case .object(var o) = j {
                    for k in Self.topLevelVolatileKeys { o[k] = nil }
                    j = .object(o)
                }
                json = normalise(j)
            }
            out[key, default: []].append(Item(record: e.number, head: head, json: json, bytes: json == nil ? r.payload : [], time: r.time))
        }
        return out
    }

    /// `j` with ignored members removed and every placeholder replaced by `rt:redacted`.
    public func normalise(_ j: JSONValue) -> JSONValue {
        switch j {
        case .object(let o):
            var n: [String: JSONValue] = [:]
            for (k, v) in o where !ignored.contains(k) { n[k] = normalise(v) }
            return .object(n)
        case .array(let a): return .array(a.map(normalise))
        case .string(let s):
            return s.contains(Redactor.placeholderPrefix) ? .string(Self.maskPlaceholders(s)) : j
        case .double(let d) where d.rounded() == d && abs(d) < 9e15: return .int(Int64(d))
        default: return j
        }
    }

    static func maskPlaceholders(_ s: String) -> String {
        var out = ""
        var rest = Substring(s)
        while let r = rest.range(of: Redactor.placeholderPrefix) {
            out += rest[..<r.lowerBound] + "rt:redacted:*"
            var i = r.upperBound
            var n = 0
            while i < rest.endIndex, n < 16, rest[i].isHexDigit { i = rest.index(after: i); n += 1 }
            rest = rest[i...]
        }
        return out + rest
    }

    /// Every difference between the streams of A and B, in stream then position order.
    public func compare(_ a: [String: [Item]], _ b: [String: [Item]]) -> [TraceDifference] {
        var out: [TraceDifference] = []
        let keys = Set(a.keys).union(b.keys).sorted { Self.streamOrder($0) < Self.streamOrder($1) }
        for key in keys {
            let xs = a[key] ?? []
            let ys = b[key] ?? []
            for i in 0..<max(xs.count, ys.count) {
                let x = i < xs.count ? xs[i] : nil
                let y = i < ys.count ? ys[i] : nil
                func show(_ it: Item) -> String { it.head + " " + (it.json?.jsonText ?? String(decoding: it.bytes.prefix(200), as: UTF8.self)) }
                guard let x, let y else {
                    out.append(TraceDifference(stream: key, position: i, recordA: x?.record, recordB: y?.record, path: "record",
                                               a: x.map(show), b: y.map(show)))
                    continue
                }
                if x.head != y.head {
                    out.append(TraceDifference(stream: key, position: i, recordA: x.record, recordB: y.record, path: "record", a: show(x), b: show(y)))
                    continue
                }
                if let tolerance = timeTolerance, x.time - y.time > tolerance || y.time - x.time > tolerance {
                    let by = Moment(nanoseconds: (x.time > y.time ? x.time - y.time : y.time - x.time).nanoseconds)
                    out.append(TraceDifference(stream: key, position: i, recordA: x.record, recordB: y.record, path: "time (\(x.head), apart by \(by))",
                                               a: x.time.description, b: y.time.description))
                }
                if let jx = x.json, let jy = y.json {
                    var diffs: [(String, String, String)] = []
                    Self.diffJSON(jx, jy, "$", &diffs)
                    for d in diffs {
                        out.append(TraceDifference(stream: key, position: i, recordA: x.record, recordB: y.record, path: d.0, a: d.1, b: d.2))
                    }
                } else if x.json != y.json || x.bytes != y.bytes {
                    out.append(TraceDifference(stream: key, position: i, recordA: x.record, recordB: y.record, path: "payload", a: show(x), b: show(y)))
                }
            }
        }
        return out
    }

    static func streamOrder(_ k: String) -> (Int, String) {
        k == "-" ? (Int.max, k) : (Int(k.dropFirst()) ?? Int.max - 1, k)
    }

    static func diffJSON(_ a: JSONValue, _ b: JSONValue, _ path: String, _ out: inout [(String, String, String)]) {
        if a.canonicallyEquals(b) { return }
        switch (a, b) {
        case (.object(let x), .object(let y)):
            for k in Set(x.keys).union(y.keys).sorted() {
                let p = path + "." + k
                switch (x[k], y[k]) {
                case (let u?, let v?): diffJSON(u, v, p, &out)
                case (let u?, nil): out.append((p, u.jsonText, "(absent)"))
                case (nil, let v?): out.append((p, "(absent)", v.jsonText))
                default: break
                }
            }
        case (.array(let x), .array(let y)) where x.count == y.count:
            for i in 0..<x.count { diffJSON(x[i], y[i], "\(path)[\(i)]", &out) }
        default:
            out.append((path, a.jsonText, b.jsonText))
        }
    }
}
