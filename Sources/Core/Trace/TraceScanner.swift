import Dispatch
import Foundation
public import RelayProtocol
import Synchronization
import Sync

/// Which chunks a ``TraceScanner`` reads, and how many threads decode them.
public struct TraceScanPlan: Sendable {
    /// Only chunks whose time span reaches this time or later are read (records before it may still
    /// come in the first chunk; the caller filters records).
    public var since: Moment?
    /// Only chunks whose time span starts at or before this time are read.
    public var until: Moment?
    /// Says whether a chunk is needed, from its header (the index entry when the file has one, with its
    /// generations) and its summary frame (nil when it has none). A chunk it refuses is not decompressed;
    /// its zstd frame is still read and checked against its CRC-32C, so damage there is still reported.
    public var wants: (@Sendable (TraceChunkInfo, TraceChunkSummary?) -> Bool)?
    /// Threads that decompress and process chunks (the caller's thread walks the file and consumes the
    /// results in order). Default: one per processor, at most 8.
    public var workers: Int = TraceScanPlan.defaultWorkers
    /// At most this many uncompressed bytes are in flight (decoding or waiting to be consumed), and at
    /// most `2 * workers + 1` chunks; one chunk always may be.
    public var maxBytesInFlight: Int = 24 << 20

    /// One thread per processor (1...8).
    public static var defaultWorkers: Int { min(8, max(1, ProcessInfo.processInfo.activeProcessorCount)) }

    /// Every chunk, decoded on the default number of threads.
    public init() {}
}

/// Reads a trace a chunk at a time like ``TraceReader/next()``, but decompresses and processes chunks
/// ahead on worker threads and hands out each chunk's result in file order, with memory bounded by the
/// chunks in flight. It can skip what a caller does not need: chunks outside a time window are not
/// read (found through the index, or the chunk headers of an incomplete file), and chunks a
/// ``TraceScanPlan/wants`` predicate refuses from their header and summary are not decompressed.
///
/// Equivalence with the plain reader (checked by the tests on every golden trace, generated traces and
/// damaged ones): with no window and no `wants`, ``next()`` yields, chunk by chunk, exactly the records
/// `reader.next()` would yield, and throws the error it would throw, at the same point (after every
/// earlier chunk's result), or in salvage mode records the same problems and resumes at the same place.
/// The frames are walked by the reader's own code and decoded by its own checks; a worker only runs them
/// on its own thread. With a window, the result depends only on the chunks whose time span meets it (a
/// window covering the whole trace reads everything, as the plain reader). A chunk refused by `wants`
/// is checked by its CRC-32C only: damage that a CRC cannot see (a faulty writer's well-checksummed bad
/// chunk) is reported only when the chunk is needed.
///
/// Not thread-safe: one caller thread. The reader must not be used by anyone else while the scan runs.
public final class TraceScanner<Output: Sendable> {
    /// The reader whose file is scanned.
    public let reader: TraceReader
    /// The plan.
    public let plan: TraceScanPlan
    /// Problems skipped in salvage mode, in file order (as ``TraceReader/problems``).
    public private(set) var problems: [TraceError] = []
    /// Chunks decompressed so far.
    public private(set) var chunksDecoded = 0
    /// Chunks not decompressed: refused by `wants` (CRC checked) or outside the window (not read).
    public private(set) var chunksSkipped = 0

    private let queue: ScanQueue<Output>
    private var walk: WalkState
    private var items: [Item] = []
    private var walkerDone = false
    private var failure: TraceError?
    private var finished = false
    private var scanned: [TraceChunkInfo] = []
    private var nextSlot = 0
    private var bytesInFlight = 0
    /// Where to stop walking (past the last chunk the window needs), when the window ends early.
    private var stopAfter: UInt64?
    /// A summary frame to check once the chunk before it has been handed out.
    private var deferred: Item?
    private var started = false
    /// Whether the first chunk job has come back (decoded or only checked): until then only one chunk is
    /// in flight, so the first one (what a seek waits for) has the processor to itself instead of sharing
    /// it with the chunks after it. Any result opens the scan, so a scan whose first chunks `wants`
    /// refuses does not check them one at a time.
    private var opened = false

