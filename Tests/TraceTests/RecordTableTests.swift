import RelayProtocol
import Testing
@testable import Trace

@Suite struct RecordTableTests {
    /// 2,000 random records in chunks of about 4 KiB (a few dozen chunks).
    static func manyChunks() throws -> (bytes: [UInt8], records: [TraceRecord]) {
        let records = randomRecords(seed: 11, count: 2_000, maxPayload: 200)
        return (try writeTrace(records, options: testOptions(chunk: 4096)), records)
    }

    @Test func randomAccessInAnyOrderGivesTheRecordsOfASequentialRead() throws {
        let (bytes, records) = try Self.manyChunks()
        let reader = try TraceReader(bytes: bytes)
        let table = try TraceRecordTable(reader: reader)
        #expect(table.chunks.count > 20)
        #expect(table.count == records.count)
        // In order, backwards, and in a shuffled order (each jump decodes another chunk).
        #expect(try (0..<table.count).map { i throws(TraceError) in try table.record(at: i) } == records)
        #expect(try (0..<table.count).reversed().map { i throws(TraceError) in try table.record(at: i) } == records.reversed())
        var rng = SeededRandom(seed: 3)
        for _ in 0..<500 {
            let i = Int(rng.next(upperBound: UInt64(records.count)))
            #expect(try table.record(at: i) == records[i])
        }
        // Stepping back and forth across one chunk boundary decodes the two chunks once each.
        let boundary = Int(table.chunks[5].firstRecord)
        let before = reader.statistics.chunksDecoded
        for _ in 0..<10 {
            _ = try table.record(at: boundary - 1)
            _ = try table.record(at: boundary)
        }
        #expect(reader.statistics.chunksDecoded - before <= 2)
    }

    @Test func outsideTheTableIsAnInvalidArgument() throws {
        let (bytes, records) = try Self.manyChunks()
        let table = try TraceRecordTable(reader: TraceReader(bytes: bytes))
        for bad in [-1, records.count, records.count + 100] {
            #expect(throws: TraceError.self) { try table.record(at: bad) }
            #expect(table.chunkIndex(ofRecord: bad) == nil)
            do { _ = try table.record(at: bad) } catch { #expect(error.code == .invalidArgument) }
        }
    }

    @Test func aDamagedChunkThrowsForItsRecordsOnlyWithItsOffset() throws {
        let (full, records) = try Self.manyChunks()
        let index = try #require(try TraceReader(bytes: full).index)
        let victim = index[7]
        var damaged = full
        damaged[Int(victim.frameOffset) + Int(victim.compressedSize) / 2] ^= 0x10
        let table = try TraceRecordTable(reader: TraceReader(bytes: damaged))
        #expect(table.count == records.count, "the index of a complete trace still counts every record")
        for i in 0..<records.count {
            if victim.records.contains(UInt64(i)) {
                do {
                    _ = try table.record(at: i)
                    Issue.record("record \(i) lies in the damaged chunk and must not read back")
                } catch {
                    #expect(error.code == .checksumMismatch)
                    #expect(error.offset == victim.offset)
                }
            } else {
                #expect(try table.record(at: i) == records[i], "record \(i)")
            }
        }
    }

    @Test func underEverySingleBitFlipRandomAccessGivesTheTrueRecordOrAnError() throws {
        let (full, records) = try FormatTests.smallTrace()
        let index = try #require(try TraceReader(bytes: full).index)
        // The chunks' headers and zstd frames (not their summary frames, which random access does not read).
        let chunkBytes: Set<Int> = index.reduce(into: []) { $0.formUnion(Int($1.offset)..<Int($1.endOffset)) }
        var wrong: [Int] = []
        var unnoticed: [Int] = []
        for bit in 0..<(full.count * 8) {
            var damaged = full
            damaged[bit / 8] ^= 1 << (bit % 8)
            guard let reader = try? TraceReader(bytes: damaged), let table = try? TraceRecordTable(reader: reader) else { continue }
            var served = 0
            // Backwards, then forwards: both cached chunks and both directions.
            for i in Array((0..<table.count).reversed()) + Array(0..<table.count) {
                guard let r = try? table.record(at: i) else { continue }
                served += 1
                if i >= records.count || r != records[i] { wrong.append(bit) }
            }
            // A flip in the chunks must cost some record; one in the index or trailer only makes the
            // table walk the chunk headers instead.
            if served == 2 * records.count && chunkBytes.contains(bit / 8) { unnoticed.append(bit) }
        }
        #expect(wrong.isEmpty, "a flipped bit made random access return a wrong record at bits \(wrong.prefix(20))")
        #expect(unnoticed.isEmpty, "flips in the chunks that every record read survived: bits \(unnoticed.prefix(20))")
    }

    @Test func anIncompleteTraceListsTheChunksThatCanBeWalked() throws {
        let (full, records) = try Self.manyChunks()
        let index = try #require(try TraceReader(bytes: full).index)
        let cut = Array(full[..<Int(index[10].endOffset + 20)])  // chunk 10 whole, chunk 11 cut short
        let reader = try TraceReader(bytes: cut)
        #expect(!reader.isComplete)
        let table = try TraceRecordTable(reader: reader)
        #expect(table.chunks.count == 11)
        #expect(table.count == Int(index[10].firstRecord) + Int(index[10].recordCount))
        #expect(try (0..<table.count).map { i throws(TraceError) in try table.record(at: i) } == Array(records.prefix(table.count)))
    }
}

/// Damage that keeps every CRC valid: a rewritten index or chunk header (as a buggy or hostile writer
/// would leave it). Random access must refuse it as the sequential read does, never trap.
@Suite struct RecordTableTamperingTests {
    /// The file with its index frame replaced by one for `chunks` (same size: generation counts kept).
    static func withIndex(_ bytes: [UInt8], _ chunks: [TraceChunkInfo]) throws -> [UInt8] {
        let trailer = try #require(try TraceReader(bytes: bytes).trailer)
        let frame = FrameCodec.indexFrame(chunks)
        try #require(frame.count == Int(trailer.indexFrameSize))
        var out = bytes
        out.replaceSubrange(Int(trailer.indexOffset)..<(Int(trailer.indexOffset) + frame.count), with: frame)
        return out
    }

