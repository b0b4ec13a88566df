/// Which shape of the protocol a message is written in.
public enum ProtocolForm: Sendable, Hashable {
    /// Protocol 1.6 (SPEC.md): `relaySessionId`, `relayProtocolVersion`, `targetDesktopDeviceId`,
    /// `traceparent`. Everything this project sends.
    case v1_6
    /// Before 1.6: what older clients sent and older traces contain (`sessionId` in `register`, no
    /// trace context).
    case legacy
}

/// The relay protocol version this project speaks.
public enum RelayProtocolVersion {
    /// `"1.6"`, sent as `relayProtocolVersion` in `register`.
    public static let current = "1.6"
}

/// `register` (client -> relay): the first message on a socket, or a resume.
public struct RegisterPayload: Sendable, Hashable {
    /// The device ID (lower-cased UUID).
    public var deviceId: String
    /// The human-readable device name.
    public var deviceName: String
    /// The relay session to resume (`relaySessionId` in 1.6, `sessionId` before).
    public var relaySessionId: String?
    /// The resume token; a resume happens only when both session ID and token are present.
    public var resumeToken: String?
    /// The last relay event ID the client has seen; the relay replays events above it.
    public var lastEventId: Int64?
    /// `"1.6"` in protocol 1.6; when nil, encoding in the 1.6 form writes `RelayProtocolVersion.current`.
    public var relayProtocolVersion: String?
    /// The desktop this phone wants to talk to (1.6).
    public var targetDesktopDeviceId: String?

    /// Creates a register payload.
    public init(deviceId: String, deviceName: String, relaySessionId: String? = nil, resumeToken: String? = nil,
                lastEventId: Int64? = nil, relayProtocolVersion: String? = nil, targetDesktopDeviceId: String? = nil) {
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.relaySessionId = relaySessionId
        self.resumeToken = resumeToken
        self.lastEventId = lastEventId
        self.relayProtocolVersion = relayProtocolVersion
        self.targetDesktopDeviceId = targetDesktopDeviceId
    }

    /// Whether this register asks to resume (both session ID and token present).
    public var isResume: Bool { relaySessionId != nil && resumeToken != nil }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        deviceId = try r.string("deviceId")
        deviceName = try r.string("deviceName")
        let relay = try r.optionalString("relaySessionId")
        let legacy = try r.optionalString("sessionId")
        relaySessionId = relay ?? legacy
        resumeToken = try r.optionalString("resumeToken")
        lastEventId = try r.optionalInt64("lastEventId")
        relayProtocolVersion = try r.optionalString("relayProtocolVersion")
        targetDesktopDeviceId = try r.optionalString("targetDesktopDeviceId")
    }

    func json(form: ProtocolForm) -> JSONValue {
        var b = ObjectBuilder()
        b.set("deviceId", deviceId)
        b.set("deviceName", deviceName)
        b.set("resumeToken", resumeToken)
        b.set("lastEventId", lastEventId)
        switch form {
        case .v1_6:
            b.set("relaySessionId", relaySessionId)
            b.set("relayProtocolVersion", relayProtocolVersion ?? RelayProtocolVersion.current)
            b.set("targetDesktopDeviceId", targetDesktopDeviceId)
        case .legacy:
            b.set("sessionId", relaySessionId)
        }
        return b.value
    }
}

/// `heartbeat` (client -> relay); the relay answers `pong`.
public struct HeartbeatPayload: Sendable, Hashable {
    /// The session the user is looking at, if any.
    public var activeSessionId: String?

    /// Creates a heartbeat payload.
    public init(activeSessionId: String? = nil) { self.activeSessionId = activeSessionId }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        activeSessionId = try r.optionalString("activeSessionId")
    }

    var json: JSONValue {
        var b = ObjectBuilder(capacity: 1)
        b.set("activeSessionId", activeSessionId)
        return b.value
    }
}

/// `rpc.request` (client -> relay -> desktop).
public struct RpcRequest: Sendable, Hashable {
    /// The request ID (the client uses an upper-case UUID).
    public var id: String
    /// The method name, e.g. `session.update` (see `RpcCatalogue`).
    public var method: String
    /// The parameters. `.null` means "no params": it is omitted on the wire, and a request without
    /// `params` decodes as `.null`.
    public var params: JSONValue
    /// The idempotency key, required for the methods `RpcCatalogue` marks.
    public var idempotencyKey: String?
    /// The W3C trace context (1.6; not written in the legacy form).
    public var traceparent: TraceParent?

