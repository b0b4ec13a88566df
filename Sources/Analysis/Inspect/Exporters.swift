public import RelayProtocol
import Trace

/// Nanoseconds since the Unix epoch of an RFC 3339 time (`2026-01-02T03:04:05.250Z`, `...+02:00`);
/// nil when it cannot be read.
public func unixNanoseconds(rfc3339 text: String) -> Int64? {
    let u = Array(text.utf8)
    func num(_ a: Int, _ n: Int) -> Int? {
        guard a + n <= u.count else { return nil }
        var v = 0
        for i in a..<(a + n) {
            guard u[i] >= 0x30, u[i] <= 0x39 else { return nil }
            v = v * 10 + Int(u[i] - 0x30)
        }
        return v
    }
    guard u.count >= 20, let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
        let s = num(17, 2), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
    else { return nil }
    var i = 19
    var frac: Int64 = 0
    if i < u.count, u[i] == UInt8(ascii: ".") {
        i += 1
        var digits = 0
        while i < u.count, u[i] >= 0x30, u[i] <= 0x39 {
            if digits < 9 { frac = frac * 10 + Int64(u[i] - 0x30); digits += 1 }
            i += 1
        }
        while digits < 9 { frac *= 10; digits += 1 }
    }
    var offset = 0
    guard i < u.count else { return nil }
    if u[i] == UInt8(ascii: "Z") || u[i] == UInt8(ascii: "z") {
        i += 1
    } else if u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-"), let oh = num(i + 1, 2), let om = num(i + 4, 2) {
        offset = (oh * 60 + om) * 60 * (u[i] == UInt8(ascii: "+") ? 1 : -1)
        i += 6
    } else { return nil }
    guard i == u.count else { return nil }
    // Days from civil (proleptic Gregorian).
    let yy = mo <= 2 ? y - 1 : y
    let era = (yy >= 0 ? yy : yy - 399) / 400
    let yoe = yy - era * 400
    let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    let days = era * 146097 + doe - 719468
    let secs = Int64(days) * 86400 + Int64(h * 3600 + mi * 60 + s) - Int64(offset)
    return secs * 1_000_000_000 + frac
}

/// RFC 3339 UTC text for Unix nanoseconds with `fractionDigits` digits of the second (1 to 9; the
/// default 3 is milliseconds), truncated, not rounded.
public func rfc3339(unixNanoseconds ns: Int64, fractionDigits: Int = 3) -> String {
    let secs = ns >= 0 ? ns / 1_000_000_000 : (ns - 999_999_999) / 1_000_000_000
    let digits = min(9, max(1, fractionDigits))
    var scale: Int64 = 1
    for _ in digits..<9 { scale *= 10 }
    let fraction = (ns - secs * 1_000_000_000) / scale
    let days = Int(secs >= 0 ? secs / 86400 : (secs - 86399) / 86400)
    let rem = Int(secs - Int64(days) * 86400)
    let z = days + 719468
    let era = (z >= 0 ? z : z - 146096) / 146097
    let doe = z - era * 146097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
    func p(_ v: Int, _ w: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s }
    return "\(p(y, 4))-\(p(m, 2))-\(p(d, 2))T\(p(rem / 3600, 2)):\(p(rem / 60 % 60, 2)):\(p(rem % 60, 2)).\(p(Int(fraction), digits))Z"
}

/// Writes a pcapng file (little-endian) of a trace's sockets: one interface per transport generation
/// (`gen<N>`, link type 252 `WIRESHARK_UPPER_PDU`, nanosecond timestamps), one Enhanced Packet Block per
/// packet holding Wireshark exported-PDU tags (IPv4 addresses and TCP ports: the client 10.0.0.2:40000+N,
/// the relay 10.0.0.1:443) and the packet: the upgrade request and its answer (101, or the refusal with
/// its status) for the `http` dissector; each message as one unmasked WebSocket frame and a socket close
/// as a Close frame for the `websocket` dissector; a connection that failed without an HTTP answer as a
/// TCP SYN and RST (an IPv4 packet for the `ip` dissector) whose packet comment holds the failure. Every
/// packet's comment names its record. Blocks go to `emit` as they are made; ``finish()`` ends the file.
public struct PcapngExporter {
    /// `LINKTYPE_WIRESHARK_UPPER_PDU`.
    public static let linkType: UInt16 = 252
    private let emit: ([UInt8]) -> Void
    private let startNs: Int64
    private var interfaces: [UInt64: UInt32] = [:]
    /// Packets written.
    public private(set) var packets = 0

