public import RelayProtocol
public import Trace

/// A bad filter value: what was wrong and how to write it.
public struct FilterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The message, naming the option and the accepted form.
    public var message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// The `frames` filters. Every set criterion must hold (AND); a list criterion holds when any of its
/// values matches (OR). An unset criterion holds for every record.
public struct FrameFilter: Sendable, Hashable {
    /// Transport generations (`--gen 1,3`).
    public var generations: Set<UInt64>?
    /// Direction (`--dir in|out`).
    public var direction: FrameDirection?
    /// Relay message types or record kind names (`--type rpc.request,transportClosed`).
    public var types: Set<String>?
    /// Event types (`--event device-status`).
    public var events: Set<String>?
    /// RPC methods; matches requests and the responses correlated with them.
    public var methods: Set<String>?
    /// RPC ids: the requests and responses with these ids, and the client's records naming them (their
    /// `rpcTimeout` timers, a `call` input given the id).
    public var rpcIds: Set<String>?
    /// Records at or after this time.
    public var since: Moment?
    /// Records at or before this time.
    public var until: Moment?
    /// A substring of the payload (text as UTF-8, PTC1 data as text).
    public var grep: String?
    /// The channel.
    public var channel: TraceChannel?

    /// A filter that keeps everything.
    public init() {}

    /// Whether `rec` passes.
    public func matches(_ rec: InspectedRecord) -> Bool {
        let r = rec.record
        if let since, r.time < since { return false }
        if let until, r.time > until { return false }
        if let channel, r.channel != channel { return false }
        if let generations {
            guard let g = r.generation, generations.contains(g) else { return false }
        }
        if let direction, r.direction != direction { return false }
        if let types {
            guard types.contains(r.kind.name) || (rec.type.map { types.contains($0) } ?? false) else { return false }
        }
        if let events {
            guard let e = rec.eventType, events.contains(e) else { return false }
        }
        if let methods {
            guard let m = rec.method, methods.contains(m) else { return false }
        }
        if let rpcIds {
            guard let id = rec.rpcId ?? rec.namedRequestId, rpcIds.contains(id) else { return false }
        }
        if let grep, !grep.isEmpty {
            let hay = rec.terminal.map { String(decoding: $0.data, as: UTF8.self) } ?? r.payloadText
            guard hay.contains(grep) else { return false }
        }
        return true
    }

    /// Whether the filter needs RPC correlation (a method filter must see responses' methods).
    public var needsCorrelation: Bool { methods != nil }

    // MARK: deciding from the bytes

    /// Whether RPC correlation can change which records pass or how they print: only when an
    /// `rpc.response` can pass (correlation gives a response its request's method and latency).
    public var correlationMatters: Bool {
        guard let types else { return true }
        return types.contains("rpc.response") || types.contains(RecordKind.frameText.name)
    }

    /// Whether record `v` may change RPC correlation (it may be an `rpc.request` or `rpc.response`; the
    /// same byte test as ``mayMatch(_:)``).
    public static func mayCorrelate(_ v: TraceRecordView) -> Bool {
        guard v.kindValue == RecordKind.frameText.rawValue else { return false }
        return !plainJSON(v.payload) || containsAnyString(requestOrResponseType, in: v.payload)
    }

    /// Whether a chunk may hold a record that passes, from its index entry or header (`c`) and its summary
    /// (`s`, nil when it has none): false only when no record of it can.
    public func chunkMayMatch(_ c: TraceChunkInfo, _ s: TraceChunkSummary?) -> Bool {
        if c.recordCount > 0 {
            if let since, c.maxTime < since { return false }
            if let until, c.minTime > until { return false }
        }
        if let generations {
            let known = s?.generations ?? (c.generations.isEmpty ? nil : c.generations)
            if let known, !known.contains(where: { generations.contains($0) }) {
                // Records without a generation never pass either: only the listed ones could.
                return false
            }
        }
        guard let s else { return true }
        if let channel, !s.hasChannel(channel.rawValue) { return false }
        if let direction, !s.hasDirection(direction) { return false }
        if let types {
            let byKind = s.hasKind { types.contains(RecordKind(rawValue: $0).name) }
            if !byKind && !s.mayHaveMessageType(where: { types.contains($0) }) { return false }
        }
        if events != nil || methods != nil {
            if !s.hasKind(where: { $0 == RecordKind.frameText.rawValue }) { return false }
        }
        if rpcIds != nil {
            // RPC frames, and the client's records naming a request (``InspectedRecord/namedRequestId``).
            if !s.hasKind(where: { FrameFilter.mayNameRequest(RecordKind(rawValue: $0)) }) { return false }
        }
        return true
    }

