public import RelayProtocol
import Trace

extension InspectedRecord {
    /// The object `relaytrace show` prints and the viewer's detail pane shows: the fields of
    /// `jsonLine`, the payload in full (`json`, `text`, or `base64` and PTC1 `data` for binary frames), and
    /// `redacted`: the JSON paths (`$.json.payload.token`) of strings holding redaction placeholders.
    public var detail: JSONValue {
        guard case .object(var o) = jsonLine else { return jsonLine }
        if record.kind == .frameBinary {
            o["base64"] = .string(base64(record.payload))
            if let t = terminal { o["data"] = .string(String(decoding: t.data, as: UTF8.self)) }
        } else if json == nil, !record.payload.isEmpty {
            o["text"] = .string(record.payloadText)
        }
        var paths: [String] = []
        for key in ["json", "text"] { if let v = o[key] { Self.placeholderPaths(v, "$." + key, &paths) } }
        o["redacted"] = .array(paths.map { .string($0) })
        return .object(o)
    }

    /// Appends the paths under `path` of the strings in `value` that hold a redaction placeholder.
    static func placeholderPaths(_ value: JSONValue, _ path: String, _ out: inout [String]) {
        switch value {
        case .object(let m): for (k, v) in m.sorted(by: { $0.key < $1.key }) { placeholderPaths(v, path + "." + k, &out) }
        case .array(let a): for (i, v) in a.enumerated() { placeholderPaths(v, "\(path)[\(i)]", &out) }
        case .string(let s): if s.contains(Redactor.placeholderPrefix) { out.append(path) }
        default: break
        }
    }

    /// The short name the frame list shows in its type column: the message type, `PTC1` for a decoded
    /// terminal frame, else the record kind.
    public var typeName: String { type ?? (terminal != nil ? "PTC1" : record.kind.name) }

    /// Whether the record reports a failure: a failed transport, an `error` message, an RPC error.
    public var isFailure: Bool {
        record.kind == .transportFailed || type == "error"
            || (type == "rpc.response" && !((json?["error"] ?? json?["payload"]?["error"]) ?? .null).isNull)
    }
}
