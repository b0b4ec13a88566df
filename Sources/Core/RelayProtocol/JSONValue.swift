/// A JSON value, as it travels on the wire.
///
/// Parsing (`init(parsing:)`) is strict RFC 8259 and hand-written over bytes; serialisation
/// (`serialized()`, `jsonText`) is compact and canonical: object keys sorted by their UTF-8 bytes, so the
/// same value always gives the same bytes.
///
/// Numbers: an integer literal (no fraction, no exponent) that fits `Int64` is `.int`; every other number
/// is `.double`. `-0` parses as `.double(-0.0)` so its sign survives a round trip. Use
/// `canonicallyEquals(_:)` to compare numbers across the two cases (`.int(1)` and `.double(1.0)`).
///
/// Objects are Swift dictionaries: with duplicate keys in the input the last one wins, and keys that
/// are canonically equivalent Unicode strings (e.g. precomposed and decomposed "é") are the same key.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer without fraction or exponent that fits `Int64`.
    case int(Int64)
    /// Every other number. Non-finite values are serialised as `null`.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object. Serialised with keys sorted by UTF-8 bytes.
    case object([String: JSONValue])
}

// MARK: - Accessors

extension JSONValue {
    /// The member `key` of an object; `nil` when absent or when this value is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// The element at `index` of an array; `nil` when out of range or when this value is not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    /// The string, when this value is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer, when this value is an integer or a double with an integral value in `Int64` range.
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d): return Int64(exactly: d)
        default: return nil
        }
    }

    /// The number as a `Double`, when this value is a number (integers are converted, possibly rounding).
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// The boolean, when this value is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The members, when this value is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The elements, when this value is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// Whether this value is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The JSON type name of this value (`null`, `boolean`, `integer`, `number`, `string`, `array`,
    /// `object`), for error messages.
    public var typeDescription: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Like `==`, but numbers compare by value across cases: `.int(1)` equals `.double(1.0)`.
    /// Nested arrays and objects compare the same way.
    public func canonicallyEquals(_ other: JSONValue) -> Bool {
        switch (self, other) {
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)):
            return Int64(exactly: b) == a
        case (.array(let a), .array(let b)):
            guard a.count == b.count else { return false }
            for (x, y) in zip(a, b) where !x.canonicallyEquals(y) { return false }
            return true
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            for (k, x) in a {
                guard let y = b[k], x.canonicallyEquals(y) else { return false }
            }
            return true
        default:
            return self == other
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByStringLiteral {
    /// A `.string` from a literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// An `.int` from a literal.
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// A `.double` from a literal.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// A `.bool` from a literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// An `.array` from a literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// An `.object` from a literal; with a repeated key the last one wins, as in parsing.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var o = [String: JSONValue](minimumCapacity: elements.count)
        for (k, v) in elements { o[k] = v }
        self = .object(o)
    }
}

extension JSONValue: ExpressibleByNilLiteral {
    /// `.null` from `nil`.
    public init(nilLiteral: ()) { self = .null }
}

// MARK: - Codable

extension JSONValue: Codable {
    /// Decodes whatever the single-value container holds: null, bool, integer (as `.int` when it fits
    /// `Int64`), other number, string, array or object.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) {
            self = .double(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else if let o = try? c.decode([String: JSONValue].self) {
            self = .object(o)
        } else {
            throw DecodingError.dataCorruptedError(
                in: c, debugDescription: "not a JSON value (null, bool, number, string, array or object)")
        }
    }

    /// Encodes into a single-value container. Non-finite doubles are encoded as nil, as in `serialized()`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d):
            if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact canonical JSON text (`jsonText`).
    public var description: String { jsonText }
}