    /// Starts the file (section header) with `emit`; times are `wallClockStartNs` + record time.
    public init(wallClockStartNs: Int64, emit: @escaping ([UInt8]) -> Void) {
        self.emit = emit
        self.startNs = wallClockStartNs
        var body: [UInt8] = []
        body.le32(0x1A2B_3C4D)
        body.le16(1)
        body.le16(0)
        body.le64(UInt64.max)  // section length unknown
        Self.option(&body, 4, Array("relaytrace \(TraceHeaderVersion.tool)".utf8))
        Self.option(&body, 0, [])
        emit(Self.block(0x0A0D_0D0A, body))
    }

    static func option(_ b: inout [UInt8], _ code: UInt16, _ value: [UInt8]) {
        b.le16(code)
        b.le16(UInt16(value.count))
        b += value
        while b.count % 4 != 0 { b.append(0) }
    }

    static func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
        var b: [UInt8] = []
        let total = UInt32(12 + body.count)
        b.le32(type)
        b.le32(total)
        b += body
        b.le32(total)
        return b
    }

    private mutating func interface(_ g: UInt64) -> UInt32 {
        if let i = interfaces[g] { return i }
        let id = UInt32(interfaces.count)
        interfaces[g] = id
        var body: [UInt8] = []
        body.le16(Self.linkType)
        body.le16(0)
        body.le32(0)  // no snap length limit
        Self.option(&body, 2, Array("gen\(g)".utf8))  // if_name
        Self.option(&body, 3, Array("relay transport generation \(g)".utf8))  // if_description
        Self.option(&body, 9, [9])  // if_tsresol: nanoseconds
        Self.option(&body, 0, [])
        emit(Self.block(1, body))
        return id
    }

    /// One WebSocket frame (FIN set, unmasked).
    public static func websocketFrame(opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var f: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            f.append(UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            f.append(126)
            f.append(UInt8(payload.count >> 8))
            f.append(UInt8(payload.count & 0xFF))
        } else {
            f.append(127)
            for s in stride(from: 56, through: 0, by: -8) { f.append(UInt8((UInt64(payload.count) >> UInt64(s)) & 0xFF)) }
        }
        return f + payload
    }

    /// The exported-PDU tags for a message in `direction` on generation `g`, for `dissector`
    /// (`websocket`, `http`, or `ip` for a whole IPv4 packet).
    static func exportedPDUHeader(generation g: UInt64, outbound: Bool, dissector: String = "websocket") -> [UInt8] {
        var b: [UInt8] = []
        func tag(_ t: UInt16, _ v: [UInt8]) {
            var value = v
            while value.count % 4 != 0 { value.append(0) }
            b.be16(t)
            b.be16(UInt16(value.count))
            b += value
        }
        let clientPort = Self.clientPort(g)
        tag(12, Array(dissector.utf8))
        tag(20, outbound ? Self.clientAddress : Self.relayAddress)
        tag(21, outbound ? Self.relayAddress : Self.clientAddress)
        tag(24, [0, 0, 0, 2])  // TCP
        tag(25, be32(outbound ? UInt32(clientPort) : 443))
        tag(26, be32(outbound ? 443 : UInt32(clientPort)))
        b.be16(0)
        b.be16(0)
        return b
    }

    static let clientAddress: [UInt8] = [10, 0, 0, 2]
    static let relayAddress: [UInt8] = [10, 0, 0, 1]
    static func clientPort(_ g: UInt64) -> UInt16 { UInt16(40000 + g % 20000) }

    /// The sockets whose upgrade request is held until the trace says how the upgrade went (a request
    /// that never reached a relay is not drawn as one): generation -> (record, time, request bytes).
    private var opening: [UInt64: (record: UInt64, time: Moment, request: [UInt8])] = [:]

    /// Adds a record: the upgrade request and its answer (HTTP), text and binary frames, pings, pongs
    /// (wire traces) and socket closes (WebSocket), and a connection that failed (a TCP SYN and RST, the failure in the packet comment)
    /// become packets; other records are skipped.
    public mutating func add(_ rec: InspectedRecord) {
        let r = rec.record
        guard let g = r.generation, r.channel == .relay else { return }
        switch r.kind {
        case .transportOpen:
            if let held = opening.removeValue(forKey: g) { unanswered(g, held) }
            opening[g] = (rec.number, r.time, Self.upgradeRequest(rec.json))
        case .transportOpened:
            if let held = opening.removeValue(forKey: g) {
                packet(g, outbound: true, dissector: "http", held.request, at: held.time, comment: "record \(held.record)")
            }
            packet(g, outbound: false, dissector: "http", Self.upgradeResponse(rec.json), at: r.time, comment: "record \(rec.number)")
        case .transportFailed:
            let error = rec.json?["error"]?.stringValue ?? "transport failed"
            let held = opening.removeValue(forKey: g)
            if let status = rec.json?["status"]?.intValue, (100...599).contains(status) {
                // A refused upgrade: the request and the relay's HTTP answer.
                if let held { packet(g, outbound: true, dissector: "http", held.request, at: held.time, comment: "record \(held.record)") }
                packet(g, outbound: false, dissector: "http", Self.refusal(status: Int(status), body: error), at: r.time, comment: "record \(rec.number): refused \(status)")
            } else {
                // The connection failed (refused, TLS, reset, DNS...): what tshark can show of it is a
                // connection attempt and its reset; the failure itself is in the comment.
                if let held { packet(g, outbound: true, dissector: "ip", Self.tcp(g, outbound: true, flags: 0x02), at: held.time, comment: "record \(held.record): connection attempt") }
                packet(g, outbound: false, dissector: "ip", Self.tcp(g, outbound: false, flags: 0x14), at: r.time, comment: "record \(rec.number): transportFailed: \(error)")
            }
        case .frameText:
            packet(g, outbound: r.direction == .outbound, dissector: "websocket", Self.websocketFrame(opcode: 1, payload: r.payload), at: r.time, comment: "record \(rec.number)")
        case .frameBinary:
            packet(g, outbound: r.direction == .outbound, dissector: "websocket", Self.websocketFrame(opcode: 2, payload: r.payload), at: r.time, comment: "record \(rec.number)")
        case .ping:
            packet(g, outbound: r.direction == .outbound, dissector: "websocket", Self.websocketFrame(opcode: 9, payload: Array(r.payload.prefix(125))), at: r.time, comment: "record \(rec.number)")
        case .pong:
            packet(g, outbound: r.direction == .outbound, dissector: "websocket", Self.websocketFrame(opcode: 10, payload: Array(r.payload.prefix(125))), at: r.time, comment: "record \(rec.number)")
        case .transportClosed:
            if let held = opening.removeValue(forKey: g) { unanswered(g, held) }
            var p: [UInt8] = []
            if let c = rec.json?["code"]?.intValue, (1000...4999).contains(c) {
                p = [UInt8(c >> 8), UInt8(c & 0xFF)] + Array((rec.json?["reason"]?.stringValue ?? "").utf8.prefix(123))
            }
            packet(g, outbound: r.direction == .outbound, dissector: "websocket", Self.websocketFrame(opcode: 8, payload: p), at: r.time, comment: "record \(rec.number)")
        default:
            return
        }
    }

    /// Ends the export: a socket still opening when the trace ended shows as a connection attempt.
    public mutating func finish() {
        for (g, held) in opening.sorted(by: { $0.key < $1.key }) { unanswered(g, held) }
        opening = [:]
    }

    private mutating func unanswered(_ g: UInt64, _ held: (record: UInt64, time: Moment, request: [UInt8])) {
        packet(g, outbound: true, dissector: "ip", Self.tcp(g, outbound: true, flags: 0x02), at: held.time,
               comment: "record \(held.record): connection attempt with no answer in the trace")
    }

    private mutating func packet(_ g: UInt64, outbound: Bool, dissector: String, _ payload: [UInt8], at time: Moment, comment: String) {
        let id = interface(g)
        let data = Self.exportedPDUHeader(generation: g, outbound: outbound, dissector: dissector) + payload
        let ts = UInt64(bitPattern: startNs &+ time.nanoseconds)
        var body: [UInt8] = []
        body.le32(id)
        body.le32(UInt32(ts >> 32))
        body.le32(UInt32(ts & 0xFFFF_FFFF))
        body.le32(UInt32(data.count))
        body.le32(UInt32(data.count))
        body += data
        while body.count % 4 != 0 { body.append(0) }
        Self.option(&body, 1, Array(comment.utf8))  // opt_comment
        Self.option(&body, 0, [])
        emit(Self.block(6, body))
        packets += 1
    }

    /// The upgrade request of a `transportOpen` (`{url, headers, headerOrder}`) as HTTP/1.1: `GET` with
    /// the URL's path (a wire trace records the request target itself), the recorded headers in their
    /// order, and `Host`, `Upgrade: websocket`, `Connection: Upgrade` when the trace does not hold them
    /// (a client's own trace records the headers it set, not those its WebSocket library adds).
    static func upgradeRequest(_ json: JSONValue?) -> [UInt8] {
        let url = json?["url"]?.stringValue ?? "/ws/device-link"
        var host: String?
        var target = url
        if let scheme = url.firstRange(of: "://") {
            let rest = url[scheme.upperBound...]
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            host = String(rest[..<slash])
            target = slash == rest.endIndex ? "/" : String(rest[slash...])
        }
        let headers = headerLines(json)
        var lines = ["GET \(target) HTTP/1.1"]
        func has(_ name: String) -> Bool { headers.contains { $0.name.lowercased() == name.lowercased() } }
        if !has("host"), let host { lines.append("Host: \(host)") }
        lines += headers.map { "\($0.name): \($0.value)" }
        if !has("upgrade") { lines.append("Upgrade: websocket") }
        if !has("connection") { lines.append("Connection: Upgrade") }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// The `101 Switching Protocols` of a `transportOpened` (its recorded status and headers in a wire
    /// trace; `Upgrade`/`Connection` otherwise).
    static func upgradeResponse(_ json: JSONValue?) -> [UInt8] {
        let status = json?["status"]?.intValue.map(Int.init) ?? 101
        var headers = headerLines(json).map { "\($0.name): \($0.value)" }
        if headers.isEmpty { headers = ["Upgrade: websocket", "Connection: Upgrade"] }
        let text = HARExporter.statusTexts[status] ?? ""
        return Array((["HTTP/1.1 \(status) \(text)"] + headers).joined(separator: "\r\n").utf8 + Array("\r\n\r\n".utf8))
    }

    /// A refused upgrade: its status and the reason as the body.
    static func refusal(status: Int, body: String) -> [UInt8] {
        let b = Array(body.utf8)
        let head = "HTTP/1.1 \(status) \(HARExporter.statusTexts[status] ?? "")\r\nContent-Type: text/plain\r\nContent-Length: \(b.count)\r\n\r\n"
        return Array(head.utf8) + b
    }

    /// `{headers: {name: value}, headerOrder}` as name/value pairs in the recorded order.
    static func headerLines(_ json: JSONValue?) -> [(name: String, value: String)] {
        guard case .object(let o)? = json?["headers"] else { return [] }
        var names = (json?["headerOrder"]?.arrayValue ?? []).compactMap(\.stringValue).filter { o[$0] != nil }
        names += o.keys.filter { !names.contains($0) }.sorted()
        return names.map { n in (n, o[n]?.stringValue ?? o[n]?.jsonText ?? "") }
    }

    /// An IPv4 packet holding a bare TCP segment between the client and the relay on generation `g`
    /// (`flags`: 0x02 SYN, 0x14 RST+ACK), for the `ip` dissector.
    static func tcp(_ g: UInt64, outbound: Bool, flags: UInt8) -> [UInt8] {
        let clientPort = clientPort(g)
        var t: [UInt8] = []
        t.be16(outbound ? clientPort : 443)
        t.be16(outbound ? 443 : clientPort)
        t += be32(0)  // sequence
        t += be32(flags & 0x10 != 0 ? 1 : 0)  // acknowledgement
        t += [0x50, flags]  // header length 20, flags
        t.be16(65535)  // window
        t.be16(0)  // checksum (not computed; tshark does not check it by default)
        t.be16(0)  // urgent pointer
        var ip: [UInt8] = [0x45, 0]
        ip.be16(UInt16(20 + t.count))
        ip.be16(UInt16(truncatingIfNeeded: g))  // identification
        ip.be16(0x4000)  // don't fragment
        ip += [64, 6]  // TTL, TCP
        ip.be16(0)
        ip += outbound ? clientAddress : relayAddress
        ip += outbound ? relayAddress : clientAddress
        var sum: UInt32 = 0
        for k in stride(from: 0, to: 20, by: 2) { sum += UInt32(ip[k]) << 8 | UInt32(ip[k + 1]) }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        let check = ~UInt16(sum)
        ip[10] = UInt8(check >> 8)
        ip[11] = UInt8(check & 0xFF)
        return ip + t
    }
}

