public import RelayProtocol

/// What a client frame means, for matching a live client's frame to a recorded one: its kind (the
/// message type, the RPC method, the event type) and its content with the values that naturally differ
/// between runs taken out.
///
/// Never counted as differences: request IDs (`rpc.request`'s `id`), idempotency keys (a fresh one per
/// request), trace context (`traceparent`, `traceId`, `spanId`), device IDs (the replay maps the live
/// device to the recorded one), `appSessionId`, timestamps (`timestamp`, `expiresAt`,
/// `clientTimestamp`, `sentAt`), and the device's display name. Everything else counts: the method,
/// the params, the event and its payload, the resume token and session a `register` presents.
///
/// Two comparisons use it (``Comparison``): a live client against a recording (`relay --replay`, the
/// volatile values left out) and the client model against a recorded client (`relaytrace replay` on a
/// wire trace, their presence kept).
public struct FrameMeaning: Sendable, Hashable, CustomStringConvertible {
    /// What is done with the values that differ between runs.
    public enum Comparison: Sendable, Hashable {
        /// A live client against a recording (`relay --replay`): volatile members and request IDs are
        /// left out, device IDs blanked.
        case live
        /// The client model against a recorded client (a wire replay): a volatile member's value (and a
        /// request ID) is replaced by ``volatileMarker``, so that its presence still counts (a request
        /// without `traceparent` differs from one with it, SPEC A8), and app state the wire cannot explain
        /// (``appStateMembers``) is removed.
        case model
    }

    /// `register`, `heartbeat`, `rpc.request session.list`, `event chat:timeline-interest`, `binary`...
    public var kind: String
    /// The message type (`register`, `rpc.request`, ...); nil for a binary frame or a text frame that is
    /// not a JSON object with a string `type`.
    public var type: String?
    /// The content that must match: the message with the volatile values removed (``Comparison/live``)
    /// or marked (``Comparison/model``), compared canonically.
    public var content: JSONValue

    /// What a volatile member's value becomes in the ``Comparison/model`` comparison.
    public static let volatileMarker = "<varies>"

    /// App state by message type (paths of member names from the top of the message), removed in the
    /// ``Comparison/model`` comparison: `heartbeat`'s `payload.activeSessionId` (what the UI shows).
    public static let appStateMembers: [String: [[String]]] = ["heartbeat": [["payload", "activeSessionId"]]]

    /// Whether the frame is a JSON object with a string `type`.
    public var isMessage: Bool { type != nil }

    /// Member names whose values differ from run to run, anywhere in a message.
    public static let volatileMembers: Set<String> = [
        "traceparent", "traceId", "spanId", "idempotencyKey", "appSessionId", "timestamp", "expiresAt",
        "clientTimestamp", "sentAt", "deviceName",
    ]

    /// The kinds a client repeats on a timer (heartbeats, pings, lease renewals): a live client may
    /// send more or fewer of them than the recording holds, depending on how long each socket lived.
    public var isPeriodic: Bool {
        kind == "heartbeat" || kind == "ping" || kind == "pong" || kind == "event chat:timeline-interest"
    }

    /// The meaning of a client frame. `deviceIds` are the device IDs to blank out (the live and
    /// recorded device of the socket); `reverse` maps values the replay served (placeholders made
    /// realistic) back to the recorded ones before comparing; `comparison` says what becomes of the
    /// volatile values (``Comparison/model`` uses neither `deviceIds` nor `reverse`).
    public init(_ frame: WireFrame, deviceIds: Set<String> = [], reverse: [String: String] = [:], comparison: Comparison = .live) {
        switch frame {
        case .binary(let bytes):
            kind = "binary"
            content = .string(hexString(bytes))
        case .text(let text):
            guard let json = try? JSONValue(parsing: text), let type = json["type"]?.stringValue else {
                kind = "text"
                content = .string(text)
                return
            }
            self.type = type
            let inner = json["payload"]
            switch type {
            case "rpc.request":
                kind = "rpc.request " + ((inner?["method"] ?? json["method"])?.stringValue ?? "?")
            case "event":
                kind = "event " + ((inner?["eventType"] ?? json["eventType"])?.stringValue ?? "?")
            default:
                kind = type
            }
            if comparison == .model {
                var marked = Self.mark(json)
                if type == "rpc.request" { marked = Self.replacing(["payload", "id"][...], in: Self.replacing(["id"][...], in: marked)) }
                for path in Self.appStateMembers[type] ?? [] { marked = Self.removing(path[...], in: marked) }
                content = marked
                return
            }
            var cleaned = Self.clean(json, deviceIds: deviceIds, reverse: reverse)
            // The request ID is the client's own; its response is matched to it by the replay.
            if type == "rpc.request", case .object(var o) = cleaned {
                if case .object(var p)? = o["payload"] {
                    p["id"] = nil
                    o["payload"] = .object(p)
                }
                o["id"] = nil
                cleaned = .object(o)
            }
            content = cleaned
        }
    }

    /// `value` without volatile members, device IDs blanked, served values mapped back.
    static func clean(_ value: JSONValue, deviceIds: Set<String>, reverse: [String: String]) -> JSONValue {
        switch value {
        case .object(let o):
            var out: [String: JSONValue] = [:]
            for (k, v) in o where !volatileMembers.contains(k) {
                out[k] = clean(v, deviceIds: deviceIds, reverse: reverse)
            }
            return .object(out)
        case .array(let a):
            return .array(a.map { clean($0, deviceIds: deviceIds, reverse: reverse) })
        case .string(let s):
            if let r = reverse[s] { return .string(r) }
            if deviceIds.contains(s) || deviceIds.contains(s.lowercased()) { return .string("<device>") }
            return value
        default:
            return value
        }
    }

    /// `value` with every volatile member's value replaced by ``volatileMarker`` (the model comparison).
    static func mark(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let o):
            var out: [String: JSONValue] = [:]
            for (k, v) in o { out[k] = volatileMembers.contains(k) ? .string(volatileMarker) : mark(v) }
            return .object(out)
        case .array(let a):
            return .array(a.map(mark))
        default:
            return value
        }
    }

    private static func replacing(_ path: ArraySlice<String>, in value: JSONValue) -> JSONValue {
        guard let first = path.first, case .object(var o) = value, let member = o[first] else { return value }
        o[first] = path.count == 1 ? .string(volatileMarker) : replacing(path.dropFirst(), in: member)
        return .object(o)
    }

    private static func removing(_ path: ArraySlice<String>, in value: JSONValue) -> JSONValue {
        guard let first = path.first, case .object(var o) = value, let member = o[first] else { return value }
        if path.count == 1 { o.removeValue(forKey: first) } else { o[first] = removing(path.dropFirst(), in: member) }
        return .object(o)
    }

    /// `kind` and the content, e.g. `register {"payload":{...}}`.
    public var description: String { "\(kind) \(content.jsonText)" }
}
