/// One JSON control message on the device-link socket (PROTOCOL.md §3 and §4), either direction.
///
/// Decoding accepts both the 1.6 and the pre-1.6 (legacy) form, ignores unknown extra fields, is strict
/// about the types of known fields, and never fails on an unknown `type` (that becomes `.unknown`).
/// Encoding writes the chosen `ProtocolForm`, omits absent optionals, and runs `CamelCaseGuard` over
/// the whole message.
///
/// Field placement: `register`, `heartbeat`, `rpc.request`, `rpc.response`, `event`, `event-ack`,
/// `terminal.binary.bind`/`unbind`/`bound` carry their fields in `payload`; `registered`, `resumed`,
/// `error` and `pong` at the top level. Decoding also accepts `rpc.response` and
/// `terminal.binary.bound` fields at the top level, and `registered`/`resumed`/`error` fields inside
/// `payload`.
public enum RelayMessage: Sendable, Hashable {
    /// `register` (client -> relay).
    case register(RegisterPayload)
    /// `heartbeat` (client -> relay).
    case heartbeat(HeartbeatPayload)
    /// `ping` (text-level; either side may send, the relay answers `pong`).
    case ping
    /// `pong`.
    case pong
    /// `rpc.request` (client -> relay).
    case rpcRequest(RpcRequest)
    /// `rpc.response` (relay -> client).
    case rpcResponse(RpcResponse)
    /// `event`, either direction.
    case event(EventMessage)
    /// `event-ack` (client -> relay).
    case eventAck(EventAck)
    /// `terminal.binary.bind` (client -> relay).
    case terminalBind(TerminalBind)
    /// `terminal.binary.unbind` (client -> relay).
    case terminalUnbind(TerminalBind)
    /// `terminal.binary.bound` (relay -> client), the immediate ack of a bind.
    case terminalBound(sessionId: String)
    /// `registered` (relay -> client).
    case registered(Registered)
    /// `resumed` (relay -> client).
    case resumed(Resumed)
    /// `error` (relay -> client).
    case error(RelayErrorMessage)
    /// `link.create`, `link.created`, `link.redeem`, `link.accepted`: device linking (this project's
    /// design, see ``DeviceLink``).
    case link(LinkMessage)
    /// An older message kind (seed 003: `terminal_output`, `job_status`, `session_sync`,
    /// `rpc_command`), kept raw.
    case legacy(kind: String, raw: JSONValue)
    /// A message whose `type` this version does not know, kept raw.
    case unknown(type: String?, raw: JSONValue)

    /// The wire `type` strings.
    public enum TypeName {
        /// `register`
        public static let register = "register"
        /// `heartbeat`
        public static let heartbeat = "heartbeat"
        /// `ping`
        public static let ping = "ping"
        /// `pong`
        public static let pong = "pong"
        /// `rpc.request`
        public static let rpcRequest = "rpc.request"
        /// `rpc.response`
        public static let rpcResponse = "rpc.response"
        /// `event`
        public static let event = "event"
        /// `event-ack`
        public static let eventAck = "event-ack"
        /// `terminal.binary.bind`
        public static let terminalBind = "terminal.binary.bind"
        /// `terminal.binary.unbind`
        public static let terminalUnbind = "terminal.binary.unbind"
        /// `terminal.binary.bound`
        public static let terminalBound = "terminal.binary.bound"
        /// `registered`
        public static let registered = "registered"
        /// `resumed`
        public static let resumed = "resumed"
        /// `error`
        public static let error = "error"
        /// The older kinds of seed 003, which a dissector names when it meets them.
        public static let legacyKinds: Set<String> = ["terminal_output", "job_status", "session_sync", "rpc_command"]
    }

