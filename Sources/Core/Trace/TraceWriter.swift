import Dispatch
import Foundation
public import RelayProtocol
import Synchronization
import Sync

/// How a `TraceWriter` behaves.
public struct TraceWriterOptions: Sendable, Hashable {
    /// When the writer makes data durable.
    public enum SyncPolicy: Sendable, Hashable {
        /// `fdatasync` after the header and on close (a killed process loses nothing written; a power
        /// loss may lose what the kernel had not yet flushed).
        case onClose
        /// `fdatasync` after every chunk as well.
        case everyChunk
    }

    /// Records the queue holds before `append` starts dropping (and counting) them.
    public var queueCapacity: Int = 65_536
    /// A chunk is flushed once it holds this many uncompressed bytes (1 MiB).
    public var chunkTargetSize: Int = 1 << 20
    /// A chunk is flushed when a record arrives this much capture time after the chunk's first record,
    /// and when the chunk has been open this long on the wall clock. 0.5 s by default, so that with the
    /// writer's own latency a killed process still loses at most the last second.
    public var flushInterval: Duration = .milliseconds(500)
    /// zstd compression level.
    public var compressionLevel: Int = 3
    /// When to `fdatasync`.
    public var sync: SyncPolicy = .onClose
    /// Secret handling; `.raw` records credentials as they are and must be asked for explicitly.
    public var redaction: RedactionPolicy = .hashed
    /// The HMAC key for redaction; nil = 32 fresh random bytes (tests pass a fixed key).
    public var redactionKey: [UInt8]? = nil
    /// Replace an existing file at the path (otherwise creating over an existing file fails).
    public var overwrite: Bool = false
    /// When the queue is full, make `append` wait for room instead of dropping. For producers that
    /// must not lose a record and may be slowed down (simulation, trace rewriting); a live capture keeps
    /// the default, so the client is never blocked by its recorder.
    public var blockWhenFull: Bool = false
    /// Also flush a chunk that has been open `flushInterval` on the wall clock. Turning it off makes chunk
    /// boundaries depend only on the records (capture time and size), so a simulation writes the same bytes
    /// on every run; a live capture keeps it on, so a crash loses at most the last second.
    public var wallClockFlush: Bool = true
    /// When the writer stops early (a write error: disk full), `close()` removes the file instead of
    /// keeping the records written before the stop. For outputs that can be made again (a simulation,
    /// `redact`, a shrunk run), where a partial file would only stand in the way of the next try; a
    /// recording keeps the default and loses nothing it wrote. Either way, a file the writer stopped on
    /// before its first chunk (it holds no record) is removed, and so is one whose header could not be
    /// written. Only files the writer created at a path are removed, and only regular files.
    public var removeIncompleteFile: Bool = false

    /// Default options.
    public init() {}
}

/// What a writer did.
public struct TraceWriterSummary: Sendable, Hashable {
    /// Records written to the file (dropped-notice records included).
    public var records: UInt64
    /// Chunks written.
    public var chunks: Int
    /// Records not written: queue overflow, oversized payloads, appends after a stop or close, and
    /// records lost with a chunk whose write failed.
    public var dropped: UInt64
    /// Of `dropped`, records whose payload was over `TraceFormat.maxRecordPayload`.
    public var oversized: UInt64
    /// Bytes in the file.
    public var bytes: UInt64
    /// The largest record time written.
    public var lastTime: Moment
    /// Why the writer stopped early, if it did.
    public var stopReason: TraceError?
}

/// Writes a trace: `append` from any thread never blocks (a bounded queue drained by one background
/// thread); the background thread redacts, encodes and compresses records into chunks and writes each
/// chunk with one `write(2)` as soon as it is flushed; `close()` writes the index and the trailer.
///
/// A write error (disk full) stops the writer: the partly written chunk is cut off, a `writerStopped`
/// record is written if the file still takes it, later appends are counted as dropped, `status` shows
/// the reason and `close()` throws it. The producer is never blocked nor crashed by it.
public final class TraceWriter: Sendable {
    /// The options in force.
    public let options: TraceWriterOptions
    /// The header as written (with the redaction filled in).
    public let header: TraceHeader
    private let core: WriterCore

    /// Creates the file at `path`, writes the header and starts the background writer.
    /// When the header cannot be written (disk full), the file is removed and the error thrown.
    public convenience init(path: String, header: TraceHeader, options: TraceWriterOptions = TraceWriterOptions()) throws(TraceError) {
        let sink = try FileSink(path: path, overwrite: options.overwrite)
        do {
            try self.init(sink: sink, header: header, options: options)
        } catch {
            sink.discard()
            throw error
        }
    }

