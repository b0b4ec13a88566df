public import RelayProtocol
public import Trace

/// Counts and bytes of one category.
public struct CountAndBytes: Sendable, Hashable {
    /// Records.
    public var count: UInt64 = 0
    /// Payload bytes.
    public var bytes: UInt64 = 0
}

/// What happened to one transport generation.
public struct GenerationSummary: Sendable, Hashable {
    /// The generation.
    public var generation: UInt64
    /// First record of the generation (usually `transportOpen`).
    public var firstSeen: Moment
    /// Last record of the generation.
    public var lastSeen: Moment
    /// When `transportOpen` was recorded.
    public var open: Moment?
    /// When the socket opened.
    public var opened: Moment?
    /// When `register` was sent.
    public var registerSent: Moment?
    /// When `registered` / `resumed` arrived.
    public var registered: Moment?
    /// Whether the registration was a resume.
    public var resumed = false
    /// When the socket closed or failed.
    public var closed: Moment?
    /// The close code, when given.
    public var closeCode: Int64?
    /// Why it closed or failed (`1001 bye`, `watchdog`, `error: ...`).
    public var closeReason: String?
    /// Frames in / out.
    public var framesIn: UInt64 = 0
    /// Frames out.
    public var framesOut: UInt64 = 0

    /// From first to last record (or close).
    public var duration: Duration { (closed ?? lastSeen) - (open ?? opened ?? firstSeen) }
}

/// Latency figures of one RPC method.
public struct LatencySummary: Sendable, Hashable {
    /// Requests sent.
    public var requests: UInt64 = 0
    /// Responses matched to a request.
    public var responses: UInt64 = 0
    /// Responses carrying an error.
    public var errors: UInt64 = 0
    /// Latencies of matched (final) responses, nanoseconds.
    public var latencies: [Int64] = []

    /// No requests yet.
    public init() {}

    /// The `q` quantile (0...1, nearest rank) in nanoseconds, nil without samples.
    public func quantile(_ q: Double) -> Int64? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }
}

/// Interval statistics (heartbeat spacing, lease renewal spacing), nanoseconds.
public struct IntervalSummary: Sendable, Hashable {
    /// Intervals seen.
    public var count: UInt64 = 0
    /// Sum of intervals.
    public var sum: Double = 0
    /// Sum of squares.
    public var sumSquares: Double = 0
    /// Smallest interval.
    public var min: Int64 = .max
    /// Largest interval.
    public var max: Int64 = .min

    /// Adds one interval.
    public mutating func add(_ ns: Int64) {
        count += 1
        sum += Double(ns)
        sumSquares += Double(ns) * Double(ns)
        min = Swift.min(min, ns)
        max = Swift.max(max, ns)
    }

    /// The mean interval (ns).
    public var mean: Double { count == 0 ? 0 : sum / Double(count) }
    /// The standard deviation (ns): the jitter.
    public var standardDeviation: Double {
        guard count > 1 else { return 0 }
        let m = mean
        return (Swift.max(0, sumSquares / Double(count) - m * m)).squareRoot()
    }

    /// `{count, meanMs, stddevMs, minMs, maxMs}`.
    public var json: JSONValue {
        guard count > 0 else { return ["count": 0] }
        return ["count": .int(Int64(count)), "meanMs": .double(mean / 1e6), "stddevMs": .double(standardDeviation / 1e6),
                "minMs": .double(Double(min) / 1e6), "maxMs": .double(Double(max) / 1e6)]
    }
}

/// The figures of `relaytrace stats`, accumulated one record at a time (memory grows with generations,
/// methods, leases and RPC latencies, not with frames).
public struct TraceStats: Sendable {
    /// The interval at which a lease is renewed (SPEC A11: every 20 s).
    public static let leaseRenewal: Duration = .seconds(20)
    /// A renewal later than this after the previous one is late (renewal + 25 %).
    public static let leaseLate: Duration = .seconds(25)
    /// A renewal later than this after the previous one came after the lease expired (two intervals).
    public static let leaseExpiry: Duration = .seconds(40)

