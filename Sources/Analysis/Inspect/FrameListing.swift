public import RelayProtocol
public import Trace
import Sync

/// The records `relaytrace frames` lists for a filter, by two routes that give the same records.
///
/// The plain route builds every record (``InspectedRecord``), correlates RPCs, and filters. The fast
/// route (``fast(_:_:workers:render:_:)``) reads through a ``TraceScanner``: chunks outside the time
/// window are not read, chunks whose summary shows no possible match are not decompressed, the rest are
/// decompressed ahead on worker threads, and there records that cannot pass are rejected from their bytes
/// (``FrameByteTest``) before anything is built; the records that can are built, matched and rendered on
/// the workers, except RPC frames while correlation matters, which the caller's thread correlates in file
/// order. Output stays in record order.
///
/// Correlation sees the records at or after `--since` (so a window's output depends only on the window,
/// and the fast route need not read what lies before it).
public enum FrameListing {
    /// The plain route: every record through `filter`, `render` for each one that passes, `body` with
    /// its number (false from `body` stops). Returns the error that ended the reading, if any.
    public static func plain<T>(
        _ reader: TraceReader, _ filter: FrameFilter, render: (InspectedRecord) -> T, _ body: (UInt64, T) -> Bool
    ) -> TraceError? {
        var correlator = RpcCorrelator()
        do {
            while let e = try reader.next() {
                var rec = InspectedRecord(e)
                if filter.since.map({ e.record.time >= $0 }) ?? true { correlator.correlate(&rec) }
                guard filter.matches(rec) else { continue }
                if !body(rec.number, render(rec)) { return nil }
            }
        } catch {
            return error
        }
        return nil
    }

    /// What a worker makes of one record: rendered already, or left for the caller's thread to
    /// correlate (and then match and render when `mayMatch`).
    enum Piece<T: Sendable>: Sendable {
        case done(UInt64, T)
        case pending(InspectedRecord, mayMatch: Bool)
        /// A record that may pass or correlate, copied out but not built: the chunks decoded before the
        /// caller's thread has any output are handed over like this, so the first record is built and
        /// written as soon as its chunk is decompressed instead of after the whole chunk is rendered.
        case raw(UInt64, TraceRecord, mayMatch: Bool, mayCorrelate: Bool)
    }

    /// The fast route (same records, same order, same error as ``plain(_:_:render:_:)`` on the chunks it
    /// reads; see ``TraceScanner`` for what a skipped chunk is checked for). Returns the error that ended
    /// the reading, if any, and the problems skipped in salvage mode.
    public static func fast<T: Sendable>(
        _ reader: TraceReader, _ filter: FrameFilter, workers: Int = TraceScanPlan.defaultWorkers,
        render: @escaping @Sendable (InspectedRecord) -> T, _ body: (UInt64, T) -> Bool
    ) -> (error: TraceError?, problems: [TraceError]) {
        let test = filter.byteTest
        let correlate = filter.correlationMatters
        let since = filter.since
        var plan = TraceScanPlan()
        plan.workers = workers
        plan.since = filter.since
        plan.until = filter.until
        plan.wants = { c, s in filter.chunkMayMatch(c, s) || (correlate && FrameFilter.chunkMayCorrelate(s)) }
        // True until the caller's thread has the first chunk's output: the chunks workers take up before
        // then come back raw (see `Piece.raw`), at most about one per worker.
        let opening = Locked(true)
        let scanner = TraceScanner(reader: reader, plan: plan) { chunk, view -> [Piece<T>] in
            var out: [Piece<T>] = []
            let raw = opening.withLock { $0 }
            for i in 0..<view.count {
                let v = view[i]
                let may = test.mayMatch(v)
                let inWindow = since.map { v.time >= $0 } ?? true
                let mayCorrelate = correlate && inWindow && FrameFilter.mayCorrelate(v)
                guard may || mayCorrelate else { continue }
                if raw {
                    out.append(.raw(chunk.firstRecord + UInt64(i), v.record, mayMatch: may, mayCorrelate: mayCorrelate))
                    continue
                }
                let rec = InspectedRecord(number: chunk.firstRecord + UInt64(i), record: v.record, deferringJSON: !may)
                if mayCorrelate && RpcCorrelator.isRelevant(rec) {
                    out.append(.pending(rec, mayMatch: may))
                } else if may && filter.matches(rec) {
                    out.append(.done(rec.number, render(rec)))
                }
            }
            return out
        }
        var correlator = RpcCorrelator()
        do {
            while let (_, pieces) = try scanner.next() {
                opening.withLock { $0 = false }
                for p in pieces {
                    switch p {
                    case .done(let n, let t):
                        if !body(n, t) { return (nil, scanner.problems) }
                    case .pending(var rec, let may):
                        correlator.correlate(&rec)
                        if may && filter.matches(rec), !body(rec.number, render(rec)) { return (nil, scanner.problems) }
                    case .raw(let n, let record, let may, let mayCorrelate):
                        // What a worker would have done with it, in the same order.
                        var rec = InspectedRecord(number: n, record: record, deferringJSON: !may)
                        if mayCorrelate && RpcCorrelator.isRelevant(rec) { correlator.correlate(&rec) }
                        if may && filter.matches(rec), !body(rec.number, render(rec)) { return (nil, scanner.problems) }
                    }
                }
            }
        } catch {
            return (error, scanner.problems)
        }
        return (nil, scanner.problems)
    }
}

