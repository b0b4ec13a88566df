import Capture
import SpecCheck
import WireReplay
public import RelayClient
public import RelayProtocol
public import Trace

// MARK: Options, phones, errors

/// How a wire trace is replayed into the model (``WireReplayer``).
public struct WireReplayOptions: Sendable, Hashable {
    /// The default ``tolerance``: 250 ms.
    public static let defaultTolerance: Duration = .milliseconds(250)

    /// How far the time of one of the client's messages (or socket opens and closes) may lie from the
    /// model's, either way, before it counts as parting. It absorbs what a real client adds to the model's
    /// timing: the round trip between the recorder and the client (the model reacts at the time the relay's
    /// message was recorded, the client once it arrived), the client's scheduling of its timers and
    /// callbacks, and the latency jitter between two of its messages (which can make an interval look
    /// shorter than it was). The model's timers follow the client's own acts, so these never add up.
    public var tolerance: Duration
    /// The phone to replay (its `X-Device-ID`, any case); nil: the trace's only phone.
    public var device: String?
    /// The model's timing (the SPEC's unless a what-if experiment changes it, `replay --set`).
    public var tuning: ClientTuning

    /// Options with `tolerance` (default 250 ms), `device` and `tuning`.
    public init(tolerance: Duration = WireReplayOptions.defaultTolerance, device: String? = nil, tuning: ClientTuning = .spec) {
        self.tolerance = tolerance
        self.device = device
        self.tuning = tuning
    }
}

/// A phone whose sockets a wire trace holds (one `X-Device-ID` whose `X-Client-Type` is not `desktop`).
public struct WirePhone: Sendable, Hashable, CustomStringConvertible {
    /// Its device ID as its first socket sent it.
    public var deviceId: String
    /// How many sockets it opened.
    public var sockets: Int
    /// Its client type (`mobile`, or nil when it sent none).
    public var clientType: String?

    /// `5b0e6c8a-... (3 sockets)`.
    public var description: String { "\(deviceId) (\(sockets) socket\(sockets == 1 ? "" : "s"))" }
}

/// Why a wire trace cannot be replayed into the model.
public struct WireReplayError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// True when the caller's choice is at fault (no or an unknown `--device` among several phones):
    /// a usage error; false when the trace is (no phone socket in it).
    public var isUsage: Bool
    /// The phones the trace holds.
    public var phones: [WirePhone]

    /// The message.
    public var description: String { message }
}

// MARK: The report

/// One place where the recorded client and the model part.
public struct WireParting: Sendable, Equatable, CustomStringConvertible {
    /// How they part.
    public enum Kind: String, Sendable, Hashable {
        /// The same message (or socket open or close), at another time.
        case timing
        /// The same kind of message, with other content (or a close with another code).
        case different
        /// The model does it; the client did not.
        case missing
        /// The client did it; the model does not.
        case extra
    }

    /// The trace record number (the client's record; for something only the model does, the first
    /// record at or after the model's time).
    public var record: Int
    /// Where it happens: the earlier of the client's and the model's time.
    public var time: Moment
    /// The phone's socket, counting from 1 in the order it opened them.
    public var socket: Int
    /// The socket's generation in the trace.
    public var generation: UInt64?
    /// How they part.
    public var kind: Kind
    /// What parts (`heartbeat`, `register`, `rpc.request session.list`, `close`, `open`).
    public var what: String
    /// The SPEC rule involved, when one is.
    public var rule: SpecRule?
    /// When the client did it (nil: it did not).
    public var clientTime: Moment?
    /// When the model does it (nil: it does not).
    public var modelTime: Moment?
    /// One sentence: measured (your client) against expected (the model).
    public var message: String
    /// The member-by-member differences (`$.path: the model X, your client Y`), for `different`.
    public var differences: [String]
    /// The inference the report depends on, when it does (then it is not the client's fault for sure,
    /// and it does not fail the replay).
    public var dependsOn: String?
    /// The phone's records before it (the parting's record marked `>`).
    public var context: [String]

    /// `#17 t=6.104s socket 1 (g1) timing: <message> (SPEC A6: ...)`.
    public var description: String {
        var s = "#\(record) t=\(time) socket \(socket)\(generation.map { " (g\($0))" } ?? "") \(kind.rawValue): \(message)"
        if let rule { s += " (\(rule))" }
        if let dependsOn { s += " [depends on an inference: \(dependsOn)]" }
        return s
    }

    /// As JSON: `record`, `time` (s), `timeNs`, `socket`, `generation`, `kind`, `what`, `rule` {section,
    /// summary, id: the `relaytrace check` rule ID when there is one}, `clientTimeNs`, `modelTimeNs`, `message`, `differences`, `dependsOn`, `context`.
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "record": .int(Int64(record)), "time": .double(time.seconds), "timeNs": .int(time.nanoseconds),
            "socket": .int(Int64(socket)), "kind": .string(kind.rawValue), "what": .string(what), "message": .string(message),
            "differences": .array(differences.map { .string($0) }), "context": .array(context.map { .string($0) }),
            "clientTimeNs": clientTime.map { .int($0.nanoseconds) } ?? .null,
            "modelTimeNs": modelTime.map { .int($0.nanoseconds) } ?? .null,
            "dependsOn": dependsOn.map { .string($0) } ?? .null,
        ]
        o["generation"] = generation.map { .int(Int64(bitPattern: $0)) } ?? .null
        o["rule"] = rule?.json ?? .null
        return .object(o)
    }
}

/// An input the replay gave the model because the client's own traffic shows it (the wire does not
/// carry the client's inputs).
public struct WireInference: Sendable, Hashable, CustomStringConvertible {
    /// The client's record it comes from.
    public var record: Int
    /// When it was fed.
    public var time: Moment
    /// The input: `start`, `call`, `claim`, `release`, `stop`.
    public var input: String
    /// What was inferred, from what.
    public var detail: String

    /// `0.012s #1 start: ...`.
    public var description: String { "\(time) #\(record) \(input): \(detail)" }

    /// `{record, timeNs, input, detail}`.
    public var json: JSONValue {
        ["record": .int(Int64(record)), "timeNs": .int(time.nanoseconds), "input": .string(input), "detail": .string(detail)]
    }
}

/// What a wire replay found.
public struct WireReplayReport: Sendable {
    /// The phone replayed.
    public var device: String
    /// Its sockets.
    public var sockets: Int
    /// The phone's records (of the trace's).
    public var records: Int
    /// The trace's records.
    public var traceRecords: Int
    /// The tolerance used.
    public var tolerance: Duration
    /// Every parting, in time order.
    public var partings: [WireParting]
    /// Every inferred input, in time order.
    public var inferences: [WireInference]
    /// The client's messages the model never makes and the wire cannot explain (text pings, binary
    /// frames, terminal binds, event acks, events other than leases): listed, not judged.
    public var notJudged: [String]
    /// The client's messages, opens and closes the model matched (same content, within the tolerance).
    public var matched: Int
    /// The time of the last record.
    public var end: Moment

    /// Whether the client and the model agree: no parting, or only ones that depend on an inference.
    public var agrees: Bool { partings.allSatisfy { $0.dependsOn != nil } }

    /// The partings a report shows: every one with `all`; else the first that does not depend on an
    /// inference (or, when every one does, the first).
    public func shown(all: Bool) -> [WireParting] {
        if all { return partings }
        if let first = partings.first(where: { $0.dependsOn == nil }) { return [first] }
        return Array(partings.prefix(1))
    }