    /// Writes to `sink` (which becomes the writer's: do not use it afterwards).
    public init(sink: any TraceSink, header: TraceHeader, options: TraceWriterOptions = TraceWriterOptions()) throws(TraceError) {
        guard options.queueCapacity > 0, options.chunkTargetSize > 0,
            options.chunkTargetSize <= TraceFormat.defaultMaxChunkSize - TraceFormat.maxRecordPayload - TraceFormat.recordHeaderSize,
            options.flushInterval > .zero
        else {
            throw TraceError(.invalidArgument, "writer options out of range: queueCapacity and flushInterval must be positive, chunkTargetSize 1...\(TraceFormat.defaultMaxChunkSize - TraceFormat.maxRecordPayload - TraceFormat.recordHeaderSize)")
        }
        self.options = options
        let key = options.redaction == .raw ? [] : (options.redactionKey ?? Redactor.randomKey())
        let redactor = Redactor(policy: options.redaction, key: key)
        var h = header
        h.formatVersion = Int(TraceFormat.version)
        h.redaction = TraceHeader.Redaction(redactor)
        h.client = redactor.redact(json: h.client)
        h.extra = h.extra.mapValues { redactor.redact(json: $0) }
        self.header = h
        let headerRecord = TraceRecord(kind: .header, time: .zero, payload: h.json.serialized())
        guard headerRecord.payload.count <= TraceFormat.maxHeaderPayload else {
            throw TraceError(.invalidArgument, "the header JSON is \(headerRecord.payload.count) bytes, over the \(TraceFormat.maxHeaderPayload)-byte limit")
        }
        let frame = FrameCodec.fileHeaderFrame(headerRecord)
        try frame.withBytes { (b) throws(TraceError) in try sink.write(b) }
        try sink.sync()
        let engine = try WriterEngine(sink: sink, redactor: redactor, options: options, offset: UInt64(frame.count))
        core = WriterCore(capacity: options.queueCapacity, blockWhenFull: options.blockWhenFull)
        let box = UncheckedTransfer(engine)
        let core = self.core
        let thread = Thread { core.run(box.value) }
        thread.name = "relaytrace.writer"
        thread.start()
    }

    deinit {
        // Not closed: let the background thread finish the file on its own.
        core.requestClose()
    }

    /// Queues `record` for writing; never blocks. Returns false when the record was dropped (queue
    /// full, payload over 32 MiB, writer stopped or closed); drops are counted and recorded.
    @discardableResult
    public func append(_ record: TraceRecord) -> Bool {
        core.append(record)
    }

    /// Queues `record` with its time taken from `clock` at the moment it enters the queue, under the
    /// queue's lock, and never earlier than the last record stamped this way: records appended from
    /// several threads are then in time order in the file without a lock of the caller's own (the wire
    /// recorder's). Otherwise as ``append(_:)``.
    @discardableResult
    public func append(_ record: TraceRecord, stampedBy clock: () -> Moment) -> Bool {
        core.append(record, stamp: clock)
    }

    /// Blocks until every record appended before the call is written to the file (as a chunk, with
    /// `write(2)`), or the writer has stopped.
    public func flush() {
        core.flush()
    }

    /// Flushes, writes the index and trailer, `fdatasync`s and closes the file; waits for the background
    /// thread. Throws the stop reason when the writer stopped early. Calling it again returns (or throws)
    /// the same result.
    @discardableResult
    public func close() throws(TraceError) -> TraceWriterSummary {
        try core.close().get()
    }

    /// The writer's counters so far, and its stop reason.
    public var status: TraceWriterSummary { core.status }

    /// Records queued and not yet taken by the writer thread (a producer that must not lose records,
    /// like a benchmark, can wait while this is near `options.queueCapacity`).
    public var queueDepth: Int { core.state.withLock { $0.queue.count } }
}

