import CZstd
import Foundation
import RelayProtocol
import Synchronization
import Testing
@testable import Trace
import Sync

@Suite struct FormatTests {
    @Test func czstdLinksAndRoundTrips() throws {
        let input = Array("hello zstd, hello zstd, hello zstd".utf8)
        var compressed = [UInt8](repeating: 0, count: ZSTD_compressBound(input.count))
        let n = ZSTD_compress(&compressed, compressed.count, input, input.count, 3)
        #expect(ZSTD_isError(n) == 0)
        var output = [UInt8](repeating: 0, count: input.count)
        let m = ZSTD_decompress(&output, output.count, compressed, n)
        #expect(m == input.count)
        #expect(output == input)
        #expect(zstdLibraryVersion.hasPrefix("1."))
    }

    @Test func crc32cMatchesTheCastagnoliCheckValue() {
        // The standard check value of CRC-32C (RFC 3720 appendix B.4) and an unaligned long input.
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        let long = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        var bitwise: UInt32 = 0xFFFF_FFFF
        for b in long[3...] {
            bitwise ^= UInt32(b)
            for _ in 0..<8 { bitwise = bitwise & 1 != 0 ? (bitwise >> 1) ^ 0x82F6_3B78 : bitwise >> 1 }
        }
        #expect(CRC32C.checksum(long, 3..<1000) == ~bitwise)
    }

    @Test(arguments: [1, 2, 3, 99] as [UInt64])
    func randomRecordsRoundTrip(seed: UInt64) throws {
        let records = randomRecords(seed: seed, count: 400)
        let bytes = try writeTrace(records, options: testOptions(chunk: 4096))
        let reader = try TraceReader(bytes: bytes)
        #expect(reader.isComplete)
        #expect(reader.header.seed == 42)
        #expect(reader.header.client["deviceName"]?.stringValue == "Test phone")
        let (entries, error) = reader.readAll()
        #expect(error == nil)
        #expect(entries.map(\.record) == records)
        #expect(entries.map(\.number) == Array(0..<UInt64(records.count)))
        let index = try #require(reader.index)
        #expect(index.count > 5)
        #expect(reader.trailer?.recordCount == UInt64(records.count))
        // The index says what the chunks hold.
        for c in index {
            let inChunk = records[Int(c.firstRecord)..<Int(c.firstRecord + UInt64(c.recordCount))]
            #expect(c.minTime == inChunk.map(\.time).min())
            #expect(c.maxTime == inChunk.map(\.time).max())
            #expect(c.generations == Set(inChunk.compactMap(\.generation)).sorted())
        }
    }

