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
