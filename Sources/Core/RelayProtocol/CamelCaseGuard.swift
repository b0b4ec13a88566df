/// A key containing `_` found in a JSON value that must be camelCase (PROTOCOL.md §2, SPEC A8).
public struct CamelCaseViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// The offending key, e.g. `file_path`.
    public let key: String
    /// The JSONPath of the key, e.g. `$.payload.params.updateData.file_path` or `$.items[2].snake_key`.
    public let path: String

    /// Creates a violation for `key` at `path`.
    public init(key: String, path: String) {
        self.key = key
        self.path = path
    }

    /// What, where and what to do.
    public var description: String {
        "snake_case key \"\(key)\" at \(path): the relay drops messages with '_' in any key; "
            + "rename it to camelCase (\"\(CamelCaseGuard.camelCased(key))\")"
    }
}

/// The outgoing-message guard: the relay answers `error/invalidPayload` to a message with a `_` in any
/// key at any depth, so the client refuses to send one and drops one that arrives.
public enum CamelCaseGuard {
    /// Throws the first key containing `_` in `value`, at any depth and inside arrays. "First" is
    /// deterministic: object keys in UTF-8 byte order, each key checked before descending into its
    /// value (depth first), array elements in order. `path` names `value` itself.
    ///
    /// The common case (no violation) is one allocation-free walk; paths are built only on failure.
    public static func check(_ value: JSONValue, path: String = "$") throws(CamelCaseViolation) {
        guard containsViolation(value) else { return }
        var found: [CamelCaseViolation] = []
        collect(value, path: path, into: &found, limit: 1)
        if let first = found.first { throw first }
    }

    /// Every key containing `_` in `value`, in the order `check` would meet them.
    public static func violations(in value: JSONValue, path: String = "$") -> [CamelCaseViolation] {
        guard containsViolation(value) else { return [] }
        var found: [CamelCaseViolation] = []
        collect(value, path: path, into: &found, limit: .max)
        return found
    }

    /// Whether `key` contains `_`.
    @inline(__always)
    static func isViolating(_ key: String) -> Bool {
        key.utf8.contains(UInt8(ascii: "_"))
    }

    static func containsViolation(_ value: JSONValue) -> Bool {
        switch value {
        case .object(let o):
            for (k, v) in o where isViolating(k) || containsViolation(v) { return true }
            return false
        case .array(let a):
            for v in a where containsViolation(v) { return true }
            return false
        default:
            return false
        }
    }

    private static func collect(_ value: JSONValue, path: String, into found: inout [CamelCaseViolation], limit: Int) {
        switch value {
        case .object(let o):
            for (k, v) in JSONWriter.sortedMembers(o) {
                guard found.count < limit else { return }
                let memberPath = JSONPath.member(path, k)
                if isViolating(k) { found.append(CamelCaseViolation(key: k, path: memberPath)) }
                collect(v, path: memberPath, into: &found, limit: limit)
            }
        case .array(let a):
            for (i, v) in a.enumerated() {
                guard found.count < limit else { return }
                collect(v, path: JSONPath.element(path, i), into: &found, limit: limit)
            }
        default:
            return
        }
    }

    /// `file_path` -> `filePath`, `__x_y` -> `xY`: the suggestion in violation messages.
    static func camelCased(_ key: String) -> String {
        var out = ""
        var upperNext = false
        for ch in key {
            if ch == "_" {
                upperNext = !out.isEmpty
            } else if upperNext {
                out += ch.uppercased()
                upperNext = false
            } else {
                out.append(ch)
            }
        }
        return out
    }
}

/// JSONPath strings for error messages: `$.a.b`, `$.items[2]`, `$['key with spaces']`.
enum JSONPath {
    /// `base` followed by the member `key`: dot notation for identifier-like keys, brackets otherwise.
    static func member(_ base: String, _ key: String) -> String {
        if isIdentifier(key) { return base + "." + key }
        var quoted = ""
        for ch in key {
            if ch == "'" || ch == "\\" { quoted.append("\\") }
            quoted.append(ch)
        }
        return base + "['" + quoted + "']"
    }

    /// `base` followed by the array element `index`.
    static func element(_ base: String, _ index: Int) -> String {
        base + "[" + String(index) + "]"
    }

    private static func isIdentifier(_ key: String) -> Bool {
        guard let first = key.utf8.first else { return false }
        func isLetter(_ b: UInt8) -> Bool {
            (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
                || b == UInt8(ascii: "_") || b == UInt8(ascii: "$")
        }
        guard isLetter(first) else { return false }
        return key.utf8.allSatisfy { isLetter($0) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }
    }
}