    @Test func chunksFlushAtCaptureTimeAndSizeBound() throws {
        // 10 records per capture second over 6 s, one per 100 ms; interval 1 s.
        var records = [TraceRecord]()
        for i in 0..<60 {
            records.append(TraceRecord(kind: .marker, time: .seconds(Double(i) * 0.1), payload: Array("m\(i)".utf8)))
        }
        let bytes = try writeTrace(records, options: testOptions(interval: .seconds(1)))
        let index = try #require(try TraceReader(bytes: bytes).index)
        #expect(index.count == 6)
        for c in index { #expect(c.maxTime - c.minTime < .seconds(1)) }
        // Size bound: 2 KiB chunks of ~500-byte records.
        let big = (0..<40).map { TraceRecord(kind: .input, time: Moment(nanoseconds: Int64($0)), payload: Array(repeating: 65, count: 500)) }
        let index2 = try #require(try TraceReader(bytes: try writeTrace(big, options: testOptions(chunk: 2048))).index)
        #expect(index2.count == 10)
        for c in index2 { #expect(c.uncompressedSize < 2048 + 524) }
    }

    @Test func headerFieldsRoundTrip() throws {
        var h = testHeader(seed: UInt64.max)
        h.extra = ["captureTool": "unit-test"]
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: h, options: testOptions(raw: false))
        try w.close()
        let r = try TraceReader(bytes: sink.bytes)
        #expect(r.header.seed == UInt64.max)
        #expect(r.header.formatVersion == 1)
        #expect(r.header.clientProtocolVersion == "1.6")
        #expect(r.header.toolVersion == TraceHeader.currentToolVersion)
        #expect(r.header.wallClockStart == "2026-01-01T00:00:00Z")
        #expect(r.header.simulated)
        #expect(r.header.redaction.policy == .hashed)
        #expect(r.header.redaction.key == Array(repeating: 7, count: 32))
        #expect(r.header.extra["captureTool"]?.stringValue == "unit-test")
        #expect(r.headerRecord.kind == .header)
        #expect(r.isComplete)
        #expect(r.readAll().entries.isEmpty)
    }

    @Test func notATraceEmptyAndNewerVersion() throws {
        #expect(throws: TraceError.self) { try TraceReader(bytes: []) }
        do {
            _ = try TraceReader(bytes: Array("{\"type\":\"not a trace\"}".utf8))
            Issue.record("expected an error")
        } catch { #expect(error.code == .notATrace) }
        // A plain zstd file is not a trace either.
        var z = [UInt8](repeating: 0, count: 100)
        let n = ZSTD_compress(&z, 100, "abc", 3, 3)
        do {
            _ = try TraceReader(bytes: Array(z[0..<n]))
            Issue.record("expected an error")
        } catch { #expect(error.code == .notATrace) }
        // Version 2 header (with a valid CRC) is refused with unsupportedVersion.
        var bytes = try writeTrace([])
        bytes[12] = 2
        bytes.storeLE(CRC32C.checksum(bytes, 8..<(Int(bytes.u32(at: 4)!) + 4)), at: Int(bytes.u32(at: 4)!) + 4)
        do {
            _ = try TraceReader(bytes: bytes)
            Issue.record("expected an error")
        } catch { #expect(error.code == .unsupportedVersion) }
    }

    /// The small trace the damage tests cut and flip: 5 chunks of a few records each.
    static func smallTrace() throws -> (bytes: [UInt8], records: [TraceRecord]) {
        var records = [TraceRecord]()
        for i in 0..<15 {
            records.append(
                .frame(.text("{\"type\":\"event\",\"eventId\":\(i)}"), time: .seconds(Double(i) * 0.4), generation: UInt64(i / 6),
                       direction: i % 2 == 0 ? .inbound : .outbound))
        }
        return (try writeTrace(records, options: testOptions(interval: .seconds(1))), records)
    }

    @Test func truncationAtEveryByteOffset() throws {
        let (full, records) = try Self.smallTrace()
        let complete = try TraceReader(bytes: full)
        let index = try #require(complete.index)
        #expect(index.count == 5)
        // A file may end after a chunk's zstd frame or after its summary frame (where the next chunk or
        // the index starts).
        let summaryEnds = index.dropFirst().map(\.offset) + [try #require(complete.trailer).indexOffset]
        let boundaries = Set([complete.dataOffset] + index.map(\.endOffset) + summaryEnds)
        for cut in 0..<full.count {
            let prefix = Array(full[0..<cut])
            guard UInt64(cut) >= complete.dataOffset else {
                do {
                    _ = try TraceReader(bytes: prefix)
                    Issue.record("cut at \(cut) inside the header was accepted")
                } catch {
                    #expect(error.code == (cut == 0 ? .notATrace : .truncated), "cut \(cut)")
                }
                continue
            }
            let reader = try TraceReader(bytes: prefix)
            #expect(!reader.isComplete, "cut \(cut)")
            let (entries, error) = reader.readAll()
            let expected = index.filter { $0.endOffset <= UInt64(cut) }.reduce(0) { $0 + Int($1.recordCount) }
            #expect(entries.map(\.record) == Array(records.prefix(expected)), "cut \(cut)")
            if boundaries.contains(UInt64(cut)) {
                #expect(error == nil, "cut \(cut) at a chunk boundary")
            } else {
                #expect(error?.code == .truncated, "cut \(cut): \(String(describing: error))")
                #expect(error?.offset != nil)
            }
        }
        let (all, error) = complete.readAll()
        #expect(error == nil)
        #expect(all.count == records.count)
    }

    @Test func everySingleBitFlipIsDetected() throws {
        let (full, records) = try Self.smallTrace()
        var undetected = [Int]()
        for bit in 0..<(full.count * 8) {
            var damaged = full
            damaged[bit / 8] ^= 1 << (bit % 8)
            let reader: TraceReader
            do {
                reader = try TraceReader(bytes: damaged)
            } catch {
                continue  // refused at the header: detected
            }
            let (entries, error) = reader.readAll()
            // Whatever came back before the error is exactly the original records.
            #expect(entries.map(\.record) == Array(records.prefix(entries.count)), "bit \(bit)")
            if error == nil { undetected.append(bit) }
        }
        #expect(undetected.isEmpty, "undetected flips at bits \(undetected.prefix(20))")
    }

    @Test func corruptChunkYieldsGoodRecordsThenOffsetAndSalvageResumes() throws {
        let (full, records) = try Self.smallTrace()
        let index = try #require(try TraceReader(bytes: full).index)
        var damaged = full
        let victim = index[2]
        damaged[Int(victim.frameOffset) + Int(victim.compressedSize) / 2] ^= 0x40
        let (entries, error) = try TraceReader(bytes: damaged).readAll()
        #expect(entries.map(\.record) == Array(records.prefix(Int(victim.firstRecord))))
        #expect(error?.code == .checksumMismatch)
        #expect(error?.offset == victim.offset)
        #expect(error?.description.contains("byte offset \(victim.offset)") == true)

        let salvage = try TraceReader(bytes: damaged, options: .init(salvage: true))
        let (rescued, noError) = salvage.readAll()
        #expect(noError == nil)
        #expect(salvage.problems.count == 1)
        #expect(salvage.problems.first?.offset == victim.offset)
        let lost = victim.records
        #expect(rescued.map(\.number) == (0..<UInt64(records.count)).filter { !lost.contains($0) })
        #expect(rescued.map(\.record) == records.enumerated().filter { !lost.contains(UInt64($0.offset)) }.map(\.element))
    }

    @Test func salvageSkipsGarbageBetweenChunks() throws {
        let (full, records) = try Self.smallTrace()
        let index = try #require(try TraceReader(bytes: full).index)
        // 100 bytes of garbage where chunk 1 ends.
        let at = Int(index[1].endOffset)
        let damaged = Array(full[..<at]) + Array(repeating: 0xAB, count: 100) + Array(full[at...])
        let (normal, error) = try TraceReader(bytes: damaged).readAll()
        #expect(normal.count == Int(index[2].firstRecord))
        #expect(error?.offset == UInt64(at))
        let s = try TraceReader(bytes: damaged, options: .init(salvage: true))
        let (all, _) = s.readAll()
        #expect(all.map(\.record) == records)
        // The garbage is the first problem; the index and trailer, whose offsets it shifted, follow.
        #expect(s.problems.first?.offset == UInt64(at))
    }

    @Test func closedTraceIsAValidZstdStream() throws {
        let records = randomRecords(seed: 7, count: 300)
        let path = tempPath("zstd.rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try TraceWriter(path: path, header: testHeader(), options: testOptions(chunk: 8192))
        for r in records { w.append(r) }
        let summary = try w.close()
        #expect(summary.records == UInt64(records.count))
        #expect(summary.chunks > 3)

        let test = try run("/usr/bin/zstd", ["-q", "-t", path])
        #expect(test.status == 0, "zstd -t: \(test.stderr)")
        let decoded = try run("/usr/bin/zstd", ["-q", "-dc", path])
        #expect(decoded.status == 0, "zstd -dc: \(decoded.stderr)")
        // zstd -dc yields exactly the record stream: every chunk's records, in order.
        var expected = [UInt8]()
        for r in records { FrameCodec.appendRecord(r, to: &expected) }
        #expect(decoded.stdout == expected)
    }

    @Test func incompleteTraceIsReadByScanningAndReportedIncomplete() throws {
        let (full, records) = try Self.smallTrace()
        let complete = try TraceReader(bytes: full)
        let index = try #require(complete.index)
        // What a crashed recorder leaves: the header and the chunks, no index, no trailer.
        let crashed = Array(full[..<Int(index.last!.endOffset)])
        let r = try TraceReader(bytes: crashed)
        #expect(!r.isComplete)
        #expect(r.index == nil)
        #expect(r.trailer == nil)
        let (entries, error) = r.readAll()
        #expect(error == nil)
        #expect(entries.map(\.record) == records)
        // The chunk table is rebuilt from chunk headers, without decompressing.
        let r2 = try TraceReader(bytes: crashed)
        let table = try r2.chunks()
        #expect(r2.statistics.chunksDecoded == 0)
        #expect(table.map(\.offset) == index.map(\.offset))
        #expect(table.map(\.records) == index.map(\.records))
    }

    @Test func seekingByRecordAndTimeReadsOneChunk() throws {
        var records = [TraceRecord]()
        for i in 0..<2000 {
            records.append(TraceRecord(kind: .input, time: Moment(nanoseconds: Int64(i) * 10_000_000), payload: Array("{\"i\":\(i)}".utf8)))
        }
        let bytes = try writeTrace(records, options: testOptions(interval: .seconds(1)))
        for crashed in [false, true] {
            var data = bytes
            if crashed {
                let idx = try #require(try TraceReader(bytes: bytes).index)
                data = Array(bytes[..<Int(idx.last!.endOffset)])
            }
            let r = try TraceReader(bytes: data)
            #expect(r.isComplete == !crashed)
            try r.seek(toRecord: 1234)
            #expect(r.statistics.chunksDecoded == 1)
            #expect(try r.next()?.record == records[1234])
            #expect(try r.next()?.number == 1235)
            #expect(r.statistics.chunksDecoded == 1)

            let before = r.statistics.chunksDecoded
            try r.seek(toTime: Moment(nanoseconds: 7_777_000_000))
            #expect(r.statistics.chunksDecoded == before + 1)
            let e = try #require(try r.next())
            #expect(e.number == 778)
            #expect(e.record.time == Moment(nanoseconds: 7_780_000_000))

            // Reading on after a seek continues through the following chunks to the end.
            var n = 1
            while try r.next() != nil { n += 1 }
            #expect(n == 2000 - 778)

            try r.seek(toRecord: 2000)
            #expect(try r.next() == nil)
            #expect(throws: TraceError.self) { try r.seek(toRecord: 2001) }
            try r.seek(toTime: .seconds(1000))
            #expect(try r.next() == nil)
            r.rewind()
            #expect(r.readAll().entries.count == 2000)
        }
    }

    @Test func unknownKindsAndUnknownSkippableFramesAreSkipped() throws {
        let records = [
            TraceRecord(kind: .marker, time: .zero, payload: Array("a".utf8)),
            TraceRecord(kind: .unknown(4242), time: .seconds(0.1), channel: .unknown(9), payload: [1, 2, 3, 4, 5]),
            TraceRecord(kind: .marker, time: .seconds(0.2), payload: Array("b".utf8)),
        ]
        let full = try writeTrace(records, options: testOptions())
        let r = try TraceReader(bytes: full)
        let entries = r.readAll().entries
        #expect(entries.map(\.record) == records)
        #expect(entries[1].record.kind == .unknown(4242))
        // A future writer's metadata frame (another skippable magic, and our magic with an unknown tag)
        // between the header and the first chunk is skipped.
        let at = Int(r.dataOffset)
        var foreign: [UInt8] = [0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]
        foreign += [0x50, 0x2A, 0x4D, 0x18, 8, 0, 0, 0] + Array("RTXXdata".utf8)
        let withForeign = Array(full[..<at]) + foreign + Array(full[at...])
        let r2 = try TraceReader(bytes: withForeign)
        #expect(!r2.isComplete)  // the index's offsets no longer match
        let (entries2, error2) = r2.readAll()
        #expect(entries2.map(\.record) == records)
        #expect(error2?.code == .corrupt)  // ...and the index check says so
    }

    @Test func aChunkHeaderThatDoesNotMatchItsFrameIsAnError() throws {
        // Hand-built: chunk header says 2 records, the frame holds 1.
        var rec = [UInt8]()
        FrameCodec.appendRecord(TraceRecord(kind: .marker, time: .zero, payload: [65]), to: &rec)
        let file = try craftFile(chunkBody: rec, recordCount: 2)
        let (entries, error) = try TraceReader(bytes: file).readAll()
        #expect(entries.isEmpty)
        #expect(error?.code == .corrupt)
    }
}

/// Runs an executable; returns its exit status, stdout and stderr.
func run(_ path: String, _ args: [String], stdin: [UInt8]? = nil) throws -> (status: Int32, stdout: [UInt8], stderr: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    // Read stderr on another thread while this one reads stdout (no deadlock on large output).
    let box = DataBox()
    let done = DispatchSemaphore(value: 0)
    let errHandle = err.fileHandleForReading
    Thread {
        let d = errHandle.readDataToEndOfFile()
        box.data.withLock { $0 = d }
        done.signal()
    }.start()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    done.wait()
    p.waitUntilExit()
    return (p.terminationStatus, [UInt8](o), String(decoding: box.data.withLock { $0 }, as: UTF8.self))
}

/// A file with the test header and one hand-made chunk (`chunkBody` = encoded records), optionally
/// lying in its chunk header about the record count, the uncompressed size or times.
func craftFile(
    chunkBody: [UInt8], recordCount: UInt32, declaredSize: UInt32? = nil, frame: [UInt8]? = nil
) throws -> [UInt8] {
    let header = TraceRecord(kind: .header, time: .zero, payload: testHeader().json.serialized())
    var file = FrameCodec.fileHeaderFrame(header)
    let compressor = try ZstdCompressor(level: 3)
    var zframe: [UInt8]
    if let frame { zframe = frame } else {
        zframe = [UInt8](repeating: 0, count: ZstdCompressor.bound(chunkBody.count))
        let n = try compressor.compress(chunkBody, into: &zframe, at: 0)
        zframe.removeLast(zframe.count - n)
    }
    var info = TraceChunkInfo(
        sequence: 0, offset: UInt64(file.count), compressedSize: UInt32(zframe.count),
        uncompressedSize: declaredSize ?? UInt32(chunkBody.count), firstRecord: 0, recordCount: recordCount,
        minTime: .zero, maxTime: .zero, generations: [])
    info.frameCRC = CRC32C.checksum(zframe)
    FrameCodec.appendChunkHeader(info, to: &file)
    return file + zframe
}

final class DataBox: Sendable {
    let data = Locked<Data>(Data())
}
