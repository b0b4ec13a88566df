import Foundation
import RelayProtocol
import Testing
@testable import Trace

@Suite struct WriterTests {
    @Test func queueOverflowDropsCountsAndRecordsTheCount() throws {
        let sink = MemorySink(gated: true)
        var o = testOptions(chunk: 1)  // every record flushes at once
        o.queueCapacity = 4
        let w = try TraceWriter(sink: sink, header: testHeader(), options: o)
        #expect(w.append(TraceRecord(kind: .marker, time: .zero, payload: [0])))
        sink.enteredWrite.wait()  // the writer thread is now blocked writing record 0's chunk
        var accepted = 0
        for i in 1...14 {
            if w.append(TraceRecord(kind: .marker, time: Moment(nanoseconds: Int64(i)), payload: [UInt8(i)])) { accepted += 1 }
        }
        #expect(accepted == 4)  // the queue holds 4; the 10 others were dropped without blocking
        #expect(w.status.dropped == 10)
        sink.gate?.signal()
        let summary = try w.close()
        #expect(summary.dropped == 10)
        #expect(summary.records == 6)  // 5 markers + 1 dropped notice
        let r = try TraceReader(bytes: sink.bytes)
        #expect(r.trailer?.droppedCount == 10)
        let records = r.readAll().entries.map(\.record)
        #expect(records.prefix(5).map(\.payload) == [[0], [1], [2], [3], [4]])
        let notice = try #require(records.last)
        #expect(notice.kind == .dropped)
        let json = try JSONValue(parsing: notice.payload)
        #expect(json["count"]?.intValue == 10)
        #expect(json["overflow"]?.intValue == 10)
        #expect(json["firstTime"]?.intValue == 5)
        #expect(json["lastTime"]?.intValue == 14)
    }

    @Test func oversizedAppendIsDroppedAndCounted() throws {
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: testHeader(), options: testOptions())
        let big = [UInt8](repeating: 1, count: TraceFormat.maxRecordPayload + 1)
        #expect(!w.append(TraceRecord(kind: .frameBinary, time: .seconds(1), generation: 1, direction: .inbound, payload: big)))
        #expect(w.append(TraceRecord(kind: .marker, time: .seconds(2), payload: [1])))
        let s = try w.close()
        #expect(s.dropped == 1)
        #expect(s.oversized == 1)
        let records = try TraceReader(bytes: sink.bytes).readAll().entries.map(\.record)
        #expect(records.count == 2)
        let notice = try #require(records.first { $0.kind == .dropped })
        #expect(try JSONValue(parsing: notice.payload)["oversized"]?.intValue == 1)
    }

    @Test func largestRecordRoundTrips() throws {
        var payload = [UInt8](repeating: 0xA5, count: TraceFormat.maxRecordPayload)
        payload[0] = 1
        payload[payload.count - 1] = 2
        let rec = TraceRecord(kind: .frameBinary, time: .seconds(1), generation: 3, direction: .inbound, payload: payload)
        let bytes = try writeTrace([rec])
        let (entries, error) = try TraceReader(bytes: bytes).readAll()
        #expect(error == nil)
        #expect(entries.first?.record == rec)
    }

    @Test func diskFullStopsTheWriterWithoutBlockingTheProducer() throws {
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: testHeader(), options: testOptions(chunk: 1))
        let headerBytes = sink.bytes.count
        w.append(TraceRecord(kind: .marker, time: .zero, payload: Array("first".utf8)))
        w.flush()
        let good = sink.bytes.count
        #expect(good > headerBytes)
        sink.failAfterBytes = good + 10  // the disk is now full for good
        w.append(TraceRecord(kind: .marker, time: .seconds(1), payload: Array("second".utf8)))
        w.flush()
        let stop = try #require(w.status.stopReason)
        #expect(stop.code == .writerStopped)
        #expect(stop.systemErrno == 28)
        #expect(stop.message.contains("No space left on device"))
        // The producer keeps going: appends return at once and are counted.
        for i in 0..<1000 { #expect(!w.append(TraceRecord(kind: .marker, time: .seconds(2), payload: [UInt8(i & 0xFF)]))) }
        do {
            try w.close()
            Issue.record("close should report the stop")
        } catch {
            #expect(error.code == .writerStopped)
        }
        #expect(w.status.dropped == 1001)
        // The partial chunk was cut off: the file holds the header and the first chunk, and reads cleanly.
        #expect(sink.bytes.count == good)
        let r = try TraceReader(bytes: sink.bytes)
        #expect(!r.isComplete)
        let (entries, error) = r.readAll()
        #expect(error == nil)
        #expect(entries.map(\.record.payloadText) == ["first"])
    }

    @Test func transientWriteErrorIsRecordedInTheFile() throws {
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: testHeader(), options: testOptions(chunk: 1))
        w.append(TraceRecord(kind: .marker, time: .zero, payload: Array("first".utf8)))
        w.flush()
        sink.failOnce = true
        sink.failAfterBytes = sink.bytes.count + 10
        w.append(TraceRecord(kind: .marker, time: .seconds(1), payload: Array("second".utf8)))
        w.flush()
        #expect(w.status.stopReason != nil)
        #expect(throws: TraceError.self) { try w.close() }
        let records = try TraceReader(bytes: sink.bytes).readAll().entries.map(\.record)
        #expect(records.map(\.kind) == [.marker, .writerStopped])
        let why = try JSONValue(parsing: records[1].payload)
        #expect(why["errno"]?.intValue == 28)
        #expect(why["reason"]?.stringValue?.contains("No space left") == true)
    }

    @Test func optionsOutOfRangeAreRefused() {
        var o = testOptions()
        o.queueCapacity = 0
        #expect(throws: TraceError.self) { try TraceWriter(sink: MemorySink(), header: testHeader(), options: o) }
        o = testOptions(chunk: 40 << 20)
        #expect(throws: TraceError.self) { try TraceWriter(sink: MemorySink(), header: testHeader(), options: o) }
    }

    @Test func openingAnExistingFileFailsUnlessOverwrite() throws {
        let path = tempPath("exists.rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try TraceWriter(path: path, header: testHeader(), options: testOptions()).close()
        do {
            _ = try TraceWriter(path: path, header: testHeader(), options: testOptions())
            Issue.record("expected EEXIST")
        } catch {
            #expect(error.code == .io)
            #expect(error.systemErrno == EEXIST)
        }
        var o = testOptions()
        o.overwrite = true
        let w = try TraceWriter(path: path, header: testHeader(), options: o)
        w.append(TraceRecord(kind: .marker, time: .zero, payload: [1]))
        #expect(try w.close().records == 1)
        #expect(try TraceReader(path: path).readAll().entries.count == 1)
    }

    @Test func wallClockTimerFlushesAnOldChunk() throws {
        // The engine flushes an open chunk once it is `flushInterval` old on the wall clock (driven here
        // with an explicit `now`: no waiting).
        let sink = MemorySink()
        var o = testOptions()
        o.flushInterval = .milliseconds(500)
        let engine = try WriterEngine(sink: sink, redactor: Redactor(policy: .raw, key: []), options: o, offset: 0)
        engine.add(TraceRecord(kind: .marker, time: .zero, payload: [1]))
        let opened = ContinuousClock.now
        engine.flushIfOld(now: opened)
        #expect(engine.index.isEmpty)
        #expect(engine.timeUntilDeadline(now: opened)! <= .milliseconds(500))
        engine.flushIfOld(now: opened + .milliseconds(600))
        #expect(engine.index.count == 1)
        #expect(engine.timeUntilDeadline(now: opened) == nil)
    }

    @Test func appendsFromManyThreadsAllArrive() throws {
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: testHeader(), options: testOptions(chunk: 4096))
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for i in 0..<2500 {
                w.append(TraceRecord(kind: .input, time: Moment(nanoseconds: Int64(i)), channel: .relay, payload: Array("\(t)-\(i)".utf8)))
            }
        }
        let s = try w.close()
        // Capacity 65536 > 10000: nothing dropped.
        #expect(s.dropped == 0)
        let texts = Set(try TraceReader(bytes: sink.bytes).readAll().entries.map(\.record.payloadText))
        #expect(texts.count == 10_000)
    }
}

