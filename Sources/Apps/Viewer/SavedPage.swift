public import Inspect
public import RelayProtocol
public import Trace

/// The viewer's page saved with its data (`relaytrace timeline --html`): one self-contained file for
/// sharing a trace, the same page as `relaytrace view` serves, reading the data it embeds instead of the
/// API. It embeds the list rows of the first `maxRecords` records (with the text the filter searches) and
/// their detail objects, the stats, and the timeline: every mark when there are at most
/// `TimelineLayout`'s full-width worth (`timelineWidth` per row), otherwise aggregated to that width.
public struct SavedPage {
    /// The most records whose rows and details the page embeds (the timeline always covers the whole trace).
    public static let maxRecords = 50_000
    /// The pixel width the saved timeline is aggregated to when a row has more marks.
    public static let timelineWidth = 20_000

    /// The timeline (for the command's summary line and its checks).
    public private(set) var timeline: Timeline
    /// The page's data.
    public private(set) var data: JSONValue = .null
    /// Records read.
    public private(set) var records = 0
    /// How the reading ended, when it did not reach the end.
    public private(set) var problem: TraceError?

    /// Reads every record of `reader` (the header is in it already) and builds the page's data.
    public init(reader: TraceReader, title: String, maxRecords: Int = SavedPage.maxRecords) {
        var tl = Timeline(labels: false)
        var stats = TraceStats()
        var correlator = RpcCorrelator()
        var rows: [JSONValue] = []
        var details: [JSONValue] = []
        var seen = 0
        let problem = InspectedRecords.read(reader) { r in
            var rec = r
            correlator.correlate(&rec)
            tl.add(rec)
            stats.add(rec)
            if seen < maxRecords, case .object(var o) = ViewerJSON.row(rec) {
                let hay = rec.terminal.map { String(decoding: $0.data, as: UTF8.self) } ?? rec.record.payloadText
                o["x"] = .string(hay + "\n" + rec.summary)
                rows.append(.object(o))
                details.append(rec.detail)
            }
            seen += 1
            return true
        }
        records = seen
        self.problem = problem
        tl.finish()
        timeline = tl
        let layout = TimelineLayout(tl)
        let window = layout.window(from: layout.start, to: layout.end, width: Self.timelineWidth)
        guard case .object(var t) = ViewerJSON.window(window, from: layout.start, to: layout.end),
              case .object(let summary) = ViewerJSON.layoutSummary(layout) else { return }
        t.merge(summary) { a, _ in a }
        var notes: [String] = []
        if records > maxRecords {
            notes.append("this saved page lists the first \(maxRecords) of \(records) records (the timeline covers them all); relaytrace view FILE shows every record")
        }
        if let problem { notes.append("the trace could not be read past record \(records): \(problem.description)") }
        let header = reader.header
        let kind = ViewerJSON.traceKind(header)
        var info: [String: JSONValue] = [
            "title": .string(title), "records": .int(Int64(rows.count)), "start": .int(layout.start.nanoseconds),
            "end": .int(layout.end.nanoseconds), "kind": .string(kind), "replay": false, "static": true,
        ]
        if !notes.isEmpty { info["truncated"] = .string(notes.joined(separator: "; ")) }
        data = .object([
            "info": .object(info), "rows": .array(rows), "details": .array(details), "timeline": .object(t),
            "stats": .object(["state": "ready", "stats": stats.json, "text": .string(stats.text)]),
        ])
    }

    /// The page.
    public func html(title: String) -> String { ViewerPage.html(title: title, embedded: data) }
}