    /// Creates a request.
    public init(id: String, method: String, params: JSONValue = .object([:]), idempotencyKey: String? = nil,
                traceparent: TraceParent? = nil) {
        self.id = id
        self.method = method
        self.params = params
        self.idempotencyKey = idempotencyKey
        self.traceparent = traceparent
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        id = try r.string("id")
        method = try r.string("method")
        params = r.value("params") ?? .null
        idempotencyKey = try r.optionalString("idempotencyKey")
        traceparent = try r.optionalTraceParent("traceparent")
    }

    func json(form: ProtocolForm) -> JSONValue {
        var b = ObjectBuilder()
        b.set("id", id)
        b.set("method", method)
        if !params.isNull { b.set("params", params) }
        b.set("idempotencyKey", idempotencyKey)
        if form == .v1_6 { b.set("traceparent", traceparent?.header) }
        return b.value
    }
}

/// The `error` member of an `rpc.response` (JSON-RPC style).
public struct RpcErrorBody: Sendable, Hashable, Error {
    /// The error code; see `RpcErrorCode` for the known ones.
    public var code: Int
    /// A human-readable message.
    public var message: String
    /// Extra data, if any.
    public var data: JSONValue?

    /// Creates an error body.
    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// Creates an error body with a known code.
    public init(_ code: RpcErrorCode, message: String, data: JSONValue? = nil) {
        self.init(code: code.rawValue, message: message, data: data)
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        code = try r.int("code")
        message = try r.string("message")
        data = r.value("data")
    }

    var json: JSONValue {
        var b = ObjectBuilder(capacity: 3)
        b.set("code", Int64(code))
        b.set("message", message)
        b.set("data", data)
        return b.value
    }
}

/// `rpc.response` (desktop or relay -> client).
///
/// Written with its fields inside `payload` (like `rpc.request`); decoding also accepts them at the
/// top level of the message.
public struct RpcResponse: Sendable, Hashable {
    /// The ID of the request this answers.
    public var id: String
    /// The result, when the call succeeded. `.some(.null)` is an explicit `"result": null`.
    public var result: JSONValue?
    /// The error, when the call failed (`"error": null` decodes as nil).
    public var error: RpcErrorBody?
    /// Whether this is the last response for the request (streamed responses send several).
    public var isFinal: Bool?
    /// The W3C trace context echoed from the request (1.6; not written in the legacy form).
    public var traceparent: TraceParent?

    /// Creates a response.
    public init(id: String, result: JSONValue? = nil, error: RpcErrorBody? = nil, isFinal: Bool? = nil,
                traceparent: TraceParent? = nil) {
        self.id = id
        self.result = result
        self.error = error
        self.isFinal = isFinal
        self.traceparent = traceparent
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        id = try r.string("id")
        result = r.value("result")
        error = try r.optionalObject("error").map { (e: FieldReader) throws(MessageDecodeError) in try RpcErrorBody(reading: e) }
        isFinal = try r.optionalBool("isFinal")
        traceparent = try r.optionalTraceParent("traceparent")
    }

    func json(form: ProtocolForm) -> JSONValue {
        var b = ObjectBuilder()
        b.set("id", id)
        b.set("result", result)
        b.set("error", error?.json)
        b.set("isFinal", isFinal)
        if form == .v1_6 { b.set("traceparent", traceparent?.header) }
        return b.value
    }
}

/// `event`, both directions.
///
/// Client -> relay: only `eventType` and `payload` (inside the message's `payload`). Relay -> client:
/// the same plus `eventId`, `sourceDeviceId`, `targetDeviceId` and `timestamp` at the top level of the
/// message. A message is written in the relay form when any of those four is set, and then
/// `targetDeviceId` is always written (as `null` when nil), as the relay does.
///
/// An inbound `chat:timeline-updated` event keeps its payload as validated raw bytes (``rawPayload``)
/// until it is read: `payload` then parses them on each access. Equality and hashing are by the payload's
/// value, whichever form holds it.
public struct EventMessage: Sendable, Hashable {
    /// The event name, e.g. `device-status` (see `EventNames`).
    public var eventType: String
    /// The event's own payload. `.null` means "no payload": it is omitted on the wire.
    public var payload: JSONValue {
        get {
            switch storage {
            case .value(let v): v
            case .raw(let r): r.value
            }
        }
        set { storage = .value(newValue) }
    }
    /// The payload's bytes when the event was decoded from an inbound frame without building the payload
    /// (a `chat:timeline-updated` snapshot), else nil.
    public var rawPayload: RawJSON? {
        if case .raw(let r) = storage { return r }
        return nil
    }

