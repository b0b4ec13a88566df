public import RelayProtocol

/// A record read from a trace, with its number (0-based over the whole trace, header excluded).
public struct TraceEntry: Sendable, Hashable {
    /// The record's number.
    public var number: UInt64
    /// The record.
    public var record: TraceRecord
}

/// Reads a trace file: the header at once, the trailer and index when the file is complete, and records
/// streamed chunk by chunk (memory bounded by one chunk). Not thread-safe: one reader per thread.
///
/// Iteration (`next()`) walks the frames in file order and checks everything on the way: chunk header
/// CRCs, each zstd frame's CRC-32C and content checksum, record framing, record numbering, and, at the
/// end, the index against the chunks it has seen and the trailer against the index. A problem ends the
/// iteration with a `TraceError` naming the byte offset, after every good record before it. In salvage
/// mode problems are collected in `problems` and iteration resumes at the next intact chunk.
public final class TraceReader {
    /// How a reader behaves.
    public struct Options: Sendable, Hashable {
        /// Refuse chunks that declare more uncompressed bytes than this (checked before allocating).
        public var maxChunkSize: Int = TraceFormat.defaultMaxChunkSize
        /// Keep going after a damaged or truncated chunk: record the problem and resume at the next
        /// intact chunk header.
        public var salvage: Bool = false
        /// Default options.
        public init(maxChunkSize: Int = TraceFormat.defaultMaxChunkSize, salvage: Bool = false) {
            self.maxChunkSize = maxChunkSize
            self.salvage = salvage
        }
    }

    /// What the reader did so far (for tests and `info`).
    public struct Statistics: Sendable, Hashable {
        /// Chunks decompressed.
        public var chunksDecoded = 0
        /// Bytes read from the source.
        public var bytesRead: UInt64 = 0
    }

    /// The source.
    public let source: any TraceByteSource
    /// The options.
    public let options: Options
    /// The format version of the file.
    public let formatVersion: UInt16
    /// The header record (kind `.header`, JSON payload).
    public let headerRecord: TraceRecord
    /// The header, parsed from the header record.
    public let header: TraceHeader
    /// The byte offset just after the file-header frame (where the first chunk starts).
    public let dataOffset: UInt64
    /// The trailer, when the file has a valid one (and a valid index).
    public private(set) var trailer: TraceTrailer?
    /// The closing index (one entry per chunk), when the file is complete.
    public private(set) var index: [TraceChunkInfo]?
    /// Why the trailer or index could not be used, when the file looked closed but was not intact.
    public private(set) var trailerProblem: TraceError?
    /// Counters.
    public private(set) var statistics = Statistics()
    /// Problems skipped in salvage mode, in file order.
    public private(set) var problems: [TraceError] = []

    /// True when the file has a trailer and an index that check out: the writer closed it.
    public var isComplete: Bool { trailer != nil && index != nil }

    // Iteration: the frame walk, and what the records handed out so far imply.
    var walk: WalkState
    private var pending: [TraceRecord] = []
    private var pendingNext = 0
    private var pendingFirst: UInt64 = 0
    /// The sequence number of the chunk whose records are in `pending` (its summary frame is checked
    /// against that chunk's bytes, see `bufferSequence`).
    private var pendingSequence: UInt32?
    /// The chunk whose decompressed bytes `chunkBuffer` and `recordStarts` hold (its summary frame, which
    /// the walk reads next, is checked against them, also when a seek copied out only some records).
    private var bufferSequence: UInt32?
    private var scanned: [TraceChunkInfo] = []
    private var failure: TraceError?
    private var chunkTableCache: [TraceChunkInfo]?
    private let decompressor: ZstdDecompressor
    private var chunkBuffer: [UInt8] = []
    private var recordStarts: [Int] = []

    /// Opens the trace at `path`.
    public convenience init(path: String, options: Options = Options()) throws(TraceError) {
        try self.init(source: FileByteSource(path: path), options: options)
    }

    /// Reads a trace held in memory.
    public convenience init(bytes: [UInt8], options: Options = Options()) throws(TraceError) {
        try self.init(source: MemoryByteSource(bytes), options: options)
    }