/// Hands a non-Sendable value to exactly one other thread. Safe here because the creating thread never
/// touches the value again after the hand-over (the writer engine belongs to the writer thread).
private final class UncheckedTransfer<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// State shared between producers and the writer thread.
private struct SharedState {
    var queue: [TraceRecord] = []
    var sleeping = false
    var closing = false
    var flushWaiters: [DispatchSemaphore] = []
    var closeWaiters: [DispatchSemaphore] = []
    /// Producers waiting for room (`blockWhenFull`).
    var blockedProducers = 0
    /// Drops not yet turned into a `dropped` record.
    var drops = Drops()
    /// The last time given by `append(_:stampedBy:)`'s clock (stamped times never go back).
    var lastStamp: Moment = .zero
    /// Every record refused by `append`.
    var producerDropped: UInt64 = 0
    var producerOversized: UInt64 = 0
    /// The engine's counters as of its last batch.
    var engine = EngineSnapshot()
    var result: Result<TraceWriterSummary, TraceError>?

    var status: TraceWriterSummary {
        TraceWriterSummary(
            records: engine.records, chunks: engine.chunks, dropped: producerDropped + engine.lost,
            oversized: producerOversized, bytes: engine.bytes, lastTime: engine.lastTime, stopReason: engine.stopReason)
    }
}

/// The writer engine's counters, published to producers after every batch.
struct EngineSnapshot: Sendable {
    var records: UInt64 = 0
    var chunks = 0
    var bytes: UInt64 = 0
    var lastTime: Moment = .zero
    var lost: UInt64 = 0
    var stopReason: TraceError?
}

/// Drops not yet recorded in the file.
struct Drops: Sendable {
    var overflow: UInt64 = 0
    var oversized: UInt64 = 0
    var firstTime: Moment = .zero
    var lastTime: Moment = .zero
    var count: UInt64 { overflow + oversized }

    mutating func add(_ time: Moment, oversized big: Bool) {
        if count == 0 {
            firstTime = time
            lastTime = time
        } else {
            firstTime = min(firstTime, time)
            lastTime = max(lastTime, time)
        }
        if big { oversized += 1 } else { overflow += 1 }
    }
}

private final class WriterCore: Sendable {
    let state: Locked<SharedState>
    let wake = DispatchSemaphore(value: 0)
    let room = DispatchSemaphore(value: 0)
    let capacity: Int
    let blockWhenFull: Bool

    /// Queued records at which a producer wakes a sleeping writer.
    let wakeBatch: Int
    /// How long a writer with no open chunk sleeps before it looks at the queue again.
    static let idlePoll: Duration = .milliseconds(200)

    init(capacity: Int, blockWhenFull: Bool) {
        self.capacity = capacity
        self.blockWhenFull = blockWhenFull
        wakeBatch = max(1, min(capacity / 8, 1024))
        var s = SharedState()
        s.queue.reserveCapacity(min(capacity, 4096))
        state = Locked(s)
    }

    func append(_ record: TraceRecord) -> Bool { append(record, stamped: false) { .zero } }

    func append(_ record: TraceRecord, stamp: () -> Moment) -> Bool { append(record, stamped: true, stamp) }

    /// Queues `record`; with `stamped`, its time is `stamp()` read under the queue lock, clamped to the
    /// last stamped time.
    private func append(_ record: TraceRecord, stamped: Bool, _ stamp: () -> Moment) -> Bool {
        var record = record
        while blockWhenFull {
            let mustWait = state.withLock { s -> Bool in
                let over = s.closing || s.engine.stopReason != nil
                guard !over, s.queue.count >= capacity else { return false }
                s.blockedProducers += 1
                s.sleeping = false
                return true
            }
            guard mustWait else { break }
            wake.signal()
            room.wait()
        }
        let (accepted, signal) = state.withLock { s -> (Bool, Bool) in
            if stamped {
                let t = stamp()
                record.time = t < s.lastStamp ? s.lastStamp : t
                s.lastStamp = record.time
            }
            let big = record.payload.count > TraceFormat.maxRecordPayload
            let stopped = s.engine.stopReason != nil
            if s.closing || stopped || big || s.queue.count >= capacity {
                s.producerDropped += 1
                if big { s.producerOversized += 1 }
                // After a stop nothing more reaches the file: count only. While closing, the drop is
                // noticed if the writer has not taken its last batch yet (the trailer counts exactly
                // the drops taken with that batch, so it always equals the file's notices).
                if !stopped { s.drops.add(record.time, oversized: big) }
                return (false, false)
            }
            s.queue.append(record)
            // Waking the writer costs a futex call, more than the append itself: a producer wakes it only
            // when a batch is worth it; otherwise the writer finds the records at its next poll
            // (`idlePoll`), which keeps a killed process's loss under a second (TRACE_FORMAT.md §7).
            if s.sleeping && s.queue.count >= wakeBatch {
                s.sleeping = false
                return (true, true)
            }
            return (true, false)
        }
        if signal { wake.signal() }
        return accepted
    }