    private enum Item {
        /// A chunk: its job's slot (nil when it is outside the window), whether it is decoded, the walk after
        /// it, and its summary frame's step with the walk after that.
        case chunk(info: TraceChunkInfo, slot: Int?, decode: Bool, walkAfter: WalkState, summary: (TraceChunkSummary, WalkStep, WalkState)?)
        /// A summary's check failed (found by the worker) or must run: the chunk's summary step.
        case summaryMismatch(WalkStep, walkBefore: WalkState)
        /// Another frame.
        case frame(WalkStep, walkAfter: WalkState)
        /// A problem the walk met, with the walk where it stopped.
        case failure(TraceError, walkAt: WalkState)
    }

    /// A scan of `reader`'s file (from its first chunk, whatever the reader's position) with `plan`;
    /// `work` turns each decoded chunk into the output handed out for it (on a worker thread).
    public init(reader: TraceReader, plan: TraceScanPlan = TraceScanPlan(), work: @escaping @Sendable (TraceChunkInfo, TraceChunkView) -> Output) {
        self.reader = reader
        self.plan = plan
        var w = WalkState(cursor: reader.dataOffset)
        if let trailer = reader.trailer { w.summaries = trailer.flags & TraceTrailer.flagChunkSummaries != 0 }
        walk = w
        queue = ScanQueue(workers: max(1, plan.workers), maxChunkSize: reader.options.maxChunkSize, work: work)
    }

    deinit { queue.close() }

    private var salvage: Bool { reader.options.salvage }

    /// Positions the walk at the first chunk the window needs (and where it may stop), once.
    private func start() {
        started = true
        guard plan.since != nil || plan.until != nil else { return }
        let table: [TraceChunkInfo]
        do { table = try reader.chunks() } catch { return }  // the walk from the start meets the problem
        let since = plan.since ?? Moment(nanoseconds: .min)
        let until = plan.until ?? Moment(nanoseconds: .max)
        let meets = table.indices.filter { table[$0].maxTime >= since && table[$0].minTime <= until && table[$0].recordCount > 0 }
        guard let first = meets.first, let last = meets.last else {
            // No listed chunk meets the window: a complete file has nothing for it; an incomplete one is
            // walked on from its last listed chunk, where a problem (or more chunks) may follow.
            if reader.isComplete {
                walkerDone = true
            } else if let end = table.last {
                jump(to: end)
                walk.cursor = end.endOffset
                walk.afterChunk = end
                walk.nextRecord = end.firstRecord + UInt64(end.recordCount)
                walk.nextSequence = end.sequence &+ 1
            }
            return
        }
        if first > 0 { jump(to: table[first]) }
        if last < table.count - 1 { stopAfter = table[last + 1].offset }
    }

    private func jump(to c: TraceChunkInfo) {
        walk.cursor = c.offset
        walk.fromStart = false
        walk.nextRecord = c.firstRecord
        walk.nextSequence = c.sequence
        walk.afterChunk = nil
    }