enum TraceHeaderVersion {
    static let tool = TraceHeader.currentToolVersion
}

func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

extension Array where Element == UInt8 {
    mutating func le16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    mutating func le32(_ v: UInt32) { for s in stride(from: 0, to: 32, by: 8) { append(UInt8((v >> UInt32(s)) & 0xFF)) } }
    mutating func le64(_ v: UInt64) { for s in stride(from: 0, to: 64, by: 8) { append(UInt8((v >> UInt64(s)) & 0xFF)) } }
    mutating func be16(_ v: UInt16) { append(UInt8(v >> 8)); append(UInt8(v & 0xFF)) }
}

/// Builds a HAR 1.2 log in the shape Chrome DevTools' HAR importer (`front_end/models/har/HARFormat.ts`
/// and `Importer.ts` in devtools-frontend) reads: one entry per socket (each `transportOpen` starts one,
/// so a generation number a later client reuses gets its own entry), `_resourceType: "websocket"`, the
/// upgrade request with the recorded `ws`/`wss` URL and headers (in the recorded order),
/// `_webSocketMessages` of `{type: send|receive|error, time: Unix seconds, opcode, data}`: text frames
/// opcode 1 with their text, binary (PTC1) frames opcode 2 with base64 data, the close the client sent
/// or received opcode 8 with the base64 close payload (code and reason; codes 1005, 1006 and 1015 never
/// travel in a frame, so those only appear in `_relaytraceClose`), a failure after the socket opened an
/// `error` message (opcode -1). Timings: `wait` is the upgrade (open to opened), `receive` the socket's
/// life after it; `time` is their sum, in milliseconds. A refused upgrade keeps its status; a failure
/// sets `response._error`. Keeps the messages in memory until `finish`.
public struct HARExporter {
    private struct Entry {
        var generation: UInt64
        var url = "wss://relay.invalid/ws/device-link"
        var headers: [JSONValue] = []
        var start: Moment
        var opened: Moment?
        var end: Moment
        var messages: [JSONValue] = []
        var refusedStatus: Int?
        var error: String?
        var close: JSONValue?
    }
    private let startNs: Int64
    private var entries: [Entry] = []
    /// The index in `entries` of each generation's latest socket.
    private var current: [UInt64: Int] = [:]