    /// Records seen.
    public private(set) var records: UInt64 = 0
    /// Per record kind.
    public var kinds: [String: CountAndBytes] {
        Dictionary(uniqueKeysWithValues: kindCounts.map { (RecordKind(rawValue: $0.key).name, $0.value) })
    }
    private var kindCounts: [UInt16: CountAndBytes] = [:]
    /// Per relay message type (text frames; `(not json)` for the rest).
    public private(set) var types: [String: CountAndBytes] = [:]
    /// Per event type.
    public private(set) var events: [String: CountAndBytes] = [:]
    /// Per RPC method.
    public private(set) var rpc: [String: LatencySummary] = [:]
    /// Per generation, in order of appearance.
    public private(set) var generations: [GenerationSummary] = []
    private var generationIndex: [UInt64: Int] = [:]
    /// Outbound heartbeat spacing within a generation.
    public private(set) var heartbeats = IntervalSummary()
    /// Heartbeats sent (outbound `heartbeat` messages).
    public private(set) var heartbeatsSent: UInt64 = 0
    /// Pongs received (inbound `pong` messages).
    public private(set) var pongsReceived: UInt64 = 0
    /// WebSocket ping and pong control frames (wire traces), both ways.
    public private(set) var controlFrames: (pings: UInt64, pongs: UInt64) = (0, 0)
    private var calls = RpcCallTracker()
    /// The RPCs that got no final response, in the order they were sent, each with why it ended (the
    /// first `maxUnansweredKept`; ``unansweredCount`` counts them all). Complete after ``finish()``.
    public private(set) var unanswered: [RpcCall] = []
    /// How many RPCs got no final response.
    public private(set) var unansweredCount = 0
    /// The most unanswered RPCs kept with their story.
    public static let maxUnansweredKept = 1000
    private var lastHeartbeat: [UInt64: Moment] = [:]
    /// Lease renewals (outbound active `chat:timeline-interest`) per lease session.
    public private(set) var leaseRenewals: [String: UInt64] = [:]
    /// Spacing of renewals of the same lease.
    public private(set) var leaseIntervals = IntervalSummary()
    /// Renewals later than `leaseLate`.
    public private(set) var leaseLateCount: UInt64 = 0
    /// Renewals later than `leaseExpiry` (a gap in the lease).
    public private(set) var leaseGaps: UInt64 = 0
    private var lastRenewal: [String: Moment] = [:]
    private var correlator = RpcCorrelator()
    /// First and last record times.
    public private(set) var firstTime: Moment?
    /// Last record time.
    public private(set) var lastTime: Moment?

    /// Empty statistics.
    public init() {}

    /// Reconnects: generations opened after the first.
    public var reconnects: Int { max(0, generations.count - 1) }

    /// Adds one record (uncorrelated: the stats correlate RPCs themselves).
    public mutating func add(_ input: InspectedRecord) {
        // Only an RPC frame changes in correlation: others are read as they came (no copy).
        if RpcCorrelator.isRelevant(input) {
            var rec = input
            correlator.correlate(&rec)
            add(correlated: rec)
        } else {
            add(correlated: input)
        }
    }

    /// Whether ``add(_:)`` reads more of a record of this kind than its header (its message type, its
    /// JSON): text frames and socket ends. A record of any other kind adds exactly what its
    /// ``RecordHeaderFacts`` do with ``add(header:)``.
    public static func needsPayload(_ kind: RecordKind) -> Bool {
        kind == .frameText || kind == .transportClosed || kind == .transportFailed
    }

    /// Whether ``add(_:)`` reads more of this record than its header: ``needsPayload(_:)``, and the
    /// client's records an RPC's end is told by (``RpcCallTracker``: `call` inputs, `rpcTimeout` timers,
    /// `callCompleted`), found by their bytes (`callId`, `rpcTimeout`). The rest add exactly what
    /// ``add(header:)`` adds.
    public static func needsPayload(_ kind: RecordKind, payload: UnsafeRawBufferPointer) -> Bool {
        if needsPayload(kind) { return true }
        guard kind == .input || kind == .action || kind == .timerFired else { return false }
        return callNeedles.contains { ByteSearch.contains($0, in: payload) }
    }