    func flush() {
        let sem = DispatchSemaphore(value: 0)
        let registered = state.withLock { s -> Bool in
            if s.closing || s.engine.stopReason != nil { return false }
            s.flushWaiters.append(sem)
            s.sleeping = false
            return true
        }
        guard registered else { return }
        wake.signal()
        sem.wait()
    }

    func requestClose() {
        state.withLock { s in
            s.closing = true
            s.sleeping = false
        }
        wake.signal()
    }

    func close() -> Result<TraceWriterSummary, TraceError> {
        let sem = DispatchSemaphore(value: 0)
        let done = state.withLock { s -> Result<TraceWriterSummary, TraceError>? in
            if let r = s.result { return r }
            s.closing = true
            s.sleeping = false
            s.closeWaiters.append(sem)
            return nil
        }
        if let done { return done }
        wake.signal()
        sem.wait()
        return state.withLock { $0.result } ?? .failure(TraceError(.invalidArgument, "writer finished without a result"))
    }

    var status: TraceWriterSummary { state.withLock { $0.status } }

    /// The writer thread's loop.
    func run(_ engine: WriterEngine) {
        var batch = [TraceRecord]()
        batch.reserveCapacity(min(capacity, 4096))
        while true {
            var waiters: [DispatchSemaphore] = []
            var drops = Drops()
            var closing = false
            var unblock = 0
            var producerDropped: UInt64 = 0
            let work = state.withLock { s -> Bool in
                swap(&s.queue, &batch)
                unblock = s.blockedProducers
                s.blockedProducers = 0
                waiters = s.flushWaiters
                s.flushWaiters = []
                drops = s.drops
                s.drops = Drops()
                closing = s.closing
                producerDropped = s.producerDropped
                if batch.isEmpty && waiters.isEmpty && drops.count == 0 && !closing {
                    s.sleeping = true
                    return false
                }
                return true
            }
            for _ in 0..<unblock { room.signal() }
            if !work {
                let timeout = min(engine.timeUntilDeadline(now: .now) ?? Self.idlePoll, Self.idlePoll)
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(max(timeout.nanoseconds, 1_000_000))))
                state.withLock { $0.sleeping = false }
                engine.flushIfOld(now: .now)
                publish(engine)
                continue
            }
            for r in batch { engine.add(r) }
            batch.removeAll(keepingCapacity: true)
            if drops.count > 0 { engine.addDrops(drops) }
            engine.flushIfOld(now: .now)
            if !waiters.isEmpty { engine.flushChunk() }
            if closing {
                engine.flushChunk()
                // Every producer drop up to the last batch is in `drops` (noticed below or before);
                // the engine's own drops (redaction growth) are noticed as they happen.
                engine.droppedForTrailer = producerDropped + engine.noticedDrops
                let result = engine.finish()
                let toSignal = state.withLock { s -> [DispatchSemaphore] in
                    s.engine = engine.snapshot
                    let status = s.status
                    s.result = result.map { _ in status }
                    s.sleeping = false
                    let w = s.closeWaiters + s.flushWaiters
                    s.closeWaiters = []
                    s.flushWaiters = []
                    return w
                }
                for w in waiters + toSignal { w.signal() }
                return
            }
            publish(engine)
            for w in waiters { w.signal() }
        }
    }

    private func publish(_ engine: WriterEngine) {
        let snapshot = engine.snapshot
        state.withLock { $0.engine = snapshot }
    }
}

/// The writer thread's own state: the open chunk, the compressor, the sink, the index.
final class WriterEngine {
    let sink: any TraceSink
    let redactor: Redactor
    let options: TraceWriterOptions
    private let compressor: ZstdCompressor
    private let interval: Int64
    private let wallClockFlush: Bool
    private var chunk: [UInt8] = []
    private var chunkRecords: UInt32 = 0
    private var chunkFirstTime: Int64 = 0
    private var chunkMin: Int64 = 0
    private var chunkMax: Int64 = 0
    private var chunkSummary = TraceChunkSummary.Builder()
    private var summaryFrame: [UInt8] = []
    private var chunkOpened: ContinuousClock.Instant = .now
    private var out: [UInt8] = []
    private(set) var offset: UInt64
    private(set) var index: [TraceChunkInfo] = []
    private(set) var records: UInt64 = 0
    private(set) var lastTime: Int64 = 0
    /// Records lost with a chunk whose write failed, or discarded after the stop, or grown past the
    /// payload limit by redaction.
    private(set) var lost: UInt64 = 0
    /// Of `lost`, the records grown past the limit by redaction (each has its `dropped` notice).
    private(set) var noticedDrops: UInt64 = 0
    private(set) var stopReason: TraceError?

