import Inspect
import Net
public import RelayProtocol
import Synchronization
public import Trace
import Sync

/// What `relaytrace view` serves for one trace: the page, and the JSON API it reads in pages (never a
/// whole trace at once):
///
/// - `GET /api/info`: file, record count, time span, header (without the redaction key), trace kind
///   (`machine`, `wire`, `watch`), whether a strict replay can be asked for.
/// - `GET /api/records?from=N&count=K` (K at most 1000): list rows; `GET /api/records?t=NS`: the number
///   of the first record at or after a time.
/// - `GET /api/search?q=FILTER&from=N&limit=L`: the next matches of a filter (``ViewerQuery``) from
///   record N on, scanning at most `scanBudget` records or `scanTime` per call (`next` says where to go
///   on; `done`).
/// - `GET /api/record?n=N`: one record in full (`show`'s object).
/// - `GET /api/timeline?from=NS&to=NS&width=PX`: the timeline's rows in that window, aggregated to the
///   width (``TimelineLayout/window(from:to:width:)``); `state` is `building` (with `progress`) until the
///   one pass that lays the timeline out is done.
/// - `GET /api/stats`: `stats --format json` and its text.
/// - `GET /api/replay`: the strict replay's result (started by the first call; `state` `running` until
///   it is `done`), with the divergence, if any.
///
/// Memory: two decoded chunks for the list, plus the timeline layout (32 bytes a mark). The layout is
/// built by one pass on its own thread, so the list answers at once even for a large trace.
public final class ViewerService: Sendable {
    /// The most records one search call reads.
    public static let scanBudget = 200_000
    /// The longest one search call scans (so a rare match never holds the list's pages up for long).
    public static let scanTime: Duration = .milliseconds(250)
    /// The most rows one records call returns.
    public static let maxPage = 1000

    /// The file.
    public let path: String
    /// The page's title.
    public let title: String
    private let trace: Locked<ViewerTrace>
    private let info: JSONValue
    private let layout = Locked<LayoutState>(.building(0))
    private let replayState = Locked<ReplayState>(.notStarted)
    private let replay: (@Sendable () -> JSONValue)?
    private let damageFound = Locked<TraceError?>(nil)

    /// The first damage found while serving (by the timeline's pass or a page's read), or nil: the page
    /// shows it where it was met; `relaytrace view` exits 65 with it when it stops.
    public var damage: TraceError? { damageFound.withLock { $0 } }

    private func noteDamage(_ e: TraceError) {
        damageFound.withLock { if $0 == nil { $0 = e } }
    }

    enum LayoutState: Sendable {
        case building(Double)
        case ready(TimelineLayout, stats: JSONValue, statsText: String, summary: JSONValue)
        case failed(String)
    }

    enum ReplayState: Sendable {
        case notStarted, running
        case done(JSONValue)
    }

    /// Opens `path` (throws when it is not a readable trace) and starts laying out its timeline on a
    /// thread. `replay`, when given, runs the strict replay and returns `replay --format json`'s object
    /// (or `{"result": "unavailable", "reason": ...}`); `autoReplay` starts it at once. `background: false`
    /// lays the timeline out before returning (for tests).
    public init(path: String, title: String? = nil, replay: (@Sendable () -> JSONValue)? = nil, autoReplay: Bool = false,
                background: Bool = true) throws(TraceError) {
        self.path = path
        self.title = title ?? path
        let t = try ViewerTrace(path: path)
        let header = t.header
        var headerJSON = header.json
        if case .object(var o) = headerJSON, case .object(var r)? = o["redaction"] {
            r["key"] = nil
            o["redaction"] = .object(r)
            headerJSON = .object(o)
        }
        let kind = ViewerJSON.traceKind(header)
        info = .object([
            "title": .string(self.title), "file": .string(path), "records": .int(Int64(t.count)),
            "start": .int(t.startTime.nanoseconds), "end": .int(t.endTime.nanoseconds), "kind": .string(kind),
            "complete": .bool(t.reader.isComplete), "header": headerJSON, "replay": .bool(replay != nil),
            "autoReplay": .bool(replay != nil && autoReplay), "static": false,
        ])
        trace = Locked(t)
        self.replay = replay
        if !background {
            let (state, problem) = Self.buildLayout(path: path) { _ in }
            layout.withLock { $0 = state }
            if let problem { noteDamage(problem) }
        } else {
            do {
                try NetThread.detached(name: "viewer-layout") { [self] in
                    let (state, problem) = Self.buildLayout(path: path) { progress in layout.withLock { $0 = .building(progress) } }
                    layout.withLock { $0 = state }
                    if let problem { noteDamage(problem) }
                }
            } catch {
                layout.withLock { $0 = .failed(error.description) }
            }
        }
        if replay != nil && autoReplay { startReplay() }
    }