    /// Whether a record of this kind may carry or name an RPC id: a text frame, or a client record that
    /// ``InspectedRecord/namedRequestId`` reads (an input, an action, a fired timer).
    static func mayNameRequest(_ kind: RecordKind) -> Bool {
        kind == .frameText || kind == .input || kind == .action || kind == .timerFired
    }

    /// Whether a chunk may hold a record that changes RPC correlation (from its summary: a text frame whose
    /// type may be `rpc.request` or `rpc.response`).
    public static func chunkMayCorrelate(_ s: TraceChunkSummary?) -> Bool {
        guard let s else { return true }
        return s.mayHaveMessageType { $0 == "rpc.request" || $0 == "rpc.response" }
    }

    /// The byte tests of this filter, prepared once (see ``FrameByteTest``).
    public var byteTest: FrameByteTest { FrameByteTest(self) }

    static let responseType = [Array(#""rpc.response""#.utf8)]
    private static let requestOrResponseType = [Array(#""rpc.request""#.utf8), Array(#""rpc.response""#.utf8)]

    /// ASCII without `\`: its strings are spelled as they are.
    @inline(__always)
    static func plainJSON(_ p: UnsafeRawBufferPointer) -> Bool {
        ByteSearch.isASCII(p, excluding: 0x5C)
    }

    /// Whether any of `patterns` occurs (nil patterns: some value is not ASCII, so yes).
    @inline(__always)
    static func containsAnyString(_ patterns: [[UInt8]]?, in p: UnsafeRawBufferPointer) -> Bool {
        guard let patterns else { return true }
        return patterns.contains { ByteSearch.contains($0, in: p) }
    }

    /// Splits `a,b,c` into a set (empty items dropped).
    public static func list(_ text: String) -> Set<String> {
        Set(text.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty })
    }

    /// Parses `--gen 1,3`.
    public static func generations(_ text: String) throws(FilterError) -> Set<UInt64> {
        var out = Set<UInt64>()
        for item in list(text) {
            guard let g = UInt64(item) else {
                throw FilterError("--gen: '\(item)' is not a generation number; write e.g. --gen 1 or --gen 1,3")
            }
            out.insert(g)
        }
        guard !out.isEmpty else { throw FilterError("--gen: no generation given; write e.g. --gen 1,3") }
        return out
    }

    /// Parses a time: seconds (`90`, `1.5`) or units (`1m30s`, `1h`, `250ms`, `2m0.5s`).
    public static func time(_ text: String, option: String) throws(FilterError) -> Moment {
        guard let ns = TimeSyntax.nanoseconds(text, bareSeconds: true), ns < 1_000_000_000 * 1_000_000_000 else {
            throw FilterError("\(option): cannot read '\(text)'; write seconds (90, 1.5) or units (1m30s, 1h, 250ms)")
        }
        return Moment(nanoseconds: ns)
    }
}

/// A ``FrameFilter``'s test of a record from its header and bytes, with the byte patterns it looks for
/// prepared once: the `"value"` spelling of each value of its lists (nil for a list with a value that is
/// not ASCII: no byte test then) and the `--grep` needle (nil unless ASCII).
public struct FrameByteTest: Sendable {
    /// The filter.
    public let filter: FrameFilter
    private let types: [[UInt8]]?
    private let events: [[UInt8]]?
    private let methods: [[UInt8]]?
    private let rpcIds: [[UInt8]]?
    private let grep: [UInt8]?

    /// For each kind value, whether its name is one of the `--type` values (nil without `--type`).
    private let kindNamed: [Bool]?

    /// The test of `f`.
    public init(_ f: FrameFilter) {
        filter = f
        if let types = f.types {
            // As `types.contains(kind.name)` for every kind value: the known kinds by their names, the
            // others by the `unknown(N)` spelling RecordKind gives them.
            let unknownNamed = Set(types.compactMap { t -> UInt16? in
                t.hasPrefix("unknown(") && t.hasSuffix(")") ? UInt16(t.dropFirst(8).dropLast()) : nil
            })
            var named = [Bool](repeating: false, count: 1 << 16)
            for v in 0...UInt16.max {
                let k = RecordKind(rawValue: v)
                if case .unknown = k { named[Int(v)] = unknownNamed.contains(v) } else { named[Int(v)] = types.contains(k.name) }
            }
            kindNamed = named
        } else {
            kindNamed = nil
        }
        func quote(_ set: Set<String>?) -> [[UInt8]]? {
            guard let set, set.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 } }) else { return nil }
            return set.map { [0x22] + Array($0.utf8) + [0x22] }
        }
        types = quote(f.types)
        events = quote(f.events)
        methods = quote(f.methods)
        rpcIds = quote(f.rpcIds)
        if let g = f.grep, !g.isEmpty, g.utf8.allSatisfy({ $0 < 0x80 }) { grep = Array(g.utf8) } else { grep = nil }
    }