    init(sink: any TraceSink, redactor: Redactor, options: TraceWriterOptions, offset: UInt64) throws(TraceError) {
        self.sink = sink
        self.redactor = redactor
        self.options = options
        self.offset = offset
        self.interval = max(1, options.flushInterval.nanoseconds)
        self.wallClockFlush = options.wallClockFlush
        compressor = try ZstdCompressor(level: Int32(clamping: options.compressionLevel))
        chunk.reserveCapacity(options.chunkTargetSize + 64 * 1024)
    }

    var snapshot: EngineSnapshot {
        EngineSnapshot(
            records: records, chunks: index.count, bytes: offset, lastTime: Moment(nanoseconds: lastTime), lost: lost,
            stopReason: stopReason)
    }

    func timeUntilDeadline(now: ContinuousClock.Instant) -> Duration? {
        guard chunkRecords > 0 else { return nil }
        return .nanoseconds(interval) - (now - chunkOpened)
    }

    func flushIfOld(now: ContinuousClock.Instant) {
        guard wallClockFlush else { return }
        if chunkRecords > 0 && (now - chunkOpened).nanoseconds >= interval { flushChunk() }
    }

    func add(_ record: TraceRecord) {
        guard stopReason == nil else {
            lost += 1
            return
        }
        var r = record
        if redactor.policy == .hashed {
            r.payload = redactor.redact(payload: r.payload, kind: r.kind)
            // Redaction grew it past the limit (re-serialised JSON): drop it rather than write the secret,
            // and say so in a notice like any other drop.
            if r.payload.count > TraceFormat.maxRecordPayload {
                lost += 1
                noticedDrops += 1
                var d = Drops()
                d.add(r.time, oversized: true)
                addDrops(d)
                return
            }
        }
        let t = r.time.nanoseconds
        if chunkRecords > 0 && t &- chunkFirstTime >= interval { flushChunk() }
        if chunkRecords == 0 {
            chunkFirstTime = t
            chunkMin = t
            chunkMax = t
            chunkOpened = .now
        } else {
            chunkMin = min(chunkMin, t)
            chunkMax = max(chunkMax, t)
        }
        chunkSummary.add(r)
        FrameCodec.appendRecord(r, to: &chunk)
        chunkRecords += 1
        if chunk.count >= options.chunkTargetSize { flushChunk() }
    }

    func addDrops(_ d: Drops) {
        let notice = DroppedNotice(overflow: d.overflow, oversized: d.oversized, firstTime: d.firstTime, lastTime: d.lastTime)
        add(TraceRecord(kind: .dropped, time: d.lastTime, payload: notice.json.serialized()))
    }

    /// Compresses and writes the open chunk (one `write(2)`).
    func flushChunk() {
        guard chunkRecords > 0, stopReason == nil else { return }
        do {
            try writeChunk()
        } catch {
            stop(error)
        }
    }