    /// One pass over the trace: the timeline (no labels) and the stats, then the layout; and the damage
    /// that stopped the pass early, if one did.
    static func buildLayout(path: String, progress: (Double) -> Void) -> (LayoutState, TraceError?) {
        let reader: TraceReader
        do { reader = try TraceReader(path: path) } catch { return (.failed(error.description), error) }
        let total = max(1, (try? reader.chunks())?.last.map { Int($0.firstRecord) + Int($0.recordCount) } ?? 1)
        var timeline = Timeline(labels: false)
        var stats = TraceStats()
        var n = 0
        // The route `timeline` and `stats` read by: chunks decoded ahead on worker threads, JSON built on use.
        let problem = InspectedRecords.read(reader) { rec in
            timeline.add(rec)
            stats.add(rec)
            n += 1
            if n & 8191 == 0 { progress(Double(n) / Double(total)) }
            return true
        }
        timeline.finish()
        let l = TimelineLayout(timeline)
        var summary = ViewerJSON.layoutSummary(l)
        if let problem, case .object(var o) = summary {
            o["problem"] = .string("the timeline stops at record \(n): \(problem.description)")
            summary = .object(o)
        }
        return (.ready(l, stats: stats.json, statsText: stats.text, summary: summary), problem)
    }

    /// The page this service serves (``ViewerPage``).
    public var page: String { ViewerPage.html(title: title, embedded: nil) }

