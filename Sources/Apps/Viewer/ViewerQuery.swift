public import Inspect
public import RelayProtocol
public import Trace

/// The filter box's language: space-separated terms, all of which must hold. `key:value` terms are the
/// `frames` filters (`gen:2,3`, `dir:in`, `type:rpc.request`, `event:device-status`, `method:session.list`,
/// `id:r-1`, `since:1m30s`, `until:2h`, `channel:watch`); any other word (or a `"quoted phrase"`) is
/// searched for in the payload and summary (`--grep`; several words: the phrase with single spaces).
/// The self-contained page's script reads the same language over the records it embeds.
public enum ViewerQuery {
    /// The keys the language knows.
    public static let keys = ["gen", "dir", "type", "event", "method", "id", "since", "until", "channel"]

    /// The filter `text` stands for; a `FilterError` names the bad term and how to write it.
    public static func filter(_ text: String) throws(FilterError) -> FrameFilter {
        var f = FrameFilter()
        var words: [String] = []
        for term in terms(text) {
            guard !term.quoted, let colon = term.text.firstIndex(of: ":"),
                  keys.contains(String(term.text[..<colon])) else {
                words.append(term.text)
                continue
            }
            let key = String(term.text[..<colon])
            let value = String(term.text[term.text.index(after: colon)...])
            guard !value.isEmpty else { throw FilterError("'\(key):' needs a value, e.g. \(example(key))") }
            switch key {
            case "gen": f.generations = try FrameFilter.generations(value)
            case "dir":
                guard value == "in" || value == "out" else { throw FilterError("dir: is in (relay to client) or out, not '\(value)'") }
                f.direction = value == "in" ? .inbound : .outbound
            case "type": f.types = FrameFilter.list(value)
            case "event": f.events = FrameFilter.list(value)
            case "method": f.methods = FrameFilter.list(value)
            case "id": f.rpcIds = FrameFilter.list(value)
            case "since": f.since = try FrameFilter.time(value, option: "since:")
            case "until": f.until = try FrameFilter.time(value, option: "until:")
            default:
                guard value == "relay" || value == "watch" else { throw FilterError("channel: is relay or watch, not '\(value)'") }
                f.channel = value == "relay" ? .relay : .watch
            }
        }
        if !words.isEmpty { f.grep = words.joined(separator: " ") }
        if let s = f.since, let u = f.until, u < s { throw FilterError("until: (\(u)) is before since: (\(s))") }
        return f
    }

    static func example(_ key: String) -> String {
        ["gen": "gen:2", "dir": "dir:in", "type": "type:rpc.request", "event": "event:device-status", "method": "method:session.list",
         "id": "id:r-1", "since": "since:1m30s", "until": "until:2h", "channel": "channel:watch"][key] ?? key + ":x"
    }

    /// Splits on spaces, keeping `"quoted phrases"` whole.
    static func terms(_ text: String) -> [(text: String, quoted: Bool)] {
        var out: [(String, Bool)] = []
        var current = ""
        var inQuote = false
        for c in text {
            if c == "\"" {
                if inQuote { out.append((current, true)); current = "" } else if !current.isEmpty { out.append((current, false)); current = "" }
                inQuote.toggle()
            } else if c == " " && !inQuote {
                if !current.isEmpty { out.append((current, false)); current = "" }
            } else {
                current.append(c)
            }
        }
        if !current.isEmpty { out.append((current, inQuote)) }
        return out
    }
}

