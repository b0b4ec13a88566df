public import RelayProtocol

/// The payload of a `dropped` record: how many records the writer could not write (queue overflow,
/// payload over the limit) and the span of their times. The trailer's dropped count of a complete file
/// is the sum of its notices' counts (TRACE_FORMAT.md §3.6), which `relaytrace verify` checks.
public struct DroppedNotice: Sendable, Hashable {
    /// Records dropped because the queue was full.
    public var overflow: UInt64
    /// Records dropped because their payload was over `TraceFormat.maxRecordPayload` (also after redaction).
    public var oversized: UInt64
    /// The earliest and latest time of the dropped records.
    public var firstTime: Moment
    /// The latest time of the dropped records.
    public var lastTime: Moment

    /// All the records dropped: `overflow + oversized`.
    public var count: UInt64 { overflow + oversized }

    /// A notice.
    public init(overflow: UInt64, oversized: UInt64, firstTime: Moment, lastTime: Moment) {
        self.overflow = overflow
        self.oversized = oversized
        self.firstTime = firstTime
        self.lastTime = lastTime
    }

    /// `{"count", "overflow", "oversized", "firstTime", "lastTime"}` (times in ns).
    public var json: JSONValue {
        ["count": .int(Int64(clamping: count)), "overflow": .int(Int64(clamping: overflow)), "oversized": .int(Int64(clamping: oversized)),
         "firstTime": .int(firstTime.nanoseconds), "lastTime": .int(lastTime.nanoseconds)]
    }

    /// Reads a notice's payload; nil when it is not one: not that JSON object, a negative or missing
    /// number, `count` not `overflow + oversized`, no record counted, or `firstTime` after `lastTime`.
    public init?(payload: [UInt8]) {
        guard let j = try? JSONValue(parsing: payload), let count = j["count"]?.intValue, let overflow = j["overflow"]?.intValue,
              let oversized = j["oversized"]?.intValue, let first = j["firstTime"]?.intValue, let last = j["lastTime"]?.intValue,
              overflow >= 0, oversized >= 0, count >= 1, first <= last
        else { return nil }
        let sum = overflow.addingReportingOverflow(oversized)
        guard !sum.overflow, sum.partialValue == count else { return nil }
        self.init(overflow: UInt64(overflow), oversized: UInt64(oversized), firstTime: Moment(nanoseconds: first), lastTime: Moment(nanoseconds: last))
    }
}