    /// The next chunk's output in file order, or nil at the end. Throws the first problem met after every
    /// earlier chunk's output, and keeps throwing it; in salvage mode only I/O errors.
    public func next() throws(TraceError) -> (chunk: TraceChunkInfo, output: Output)? {
        if !started { start() }
        while true {
            if let failure { throw failure }
            if let d = deferred {
                deferred = nil
                if case .summaryMismatch(let step, let before) = d {
                    let e = TraceError(.corrupt, offset: step.offset, "the summary frame of chunk \(summarySequence(step)) does not describe its records; the summary is damaged or was written by a faulty writer")
                    try handle(e, walkAt: before)
                    continue
                }
            }
            if finished { return nil }
            fill()
            guard !items.isEmpty else {
                finished = true
                return nil
            }
            let item = items.removeFirst()
            switch item {
            case .failure(let e, let at):
                try handle(e, walkAt: at)
            case .frame(let step, let after):
                if case .index(let chunks) = step.event, after.fromStart, !salvage {
                    do throws(TraceError) { try reader.checkIndex(chunks, against: scanned, at: step.offset) } catch {
                        try handle(error, walkAt: walkBefore(step, after))
                        continue
                    }
                }
                walk = after
                if case .end = step.event { finished = true }
                if case .trailer = step.event { finished = true }
            case .chunk(let info, let slot, _, let after, let summary):
                guard let slot else {
                    chunksSkipped += 1
                    if after.fromStart { scanned.append(indexEntry(info) ?? info) }
                    walk = summary?.2 ?? after
                    continue
                }
                let result = queue.wait(for: slot)
                opened = true
                bytesInFlight -= Int(info.uncompressedSize)
                var before = after
                before.cursor = info.offset
                switch result {
                case .failure(let e):
                    try handle(e, walkAt: before)
                    continue
                case .checked:
                    chunksSkipped += 1
                    if after.fromStart {
                        var done = info
                        done.generations = indexEntry(info)?.generations ?? summary?.0.generations ?? []
                        scanned.append(done)
                    }
                    walk = summary?.2 ?? after
                case .output(let output, let generations, let mismatch):
                    chunksDecoded += 1
                    if after.fromStart {
                        var done = info
                        done.generations = generations
                        scanned.append(done)
                    }
                    walk = after
                    if let (_, step, afterSummary) = summary {
                        if mismatch {
                            deferred = .summaryMismatch(step, walkBefore: after)
                        } else {
                            walk = afterSummary
                        }
                    }
                    return (info, output)
                }
            case .summaryMismatch:
                break
            }
        }
    }

    private func summarySequence(_ step: WalkStep) -> UInt32 {
        if case .summary(_, let c) = step.event { return c.sequence }
        return 0
    }

    /// The walk as it was before the frame of `step` (the one `after` follows).
    private func walkBefore(_ step: WalkStep, _ after: WalkState) -> WalkState {
        var w = after
        w.cursor = step.offset
        return w
    }

    private func indexEntry(_ c: TraceChunkInfo) -> TraceChunkInfo? {
        guard let index = reader.index, Int(c.sequence) < index.count, index[Int(c.sequence)].offset == c.offset else { return nil }
        return index[Int(c.sequence)]
    }

    /// A problem in file order: stop (and keep throwing it), or in salvage mode note it, drop everything
    /// walked past it and resume at the next chunk header after the frame it was found at.
    private func handle(_ e: TraceError, walkAt: WalkState) throws(TraceError) {
        guard salvage && e.code != .io else {
            failure = e
            throw e
        }
        problems.append(e)
        cancelAhead()
        walk = walkAt
        walk.fromStart = false
        walk.seenIndex = nil
        walk.afterChunk = nil
        let (found, bytes) = TraceReader.findChunkHeader(in: reader.source, from: walk.cursor + 1)
        reader.noteBytesRead(bytes)
        if let found {
            walk.cursor = found
        } else {
            walk.finished = true
            finished = true
        }
        walkerDone = finished
    }

    /// Forgets every item walked ahead (their jobs' results are dropped).
    private func cancelAhead() {
        for item in items {
            if case .chunk(let info, let slot?, _, _, _) = item {
                queue.discard(slot)
                bytesInFlight -= Int(info.uncompressedSize)
            }
        }
        items.removeAll()
        deferred = nil
        walkerDone = false
    }

