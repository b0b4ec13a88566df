public import RelayProtocol

/// A timeline laid out for drawing at any zoom, the one layout `relaytrace view` and `timeline --html`
/// draw: generation lanes packed into rows (generations that never overlap share a row, so a 24 h trace
/// is a few rows, not one per socket), the other lanes (`leases`, `recovery`, `timers`, `watch`) a row
/// each, and the marks of each row in compact time-ordered arrays (32 bytes a mark, no labels) that a
/// window query reads by binary search and aggregates to a pixel width.
public struct TimelineLayout: Sendable {
    /// A generation's extent on its row: from its first mark to the end of its last.
    public struct LaneExtent: Sendable, Hashable {
        /// The lane's name (`g3`).
        public var name: String
        /// Its first mark.
        public var start: Moment
        /// The end of its last mark (a span's end, else the mark's time).
        public var end: Moment
    }

    /// A mark as stored: kind index, times in nanoseconds (`end` -1 for a point), record number.
    struct Compact: Sendable {
        var kind: UInt8
        var time: Int64
        var end: Int64
        var record: UInt64
    }

    /// One row: its name, the generations drawn on it, and its marks (points and spans apart, each in
    /// time order).
    public struct Row: Sendable {
        /// `sockets`, `sockets 2`, ..., `leases`, `recovery`, `timers`, `watch`.
        public var name: String
        /// The generations on this row, in time order (empty for the other rows).
        public var lanes: [LaneExtent]
        var points: [Compact]
        var spans: [Compact]
        /// How many marks the row holds.
        public var markCount: Int { points.count + spans.count }
    }

    /// A mark of a window: one mark, or (when `count` > 1) the marks of one kind that share a pixel
    /// column, shown as the first of them (its record is the one a click selects).
    public struct WindowMark: Sendable, Hashable {
        /// What it is (the winner of its column when aggregated).
        public var kind: TimelineMark.Kind
        /// Its time (the winner's).
        public var time: Moment
        /// A span's end.
        public var end: Moment?
        /// The record it comes from.
        public var record: UInt64
        /// How many marks it stands for.
        public var count: Int
    }

    /// A row cut to a time window.
    public struct RowWindow: Sendable {
        /// The row's name.
        public var name: String
        /// The generations overlapping the window.
        public var lanes: [LaneExtent]
        /// The marks in the window (raw, or aggregated per pixel column when there were more than pixels).
        public var marks: [WindowMark]
        /// Whether `marks` were aggregated.
        public var aggregated: Bool
        /// How many marks of the row fall in the window.
        public var total: Int
    }

    /// The rows, generation rows first.
    public let rows: [Row]
    /// The first record time.
    public let start: Moment
    /// The last record time (at least `start`).
    public let end: Moment
    /// The timeline's checks.
    public let checks: [TimelineCheck]
    /// Marks the timeline did not keep (over `Timeline.maxMarksPerLane`), per lane name.
    public let omitted: [String: Int]

    static let kinds = TimelineMark.Kind.allCases

    /// Lays out a finished timeline (its labels are not kept).
    public init(_ timeline: Timeline) {
        start = timeline.start ?? .zero
        end = max(start, timeline.end ?? .zero)
        checks = timeline.checks
        var omitted: [String: Int] = [:]
        let kindIndex = Dictionary(uniqueKeysWithValues: Self.kinds.enumerated().map { ($1, UInt8($0)) })
        func compact(_ marks: [TimelineMark]) -> (points: [Compact], spans: [Compact]) {
            var p: [Compact] = [], s: [Compact] = []
            for m in marks {
                let c = Compact(kind: kindIndex[m.kind] ?? 0, time: m.time.nanoseconds, end: m.end?.nanoseconds ?? -1, record: m.record)
                if m.end != nil && m.kind != .frame { s.append(c) } else { p.append(c) }
            }
            return (p.sorted { $0.time < $1.time }, s.sorted { $0.time < $1.time })
        }
        // Generations: first fit by start time into the first row free before it starts.
        var genRows: [(lanes: [LaneExtent], lastEnd: Moment, points: [Compact], spans: [Compact])] = []
        var others: [Row] = []
        let generationLanes = timeline.lanes.filter { Self.isGeneration($0.name) && !$0.marks.isEmpty }
        let extents = generationLanes.map { lane -> (TimelineLane, LaneExtent) in
            let first = lane.marks.map(\.time).min() ?? .zero
            let last = lane.marks.map { max($0.time, $0.end ?? $0.time) }.max() ?? first
            return (lane, LaneExtent(name: lane.name, start: first, end: last))
        }.sorted { ($0.1.start, $0.1.name.count, $0.1.name) < ($1.1.start, $1.1.name.count, $1.1.name) }
        for (lane, extent) in extents {
            if lane.omitted > 0 { omitted[lane.name] = lane.omitted }
            let c = compact(lane.marks)
            if let i = genRows.firstIndex(where: { $0.lastEnd < extent.start }) {
                genRows[i].lanes.append(extent)
                genRows[i].lastEnd = extent.end
                genRows[i].points += c.points
                genRows[i].spans += c.spans
            } else {
                genRows.append(([extent], extent.end, c.points, c.spans))
            }
        }
        for lane in timeline.lanes where !Self.isGeneration(lane.name) {
            if lane.omitted > 0 { omitted[lane.name] = lane.omitted }
            let c = compact(lane.marks)
            others.append(Row(name: lane.name, lanes: [], points: c.points, spans: c.spans))
        }
        let order = ["leases", "recovery", "timers", "watch"]
        others.sort { (order.firstIndex(of: $0.name) ?? order.count, $0.name) < (order.firstIndex(of: $1.name) ?? order.count, $1.name) }
        let gens = genRows.enumerated().map { i, r in
            Row(name: genRows.count == 1 ? "sockets" : "sockets \(i + 1)", lanes: r.lanes,
                points: r.points.sorted { $0.time < $1.time }, spans: r.spans.sorted { $0.time < $1.time })
        }
        rows = gens + others
        self.omitted = omitted
    }

