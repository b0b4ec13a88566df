import RelayProtocol

/// Entry points for coverage-guided fuzzing of the reader (`tools/fuzz.sh`) and for the regression tests
/// of what it found. Each takes arbitrary bytes, builds the rest of a file around them with every
/// checksum right (so mutations get past the CRC-32C checks to the structure checks behind them), and
/// reads the result the way the commands do: open, every record, salvage, seeks. Errors are the expected
/// outcome; a crash, a hang or an unbounded allocation is a bug. Invariants of the reader's API are
/// checked with `precondition` (a broken one is a crash the fuzzer reports).
public enum TraceFuzzing {
    /// The bytes as a whole file.
    public static func readFile(_ bytes: [UInt8]) {
        exercise(bytes)
    }

    /// The bytes as the header record's payload (the header JSON), in a header frame with its CRC,
    /// followed by the chunks of a small valid trace (no index, so the file reads as incomplete).
    public static func readHeader(_ payload: [UInt8]) {
        let frame = FrameCodec.fileHeaderFrame(TraceRecord(kind: .header, time: .zero, payload: payload))
        exercise(frame + Array(base.bytes[base.dataOffset..<base.indexOffset]))
    }

    /// The bytes as one chunk: a 4-byte record count, an 8-byte first record number, 8-byte minimum and
    /// maximum times, then the decompressed content (records). The content is compressed and checksummed
    /// behind a valid header, and the file is read twice: without an index (incomplete) and with an
    /// index and trailer built from the chunk header.
    public static func readChunk(_ bytes: [UInt8]) {
        var b = bytes[...]
        func take(_ n: Int) -> [UInt8] {
            let out = Array(b.prefix(n)) + [UInt8](repeating: 0, count: max(0, n - b.count))
            b = b.dropFirst(n)
            return out
        }
        let count = take(4).u32(at: 0) ?? 0
        let first = take(8).u64(at: 0) ?? 0
        let minTime = take(8).i64(at: 0) ?? 0
        let maxTime = take(8).i64(at: 0) ?? 0
        let content = Array(b)
        guard let compressor else { return }
        var out = [UInt8](repeating: 0, count: ZstdCompressor.bound(content.count))
        guard let n = try? compressor.compress(content, into: &out, at: 0) else { return }
        let compressed = Array(out[0..<n])
        let head = Array(base.bytes[0..<base.dataOffset])
        var info = TraceChunkInfo(
            sequence: 0, offset: UInt64(head.count), compressedSize: UInt32(n), uncompressedSize: UInt32(content.count),
            firstRecord: first, recordCount: count, minTime: Moment(nanoseconds: minTime), maxTime: Moment(nanoseconds: maxTime),
            generations: [])
        info.frameCRC = CRC32C.checksum(compressed)
        var file = head
        FrameCodec.appendChunkHeader(info, to: &file)
        file += compressed
        exercise(file)
        let index = FrameCodec.indexFrame([info])
        let trailer = TraceTrailer(
            flags: 0, indexOffset: UInt64(file.count), indexFrameSize: UInt32(index.count), recordCount: first &+ UInt64(count),
            droppedCount: 0, chunkCount: 1, maxTime: Moment(nanoseconds: maxTime))
        exercise(file + index + FrameCodec.trailerFrame(trailer))
    }

    /// The bytes as the content of the index frame (after its tag, before its CRC) of a small valid
    /// trace, with the trailer pointing at it (both CRCs recomputed).
    public static func readIndex(_ content: [UInt8]) {
        var index = [UInt8]()
        FrameCodec.beginFrame(&index, tag: TraceFormat.tagIndex, contentSize: 4 + content.count + 4)
        index += content
        index.appendLE(CRC32C.checksum(index, 8..<index.count))
        var t = base.trailer
        t.indexFrameSize = UInt32(truncatingIfNeeded: index.count)
        exercise(Array(base.bytes[0..<base.indexOffset]) + index + FrameCodec.trailerFrame(t))
    }