    /// The report as text: a summary line, the partings shown (each with its rule, measured and expected
    /// and the records before it), the inferred inputs and what was not judged.
    public func text(all: Bool) -> String {
        let tol = "\(tolerance.nanoseconds / 1_000_000) ms"
        var lines = ["wire replay of phone \(device): \(sockets) socket\(sockets == 1 ? "" : "s"), \(records) of \(traceRecords) records, tolerance \(tol)"]
        let definite = partings.filter { $0.dependsOn == nil }.count
        if partings.isEmpty {
            lines.append("no parting: the model does what your client did (\(matched) messages, opens and closes matched)")
        } else if definite == 0 {
            lines.append("no parting that holds whatever the inferences; \(partings.count) depend on an inference (\(matched) matched)")
        } else {
            lines.append("\(definite) parting\(definite == 1 ? "" : "s")\(partings.count > definite ? " and \(partings.count - definite) that depend on an inference" : "") (\(matched) matched)\(all ? "" : "; the first is shown, --all lists every one")")
        }
        for p in shown(all: all) {
            lines.append("parting at record #\(p.record), t=\(p.time), socket \(p.socket)\(p.generation.map { " (g\($0))" } ?? "") (\(p.kind.rawValue))")
            if let rule = p.rule { lines.append("  rule:     \(rule)") }
            lines.append("  \(p.message)")
            if let d = p.dependsOn { lines.append("  depends on an inference: \(d)") }
            if !p.differences.isEmpty {
                lines.append("  differences (the model, your client):")
                lines += p.differences.prefix(20).map { "    \($0)" }
            }
            if !all || partings.count <= 5 {
                lines.append("  context:")
                lines += p.context.map { "    \($0)" }
            }
        }
        lines.append("inferred inputs (the wire shows the client's traffic, not its inputs; docs/RECORDING.md): \(inferences.count)")
        lines += inferences.prefix(all ? Int.max : 20).map { "  \($0)" }
        if !all, inferences.count > 20 { lines.append("  ... \(inferences.count - 20) more (--all)") }
        if !notJudged.isEmpty {
            lines.append("not judged (the model never sends these; the wire does not say why the client did): \(notJudged.count)")
            lines += notJudged.prefix(all ? Int.max : 10).map { "  \($0)" }
        }
        return lines.joined(separator: "\n")
    }

    /// The report as JSON: `device`, `sockets`, `records`, `traceRecords`, `toleranceNs`, `result`
    /// (`agreed` or `parted`), `matched`, `partings` (all with `all`, else the shown ones) with
    /// `partingsTotal`, `inferences`, `notJudged`.
    public func json(all: Bool) -> JSONValue {
        [
            "device": .string(device), "sockets": .int(Int64(sockets)), "records": .int(Int64(records)),
            "traceRecords": .int(Int64(traceRecords)), "toleranceNs": .int(tolerance.nanoseconds),
            "result": .string(agrees ? "agreed" : "parted"), "matched": .int(Int64(matched)),
            "partings": .array(shown(all: all).map(\.json)), "partingsTotal": .int(Int64(partings.count)),
            "inferences": .array(inferences.map(\.json)), "notJudged": .array(notJudged.map { .string($0) }),
        ]
    }
}

// MARK: The replayer

/// Replays a wire trace (docs/TRACE_FORMAT.md §14) into the client model: the recorded relay side of
/// one phone drives ``RelayClientMachine`` on the virtual clock, and what the model sends is compared
/// with what the real client sent.
///
/// It runs on ``WhatIfReplayer`` (the engine that feeds a client against a recorded peer): socket opens
/// answered as recorded, relay answers (`registered`, `rpc.response`, `pong`) delivered to the model's own
/// requests by meaning with the model's IDs, relay events and closes at their recorded times. What the
/// wire does not carry is inferred from the client's own traffic (docs/RECORDING.md lists every
/// inference and what cannot be known):
/// - `start` where the client opened its first socket, from its upgrade headers (the JWT as recorded, the
///   device and desktop IDs) and its first `register` (device name, stored resume credentials);
/// - a `call` where the client sent an `rpc.request` the model does not send by itself, with its method,
///   params and idempotency key;
/// - a lease `claim` (`release`) where the client sent `chat:timeline-interest` active (inactive) for a
///   session the model does not lease (does);
/// - `stop` where the client closed a socket the model would not close; `start` again (or `stop` and
///   `start`) where it opened a new socket the model would not open. The model reconnects when the client
///   did (SPEC 1.6 sets no reconnect pacing).
///
/// The client's messages are paired with the model's by kind and occurrence on the same socket
/// (``FrameMeaning``, its model comparison), then compared: content (values that vary between runs left out) and time
/// (within ``WireReplayOptions/tolerance``). A model timer whose act the client did a little later fires
/// when the client acted, so jitter never accumulates; a heartbeat or lease renewal is re-anchored that
/// way even when it is out of tolerance, so each report speaks of one interval.
public final class WireReplayer {
    /// The trace header.
    public let header: TraceHeader
    /// The options.
    public let options: WireReplayOptions
    /// The phone replayed.
    public let phone: WirePhone
    /// The model's configuration, inferred from the phone's first socket.
    public let configuration: ClientConfiguration

    private let traceRecords: Int
    private let phoneRecords: [TraceRecord]
    private let number: [Int]  // phone record -> trace record number
    private var sockets: [RealSocket] = []
    private var openOf: [Int: Int] = [:]  // phone record -> socket
    private var itemOf: [Int: (socket: Int, item: Int)] = [:]
    private let redactor: Redactor
    private let end: Moment
    private var tolerance: Duration { options.tolerance }

    // The model's side, as the run goes.
    private var model: [ModelSocket] = []
    private var modelSocketOf: [Generation: Int] = [:]
    private var opens: [ModelOpen] = []
    private var items: [ModelItem] = []
    private var counts: [SocketKey: Int] = [:]
    private var currentInput: ClientInput?
    private var currentAnnotation: String?
    private var currentCause: Cause?
    private var intended: Moment = .zero
    private var now: Moment = .zero
    private var armedBy: [TimerID: Armed] = [:]
    private var held: [TimerID: Moment] = [:]
    private var annotations: [(input: ClientInput, inference: String?)] = []
    private var inferences: [WireInference] = []
    private var onlinePartings: [WireParting] = []
    private var inferredCalls: [CallID: (socket: Int, item: Int)] = [:]
    private var callFailures: [SocketKey: CallFailure] = [:]
    private var claims: [ClaimID: (session: String, record: Int)] = [:]
    private var nextCall: UInt64 = 1
    private var nextClaim: UInt64 = 1
    private var starts: UInt64 = 0
    /// The phone's link sockets, left out of the replay (as notes for ``WireReplayReport/notJudged``).
    private let linkSockets: [String]

