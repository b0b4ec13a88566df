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
    @usableFromInline
    enum Storage {
        case memory([TraceRecord])
        case file(TraceRecordTable)
    }

    @usableFromInline
    let storage: Storage
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

    /// The record numbered `index`; throws when it lies in a damaged chunk of the trace file. Inlinable: the
    /// replayers read every record through it.
    @inlinable
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

    /// Opens the trace at `path` for a replayer. A complete trace (closed by its writer: valid index and
    /// trailer) is read a chunk at a time as the replay goes. An incomplete trace (the recorder died, or the
    /// file was cut) is read whole up to its end or damage, and refused unless `allowDamaged`; then
    /// `readProblem` says why it ends where it does.
    public static func open(path: String, allowDamaged: Bool) throws(ReplayError) -> (header: TraceHeader, records: ReplayRecords, readProblem: TraceError?) {
        let reader: TraceReader
        do { reader = try TraceReader(path: path) } catch {
            throw ReplayError(message: "\(path): \(error.description)", traceError: error)
        }
        if reader.isComplete {
            do { return (reader.header, ReplayRecords(try TraceRecordTable(reader: reader)), nil) } catch {
                throw ReplayError(message: "\(path): \(error.description)", traceError: error)
            }
        }
        // As `readAll()`, keeping only the records (no second array of entries to copy and free).
        var records: [TraceRecord] = []
        var readError: TraceError?
        do {
            while let e = try reader.next() { records.append(e.record) }
        } catch {
            readError = error
        }
        // Every chunk read, but no valid index and trailer: the recorder did not close the file.
        let problem = readError ?? reader.trailerProblem
            ?? TraceError(.truncated, "no valid index and trailer after the last chunk; the recorder did not close the trace")
        if !allowDamaged {
            throw ReplayError(message: "\(path): \(problem.description)", traceError: problem, intactRecords: records.count)
        }
        return (reader.header, ReplayRecords(records), problem)
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
