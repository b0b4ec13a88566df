public import RelayProtocol
public import Trace

/// A recorded session's sockets, as a replaying relay serves them: for each socket (generation) the
/// upgrade, then what the client sent and what the relay sent, in order, with their times.
///
/// Read from a wire trace (`relay --record`, `proxy`, an in-app recorder) or from a machine trace
/// (`capture`, `simulate`: its frames and socket records are the same kinds). Sockets come in the order
/// they were opened; a socket whose upgrade was refused keeps its status so a replay refuses it again.
public struct RecordedSession: Sendable {
    /// Which side a recorded entry comes from.
    public enum Side: Sendable, Hashable {
        /// The client sent it (record direction out).
        case client
        /// The relay sent it (record direction in).
        case relay
    }

    /// What a recorded entry is.
    public enum Event: Sendable, Hashable {
        /// A text or binary message.
        case frame(WireFrame)
        /// A close frame (`code` nil: an empty one) or, with `clean` false, the connection ended without one.
        case close(code: Int?, reason: String, clean: Bool)
        /// The socket failed (reset, timeout, TLS...).
        case failed(String)
    }

    /// One thing that crossed the wire.
    public struct Entry: Sendable, Hashable {
        /// The record's number in the trace.
        public var record: UInt64
        /// When, on the trace's clock.
        public var time: Moment
        /// Who sent it.
        public var side: Side
        /// What it was.
        public var event: Event
    }

    /// A recorded refusal of the upgrade.
    public struct Refusal: Sendable, Hashable {
        /// The HTTP status (401, 404, 429...).
        public var status: Int
        /// The reason or body.
        public var reason: String

        /// A refusal.
        public init(status: Int, reason: String) {
            self.status = status
            self.reason = reason
        }
    }

    /// One recorded socket.
    public struct Socket: Sendable, Hashable {
        /// Its generation in the trace.
        public var generation: UInt64
        /// The record number of its `transportOpen`.
        public var openRecord: UInt64
        /// When it was opened.
        public var openTime: Moment
        /// The request target (wire traces) or URL (machine traces).
        public var target: String
        /// The upgrade request's headers (secrets redacted).
        public var headers: [String: String]
        /// `X-Device-ID` of the upgrade.
        public var deviceId: String?
        /// `X-Target-Desktop-Device-ID` of the upgrade.
        public var desktopId: String?
        /// `X-Client-Type` of the upgrade.
        public var clientType: String?
        /// The refusal, when the upgrade was refused.
        public var refusal: Refusal?
        /// Everything after the upgrade, in record order.
        public var entries: [Entry]

        /// A header's value, ignoring case.
        public func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    /// The trace's header.
    public var header: TraceHeader
    /// The sockets, in the order they were opened.
    public var sockets: [Socket]

    /// Reads the sockets of the trace at `path` (channel relay only). A trace whose recorder died is read
    /// up to its last intact record.
    /// - Throws: ``TraceError`` when the file cannot be opened or is damaged before its end.
    public static func load(path: String) throws(TraceError) -> RecordedSession {
        let reader = try TraceReader(path: path)
        var sockets: [Socket] = []
        var index: [UInt64: Int] = [:]
        while let e = try reader.next() {
            let r = e.record
            guard r.channel == .relay, let g = r.generation else { continue }
            if r.kind == .transportOpen {
                let j = try? JSONValue(parsing: r.payload)
                var headers: [String: String] = [:]
                if case .object(let h)? = j?["headers"] { for (k, v) in h { headers[k] = v.stringValue ?? v.jsonText } }
                var s = Socket(generation: g, openRecord: e.number, openTime: r.time,
                               target: j?["url"]?.stringValue ?? "/", headers: headers, refusal: nil, entries: [])
                s.deviceId = j?["deviceId"]?.stringValue ?? s.header("X-Device-ID")
                s.desktopId = j?["desktopId"]?.stringValue ?? s.header("X-Target-Desktop-Device-ID")
                s.clientType = j?["clientType"]?.stringValue ?? s.header("X-Client-Type")
                index[g] = sockets.count
                sockets.append(s)
                continue
            }
            guard let i = index[g] else { continue }
            let side: Side = r.direction == .outbound ? .client : .relay
            switch r.kind {
            case .frameText:
                sockets[i].entries.append(Entry(record: e.number, time: r.time, side: side, event: .frame(.text(r.payloadText))))
            case .frameBinary:
                sockets[i].entries.append(Entry(record: e.number, time: r.time, side: side, event: .frame(.binary(r.payload))))
            case .transportClosed:
                let j = try? JSONValue(parsing: r.payload)
                let code = j?["code"]?.intValue.map(Int.init)
                sockets[i].entries.append(Entry(record: e.number, time: r.time, side: side,
                                                event: .close(code: code == 1005 ? nil : code, reason: j?["reason"]?.stringValue ?? "",
                                                              clean: j?["clean"]?.boolValue ?? (code != nil && code != 1006))))
            case .transportFailed:
                let j = try? JSONValue(parsing: r.payload)
                if let status = j?["status"]?.intValue, sockets[i].entries.isEmpty {
                    sockets[i].refusal = Refusal(status: Int(status), reason: j?["error"]?.stringValue ?? "")
                } else {
                    sockets[i].entries.append(Entry(record: e.number, time: r.time, side: .relay, event: .failed(j?["error"]?.stringValue ?? "failed")))
                }
            default:
                continue
            }
        }
        return RecordedSession(header: reader.header, sockets: sockets)
    }
}