    /// The wire `type` (`rpc.request`, ...); for `.unknown` its type, or `?` when it had none.
    public var typeName: String {
        switch self {
        case .register: TypeName.register
        case .heartbeat: TypeName.heartbeat
        case .ping: TypeName.ping
        case .pong: TypeName.pong
        case .rpcRequest: TypeName.rpcRequest
        case .rpcResponse: TypeName.rpcResponse
        case .event: TypeName.event
        case .eventAck: TypeName.eventAck
        case .terminalBind: TypeName.terminalBind
        case .terminalUnbind: TypeName.terminalUnbind
        case .terminalBound: TypeName.terminalBound
        case .registered: TypeName.registered
        case .resumed: TypeName.resumed
        case .error: TypeName.error
        case .link(let l): l.typeName
        case .legacy(let kind, _): kind
        case .unknown(let type, _): type ?? "?"
        }
    }

    // MARK: Decoding

    /// Decodes a message from its JSON value (either form).
    ///
    /// Errors: a non-object, a missing or non-string `type`, a missing required field, or a known field
    /// of the wrong type (with its JSONPath, e.g. `$.payload.deviceId`). A JSON `null` counts as absent
    /// for optional fields.
    public init(decoding json: JSONValue) throws(MessageDecodeError) {
        try self.init(decoding: json, deferredEventPayload: nil)
    }

    /// Decodes `json` whose `$.payload.payload` object, when `deferred` is set, was skipped by the parser
    /// (`.null` in `json`) and is `deferred`; only an `event` may carry one.
    init(decoding json: JSONValue, deferredEventPayload deferred: RawJSON?) throws(MessageDecodeError) {
        let top = try FieldReader(json, path: "$")
        guard let typeValue = top.value("type") else {
            throw MessageDecodeError(path: "$.type", message: "missing message type; every message is an object with a string \"type\"")
        }
        guard case .string(let type) = typeValue else {
            throw MessageDecodeError(path: "$.type", message: "expected a string, found \(typeValue.typeDescription)")
        }
        switch type {
        case TypeName.register:
            self = .register(try RegisterPayload(reading: top.object("payload")))
        case TypeName.heartbeat:
            let p = try top.optionalObject("payload") ?? FieldReader(object: [:], path: "$.payload")
            self = .heartbeat(try HeartbeatPayload(reading: p))
        case TypeName.ping:
            self = .ping
        case TypeName.pong:
            self = .pong
        case TypeName.rpcRequest:
            self = .rpcRequest(try RpcRequest(reading: top.object("payload")))
        case TypeName.rpcResponse:
            self = .rpcResponse(try RpcResponse(reading: RelayMessage.fields(top, payloadFirst: true, probe: "id")))
        case TypeName.event:
            self = .event(try EventMessage(reading: top, deferred: deferred))
        case TypeName.eventAck:
            self = .eventAck(try EventAck(reading: top.object("payload")))
        case TypeName.terminalBind:
            self = .terminalBind(try TerminalBind(reading: top.object("payload")))
        case TypeName.terminalUnbind:
            self = .terminalUnbind(try TerminalBind(reading: top.object("payload")))
        case TypeName.terminalBound:
            let r = try RelayMessage.fields(top, payloadFirst: true, probe: "sessionId")
            self = .terminalBound(sessionId: try r.string("sessionId"))
        case TypeName.registered:
            self = .registered(try Registered(reading: RelayMessage.fields(top, payloadFirst: false, probe: "sessionId")))
        case TypeName.resumed:
            self = .resumed(try Resumed(reading: RelayMessage.fields(top, payloadFirst: false, probe: "sessionId")))
        case TypeName.error:
            self = .error(try RelayErrorMessage(reading: RelayMessage.fields(top, payloadFirst: false, probe: "code")))
        case LinkMessage.TypeName.create, LinkMessage.TypeName.created, LinkMessage.TypeName.redeem, LinkMessage.TypeName.accepted:
            self = .link(try LinkMessage(type: type, top: top))
        default:
            if TypeName.legacyKinds.contains(type) {
                self = .legacy(kind: type, raw: json)
            } else {
                self = .unknown(type: type, raw: json)
            }
        }
    }