    static let callNeedles: [[UInt8]] = [Array("callId".utf8), Array("rpcTimeout".utf8)]

    /// Adds one record of a kind that needs only its header (not ``needsPayload(_:)``): the same figures
    /// as ``add(_:)`` with the whole record.
    public mutating func add(header h: RecordHeaderFacts) {
        addHeader(h)
        calls.addHeader(kind: h.kind, direction: h.direction)
        if let g = h.generation, h.channel == .relay { _ = generationSlot(g, h) }
    }

    private mutating func addHeader(_ h: RecordHeaderFacts) {
        if h.kind == .ping { controlFrames.pings += 1 }
        if h.kind == .pong { controlFrames.pongs += 1 }
        records += 1
        kindCounts[h.kind.rawValue, default: .init()].add(h.bytes)
        firstTime = min(firstTime ?? h.time, h.time)
        lastTime = max(lastTime ?? h.time, h.time)
    }

    private mutating func add(correlated rec: InspectedRecord) {
        let r = rec.record
        let h = RecordHeaderFacts(r)
        addHeader(h)
        let n = h.bytes
        if r.kind == .frameText {
            types[rec.type ?? "(not json)", default: .init()].add(n)
            if let e = rec.eventType { events[e, default: .init()].add(n) }
        }
        if rec.type == "rpc.request", let m = rec.method { rpc[m, default: .init()].requests += 1 }
        if rec.type == "rpc.response", let m = rec.method, let l = rec.latency {
            rpc[m, default: .init()].responses += 1
            let err = rec.json?["error"] ?? rec.json?["payload"]?["error"]
            if let err, !err.isNull { rpc[m, default: .init()].errors += 1 }
            let partial = (rec.json?["isFinal"] ?? rec.json?["payload"]?["isFinal"])?.boolValue == false
            if !partial { rpc[m, default: .init()].latencies.append(l.nanoseconds) }
        }
        if let g = r.generation, r.channel == .relay { updateGeneration(generationSlot(g, h), rec) }
        for case .ended(let call) in calls.add(rec) where !call.isAnswered { noteUnanswered(call) }
        if r.kind == .frameText, r.direction == .inbound, rec.type == "pong" { pongsReceived += 1 }
        if r.kind == .frameText, r.direction == .outbound {
            if rec.type == "heartbeat" { heartbeatsSent += 1 }
            if rec.type == "heartbeat", let g = r.generation {
                if let last = lastHeartbeat[g] { heartbeats.add((r.time - last).nanoseconds) }
                lastHeartbeat[g] = r.time
            }
            if rec.eventType == "chat:timeline-interest", let p = rec.eventPayload {
                let lease = p["sessionId"]?.stringValue ?? p["appSessionId"]?.stringValue ?? "?"
                if p["active"]?.boolValue == false {
                    lastRenewal[lease] = nil
                } else {
                    leaseRenewals[lease, default: 0] += 1
                    if let last = lastRenewal[lease] {
                        let gap = r.time - last
                        leaseIntervals.add(gap.nanoseconds)
                        if gap > Self.leaseExpiry { leaseGaps += 1 } else if gap > Self.leaseLate { leaseLateCount += 1 }
                    }
                    lastRenewal[lease] = r.time
                }
            }
        }
    }

    private mutating func noteUnanswered(_ call: RpcCall) {
        unansweredCount += 1
        if unanswered.count < Self.maxUnansweredKept { unanswered.append(call) }
    }

    /// Ends the statistics: the RPCs still open are unanswered (ended by their socket, or pending).
    public mutating func finish() {
        for call in calls.finish() { noteUnanswered(call) }
    }

