/// The UTF-8 bytes of one JSON value that has already been validated (strict RFC 8259, as
/// `JSONValue(parsing:)`), kept unparsed until someone needs the value.
///
/// Inbound `chat:timeline-updated` snapshots keep their payload in this form (SPEC A10: only the envelope
/// is read on arrival, the content is decoded at delivery, after the lease check), so the content of a
/// snapshot never becomes a JSON tree unless someone reads it. Equality and hashing are by bytes.
public struct RawJSON: Sendable, Hashable {
    /// The value's bytes (valid JSON, no surrounding whitespace).
    public let bytes: [UInt8]
    /// The top-level members, when the parser indexed them while validating (an object); else nil.
    private let index: [RawMember]?

    /// Wraps bytes the caller has validated, with the top-level member index the parser built, if any.
    init(validated bytes: [UInt8], index: [RawMember]? = nil) {
        self.bytes = bytes
        self.index = index
    }

    /// Validates `bytes` as one JSON value; throws the parse error (with its byte offset) otherwise.
    public init(validating bytes: [UInt8]) throws(JSONParseError) {
        _ = try JSONValue(parsing: bytes)
        self.bytes = bytes
        self.index = nil
    }

    /// The canonical serialisation of `value`.
    public init(_ value: JSONValue) {
        self.bytes = value.serialized()
        self.index = nil
    }

    /// The parsed value. The bytes were validated when this was made, so parsing cannot fail; should it
    /// ever, the result is `.null`.
    public var value: JSONValue {
        (try? JSONValue(parsing: bytes)) ?? .null
    }

    /// The top-level members of an object, in the order of the text (a repeated key appears more than
    /// once: the last one is the one a full parse keeps); nil when this is not an object. Scalars
    /// (strings, numbers, booleans, null) come built; nested objects and arrays stay raw.
    public func members() -> [RawMember]? {
        if let index { return index }
        guard case .object(let o) = value else { return nil }
        return o.map { RawMember(key: $0.key, built: $0.value) }
    }

    /// Equal when the bytes are equal.
    public static func == (a: RawJSON, b: RawJSON) -> Bool { a.bytes == b.bytes }

    /// Hashes the bytes.
    public func hash(into h: inout Hasher) { h.combine(bytes) }
}

/// One top-level member of a ``RawJSON`` object.
public struct RawMember: Sendable {
    /// The member's key.
    public let key: String
    /// The value, when it was built (a scalar, or any value of an object that was parsed in full).
    public let built: JSONValue?
    private let source: [UInt8]
    private let range: Range<Int>

    /// A member whose value is built.
    init(key: String, built: JSONValue) {
        self.key = key
        self.built = built
        self.source = []
        self.range = 0..<0
    }

    /// A member whose value is `range` of `source` (validated), built when `built` is not nil.
    init(key: String, built: JSONValue?, source: [UInt8], range: Range<Int>) {
        self.key = key
        self.built = built
        self.source = source
        self.range = range
    }

    /// The value's bytes: a slice of the object's bytes, or the canonical serialisation of a built value.
    public var raw: RawJSON {
        if built != nil && source.isEmpty, let built { return RawJSON(built) }
        return RawJSON(validated: Array(source[range]))
    }

    /// The value, built (parsed) if it was not.
    public var value: JSONValue {
        built ?? raw.value
    }
}

extension [RawMember] {
    /// The member named `key` that a full parse keeps (the last one), or nil.
    public func last(named key: String) -> RawMember? {
        last { $0.key == key }
    }
}