    /// A HAR builder; times are `wallClockStartNs` + record time.
    public init(wallClockStartNs: Int64) { startNs = wallClockStartNs }

    private func unixSeconds(_ t: Moment) -> JSONValue { .double(Double(startNs &+ t.nanoseconds) / 1e9) }

    /// Adds a record. Only the relay channel's socket records count: `transportOpen` (a new entry),
    /// `transportOpened`, frames, `transportClosed` and `transportFailed`.
    public mutating func add(_ rec: InspectedRecord) {
        let r = rec.record
        guard let g = r.generation, r.channel == .relay else { return }
        switch r.kind {
        case .transportOpen, .transportOpened, .frameText, .frameBinary, .transportClosed, .transportFailed: break
        default: return
        }
        let i: Int
        if r.kind == .transportOpen || current[g] == nil {
            // A socket whose opening the trace does not hold (a capture started mid-connection) still
            // gets an entry, from its first record.
            entries.append(Entry(generation: g, start: r.time, end: r.time))
            i = entries.count - 1
            current[g] = i
        } else {
            i = current[g] ?? 0
        }
        entries[i].end = Swift.max(entries[i].end, r.time)
        let outbound = r.direction == .outbound
        switch r.kind {
        case .transportOpen:
            if let u = rec.json?["url"]?.stringValue { entries[i].url = u }
            entries[i].headers = Self.headers(rec.json)
        case .transportOpened:
            if entries[i].opened == nil { entries[i].opened = r.time }
        case .frameText, .frameBinary:
            // Frames prove the socket open even when the trace lacks its transportOpened.
            if entries[i].opened == nil { entries[i].opened = r.time }
            let binary = r.kind == .frameBinary
            entries[i].messages.append([
                "type": .string(outbound ? "send" : "receive"),
                "time": unixSeconds(r.time),
                "opcode": .int(binary ? 2 : 1),
                "data": .string(binary ? base64(r.payload) : r.payloadText),
            ])
        case .transportClosed:
            let code = rec.json?["code"]?.intValue
            let reason = rec.json?["reason"]?.stringValue ?? ""
            var close: [String: JSONValue] = ["by": .string(outbound ? "client" : "relay"), "reason": .string(reason)]
            if let code { close["code"] = .int(code) }
            entries[i].close = .object(close)
            if let code, (1000...4999).contains(code), ![1004, 1005, 1006, 1015].contains(code) {
                let payload = [UInt8(truncatingIfNeeded: code >> 8), UInt8(truncatingIfNeeded: code)] + Array(reason.utf8)
                entries[i].messages.append([
                    "type": .string(outbound ? "send" : "receive"), "time": unixSeconds(r.time), "opcode": 8,
                    "data": .string(base64(payload)),
                ])
            }
        case .transportFailed:
            let error = rec.json?["error"]?.stringValue ?? "transport failed"
            entries[i].error = error
            if let s = rec.json?["status"]?.intValue, (100...599).contains(s) { entries[i].refusedStatus = Int(s) }
            if entries[i].opened != nil, entries[i].refusedStatus == nil {
                entries[i].messages.append(["type": "error", "time": unixSeconds(r.time), "opcode": -1, "data": .string(error)])
            }
        default: break
        }
    }