/// Every record of a trace (or of a time window) as ``InspectedRecord``s made on worker threads, in
/// order: what `stats`, `timeline` and `export` read. The records come with their JSON built on first use
/// (``InspectedRecord/init(number:record:deferringJSON:)``): the same fields, the same values.
public enum InspectedRecords {
    /// Calls `body` with every record at or after `since` and at or before `until` (false from `body`
    /// stops), reading through a ``TraceScanner`` (chunks outside the window are not read). Returns the
    /// error that ended the reading, if any.
    public static func read(
        _ reader: TraceReader, since: Moment? = nil, until: Moment? = nil, workers: Int = TraceScanPlan.defaultWorkers,
        _ body: (InspectedRecord) -> Bool
    ) -> TraceError? {
        var plan = TraceScanPlan()
        plan.workers = workers
        plan.since = since
        plan.until = until
        let scanner = TraceScanner(reader: reader, plan: plan) { chunk, view -> [InspectedRecord] in
            var out: [InspectedRecord] = []
            out.reserveCapacity(view.count)
            for i in 0..<view.count {
                let v = view[i]
                if let since, v.time < since { continue }
                if let until, v.time > until { continue }
                out.append(InspectedRecord(number: chunk.firstRecord + UInt64(i), record: v.record, deferringJSON: true))
            }
            return out
        }
        do {
            while let (_, records) = try scanner.next() {
                for i in records.indices where !body(records[i]) { return nil }
            }
        } catch {
            return error
        }
        return nil
    }

    /// The plain route of ``read(_:since:until:workers:_:)``: `reader.next()`, every record built at once.
    public static func plain(_ reader: TraceReader, since: Moment? = nil, until: Moment? = nil, _ body: (InspectedRecord) -> Bool) -> TraceError? {
        do {
            while let e = try reader.next() {
                if let since, e.record.time < since { continue }
                if let until, e.record.time > until { continue }
                if !body(InspectedRecord(e)) { return nil }
            }
        } catch {
            return error
        }
        return nil
    }
}

extension RpcCorrelator {
    /// Whether `correlate` would look at `rec` (an `rpc.request` or `rpc.response` text frame with an id):
    /// for any other record it changes nothing, neither the record nor the open requests.
    public static func isRelevant(_ rec: InspectedRecord) -> Bool {
        rec.record.kind == .frameText && rec.rpcId != nil && (rec.type == "rpc.request" || rec.type == "rpc.response")
    }
}
