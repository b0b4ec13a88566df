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
    /// A substring of the payload (text as UTF-8, PTC1 data as text) or of the summary.
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
            guard hay.contains(grep) || rec.summary.contains(grep) else { return false }
        }
        return true
    }

    /// Whether the filter needs RPC correlation (a method filter must see responses' methods).
    public var needsCorrelation: Bool { methods != nil }

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

extension String {
    /// The string without leading and trailing spaces.
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