    /// Whether record `v` may pass, decided from its header and payload bytes before anything is built:
    /// false only when ``FrameFilter/matches(_:)`` is false for it whatever RPC correlation says. The time, channel,
    /// generation and direction tests are the same tests on the header; the others rest on one property of
    /// JSON: in a payload that is all ASCII and holds no `\`, a string whose value is `s` (ASCII) is
    /// spelled `"s"` (no escape can hide it, and ASCII strings compare equal only when their bytes do). So
    /// a text frame whose bytes lack every `"t"` of the `--type` values has none of these types, and so on
    /// for events, RPC ids and methods (a response's method comes from its request: it may pass when it may
    /// be an `rpc.response`). `--grep`: an ASCII needle absent from an ASCII payload is absent from its text
    /// (and from PTC1 data, a part of it). Anything not ASCII, or escaped, is left to ``FrameFilter/matches(_:)``.
    public func mayMatch(_ v: TraceRecordView) -> Bool {
        let f = filter
        if let since = f.since, v.time < since { return false }
        if let until = f.until, v.time > until { return false }
        if let channel = f.channel, v.channel != channel { return false }
        if let generations = f.generations {
            guard let g = v.generation, generations.contains(g) else { return false }
        }
        if let direction = f.direction, v.direction != direction { return false }
        let isText = v.kindValue == RecordKind.frameText.rawValue
        let plain = isText && FrameFilter.plainJSON(v.payload)
        if let kindNamed {
            if !kindNamed[Int(v.kindValue)] {
                guard isText else { return false }
                if plain, !FrameFilter.containsAnyString(types, in: v.payload) { return false }
            }
        }
        if f.events != nil {
            guard isText else { return false }
            if plain, !FrameFilter.containsAnyString(events, in: v.payload) { return false }
        }
        if f.rpcIds != nil {
            guard FrameFilter.mayNameRequest(v.kind) else { return false }
            if isText ? plain : FrameFilter.plainJSON(v.payload), !FrameFilter.containsAnyString(rpcIds, in: v.payload) { return false }
        }
        if f.methods != nil {
            guard isText else { return false }
            if plain, !FrameFilter.containsAnyString(methods, in: v.payload), !FrameFilter.containsAnyString(FrameFilter.responseType, in: v.payload) {
                return false
            }
        }
        if let needle = grep, ByteSearch.isASCII(v.payload), !ByteSearch.contains(needle, in: v.payload) { return false }
        return true
    }
}

extension String {
    /// The string without leading and trailing spaces.
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
