public import RelayProtocol
public import Trace

/// One RPC as a trace shows it: from its request to what ended it (its final response, the client's
/// `callCompleted`, its timeout, or its socket's end), and the call it belongs to in a machine trace.
public struct RpcCall: Sendable, Hashable {
    /// How an RPC ended.
    public enum Outcome: Sendable, Hashable {
        /// Not ended when the trace ended.
        case pending
        /// A final response with a result.
        case answered
        /// A final response carrying an error (its code and message).
        case error(String)
        /// The client failed the call without an answer (`callCompleted` with a failure, or its
        /// `rpcTimeout` firing): the failure's kind and reason.
        case failed(String)
        /// No answer, and its socket ended (a wire trace holds no `callCompleted`): how it ended.
        case socketEnded(String)
    }

    /// The request's `id`.
    public var requestId: String
    /// The method (from the request, or the call input).
    public var method: String?
    /// The client's call id (`call` input, `callCompleted`), in a machine trace.
    public var callId: Int64?
    /// The generation the request went out on.
    public var generation: UInt64?
    /// When the request was sent.
    public var sent: Moment
    /// The request's record.
    public var requestRecord: UInt64
    /// When it ended (nil while pending).
    public var ended: Moment?
    /// The record that ended it.
    public var endRecord: UInt64?
    /// How it ended.
    public var outcome: Outcome = .pending

    /// Whether a final response came.
    public var isAnswered: Bool {
        switch outcome {
        case .answered, .error: true
        case .pending, .failed, .socketEnded: false
        }
    }

    /// Why it ended, in words: `answered`, `error -32010 Desktop is offline`, `failed: connectionClosed
    /// (network interface changed)`, `no answer; socket g1 closed by the client 1001 ...`, `still pending`.
    public var why: String {
        switch outcome {
        case .pending: "still pending"
        case .answered: "answered"
        case .error(let e): "error \(e)"
        case .failed(let f): "failed: \(f)"
        case .socketEnded(let s): "no answer; \(s)"
        }
    }
}

/// What ``RpcCallTracker/add(_:)`` saw happen to RPCs in one record.
public enum RpcCallEvent: Sendable, Hashable {
    /// A request went out.
    case started(RpcCall)
    /// An RPC ended (``RpcCall/ended`` and ``RpcCall/outcome`` set).
    case ended(RpcCall)
}

/// Follows every RPC of a trace, one record at a time, to where it really ended, on machine and wire
/// traces alike. The rules:
/// - a request starts an RPC; a final response (`isFinal` not false) ends it, answered or with an error;
/// - in a machine trace (one that records actions) the client's `callCompleted` of the call that sent
///   it ends it (a failure: its kind and reason), as does its `rpcTimeout` firing for a request no call
///   owns (a probe); a call is linked to its request by the `requestId` of its `call` input, else by the
///   first request (or `rpcTimeout` timer) that the client sends for it in the same step, else by the
///   oldest unlinked call of the same method;
/// - its socket's close or failure ends it in a wire trace; in a machine trace the close is kept and used
///   only when nothing else ends it before the trace does (a call outlives its socket until its timeout).
///
/// Memory grows with the RPCs open at once (at most `capacity` are kept; the oldest are forgotten).
public struct RpcCallTracker: Sendable {
    private struct Open: Sendable {
        var call: RpcCall
        var order: UInt64
        /// The socket's end, in a machine trace, waiting for the call's own end.
        var socketEnd: (time: Moment, record: UInt64, what: String)?
    }

    private var open: [String: Open] = [:]
    private var byCall: [Int64: String] = [:]
    /// Calls whose request has not been seen yet: callId -> (method, requestId given by the input).
    private var unlinked: [Int64: (method: String, requestId: String?, order: UInt64)] = [:]
    /// The call input of the current step (the records since the last input), waiting for its request.
    private var stepCall: Int64?
    private var counter: UInt64 = 0
    /// Whether the trace records the client's actions (a machine trace).
    public private(set) var recordsActions = false
    /// The most RPCs (and unlinked calls) kept open.
    public let capacity: Int

    /// A tracker keeping at most `capacity` open RPCs.
    public init(capacity: Int = 65_536) { self.capacity = max(1, capacity) }

    /// The RPCs still open, in the order they were sent.
    public var pending: [RpcCall] { open.values.sorted { $0.order < $1.order }.map(\.call) }