    @Test(arguments: [5, -5, 1 << 40])
    func anIndexWhoseRecordNumbersDoNotFollowOnIsRefusedAtOpen(shift: Int) throws {
        let (full, records) = try RecordTableTests.manyChunks()
        var chunks = try #require(try TraceReader(bytes: full).index)
        chunks[3].firstRecord = UInt64(Int(chunks[3].firstRecord) + shift)
        let tampered = try Self.withIndex(full, chunks)
        let reader = try TraceReader(bytes: tampered)
        #expect(!reader.isComplete, "an index that does not follow on is not used")
        #expect(reader.trailerProblem?.code == .corrupt)
        #expect(reader.trailerProblem?.description.contains("index entry 3") == true)
        // The table then walks the chunk headers, which are intact: every record still reads back.
        let table = try TraceRecordTable(reader: reader)
        #expect(table.count == records.count)
        #expect(try (0..<table.count).map { i throws(TraceError) in try table.record(at: i) } == records)
        // The sequential read names the mismatch.
        let (_, error) = reader.readAll()
        #expect(error?.code == .corrupt)
    }

    @Test func anIndexThatMovesAChunkIsRefusedAtOpen() throws {
        let (full, _) = try RecordTableTests.manyChunks()
        var chunks = try #require(try TraceReader(bytes: full).index)
        chunks[6].offset = chunks[4].offset  // overlaps chunks 4 and 5
        let reader = try TraceReader(bytes: try Self.withIndex(full, chunks))
        #expect(!reader.isComplete)
        #expect(reader.trailerProblem?.description.contains("index entry 6") == true)
    }

    @Test func generationsTheIndexListsWrongFailThatChunk() throws {
        let (full, records) = try RecordTableTests.manyChunks()
        var chunks = try #require(try TraceReader(bytes: full).index)
        let victim = try #require(chunks.indices.first { !chunks[$0].generations.isEmpty && $0 > 2 })
        chunks[victim].generations = chunks[victim].generations.map { $0 + 1000 }
        let table = try TraceRecordTable(reader: TraceReader(bytes: try Self.withIndex(full, chunks)))
        let inVictim = Int(chunks[victim].firstRecord)
        #expect(try table.record(at: inVictim - 1) == records[inVictim - 1])
        do {
            _ = try table.record(at: inVictim)
            Issue.record("a chunk whose generations differ from its index entry must not read back")
        } catch {
            #expect(error.code == .corrupt)
            #expect(error.description.contains("generations"))
        }
    }

    @Test func aChunkHeaderThatDisagreesWithTheIndexFailsThatChunk() throws {
        let (full, records) = try RecordTableTests.manyChunks()
        let chunks = try #require(try TraceReader(bytes: full).index)
        let victim = chunks[5]
        // A well-formed header (valid CRC) that claims one record fewer.
        var claimed = victim
        claimed.recordCount -= 1
        var header: [UInt8] = []
        FrameCodec.appendChunkHeader(claimed, to: &header)
        var tampered = full
        tampered.replaceSubrange(Int(victim.offset)..<(Int(victim.offset) + header.count), with: header)
        let table = try TraceRecordTable(reader: TraceReader(bytes: tampered))
        #expect(try table.record(at: Int(victim.firstRecord) - 1) == records[Int(victim.firstRecord) - 1])
        do {
            _ = try table.record(at: Int(victim.firstRecord))
            Issue.record("a chunk header that disagrees with the index must fail the chunk")
        } catch {
            #expect(error.code == .corrupt)
            #expect(error.offset == victim.offset)
        }
        // A flipped bit in the header: its own CRC fails.
        var flipped = full
        flipped[Int(victim.offset) + 20] ^= 0x01
        let t2 = try TraceRecordTable(reader: TraceReader(bytes: flipped))
        do {
            _ = try t2.record(at: Int(victim.firstRecord))
            Issue.record("a damaged chunk header must fail the chunk")
        } catch {
            #expect(error.code == .checksumMismatch)
        }
    }
}
