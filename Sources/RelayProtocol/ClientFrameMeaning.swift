/// What a client's text frame means, for matching the frames of two runs of a client (a recording and a
/// replay, a real client and the model) by meaning rather than bytes: the same message with the values
/// that naturally differ between runs left out of the comparison.
///
/// The ``key`` says what kind of frame it is (`register`, `heartbeat`, `rpc.request session.list`,
/// `event chat:timeline-interest`, `pong`, ...): frames are paired by key (and occurrence). The
/// ``normalized`` value is what is compared once they are paired: the message's JSON with
/// - every **varying** member (a value each run draws for itself) replaced by ``varyingMarker`` when it is
///   present, so its presence still counts but its value does not: `rpc.request` `payload.id` and
///   `payload.traceparent` (request, trace and span IDs), an event's `payload.payload.appSessionId` (drawn
///   per app launch) and `timestamp`; with `deviceIdsVary`, `register`'s `payload.deviceId` as well;
/// - every **app-state** member (what the UI shows, which the wire cannot explain) removed: `heartbeat`'s
///   `payload.activeSessionId`.
///
/// Everything else is compared as it is, canonically (`1` equals `1.0`, key order does not matter).
/// A frame that is not a JSON object with a string `type` has the key `text` (``isMessage`` false) and
/// its JSON (or nil) as normalized value.
public struct ClientFrameMeaning: Sendable, Hashable, CustomStringConvertible {
    /// The pairing key: the message type, with the method of an `rpc.request` and the event type of an
    /// `event` (`rpc.request session.list`, `event chat:timeline-interest`); `text` for a frame that is
    /// not a typed JSON message.
    public var key: String
    /// The message type (`register`, `rpc.request`, ...); nil when the frame is not a typed JSON message.
    public var type: String?
    /// The JSON to compare (varying members replaced, app-state members removed); nil when the frame is
    /// not JSON.
    public var normalized: JSONValue?

    /// What a varying member's value is replaced by.
    public static let varyingMarker = "<varies>"

    /// The varying members by message type (paths of member names from the top of the message).
    public static let varyingPaths: [String: [[String]]] = [
        RelayMessage.TypeName.rpcRequest: [["payload", "id"], ["payload", "traceparent"]],
        RelayMessage.TypeName.event: [["payload", "payload", "appSessionId"], ["timestamp"]],
    ]
    /// The app-state members by message type, removed before comparing.
    public static let appStatePaths: [String: [[String]]] = [
        RelayMessage.TypeName.heartbeat: [["payload", "activeSessionId"]],
    ]

    /// The meaning of a text frame.
    public init(text: String, deviceIdsVary: Bool = false) {
        guard let json = try? JSONValue(parsing: text) else {
            self.init(key: "text", type: nil, normalized: nil)
            return
        }
        self.init(json: json, deviceIdsVary: deviceIdsVary)
    }

    /// The meaning of a parsed message.
    public init(json: JSONValue, deviceIdsVary: Bool = false) {
        guard let type = json["type"]?.stringValue else {
            self.init(key: "text", type: nil, normalized: json)
            return
        }
        var key = type
        if type == RelayMessage.TypeName.rpcRequest, let method = json["payload"]?["method"]?.stringValue {
            key += " " + method
        } else if type == RelayMessage.TypeName.event, let event = json["payload"]?["eventType"]?.stringValue {
            key += " " + event
        }
        var value = json
        var varying = Self.varyingPaths[type] ?? []
        if deviceIdsVary, type == RelayMessage.TypeName.register { varying.append(["payload", "deviceId"]) }
        for path in varying { value = Self.replacing(path[...], in: value) }
        for path in Self.appStatePaths[type] ?? [] { value = Self.removing(path[...], in: value) }
        self.init(key: key, type: type, normalized: value)
    }

    private init(key: String, type: String?, normalized: JSONValue?) {
        self.key = key
        self.type = type
        self.normalized = normalized
    }

    /// Whether the frame is a JSON object with a string `type`.
    public var isMessage: Bool { type != nil }

    /// Whether two frames mean the same: the same key and canonically equal normalized values.
    public func means(_ other: ClientFrameMeaning) -> Bool {
        guard key == other.key else { return false }
        switch (normalized, other.normalized) {
        case (let a?, let b?): return a.canonicallyEquals(b)
        case (nil, nil): return true
        default: return false
        }
    }

    /// The key and the normalized JSON.
    public var description: String { "\(key) \(normalized?.jsonText ?? "(not JSON)")" }

    private static func replacing(_ path: ArraySlice<String>, in value: JSONValue) -> JSONValue {
        guard let first = path.first, case .object(var o) = value, let member = o[first] else { return value }
        o[first] = path.count == 1 ? .string(varyingMarker) : replacing(path.dropFirst(), in: member)
        return .object(o)
    }

    private static func removing(_ path: ArraySlice<String>, in value: JSONValue) -> JSONValue {
        guard let first = path.first, case .object(var o) = value, let member = o[first] else { return value }
        if path.count == 1 { o[first] = nil } else { o[first] = removing(path.dropFirst(), in: member) }
        return .object(o)
    }
}