    /// Prepares the replay of `options.device` (or the trace's only phone) in `records` under `header`.
    /// - Throws: ``WireReplayError`` when the trace is not a wire trace, holds no phone socket, or holds
    ///   several phones and none (or an unknown one) was chosen.
    public init(header: TraceHeader, records: [TraceRecord], options: WireReplayOptions = WireReplayOptions()) throws(WireReplayError) {
        self.header = header
        self.options = options
        traceRecords = records.count
        let phones = Self.phones(in: records)
        guard header.isWireTrace else {
            throw WireReplayError(message: "not a wire trace (its header has no wire member)", isUsage: false, phones: phones)
        }
        let chosen: WirePhone
        if let wanted = options.device {
            guard let p = phones.first(where: { $0.deviceId.lowercased() == wanted.lowercased() }) else {
                throw WireReplayError(message: "no phone with device ID \(wanted) in the trace; it holds " + Self.list(phones), isUsage: true, phones: phones)
            }
            chosen = p
        } else {
            guard !phones.isEmpty else {
                throw WireReplayError(message: "the trace holds no phone socket (no upgrade request with X-Device-ID from a client that is not a desktop)",
                                      isUsage: false, phones: [])
            }
            guard phones.count == 1 else {
                throw WireReplayError(message: "the trace holds \(phones.count) phones; choose one with --device: " + Self.list(phones), isUsage: true, phones: phones)
            }
            chosen = phones[0]
        }
        phone = chosen
        var gens: Set<UInt64> = []
        for r in records where r.kind == .transportOpen && r.direction == .outbound {
            if let g = r.generation, let o = try? JSONValue(parsing: r.payload), Self.device(of: o)?.lowercased() == chosen.deviceId.lowercased(),
               !Self.isDesktop(o) {
                gens.insert(g)
            }
        }
        // Link sockets (docs/DEVICE_LINK.md: `link.redeem` first, no desktop yet) are not replayed: the
        // link code a user typed or scanned is an input the replay does not infer.
        var linkNotes: [String] = []
        var firstMessage: Set<UInt64> = []
        for (i, r) in records.enumerated() where r.kind == .frameText && r.direction == .outbound {
            guard let g = r.generation, gens.contains(g), firstMessage.insert(g).inserted else { continue }
            if FrameMeaning(.text(r.payloadText), comparison: .model).type == SpecNumbers.linkRedeem {
                gens.remove(g)
                linkNotes.append("#\(i) \(r.time) g\(g): a link socket (\(SpecNumbers.linkRedeem)): device linking is not replayed into the model")
            }
        }
        linkSockets = linkNotes
        var mine: [TraceRecord] = []
        var numbers: [Int] = []
        for (i, r) in records.enumerated() {
            guard let g = r.generation, gens.contains(g) else { continue }
            mine.append(r)
            numbers.append(i)
        }
        phoneRecords = mine
        number = numbers
        redactor = header.redaction.redactor
        end = records.last?.time ?? .zero
        guard mine.contains(where: { $0.kind == .transportOpen }) else {
            throw WireReplayError(message: "the phone's sockets are all link sockets (link.redeem): device linking is not replayed into the model",
                                  isUsage: false, phones: phones)
        }
        guard let configuration = Self.configuration(from: mine) else {
            throw WireReplayError(message: "no relay URL the model accepts can be made from the phone's first socket", isUsage: false, phones: phones)
        }
        self.configuration = configuration
        buildSockets()
    }

    /// The phones in a wire trace's records, in the order their first socket opened.
    public static func phones(in records: [TraceRecord]) -> [WirePhone] {
        var out: [WirePhone] = []
        var index: [String: Int] = [:]
        for r in records where r.kind == .transportOpen && r.direction == .outbound {
            guard let o = try? JSONValue(parsing: r.payload), !isDesktop(o), let d = device(of: o) else { continue }
            if let k = index[d.lowercased()] { out[k].sockets += 1 } else {
                index[d.lowercased()] = out.count
                out.append(WirePhone(deviceId: d, sockets: 1, clientType: o["clientType"]?.stringValue))
            }
        }
        return out
    }

    private static func list(_ phones: [WirePhone]) -> String {
        phones.isEmpty ? "no phone" : phones.map(\.description).joined(separator: ", ")
    }

    private static func device(of open: JSONValue) -> String? {
        open["deviceId"]?.stringValue ?? header(open, "X-Device-ID")
    }

    private static func isDesktop(_ open: JSONValue) -> Bool {
        (open["clientType"]?.stringValue ?? header(open, "X-Client-Type"))?.lowercased() == "desktop"
    }

    /// A header of a `transportOpen` payload, by name in any case.
    static func header(_ open: JSONValue, _ name: String) -> String? {
        guard case .object(let h)? = open["headers"] else { return nil }
        let lower = name.lowercased()
        return h.first { $0.key.lowercased() == lower }?.value.stringValue
    }

    /// The model's configuration from the phone's first socket: device and desktop from its headers (the
    /// desktop from `register` when the header is missing), the device name from its first `register`,
    /// the relay URL as recorded when it is an absolute URL the model accepts, else `wss://HOST/PATH`.
    private static func configuration(from records: [TraceRecord]) -> ClientConfiguration? {
        let open = records.first { $0.kind == .transportOpen }.flatMap { try? JSONValue(parsing: $0.payload) } ?? .object([:])
        let register = records.lazy.filter { $0.kind == .frameText && $0.direction == .outbound }
            .compactMap { r -> RegisterPayload? in
                if case .register(let p)? = try? RelayMessage(decodingText: r.payloadText) { return p }
                return nil
            }.first
        let deviceId = device(of: open) ?? register?.deviceId ?? ""
        let desktopId = header(open, "X-Target-Desktop-Device-ID") ?? register?.targetDesktopDeviceId ?? ""
        let url = open["url"]?.stringValue ?? ClientConstants.deviceLinkPath
        var candidates: [(String, Bool)] = []
        if url.contains("://") {
            let host = hostOf(url)
            candidates.append((url, RelayURLPolicy.isLoopback(host)))
        }
        let host = header(open, "Host").map { $0.isEmpty ? "relay" : $0 } ?? "relay"
        candidates.append(("wss://\(host)\(pathOf(url))", false))
        candidates.append(("wss://relay\(ClientConstants.deviceLinkPath)", false))
        return candidates.lazy.compactMap { u, loopback in
            try? ClientConfiguration(deviceId: deviceId, deviceName: register?.deviceName ?? "", desktopId: desktopId,
                                     relayURL: u, allowInsecureLoopback: loopback, seed: 1)
        }.first
    }