    /// Answers one request.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let q = request.query
        switch request.path {
        case "/", "/index.html":
            return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
        case "/favicon.ico":
            return HTTPResponse(status: 204, contentType: "image/x-icon", body: [])
        case "/api/info":
            return json(info)
        case "/api/records":
            if let t = q["t"] {
                guard let ns = Int64(t) else { return bad("t must be a time in nanoseconds") }
                return read { tr throws(TraceError) in .object(["index": .int(Int64(try tr.firstRecord(atOrAfter: Moment(nanoseconds: ns))))]) }
            }
            guard let from = Int(q["from"] ?? "0"), from >= 0, let count = Int(q["count"] ?? "200"), count >= 0 else {
                return bad("from and count must be numbers from 0")
            }
            return read { tr throws(TraceError) in
                let rows = try tr.records(from: from, count: min(count, Self.maxPage))
                return .object(["from": .int(Int64(from)), "total": .int(Int64(tr.count)), "rows": .array(rows.map(ViewerJSON.row))])
            }
        case "/api/record":
            guard let n = Int(q["n"] ?? "") else { return bad("n must be a record number") }
            return read { tr throws(TraceError) in
                guard n >= 0, n < tr.count else { throw TraceError(.invalidArgument, "record \(n) is outside the trace (\(tr.count) records)") }
                return try tr.record(n).detail
            }
        case "/api/search":
            return search(q)
        case "/api/timeline":
            return timeline(q)
        case "/api/stats":
            switch layout.withLock({ $0 }) {
            case .ready(_, let stats, let text, _): return json(.object(["state": "ready", "stats": stats, "text": .string(text)]))
            case .building(let p): return json(.object(["state": "building", "progress": .double(p)]))
            case .failed(let why): return json(.object(["state": "failed", "error": .string(why)]))
            }
        case "/api/replay":
            guard replay != nil else { return json(.object(["state": "done", "result": ["result": "unavailable", "reason": "this viewer was started without replay"]])) }
            startReplay()
            switch replayState.withLock({ $0 }) {
            case .notStarted, .running: return json(.object(["state": "running"]))
            case .done(let r): return json(.object(["state": "done", "result": r]))
            }
        default:
            return .text(404, "no such page: \(request.path)")
        }
    }

    private func startReplay() {
        guard let replay else { return }
        let start = replayState.withLock { s -> Bool in
            guard case .notStarted = s else { return false }
            s = .running
            return true
        }
        guard start else { return }
        do {
            try NetThread.detached(name: "viewer-replay") { [self] in
                let r = replay()
                replayState.withLock { $0 = .done(r) }
            }
        } catch {
            replayState.withLock { $0 = .done(["result": "unavailable", "reason": .string(error.description)]) }
        }
    }

    private func search(_ q: [String: String]) -> HTTPResponse {
        let filter: FrameFilter
        do { filter = try ViewerQuery.filter(q["q"] ?? "") } catch { return bad(error.message) }
        guard let from = Int(q["from"] ?? "0"), from >= 0, let limit = Int(q["limit"] ?? "200"), limit > 0 else {
            return bad("from and limit must be numbers (limit from 1)")
        }
        let cap = min(limit, Self.maxPage)
        return read { tr throws(TraceError) in
            var start = from
            if let since = filter.since { start = max(start, try tr.firstRecord(atOrAfter: since)) }
            var matches: [JSONValue] = []
            var next = start
            var scanned = 0
            var done = true
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: Self.scanTime)
            try tr.scan(from: start) { rec in
                if let until = filter.until, rec.record.time > until { return false }
                if matches.count >= cap || scanned >= Self.scanBudget || (scanned & 255 == 255 && clock.now > deadline) {
                    done = false
                    return false
                }
                scanned += 1
                next = Int(rec.number) + 1
                if filter.matches(rec) { matches.append(ViewerJSON.row(rec)) }
                return true
            }
            return .object(["from": .int(Int64(start)), "next": .int(Int64(next)), "scanned": .int(Int64(scanned)), "done": .bool(done),
                            "rows": .array(matches)])
        }
    }

    private func timeline(_ q: [String: String]) -> HTTPResponse {
        switch layout.withLock({ $0 }) {
        case .building(let p): return json(.object(["state": "building", "progress": .double(p)]))
        case .failed(let why): return json(.object(["state": "failed", "error": .string(why)]))
        case .ready(let l, _, _, let summary):
            let from = q["from"].flatMap(Int64.init) ?? l.start.nanoseconds
            let to = q["to"].flatMap(Int64.init) ?? l.end.nanoseconds
            let width = Int(q["width"] ?? "1000") ?? 1000
            guard to >= from, width > 0 else { return bad("from must be at most to, width a positive number of pixels") }
            let window = l.window(from: Moment(nanoseconds: from), to: Moment(nanoseconds: to), width: width)
            guard case .object(var o) = ViewerJSON.window(window, from: Moment(nanoseconds: from), to: Moment(nanoseconds: to)),
                  case .object(let s) = summary else { return bad("internal") }
            o.merge(s) { a, _ in a }
            o["state"] = "ready"
            return json(.object(o))
        }
    }

    private func read(_ body: (ViewerTrace) throws(TraceError) -> JSONValue) -> HTTPResponse {
        let result = trace.withLock { t -> Result<[UInt8], TraceError> in
            do throws(TraceError) { return .success(try body(t).serialized()) } catch { return .failure(error) }
        }
        switch result {
        case .success(let bytes): return HTTPResponse(status: 200, contentType: "application/json", body: bytes)
        case .failure(let e):
            if e.code != .invalidArgument { noteDamage(e) }
            let status = e.code == .invalidArgument ? 400 : 500
            return HTTPResponse(status: status, contentType: "application/json", body: JSONValue.object(["error": .string(e.description)]).serialized())
        }
    }

    private func json(_ v: JSONValue) -> HTTPResponse { HTTPResponse(status: 200, contentType: "application/json", body: v.serialized()) }

    private func bad(_ message: String) -> HTTPResponse {
        HTTPResponse(status: 400, contentType: "application/json", body: JSONValue.object(["error": .string(message)]).serialized())
    }
}