    /// The upgrade request's headers as HAR `{name, value}` objects: a `headers` object in
    /// `headerOrder`'s order (then any others by name), or a `headers` array as it is.
    private static func headers(_ json: JSONValue?) -> [JSONValue] {
        func text(_ v: JSONValue) -> String { v.stringValue ?? v.jsonText }
        switch json?["headers"] {
        case .object(let o)?:
            var seen = Set<String>()
            var names: [String] = []
            for n in json?["headerOrder"]?.arrayValue?.compactMap(\.stringValue) ?? [] where o[n] != nil && !seen.contains(n) {
                names.append(n)
                seen.insert(n)
            }
            names += o.keys.filter { !seen.contains($0) }.sorted()
            return names.compactMap { n in o[n].map { ["name": .string(n), "value": .string(text($0))] } }
        case .array(let a)?:
            return a.compactMap { h in
                guard let n = h["name"]?.stringValue else { return nil }
                return ["name": .string(n), "value": .string(h["value"].map(text) ?? "")]
            }
        default:
            return []
        }
    }

    static let statusTexts: [Int: String] = [
        101: "Switching Protocols", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        426: "Upgrade Required", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
        503: "Service Unavailable",
    ]

    /// The HAR document.
    public func finish() -> JSONValue {
        let list: [JSONValue] = entries.map { e in
            let started = rfc3339(unixNanoseconds: startNs &+ e.start.nanoseconds)
            let ms = Double((e.end - e.start).nanoseconds) / 1e6
            let upgradeMs = e.opened.map { Double(($0 - e.start).nanoseconds) / 1e6 } ?? ms
            // A socket that never opened and was not refused with a status has no HTTP status: 0, as
            // DevTools records a failed request.
            let status = e.refusedStatus ?? (e.opened != nil ? 101 : 0)
            var response: [String: JSONValue] = [
                "status": .int(Int64(status)), "statusText": .string(Self.statusTexts[status] ?? ""),
                "httpVersion": "HTTP/1.1",
                "headers": status == 101 ? [["name": "Upgrade", "value": "websocket"], ["name": "Connection", "value": "Upgrade"]] : [],
                "cookies": [], "content": ["size": 0, "mimeType": "x-unknown"], "redirectURL": "", "headersSize": -1, "bodySize": 0,
            ]
            if let error = e.error { response["_error"] = .string(error) }
            var entry: [String: JSONValue] = [
                "startedDateTime": .string(started),
                "time": .double(ms),
                "request": ["method": "GET", "url": .string(e.url), "httpVersion": "HTTP/1.1", "headers": .array(e.headers),
                            "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0],
                "response": .object(response),
                "cache": [:],
                "timings": ["blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": .double(upgradeMs),
                            "receive": .double(Swift.max(0, ms - upgradeMs))],
                "_resourceType": "websocket",
                "_relaytraceGeneration": .int(Int64(bitPattern: e.generation)),
                "_webSocketMessages": .array(e.messages),
            ]
            if let close = e.close { entry["_relaytraceClose"] = close }
            return .object(entry)
        }
        return ["log": ["version": "1.2", "creator": ["name": "relaytrace", "version": .string(TraceHeaderVersion.tool)],
                        "pages": [], "entries": .array(list)]]
    }
}

/// Standard base64 with padding.
public func base64(_ bytes: [UInt8]) -> String {
    let t = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i + 3 <= bytes.count {
        let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
        out += [t[Int(n >> 18)], t[Int((n >> 12) & 63)], t[Int((n >> 6) & 63)], t[Int(n & 63)]]
        i += 3
    }
    let rest = bytes.count - i
    if rest > 0 {
        let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
        out += [t[Int(n >> 18)], t[Int((n >> 12) & 63)], rest == 2 ? t[Int((n >> 6) & 63)] : UInt8(ascii: "="), UInt8(ascii: "=")]
    }
    return String(decoding: out, as: UTF8.self)
}

/// Streams a Chrome trace-event JSON document (`{"traceEvents":[...]}`, loadable by chrome://tracing and
/// Perfetto): process "relaytrace", one thread (track) per generation named `gen N` with a `B`/`E`
/// slice for the socket's life, `X` slices for every RPC on the generation it went out on, from its
/// request to where it ended (``RpcCallTracker``: its response, the client's failure of the call, its
/// socket's end, or the end of the trace while still pending; `args.outcome` says which), instant events
/// for other frames; a `leases` track with async `b`/`e` spans per lease; a `client` track with instants
/// for timers, inputs and actions. Times in microseconds since the trace start.
public struct ChromeTraceExporter {
    private let emit: ([UInt8]) -> Void
    private var first = true
    private var named = Set<UInt64>()
    private var liveGens = Set<UInt64>()
    private var openLeases: [String: Moment] = [:]
    private var calls = RpcCallTracker()
    private var last: Moment = .zero
    static let leasesTid: UInt64 = 1_000_000
    static let clientTid: UInt64 = 1_000_001