    /// The generation's entry (made on its first record), updated with what the header says.
    private mutating func generationSlot(_ g: UInt64, _ h: RecordHeaderFacts) -> Int {
        let i: Int
        if let k = generationIndex[g] { i = k } else {
            i = generations.count
            generationIndex[g] = i
            generations.append(GenerationSummary(generation: g, firstSeen: h.time, lastSeen: h.time))
        }
        generations[i].lastSeen = max(generations[i].lastSeen, h.time)
        switch h.kind {
        case .transportOpen: generations[i].open = generations[i].open ?? h.time
        case .transportOpened: generations[i].opened = generations[i].opened ?? h.time
        case .frameBinary, .frameText:
            if h.direction == .inbound { generations[i].framesIn += 1 } else { generations[i].framesOut += 1 }
        default: break
        }
        return i
    }

    /// What the payload of a record adds to its generation's entry `i`.
    private mutating func updateGeneration(_ i: Int, _ rec: InspectedRecord) {
        let r = rec.record
        switch r.kind {
        case .transportClosed, .transportFailed:
            guard generations[i].closed == nil else { break }
            generations[i].closed = r.time
            generations[i].closeCode = rec.json?["code"]?.intValue
            var why = [String]()
            if let c = rec.json?["code"]?.intValue { why.append(String(c)) }
            if let s = rec.json?["reason"]?.stringValue, !s.isEmpty { why.append(s) }
            if let e = rec.json?["error"]?.stringValue { why.append("failed: " + e) }
            if let st = rec.json?["status"]?.intValue { why.append("HTTP \(st)") }
            if r.direction == .outbound || (r.kind == .transportClosed && r.direction == nil && why.isEmpty) { why.insert("by client", at: 0) }
            generations[i].closeReason = why.isEmpty ? (r.kind == .transportFailed ? "failed" : "closed") : why.joined(separator: " ")
        case .frameText:
            if rec.type == "register", r.direction == .outbound { generations[i].registerSent = generations[i].registerSent ?? r.time }
            if (rec.type == "registered" || rec.type == "resumed"), r.direction == .inbound, generations[i].registered == nil {
                generations[i].registered = r.time
                generations[i].resumed = rec.type == "resumed"
            }
        default: break
        }
    }

    /// The figures as JSON (`stats --format json`).
    public var json: JSONValue {
        func cb(_ d: [String: CountAndBytes]) -> JSONValue {
            .object(d.mapValues { ["count": .int(Int64($0.count)), "bytes": .int(Int64($0.bytes))] })
        }
        func ms(_ ns: Int64?) -> JSONValue { ns.map { .double(Double($0) / 1e6) } ?? .null }
        func t(_ m: Moment?) -> JSONValue { m.map { .double($0.seconds) } ?? .null }
        let methods: [String: JSONValue] = rpc.mapValues { l in
            ["requests": .int(Int64(l.requests)), "responses": .int(Int64(l.responses)), "errors": .int(Int64(l.errors)),
             "p50Ms": ms(l.quantile(0.5)), "p90Ms": ms(l.quantile(0.9)), "p99Ms": ms(l.quantile(0.99)),
             "maxMs": ms(l.latencies.max())]
        }
        let gens: [JSONValue] = generations.map { g in
            ["gen": .int(Int64(bitPattern: g.generation)), "open": t(g.open ?? g.firstSeen), "opened": t(g.opened),
             "registerSent": t(g.registerSent), "registered": t(g.registered), "resumed": .bool(g.resumed),
             "closed": t(g.closed), "closeCode": g.closeCode.map { .int($0) } ?? .null,
             "closeReason": g.closeReason.map { .string($0) } ?? .null,
             "durationS": .double(g.duration.seconds), "framesIn": .int(Int64(g.framesIn)), "framesOut": .int(Int64(g.framesOut))]
        }
        return [
            "records": .int(Int64(records)),
            "firstTime": t(firstTime), "lastTime": t(lastTime),
            "kinds": cb(kinds), "types": cb(types), "events": cb(events),
            "rpc": .object(methods),
            "generations": .array(gens),
            "reconnects": .int(Int64(reconnects)),
            "heartbeatIntervals": heartbeats.json,
            "heartbeats": ["sent": .int(Int64(heartbeatsSent)), "pongs": .int(Int64(pongsReceived)),
                           "wsPings": .int(Int64(controlFrames.pings)), "wsPongs": .int(Int64(controlFrames.pongs))],
            "unanswered": .array(unanswered.map { c in
                ["id": .string(c.requestId), "method": c.method.map { .string($0) } ?? .null,
                 "gen": c.generation.map { .int(Int64(bitPattern: $0)) } ?? .null, "callId": c.callId.map { .int($0) } ?? .null,
                 "sent": t(c.sent), "ended": t(c.ended), "why": .string(c.why)]
            }),
            "leases": ["renewals": .object(leaseRenewals.mapValues { .int(Int64($0)) }), "intervals": leaseIntervals.json,
                       "late": .int(Int64(leaseLateCount)), "gaps": .int(Int64(leaseGaps))],
            "openRequests": .int(Int64(unansweredCount)),
        ]
    }

