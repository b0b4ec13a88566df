/// Why a JSON message could not be decoded as a relay message, and where.
public struct MessageDecodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The JSONPath of the offending value, e.g. `$.payload.deviceId` (`$` for the whole message).
    public let path: String
    /// What is wrong, e.g. `expected a string, found integer`.
    public let message: String
    /// For text that is not JSON at all: the byte offset the JSON parser stopped at.
    public let byteOffset: Int?

    /// Creates an error at `path`.
    public init(path: String, message: String, byteOffset: Int? = nil) {
        self.path = path
        self.message = message
        self.byteOffset = byteOffset
    }

    /// Wraps a JSON syntax error (path `$`, with its byte offset).
    public init(_ parseError: JSONParseError) {
        self.init(path: "$", message: "not valid JSON: \(parseError.message)", byteOffset: parseError.offset)
    }

    /// `invalid relay message at <path>[, byte <offset>]: <message>`.
    public var description: String {
        let at = byteOffset.map { "\(path), byte \($0)" } ?? path
        return "invalid relay message at \(at): \(message)"
    }
}

/// Typed reads of an object's members with path-carrying errors. Absent members and JSON `null` are
/// both "absent" for optional reads; any other wrong type is an error.
struct FieldReader {
    let object: [String: JSONValue]
    let path: String

    /// A reader for `value`, which must be an object.
    init(_ value: JSONValue, path: String) throws(MessageDecodeError) {
        guard case .object(let o) = value else {
            throw MessageDecodeError(path: path, message: "expected an object, found \(value.typeDescription)")
        }
        self.object = o
        self.path = path
    }

    init(object: [String: JSONValue], path: String) {
        self.object = object
        self.path = path
    }

    func path(_ key: String) -> String { JSONPath.member(path, key) }

    func has(_ key: String) -> Bool { object[key] != nil }

    private func missing(_ key: String, _ what: String) -> MessageDecodeError {
        MessageDecodeError(path: path(key), message: "missing required \(what)")
    }

    private func wrongType(_ key: String, _ what: String, _ found: JSONValue) -> MessageDecodeError {
        MessageDecodeError(path: path(key), message: "expected \(what), found \(found.typeDescription)")
    }

    func value(_ key: String) -> JSONValue? { object[key] }

    func string(_ key: String) throws(MessageDecodeError) -> String {
        guard let v = object[key], !v.isNull else { throw missing(key, "string") }
        guard case .string(let s) = v else { throw wrongType(key, "a string", v) }
        return s
    }

    func optionalString(_ key: String) throws(MessageDecodeError) -> String? {
        guard let v = object[key], !v.isNull else { return nil }
        guard case .string(let s) = v else { throw wrongType(key, "a string", v) }
        return s
    }

    func int64(_ key: String) throws(MessageDecodeError) -> Int64 {
        guard let v = object[key], !v.isNull else { throw missing(key, "integer") }
        guard let i = v.intValue else { throw wrongType(key, "an integer", v) }
        return i
    }

    func optionalInt64(_ key: String) throws(MessageDecodeError) -> Int64? {
        guard let v = object[key], !v.isNull else { return nil }
        guard let i = v.intValue else { throw wrongType(key, "an integer", v) }
        return i
    }

    func int(_ key: String) throws(MessageDecodeError) -> Int {
        let i = try int64(key)
        guard let n = Int(exactly: i) else {
            throw MessageDecodeError(path: path(key), message: "integer \(i) is out of range")
        }
        return n
    }

    func bool(_ key: String) throws(MessageDecodeError) -> Bool {
        guard let v = object[key], !v.isNull else { throw missing(key, "boolean") }
        guard case .bool(let b) = v else { throw wrongType(key, "a boolean", v) }
        return b
    }

    func optionalBool(_ key: String) throws(MessageDecodeError) -> Bool? {
        guard let v = object[key], !v.isNull else { return nil }
        guard case .bool(let b) = v else { throw wrongType(key, "a boolean", v) }
        return b
    }

    /// The member `key` as an object reader; `nil` when absent or null.
    func optionalObject(_ key: String) throws(MessageDecodeError) -> FieldReader? {
        guard let v = object[key], !v.isNull else { return nil }
        guard case .object(let o) = v else { throw wrongType(key, "an object", v) }
        return FieldReader(object: o, path: path(key))
    }

    func object(_ key: String) throws(MessageDecodeError) -> FieldReader {
        guard let r = try optionalObject(key) else { throw missing(key, "object") }
        return r
    }

    func optionalTraceParent(_ key: String) throws(MessageDecodeError) -> TraceParent? {
        guard let s = try optionalString(key) else { return nil }
        do throws(TraceParentError) {
            return try TraceParent(parsing: s)
        } catch {
            throw MessageDecodeError(path: path(key), message: error.description)
        }
    }
}

/// Builds a JSON object, omitting absent optionals.
struct ObjectBuilder {
    var members: [String: JSONValue]

    init(capacity: Int = 8) { members = Dictionary(minimumCapacity: capacity) }

    mutating func set(_ key: String, _ value: JSONValue) { members[key] = value }
    mutating func set(_ key: String, _ value: String) { members[key] = .string(value) }
    mutating func set(_ key: String, _ value: String?) { if let value { members[key] = .string(value) } }
    mutating func set(_ key: String, _ value: Int64?) { if let value { members[key] = .int(value) } }
    mutating func set(_ key: String, _ value: Bool?) { if let value { members[key] = .bool(value) } }
    mutating func set(_ key: String, _ value: JSONValue?) { if let value { members[key] = value } }

    var value: JSONValue { .object(members) }
}