    private enum Storage: Sendable {
        case value(JSONValue)
        case raw(RawJSON)
    }
    private var storage: Storage
    /// The per-user sequence number the relay assigned (relay -> client).
    public var eventId: Int64?
    /// The device that produced the event (relay -> client).
    public var sourceDeviceId: String?
    /// The device it is addressed to; the relay sends `null` for broadcasts.
    public var targetDeviceId: String?
    /// When the relay accepted the event, RFC 3339 (relay -> client).
    public var timestamp: String?

    /// Creates an event.
    public init(eventType: String, payload: JSONValue = .object([:]), eventId: Int64? = nil, sourceDeviceId: String? = nil,
                targetDeviceId: String? = nil, timestamp: String? = nil) {
        self.eventType = eventType
        self.storage = .value(payload)
        self.eventId = eventId
        self.sourceDeviceId = sourceDeviceId
        self.targetDeviceId = targetDeviceId
        self.timestamp = timestamp
    }

    /// Creates a client -> relay event from a typed payload.
    public init(_ typed: some TypedEventPayload) {
        self.init(eventType: type(of: typed).eventType, payload: typed.json)
    }

    /// Whether this event carries relay-assigned fields (the relay -> client form).
    public var isRelayForm: Bool {
        eventId != nil || sourceDeviceId != nil || targetDeviceId != nil || timestamp != nil
    }

    /// Decodes `payload` as `T`; throws when `eventType` is not `T.eventType` or the payload does not fit.
    public func decodePayload<T: TypedEventPayload>(as _: T.Type = T.self) throws(MessageDecodeError) -> T {
        guard eventType == T.eventType else {
            throw MessageDecodeError(path: "$.payload.eventType", message: "event is \"\(eventType)\", not \"\(T.eventType)\"")
        }
        return try T(json: payload, path: "$.payload.payload")
    }

    /// Equal when every field and the payload's value are equal.
    public static func == (a: EventMessage, b: EventMessage) -> Bool {
        a.eventType == b.eventType && a.eventId == b.eventId && a.sourceDeviceId == b.sourceDeviceId
            && a.targetDeviceId == b.targetDeviceId && a.timestamp == b.timestamp && a.payload == b.payload
    }

    /// Hashes every field and the payload's value.
    public func hash(into h: inout Hasher) {
        h.combine(eventType)
        h.combine(payload)
        h.combine(eventId)
        h.combine(sourceDeviceId)
        h.combine(targetDeviceId)
        h.combine(timestamp)
    }

    /// Reads the event; `deferred` is the already validated `$.payload.payload` object when the parser
    /// skipped it (its place in `top` then holds `.null`). Only a `chat:timeline-updated` keeps it raw.
    init(reading top: FieldReader, deferred: RawJSON? = nil) throws(MessageDecodeError) {
        let p = try top.object("payload")
        eventType = try p.string("eventType")
        if let deferred {
            storage = eventType == EventNames.chatTimelineUpdated ? .raw(deferred) : .value(deferred.value)
        } else {
            storage = .value(p.value("payload") ?? .null)
        }
        eventId = try top.optionalInt64("eventId")
        sourceDeviceId = try top.optionalString("sourceDeviceId")
        targetDeviceId = try top.optionalString("targetDeviceId")
        timestamp = try top.optionalString("timestamp")
    }

    /// The event read directly from a canonical frame (``RelayFrameReader/readingCanonicalEvent(_:)``): the same
    /// fields and payload storage as `init(reading:deferred:)` gives for that frame.
    init(canonical f: CanonicalEventFields) {
        eventType = f.eventType
        storage = f.eventType == EventNames.chatTimelineUpdated ? .raw(f.payload) : .value(f.payload.value)
        eventId = f.eventId
        sourceDeviceId = f.sourceDeviceId
        targetDeviceId = f.targetDeviceId
        timestamp = f.timestamp
    }

