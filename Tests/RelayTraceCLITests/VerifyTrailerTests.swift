import Dispatch
import Foundation
import Testing
import RelayProtocol
import Trace

/// CRC-32C (Castagnoli, reflected 0x82F63B78), written from the format document, to forge trailers.
func crc32c(_ bytes: ArraySlice<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        crc ^= UInt32(b)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}

/// `verify` holds a trailer to what a writer can really drop: exactly what the trace's `dropped` notices
/// record (TRACE_FORMAT.md §3.6), however well the trailer is checksummed.
@Suite struct VerifyTrailerTests {
    /// `file` with the trailer's dropped count (offset 32 of the 60-byte trailer) set to `dropped` and
    /// the trailer's CRC-32C (over bytes 8..<56, at 56) recomputed.
    static func forgeDropped(_ file: [UInt8], _ dropped: UInt64) -> [UInt8] {
        var b = file
        let t = b.count - 60
        for i in 0..<8 { b[t + 32 + i] = UInt8(truncatingIfNeeded: dropped >> (8 * UInt64(i))) }
        let crc = crc32c(b[(t + 8)..<(t + 56)])
        for i in 0..<4 { b[t + 56 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        return b
    }

    static func write(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rt-trailer-\(UUID().uuidString).rtrace").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: [UInt64.max, 1 << 40, 1])
    func aTrailerClaimingDropsNoNoticeRecordsFailsVerify(claim: UInt64) throws {
        let good = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: good) }
        let forged = try Self.write(Self.forgeDropped([UInt8](try Data(contentsOf: URL(fileURLWithPath: good))), claim))
        defer { try? FileManager.default.removeItem(atPath: forged) }
        // The forgery is well made: the reader takes the file as complete, with the claimed count.
        #expect(try TraceReader(path: forged).trailer?.droppedCount == claim)
        let r = try relaytrace(["verify", forged])
        #expect(r.status == 65, "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("the trailer claims \(claim) dropped records but the trace's dropped notices account for 0"), "\(r.stderr)")
        #expect(try relaytrace(["verify", good]).status == 0)
    }

    /// A writer that really drops (a 4-record queue flooded from two threads, closed while they still
    /// append) writes a trailer equal to its notices: verify passes, and one more claimed drop fails.
    @Test func aWriterThatDropsWritesATrailerItsNoticesAccountFor() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rt-drops-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var o = TraceWriterOptions()
        o.queueCapacity = 4
        let w = try TraceWriter(path: path, header: TraceHeader(seed: 1, wallClockStart: "2026-01-02T03:04:05Z", simulated: true), options: o)
        let group = DispatchGroup()
        for k in 0..<2 {
            DispatchQueue.global().async(group: group) {
                for i in 0..<200_000 { w.append(TraceRecord(kind: .marker, time: Moment(nanoseconds: Int64(i * 2 + k)), payload: Array("m\(i)".utf8))) }
            }
        }
        // Close once drops have happened, while the producers are (most likely) still appending.
        for _ in 0..<10_000 where w.status.dropped < 100 { usleep(1_000) }
        let summary = try w.close()
        group.wait()
        let reader = try TraceReader(path: path)
        let noticed = reader.readAll().entries.filter { $0.record.kind == .dropped }
            .compactMap { DroppedNotice(payload: $0.record.payload)?.count }.reduce(0, +)
        #expect(reader.trailer?.droppedCount == noticed)
        #expect(noticed > 0, "the queue overflowed")
        #expect(summary.dropped >= noticed, "drops after the last batch are counted in the summary, not the file")
        #expect(try relaytrace(["verify", path]).status == 0)
        let forged = try Self.write(Self.forgeDropped([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), noticed + 1))
        defer { try? FileManager.default.removeItem(atPath: forged) }
        #expect(try relaytrace(["verify", forged]).status == 65)
    }
}
