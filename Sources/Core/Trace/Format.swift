public import RelayProtocol

/// Constants of the RelayTrace file format, version 1 (`docs/TRACE_FORMAT.md` is the byte-level spec).
public enum TraceFormat {
    /// The format version this build writes and the newest it reads.
    public static let version: UInt16 = 1
    /// The zstd skippable-frame magic every RelayTrace metadata frame uses (file header, chunk header,
    /// index, trailer); the 4-byte tag at the start of the frame's content says which.
    public static let skippableMagic: UInt32 = 0x184D_2A50
    /// The first skippable magic (zstd reserves `0x184D2A50...0x184D2A5F`).
    public static let skippableMagicLow: UInt32 = 0x184D_2A50
    /// The last skippable magic.
    public static let skippableMagicHigh: UInt32 = 0x184D_2A5F
    /// The magic of a zstd data frame.
    public static let zstdMagic: UInt32 = 0xFD2F_B528

    /// Bytes of a record's fixed header (kind, flags, channel, payload length, time, generation).
    public static let recordHeaderSize = 24
    /// The largest record payload: 32 MiB (the relay's maximum message size).
    public static let maxRecordPayload = 32 << 20
    /// The largest header record payload (JSON) a reader accepts: 1 MiB.
    public static let maxHeaderPayload = 1 << 20
    /// The default bound on a chunk's uncompressed size a reader accepts before allocating: 64 MiB
    /// (a writer's chunks are at most `chunkTargetBytes` + one 32 MiB record).
    public static let defaultMaxChunkSize = 64 << 20
    /// The largest index frame a reader accepts: 64 MiB.
    public static let maxIndexSize = 64 << 20
    /// Bytes of a chunk-header frame (8 frame bytes + 52 content bytes).
    public static let chunkHeaderFrameSize = 60
    /// Bytes of the trailer frame (8 frame bytes + 52 content bytes).
    public static let trailerFrameSize = 60
    /// The largest chunk summary frame a reader accepts: 1 MiB.
    public static let maxSummarySize = 1 << 20

    static let tagHeader: UInt32 = tag("RTHD")
    static let tagChunk: UInt32 = tag("RTCH")
    static let tagIndex: UInt32 = tag("RTIX")
    static let tagTrailer: UInt32 = tag("RTTR")
    static let tagSummary: UInt32 = tag("RTCS")

    static func tag(_ s: StaticString) -> UInt32 {
        s.withUTF8Buffer { b in
            UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
        }
    }
}

/// One chunk of a trace: an independent zstd frame of records, as the index (or a scan) describes it.
public struct TraceChunkInfo: Sendable, Hashable {
    /// The chunk's sequence number (0 for the first chunk).
    public var sequence: UInt32
    /// The byte offset of the chunk-header frame in the file (the zstd frame follows it at once).
    public var offset: UInt64
    /// The size of the zstd frame, in bytes.
    public var compressedSize: UInt32
    /// The size of the records it holds once decompressed, in bytes.
    public var uncompressedSize: UInt32
    /// The number (0-based, over the whole trace) of its first record.
    public var firstRecord: UInt64
    /// How many records it holds.
    public var recordCount: UInt32
    /// The smallest record time in it.
    public var minTime: Moment
    /// The largest record time in it.
    public var maxTime: Moment
    /// The transport generations its records mention, ascending (only known once it has been decoded or
    /// read from the index).
    public var generations: [UInt64]
    /// CRC-32C of the zstd frame's bytes.
    public var frameCRC: UInt32 = 0

    /// The offset of the zstd frame (just after the chunk header).
    public var frameOffset: UInt64 { offset + UInt64(TraceFormat.chunkHeaderFrameSize) }
    /// The offset just past the chunk.
    public var endOffset: UInt64 { frameOffset + UInt64(compressedSize) }
    /// The numbers of the records it holds.
    public var records: Range<UInt64> { firstRecord..<(firstRecord + UInt64(recordCount)) }

    /// Creates a chunk description.
    public init(
        sequence: UInt32, offset: UInt64, compressedSize: UInt32, uncompressedSize: UInt32, firstRecord: UInt64,
        recordCount: UInt32, minTime: Moment, maxTime: Moment, generations: [UInt64]
    ) {
        self.sequence = sequence
        self.offset = offset
        self.compressedSize = compressedSize
        self.uncompressedSize = uncompressedSize
        self.firstRecord = firstRecord
        self.recordCount = recordCount
        self.minTime = minTime
        self.maxTime = maxTime
        self.generations = generations
    }
}