    /// Starts the document with `emit`.
    public init(emit: @escaping ([UInt8]) -> Void) {
        self.emit = emit
        emit(Array("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n".utf8))
        event(["ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": ["name": "relaytrace"]])
        thread(Self.leasesTid, "leases")
        thread(Self.clientTid, "client")
    }

    private mutating func event(_ e: JSONValue) {
        emit((first ? [] : Array(",\n".utf8)) + e.serialized())
        first = false
    }

    private mutating func thread(_ tid: UInt64, _ name: String) {
        event(["ph": "M", "pid": 1, "tid": .int(Int64(tid)), "name": "thread_name", "args": ["name": .string(name)]])
        event(["ph": "M", "pid": 1, "tid": .int(Int64(tid)), "name": "thread_sort_index", "args": ["sort_index": .int(Int64(tid))]])
    }

    static func us(_ t: Moment) -> JSONValue { .double(Double(t.nanoseconds) / 1000) }

    /// The `X` slice of an RPC, from its request to its end (or `last` while pending).
    private mutating func slice(_ call: RpcCall, response: String?) {
        guard let g = call.generation else { return }
        let end = call.ended ?? last
        var args: [String: JSONValue] = ["id": .string(call.requestId), "outcome": .string(call.why)]
        if let response { args["response"] = .string(response) }
        if let c = call.callId { args["callId"] = .int(c) }
        event(["ph": "X", "pid": 1, "tid": .int(Int64(g)), "ts": Self.us(call.sent),
               "dur": .double(Double((end - call.sent).nanoseconds) / 1000), "name": .string(call.method ?? "?"), "cat": "rpc",
               "args": .object(args)])
    }