    /// The request id of call `callId`, once linked.
    public func requestId(ofCall callId: Int64) -> String? { byCall[callId] }

    /// The call that sent request `requestId`, once linked (before the request itself, when its
    /// `rpcTimeout` timer came first).
    public func callId(ofRequest requestId: String) -> Int64? {
        open[requestId]?.call.callId ?? byCall.first { $0.value == requestId }?.key
    }

    /// The open RPC with this request id.
    public func call(_ requestId: String) -> RpcCall? { open[requestId]?.call }

    /// Feeds one record (in trace order); returns what it did to RPCs.
    public mutating func add(_ rec: InspectedRecord) -> [RpcCallEvent] {
        let r = rec.record
        var events: [RpcCallEvent] = []
        switch r.kind {
        case .input:
            stepCall = nil
            guard rec.inputOrActionName == "call", let j = rec.json, let callId = j["callId"]?.intValue else { break }
            counter += 1
            if unlinked.count >= capacity, let oldest = unlinked.min(by: { $0.value.order < $1.value.order }) { unlinked[oldest.key] = nil }
            unlinked[callId] = (j["method"]?.stringValue ?? "?", j["requestId"]?.stringValue, counter)
            stepCall = callId
        case .timerFired:
            stepCall = nil
            if let id = rec.json?["requestId"]?.stringValue, rec.json?["timer"]?.stringValue == "rpcTimeout",
               var o = open[id], o.call.callId == nil {
                // A request no call owns (a probe) fails by its timeout.
                o.call.ended = r.time
                o.call.endRecord = rec.number
                o.call.outcome = .failed("timedOut")
                open[id] = nil
                events.append(.ended(o.call))
            }
        case .action:
            recordsActions = true
            switch rec.inputOrActionName {
            case "armTimer":
                if let t = rec.json?["timer"], t["timer"]?.stringValue == "rpcTimeout", let id = t["requestId"]?.stringValue {
                    link(id, preferring: stepCall)
                }
            case "callCompleted":
                guard let callId = rec.json?["callId"]?.intValue else { break }
                unlinked[callId] = nil
                guard let id = byCall.removeValue(forKey: callId), var o = open.removeValue(forKey: id) else { break }
                o.call.ended = r.time
                o.call.endRecord = rec.number
                switch rec.json?["outcome"]?.stringValue {
                case "failure": o.call.outcome = .failed(Self.failureText(rec.json?["failure"]))
                case "queued": o.call.outcome = .failed("queued for later (offline queue)")
                default: o.call.outcome = .answered
                }
                events.append(.ended(o.call))
            default: break
            }
        case .frameText:
            if r.direction == .inbound { stepCall = nil }
            guard let id = rec.rpcId else { break }
            if rec.type == "rpc.request" {
                counter += 1
                if open.count >= capacity, let oldest = open.min(by: { $0.value.order < $1.value.order }) { open[oldest.key] = nil }
                var call = RpcCall(requestId: id, method: rec.method, callId: nil, generation: r.generation, sent: r.time, requestRecord: rec.number)
                if let c = link(id, method: rec.method, preferring: stepCall) { call.callId = c }
                open[id] = Open(call: call, order: counter)
                events.append(.started(call))
            } else if rec.type == "rpc.response", var o = open[id] {
                let j = rec.json
                let final = (j?["isFinal"] ?? j?["payload"]?["isFinal"])?.boolValue != false
                guard final else { break }
                o.call.ended = r.time
                o.call.endRecord = rec.number
                if let e = j?["error"] ?? j?["payload"]?["error"], !e.isNull {
                    o.call.outcome = .error([e["code"]?.jsonText, e["message"]?.stringValue].compactMap { $0 }.joined(separator: " "))
                } else {
                    o.call.outcome = .answered
                }
                open[id] = nil
                if let c = o.call.callId, byCall[c] == id, !recordsActions { byCall[c] = nil }
                events.append(.ended(o.call))
            }
        case .transportClosed, .transportFailed:
            if r.direction == .inbound || r.kind == .transportFailed { stepCall = nil }
            guard let g = r.generation else { break }
            let what = "socket g\(g) " + rec.summary
            // In the order they were sent (a dictionary's order is not the same from one run to the next).
            for (id, var o) in open.sorted(by: { $0.value.order < $1.value.order }) where o.call.generation == g && o.socketEnd == nil {
                if recordsActions {
                    // A machine trace says itself when the call ends (callCompleted, rpcTimeout).
                    o.socketEnd = (r.time, rec.number, what)
                    open[id] = o
                } else {
                    o.call.ended = r.time
                    o.call.endRecord = rec.number
                    o.call.outcome = .socketEnded(what)
                    open[id] = nil
                    events.append(.ended(o.call))
                }
            }
        case .transportOpened, .frameBinary:
            if r.direction != .outbound { stepCall = nil }
        default:
            break
        }
        return events
    }