    /// Parses, guards and decodes one inbound text frame as the client does: syntax and UTF-8 are checked
    /// over the whole text, a key with `_` anywhere is rejected (PROTOCOL.md §2, the first one by
    /// ``CamelCaseGuard/check(_:path:)`` order), and the payload of a `chat:timeline-updated` event is kept
    /// as validated raw bytes (``EventMessage/rawPayload``) instead of a JSON tree. Errors and results are
    /// those of parsing with `JSONValue.parsingNotingUnderscoreKeys`, guarding, then ``init(decoding:)``.
    public init(decodingInbound text: String) throws(InboundFrameError) {
        // The relay's answer to every heartbeat, in the exact canonical form it writes: no parse needed
        // (the general route gives `.pong` for these bytes too; any other spelling takes it).
        let pong: StaticString = #"{"type":"pong"}"#
        if text.utf8.count == pong.utf8CodeUnitCount && text.utf8.elementsEqual(UnsafeBufferPointer(start: pong.utf8Start, count: pong.utf8CodeUnitCount)) {
            self = .pong
            assert(Self.referenceAgrees(text, self), "the pong route disagrees with init(decodingInboundReference:)")
            return
        }
        // An event exactly as the relay writes it: its envelope read directly, its payload validated and
        // indexed without a tree (anything unusual gives nil and takes the route below).
        if let fields = RelayFrameReader.readingCanonicalEvent(text) {
            self = .event(EventMessage(canonical: fields))
            assert(Self.referenceAgrees(text, self), "the canonical event route disagrees with init(decodingInboundReference:)")
            return
        }
        // Likewise an rpc.response carrying a result (its traceparent must parse, else the general route
        // reports it).
        if let f = RelayFrameReader.readingCanonicalRpcResponse(text), let traceparent = try? TraceParent(parsing: f.traceparent) {
            self = .rpcResponse(RpcResponse(id: f.id, result: f.result, isFinal: f.isFinal, traceparent: traceparent))
            assert(Self.referenceAgrees(text, self), "the canonical rpc.response route disagrees with init(decodingInboundReference:)")
            return
        }
        // Any other frame: one parse in which an event's own payload is only validated and indexed (a frame
        // that is not an event but has such a payload, or anything unusual: a `_` key, a repeated
        // `payload`, an error, takes the reference route, which parses it again in full).
        if let fast = try? RelayFrameReader.parsingDeferringEventPayload(text), !fast.underscoreInKey, !fast.ambiguous,
           fast.deferred == nil || fast.value["type"] == .string(TypeName.event) {
            do throws(MessageDecodeError) {
                try self.init(decoding: fast.value, deferredEventPayload: fast.deferred)
            } catch {
                assert(Self.referenceAgrees(text, .failure(.message(error))), "the deferred event route fails otherwise than init(decodingInboundReference:)")
                throw .message(error)
            }
            assert(Self.referenceAgrees(text, self), "the deferred event route disagrees with init(decodingInboundReference:)")
            return
        }
        try self.init(decodingInboundReference: text)
    }

    /// ``init(decodingInbound:)`` by its reference route, the one its direct readers must agree with (the
    /// tests compare them frame by frame; debug builds check every frame): the whole text parsed into a
    /// tree, a `_` key rejected with its JSONPath, then decoded.
    public init(decodingInboundReference text: String) throws(InboundFrameError) {
        let json: JSONValue
        let underscoreInKey: Bool
        do throws(JSONParseError) {
            (json, underscoreInKey) = try JSONValue.parsingNotingUnderscoreKeys(text)
        } catch {
            throw .syntax(error)
        }
        if underscoreInKey {
            do throws(CamelCaseViolation) { try CamelCaseGuard.check(json) } catch { throw .snakeCase(error) }
        }
        do throws(MessageDecodeError) {
            try self.init(decoding: json)
        } catch {
            throw .message(error)
        }
    }

    /// Whether the reference route decodes `text` to `message` (for the debug builds' checks).
    static func referenceAgrees(_ text: String, _ message: RelayMessage) -> Bool {
        referenceAgrees(text, .success(message))
    }

