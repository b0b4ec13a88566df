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
public struct FrameMeaning: Sendable, Hashable, CustomStringConvertible {
    /// `register`, `heartbeat`, `rpc.request session.list`, `event chat:timeline-interest`, `binary`...
    public var kind: String
    /// The content that must match, with the volatile values removed (canonical JSON text).
    public var content: JSONValue

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
    /// realistic) back to the recorded ones before comparing.
    public init(_ frame: WireFrame, deviceIds: Set<String> = [], reverse: [String: String] = [:]) {
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
            let inner = json["payload"]
            switch type {
            case "rpc.request":
                kind = "rpc.request " + ((inner?["method"] ?? json["method"])?.stringValue ?? "?")
            case "event":
                kind = "event " + ((inner?["eventType"] ?? json["eventType"])?.stringValue ?? "?")
            default:
                kind = type
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

    /// `kind` and the content, e.g. `register {"payload":{...}}`.
    public var description: String { "\(kind) \(content.jsonText)" }
}
