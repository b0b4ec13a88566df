public import Trace

/// The records a ``Replayer`` replays, numbered from 0: held in memory (the array given to
/// ``Replayer/init(header:records:checkpointInterval:tuning:)``, or an incomplete trace read up to its end or
/// damage), or read from a complete trace file a chunk at a time through a ``TraceRecordTable``, which keeps
/// two decoded chunks whatever the trace's size.
///
/// A file-backed collection finds a damaged chunk only when it first reads it: ``record(at:)`` then throws
/// the `TraceError` (the replayer stops with ``ReplayStop/damaged(at:_:)``), and the subscript, which cannot
/// throw, returns a stand-in record of kind `unknown(0)` at the chunk's first time whose payload says what is
/// wrong. Not thread-safe when file-backed (the table caches): use it from one thread.
public struct ReplayRecords: RandomAccessCollection {
    private enum Storage {
        case memory([TraceRecord])
        case file(TraceRecordTable)
    }

    private let storage: Storage
    /// How many records there are.
    public let count: Int

    /// Records held in memory.
    public init(_ records: [TraceRecord]) {
        storage = .memory(records)
        count = records.count
    }

    /// The records of `table`, read a chunk at a time.
    public init(_ table: TraceRecordTable) {
        storage = .file(table)
        count = table.count
    }

    /// Whether the records are read from the trace file as they are needed (rather than held in memory).
    public var isFileBacked: Bool {
        if case .file = storage { return true }
        return false
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// `count`.
    public var endIndex: Int { count }

    /// The record numbered `index`; throws when it lies in a damaged chunk of the trace file.
    @inline(__always)
    public func record(at index: Int) throws(TraceError) -> TraceRecord {
        switch storage {
        case .memory(let records): return records[index]
        case .file(let table): return try table.record(at: index)
        }
    }

    /// The record numbered `index` (a stand-in describing the damage when its chunk cannot be read).
    public subscript(index: Int) -> TraceRecord {
        switch storage {
        case .memory(let records):
            return records[index]
        case .file(let table):
            do {
                return try table.record(at: index)
            } catch {
                let time = table.chunkIndex(ofRecord: index).map { table.chunks[$0].minTime } ?? .zero
                return TraceRecord(kind: .unknown(0), time: time, payload: Array("unreadable: \(error.description)".utf8))
            }
        }
    }

    /// Every record in an array; throws the first damage met.
    public func loadAll() throws(TraceError) -> [TraceRecord] {
        switch storage {
        case .memory(let records):
            return records
        case .file(let table):
            var out: [TraceRecord] = []
            out.reserveCapacity(count)
            for i in 0..<count { out.append(try table.record(at: i)) }
            return out
        }
    }
}