/// What the trailer says: the file is complete, and where its index is.
public struct TraceTrailer: Sendable, Hashable {
    /// Flag bit 0: the writer stopped early (write error) before closing normally.
    public static let flagWriterStopped: UInt32 = 1
    /// Flag bit 1: every chunk of the file is followed by its summary frame (`RTCS`, §3.7), so a chunk
    /// without one is damage.
    public static let flagChunkSummaries: UInt32 = 2

    /// Flag bits.
    public var flags: UInt32
    /// The offset of the index frame.
    public var indexOffset: UInt64
    /// The size of the whole index frame (8 frame bytes included).
    public var indexFrameSize: UInt32
    /// Records in the file (chunks only; the header record is not counted).
    public var recordCount: UInt64
    /// Records the writer dropped (queue overflow, oversized, after a stop).
    public var droppedCount: UInt64
    /// Chunks in the file.
    public var chunkCount: UInt32
    /// The largest record time.
    public var maxTime: Moment
}

/// Encoding and decoding of the frames of format version 1.
enum FrameCodec {
    // MARK: records

    /// Appends the encoding of `r` to `out` (24-byte header + payload).
    @inline(__always)
    static func appendRecord(_ r: TraceRecord, to out: inout [UInt8]) {
        var flags: UInt8 = 0
        if r.generation != nil { flags |= 1 }
        if let d = r.direction {
            flags |= 2
            if d == .outbound { flags |= 4 }
        }
        out.appendLE(r.kind.rawValue)
        out.append(flags)
        out.append(r.channel.rawValue)
        out.appendLE(UInt32(truncatingIfNeeded: r.payload.count))
        out.appendLE(r.time.nanoseconds)
        out.appendLE(r.generation ?? 0)
        out.append(contentsOf: r.payload)
    }

    /// The fixed fields of a record, as stored.
    struct RecordHeader {
        var kind: UInt16
        var flags: UInt8
        var channel: UInt8
        var time: Int64
        var generation: UInt64
        var payload: Range<Int>
    }