    /// The figures as aligned text.
    public var text: String {
        var out = ""
        func line(_ s: String) { out += s + "\n" }
        func pad(_ s: String, _ w: Int) -> String { s.count >= w ? s + " " : s + String(repeating: " ", count: w - s.count) }
        func ms(_ ns: Int64?) -> String { ns.map { InspectedRecord.milliseconds(.nanoseconds($0)) } ?? "-" }
        line("records: \(records), \(firstTime ?? .zero) ... \(lastTime ?? .zero)")
        for (title, table) in [("kinds", kinds), ("types", types), ("events", events)] where !table.isEmpty {
            line("")
            line(pad(title, 32) + pad("count", 10) + "bytes")
            for (k, v) in table.sorted(by: { $0.key < $1.key }) { line("  " + pad(k, 30) + pad(String(v.count), 10) + String(v.bytes)) }
        }
        if !rpc.isEmpty {
            line("")
            line(pad("rpc method", 32) + pad("req", 6) + pad("resp", 6) + pad("err", 5) + pad("p50", 10) + pad("p90", 10) + pad("p99", 10) + "max")
            for (m, l) in rpc.sorted(by: { $0.key < $1.key }) {
                line("  " + pad(m, 30) + pad(String(l.requests), 6) + pad(String(l.responses), 6) + pad(String(l.errors), 5)
                     + pad(ms(l.quantile(0.5)), 10) + pad(ms(l.quantile(0.9)), 10) + pad(ms(l.quantile(0.99)), 10) + ms(l.latencies.max()))
            }
        }
        line("")
        line("generations: \(generations.count), reconnects: \(reconnects)")
        for g in generations {
            var s = "  g\(g.generation): open \(g.open ?? g.firstSeen)"
            if let r = g.registered { s += ", \(g.resumed ? "resumed" : "registered") \(r)" } else if g.registerSent != nil { s += ", registration NEVER completed" }
            if let c = g.closed { s += ", closed \(c) (\(g.closeReason ?? "?"))" } else { s += ", still open at end" }
            s += ", duration \(Moment(nanoseconds: g.duration.nanoseconds)), frames \(g.framesIn) in / \(g.framesOut) out"
            line(s)
        }
        func iv(_ s: IntervalSummary) -> String {
            s.count == 0 ? "none" : "\(s.count) intervals, mean \(ms(Int64(s.mean))), jitter (stddev) \(ms(Int64(s.standardDeviation))), min \(ms(s.min)), max \(ms(s.max))"
        }
        var hb = "heartbeats: \(heartbeatsSent) sent, \(pongsReceived) pong\(pongsReceived == 1 ? "" : "s") received"
        if controlFrames.pings + controlFrames.pongs > 0 { hb += ", WebSocket pings \(controlFrames.pings), pongs \(controlFrames.pongs)" }
        hb += "; spacing: " + (heartbeats.count == 0 && heartbeatsSent > 0 ? "none (it takes two heartbeats on one socket)" : iv(heartbeats))
        line(hb)
        let renewals = leaseRenewals.values.reduce(0, +)
        line("leases: \(renewals) renewals of \(leaseRenewals.count) lease(s), \(leaseLateCount) late, \(leaseGaps) gaps; spacing: \(iv(leaseIntervals))")
        if unansweredCount > 0 {
            line("unanswered rpc requests: \(unansweredCount)")
            for c in unanswered {
                var s = "  \(c.method ?? "?") id=\(c.requestId)" + (c.generation.map { " on g\($0)" } ?? "") + ", sent \(c.sent): \(c.why)"
                if let e = c.ended { s += " at \(e) (\(Moment(nanoseconds: (e - c.sent).nanoseconds)) after it was sent)" }
                line(s)
            }
            if unansweredCount > unanswered.count { line("  ... \(unansweredCount - unanswered.count) more (stats --format json lists the first \(Self.maxUnansweredKept))") }
        }
        return out
    }
}

