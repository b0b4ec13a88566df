import Foundation
import RelayProtocol
import Testing
@testable import Trace

/// What coverage-guided fuzzing found in the reader (tools/fuzz.sh; the inputs are in fuzz/regressions),
/// each as the damage it is: a well-checksummed file whose numbers do not add up is damaged, never a crash.
@Suite struct FuzzRegressionTests {
    /// The base trace of the fuzz targets with its trailer replaced (CRC recomputed).
    func withTrailer(_ change: (inout TraceTrailer) -> Void) -> [UInt8] {
        let base = TraceFuzzing.base
        var t = base.trailer
        change(&t)
        return Array(base.bytes.dropLast(TraceFormat.trailerFrameSize)) + FrameCodec.trailerFrame(t)
    }

    /// trace-trailer: an index offset near 2^64 overflowed `indexOffset + indexFrameSize` when the reader
    /// opened the file (every command, `info` to `replay`, trapped).
    @Test(arguments: [UInt64.max, UInt64.max - 100, 1 << 63])
    func aTrailerWhoseIndexOffsetOverflowsIsAnIncompleteFile(offset: UInt64) throws {
        let file = withTrailer { $0.indexOffset = offset }
        let r = try TraceReader(bytes: file)
        #expect(!r.isComplete)
        #expect(r.trailerProblem?.code == .corrupt)
        let all = r.readAll()
        #expect(all.entries.count == 12, "the records are still read by walking the chunks")
    }

    /// An index whose last entry numbers its records from near 2^64 overflowed the record total.
    @Test func anIndexNumberingRecordsPast2To64IsDamage() throws {
        let base = TraceFuzzing.base
        var chunks = try FrameCodec.decodeIndex(Array(base.bytes[base.indexOffset..<(base.bytes.count - TraceFormat.trailerFrameSize)]), offset: UInt64(base.indexOffset))
        chunks[chunks.count - 1].firstRecord = UInt64.max
        let index = FrameCodec.indexFrame(chunks)
        var t = base.trailer
        t.indexFrameSize = UInt32(index.count)
        let file = Array(base.bytes[0..<base.indexOffset]) + index + FrameCodec.trailerFrame(t)
        let r = try TraceReader(bytes: file)
        #expect(!r.isComplete)
        #expect(r.trailerProblem != nil)
    }

    /// A chunk header numbering its records past 2^64 (CRC right) overflowed the next record number in
    /// salvage mode, which does not check the numbering: now it is a damaged chunk, skipped in salvage.
    @Test func aChunkNumberingRecordsPast2To64IsADamagedChunk() throws {
        let base = TraceFuzzing.base
        let head = Array(base.bytes[0..<base.dataOffset])
        let content = [UInt8](repeating: 0, count: 0)
        var info = TraceChunkInfo(sequence: 0, offset: UInt64(head.count), compressedSize: 0, uncompressedSize: 0, firstRecord: UInt64.max,
                                  recordCount: 1, minTime: .zero, maxTime: .zero, generations: [])
        let compressor = try ZstdCompressor(level: 1)
        var out = [UInt8](repeating: 0, count: ZstdCompressor.bound(content.count))
        let n = try compressor.compress(content, into: &out, at: 0)
        info.compressedSize = UInt32(n)
        info.frameCRC = CRC32C.checksum(Array(out[0..<n]))
        var file = head
        FrameCodec.appendChunkHeader(info, to: &file)
        file += out[0..<n]
        file += base.bytes[base.dataOffset..<base.indexOffset]  // the good chunks follow
        for salvage in [false, true] {
            let r = try TraceReader(bytes: file, options: .init(salvage: salvage))
            let all = r.readAll()
            if salvage {
                #expect(r.problems.first?.code == .corrupt, "\(r.problems)")
            } else {
                #expect(all.error?.code == .corrupt)
                #expect(all.entries.isEmpty)
            }
        }
    }
}
