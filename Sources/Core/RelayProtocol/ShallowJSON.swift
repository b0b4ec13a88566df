/// One member of an object read shallowly: its key, its value when it is a scalar (built), the byte
/// range of its value, and, for an expanded object value, that object's members read the same way.
public struct ShallowMember: Sendable {
    /// The member's key.
    public let key: String
    /// The value, when it is a string, number, boolean or null.
    public let scalar: JSONValue?
    /// Where the value is in the parsed bytes.
    public let range: Range<Int>
    /// The members of the value, when it is an object the parse was asked to expand.
    public let members: [ShallowMember]?

    init(key: String, scalar: JSONValue?, range: Range<Int>, members: [ShallowMember]? = nil) {
        self.key = key
        self.scalar = scalar
        self.range = range
        self.members = members
    }
}

/// A JSON text validated in full but built only at its top level: what the inspection commands need
/// from a relay message (its `type`, and `eventType`, `id` or `method` in its `payload`) without building
/// the message's tree.
public struct ShallowJSON: Sendable {
    /// The top-level members in the order of the text (a repeated key appears more than once; the last
    /// is the one a full parse keeps), or nil when the text is not an object.
    public let members: [ShallowMember]?

    /// Validates `bytes` exactly as ``JSONValue/init(parsing:)`` does (the same errors, at the same
    /// offsets) and keeps the top-level members: scalars built (only those named in `keeping`, when it is
    /// given: the others are validated and left unbuilt), nested values as byte ranges, except that object
    /// values of members named `expanding` are read one level further the same way.
    public init(parsing bytes: UnsafeRawBufferPointer, expanding: String? = nil, keeping: [String]? = nil) throws(JSONParseError) {
        let buffer = UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        var parser = JSONByteParser(buffer)
        members = try parser.parseShallowDocument(expanding: expanding, keeping: keeping)
    }

    /// The member named `key` that a full parse keeps (the last one), or nil (also when not an object).
    public func member(_ key: String) -> ShallowMember? { members?.last { $0.key == key } }
}

extension ShallowMember {
    /// The member of this (expanded) object value named `key` that a full parse keeps, or nil.
    public func member(_ key: String) -> ShallowMember? { members?.last { $0.key == key } }
}