    /// Reads a trace from `source`: reads and checks the file header, then the trailer and index if the
    /// file has them. Throws when the header is missing, damaged or of a newer version.
    public init(source: any TraceByteSource, options: Options = Options()) throws(TraceError) {
        self.source = source
        self.options = options
        self.decompressor = try ZstdDecompressor()
        // File header.
        let head = try source.read(at: 0, count: 8)
        let magicBytes: [UInt8] = [0x50, 0x2A, 0x4D, 0x18]
        guard head.count >= 8 else {
            if head.isEmpty { throw TraceError(.notATrace, offset: 0, "the file is empty; a trace starts with a RelayTrace header frame") }
            if Array(magicBytes.prefix(head.count)) == Array(head.prefix(4)) {
                throw TraceError(.truncated, offset: 0, "the file ends inside its header frame (\(head.count) bytes); the recorder died while creating it")
            }
            throw TraceError(.notATrace, offset: 0, "the file is \(head.count) bytes and does not start with a RelayTrace header frame")
        }
        guard head.u32(at: 0) == TraceFormat.skippableMagic, let size = head.u32(at: 4) else {
            throw TraceError(.notATrace, offset: 0, "not a RelayTrace file: it does not start with the skippable-frame magic 50 2A 4D 18")
        }
        let maxContent = 12 + TraceFormat.recordHeaderSize + TraceFormat.maxHeaderPayload
        guard Int(size) <= maxContent, size >= UInt32(12 + TraceFormat.recordHeaderSize) else {
            throw TraceError(.limitExceeded, offset: 4, "header frame declares \(size) bytes of content (allowed \(12 + TraceFormat.recordHeaderSize)...\(maxContent)); the header is damaged")
        }
        let frame = try source.read(at: 0, count: 8 + Int(size))
        statistics.bytesRead += UInt64(frame.count)
        guard frame.count == 8 + Int(size) else {
            throw TraceError(.truncated, offset: UInt64(frame.count), "the file ends inside its header frame (\(frame.count) of \(8 + Int(size)) bytes)")
        }
        guard frame.u32(at: 8) == TraceFormat.tagHeader else {
            throw TraceError(.notATrace, offset: 8, "the first frame is not a RelayTrace header (tag RTHD); this is some other zstd file")
        }
        guard let crc = frame.u32(at: frame.count - 4), crc == CRC32C.checksum(frame, 8..<(frame.count - 4)) else {
            throw TraceError(.checksumMismatch, offset: 0, "header frame CRC-32C mismatch; the header is damaged")
        }
        let version = frame.u16(at: 12) ?? 0
        guard version >= 1, version <= TraceFormat.version else {
            throw TraceError(.unsupportedVersion, offset: 12, "format version \(version); this reader understands versions 1...\(TraceFormat.version): update relaytrace")
        }
        formatVersion = version
        var at = 16
        let record = try frame.withBytes { (b) throws(TraceError) -> TraceRecord in
            try FrameCodec.decodeRecord(UnsafeRawBufferPointer(rebasing: b[0..<(frame.count - 4)]), offset: &at, fileOffset: 16, where: "header record")
        }
        guard record.kind == .header, at == frame.count - 4 else {
            throw TraceError(.corrupt, offset: 16, "the header frame must hold exactly one record of kind header (found \(record.kind))")
        }
        headerRecord = record
        header = try TraceHeader.parse(record: record)
        dataOffset = UInt64(frame.count)
        walk = WalkState(cursor: dataOffset)
        loadTrailer()
        if let trailer { walk.summaries = trailer.flags & TraceTrailer.flagChunkSummaries != 0 }
    }

    private func loadTrailer() {
        guard let size = source.size, size >= dataOffset + UInt64(TraceFormat.trailerFrameSize) else { return }
        let at = size - UInt64(TraceFormat.trailerFrameSize)
        do {
            let b = try source.read(at: at, count: TraceFormat.trailerFrameSize)
            statistics.bytesRead += UInt64(b.count)
            guard let t = try FrameCodec.decodeTrailer(b, offset: at) else { return }
            guard t.indexFrameSize >= 20, Int(t.indexFrameSize) <= TraceFormat.maxIndexSize,
                t.indexOffset >= dataOffset, t.indexOffset <= at, at - t.indexOffset == UInt64(t.indexFrameSize)
            else {
                trailerProblem = TraceError(.corrupt, offset: at, "the trailer points to an index at \(t.indexOffset) (\(t.indexFrameSize) bytes) that does not end where the trailer starts")
                return
            }
            let ib = try source.read(at: t.indexOffset, count: Int(t.indexFrameSize))
            statistics.bytesRead += UInt64(ib.count)
            let chunks = try FrameCodec.decodeIndex(ib, offset: t.indexOffset)
            // (Wrapping sum: the entries' numbering is checked from 0 below, so a wrapped total cannot pass.)
            guard chunks.count == Int(t.chunkCount), (chunks.last.map { $0.firstRecord &+ UInt64($0.recordCount) } ?? 0) == t.recordCount else {
                trailerProblem = TraceError(.corrupt, offset: t.indexOffset, "the index lists \(chunks.count) chunks but the trailer says \(t.chunkCount) chunks / \(t.recordCount) records")
                return
            }
            // The entries must describe chunks in file order that follow on, before the index: random
            // access trusts them without walking the file.
            var nextRecord: UInt64 = 0
            var nextOffset = dataOffset
            for (i, c) in chunks.enumerated() {
                guard c.firstRecord == nextRecord, c.offset >= nextOffset, c.offset <= t.indexOffset,
                      c.endOffset <= t.indexOffset else {
                    trailerProblem = TraceError(.corrupt, offset: t.indexOffset, "index entry \(i) (chunk at \(c.offset), records from \(c.firstRecord)) does not follow on from entry \(i - 1) (records up to \(nextRecord), bytes up to \(nextOffset)); the index is damaged")
                    return
                }
                nextRecord += UInt64(c.recordCount)
                nextOffset = c.endOffset
            }
            trailer = t
            index = chunks
        } catch {
            trailerProblem = error
        }
    }