/// The JSON the page reads: one list row per record, the detail object, the timeline window.
public enum ViewerJSON {
    /// A list row: `i` (record number), `t` (ns), `k` (kind), `c` (channel), `g` (generation or null),
    /// `d` (`in`/`out`/null), `ty` (type column), `s` (summary, at most 300 characters), `cat` (the colour
    /// class: `rpc`, `event`, `heartbeat`, `transport`, `error`, `binary`, `input`, `action`, `timer`,
    /// `watch`, `other`), and for the self-contained page's filter `ev` (eventType), `m` (method), `id` (RPC id).
    public static func row(_ rec: InspectedRecord) -> JSONValue {
        let r = rec.record
        var summary = rec.summary
        let ty = rec.typeName
        if rec.type != nil, summary.hasPrefix(ty + " ") { summary = String(summary.dropFirst(ty.count + 1)) }
        if summary.count > 300 { summary = String(summary.prefix(300)) + "..." }
        var o: [String: JSONValue] = [
            "i": .int(Int64(bitPattern: rec.number)), "t": .int(r.time.nanoseconds), "k": .string(r.kind.name),
            "c": .string(r.channel.description), "g": r.generation.map { .int(Int64(bitPattern: $0)) } ?? .null,
            "d": r.direction.map { .string($0 == .inbound ? "in" : "out") } ?? .null,
            "ty": .string(ty), "s": .string(summary), "cat": .string(category(rec)),
        ]
        if let e = rec.eventType { o["ev"] = .string(e) }
        if let m = rec.method { o["m"] = .string(m) }
        if let id = rec.rpcId { o["id"] = .string(id) }
        return .object(o)
    }

    /// What the page calls a trace: `wire` (recorded by the relay or the proxy), `watch` (the watch
    /// channel's machines) or `machine` (the relay client's).
    public static func traceKind(_ header: TraceHeader) -> String {
        header.isWireTrace ? "wire" : header.client["channel"]?.stringValue == "watch" ? "watch" : "machine"
    }

    /// The colour class of a record.
    public static func category(_ rec: InspectedRecord) -> String {
        if rec.isFailure { return "error" }
        if rec.record.channel == .watch { return "watch" }
        switch rec.record.kind {
        case .frameText:
            switch rec.type {
            case "rpc.request", "rpc.response": return "rpc"
            case "event": return "event"
            case "heartbeat", "ping", "pong": return "heartbeat"
            case "register", "registered", "resumed": return "transport"
            default: return "other"
            }
        case .frameBinary: return "binary"
        case .ping, .pong: return "heartbeat"
        case .transportOpen, .transportOpened, .transportClosed: return "transport"
        case .input: return "input"
        case .action: return "action"
        case .timerFired: return "timer"
        default: return "other"
        }
    }

    /// A window of the layout: `start`, `end` (ns), `rows` [{name, lanes: [[name, start, end]], marks:
    /// [[kind, t, end|null, record, count]], aggregated, total}].
    public static func window(_ rows: [TimelineLayout.RowWindow], from: Moment, to: Moment) -> JSONValue {
        .object([
            "from": .int(from.nanoseconds), "to": .int(to.nanoseconds),
            "rows": .array(rows.map { row in
                .object([
                    "name": .string(row.name), "aggregated": .bool(row.aggregated), "total": .int(Int64(row.total)),
                    "lanes": .array(row.lanes.map { .array([.string($0.name), .int($0.start.nanoseconds), .int($0.end.nanoseconds)]) }),
                    "marks": .array(row.marks.map(mark)),
                ])
            }),
        ])
    }

    static func mark(_ m: TimelineLayout.WindowMark) -> JSONValue {
        .array([.string(m.kind.rawValue), .int(m.time.nanoseconds), m.end.map { .int($0.nanoseconds) } ?? .null,
                .int(Int64(bitPattern: m.record)), .int(Int64(m.count))])
    }

    /// The layout's checks and row names (they do not change with the window).
    public static func layoutSummary(_ l: TimelineLayout) -> JSONValue {
        .object([
            "start": .int(l.start.nanoseconds), "end": .int(l.end.nanoseconds),
            "rowNames": .array(l.rows.map { .string($0.name) }),
            "checks": .array(l.checks.map { c in
                .object(["rule": .string(c.rule), "t": .int(c.time.nanoseconds), "record": c.record.map { .int(Int64(bitPattern: $0)) } ?? .null,
                         "message": .string(c.message)])
            }),
            "omitted": .object(l.omitted.mapValues { .int(Int64($0)) }),
        ])
    }
}