    static func pathOf(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url.isEmpty ? "/" : url }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        return String(rest[slash...])
    }

    static func hostOf(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return "" }
        var authority = url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        return String(authority.prefix { $0 != ":" })
    }

    // MARK: The recorded client

    private struct RealSocket {
        var gen: UInt64
        var openRecord: Int
        var openTime: Moment
        var open: JSONValue
        var items: [RealItem] = []
        var byKey: [String: [Int]] = [:]
        var end: Moment?
        var endedByRelay = false
        var register: RegisterPayload?
    }

    private struct RealItem {
        var record: Int  // trace record number
        var phoneRecord: Int
        var time: Moment
        var key: String
        var meaning: FrameMeaning?
        var closeCode: Int64?
        var clean = true
        var judged: Bool
        var occurrence = 0
        var paired = false
    }

    private struct SocketKey: Hashable {
        var socket: Int
        var key: String
    }

    /// The keys of the messages the model can send; other client messages are not judged.
    private static let judgedTypes: Set<String> = [
        RelayMessage.TypeName.register, RelayMessage.TypeName.heartbeat, RelayMessage.TypeName.rpcRequest, RelayMessage.TypeName.pong,
    ]

    private func buildSockets() {
        var socketOfGen: [UInt64: Int] = [:]
        for (p, r) in phoneRecords.enumerated() {
            guard let g = r.generation else { continue }
            if r.kind == .transportOpen {
                socketOfGen[g] = sockets.count
                openOf[p] = sockets.count
                sockets.append(RealSocket(gen: g, openRecord: number[p], openTime: r.time, open: (try? JSONValue(parsing: r.payload)) ?? .object([:])))
                continue
            }
            guard let k = socketOfGen[g] else { continue }
            var item: RealItem?
            switch (r.kind, r.direction) {
            case (.frameText, .outbound?):
                let meaning = FrameMeaning(.text(r.payloadText), comparison: .model)
                var judged = meaning.type.map { Self.judgedTypes.contains($0) } ?? true
                if meaning.kind == "\(RelayMessage.TypeName.event) \(EventNames.chatTimelineInterest)" { judged = true }
                // A message the protocol does not know, or one with a snake_case key, is judged: the model never sends one.
                if let t = meaning.type, RelayMessage.TypeName.legacyKinds.contains(t) || !Self.knownTypes.contains(t) { judged = true }
                if !CamelCaseGuard.violations(in: meaning.content).isEmpty { judged = true }
                item = RealItem(record: number[p], phoneRecord: p, time: r.time, key: meaning.kind, meaning: meaning, judged: judged)
                if sockets[k].register == nil, meaning.type == RelayMessage.TypeName.register,
                   case .register(let payload)? = try? RelayMessage(decodingText: r.payloadText) {
                    sockets[k].register = payload
                }
            case (.frameBinary, .outbound?):
                item = RealItem(record: number[p], phoneRecord: p, time: r.time, key: "binary", meaning: nil, judged: false)
            case (.transportClosed, .outbound?):
                let o = try? JSONValue(parsing: r.payload)
                item = RealItem(record: number[p], phoneRecord: p, time: r.time, key: Self.closeKey, meaning: nil,
                                closeCode: o?["code"]?.intValue, clean: o?["clean"]?.boolValue ?? true, judged: true)
                if sockets[k].end == nil { sockets[k].end = r.time }
            case (.transportClosed, .inbound?), (.transportFailed, _):
                if sockets[k].end == nil {
                    sockets[k].end = r.time
                    sockets[k].endedByRelay = true
                }
            default:
                break
            }
            if var item {
                item.occurrence = sockets[k].byKey[item.key, default: []].count
                sockets[k].byKey[item.key, default: []].append(sockets[k].items.count)
                itemOf[p] = (k, sockets[k].items.count)
                sockets[k].items.append(item)
            }
        }
    }

    private static let closeKey = "close"
    /// The message types a client may send (PROTOCOL.md §3): another one is judged (the model never sends it).
    private static var knownTypes: Set<String> { SpecNumbers.clientMessageTypes }

    // MARK: The model's side

    private struct ModelSocket {
        var gen: Generation
        var openTime: Moment
        var closed: Moment?
        var failure: String?
    }

    private struct ModelOpen {
        var socket: Int
        var time: Moment
        var url: String
        var headers: [HTTPHeader]
        var cause: Cause
    }

    private struct ModelItem {
        var socket: Int
        var time: Moment
        var intended: Moment
        var key: String
        var meaning: FrameMeaning?
        var closeCode: UInt16?
        var cause: Cause
        var real: Int?
    }

    /// What made the model act.
    private struct Cause {
        var text: String
        var timer: TimerID?
        var anchor: Moment?
        var anchorText: String?
        var inference: String?
    }

    private struct Armed {
        var time: Moment
        var text: String
        var inference: String?
    }

    /// Runs the replay to the last record (and the tolerance after it) and reports.
    public func run() -> WireReplayReport {
        var machine = RelayClientMachine(configuration: configuration, tuning: wireTuning)
        // The client had its device ID: nothing in the identity gate is visible on the wire.
        _ = machine.handle(.identity(.start), at: .zero)
        _ = machine.handle(.identity(.identityRead(.available(deviceId: configuration.deviceId, login: nil))), at: .zero)
        let engine = WhatIfReplayer(header: header, records: phoneRecords, given: machine)
        engine.endSlack = tolerance
        engine.answersNoEarlierThanRecorded = true
        engine.clientRecordInputs = { [unowned self] p, m in inputs(at: p, machine: m) }
        engine.timerFiring = { [unowned self] id, deadline, m in firing(id, deadline: deadline, machine: m) }
        engine.onInput = { [unowned self] input, t in observe(input, at: t) }
        engine.onAction = { [unowned self] action, t in observe(action, at: t) }
        _ = engine.run()
        return report()
    }

    /// The model's timing for a wire replay: the options' tuning with one tiny reconnect step, so the
    /// replay can hold each reconnect until the client reconnected.
    private var wireTuning: ClientTuning {
        var t = options.tuning
        t.reconnectDelays = [.nanoseconds(1)]
        return t
    }

    // MARK: Inferring the client's inputs

    private func annotate(_ input: ClientInput, _ inference: String?) -> ClientInput {
        annotations.append((input, inference))
        return input
    }

    private func infer(_ p: Int, _ input: String, _ detail: String) {
        inferences.append(WireInference(record: number[p], time: phoneRecords[p].time, input: input, detail: detail))
    }

    /// The inputs at the client's record `p` (an open, a message, a close), given the model then.
    private func inputs(at p: Int, machine m: RelayClientMachine) -> [ClientInput] {
        if let k = openOf[p] { return opening(socket: k, at: p, machine: m) }
        guard let (k, j) = itemOf[p], k < model.count, m.generation == model[k].gen else { return [] }
        let item = sockets[k].items[j]
        let t = phoneRecords[p].time
        if item.key == Self.closeKey {
            if timersWouldDo(item, socket: k, machine: m, from: t) { return [] }
            let silence = t - m.lastInbound
            let how = item.clean ? (item.closeCode.map { "with \($0)" } ?? "with an empty close frame") : "without a close frame"
            infer(p, "stop", "your client closed socket \(k + 1) \(how), \(seconds(silence)) after the last inbound message; the model had no reason to (app state, network path or the app's own choice: the wire does not show which)")
            return [annotate(.stop, nil)]
        }
        guard item.judged, let meaning = item.meaning, counts[SocketKey(socket: k, key: item.key), default: 0] <= item.occurrence else { return [] }
        if timersWouldDo(item, socket: k, machine: m, from: t) { return [] }
        guard let message = try? RelayMessage(decodingText: phoneRecords[p].payloadText) else { return [] }
        switch message {
        case .rpcRequest(let req):
            let id = CallID(nextCall)
            nextCall += 1
            inferredCalls[id] = (k, j)
            infer(p, "call", "\(req.method) with your client's params\(req.idempotencyKey == nil ? "" : " and idempotency key")")
            return [annotate(.call(CallRequest(callId: id, method: req.method, params: req.params, idempotencyKey: req.idempotencyKey)), nil)]
        case .event(let e) where meaning.kind.hasSuffix(EventNames.chatTimelineInterest):
            guard let lease = try? TimelineInterest(json: e.payload) else { return [] }
            let leased = m.interest.lease(for: configuration.desktopId)?.sessionId
            if lease.active, leased != lease.sessionId {
                let id = ClaimID(nextClaim)
                nextClaim += 1
                claims[id] = (lease.sessionId, number[p])
                infer(p, "claim", "a chat view on \(lease.sessionId) became visible (your client leased it)")
                return [annotate(.interest(.claim(id, baseSessionId: lease.sessionId)),
                                 "the chat on \(lease.sessionId) stays open (a claim inferred from your client's lease message #\(number[p]); the wire does not show when the view went away)")]
            }
            if !lease.active, leased == lease.sessionId {
                let mine = m.interest.claims.filter { $0.value.baseSessionId == lease.sessionId }.map(\.key).sorted()
                infer(p, "release", "the chat view on \(lease.sessionId) went away (your client released its lease)")
                return mine.map { annotate(.interest(.release($0)), nil) }
            }
            return []
        default:
            return []
        }
    }

    /// A socket the client opened at record `p`: the model starts (again) unless its held reconnect opens
    /// it now.
    private func opening(socket k: Int, at p: Int, machine m: RelayClientMachine) -> [ClientInput] {
        let s = sockets[k]
        let jwt = Self.header(s.open, "Authorization").map { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : $0 } ?? ""
        var stored: ResumeCredentials?
        if let r = s.register, let session = r.relaySessionId, let token = r.resumeToken {
            stored = ResumeCredentials(relaySessionId: session, resumeToken: token)
        }
        starts += 1
        let start = ClientInput.start(StartParameters(jwt: jwt, storedResume: stored, resumeOwnership: starts))
        let detail = "from the upgrade headers of socket \(k + 1) (the JWT as recorded, device \(Self.device(of: s.open) ?? "none"), desktop \(Self.header(s.open, "X-Target-Desktop-Device-ID") ?? "none"))"
            + (stored == nil ? ", no stored resume token" : ", the resume credentials its register carries")
        switch m.phase {
        case .idle:
            infer(p, "start", detail)
            return [annotate(start, nil)]
        case .stopped(let reason):
            infer(p, "start", detail)
            if reason != .stopped {
                let t = phoneRecords[p].time
                onlinePartings.append(WireParting(
                    record: number[p], time: t, socket: k + 1, generation: s.gen, kind: .extra, what: "open", rule: Self.stopRule(reason),
                    clientTime: t, modelTime: nil,
                    message: "your client opened socket \(k + 1) at \(seconds(t)); the model had stopped (\(reason)) and opens none",
                    differences: [], dependsOn: "the app may have started the client again (a user action the wire does not show)",
                    context: context(before: p)))
            }
            return [annotate(start, nil)]
        case .waitingToReconnect:
            starts -= 1
            return []  // the held reconnect opens it now
        case .connecting, .registering, .registered, .linking, .suspended:
            infer(p, "stop", "your client opened socket \(k + 1) while the model's socket was still open (a network path change the wire does not show, or two sockets at once: see A5)")
            infer(p, "start", detail)
            return [annotate(.stop, "your client's previous socket was dead for it (a network path change the wire does not show)"), annotate(start, nil)]
        }
    }

    private static func stopRule(_ reason: ClientStopReason) -> SpecRule? {
        switch reason {
        case .invalidResumeLoop: SpecRule(.invalidResumeLoop)
        case .sessionEnded: SpecRule(section: "A2", summary: "a refresh refused with 401/403 ends the session")
        case .stopped: nil
        }
    }

    /// Whether an armed timer due within the tolerance makes the model do what the client's `item` did on
    /// socket `k` by itself: the same kind of message with the same content (a lease renewal is not the
    /// client's release), or a close.
    private func timersWouldDo(_ item: RealItem, socket k: Int, machine m: RelayClientMachine, from t: Moment) -> Bool {
        var copy = m
        for (id, deadline) in m.armedTimers.sorted(by: { $0.deadline < $1.deadline }) where deadline <= t + tolerance {
            for a in copy.handle(.timerFired(id), at: max(deadline, t)) {
                guard let v = visible(a), v.socket == k, v.key == item.key else { continue }
                guard case .send(_, .text(let text), _) = a, let theirs = item.meaning?.content else { return true }
                if redactor.redact(json: FrameMeaning(.text(text), comparison: .model).content).canonicallyEquals(theirs) { return true }
            }
        }
        return false
    }

    /// The socket and key of an action the client's traffic can be compared with (a send or a close).
    private func visible(_ a: ClientAction) -> SocketKey? {
        switch a {
        case .send(let g, let frame, _):
            guard let k = modelSocketOf[g] else { return nil }
            switch frame {
            case .text(let t): return SocketKey(socket: k, key: FrameMeaning(.text(t), comparison: .model).kind)
            case .binary: return SocketKey(socket: k, key: "binary")
            }
        case .closeTransport(let g, _, _):
            return modelSocketOf[g].map { SocketKey(socket: $0, key: Self.closeKey) }
        default:
            return nil
        }
    }

    /// When a due timer fires: a reconnect when the client reconnected (never, when it did not); a timer
    /// whose sends or close the client made a little later, when it made them (a heartbeat or lease
    /// renewal even when later than the tolerance); any other at its deadline.
    private func firing(_ id: TimerID, deadline: Moment, machine m: RelayClientMachine) -> TimerFiring {
        if case .reconnect = id {
            guard model.count < sockets.count else { return .never }
            return .at(max(deadline, sockets[model.count].openTime))
        }
        var copy = m
        var local: [SocketKey: Int] = [:]
        var first: Moment?
        for a in copy.handle(.timerFired(id), at: deadline) {
            guard let v = visible(a) else { continue }
            let n = counts[v, default: 0] + local[v, default: 0]
            local[v, default: 0] += 1
            guard v.socket < sockets.count, let list = sockets[v.socket].byKey[v.key], n < list.count else { return .now }
            let t = sockets[v.socket].items[list[n]].time
            first = min(first ?? t, t)
        }
        guard let t = first, t > deadline else { return .now }
        if t - deadline <= tolerance || Self.isPeriodic(id) {
            held[id] = deadline
            return .at(t)
        }
        return .now
    }

    private static func isPeriodic(_ id: TimerID) -> Bool {
        switch id {
        case .heartbeat, .interest(.renewal): true
        default: false
        }
    }

    // MARK: Watching the model

    private func observe(_ input: ClientInput, at t: Moment) {
        now = t
        currentInput = input
        currentCause = nil
        currentAnnotation = nil
        if let a = annotations.first, a.input == input {
            annotations.removeFirst()
            currentAnnotation = a.inference
        }
        intended = t
        if case .timerFired(let id) = input, let deadline = held.removeValue(forKey: id) { intended = deadline }
    }

    /// What made the model act: the input being handled (computed once per input, when needed).
    private var cause: Cause {
        if let currentCause { return currentCause }
        var c = Cause(text: "?", inference: currentAnnotation)
        switch currentInput {
        case .timerFired(let id)?:
            c.timer = id
            let by = armedBy[id]
            c.anchor = by?.time
            c.anchorText = by?.text
            c.inference = c.inference ?? by?.inference
            c.text = Self.timerName(id) == "heartbeat" ? "its previous heartbeat" : "the \(Self.timerName(id)) timer"
            if case .watchdog = id {
                // The lazy watchdog counts from the last inbound message, whenever it was armed.
                c.anchor = intended - options.tuning.watchdogTimeout
                c.anchorText = "the last inbound message"
            }
        case .transportFrame(_, .text(let text))?:
            let m = FrameMeaning(.text(text), comparison: .model)
            if m.type == RelayMessage.TypeName.error, let code = m.content["code"]?.stringValue { c.text = "error \(code)" } else { c.text = m.kind }
        case .transportFrame(_, .binary)?: c.text = "terminal output"
        case .transportOpened?: c.text = "the upgrade"
        case .transportClosed?: c.text = "the relay's close"
        case .transportFailed?: c.text = "the socket's failure"
        case .call?: c.text = "the call"
        case .start?: c.text = "start"
        case .stop?: c.text = "stop"
        case .interest(.claim)?: c.text = "the chat's claim"
        case .interest(.release)?: c.text = "the chat's release"
        default: c.text = "an input"
        }
        currentCause = c
        return c
    }

    /// How a timer re-armed by its own fire names what it counts from: `the previous heartbeat`.
    private static func previous(_ id: TimerID) -> String {
        switch id {
        case .heartbeat: "the previous heartbeat"
        case .interest(.renewal): "the previous lease message"
        default: "the previous \(timerName(id))"
        }
    }

    static func timerName(_ id: TimerID) -> String {
        ClientRecordCodec.timerJSON(id)["timer"]?.stringValue ?? "\(id)"
    }

    private func observe(_ action: ClientAction, at t: Moment) {
        switch action {
        case .armTimer(let id, _):
            let c = cause
            armedBy[id] = Armed(time: t, text: c.timer == id ? Self.previous(id) : c.text, inference: c.inference)
        case .openTransport(let g, let url, let headers):
            let k = model.count
            model.append(ModelSocket(gen: g, openTime: t))
            modelSocketOf[g] = k
            opens.append(ModelOpen(socket: k, time: t, url: url, headers: headers, cause: cause))
        case .send(let g, let frame, _):
            guard let k = modelSocketOf[g] else { return }
            let meaning: FrameMeaning?
            let key: String
            switch frame {
            case .text(let text):
                let m = FrameMeaning(.text(text), comparison: .model)
                meaning = m
                key = m.kind
            case .binary:
                meaning = nil
                key = "binary"
            }
            record(ModelItem(socket: k, time: t, intended: intended, key: key, meaning: meaning, closeCode: nil, cause: cause))
        case .closeTransport(let g, let code, _):
            guard let k = modelSocketOf[g] else { return }
            model[k].closed = t
            record(ModelItem(socket: k, time: t, intended: intended, key: Self.closeKey, meaning: nil, closeCode: code, cause: cause))
        case .connectionFailed(let g, let why):
            if let k = modelSocketOf[g] {
                model[k].failure = "\(why)"
                if model[k].closed == nil { model[k].closed = t }
            }
        case .callCompleted(let id, .failure(let failure)):
            if let (k, j) = inferredCalls[id] { callFailures[SocketKey(socket: k, key: "\(j)")] = failure }
        default:
            return
        }
    }

    private func record(_ item: ModelItem) {
        var item = item
        let sk = SocketKey(socket: item.socket, key: item.key)
        let n = counts[sk, default: 0]
        counts[sk] = n + 1
        if item.socket < sockets.count, let list = sockets[item.socket].byKey[item.key], n < list.count {
            item.real = list[n]
            sockets[item.socket].items[list[n]].paired = true
        }
        items.append(item)
    }

    // MARK: Comparing

    private func report() -> WireReplayReport {
        var partings = onlinePartings
        var matched = 0
        // Opens.
        for o in opens {
            guard o.socket < sockets.count else {
                partings.append(parting(socket: o.socket, kind: .missing, what: "open", rule: Self.openRule, clientTime: nil, modelTime: o.time,
                                        message: "the model opens socket \(o.socket + 1) at \(seconds(o.time)) (on \(o.cause.text)); your client opened no more sockets",
                                        dependsOn: o.cause.inference))
                continue
            }
            let s = sockets[o.socket]
            let (mine, theirs) = openShapes(o, s)
            let diff = JSONDiff.differences(mine, theirs).map(Self.sides)
            let p = phoneIndex(ofRecord: s.openRecord)
            if !diff.isEmpty {
                let urlDiffers = diff.contains { $0.hasPrefix("$.path") || $0.hasPrefix("$.scheme") }
                partings.append(parting(at: p, socket: o.socket, kind: .different, what: "open", rule: SpecRule(urlDiffers ? .url : .upgradeHeaders),
                                        clientTime: s.openTime, modelTime: o.time,
                                        message: "your client's upgrade request for socket \(o.socket + 1) differs from the model's", differences: diff,
                                        dependsOn: nil))
            } else if gap(s.openTime, o.time) > tolerance {
                partings.append(parting(at: p, socket: o.socket, kind: .timing, what: "open", rule: rule(for: "open", o.cause), clientTime: s.openTime, modelTime: o.time,
                                        message: "your client opened socket \(o.socket + 1) at \(seconds(s.openTime)); the model opens it at \(seconds(o.time)) (on \(o.cause.text))",
                                        dependsOn: o.cause.inference))
            } else {
                matched += 1
            }
        }
        // The client's sockets the model never opens.
        let modelOpened = Set(opens.map(\.socket))
        for k in sockets.indices where !modelOpened.contains(k) {
            let s = sockets[k]
            let noDesktop = configuration.desktopId.isEmpty
            partings.append(parting(at: phoneIndex(ofRecord: s.openRecord), socket: k, kind: .extra, what: "open",
                                    rule: noDesktop ? SpecRule(.upgradeHeaders) : nil, clientTime: s.openTime, modelTime: nil,
                                    message: "your client opened socket \(k + 1) at \(seconds(s.openTime)); the model opens none"
                                        + (noDesktop ? " (no desktop: neither X-Target-Desktop-Device-ID nor a register names one, so it waits for a link code)" : ""),
                                    dependsOn: nil))
        }
        // The client's sockets used after it opened the next one (SPEC A5).
        var twoLive: Set<SocketKey> = []
        for k in sockets.indices.dropFirst() {
            let opened = sockets[k].openTime
            if let j = sockets[k - 1].items.firstIndex(where: { $0.key != Self.closeKey && $0.time > opened + tolerance }) {
                let it = sockets[k - 1].items[j]
                twoLive.insert(SocketKey(socket: k - 1, key: "\(j)"))
                partings.append(parting(at: it.phoneRecord, socket: k - 1, kind: .extra, what: it.key, rule: SpecRule(.oneLiveGeneration),
                                        clientTime: it.time, modelTime: nil,
                                        message: "your client sent \(Self.name(it.key)) on socket \(k) at \(seconds(it.time)), \(seconds(it.time - opened)) after it opened socket \(k + 1)",
                                        dependsOn: nil))
            }
        }
        // The model's messages and closes.
        var folded: [Int: Int] = [:]
        for item in items {
            let k = item.socket
            if let j = item.real {
                let real = sockets[k].items[j]
                if let diff = difference(item, real) {
                    let r = item.key == Self.closeKey ? Self.closeCodeRule : contentRule(for: item.key, item.cause, diff.lines)
                    partings.append(parting(at: real.phoneRecord, socket: k, kind: .different, what: item.key, rule: r,
                                            clientTime: real.time, modelTime: item.intended, message: diff.message, differences: diff.lines,
                                            dependsOn: item.cause.inference))
                } else if gap(real.time, item.intended) > tolerance {
                    partings.append(parting(at: real.phoneRecord, socket: k, kind: .timing, what: item.key, rule: rule(for: item.key, item.cause),
                                            clientTime: real.time, modelTime: item.intended, message: timingMessage(item, real),
                                            dependsOn: item.cause.inference))
                } else {
                    matched += 1
                }
                continue
            }
            // Unpaired: the client did not do it. Not reported when its socket (or the recording) ended
            // before the tolerance was out, or when the socket's fate rests on an inference.
            let socketEnd = k < sockets.count ? sockets[k].end ?? end : end
            if item.intended > socketEnd - tolerance || item.intended > end - tolerance { continue }
            if item.key == Self.closeKey, item.cause.inference != nil, item.cause.text == "stop" { continue }
            var message = "the model \(Self.verb(item.key, model: true)) at \(seconds(item.intended))\(anchorPart(item, clientTime: nil)); your client \(item.key == Self.closeKey ? "did not close it" : "sent none")"
            if k < sockets.count, let e = sockets[k].end {
                message += item.key == Self.closeKey ? (sockets[k].endedByRelay ? " (the relay ended it at \(seconds(e)))" : " (it closed it at \(seconds(e)))") : " on socket \(k + 1) (it ended at \(seconds(e)))"
            }
            partings.append(parting(atTime: item.intended, socket: k, kind: .missing, what: item.key, rule: rule(for: item.key, item.cause),
                                    clientTime: nil, modelTime: item.intended, message: message, dependsOn: item.cause.inference))
        }
        // The client's messages and closes the model does not make.
        var notJudged = linkSockets
        var unopened: [Int: Int] = [:]
        for k in sockets.indices {
            for (j, it) in sockets[k].items.enumerated() where !it.paired {
                if twoLive.contains(SocketKey(socket: k, key: "\(j)")) { continue }
                if !it.judged {
                    notJudged.append("#\(it.record) \(it.time) socket \(k + 1): \(it.key)")
                    continue
                }
                if k < model.count, let closed = model[k].closed, it.time > closed - tolerance {
                    folded[k, default: 0] += 1
                    continue
                }
                if !modelOpened.contains(k) {
                    unopened[k, default: 0] += 1
                    continue
                }
                if k < model.count, model[k].closed == nil, k + 1 < model.count, it.time > model[k + 1].openTime - tolerance {
                    continue  // the model left this socket for the next one (an inferred stop); A5 judged it above
                }
                var message = "your client \(Self.verb(it.key, model: false)) at \(seconds(it.time)) on socket \(k + 1); the model does not"
                var rule = Self.keyRule(it.key)
                if let failure = callFailures[SocketKey(socket: k, key: "\(j)")] {
                    message += ": \(failure)"
                    rule = Self.refusalRule(failure)
                } else if let json = it.meaning?.content, !CamelCaseGuard.violations(in: json).isEmpty {
                    message += ": it has a snake_case key (the encoder refuses those)"
                    rule = SpecRule(.camelCase)
                } else if let type = it.meaning?.type, !Self.knownTypes.contains(type) {
                    message += ": '\(type)' is not a message of the protocol (PROTOCOL.md §3)"
                    rule = SpecRule(.clientMessage)
                } else if k >= model.count {
                    message += " (the model never opened socket \(k + 1))"
                } else if let failure = model[k].failure {
                    message += " (its socket \(k + 1) had failed: \(failure))"
                }
                partings.append(parting(at: it.phoneRecord, socket: k, kind: .extra, what: it.key, rule: rule, clientTime: it.time, modelTime: nil,
                                        message: message, dependsOn: nil))
            }
        }
        for (k, n) in unopened {
            // Said once, with the extra open of that socket.
            guard let i = partings.firstIndex(where: { $0.socket == k + 1 && $0.what == "open" && $0.kind == .extra }) else { continue }
            partings[i].message += "; your client sent or closed \(n) more on it"
        }
        for (k, n) in folded {
            // Said once, with the parting about the model's close of that socket.
            guard let i = partings.firstIndex(where: { $0.socket == k + 1 && $0.what == Self.closeKey }) else { continue }
            partings[i].message += "; your client sent \(n) more message\(n == 1 ? "" : "s") on it after that"
        }
        partings.sort { ($0.time, $0.record) < ($1.time, $1.record) }
        return WireReplayReport(device: phone.deviceId, sockets: sockets.count, records: phoneRecords.count, traceRecords: traceRecords,
                                tolerance: tolerance, partings: partings, inferences: inferences.sorted { ($0.time, $0.record) < ($1.time, $1.record) },
                                notJudged: notJudged, matched: matched, end: end)
    }

    private static let closeCodeRule = SpecRule(section: "D", summary: "the phone closes its sockets with 1001, going away (PROTOCOL.md §1)")
    private static let openRule = SpecRule(.upgradeHeaders)

    /// The A4 shape of an upgrade: path (and scheme when the client's URL is absolute), and the five A4
    /// headers (the bearer's token left out: a refreshed JWT is not on the wire; the token binding
    /// redacted as the trace is).
    private func openShapes(_ o: ModelOpen, _ s: RealSocket) -> (JSONValue, JSONValue) {
        let recordedURL = s.open["url"]?.stringValue ?? ""
        var mine: [String: JSONValue] = ["path": .string(Self.pathOf(o.url))]
        var theirs: [String: JSONValue] = ["path": .string(Self.pathOf(recordedURL))]
        if recordedURL.contains("://") {
            mine["scheme"] = .string(String(o.url.prefix { $0 != ":" }))
            theirs["scheme"] = .string(String(recordedURL.prefix { $0 != ":" }))
        }
        var mh: [String: JSONValue] = [:], th: [String: JSONValue] = [:]
        for name in ["Authorization", "X-Device-ID", "X-Token-Binding", "X-Client-Type", "X-Target-Desktop-Device-ID"] {
            var m = o.headers.first { $0.name.lowercased() == name.lowercased() }?.value
            var t = Self.header(s.open, name)
            if name == "Authorization" {
                m = m.map(Self.bearerShape)
                t = t.map(Self.bearerShape)
            }
            if name == "X-Token-Binding", let v = m {
                m = redactor.redact(json: .object([name: .string(v)]))[name]?.stringValue
            }
            mh[name] = m.map(JSONValue.string) ?? .null
            th[name] = t.map(JSONValue.string) ?? .null
        }
        mine["headers"] = .object(mh)
        theirs["headers"] = .object(th)
        return (.object(mine), .object(theirs))
    }

    private static func bearerShape(_ v: String) -> String {
        v.hasPrefix("Bearer ") && v.count > 7 ? "Bearer " + FrameMeaning.volatileMarker : v
    }

    /// How a paired model item and client item differ in content, if they do.
    private func difference(_ item: ModelItem, _ real: RealItem) -> (message: String, lines: [String])? {
        if item.key == Self.closeKey {
            guard real.clean, let code = item.closeCode else { return nil }
            guard real.closeCode != Int64(code) else { return nil }
            let theirs = real.closeCode.map { "with \($0)" } ?? "with an empty close frame (no code)"
            return ("your client closed socket \(item.socket + 1) \(theirs); the model closes it with \(code)", [])
        }
        guard let mine = item.meaning.map({ redactor.redact(json: $0.content) }), let theirs = real.meaning?.content else { return nil }
        if mine.canonicallyEquals(theirs) { return nil }
        let lines = JSONDiff.differences(mine, theirs).map(Self.sides)
        return ("your client's \(Self.name(item.key)) at \(seconds(real.time)) differs from the model's (at \(seconds(item.intended)))", lines)
    }

    /// `$.a: expected X, got Y` in the words of a wire replay.
    private static func sides(_ line: String) -> String {
        line.replacing(": not expected, got ", with: ": the model nothing, your client ").replacing(": expected ", with: ": the model ")
            .replacing(", got ", with: ", your client ").replacing(", missing", with: ", your client nothing")
    }

    private func timingMessage(_ item: ModelItem, _ real: RealItem) -> String {
        let what = Self.name(item.key)
        if item.key == Self.closeKey {
            return "your client closed socket \(item.socket + 1) at \(seconds(real.time))\(anchorPart(item, clientTime: real.time)); the model closes it at \(seconds(item.intended))\(anchorPart(item, clientTime: nil))\(model[item.socket].failure.map { " (\($0))" } ?? "")"
        }
        return "your client sent \(what) at \(seconds(real.time))\(anchorPart(item, clientTime: real.time)); the model sends it at \(seconds(item.intended))\(anchorPart(item, clientTime: nil))"
    }

    /// `, 6.000 s after registered` (for the client's time when given, else the model's), or ` (on X)`
    /// for the model when it acted on an input rather than a timer.
    private func anchorPart(_ item: ModelItem, clientTime: Moment?) -> String {
        if var anchor = item.cause.anchor, let text = item.cause.anchorText {
            if clientTime != nil, let own = clientsPrevious(item) { anchor = own }
            return ", \(seconds((clientTime ?? item.intended) - anchor)) after \(text)"
        }
        return clientTime == nil ? " (on \(item.cause.text))" : ""
    }

    /// For a periodic act the model timed from its previous one (a heartbeat, a lease renewal): the time
    /// of the client's previous one on the socket, so that each side's interval is its own.
    private func clientsPrevious(_ item: ModelItem) -> Moment? {
        guard let timer = item.cause.timer, Self.isPeriodic(timer), item.cause.anchorText?.hasPrefix("the previous") == true,
              let j = item.real else { return nil }
        let real = sockets[item.socket].items[j]
        guard real.occurrence > 0, let list = sockets[item.socket].byKey[item.key] else { return nil }
        return sockets[item.socket].items[list[real.occurrence - 1]].time
    }

    /// `its heartbeat`, `register`, `rpc.request session.list`, `its lease message`.
    private static func name(_ key: String) -> String {
        switch key {
        case "heartbeat": "its heartbeat"
        case "event \(EventNames.chatTimelineInterest)": "its lease message (chat:timeline-interest)"
        default: key
        }
    }

    private static func verb(_ key: String, model: Bool) -> String {
        switch key {
        case closeKey: model ? "closes the socket" : "closed the socket"
        default: (model ? "sends " : "sent ") + name(key)
        }
    }

    /// The rule of a timing or a missing act: the timer that made the model act (its `relaytrace check`
    /// rule when it has one), else the message's.
    private func rule(for key: String, _ cause: Cause) -> SpecRule? {
        if let timer = cause.timer {
            if let r = Self.timerRules[Self.timerName(timer)] { return SpecRule(r) }
            if let r = SpecRule.rule(named: Self.timerName(timer)) { return r }
        }
        if key == Self.closeKey { return Self.closeCodeRule }
        if cause.text == "registered" || cause.text == "resumed" {
            if key.hasPrefix(RelayMessage.TypeName.rpcRequest) {
                return SpecRule(section: "A8", summary: "calls made before registration go out once registered")
            }
            if key.hasSuffix(EventNames.chatTimelineInterest) { return SpecRule(.leaseReissue) }
        }
        return Self.keyRule(key)
    }

    /// The rule of a content parting: by what differs (`traceparent`: A8.traceparent, the resume
    /// credentials: A7.resume, ...), else the message's.
    private func contentRule(for key: String, _ cause: Cause, _ differences: [String]) -> SpecRule? {
        func differs(_ member: String) -> Bool { differences.contains { $0.contains(member) } }
        if key == RelayMessage.TypeName.register {
            if case .reRegister? = cause.timer { return SpecRule(.reRegister) }
            return SpecRule(differs("resumeToken") || differs("relaySessionId") ? .resumeCredentials : .register)
        }
        if key.hasPrefix(RelayMessage.TypeName.rpcRequest) {
            if differs("traceparent") { return SpecRule(.traceparent) }
            if differs("idempotencyKey") { return SpecRule(.idempotencyKey) }
        }
        if key.hasSuffix(EventNames.chatTimelineInterest) { return SpecRule(.leaseMessage) }
        return rule(for: key, cause)
    }

    /// The `relaytrace check` rules of the model's timers.
    private static let timerRules: [String: CheckRule] = [
        "heartbeat": .heartbeat, "handshake": .handshake, "watchdog": .watchdog, "reRegister": .reRegister,
        "rpcTimeout": .timeout, "interest.renewal": .leaseRenewal,
    ]

    /// The rule of a request the model refuses before sending it.
    private static func refusalRule(_ failure: CallFailure) -> SpecRule {
        switch failure {
        case .unknownMethod: SpecRule(.knownMethod)
        case .missingIdempotencyKey: SpecRule(.idempotencyKey)
        case .snakeCaseKey: SpecRule(.camelCase)
        case .duplicateRequestId: SpecRule(.requestId)
        default: SpecRule(section: "A8", summary: "the client rejects an unknown method, a mutation without a key, a snake_case key before anything is sent")
        }
    }

    private static func keyRule(_ key: String) -> SpecRule? {
        switch key {
        case "register": SpecRule(.register)
        case "heartbeat": SpecRule(.heartbeat)
        case "pong": SpecRule(section: "D", summary: "a text ping is answered with pong (PROTOCOL.md §3)")
        case "close": SpecRule(section: "A5/A6", summary: "a generation is closed on failure (handshake, watchdog, timeout) or on purpose")
        case "open": openRule
        default:
            if key.hasPrefix(RelayMessage.TypeName.rpcRequest) { SpecRule(section: "A8", summary: "requests, keys, traceparent, timeouts") }
            else if key.hasSuffix(EventNames.chatTimelineInterest) { SpecRule(.leaseRenewal) }
            else { nil }
        }
    }

    // MARK: Building partings

    private func phoneIndex(ofRecord n: Int) -> Int {
        var lo = 0, hi = number.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if number[mid] < n { lo = mid + 1 } else { hi = mid }
        }
        return min(lo, max(number.count - 1, 0))
    }

    private func parting(at p: Int, socket k: Int, kind: WireParting.Kind, what: String, rule: SpecRule?, clientTime: Moment?, modelTime: Moment?,
                         message: String, differences: [String] = [], dependsOn: String?) -> WireParting {
        let times = [clientTime, modelTime].compactMap { $0 }
        return WireParting(record: p < number.count ? number[p] : traceRecords, time: times.min() ?? phoneRecords[p].time, socket: k + 1,
                           generation: k < sockets.count ? sockets[k].gen : nil, kind: kind, what: what, rule: rule,
                           clientTime: clientTime, modelTime: modelTime, message: message, differences: differences, dependsOn: dependsOn,
                           context: context(before: p))
    }

    private func parting(atTime t: Moment, socket k: Int, kind: WireParting.Kind, what: String, rule: SpecRule?, clientTime: Moment?,
                         modelTime: Moment?, message: String, dependsOn: String?) -> WireParting {
        let p = phoneRecords.firstIndex { $0.time >= t } ?? max(phoneRecords.count - 1, 0)
        return parting(at: p, socket: k, kind: kind, what: what, rule: rule, clientTime: clientTime, modelTime: modelTime,
                       message: message, dependsOn: dependsOn)
    }

    private func parting(socket k: Int, kind: WireParting.Kind, what: String, rule: SpecRule?, clientTime: Moment?, modelTime: Moment?,
                         message: String, dependsOn: String?) -> WireParting {
        parting(atTime: modelTime ?? clientTime ?? .zero, socket: k, kind: kind, what: what, rule: rule, clientTime: clientTime,
                modelTime: modelTime, message: message, dependsOn: dependsOn)
    }

    /// The phone's records up to `p` (at most five), `p` marked `>`, payloads cut at 200 characters.
    private func context(before p: Int) -> [String] {
        guard !phoneRecords.isEmpty else { return [] }
        let last = min(p, phoneRecords.count - 1)
        return (max(0, last - 4)...last).map { i in
            var line = Replayer.describe(phoneRecords[i])
            if line.count > 200 { line = String(line.prefix(200)) + "..." }
            return "\(i == last ? ">" : " ") #\(number[i]) \(line)"
        }
    }

    private func seconds(_ m: Moment) -> String { Self.seconds(m.nanoseconds) }
    private func seconds(_ d: Duration) -> String { Self.seconds(d.nanoseconds) }

    /// `6.103 s`.
    static func seconds(_ ns: Int64) -> String {
        let text = Moment(nanoseconds: ns).description
        return String(text.dropLast()) + " s"
    }
}

/// How far apart two moments are.
private func gap(_ a: Moment, _ b: Moment) -> Duration { a > b ? a - b : b - a }