    // MARK: iteration

    /// The next record, or nil at the end. Throws the first problem met (with its byte offset) after
    /// returning every good record before it; keeps throwing it afterwards. In salvage mode it throws
    /// only I/O errors of the source.
    public func next() throws(TraceError) -> TraceEntry? {
        while true {
            if pendingNext < pending.count {
                let entry = TraceEntry(number: pendingFirst + UInt64(pendingNext), record: pending[pendingNext])
                pendingNext += 1
                return entry
            }
            if let failure { throw failure }
            if walk.finished { return nil }
            do {
                try step()
            } catch {
                if options.salvage && error.code != .io {
                    problems.append(error)
                    resync()
                } else {
                    failure = error
                    throw error
                }
            }
        }
    }

    /// Reads every remaining record. Returns them with the error that stopped the reading, if any.
    public func readAll() -> (entries: [TraceEntry], error: TraceError?) {
        var out = [TraceEntry]()
        do {
            while let e = try next() { out.append(e) }
            return (out, nil)
        } catch {
            return (out, error)
        }
    }

    /// Reads the frame at the walk's cursor and advances past it; fills `pending` when it is a chunk. On a
    /// problem the walk stays at the frame (salvage resumes after it).
    private func step() throws(TraceError) {
        var w = walk
        let s = try walkFrame(&w)
        switch s.event {
        case .chunk(let info):
            let (records, generations) = try decodeChunk(info)
            var done = info
            done.generations = generations
            if w.fromStart { scanned.append(done) }
            pending = records
            pendingNext = 0
            pendingFirst = info.firstRecord
            pendingSequence = info.sequence
        case .summary(let summary, let chunk):
            try checkSummary(summary, of: chunk, at: s.offset)
        case .index(let chunks):
            if w.fromStart && !options.salvage { try checkIndex(chunks, against: scanned, at: s.offset) }
        case .trailer, .skipped, .end:
            break
        }
        walk = w
    }