    /// Feeds a record that the caller does not build (a fast route that reads only record headers): what
    /// its header says about the client's steps and whether the trace records actions. Every record an
    /// RPC's story is in (requests, responses, socket ends, `call` inputs, `rpcTimeout` timers,
    /// `callCompleted`) must go through ``add(_:)`` instead.
    public mutating func addHeader(kind: RecordKind, direction: FrameDirection?) {
        switch kind {
        case .input, .timerFired: stepCall = nil
        case .action: recordsActions = true
        case .frameText, .transportClosed: if direction == .inbound { stepCall = nil }
        case .transportFailed: stepCall = nil
        case .transportOpened, .frameBinary: if direction != .outbound { stepCall = nil }
        default: break
        }
    }

    /// Ends the trace: an RPC whose socket ended (and that nothing else ended) ends there, the rest stay
    /// pending. Returns them all, in the order they were sent.
    public mutating func finish() -> [RpcCall] {
        var out: [RpcCall] = []
        for o in open.values.sorted(by: { $0.order < $1.order }) {
            var c = o.call
            if let s = o.socketEnd {
                c.ended = s.time
                c.endRecord = s.record
                c.outcome = .socketEnded(s.what)
            }
            out.append(c)
        }
        open = [:]
        byCall = [:]
        unlinked = [:]
        return out
    }

    /// Links request `id` to a call: the one named by `preferring` (the step's call input) when it is
    /// unlinked, else one whose input gave this request id, else the oldest unlinked call of `method`.
    @discardableResult
    private mutating func link(_ id: String, method: String? = nil, preferring step: Int64? = nil) -> Int64? {
        if let c = byCall.first(where: { $0.value == id })?.key { return c }
        var chosen: Int64?
        if let given = unlinked.first(where: { $0.value.requestId == id })?.key {
            chosen = given
        } else if let step, let u = unlinked[step], u.requestId == nil, method == nil || u.method == method {
            chosen = step
        } else if let method {
            chosen = unlinked.filter { $0.value.method == method && $0.value.requestId == nil }.min { $0.value.order < $1.value.order }?.key
        }
        guard let chosen else { return nil }
        unlinked[chosen] = nil
        byCall[chosen] = id
        if stepCall == chosen { stepCall = nil }
        if var o = open[id], o.call.callId == nil {
            o.call.callId = chosen
            open[id] = o
        }
        return chosen
    }

    /// `connectionClosed (network interface changed)`, `timedOut after 3.000s`.
    static func failureText(_ f: JSONValue?) -> String {
        guard let f else { return "failure" }
        var s = f["kind"]?.stringValue ?? "failure"
        if let reason = f["reason"]?.stringValue ?? f["message"]?.stringValue { s += " (\(reason))" }
        return s
    }
}

/// One RPC's story, for `frames --follow ID`: the records that tell what happened to one call or request,
/// found in one pass in trace order. `ID` is a request id (`rpc.request` `id`) or, in a machine trace, a
/// call id (the `callId` of the `call` input). The story: the call input, the request, every record of
/// the client naming the request (its `rpcTimeout` timer armed, cancelled or fired; a failed send; the
/// connection failure it caused), progress and responses, the socket's close or failure while it was
/// open, and the `callCompleted` that ended the call. A wire trace holds only the request, its responses
/// and its socket's end.
///
/// Memory: the call inputs not yet linked to a request are held (at most `maxHeld`), since the input comes
/// before the request that names the id.
public struct RpcFollow: Sendable {
    /// The id followed.
    public let id: String
    private let asCall: Int64?
    private var tracker = RpcCallTracker()
    private var callId: Int64?
    /// The request ids of the story (a call may send more than one, e.g. a resend).
    private var requestIds = Set<String>()
    private var generations = Set<UInt64>()
    private var held: [Int64: InspectedRecord] = [:]
    private var heldOrder: [Int64] = []
    /// The most call inputs held back waiting for their request.
    public static let maxHeld = 4096
    /// The time of the story's first record.
    public private(set) var start: Moment?
    /// The RPC as the story ends (nil when no request was found).
    public private(set) var call: RpcCall?
    /// Records in the story so far.
    public private(set) var count = 0

