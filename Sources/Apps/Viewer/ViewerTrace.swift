public import Inspect
public import RelayProtocol
public import Trace

/// The one type the viewer reads a trace through: random access by record number and by time over the
/// trace's chunk index (`TraceRecordTable`: two decoded chunks in memory whatever the trace's size), with
/// RPC responses correlated from the records just before them. Not thread-safe: the service keeps it
/// behind a lock.
public final class ViewerTrace {
    /// The file.
    public let path: String
    /// The reader (header, index).
    public let reader: TraceReader
    private let table: TraceRecordTable
    /// How many records the trace has (header excluded).
    public var count: Int { table.count }
    /// How many records before a page are read to correlate its RPC responses with their requests.
    public static let correlationLookback = 256

    /// Opens `path` and lists its chunks (the index of a complete trace, the chunk headers otherwise).
    public init(path: String) throws(TraceError) {
        self.path = path
        reader = try TraceReader(path: path)
        table = try TraceRecordTable(reader: reader)
    }

    /// The trace's header.
    public var header: TraceHeader { reader.header }

    /// The first record's time (from the index: no chunk decoded).
    public var startTime: Moment { table.chunks.first(where: { $0.recordCount > 0 })?.minTime ?? .zero }
    /// The last record's time (from the index).
    public var endTime: Moment { table.chunks.last(where: { $0.recordCount > 0 })?.maxTime ?? startTime }

    /// Record `n`, inspected (not correlated).
    public func record(_ n: Int) throws(TraceError) -> InspectedRecord {
        InspectedRecord(number: UInt64(n), record: try table.record(at: n))
    }

    /// Records `from..<from+count` (cut at the end), RPC responses correlated with requests up to
    /// `correlationLookback` records earlier.
    public func records(from: Int, count: Int) throws(TraceError) -> [InspectedRecord] {
        var out: [InspectedRecord] = []
        try scan(from: from) { rec in
            guard out.count < count else { return false }
            out.append(rec)
            return true
        }
        return out
    }

    /// Calls `body` with each record from `from` on, correlated, until it returns false or the trace ends.
    public func scan(from: Int, _ body: (InspectedRecord) -> Bool) throws(TraceError) {
        guard from < count else { return }
        var correlator = RpcCorrelator(capacity: 1024)
        let first = max(0, from)
        for n in max(0, first - Self.correlationLookback)..<first {
            var rec = try record(n)
            correlator.correlate(&rec)
        }
        var n = first
        while n < count {
            var rec = try record(n)
            correlator.correlate(&rec)
            guard body(rec) else { return }
            n += 1
        }
    }

    /// The number of the first record at or after `time` (`count` when none is): the chunk by binary
    /// search on the index's time spans, then the record within it (exact when record times do not go
    /// backwards, as writers write them).
    public func firstRecord(atOrAfter time: Moment) throws(TraceError) -> Int {
        let chunks = table.chunks
        var lo = 0, hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if chunks[mid].maxTime < time || chunks[mid].recordCount == 0 { lo = mid + 1 } else { hi = mid }
        }
        guard lo < chunks.count else { return count }
        var a = Int(chunks[lo].firstRecord), b = a + Int(chunks[lo].recordCount)
        while a < b {
            let mid = (a + b) / 2
            if try table.record(at: mid).time < time { a = mid + 1 } else { b = mid }
        }
        return a
    }
}
