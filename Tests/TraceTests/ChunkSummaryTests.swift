import RelayProtocol
import Testing
@testable import Trace

@Suite struct ChunkSummaryTests {
    func type(_ text: String) -> String? {
        Array(text.utf8).withUnsafeBytes { TraceChunkSummary.messageType(ofText: $0).map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func theMessageTypeRuleNamesOnlyTypesTheBytesProve() {
        // The relay's and the client's spellings: type last (canonical, keys sorted) or first.
        #expect(type(#"{"payload":{},"type":"heartbeat"}"#) == "heartbeat")
        #expect(type(#"{"type":"pong"}"#) == "pong")
        #expect(type(#"{"type":"rpc.request","payload":{"id":"R1"}}"#) == "rpc.request")
        #expect(type(#"{"expiresAt":"x","sessionId":"y","type":"resumed"}"#) == "resumed")
        // Anything the bytes alone cannot settle is untyped.
        #expect(type(#"{"payload":{"type":"x"},"type":"event"}"#) == nil, "a second \"type\" could be a duplicate key")
        #expect(type(#"{"type":"a","type":"b"}"#) == nil)
        #expect(type(#"{"t\u0079pe":"a","type":"b"}"#) == nil, "an escape can spell a key")
        #expect(type(#"{"type":"a\"b"}"#) == nil)
        #expect(type(#"{"type" : "pong"}"#) == nil, "spacing")
        #expect(type(#"{"a":{"x":1,"type":"b"}}"#) == nil, "nested")
        #expect(type(#"[{"type":"pong"}]"#) == nil, "not an object")
        #expect(type(#"{"type":"pong"} "#) == "pong", "first member: what follows does not matter")
        #expect(type(#"{"x":1,"type":"pong"} "#) == nil, "last member: must end the text")
        #expect(type(#"{"x":"y","type":""}"#) == nil, "empty")
        #expect(type(#"{"subtype":"a","x":1}"#) == nil)
        #expect(type(#"{"type":1}"#) == nil)
        #expect(type(#"{"type":"\#(String(repeating: "a", count: 256))"}"#) == nil, "over 255 bytes")
        #expect(type(#"{"type":"\#(String(repeating: "a", count: 255))"}"#)?.count == 255)
        #expect(type(#"{"type":"é"}"#) == "é")
        #expect(Array(#"{"type":""#.utf8 + [0xFF, 0x22, 0x7D]).withUnsafeBytes { TraceChunkSummary.messageType(ofText: $0) } == nil, "not UTF-8")
    }

    /// Records of every kind value a summary must take: known kinds, the wire kinds being added (14, 15),
    /// and values no build knows.
    static func mixedRecords() -> [TraceRecord] {
        var out: [TraceRecord] = []
        let texts = [#"{"payload":{},"type":"heartbeat"}"#, #"{"type":"pong"}"#, #"{"a":"\u0041","type":"event"}"#, "not json"]
        for i in 0..<300 {
            let t = Moment(nanoseconds: Int64(i) * 20_000_000)
            switch i % 7 {
            case 0, 1: out.append(.frame(.text(texts[i % texts.count]), time: t, generation: UInt64(i / 50), direction: i % 2 == 0 ? .outbound : .inbound))
            case 2: out.append(TraceRecord(kind: .ping, time: t, generation: 1, direction: .outbound, payload: [1, 2]))
            case 3: out.append(TraceRecord(kind: .unknown(16), time: t, channel: .watch, payload: [3]))
            case 4: out.append(TraceRecord(kind: .unknown(UInt16(60_000 + i)), time: t, channel: .unknown(7), payload: []))
            case 5: out.append(TraceRecord(kind: .unknown(65_535), time: t, generation: 9, payload: [9]))
            default: out.append(TraceRecord(kind: .marker, time: t, payload: Array("m\(i)".utf8)))
            }
        }
        return out
    }

    @Test func theWritersSummaryOfEachChunkDescribesItsRecordsWhateverTheirKinds() throws {
        let records = Self.mixedRecords()
        let bytes = try writeTrace(records, options: testOptions(chunk: 1024))
        let r = try TraceReader(bytes: bytes)
        #expect(r.trailer.map { $0.flags & TraceTrailer.flagChunkSummaries != 0 } == true)
        var w = WalkState(cursor: r.dataOffset)
        var seen = 0
        while let step = try? r.walkFrame(&w), !w.finished {
            guard case .summary(let s, let c) = step.event else { continue }
            let inChunk = records[Int(c.firstRecord)..<Int(c.firstRecord + UInt64(c.recordCount))]
            var b = TraceChunkSummary.Builder()
            for rec in inChunk { b.add(rec) }
            #expect(s == b.summary)
            #expect(s.recordCount == UInt64(c.recordCount))
            let kinds = Set(inChunk.map(\.kind.rawValue))
            #expect(Set(s.entries.map(\.kind)) == kinds)
            #expect(s.generations == Set(inChunk.compactMap(\.generation)).sorted())
            let texts = inChunk.filter { $0.kind == .frameText }
            let proven = texts.compactMap { t in t.payload.withUnsafeBytes { TraceChunkSummary.messageType(ofText: $0).map { Array($0) } } }
            #expect(Set(s.messageTypes) == Set(proven))
            #expect(s.untypedTextFrames == UInt32(texts.count - proven.count))
            let (sequence, crc, decoded) = try FrameCodec.decodeSummaryFrame(
                { var f = [UInt8](); FrameCodec.appendSummaryFrame(s, sequence: c.sequence, frameCRC: c.frameCRC, to: &f); return f }(),
                offset: 0)
            #expect(sequence == c.sequence && crc == c.frameCRC && decoded == s)
            seen += 1
        }
        #expect(seen == r.index?.count)
        #expect(seen > 5)
        #expect(r.readAll().entries.map(\.record) == records)
    }

    /// The offsets of the summary frames of `bytes`.
    static func summaryFrames(_ bytes: [UInt8]) throws -> [(offset: Int, size: Int)] {
        let r = try TraceReader(bytes: bytes)
        var w = WalkState(cursor: r.dataOffset)
        var out: [(Int, Int)] = []
        while true {
            let before = w.cursor
            guard let step = try? r.walkFrame(&w), !w.finished else { break }
            if case .summary = step.event { out.append((Int(before), Int(w.cursor - before))) }
        }
        return out
    }

    @Test func aSummaryThatLiesIsDamageAndAMissingOneToo() throws {
        let records = Self.mixedRecords()
        let bytes = try writeTrace(records, options: testOptions(chunk: 1024))
        let frames = try Self.summaryFrames(bytes)
        #expect(frames.count > 3)
        // Rewrite summary 2 with one more record of one entry and one less of another: CRC recomputed.
        let (at, size) = frames[2]
        var (sequence, crc, summary) = try FrameCodec.decodeSummaryFrame(Array(bytes[at..<(at + size)]), offset: UInt64(at))
        summary.entries[0].count += 1
        summary.entries[summary.entries.count - 1].count -= 1
        var frame = [UInt8]()
        FrameCodec.appendSummaryFrame(summary, sequence: sequence, frameCRC: crc, to: &frame)
        var lying = bytes
        lying.replaceSubrange(at..<(at + size), with: frame)
        let plain = try #require(plainRead(lying))
        #expect(plain.error?.code == .corrupt)
        #expect(plain.error?.offset == UInt64(at))
        #expect(scannedRead(lying) == plain, "a decoding scan checks it the same way")
        // A seek into that chunk copies out only the records from the one asked for, and reading on past
        // the chunk still checks the summary against all of its records (from the chunk's bytes).
        let index = try #require(try TraceReader(bytes: bytes).index)
        let chunk = index[2]
        #expect(chunk.recordCount > 2)
        for (what, trace, fails) in [("the lying summary", lying, true), ("the intact file", bytes, false)] {
            let seeking = try TraceReader(bytes: trace)
            let target = chunk.firstRecord + UInt64(chunk.recordCount) - 2
            try seeking.seek(toRecord: target)
            var got: [TraceEntry] = []
            var failure: TraceError?
            do { while let e = try seeking.next() { got.append(e) } } catch let e { failure = e }
            #expect(got.first?.number == target, "\(what)")
            #expect(got.first?.record == records[Int(target)], "\(what)")
            if fails {
                #expect(got.count == 2, "\(what): the chunk's last two records, then the summary's damage")
                #expect(failure?.code == .corrupt && failure?.offset == UInt64(at), "\(what): \(String(describing: failure))")
            } else {
                #expect(failure == nil, "\(what)")
                #expect(got.map(\.record) == Array(records[Int(target)...]), "\(what)")
            }
        }
        // A summary frame cut out of a file with summaries: the chunk is not followed by its summary.
        var missing = bytes
        missing.removeSubrange(at..<(at + size))
        let m = try #require(plainRead(missing))
        #expect(m.error?.code == .corrupt)
        #expect(m.error?.offset == UInt64(at))
        #expect(m.error?.message.contains("not followed by its summary") == true)
        #expect(scannedRead(missing) == m)
        // The same in an incomplete file (no trailer): its first chunk's summary says the file has them.
        let trailer = try #require(try TraceReader(bytes: bytes).trailer)
        let crashed = Array(missing[..<(Int(trailer.indexOffset) - size)])
        #expect(try TraceReader(bytes: crashed).index == nil)
        let c = try #require(plainRead(crashed))
        #expect(c.error == m.error)
        #expect(c.entries.count == Int(index[3].firstRecord))
        #expect(scannedRead(crashed) == c)
        // A summary where none may be: before the first chunk.
        let first = frames[0]
        var misplaced = bytes
        misplaced.insert(contentsOf: bytes[first.offset..<(first.offset + first.size)], at: Int(try TraceReader(bytes: bytes).dataOffset))
        #expect(plainRead(misplaced)?.error?.message.contains("does not follow a chunk") == true)
    }

    @Test func aTraceWithoutSummariesReadsAsBeforeAndFiltersStillWork() throws {
        // The golden traces that predate summaries: every chunk reads, and no summary is expected.
        let traces = goldenTraces().filter { goldenTracesBeforeSummaries.contains($0.name) }
        #expect(traces.count == goldenTracesBeforeSummaries.count, "the captured golden traces under Traces/ (found \(traces.count))")
        for (name, bytes) in traces {
            let r = try TraceReader(bytes: bytes)
            #expect(r.trailer.map { $0.flags & TraceTrailer.flagChunkSummaries } == 0, "\(name)")
            #expect(try Self.summaryFrames(bytes).isEmpty)
            let (entries, error) = r.readAll()
            #expect(error == nil, "\(name)")
            #expect(entries.count == Int(r.trailer?.recordCount ?? 0), "\(name)")
            // A wants predicate sees no summary (nil) and the index's generations.
            let seen = Counter()
            _ = scannedRead(bytes) { plan in
                plan.wants = { c, s in
                    if s != nil { seen.add(1000) }
                    if !c.generations.isEmpty { seen.add(1) }
                    return true
                }
            }
            #expect(seen.value < 1000, "\(name): no summary")
        }
    }

    @Test func chunksOfAnIncompleteFileAreListedAcrossTheirSummaries() throws {
        let records = Self.mixedRecords()
        let bytes = try writeTrace(records, options: testOptions(chunk: 1024))
        let complete = try TraceReader(bytes: bytes)
        let index = try #require(complete.index)
        let crashed = Array(bytes[..<Int(try #require(complete.trailer).indexOffset)])
        let r = try TraceReader(bytes: crashed)
        #expect(!r.isComplete)
        #expect(try r.chunks().map(\.offset) == index.map(\.offset))
        try r.seek(toRecord: UInt64(records.count - 1))
        #expect(try r.next()?.record == records.last)
    }
}