    /// Writes the open chunk: its chunk header, its zstd frame and its summary frame, with one `write(2)`.
    private func writeChunk() throws(TraceError) {
        let headerSize = TraceFormat.chunkHeaderFrameSize
        let needed = headerSize + ZstdCompressor.bound(chunk.count)
        if out.count < needed { out = [UInt8](repeating: 0, count: needed) }
        let n = try compressor.compress(chunk, into: &out, at: headerSize)
        let summary = chunkSummary.summary
        var info = TraceChunkInfo(
            sequence: UInt32(index.count), offset: offset, compressedSize: UInt32(n), uncompressedSize: UInt32(chunk.count),
            firstRecord: records, recordCount: chunkRecords, minTime: Moment(nanoseconds: chunkMin),
            maxTime: Moment(nanoseconds: chunkMax), generations: summary.generations)
        info.frameCRC = out.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[headerSize..<(headerSize + n)])) }
        var head = [UInt8]()
        head.reserveCapacity(headerSize)
        FrameCodec.appendChunkHeader(info, to: &head)
        out.withUnsafeMutableBytes { o in
            head.withUnsafeBytes { h in o.baseAddress!.copyMemory(from: h.baseAddress!, byteCount: headerSize) }
        }
        summaryFrame.removeAll(keepingCapacity: true)
        FrameCodec.appendSummaryFrame(summary, sequence: info.sequence, frameCRC: info.frameCRC, to: &summaryFrame)
        let total = headerSize + n + summaryFrame.count
        if out.count < total { out.append(contentsOf: [UInt8](repeating: 0, count: total - out.count)) }
        out.withUnsafeMutableBytes { o in
            summaryFrame.withUnsafeBytes { s in (o.baseAddress! + headerSize + n).copyMemory(from: s.baseAddress!, byteCount: s.count) }
        }
        try out.withBytes { (o) throws(TraceError) in try sink.write(UnsafeRawBufferPointer(rebasing: o[0..<total])) }
        if options.sync == .everyChunk { try sink.sync() }
        offset += UInt64(total)
        index.append(info)
        records += UInt64(chunkRecords)
        lastTime = max(lastTime, chunkMax)
        resetChunk()
    }

    private func resetChunk() {
        chunk.removeAll(keepingCapacity: true)
        chunkRecords = 0
        chunkSummary.reset()
    }

    /// Stops after a write error: cuts off the partial chunk, writes a `writerStopped` record if the
    /// file still takes it, and refuses everything afterwards.
    private func stop(_ error: TraceError) {
        if chunksBeforeStop == nil { chunksBeforeStop = index.count }
        lost += UInt64(chunkRecords)
        let lastT = max(lastTime, chunkMax)
        resetChunk()
        stopReason = TraceError(.writerStopped, offset: offset, "the writer stopped: \(error.message)", errno: error.systemErrno)
        do {
            try sink.truncate(to: offset)
            var reason: [String: JSONValue] = ["reason": .string(error.message), "code": .string(error.code.rawValue)]
            if let e = error.systemErrno { reason["errno"] = .int(Int64(e)) }
            let r = TraceRecord(kind: .writerStopped, time: Moment(nanoseconds: lastT), payload: JSONValue.object(reason).serialized())
            chunkFirstTime = r.time.nanoseconds
            chunkMin = chunkFirstTime
            chunkMax = chunkFirstTime
            chunkSummary.add(r)
            FrameCodec.appendRecord(r, to: &chunk)
            chunkRecords = 1
            do {
                try writeChunk()
            } catch {
                resetChunk()
                try? sink.truncate(to: offset)
            }
        } catch {
            // The file cannot even be cut back: write nothing more.
        }
    }

    /// Chunks written before the writer stopped (nil while it has not stopped).
    private(set) var chunksBeforeStop: Int?

    /// Flushes, then writes the index and trailer and syncs (unless stopped); closes the sink. A stopped
    /// writer discards the file when it holds no record written before the stop, or when the options
    /// ask for it (`removeIncompleteFile`).
    func finish() -> Result<Void, TraceError> {
        flushChunk()
        if let stopReason {
            try? sink.close()
            if chunksBeforeStop == 0 || options.removeIncompleteFile { sink.discard() }
            return .failure(stopReason)
        }
        let indexFrame = FrameCodec.indexFrame(index)
        let trailer = TraceTrailer(
            flags: TraceTrailer.flagChunkSummaries, indexOffset: offset, indexFrameSize: UInt32(indexFrame.count), recordCount: records,
            droppedCount: 0, chunkCount: UInt32(index.count), maxTime: Moment(nanoseconds: lastTime))
        return finishWrite(indexFrame, trailer)
    }

    /// Total dropped to record in the trailer (set by the core just before `finish`).
    var droppedForTrailer: UInt64 = 0

    private func finishWrite(_ indexFrame: [UInt8], _ t: TraceTrailer) -> Result<Void, TraceError> {
        var trailer = t
        trailer.droppedCount = droppedForTrailer
        let bytes = indexFrame + FrameCodec.trailerFrame(trailer)
        do throws(TraceError) {
            try bytes.withBytes { (b) throws(TraceError) in try sink.write(b) }
            offset += UInt64(bytes.count)
            try sink.sync()
            try sink.close()
            return .success(())
        } catch {
            try? sink.truncate(to: offset)
            stopReason = TraceError(.writerStopped, offset: trailer.indexOffset, "closing failed: \(error.message)", errno: error.systemErrno)
            try? sink.close()
            if index.isEmpty || options.removeIncompleteFile { sink.discard() }
            return .failure(stopReason ?? error)
        }
    }
}