    /// Checks a summary frame against the records of the chunk it follows (decoded just before).
    private func checkSummary(_ summary: TraceChunkSummary, of chunk: TraceChunkInfo, at offset: UInt64) throws(TraceError) {
        guard pendingSequence == chunk.sequence, bufferSequence == chunk.sequence else { return }
        var b = TraceChunkSummary.Builder()
        chunkBuffer.withUnsafeBytes { bytes in
            let view = TraceChunkView(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<Int(chunk.uncompressedSize)]), starts: recordStarts)
            for i in 0..<view.count {
                let r = view[i]
                b.add(kind: r.kindValue, flags: r.flags, channel: r.channelValue, generation: r.generation, payload: r.payload)
            }
        }
        guard b.summary == summary else {
            throw TraceError(.corrupt, offset: offset, "the summary frame of chunk \(chunk.sequence) does not describe its records; the summary is damaged or was written by a faulty writer")
        }
    }

    /// The index check of a walk from the first chunk: the index lists exactly the chunks seen.
    func checkIndex(_ chunks: [TraceChunkInfo], against scanned: [TraceChunkInfo], at offset: UInt64) throws(TraceError) {
        guard chunks == scanned else {
            let firstDiff = Array(zip(chunks, scanned)).firstIndex { $0 != $1 } ?? min(chunks.count, scanned.count)
            throw TraceError(.corrupt, offset: offset, "the index does not match the chunks in the file (\(chunks.count) entries, \(scanned.count) chunks; first difference at entry \(firstDiff))")
        }
    }

    /// Reads and checks the frame at `w.cursor` and moves `w` past it (a chunk's header only: the caller
    /// decodes the chunk). Leaves `w` as it was when it throws.
    func walkFrame(_ walkState: inout WalkState) throws(TraceError) -> WalkStep {
        var w = walkState
        let at = w.cursor
        let head = try source.read(at: at, count: 8)
        statistics.bytesRead += UInt64(head.count)
        if head.isEmpty {
            if let seen = w.seenIndex {
                throw TraceError(.truncated, offset: at, "the file ends after the index (at \(seen.offset)) without its trailer; the recorder died while closing")
            }
            w.finished = true
            walkState = w
            return WalkStep(event: .end, offset: at)
        }
        guard head.count == 8, let magic = head.u32(at: 0), let size = head.u32(at: 4) else {
            throw TraceError(.truncated, offset: at, "the file ends \(head.count) bytes into a frame header; the recorder was stopped mid-write")
        }
        if magic == TraceFormat.zstdMagic {
            throw TraceError(.corrupt, offset: at, "a zstd frame without a chunk header; the chunk header before it is damaged (try --salvage)")
        }
        guard magic >= TraceFormat.skippableMagicLow, magic <= TraceFormat.skippableMagicHigh else {
            throw TraceError(.corrupt, offset: at, "unknown frame magic 0x\(String(magic, radix: 16)); the file is damaged here (try --salvage)")
        }
        let frameEnd = at + 8 + UInt64(size)
        if let total = source.size, frameEnd > total {
            throw TraceError(.truncated, offset: at, "a frame of \(8 + UInt64(size)) bytes starts here but the file ends at \(total); the recorder was stopped mid-write")
        }
        var tag: UInt32 = 0
        if magic == TraceFormat.skippableMagic, size >= 4 {
            let t = try source.read(at: at + 8, count: 4)
            guard t.count == 4 else { throw TraceError(.truncated, offset: at, "the file ends inside a frame") }
            tag = t.u32(at: 0) ?? 0
        }
        if w.seenIndex != nil && tag != TraceFormat.tagTrailer {
            throw TraceError(.corrupt, offset: at, "expected the trailer after the index, found another frame")
        }
        if let c = w.afterChunk {
            if tag == TraceFormat.tagSummary {
                if w.summaries == false {
                    throw TraceError(.corrupt, offset: at, "chunk \(c.sequence) is followed by a summary frame, but the chunks before it (or the trailer) say the file has none; the file is damaged")
                }
            } else if w.summaries == true {
                throw TraceError(.corrupt, offset: at, "chunk \(c.sequence) is not followed by its summary frame (RTCS); the file is damaged here")
            } else {
                w.summaries = false
            }
        }
        let event: WalkEvent
        switch tag {
        case TraceFormat.tagChunk:
            let b = try readExactly(at: at, count: TraceFormat.chunkHeaderFrameSize, what: "chunk header")
            guard let info = try FrameCodec.decodeChunkHeader(b, offset: at) else {
                throw TraceError(.corrupt, offset: at, "a chunk header frame of the wrong size (\(size) bytes, expected 52)")
            }
            guard info.firstRecord <= UInt64.max - UInt64(info.recordCount) else {
                throw TraceError(.corrupt, offset: at, "chunk \(info.sequence) numbers its records from \(info.firstRecord), past the last record number there can be")
            }
            if w.fromStart && !options.salvage {
                guard info.sequence == w.nextSequence, info.firstRecord == w.nextRecord else {
                    throw TraceError(.corrupt, offset: at, "chunk \(info.sequence) starting at record \(info.firstRecord) follows chunk \(Int(w.nextSequence) - 1) ending before record \(w.nextRecord); chunks are missing or out of order")
                }
            }
            w.nextRecord = info.firstRecord + UInt64(info.recordCount)
            w.nextSequence = info.sequence &+ 1
            w.afterChunk = info
            w.cursor = info.endOffset
            event = .chunk(info)
        case TraceFormat.tagSummary:
            guard let c = w.afterChunk else {
                throw TraceError(.corrupt, offset: at, "a chunk summary frame (RTCS) that does not follow a chunk; the file is damaged")
            }
            guard Int(size) + 8 <= TraceFormat.maxSummarySize else {
                throw TraceError(.limitExceeded, offset: at, "chunk summary frame of \(size) bytes is over the \(TraceFormat.maxSummarySize)-byte limit")
            }
            let b = try readExactly(at: at, count: 8 + Int(size), what: "chunk summary")
            let (sequence, frameCRC, summary) = try FrameCodec.decodeSummaryFrame(b, offset: at)
            guard sequence == c.sequence, frameCRC == c.frameCRC, summary.recordCount == UInt64(c.recordCount) else {
                throw TraceError(.corrupt, offset: at, "the summary frame here describes chunk \(sequence) (\(summary.recordCount) records), not chunk \(c.sequence) (\(c.recordCount) records) before it; the file is damaged")
            }
            w.summaries = true
            w.afterChunk = nil
            w.cursor = frameEnd
            event = .summary(summary, chunk: c)
        case TraceFormat.tagIndex:
            guard Int(size) + 8 <= TraceFormat.maxIndexSize else {
                throw TraceError(.limitExceeded, offset: at, "index frame of \(size) bytes is over the \(TraceFormat.maxIndexSize)-byte limit")
            }
            let b = try readExactly(at: at, count: 8 + Int(size), what: "index")
            let chunks = try FrameCodec.decodeIndex(b, offset: at)
            w.seenIndex = SeenIndex(offset: at, size: size + 8, chunkCount: chunks.count)
            w.afterChunk = nil
            w.cursor = frameEnd
            event = .index(chunks)
        case TraceFormat.tagTrailer:
            let b = try readExactly(at: at, count: TraceFormat.trailerFrameSize, what: "trailer")
            guard let t = try FrameCodec.decodeTrailer(b, offset: at) else {
                throw TraceError(.corrupt, offset: at, "a trailer frame of the wrong size (\(size) bytes, expected 52)")
            }
            guard let seen = w.seenIndex, seen.offset == t.indexOffset, seen.size == t.indexFrameSize,
                UInt32(seen.chunkCount) == t.chunkCount
            else {
                throw TraceError(.corrupt, offset: at, "the trailer does not point to the index before it")
            }
            if w.fromStart && !options.salvage && t.recordCount != w.nextRecord {
                throw TraceError(.corrupt, offset: at, "the trailer counts \(t.recordCount) records, the chunks hold \(w.nextRecord)")
            }
            if let total = source.size, frameEnd != total {
                throw TraceError(.corrupt, offset: frameEnd, "\(total - frameEnd) bytes follow the trailer; the file was appended to after closing")
            }
            w.finished = true
            w.afterChunk = nil
            w.cursor = frameEnd
            event = .trailer(t)
        case TraceFormat.tagHeader:
            throw TraceError(.corrupt, offset: at, "a second header frame inside the file; two traces were concatenated or the file is damaged")
        default:
            // A skippable frame this version does not know (other magic or tag): skip it.
            w.afterChunk = nil
            w.cursor = frameEnd
            event = .skipped
        }
        walkState = w
        return WalkStep(event: event, offset: at)
    }

    /// Counts bytes a scan read on the reader's behalf.
    func noteBytesRead(_ n: UInt64) { statistics.bytesRead += n }

    private func readExactly(at: UInt64, count: Int, what: String) throws(TraceError) -> [UInt8] {
        let b = try source.read(at: at, count: count)
        statistics.bytesRead += UInt64(b.count)
        guard b.count == count else {
            throw TraceError(.truncated, offset: at, "the file ends inside the \(what) (\(b.count) of \(count) bytes); the recorder was stopped mid-write")
        }
        return b
    }

    /// Reads, checks and decodes the chunk `c` (an entry of ``chunks()``) without moving the iteration:
    /// its chunk-header frame (CRC, and every field equal to `c`'s), the zstd frame's CRC-32C, the zstd
    /// frame and its content checksum, the record framing, the record count and time span, and, when the
    /// file has an index entry for this chunk, that its records mention exactly the generations it lists.
    /// Errors carry the chunk's offset.
    public func records(ofChunk c: TraceChunkInfo) throws(TraceError) -> [TraceRecord] {
        let head = try readExactly(at: c.offset, count: TraceFormat.chunkHeaderFrameSize, what: "chunk header")
        guard var h = try FrameCodec.decodeChunkHeader(head, offset: c.offset) else {
            throw TraceError(.corrupt, offset: c.offset, "no chunk header frame where chunk \(c.sequence) should start")
        }
        h.generations = c.generations
        guard h == c else {
            throw TraceError(.corrupt, offset: c.offset, "the chunk header here (chunk \(h.sequence), records \(h.firstRecord)..<\(h.firstRecord &+ UInt64(h.recordCount))) differs from the index entry for chunk \(c.sequence); the file is damaged")
        }
        let (records, generations) = try decodeChunk(c)
        if let index, Int(c.sequence) < index.count, index[Int(c.sequence)].offset == c.offset,
           generations != index[Int(c.sequence)].generations {
            throw TraceError(.corrupt, offset: c.offset, "chunk \(c.sequence): its records mention generations \(generations), the index says \(index[Int(c.sequence)].generations)")
        }
        return records
    }

    /// Reads, checks and decodes one chunk. Errors carry the chunk's offset.
    private func decodeChunk(_ c: TraceChunkInfo) throws(TraceError) -> ([TraceRecord], [UInt64]) {
        let (_, records, generations) = try decodeChunk(c) { _ in 0 }
        return (records, generations)
    }

    /// Decodes chunk `c` (every check) and copies out its records from the position `start` picks, looking
    /// at them in place: a seek copies the records it hands out, not the whole chunk. Returns that position.
    private func decodeChunk(_ c: TraceChunkInfo, from start: (TraceChunkView) -> Int) throws(TraceError) -> (Int, [TraceRecord], [UInt64]) {
        let frame = try readChunkFrame(c)
        statistics.chunksDecoded += 1
        bufferSequence = nil
        let generations = try TraceReader.decodeChunkFrame(c, frame: frame, decompressor: decompressor, into: &chunkBuffer, starts: &recordStarts)
        bufferSequence = c.sequence
        let (first, records) = chunkBuffer.withUnsafeBytes { b -> (Int, [TraceRecord]) in
            let view = TraceChunkView(bytes: UnsafeRawBufferPointer(rebasing: b[0..<Int(c.uncompressedSize)]), starts: recordStarts)
            let first = min(max(0, start(view)), view.count)
            return (first, view.records(from: first))
        }
        return (first, records, generations)
    }

    /// The checks of a chunk that need no decompression (its declared sizes against the limits and the
    /// file's end), then its zstd frame's bytes. Errors carry the chunk's offset.
    func readChunkFrame(_ c: TraceChunkInfo) throws(TraceError) -> [UInt8] {
        let at = c.offset
        guard Int(c.uncompressedSize) <= options.maxChunkSize else {
            throw TraceError(.limitExceeded, offset: at, "chunk \(c.sequence) declares \(c.uncompressedSize) uncompressed bytes, over the \(options.maxChunkSize)-byte limit")
        }
        guard Int(c.compressedSize) <= ZstdCompressor.bound(options.maxChunkSize), c.compressedSize >= 9 else {
            throw TraceError(.limitExceeded, offset: at, "chunk \(c.sequence) declares a \(c.compressedSize)-byte zstd frame, outside what a \(options.maxChunkSize)-byte chunk can take")
        }
        guard UInt64(c.recordCount) * UInt64(TraceFormat.recordHeaderSize) <= UInt64(c.uncompressedSize) else {
            throw TraceError(.corrupt, offset: at, "chunk \(c.sequence) claims \(c.recordCount) records in \(c.uncompressedSize) bytes")
        }
        if let total = source.size, c.endOffset > total {
            throw TraceError(.truncated, offset: at, "chunk \(c.sequence) needs \(c.endOffset - at) bytes but the file ends at \(total); the recorder was stopped mid-write")
        }
        return try readExactly(at: c.frameOffset, count: Int(c.compressedSize), what: "zstd frame of chunk \(c.sequence)")
    }

    /// Checks the CRC-32C of chunk `c`'s zstd frame without decompressing it (what a scan does with a
    /// chunk it does not need: damage there is still found).
    static func checkFrameCRC(_ c: TraceChunkInfo, frame: [UInt8]) throws(TraceError) {
        guard CRC32C.checksum(frame) == c.frameCRC else {
            throw TraceError(.checksumMismatch, offset: c.offset, "chunk \(c.sequence): CRC-32C of its zstd frame does not match; the chunk is damaged")
        }
    }

    /// Checks and decompresses the zstd frame of chunk `c` into `buffer` (resized to the chunk's size) and
    /// walks its record framing, filling `starts` with the offset of every record; returns the generations
    /// its records mention, ascending. Every check of §3.4 in order: CRC-32C, magic, declared size, frame
    /// size, zstd and its checksum, record framing, count, time span. Pure (any thread, own decompressor).
    static func decodeChunkFrame(
        _ c: TraceChunkInfo, frame: [UInt8], decompressor: ZstdDecompressor, into buffer: inout [UInt8], starts: inout [Int]
    ) throws(TraceError) -> [UInt64] {
        let at = c.offset
        let size = Int(c.uncompressedSize)
        try frame.withBytes { (f) throws(TraceError) in
            guard CRC32C.checksum(f) == c.frameCRC else {
                throw TraceError(.checksumMismatch, offset: at, "chunk \(c.sequence): CRC-32C of its zstd frame does not match; the chunk is damaged")
            }
            guard f.count >= 4, f.loadUnaligned(as: UInt32.self) == TraceFormat.zstdMagic.littleEndian else {
                throw TraceError(.corrupt, offset: c.frameOffset, "chunk \(c.sequence): no zstd frame after the chunk header")
            }
            guard let declared = ZstdDecompressor.declaredContentSize(f), declared == UInt64(c.uncompressedSize) else {
                throw TraceError(.corrupt, offset: c.frameOffset, "chunk \(c.sequence): the zstd frame's content size differs from the chunk header's \(c.uncompressedSize) bytes (or is missing)")
            }
            guard ZstdDecompressor.frameSize(f) == f.count else {
                throw TraceError(.corrupt, offset: c.frameOffset, "chunk \(c.sequence): the zstd frame's blocks do not end where the chunk header says")
            }
            do throws(TraceError) {
                let n = try decompressor.decompress(f, size: size, into: &buffer)
                guard n == size else {
                    throw TraceError(.corrupt, offset: c.frameOffset, "chunk \(c.sequence): decompressed to \(n) bytes, expected \(size)")
                }
            } catch {
                var e = error
                if e.offset == nil {
                    e.offset = c.frameOffset
                    e.message = "chunk \(c.sequence): \(e.message); the chunk is damaged"
                }
                throw e
            }
        }
        starts.removeAll(keepingCapacity: true)
        starts.reserveCapacity(Int(c.recordCount))
        var generations = Set<UInt64>()
        var lastGeneration: UInt64?
        var minT = Int64.max
        var maxT = Int64.min
        try buffer.withBytes { (b) throws(TraceError) in
            var p = 0
            let body = UnsafeRawBufferPointer(rebasing: b[0..<size])
            while p < size {
                guard starts.count < Int(c.recordCount) else {
                    throw TraceError(.corrupt, offset: at, "chunk \(c.sequence) holds more bytes than its \(c.recordCount) records")
                }
                let start = p
                let h = try FrameCodec.checkRecord(body, offset: &p, fileOffset: at, where: "uncompressed offset \(start) of chunk \(c.sequence)")
                starts.append(start)
                if h.flags & 1 != 0, h.generation != lastGeneration {
                    generations.insert(h.generation)
                    lastGeneration = h.generation
                }
                minT = min(minT, h.time)
                maxT = max(maxT, h.time)
            }
        }
        guard starts.count == Int(c.recordCount) else {
            throw TraceError(.corrupt, offset: at, "chunk \(c.sequence) holds \(starts.count) records, its header says \(c.recordCount)")
        }
        if !starts.isEmpty {
            guard minT == c.minTime.nanoseconds, maxT == c.maxTime.nanoseconds else {
                throw TraceError(.corrupt, offset: at, "chunk \(c.sequence): record times span \(minT)...\(maxT) ns, its header says \(c.minTime.nanoseconds)...\(c.maxTime.nanoseconds)")
            }
        }
        return generations.sorted()
    }

    /// Salvage: skip to the next intact-looking chunk header after the frame the walk stopped at.
    private func resync() {
        pending = []
        pendingNext = 0
        pendingSequence = nil
        walk.fromStart = false
        walk.seenIndex = nil
        walk.afterChunk = nil
        let (found, bytes) = TraceReader.findChunkHeader(in: source, from: walk.cursor + 1)
        statistics.bytesRead += bytes
        if let found { walk.cursor = found } else { walk.finished = true }
    }

    /// The offset of the next chunk-header pattern (§3.3) at or after `start`, and the bytes read.
    static func findChunkHeader(in source: any TraceByteSource, from start: UInt64) -> (UInt64?, UInt64) {
        let pattern: [UInt8] = [0x50, 0x2A, 0x4D, 0x18, 0x34, 0x00, 0x00, 0x00, 0x52, 0x54, 0x43, 0x48]
        var at = start
        var read: UInt64 = 0
        let block = 1 << 20
        while true {
            guard let b = try? source.read(at: at, count: block + pattern.count), b.count >= pattern.count else {
                return (nil, read)
            }
            read += UInt64(b.count)
            var i = 0
            while i + pattern.count <= b.count {
                if b[i] == 0x50 && b[i + 1] == 0x2A && b[i + 2] == 0x4D && b[i + 3] == 0x18
                    && Array(b[(i + 4)..<(i + pattern.count)]) == Array(pattern[4...]) {
                    return (at + UInt64(i), read)
                }
                i += 1
            }
            if b.count < block + pattern.count { return (nil, read) }
            at += UInt64(block)
        }
    }

    // MARK: seeking

    /// Restarts iteration at the first record (clears a previous error).
    public func rewind() {
        reset(position: dataOffset)
        walk.fromStart = true
        walk.nextRecord = 0
        walk.nextSequence = 0
    }

    private func reset(position: UInt64) {
        walk.cursor = position
        walk.seenIndex = nil
        walk.afterChunk = nil
        walk.finished = false
        pending = []
        pendingNext = 0
        pendingSequence = nil
        scanned = []
        failure = nil
    }

    /// The chunks of the file: the index when the file is complete, otherwise found by walking the chunk
    /// headers (reading 60 bytes per chunk and stepping over the summary frames and unknown skippable
    /// frames between them, no decompression) up to the first frame that is none of these or does not
    /// check out. Cached.
    public func chunks() throws(TraceError) -> [TraceChunkInfo] {
        if let index { return index }
        if let chunkTableCache { return chunkTableCache }
        var out = [TraceChunkInfo]()
        var at = dataOffset
        while true {
            let b = try source.read(at: at, count: TraceFormat.chunkHeaderFrameSize)
            statistics.bytesRead += UInt64(b.count)
            if b.count >= 12, let magic = b.u32(at: 0), magic >= TraceFormat.skippableMagicLow, magic <= TraceFormat.skippableMagicHigh,
               let size = b.u32(at: 4), magic != TraceFormat.skippableMagic || ![TraceFormat.tagChunk, TraceFormat.tagIndex, TraceFormat.tagTrailer, TraceFormat.tagHeader].contains(b.u32(at: 8) ?? 0) {
                // A summary frame (or a frame of a newer writer) between chunks: step over it.
                at += 8 + UInt64(size)
                continue
            }
            guard b.count == TraceFormat.chunkHeaderFrameSize, let c = try? FrameCodec.decodeChunkHeader(b, offset: at),
                c.sequence == UInt32(out.count), c.firstRecord == (out.last.map { $0.firstRecord + UInt64($0.recordCount) } ?? 0)
            else { break }
            if let total = source.size, c.endOffset > total { break }
            out.append(c)
            at = c.endOffset
        }
        chunkTableCache = out
        return out
    }

    /// Positions iteration so that `next()` returns record `number` (reads one chunk). Seeking to the
    /// record count positions at the end.
    public func seek(toRecord number: UInt64) throws(TraceError) {
        let table = try chunks()
        let total = table.last.map { $0.firstRecord + UInt64($0.recordCount) } ?? 0
        guard number <= total else {
            throw TraceError(.invalidArgument, "record \(number) is past the end of the trace (\(total) records)")
        }
        var lo = 0
        var hi = table.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if table[mid].firstRecord + UInt64(table[mid].recordCount) <= number { lo = mid + 1 } else { hi = mid }
        }
        guard lo < table.count else {
            positionAtEnd(table)
            return
        }
        try load(table[lo], startingAt: Int(number - table[lo].firstRecord))
    }

    /// Positions iteration at the first record whose time is at or after `time` (reads one chunk; exact
    /// when record times are non-decreasing, as the capture layer writes them).
    public func seek(toTime time: Moment) throws(TraceError) {
        let table = try chunks()
        guard let i = table.firstIndex(where: { $0.maxTime >= time && $0.recordCount > 0 }) else {
            positionAtEnd(table)
            return
        }
        let c = table[i]
        reset(position: c.offset)
        let (start, records, _) = try decodeChunk(c) { view in
            (0..<view.count).first { view[$0].time >= time } ?? view.count
        }
        install(c, records: records, from: start)
    }

    private func load(_ c: TraceChunkInfo, startingAt index: Int) throws(TraceError) {
        reset(position: c.offset)
        let (start, records, _) = try decodeChunk(c) { _ in index }
        install(c, records: records, from: start)
    }

    /// Installs the records of chunk `c` from position `first` on (`records`) as the next to hand out.
    private func install(_ c: TraceChunkInfo, records: [TraceRecord], from first: Int) {
        walk.fromStart = false
        pending = records
        pendingNext = 0
        pendingFirst = c.firstRecord + UInt64(first)
        pendingSequence = c.sequence
        walk.nextRecord = c.firstRecord + UInt64(c.recordCount)
        walk.nextSequence = c.sequence &+ 1
        walk.cursor = c.endOffset
        walk.afterChunk = c
    }

    private func positionAtEnd(_ table: [TraceChunkInfo]) {
        reset(position: table.last?.endOffset ?? dataOffset)
        walk.fromStart = false
        walk.finished = true
    }
}

