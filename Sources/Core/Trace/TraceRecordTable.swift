/// Random access to the records of a trace without holding them all in memory: the chunk table says which
/// chunk holds a record, and the two chunks used last are kept decoded (one for the records being visited,
/// one for looking back across a chunk boundary).
///
/// Walking the records in order decodes each chunk once, as `TraceReader.next()` does, and checks each as
/// it decodes it (its chunk header against the index entry, CRC-32C, zstd checksum, framing, counts, time
/// span, and the index's generations; see `TraceReader.records(ofChunk:)`); memory
/// stays at two decoded chunks whatever the trace's size, and the records just decoded are still in the CPU
/// caches when they are used. A damaged chunk is found when it is first needed, not before: `record(at:)`
/// throws its `TraceError`. Not thread-safe (it caches): one table per thread.
public final class TraceRecordTable {
    /// The reader the chunks are decoded with.
    public let reader: TraceReader
    /// The chunks, in order (the index of a complete trace, else the chunk headers that could be walked).
    public let chunks: [TraceChunkInfo]
    /// How many records the chunks hold.
    public let count: Int

    // The chunk used last (records `currentFirst..<currentEnd`), and the one used before it.
    private var currentFirst = 0
    private var currentEnd = 0
    private var current: [TraceRecord] = []
    private var currentChunk = -1
    private var previousFirst = 0
    private var previous: [TraceRecord] = []
    private var previousChunk = -1

    /// A table over the chunks of `reader` (see `TraceReader.chunks()`, which throws when no chunk can be
    /// listed). The reader's own iteration is not used or moved.
    public init(reader: TraceReader) throws(TraceError) {
        self.reader = reader
        chunks = try reader.chunks()
        count = Int(chunks.last.map { $0.firstRecord + UInt64($0.recordCount) } ?? 0)
    }

    /// The record numbered `index` (0..<count). Throws the damage of the chunk holding it, or
    /// `invalidArgument` for an index outside the table.
    @inline(__always)
    public func record(at index: Int) throws(TraceError) -> TraceRecord {
        if index >= currentFirst && index < currentEnd { return current[index &- currentFirst] }
        return try slowRecord(at: index)
    }

    /// The chunk (position in `chunks`) holding record `index`, or nil outside the table.
    public func chunkIndex(ofRecord index: Int) -> Int? {
        guard index >= 0, index < count else { return nil }
        var lo = 0
        var hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if Int(chunks[mid].firstRecord) + Int(chunks[mid].recordCount) <= index { lo = mid + 1 } else { hi = mid }
        }
        return lo < chunks.count ? lo : nil
    }

    private func slowRecord(at index: Int) throws(TraceError) -> TraceRecord {
        guard let c = chunkIndex(ofRecord: index) else {
            throw TraceError(.invalidArgument, "record \(index) is outside the trace (\(count) records)")
        }
        if c == previousChunk {
            swap(&current, &previous)
            swap(&currentChunk, &previousChunk)
            let first = previousFirst
            previousFirst = currentFirst
            currentFirst = first
        } else {
            let records = try reader.records(ofChunk: chunks[c])
            previous = current
            previousChunk = currentChunk
            previousFirst = currentFirst
            current = records
            currentChunk = c
            currentFirst = Int(chunks[c].firstRecord)
        }
        currentEnd = currentFirst + current.count
        return current[index - currentFirst]
    }
}