    func write(into b: inout ObjectBuilder) {
        var p = ObjectBuilder(capacity: 2)
        p.set("eventType", eventType)
        if !payload.isNull { p.set("payload", payload) }
        b.set("payload", p.value)
        if isRelayForm {
            b.set("eventId", eventId)
            b.set("sourceDeviceId", sourceDeviceId)
            b.set("targetDeviceId", targetDeviceId.map(JSONValue.string) ?? .null)
            b.set("timestamp", timestamp)
        }
    }
}

/// `event-ack` (client -> relay): events up to `lastEventId` were processed.
public struct EventAck: Sendable, Hashable {
    /// The highest event ID processed.
    public var lastEventId: Int64

    /// Creates an ack.
    public init(lastEventId: Int64) { self.lastEventId = lastEventId }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        lastEventId = try r.int64("lastEventId")
    }

    var json: JSONValue { .object(["lastEventId": .int(lastEventId)]) }
}

/// `terminal.binary.bind` / `terminal.binary.unbind` (client -> relay).
public struct TerminalBind: Sendable, Hashable {
    /// The terminal session whose binary output should (no longer) be forwarded.
    public var sessionId: String
    /// Whether the desktop should send the current screen first.
    public var includeSnapshot: Bool?
    /// Whether to send a snapshot even when the desktop thinks the client has one.
    public var forceSnapshot: Bool?

    /// Creates a bind or unbind payload.
    public init(sessionId: String, includeSnapshot: Bool? = nil, forceSnapshot: Bool? = nil) {
        self.sessionId = sessionId
        self.includeSnapshot = includeSnapshot
        self.forceSnapshot = forceSnapshot
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        sessionId = try r.string("sessionId")
        includeSnapshot = try r.optionalBool("includeSnapshot")
        forceSnapshot = try r.optionalBool("forceSnapshot")
    }

    var json: JSONValue {
        var b = ObjectBuilder(capacity: 3)
        b.set("sessionId", sessionId)
        b.set("includeSnapshot", includeSnapshot)
        b.set("forceSnapshot", forceSnapshot)
        return b.value
    }
}

/// `registered` (relay -> client), fields at the top level: a new relay session.
public struct Registered: Sendable, Hashable {
    /// The relay session ID (32 characters `[A-Za-z0-9]`).
    public var sessionId: String
    /// The same ID under its 1.6 name; when nil, the 1.6 form writes `sessionId` again.
    public var relaySessionId: String?
    /// The resume token (48 characters `[A-Za-z0-9]`).
    public var resumeToken: String
    /// When the session expires, RFC 3339.
    public var expiresAt: String

    /// Creates a registered message.
    public init(sessionId: String, relaySessionId: String? = nil, resumeToken: String, expiresAt: String) {
        self.sessionId = sessionId
        self.relaySessionId = relaySessionId
        self.resumeToken = resumeToken
        self.expiresAt = expiresAt
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        sessionId = try r.string("sessionId")
        relaySessionId = try r.optionalString("relaySessionId")
        resumeToken = try r.string("resumeToken")
        expiresAt = try r.string("expiresAt")
    }

    func write(into b: inout ObjectBuilder, form: ProtocolForm) {
        b.set("sessionId", sessionId)
        if form == .v1_6 { b.set("relaySessionId", relaySessionId ?? sessionId) }
        b.set("resumeToken", resumeToken)
        b.set("expiresAt", expiresAt)
    }
}

/// `resumed` (relay -> client), fields at the top level. The token is not rotated on resume.
public struct Resumed: Sendable, Hashable {
    /// The resumed relay session ID.
    public var sessionId: String
    /// When the session expires (a resume does not extend it), RFC 3339.
    public var expiresAt: String

    /// Creates a resumed message.
    public init(sessionId: String, expiresAt: String) {
        self.sessionId = sessionId
        self.expiresAt = expiresAt
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        sessionId = try r.string("sessionId")
        expiresAt = try r.string("expiresAt")
    }

    func write(into b: inout ObjectBuilder) {
        b.set("sessionId", sessionId)
        b.set("expiresAt", expiresAt)
    }
}