    /// Checks the record at `offset` of `bytes` (header fits, reserved flags clear, payload within the
    /// limit and the bytes) and advances `offset` past it, without copying anything. `where` names the
    /// place for error messages; `fileOffset` is the offset reported in errors.
    @inline(__always)
    static func checkRecord(
        _ bytes: UnsafeRawBufferPointer, offset: inout Int, fileOffset: UInt64, where place: @autoclosure () -> String
    ) throws(TraceError) -> RecordHeader {
        let remaining = bytes.count - offset
        guard remaining >= TraceFormat.recordHeaderSize else {
            throw TraceError(
                .corrupt, offset: fileOffset,
                "record header at \(place()) needs \(TraceFormat.recordHeaderSize) bytes, only \(remaining) remain; the chunk is damaged")
        }
        let kind = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
        let flags = bytes[offset + 2]
        let channel = bytes[offset + 3]
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        let time = Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: Int64.self))
        let generation = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
        guard flags & ~7 == 0 else {
            throw TraceError(
                .corrupt, offset: fileOffset,
                "record at \(place()) has reserved flag bits set (0x\(String(flags, radix: 16))); the chunk is damaged or from a newer format")
        }
        guard length <= TraceFormat.maxRecordPayload else {
            throw TraceError(
                .limitExceeded, offset: fileOffset,
                "record at \(place()) declares a \(length)-byte payload, over the \(TraceFormat.maxRecordPayload)-byte limit")
        }
        let start = offset + TraceFormat.recordHeaderSize
        guard length <= bytes.count - start else {
            throw TraceError(
                .corrupt, offset: fileOffset,
                "record at \(place()) declares a \(length)-byte payload but only \(bytes.count - start) bytes remain in the chunk")
        }
        offset = start + length
        return RecordHeader(kind: kind, flags: flags, channel: channel, time: time, generation: generation, payload: start..<(start + length))
    }

    /// Decodes the record at `offset` of `bytes` (checked as ``checkRecord(_:offset:fileOffset:where:)``)
    /// and advances `offset` past it.
    @inline(__always)
    static func decodeRecord(
        _ bytes: UnsafeRawBufferPointer, offset: inout Int, fileOffset: UInt64, where place: @autoclosure () -> String
    ) throws(TraceError) -> TraceRecord {
        let h = try checkRecord(bytes, offset: &offset, fileOffset: fileOffset, where: place())
        return record(h, in: bytes)
    }

    /// The record whose checked header is `h`, its payload copied out of `bytes`.
    @inline(__always)
    static func record(_ h: RecordHeader, in bytes: UnsafeRawBufferPointer) -> TraceRecord {
        TraceRecord(
            kind: RecordKind(rawValue: h.kind), time: Moment(nanoseconds: h.time), channel: TraceChannel(rawValue: h.channel),
            generation: h.flags & 1 != 0 ? h.generation : nil,
            direction: h.flags & 2 != 0 ? (h.flags & 4 != 0 ? .outbound : .inbound) : nil,
            payload: [UInt8](UnsafeRawBufferPointer(rebasing: bytes[h.payload])))
    }

    // MARK: frames

    static func beginFrame(_ out: inout [UInt8], tag: UInt32, contentSize: Int) {
        out.appendLE(TraceFormat.skippableMagic)
        out.appendLE(UInt32(contentSize))
        out.appendLE(tag)
    }

    /// The file-header frame holding `header` (a record of kind `.header`).
    static func fileHeaderFrame(_ header: TraceRecord) -> [UInt8] {
        let content = 4 + 4 + TraceFormat.recordHeaderSize + header.payload.count + 4
        var out = [UInt8]()
        out.reserveCapacity(8 + content)
        beginFrame(&out, tag: TraceFormat.tagHeader, contentSize: content)
        out.appendLE(TraceFormat.version)
        out.appendLE(UInt16(0))
        appendRecord(header, to: &out)
        out.appendLE(CRC32C.checksum(out, 8..<out.count))
        return out
    }

    /// Appends the chunk-header frame of `c` to `out`.
    static func appendChunkHeader(_ c: TraceChunkInfo, to out: inout [UInt8]) {
        let start = out.count
        beginFrame(&out, tag: TraceFormat.tagChunk, contentSize: 52)
        out.appendLE(c.sequence)
        out.appendLE(c.firstRecord)
        out.appendLE(c.recordCount)
        out.appendLE(c.uncompressedSize)
        out.appendLE(c.compressedSize)
        out.appendLE(c.frameCRC)
        out.appendLE(c.minTime.nanoseconds)
        out.appendLE(c.maxTime.nanoseconds)
        out.appendLE(CRC32C.checksum(out, (start + 8)..<out.count))
    }

    /// Decodes a 60-byte chunk-header frame found at `offset`. Nil when it is not one (wrong magic, size
    /// or tag); throws when it is one but its CRC fails.
    static func decodeChunkHeader(_ b: [UInt8], offset: UInt64) throws(TraceError) -> TraceChunkInfo? {
        guard b.count == TraceFormat.chunkHeaderFrameSize, b.u32(at: 0) == TraceFormat.skippableMagic,
            b.u32(at: 4) == 52, b.u32(at: 8) == TraceFormat.tagChunk
        else { return nil }
        guard let crc = b.u32(at: 56), crc == CRC32C.checksum(b, 8..<56) else {
            throw TraceError(.checksumMismatch, offset: offset, "chunk header CRC-32C mismatch; the chunk header is damaged")
        }
        var c = TraceChunkInfo(
            sequence: b.u32(at: 12) ?? 0, offset: offset, compressedSize: b.u32(at: 32) ?? 0,
            uncompressedSize: b.u32(at: 28) ?? 0, firstRecord: b.u64(at: 16) ?? 0, recordCount: b.u32(at: 24) ?? 0,
            minTime: Moment(nanoseconds: b.i64(at: 40) ?? 0), maxTime: Moment(nanoseconds: b.i64(at: 48) ?? 0),
            generations: [])
        c.frameCRC = b.u32(at: 36) ?? 0
        return c
    }

    /// The index frame for `chunks`.
    static func indexFrame(_ chunks: [TraceChunkInfo]) -> [UInt8] {
        var content = 4 + 4 + 4
        for c in chunks { content += 56 + 8 * c.generations.count }
        var out = [UInt8]()
        out.reserveCapacity(8 + content)
        beginFrame(&out, tag: TraceFormat.tagIndex, contentSize: content)
        out.appendLE(UInt32(chunks.count))
        for c in chunks {
            out.appendLE(c.offset)
            out.appendLE(c.compressedSize)
            out.appendLE(c.uncompressedSize)
            out.appendLE(c.firstRecord)
            out.appendLE(c.recordCount)
            out.appendLE(UInt32(c.generations.count))
            out.appendLE(c.minTime.nanoseconds)
            out.appendLE(c.maxTime.nanoseconds)
            out.appendLE(c.frameCRC)
            out.appendLE(c.sequence)
            for g in c.generations { out.appendLE(g) }
        }
        out.appendLE(CRC32C.checksum(out, 8..<out.count))
        return out
    }

    /// Decodes a whole index frame (`b` starts at its magic) found at `offset`.
    static func decodeIndex(_ b: [UInt8], offset: UInt64) throws(TraceError) -> [TraceChunkInfo] {
        guard b.count >= 20, b.u32(at: 0) == TraceFormat.skippableMagic, b.u32(at: 8) == TraceFormat.tagIndex,
            let size = b.u32(at: 4), Int(size) == b.count - 8
        else { throw TraceError(.corrupt, offset: offset, "expected the index frame (tag RTIX) here; the index is damaged") }
        guard let crc = b.u32(at: b.count - 4), crc == CRC32C.checksum(b, 8..<(b.count - 4)) else {
            throw TraceError(.checksumMismatch, offset: offset, "index CRC-32C mismatch; the index is damaged (read the file with a scan instead)")
        }
        let count = Int(b.u32(at: 12) ?? 0)
        var chunks = [TraceChunkInfo]()
        chunks.reserveCapacity(min(count, b.count / 56))
        var p = 16
        let end = b.count - 4
        for i in 0..<count {
            guard p + 56 <= end, let off = b.u64(at: p), let cs = b.u32(at: p + 8), let us = b.u32(at: p + 12),
                let first = b.u64(at: p + 16), let rc = b.u32(at: p + 24), let gc = b.u32(at: p + 28),
                let minT = b.i64(at: p + 32), let maxT = b.i64(at: p + 40), let crc = b.u32(at: p + 48),
                let seq = b.u32(at: p + 52)
            else { throw TraceError(.corrupt, offset: offset, "index entry \(i) runs past the end of the index frame") }
            guard seq == UInt32(truncatingIfNeeded: i) else {
                throw TraceError(.corrupt, offset: offset, "index entry \(i) names chunk \(seq)")
            }
            p += 56
            guard Int(gc) <= (end - p) / 8 else {
                throw TraceError(.corrupt, offset: offset, "index entry \(i) lists \(gc) generations, more than the frame holds")
            }
            var gens = [UInt64]()
            gens.reserveCapacity(Int(gc))
            for _ in 0..<Int(gc) {
                gens.append(b.u64(at: p) ?? 0)
                p += 8
            }
            var info = TraceChunkInfo(
                sequence: seq, offset: off, compressedSize: cs, uncompressedSize: us, firstRecord: first,
                recordCount: rc, minTime: Moment(nanoseconds: minT), maxTime: Moment(nanoseconds: maxT),
                generations: gens)
            info.frameCRC = crc
            chunks.append(info)
        }
        guard p == end else { throw TraceError(.corrupt, offset: offset, "index frame has \(end - p) bytes after its last entry") }
        return chunks
    }

    /// The trailer frame.
    static func trailerFrame(_ t: TraceTrailer) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(TraceFormat.trailerFrameSize)
        beginFrame(&out, tag: TraceFormat.tagTrailer, contentSize: 52)
        out.appendLE(t.flags)
        out.appendLE(t.indexOffset)
        out.appendLE(t.recordCount)
        out.appendLE(t.droppedCount)
        out.appendLE(t.chunkCount)
        out.appendLE(t.indexFrameSize)
        out.appendLE(t.maxTime.nanoseconds)
        out.appendLE(CRC32C.checksum(out, 8..<out.count))
        return out
    }

    /// Decodes a 60-byte trailer frame found at `offset`. Nil when it is not one (magic, size, tag);
    /// throws when its CRC fails.
    static func decodeTrailer(_ b: [UInt8], offset: UInt64) throws(TraceError) -> TraceTrailer? {
        guard b.count == TraceFormat.trailerFrameSize, b.u32(at: 0) == TraceFormat.skippableMagic, b.u32(at: 4) == 52,
            b.u32(at: 8) == TraceFormat.tagTrailer
        else { return nil }
        guard let crc = b.u32(at: 56), crc == CRC32C.checksum(b, 8..<56) else {
            throw TraceError(.checksumMismatch, offset: offset, "trailer CRC-32C mismatch; the trailer is damaged")
        }
        return TraceTrailer(
            flags: b.u32(at: 12) ?? 0, indexOffset: b.u64(at: 16) ?? 0, indexFrameSize: b.u32(at: 44) ?? 0,
            recordCount: b.u64(at: 24) ?? 0, droppedCount: b.u64(at: 32) ?? 0, chunkCount: b.u32(at: 40) ?? 0,
            maxTime: Moment(nanoseconds: b.i64(at: 48) ?? 0))
    }
}