    /// Whether the reference route gives `result` for `text`.
    static func referenceAgrees(_ text: String, _ result: Result<RelayMessage, InboundFrameError>) -> Bool {
        Result { () throws(InboundFrameError) in try RelayMessage(decodingInboundReference: text) } == result
    }

    /// Parses and decodes one text frame. JSON syntax errors come back with path `$` and `byteOffset`.
    public init(decodingText text: String) throws(MessageDecodeError) {
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue(parsing: text)
        } catch {
            throw MessageDecodeError(error)
        }
        try self.init(decoding: json)
    }

    /// Parses and decodes one text frame given as UTF-8 bytes.
    public init(decodingUTF8 bytes: some Collection<UInt8>) throws(MessageDecodeError) {
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue(parsing: bytes)
        } catch {
            throw MessageDecodeError(error)
        }
        try self.init(decoding: json)
    }

    /// Where a message's fields live: `payload` or the top level. The preferred place is used when it
    /// holds `probe`; otherwise the other place when it holds `probe`; otherwise the preferred place (so
    /// the missing-field error names it).
    private static func fields(_ top: FieldReader, payloadFirst: Bool, probe: String) throws(MessageDecodeError) -> FieldReader {
        if payloadFirst {
            // `payload` is this message's own field: a non-object there is an error.
            let payload = try top.optionalObject("payload")
            if let payload, payload.has(probe) { return payload }
            if top.has(probe) { return top }
            if let payload { return payload }
            return try top.object("payload")
        }
        // Top-level message: `payload` is not its field, so only an object holding `probe` counts.
        if top.has(probe) { return top }
        if case .object(let o)? = top.value("payload"), o[probe] != nil {
            return FieldReader(object: o, path: top.path("payload"))
        }
        return top
    }

    // MARK: Encoding

    /// The message as JSON in `form`, after `CamelCaseGuard.check` on the whole value.
    /// `.legacy` and `.unknown` give back their raw JSON (and are checked too).
    public func encoded(form: ProtocolForm = .v1_6) throws(CamelCaseViolation) -> JSONValue {
        let value = unguardedJSON(form: form)
        try CamelCaseGuard.check(value)
        return value
    }

    /// `encoded(form:)` as compact canonical JSON text (the frequent outbound frames written directly; each
    /// gives exactly ``referenceEncodedText(form:)``, which debug builds check).
    public func encodedText(form: ProtocolForm = .v1_6) throws(CamelCaseViolation) -> String {
        let text = try directEncodedText(form: form)
        assert((try? referenceEncodedText(form: form)) == text, "a direct writer of encodedText disagrees with referenceEncodedText")
        return text
    }

    /// ``encodedText(form:)`` by its reference route: ``encoded(form:)``'s tree, serialised.
    public func referenceEncodedText(form: ProtocolForm = .v1_6) throws(CamelCaseViolation) -> String {
        try encoded(form: form).jsonText
    }

    private func directEncodedText(form: ProtocolForm) throws(CamelCaseViolation) -> String {
        switch self {
        case .heartbeat(let p) where p.activeSessionId == nil:
            // The most frequent outbound frame, the only form the client sends: one literal, the canonical
            // text of the general route (the form does not apply). A heartbeat naming an active session,
            // which the client never sends, takes the general route.
            return #"{"payload":{},"type":"heartbeat"}"#
        case .rpcRequest(let r) where !CamelCaseGuard.containsViolation(r.params):
            // Written directly: the same canonical text as the general route (the fixed keys are sorted and
            // have no `_`; `params`, the only free-form part, was just checked, so the guard has nothing to
            // reject; a `params` with a `_` key takes the general route, which throws the same error).
            return RelayMessage.rpcRequestText(r, form: form)
        case .event(let e) where !e.isRelayForm && !CamelCaseGuard.containsViolation(e.payload):
            // A client -> relay event (`chat:timeline-interest` leases), written directly: the same canonical
            // text as the general route (fixed keys sorted, none with `_`; the payload was just checked; the
            // form does not apply). The relay form and a payload with a `_` key take the general route.
            return RelayMessage.clientEventText(e)
        default:
            return try referenceEncodedText(form: form)
        }
    }

    /// `{"payload":{"id":..,"idempotencyKey":..,"method":..,"params":..,"traceparent":..},"type":"rpc.request"}`
    /// with absent optionals (and a `null` `params`) omitted, `traceparent` only in the 1.6 form: byte for
    /// byte what `encoded(form:).jsonText` writes for it.
    private static func rpcRequestText(_ r: RpcRequest, form: ProtocolForm) -> String {
        var w = JSONWriter()
        w.out.append(contentsOf: #"{"payload":{"id":"#.utf8)
        w.write(.string(r.id))
        if let key = r.idempotencyKey {
            w.out.append(contentsOf: #","idempotencyKey":"#.utf8)
            w.write(.string(key))
        }
        w.out.append(contentsOf: #","method":"#.utf8)
        w.write(.string(r.method))
        if !r.params.isNull {
            w.out.append(contentsOf: #","params":"#.utf8)
            w.write(r.params)
        }
        if form == .v1_6, let tp = r.traceparent {
            w.out.append(contentsOf: #","traceparent":"#.utf8)
            w.write(.string(tp.header))
        }
        w.out.append(contentsOf: #"},"type":"rpc.request"}"#.utf8)
        return String(decoding: w.out, as: UTF8.self)
    }

    /// `{"payload":{"eventType":..,"payload":..},"type":"event"}` with a `null` payload omitted: byte for byte
    /// what `encoded(form:).jsonText` writes for an event without relay-assigned fields.
    private static func clientEventText(_ e: EventMessage) -> String {
        var w = JSONWriter()
        w.out.append(contentsOf: #"{"payload":{"eventType":"#.utf8)
        w.write(.string(e.eventType))
        let payload = e.payload
        if !payload.isNull {
            w.out.append(contentsOf: #","payload":"#.utf8)
            w.write(payload)
        }
        w.out.append(contentsOf: #"},"type":"event"}"#.utf8)
        return String(decoding: w.out, as: UTF8.self)
    }

    /// `encoded(form:)` as compact canonical UTF-8 bytes.
    public func encodedBytes(form: ProtocolForm = .v1_6) throws(CamelCaseViolation) -> [UInt8] {
        try encoded(form: form).serialized()
    }

    private func unguardedJSON(form: ProtocolForm) -> JSONValue {
        var b = ObjectBuilder(capacity: 6)
        b.set("type", typeName)
        switch self {
        case .register(let p): b.set("payload", p.json(form: form))
        case .heartbeat(let p): b.set("payload", p.json)
        case .ping, .pong: break
        case .rpcRequest(let r): b.set("payload", r.json(form: form))
        case .rpcResponse(let r): b.set("payload", r.json(form: form))
        case .event(let e): e.write(into: &b)
        case .eventAck(let a): b.set("payload", a.json)
        case .terminalBind(let t), .terminalUnbind(let t): b.set("payload", t.json)
        case .terminalBound(let sessionId): b.set("payload", JSONValue.object(["sessionId": .string(sessionId)]))
        case .registered(let r): r.write(into: &b, form: form)
        case .resumed(let r): r.write(into: &b)
        case .error(let e): e.write(into: &b)
        case .link(let l): b.set("payload", l.payload)
        case .legacy(_, let raw), .unknown(_, let raw): return raw
        }
        return b.value
    }
}

/// Why ``RelayMessage/init(decodingInbound:)`` rejected a frame.
public enum InboundFrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not JSON (with the byte offset).
    case syntax(JSONParseError)
    /// A key with `_` (with its JSONPath); the relay protocol is camelCase only.
    case snakeCase(CamelCaseViolation)
    /// JSON, but not a message of the protocol (with the JSONPath).
    case message(MessageDecodeError)

    /// The underlying error's description.
    public var description: String {
        switch self {
        case .syntax(let e): e.description
        case .snakeCase(let e): e.description
        case .message(let e): e.description
        }
    }
}