    /// Adds a record.
    public mutating func add(_ rec: InspectedRecord) {
        let r = rec.record
        last = Swift.max(last, r.time)
        let ts = Self.us(r.time)
        var isRPC = false  // the record is drawn as its RPC's slice
        for e in calls.add(rec) {
            switch e {
            case .started: isRPC = true
            case .ended(let call):
                let byResponse = call.endRecord == rec.number && rec.type == "rpc.response"
                if byResponse { isRPC = true }
                slice(call, response: byResponse ? rec.summary : nil)
            }
        }
        if let g = r.generation, r.channel == .relay {
            if !named.contains(g) {
                named.insert(g)
                thread(g, "gen \(g)")
            }
            let tid = JSONValue.int(Int64(g))
            switch r.kind {
            case .transportOpen, .transportOpened:
                if !liveGens.contains(g) {
                    liveGens.insert(g)
                    event(["ph": "B", "pid": 1, "tid": tid, "ts": ts, "name": .string("generation \(g)"), "cat": "socket"])
                }
                event(["ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": ts, "name": .string(r.kind.name), "cat": "socket"])
            case .transportClosed, .transportFailed:
                event(["ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": ts, "name": .string(r.kind.name), "cat": "socket", "args": rec.json ?? .null])
                if liveGens.remove(g) != nil { event(["ph": "E", "pid": 1, "tid": tid, "ts": ts]) }
            case .frameText, .frameBinary:
                if !isRPC {
                    event(["ph": "i", "s": "t", "pid": 1, "tid": tid, "ts": ts, "name": .string(rec.type ?? (rec.terminal != nil ? "PTC1" : r.kind.name)),
                           "cat": "frame", "args": ["dir": .string(r.direction?.description ?? "-"), "summary": .string(rec.summary)]])
                }
                if rec.eventType == "chat:timeline-interest", r.direction == .outbound, let p = rec.eventPayload {
                    let key = p["sessionId"]?.stringValue ?? p["appSessionId"]?.stringValue ?? "?"
                    if p["active"]?.boolValue == false {
                        if openLeases.removeValue(forKey: key) != nil {
                            event(["ph": "e", "pid": 1, "tid": .int(Int64(Self.leasesTid)), "ts": ts, "name": .string("lease \(key)"), "cat": "lease", "id": .string(key)])
                        }
                    } else {
                        if openLeases[key] == nil {
                            openLeases[key] = r.time
                            event(["ph": "b", "pid": 1, "tid": .int(Int64(Self.leasesTid)), "ts": ts, "name": .string("lease \(key)"), "cat": "lease", "id": .string(key)])
                        }
                        event(["ph": "n", "pid": 1, "tid": .int(Int64(Self.leasesTid)), "ts": ts, "name": .string("lease \(key)"), "cat": "lease", "id": .string(key),
                               "args": ["renewal": .string(rec.summary)]])
                    }
                }
            default: break
            }
            return
        }
        switch r.kind {
        case .timerFired, .input, .action, .marker:
            event(["ph": "i", "s": "t", "pid": 1, "tid": .int(Int64(Self.clientTid)), "ts": ts,
                   "name": .string(rec.inputOrActionName ?? r.kind.name), "cat": .string(r.kind.name), "args": ["summary": .string(rec.summary)]])
        default: break
        }
    }

    /// Closes open spans at the last record time and ends the document: an RPC whose socket ended without
    /// anything else ending it gets its slice to that end, one still pending to the last record.
    public mutating func finish() {
        for call in calls.finish() { slice(call, response: nil) }
        let ts = Self.us(last)
        for g in liveGens.sorted() { event(["ph": "E", "pid": 1, "tid": .int(Int64(g)), "ts": ts]) }
        for key in openLeases.keys.sorted() {
            event(["ph": "e", "pid": 1, "tid": .int(Int64(Self.leasesTid)), "ts": ts, "name": .string("lease \(key)"), "cat": "lease", "id": .string(key)])
        }
        liveGens = []
        openLeases = [:]
        emit(Array("\n]}\n".utf8))
    }
}