/// The header fields of a record, which are all ``TraceStats`` needs of most kinds.
public struct RecordHeaderFacts: Sendable {
    /// The kind.
    public var kind: RecordKind
    /// The channel.
    public var channel: TraceChannel
    /// The generation, if any.
    public var generation: UInt64?
    /// The direction, if any.
    public var direction: FrameDirection?
    /// The time.
    public var time: Moment
    /// The payload's size.
    public var bytes: UInt64

    /// The facts of `r`.
    public init(_ r: TraceRecord) {
        self.init(kind: r.kind, channel: r.channel, generation: r.generation, direction: r.direction, time: r.time, bytes: UInt64(r.payload.count))
    }

    /// The facts of the record `v`, read in place.
    public init(_ v: TraceRecordView) {
        self.init(kind: v.kind, channel: v.channel, generation: v.generation, direction: v.direction, time: v.time, bytes: UInt64(v.payload.count))
    }

    /// Facts given one by one.
    public init(kind: RecordKind, channel: TraceChannel, generation: UInt64?, direction: FrameDirection?, time: Moment, bytes: UInt64) {
        self.kind = kind
        self.channel = channel
        self.generation = generation
        self.direction = direction
        self.time = time
        self.bytes = bytes
    }
}

extension TraceStats {
    /// What a worker hands over for one record: its header alone when that is all the figures need.
    enum Item: Sendable {
        case header(RecordHeaderFacts)
        case record(InspectedRecord)
    }

    /// The figures of the records of `reader` at or after `since` and at or before `until`, read through
    /// a ``TraceScanner`` on `workers` threads: records whose kind needs only its header
    /// (``needsPayload(_:)``) are added from it without being built, the others as deferred
    /// ``InspectedRecord``s, all in record order. `progress` gets the records added so far after each
    /// chunk. The same figures as adding every record of the plain route (tested); returns the error that
    /// ended the reading, if any.
    public static func read(
        _ reader: TraceReader, since: Moment? = nil, until: Moment? = nil, workers: Int = TraceScanPlan.defaultWorkers,
        progress: (UInt64) -> Void = { _ in }
    ) -> (stats: TraceStats, error: TraceError?) {
        var plan = TraceScanPlan()
        plan.workers = workers
        plan.since = since
        plan.until = until
        let scanner = TraceScanner(reader: reader, plan: plan) { chunk, view -> [Item] in
            var out: [Item] = []
            out.reserveCapacity(view.count)
            for i in 0..<view.count {
                let v = view[i]
                if let since, v.time < since { continue }
                if let until, v.time > until { continue }
                if needsPayload(v.kind, payload: v.payload) {
                    out.append(.record(InspectedRecord(number: chunk.firstRecord + UInt64(i), record: v.record, deferringJSON: true)))
                } else {
                    out.append(.header(RecordHeaderFacts(v)))
                }
            }
            return out
        }
        var stats = TraceStats()
        do {
            while let (_, items) = try scanner.next() {
                for i in items.indices {
                    switch items[i] {
                    case .header(let h): stats.add(header: h)
                    case .record(let r): stats.add(r)
                    }
                }
                progress(stats.records)
            }
        } catch {
            return (stats, error)
        }
        return (stats, nil)
    }
}

extension CountAndBytes {
    mutating func add(_ n: UInt64) {
        count += 1
        bytes += n
    }
}