    /// Follows `id` (a request id, or a call id).
    public init(_ id: String) {
        self.id = id
        asCall = Int64(id)
        // A number is a call id (request ids are strings such as UUIDs); anything else a request id.
        if let c = asCall { callId = c } else { requestIds = [id] }
    }

    /// Feeds one record; returns the story's records it completes, in trace order (a held call input
    /// comes out before the record that linked it).
    public mutating func add(_ rec: InspectedRecord) -> [InspectedRecord] {
        let r = rec.record
        for e in tracker.add(rec) {
            switch e {
            case .started(let c) where requestIds.contains(c.requestId) || (callId != nil && c.callId == callId):
                call = c
            case .ended(let c) where requestIds.contains(c.requestId):
                call = c
            default: break
            }
        }
        var out: [InspectedRecord] = []
        // Link the call and its request both ways, as soon as the tracker knows.
        if let c = callId, let req = tracker.requestId(ofCall: c), !requestIds.contains(req) {
            requestIds.insert(req)
        }
        if callId == nil {
            for req in requestIds {
                if let c = tracker.callId(ofRequest: req) ?? call?.callId {
                    callId = c
                    if let input = held.removeValue(forKey: c) { out.append(input) }
                    break
                }
            }
        }
        var member = false
        switch r.kind {
        case .input:
            if rec.inputOrActionName == "call", let c = rec.json?["callId"]?.intValue {
                if c == callId || (rec.json?["requestId"]?.stringValue.map(requestIds.contains) ?? false) {
                    member = true
                    callId = c
                } else if callId == nil {
                    hold(c, rec)
                }
            } else {
                member = names(rec)
            }
        case .action, .timerFired:
            if let c = rec.json?["callId"]?.intValue, c == callId { member = true } else { member = names(rec) }
        case .frameText:
            if let i = rec.rpcId, requestIds.contains(i) || i == id, rec.type == "rpc.request" || rec.type == "rpc.response" {
                requestIds.insert(i)
                member = true
                if rec.type == "rpc.request", let g = r.generation { generations.insert(g) }
            }
        case .transportClosed, .transportFailed:
            // The socket the request went out on ended while it was waiting.
            if let g = r.generation, generations.contains(g), let c = call, c.generation == g, c.ended == nil || c.endRecord == rec.number {
                member = true
            }
        default: break
        }
        if member {
            out.append(rec)
        }
        if !out.isEmpty {
            start = min(start ?? out[0].record.time, out[0].record.time)
            count += out.count
        }
        return out
    }

    /// Ends the story: an RPC that nothing ended gets its socket's end or stays pending.
    public mutating func finish() {
        for c in tracker.finish() where requestIds.contains(c.requestId) { call = c }
    }

    /// Whether an input, action or timer record names one of the request ids (a timer, a failed send, a
    /// connection failed by the request's timeout).
    private func names(_ rec: InspectedRecord) -> Bool {
        let text = rec.record.payloadText
        return requestIds.contains { text.contains($0) }
    }

    private mutating func hold(_ c: Int64, _ rec: InspectedRecord) {
        if held.count >= Self.maxHeld, let oldest = heldOrder.first {
            heldOrder.removeFirst()
            held[oldest] = nil
        }
        held[c] = rec
        heldOrder.append(c)
    }

    /// One line on how the RPC went: `files.search (call 1, request 1445...) sent at 28.000s on g1:
    /// failed: connectionClosed (network interface changed) at 30.000s, 2.000s after it was sent`.
    public var outcome: String {
        guard let c = call else { return "no request with id or call id '\(id)' in the trace" }
        var s = "\(c.method ?? "?") (" + (c.callId.map { "call \($0), " } ?? "") + "request \(c.requestId)) sent at \(c.sent)"
        if let g = c.generation { s += " on g\(g)" }
        s += ": \(c.why)"
        if let e = c.ended { s += " at \(e), \(Moment(nanoseconds: (e - c.sent).nanoseconds)) after it was sent" }
        return s
    }
}