    /// Walks ahead, submitting chunk jobs, while the bounds allow.
    private func fill() {
        let depth = opened ? 2 * max(1, plan.workers) + 1 : 1
        var ahead = walk
        if let last = items.last { ahead = Self.walkAfter(last) ?? ahead }
        while !walkerDone && items.count < depth && (bytesInFlight < plan.maxBytesInFlight || items.isEmpty) {
            if ahead.finished || (stopAfter.map { ahead.cursor >= $0 } ?? false) {
                walkerDone = true
                break
            }
            var w = ahead
            let step: WalkStep
            do { step = try reader.walkFrame(&w) } catch {
                items.append(.failure(error, walkAt: ahead))
                walkerDone = true
                break
            }
            switch step.event {
            case .chunk(let info):
                // The summary frame, if the chunk has one, comes next: read it before deciding (anything
                // else there is walked again, and judged, by the next turn).
                var sw = w
                var summary: (TraceChunkSummary, WalkStep, WalkState)?
                if let s = try? reader.walkFrame(&sw), case .summary(let sum, _) = s.event { summary = (sum, s, sw) }
                let since = plan.since ?? Moment(nanoseconds: .min)
                let until = plan.until ?? Moment(nanoseconds: .max)
                let meets = info.recordCount == 0 || (info.maxTime >= since && info.minTime <= until)
                if !meets {
                    items.append(.chunk(info: info, slot: nil, decode: false, walkAfter: w, summary: summary))
                } else {
                    let entry = indexEntry(info)
                    // A walk from the start checks the index against the chunks' generations: a chunk whose
                    // generations neither the index nor a summary gives is decoded, whatever `wants` says.
                    let generationsKnown = entry != nil || summary != nil || !w.fromStart
                    let decode = !generationsKnown || (plan.wants.map { $0(entry ?? info, summary?.0) } ?? true)
                    let slot = nextSlot
                    nextSlot += 1
                    let frame: [UInt8]
                    do { frame = try reader.readChunkFrame(info) } catch {
                        var before = w
                        before.cursor = info.offset
                        items.append(.failure(error, walkAt: before))
                        walkerDone = true
                        break
                    }
                    queue.submit(ScanJob(slot: slot, info: info, frame: frame, decode: decode, summary: decode ? summary?.0 : nil))
                    bytesInFlight += Int(info.uncompressedSize)
                    items.append(.chunk(info: info, slot: slot, decode: decode, walkAfter: w, summary: summary))
                }
                ahead = summary?.2 ?? w
            case .summary:
                // Only right after a chunk (handled above); walkFrame refuses it elsewhere.
                items.append(.frame(step, walkAfter: w))
                ahead = w
            case .end, .trailer:
                items.append(.frame(step, walkAfter: w))
                walkerDone = true
                ahead = w
            case .index, .skipped:
                items.append(.frame(step, walkAfter: w))
                ahead = w
            }
        }
    }

    private static func walkAfter(_ item: Item) -> WalkState? {
        switch item {
        case .chunk(_, _, _, let after, let summary): summary?.2 ?? after
        case .frame(_, let after): after
        case .failure, .summaryMismatch: nil
        }
    }
}

/// One chunk for a worker: its zstd frame, and whether to decode it (else only its CRC is checked).
struct ScanJob: Sendable {
    var slot: Int
    var info: TraceChunkInfo
    var frame: [UInt8]
    var decode: Bool
    /// The summary to check the decoded records against.
    var summary: TraceChunkSummary?
}

/// What a worker made of a job.
enum ScanResult<Output: Sendable>: Sendable {
    /// Decoded: the caller's output, the generations the records mention, and whether they contradict
    /// the chunk's summary frame.
    case output(Output, [UInt64], summaryMismatch: Bool)
    /// Not decoded; its CRC-32C checks out.
    case checked
    /// The chunk is damaged.
    case failure(TraceError)
}

/// The jobs and results shared by a scanner and its worker threads.
final class ScanQueue<Output: Sendable>: Sendable {
    private struct State {
        var jobs: [ScanJob] = []
        var head = 0
        var results: [Int: ScanResult<Output>] = [:]
        var discarded = Set<Int>()
        var closed = false
    }