/// Where a walk over a trace's frames is and what the frames so far imply for the next ones.
struct WalkState: Sendable {
    /// The offset of the next frame.
    var cursor: UInt64
    /// The number of the record the next chunk must start with (checked when `fromStart`).
    var nextRecord: UInt64 = 0
    /// The sequence number the next chunk must have (checked when `fromStart`).
    var nextSequence: UInt32 = 0
    /// The walk started at the first chunk and was not resynchronised: chunk numbering and the index
    /// are checked against what was seen.
    var fromStart = true
    /// The index frame, once walked (only the trailer may follow it).
    var seenIndex: SeenIndex?
    /// The chunk the cursor is right after (its summary frame may come next).
    var afterChunk: TraceChunkInfo?
    /// Whether chunks are followed by summary frames: from the trailer's flag, else from the first chunk
    /// walked; nil until known.
    var summaries: Bool?
    /// The walk reached the end of the file (or of the trace, at the trailer).
    var finished = false
}

/// The index frame a walk went past.
struct SeenIndex: Sendable, Hashable {
    var offset: UInt64
    var size: UInt32
    var chunkCount: Int
}

/// What one step of a walk found.
enum WalkEvent: Sendable {
    /// A chunk header (checked); the chunk itself is not decoded yet.
    case chunk(TraceChunkInfo)
    /// The summary frame of `chunk` (checked against its header, not yet against its records).
    case summary(TraceChunkSummary, chunk: TraceChunkInfo)
    /// The index (checked against the chunks by whoever saw them).
    case index([TraceChunkInfo])
    /// The trailer: the end of the trace.
    case trailer(TraceTrailer)
    /// A frame this version does not know, skipped.
    case skipped
    /// The end of the file.
    case end
}

/// One step of a walk: what was found, at which offset.
struct WalkStep: Sendable {
    var event: WalkEvent
    var offset: UInt64
}