    /// Whether a lane name is a generation's (`g` and digits).
    static func isGeneration(_ name: String) -> Bool {
        name.count > 1 && name.first == "g" && name.dropFirst().allSatisfy(\.isNumber)
    }

    /// Every mark of every row, as drawn at full resolution (for a self-contained page of a small trace).
    public func allMarks(of row: Row) -> [WindowMark] {
        (row.spans + row.points).sorted { $0.time < $1.time }.map { mark($0, count: 1) }
    }

    private func mark(_ c: Compact, count: Int) -> WindowMark {
        WindowMark(kind: Self.kinds[Int(c.kind)], time: Moment(nanoseconds: c.time), end: c.end < 0 ? nil : Moment(nanoseconds: c.end),
                   record: c.record, count: count)
    }

    /// The rows cut to `from...to` for a drawing `width` pixels wide: spans at least two pixels long are
    /// kept as they are; points and shorter spans are kept as they are while there are no more of them
    /// than pixels, otherwise each pixel column holds one aggregated mark per kind present in it (the first,
    /// with the count). So an answer holds at most one mark per pixel and kind per row, whatever the trace.
    public func window(from: Moment, to: Moment, width: Int) -> [RowWindow] {
        let width = max(1, min(width, 20_000))
        let a = from.nanoseconds, b = max(to.nanoseconds, a + 1)
        let pixel = max(1, (b - a) / Int64(width))
        return rows.map { row in
            var small: [Compact] = []
            var long: [Compact] = []
            // Points: binary search for the first at or after `from`.
            var lo = 0, hi = row.points.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if row.points[mid].time < a { lo = mid + 1 } else { hi = mid }
            }
            var i = lo
            while i < row.points.count, row.points[i].time <= b {
                small.append(row.points[i])
                i += 1
            }
            for s in row.spans where s.time <= b && s.end >= a {
                if s.end - s.time >= 2 * pixel { long.append(s) } else { small.append(s) }
            }
            let total = small.count + long.count
            var aggregated = false
            if long.count > 4 * width {
                small += long
                long = []
            }
            var marks = long.map { mark($0, count: 1) }
            if small.count <= width {
                marks += small.map { mark($0, count: 1) }
            } else {
                aggregated = true
                // One mark per pixel column and kind: the first of its kind there, with the count.
                var firsts: [Int: (Compact, Int)] = [:]
                let kindCount = Self.kinds.count
                for c in small {
                    let key = Int((max(c.time, a) - a) / pixel) * kindCount + Int(c.kind)
                    if let (w, n) = firsts[key] { firsts[key] = (w, n + 1) } else { firsts[key] = (c, 1) }
                }
                marks += firsts.values.map { mark($0.0, count: $0.1) }
            }
            // In time order; at the same time the more important kind last (drawn on top).
            marks.sort { ($0.time, $0.kind.priority, $0.record) < ($1.time, $1.kind.priority, $1.record) }
            let lanes = row.lanes.filter { $0.start.nanoseconds <= b && $0.end.nanoseconds >= a }
            return RowWindow(name: row.name, lanes: lanes, marks: marks, aggregated: aggregated, total: total)
        }
    }
}