@Suite struct LimitTests {
    @Test func recordDeclaringMoreThan32MiBIsRefused() throws {
        var body = [UInt8]()
        FrameCodec.appendRecord(TraceRecord(kind: .marker, time: .zero, payload: [1, 2, 3]), to: &body)
        body.storeLE(UInt32(TraceFormat.maxRecordPayload + 1), at: 4)
        let (entries, error) = try TraceReader(bytes: try craftFile(chunkBody: body, recordCount: 1)).readAll()
        #expect(entries.isEmpty)
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("33554433") == true)
    }

    @Test func lengthPastTheEndIsRefused() throws {
        var body = [UInt8]()
        FrameCodec.appendRecord(TraceRecord(kind: .marker, time: .zero, payload: [1, 2, 3]), to: &body)
        body.storeLE(UInt32(4), at: 4)  // one byte more than there is
        let file = try craftFile(chunkBody: body, recordCount: 1)
        let (_, error) = try TraceReader(bytes: file).readAll()
        #expect(error?.code == .corrupt)
        let dataOffset = try TraceReader(bytes: file).dataOffset
        #expect(error?.offset == dataOffset)
        // A chunk whose declared frame size runs past the end of the file.
        var cut = file
        cut.storeLE(UInt32(1_000_000), at: Int(dataOffset) + 32)
        let (_, e2) = try TraceReader(bytes: cut).readAll()
        #expect(e2 != nil)
    }

    @Test func decompressionBombIsRefusedBeforeAllocating() throws {
        // 100 MiB of zeros compress to a few KiB; the chunk header declares it honestly.
        let zeros = [UInt8](repeating: 0, count: 100 << 20)
        let file = try craftFile(chunkBody: zeros, recordCount: 1)
        let (_, error) = try TraceReader(bytes: file).readAll()
        #expect(error?.code == .limitExceeded)
        // The chunk header lies (says 24 bytes) but the zstd frame declares 100 MiB: refused before
        // decompressing.
        let lying = try craftFile(chunkBody: zeros, recordCount: 1, declaredSize: 24)
        let (_, e2) = try TraceReader(bytes: lying).readAll()
        #expect(e2?.code == .corrupt)
        // A reader with a smaller bound refuses an ordinary chunk of a real trace.
        let normal = try writeTrace(randomRecords(seed: 5, count: 100))
        let (_, e3) = try TraceReader(bytes: normal, options: .init(maxChunkSize: 1024)).readAll()
        #expect(e3?.code == .limitExceeded)
    }

    @Test func hugeDeclaredHeaderAndIndexSizesAreRefused() throws {
        var bytes = try writeTrace([])
        bytes.storeLE(UInt32.max, at: 4)
        do {
            _ = try TraceReader(bytes: bytes)
            Issue.record("expected an error")
        } catch { #expect(error.code == .limitExceeded) }
    }
}