    private let state = Locked(State())
    private let jobReady = DispatchSemaphore(value: 0)
    private let resultReady = DispatchSemaphore(value: 0)
    private let workers: Int

    init(workers: Int, maxChunkSize: Int, work: @escaping @Sendable (TraceChunkInfo, TraceChunkView) -> Output) {
        self.workers = workers
        for i in 0..<workers {
            let t = Thread { [self] in self.run(work: work) }
            t.name = "relaytrace.scan.\(i)"
            t.start()
        }
    }

    func submit(_ job: ScanJob) {
        state.withLock { $0.jobs.append(job) }
        jobReady.signal()
    }

    /// Blocks until the result of `slot` is in, and takes it.
    func wait(for slot: Int) -> ScanResult<Output> {
        while true {
            if let r = state.withLock({ s -> ScanResult<Output>? in s.results.removeValue(forKey: slot) }) { return r }
            resultReady.wait()
        }
    }

    /// Drops the job of `slot` (or its result when it comes).
    func discard(_ slot: Int) {
        state.withLock { s in
            if s.results.removeValue(forKey: slot) == nil { s.discarded.insert(slot) }
        }
    }

    /// Stops the workers (they finish the job in hand).
    func close() {
        state.withLock { $0.closed = true }
        for _ in 0..<workers { jobReady.signal() }
    }

    private func run(work: @Sendable (TraceChunkInfo, TraceChunkView) -> Output) {
        guard let decompressor = try? ZstdDecompressor() else { return }
        var buffer: [UInt8] = []
        var starts: [Int] = []
        while true {
            jobReady.wait()
            let taken = state.withLock { s -> ScanJob?? in
                if s.closed { return .some(nil) }
                guard s.head < s.jobs.count else { return nil }
                let j = s.jobs[s.head]
                s.jobs[s.head].frame = []
                s.head += 1
                if s.head > 64 && s.head * 2 > s.jobs.count {
                    s.jobs.removeFirst(s.head)
                    s.head = 0
                }
                if s.discarded.remove(j.slot) != nil { return .some(.none) }
                return j
            }
            guard let maybe = taken else { continue }
            guard let job = maybe else {
                if state.withLock({ $0.closed }) { return }
                continue
            }
            let result = Self.process(job, decompressor: decompressor, buffer: &buffer, starts: &starts, work: work)
            state.withLock { s in
                if s.discarded.remove(job.slot) == nil { s.results[job.slot] = result }
            }
            resultReady.signal()
        }
    }

    private static func process(
        _ job: ScanJob, decompressor: ZstdDecompressor, buffer: inout [UInt8], starts: inout [Int],
        work: @Sendable (TraceChunkInfo, TraceChunkView) -> Output
    ) -> ScanResult<Output> {
        do throws(TraceError) {
            guard job.decode else {
                try TraceReader.checkFrameCRC(job.info, frame: job.frame)
                return .checked
            }
            let generations = try TraceReader.decodeChunkFrame(job.info, frame: job.frame, decompressor: decompressor, into: &buffer, starts: &starts)
            let size = Int(job.info.uncompressedSize)
            return buffer.withUnsafeBytes { b -> ScanResult<Output> in
                let view = TraceChunkView(bytes: UnsafeRawBufferPointer(rebasing: b[0..<size]), starts: starts)
                var mismatch = false
                if let expected = job.summary {
                    var builder = TraceChunkSummary.Builder()
                    for i in 0..<view.count {
                        let r = view[i]
                        builder.add(kind: r.kindValue, flags: r.flags, channel: r.channelValue, generation: r.generation, payload: r.payload)
                    }
                    mismatch = builder.summary != expected
                }
                return .output(work(job.info, view), generations, summaryMismatch: mismatch)
            }
        } catch {
            return .failure(error)
        }
    }
}