/// The `code` of a relay `error` message (PROTOCOL.md §4). Unknown codes are kept in `.other`.
///
/// Equality and hashing go by `rawValue` (the wire string), so `.other("invalidJson") == .invalidJson`;
/// `init(rawValue:)` never produces `.other` for a known code.
public enum RelayErrorCode: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The frame was not JSON.
    case invalidJson
    /// The message broke a payload rule (e.g. a snake_case key).
    case invalidPayload
    /// The `type` is unknown to the relay.
    case unknownMessageType
    /// `register` without a device ID.
    case missingDeviceId
    /// Not authenticated.
    case authRequired
    /// The device ID is malformed.
    case invalidDeviceId
    /// The device does not belong to the user (may follow `registered` asynchronously).
    case deviceOwnershipFailed
    /// The resume was refused; the socket stays open and `register` may be sent again.
    case invalidResume
    /// The relay could not serialise a message.
    case serializationError
    /// `rpc.request` without a method.
    case missingMethod
    /// A malformed `rpc.request`.
    case invalidRpcPayload
    /// The target client ID is missing.
    case missingClientId
    /// A message without its `payload`.
    case missingPayload
    /// A message without its `sessionId`.
    case missingSessionId
    /// The producer (desktop) is not connected.
    case producerNotConnected
    /// The relay could not forward the message.
    case forwardFailed
    /// A code this version does not know, kept verbatim.
    case other(String)

    /// `rateLimited`: RelayTrace's development relay refused a frame for its per-socket rate limit (not
    /// in PROTOCOL.md, whose relay drops the excess silently). Unknown to clients, so it is an `.other`.
    public static let rateLimited = RelayErrorCode.other("rateLimited")

    /// Every code PROTOCOL.md names, in its order.
    public static let known: [RelayErrorCode] = [
        .invalidJson, .invalidPayload, .unknownMessageType, .missingDeviceId, .authRequired, .invalidDeviceId,
        .deviceOwnershipFailed, .invalidResume, .serializationError, .missingMethod, .invalidRpcPayload,
        .missingClientId, .missingPayload, .missingSessionId, .producerNotConnected, .forwardFailed,
    ]

    /// The code for `rawValue`; never fails: unknown codes become `.other(rawValue)`.
    public init(rawValue: String) {
        switch rawValue {
        case "invalidJson": self = .invalidJson
        case "invalidPayload": self = .invalidPayload
        case "unknownMessageType": self = .unknownMessageType
        case "missingDeviceId": self = .missingDeviceId
        case "authRequired": self = .authRequired
        case "invalidDeviceId": self = .invalidDeviceId
        case "deviceOwnershipFailed": self = .deviceOwnershipFailed
        case "invalidResume": self = .invalidResume
        case "serializationError": self = .serializationError
        case "missingMethod": self = .missingMethod
        case "invalidRpcPayload": self = .invalidRpcPayload
        case "missingClientId": self = .missingClientId
        case "missingPayload": self = .missingPayload
        case "missingSessionId": self = .missingSessionId
        case "producerNotConnected": self = .producerNotConnected
        case "forwardFailed": self = .forwardFailed
        default: self = .other(rawValue)
        }
    }

    /// The code as it appears on the wire.
    public var rawValue: String {
        switch self {
        case .invalidJson: "invalidJson"
        case .invalidPayload: "invalidPayload"
        case .unknownMessageType: "unknownMessageType"
        case .missingDeviceId: "missingDeviceId"
        case .authRequired: "authRequired"
        case .invalidDeviceId: "invalidDeviceId"
        case .deviceOwnershipFailed: "deviceOwnershipFailed"
        case .invalidResume: "invalidResume"
        case .serializationError: "serializationError"
        case .missingMethod: "missingMethod"
        case .invalidRpcPayload: "invalidRpcPayload"
        case .missingClientId: "missingClientId"
        case .missingPayload: "missingPayload"
        case .missingSessionId: "missingSessionId"
        case .producerNotConnected: "producerNotConnected"
        case .forwardFailed: "forwardFailed"
        case .other(let s): s
        }
    }

    /// The wire code.
    public var description: String { rawValue }
}

/// `error` (relay -> client), fields at the top level.
public struct RelayErrorMessage: Sendable, Hashable {
    /// The error code.
    public var code: RelayErrorCode
    /// A human-readable message.
    public var message: String
    /// When the relay sent it, RFC 3339.
    public var timestamp: String?

    /// Creates an error message.
    public init(code: RelayErrorCode, message: String, timestamp: String? = nil) {
        self.code = code
        self.message = message
        self.timestamp = timestamp
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        code = RelayErrorCode(rawValue: try r.string("code"))
        message = try r.string("message")
        timestamp = try r.optionalString("timestamp")
    }

    func write(into b: inout ObjectBuilder) {
        b.set("code", code.rawValue)
        b.set("message", message)
        b.set("timestamp", timestamp)
    }
}