    /// The bytes as the trailer's 44 bytes of fields (flags through largest time) of a small valid trace,
    /// with the trailer's CRC recomputed.
    public static func readTrailer(_ fields: [UInt8]) {
        var frame = [UInt8]()
        FrameCodec.beginFrame(&frame, tag: TraceFormat.tagTrailer, contentSize: 52)
        frame += fields.prefix(44) + [UInt8](repeating: 0, count: max(0, 44 - fields.count))
        frame.appendLE(CRC32C.checksum(frame, 8..<frame.count))
        exercise(Array(base.bytes[0..<(base.bytes.count - TraceFormat.trailerFrameSize)]) + frame)
    }

    /// One compressor for every input (creating a zstd context per input would dominate the run). The
    /// fuzz driver calls the targets from one thread.
    nonisolated(unsafe) private static let compressor = try? ZstdCompressor(level: 1)

    /// Reads `file` as the commands do. Chunks are limited to 1 MiB decompressed (the same checks as
    /// the default 64 MiB, with bounded memory per input).
    static func exercise(_ file: [UInt8]) {
        for salvage in [false, true] {
            guard let r = try? TraceReader(bytes: file, options: .init(maxChunkSize: 1 << 20, salvage: salvage)) else { continue }
            var n: UInt64 = 0
            while n < 100_000, let e = try? r.next() {
                if !salvage { precondition(e.number == n, "records are numbered from 0 without gaps") }
                n += 1
            }
            guard !salvage else { continue }
            if r.isComplete, let index = r.index {
                precondition(r.trailer?.chunkCount == UInt32(index.count), "a complete file's trailer counts its index")
                for c in index.prefix(3) { _ = try? r.records(ofChunk: c) }
                if let last = index.last {
                    let total = last.firstRecord + UInt64(last.recordCount)
                    for target in [0, total / 2, total &- 1, total] {
                        if (try? r.seek(toRecord: target)) != nil, let e = try? r.next() {
                            precondition(e.number == target, "seeking to record \(target) reads it next")
                        }
                    }
                    _ = try? r.seek(toTime: last.maxTime)
                    _ = try? r.next()
                }
            }
            _ = try? r.chunks()
        }
    }

    /// A small valid trace (three chunks of mixed records) and where its parts are.
    static let base: (bytes: [UInt8], dataOffset: Int, indexOffset: Int, trailer: TraceTrailer) = {
        let sink = MemorySink()
        var o = TraceWriterOptions()
        o.wallClockFlush = false
        o.redaction = .raw
        let header = TraceHeader(seed: 1, wallClockStart: "2026-01-15T12:00:00.000Z", simulated: true, client: ["deviceName": "fuzz"])
        guard let w = try? TraceWriter(sink: sink, header: header, options: o) else { preconditionFailure("the base trace writes") }
        for i in 0..<12 {
            let t = Moment.seconds(Double(i))
            switch i % 4 {
            case 0: w.append(.frame(.text(#"{"type":"heartbeat","payload":{}}"#), time: t, generation: UInt64(i / 4 + 1), direction: .outbound))
            case 1: w.append(.frame(.binary(Array("PTC1".utf8) + [0, 2] + Array("t1hi".utf8)), time: t, generation: UInt64(i / 4 + 1), direction: .inbound))
            case 2: w.append(TraceRecord(kind: .marker, time: t, payload: Array("m".utf8)))
            default:
                w.append(TraceRecord(kind: .transportClosed, time: t, generation: UInt64(i / 4 + 1), payload: Array(#"{"code":1001,"reason":""}"#.utf8)))
                w.flush()
            }
        }
        guard (try? w.close()) != nil else { preconditionFailure("the base trace closes") }
        let bytes = sink.bytes
        guard let r = try? TraceReader(bytes: bytes), let t = r.trailer else { preconditionFailure("the base trace reads back complete") }
        return (bytes, Int(r.dataOffset), Int(t.indexOffset), t)
    }()
}

/// A sink that keeps the bytes in memory (for the fuzzing base trace).
private final class MemorySink: TraceSink, @unchecked Sendable {
    var bytes: [UInt8] = []
    func write(_ b: UnsafeRawBufferPointer) throws(TraceError) { bytes += b }
    func sync() throws(TraceError) {}
    func truncate(to size: UInt64) throws(TraceError) { bytes.removeLast(max(0, bytes.count - Int(size))) }
    func close() throws(TraceError) {}
}
