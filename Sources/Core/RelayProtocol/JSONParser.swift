/// Why a JSON text was rejected, and where.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The byte offset in the input where the problem was found.
    public let offset: Int
    /// What is wrong, in words.
    public let message: String

    /// Creates an error at byte `offset`.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// `invalid JSON at byte <offset>: <message>`.
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSONValue {
    /// The deepest nesting of arrays and objects `init(parsing:)` accepts; deeper input is rejected with
    /// a `JSONParseError` instead of exhausting the stack.
    public static let maxDepth = 512

    /// Parses one JSON value from UTF-8 bytes (strict RFC 8259).
    ///
    /// Rejected: trailing commas, `NaN`/`Infinity`, leading zeros, unescaped control characters in
    /// strings, lone or unpaired surrogates in `\u` escapes, invalid UTF-8 (overlong forms, encoded
    /// surrogates, code points above U+10FFFF), a byte order mark, numbers whose magnitude overflows a
    /// `Double` (such as `1e400`), nesting deeper than `maxDepth`, and anything but whitespace after the
    /// value. Duplicate object keys are accepted and the last one wins.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let fast: Result<JSONValue, JSONParseError>? = bytes.withContiguousStorageIfAvailable { buffer in
            JSONValue.parse(buffer)
        }
        if let fast {
            self = try fast.get()
        } else {
            self = try Array(bytes).withUnsafeBufferPointer { JSONValue.parse($0) }.get()
        }
    }

    /// Parses one JSON value from a string (its UTF-8 bytes); see `init(parsing:)` for the rules.
    public init(parsing text: String) throws(JSONParseError) {
        var text = text
        self = try text.withUTF8 { JSONValue.parse($0) }.get()
    }

    static func parse(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        var parser = JSONByteParser(buffer)
        do throws(JSONParseError) {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }

    /// Parses `text` like `init(parsing:)` and also says whether any object key, at any depth, contains
    /// `_` (found while scanning the keys' bytes, so a caller that must reject snake_case keys only needs
    /// `CamelCaseGuard.check` when this is true).
    public static func parsingNotingUnderscoreKeys(_ text: String) throws(JSONParseError) -> (value: JSONValue, underscoreInKey: Bool) {
        var text = text
        return try text.withUTF8 { buffer -> Result<(value: JSONValue, underscoreInKey: Bool), JSONParseError> in
            var parser = JSONByteParser(buffer)
            do throws(JSONParseError) {
                let value = try parser.parseDocument()
                return .success((value, parser.underscoreInKey))
            } catch {
                return .failure(error)
            }
        }.get()
    }
}

/// ASCII bytes the parser and serialiser care about.
enum ASCII {
    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")
    static let slash = UInt8(ascii: "/")
    static let comma = UInt8(ascii: ",")
    static let colon = UInt8(ascii: ":")
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
    static let openBracket = UInt8(ascii: "[")
    static let closeBracket = UInt8(ascii: "]")
    static let minus = UInt8(ascii: "-")
    static let plus = UInt8(ascii: "+")
    static let dot = UInt8(ascii: ".")
    static let zero = UInt8(ascii: "0")
    static let nine = UInt8(ascii: "9")
    static let lowerE = UInt8(ascii: "e")
    static let upperE = UInt8(ascii: "E")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let newline = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
}

/// A recursive-descent parser over a contiguous byte buffer. Every read is bounds-checked against
/// `end`; recursion is bounded by `JSONValue.maxDepth`.
struct JSONByteParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let end: Int
    var index = 0
    var depth = 0
    /// Whether a key containing `_` has been parsed.
    var underscoreInKey = false
    /// The members of the objects being parsed, innermost last: an object's members are collected here and
    /// moved into a dictionary of exactly the right capacity when it closes (no rehashing as it grows).
    var members: [(String, JSONValue)] = []

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.end = bytes.count
    }

    private func fail(_ message: String, at offset: Int) -> JSONParseError {
        JSONParseError(offset: offset, message: message)
    }

    private func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(hexString([byte]))"
    }

    /// The one document reader: no byte order mark, whitespace around one value, which `top` reads (or
    /// skips) at `index`, and nothing after it.
    @inline(__always)
    mutating func readDocument<T>(_ top: (inout JSONByteParser) throws(JSONParseError) -> T) throws(JSONParseError) -> T {
        if end >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail("a byte order mark is not allowed; send UTF-8 without a BOM", at: 0)
        }
        skipWhitespace()
        let value = try top(&self)
        skipWhitespace()
        if index < end {
            throw fail("unexpected \(describe(bytes[index])) after the JSON value; only whitespace may follow", at: index)
        }
        return value
    }

    /// The whole document as a tree.
    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        try readDocument { p throws(JSONParseError) in try p.parseValue() }
    }

    /// `parseDocument` (same checks, same errors) that reads a top-level object shallowly
    /// (`parseShallowObject(expanding:)`) and only validates any other value. Nil members: not an object.
    mutating func parseShallowDocument(expanding: String?, keeping: [String]?) throws(JSONParseError) -> [ShallowMember]? {
        try readDocument { p throws(JSONParseError) -> [ShallowMember]? in
            guard p.isAt(ASCII.openBrace) else {
                try p.skipValue()
                return nil
            }
            return try p.parseShallowObject(expanding: expanding, keeping: keeping)
        }
    }

    /// Whether the byte at `index` is `byte`.
    @inline(__always)
    func isAt(_ byte: UInt8) -> Bool { index < end && bytes[index] == byte }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < end {
            let b = bytes[index]
            guard b == ASCII.space || b == ASCII.newline || b == ASCII.carriageReturn || b == ASCII.tab else { return }
            index += 1
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < end else { throw fail("unexpected end of input; expected a value", at: index) }
        switch bytes[index] {
        case ASCII.openBrace: return try parseObject()
        case ASCII.openBracket: return try parseArray()
        case ASCII.quote: return .string(try parseString(isKey: false))
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case ASCII.minus, ASCII.zero...ASCII.nine: return try parseNumber()
        case let b:
            throw fail("unexpected \(describe(b)); expected a value (object, array, string, number, true, false or null)", at: index)
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = index
        let count = literal.utf8CodeUnitCount
        let lit = literal.utf8Start
        for k in 0..<count {
            guard index < end, bytes[index] == lit[k] else {
                throw fail("invalid literal; expected '\(literal)'", at: start)
            }
            index += 1
        }
    }

    private mutating func enter(at offset: Int) throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maxDepth {
            throw fail("nesting deeper than \(JSONValue.maxDepth) arrays/objects", at: offset)
        }
    }

    // MARK: The object and array loops

    /// The one object loop: the braces, the keys, the colons and commas, the depth limit and every syntax
    /// error, for each way of reading an object (building it, skipping it, reading it shallowly, or the
    /// relay frame reader's deferral). `member` reads or skips the value at `index` of the member whose key
    /// it is given (`""` when `buildingKeys` is false: the keys are only validated, and `_` in them noted).
    @inline(__always)
    mutating func readObject(buildingKeys: Bool, _ member: (inout JSONByteParser, String) throws(JSONParseError) -> Void) throws(JSONParseError) {
        let open = index
        try enter(at: open)
        index += 1
        skipWhitespace()
        if index < end && bytes[index] == ASCII.closeBrace {
            index += 1
            depth -= 1
            return
        }
        while true {
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.quote else {
                if bytes[index] == ASCII.closeBrace {
                    throw fail("trailing comma before '}'", at: index)
                }
                throw fail("unexpected \(describe(bytes[index])); expected a string key", at: index)
            }
            let key: String
            if buildingKeys {
                key = try parseString(isKey: true)
            } else {
                try skipString(isKey: true)
                key = ""
            }
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.colon else {
                throw fail("unexpected \(describe(bytes[index])); expected ':' after the key", at: index)
            }
            index += 1
            skipWhitespace()
            try member(&self, key)
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            switch bytes[index] {
            case ASCII.comma:
                index += 1
                skipWhitespace()
            case ASCII.closeBrace:
                index += 1
                depth -= 1
                return
            case let b:
                throw fail("unexpected \(describe(b)); expected ',' or '}' in the object opened at byte \(open)", at: index)
            }
        }
    }

    /// The one array loop, as ``readObject(buildingKeys:_:)`` for objects: `element` reads or skips each
    /// element at `index`.
    @inline(__always)
    mutating func readArray(_ element: (inout JSONByteParser) throws(JSONParseError) -> Void) throws(JSONParseError) {
        let open = index
        try enter(at: open)
        index += 1
        skipWhitespace()
        if index < end && bytes[index] == ASCII.closeBracket {
            index += 1
            depth -= 1
            return
        }
        while true {
            guard index < end else { throw fail("unterminated array opened at byte \(open)", at: index) }
            if bytes[index] == ASCII.closeBracket {
                throw fail("trailing comma before ']'", at: index)
            }
            try element(&self)
            skipWhitespace()
            guard index < end else { throw fail("unterminated array opened at byte \(open)", at: index) }
            switch bytes[index] {
            case ASCII.comma:
                index += 1
                skipWhitespace()
            case ASCII.closeBracket:
                index += 1
                depth -= 1
                return
            case let b:
                throw fail("unexpected \(describe(b)); expected ',' or ']' in the array opened at byte \(open)", at: index)
            }
        }
    }

    /// Builds the object at `index`, each member's value read by `value` (given its key). The members are
    /// collected in ``members`` and moved into a dictionary of exactly their count when the object closes;
    /// with a repeated key the last one wins.
    @inline(__always)
    mutating func buildObject(_ value: (inout JSONByteParser, String) throws(JSONParseError) -> JSONValue) throws(JSONParseError) -> JSONValue {
        let base = members.count
        try readObject(buildingKeys: true) { p, key throws(JSONParseError) in
            let v = try value(&p, key)
            p.members.append((key, v))
        }
        var object = [String: JSONValue](minimumCapacity: members.count - base)
        for k in base..<members.count {
            object[members[k].0] = members[k].1  // in order: with a repeated key the last one wins
        }
        members.removeSubrange(base...)
        return .object(object)
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try buildObject { p, _ throws(JSONParseError) in try p.parseValue() }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        var elements = [JSONValue]()
        try readArray { p throws(JSONParseError) in elements.append(try p.parseValue()) }
        return .array(elements)
    }

    // MARK: Skipping (validate without building)

    /// Validates one value at `index` exactly as `parseValue` would (same errors), without building it,
    /// noting `_` in keys, and moves past it.
    mutating func skipValue() throws(JSONParseError) {
        guard index < end else { throw fail("unexpected end of input; expected a value", at: index) }
        switch bytes[index] {
        case ASCII.openBrace: try skipObject()
        case ASCII.openBracket: try skipArray()
        case ASCII.quote: try skipString(isKey: false)
        case ASCII.minus, ASCII.zero...ASCII.nine: _ = try parseNumber()
        default: _ = try parseValue()
        }
    }

    /// `parseObject` (same checks, same errors, same order) that builds only the scalar members: nested
    /// objects and arrays are validated by `skipValue`, except that an object value of a member named
    /// `expanding` is read the same shallow way (its members in ``ShallowMember/members``). Returns every
    /// member with its byte range.
    mutating func parseShallowObject(expanding: String? = nil, keeping: [String]? = nil) throws(JSONParseError) -> [ShallowMember] {
        var out: [ShallowMember] = []
        try readObject(buildingKeys: true) { p, key throws(JSONParseError) in
            if out.isEmpty { out.reserveCapacity(8) }
            let start = p.index
            if let expanding, p.isAt(ASCII.openBrace), key == expanding {
                let inner = try p.parseShallowObject(keeping: keeping)
                out.append(ShallowMember(key: key, scalar: nil, range: start..<p.index, members: inner))
            } else if p.isAt(ASCII.openBrace) || p.isAt(ASCII.openBracket) {
                try p.skipValue()
                out.append(ShallowMember(key: key, scalar: nil, range: start..<p.index))
            } else if let keeping, !keeping.contains(key) {
                try p.skipValue()
                out.append(ShallowMember(key: key, scalar: nil, range: start..<p.index))
            } else {
                let v = try p.parseValue()
                out.append(ShallowMember(key: key, scalar: v, range: start..<p.index))
            }
        }
        return out
    }

    private mutating func skipObject() throws(JSONParseError) {
        try readObject(buildingKeys: false) { p, _ throws(JSONParseError) in try p.skipValue() }
    }

    private mutating func skipArray() throws(JSONParseError) {
        try readArray { p throws(JSONParseError) in try p.skipValue() }
    }

    /// Moves `index` past the plain string bytes ahead, eight at a time: stops at (or, near the end of the
    /// input, before) the first byte that needs a look of its own: a quote, a backslash, a control byte, a
    /// non-ASCII byte, or, for a key, `_`. The byte-by-byte loops after it make every decision, so this only
    /// skips bytes they would pass over unchanged. (In the bit tests a borrow can only mark bytes above a
    /// byte that is itself marked, so the lowest marked byte is exact.)
    @inline(__always)
    private mutating func skipPlainStringBytes(isKey: Bool) {
        guard let base = bytes.baseAddress else { return }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let underscore: UInt64 = isKey ? 0x5F5F_5F5F_5F5F_5F5F : 0x2222_2222_2222_2222
        while end - index >= 8 {
            let v = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let q = v ^ 0x2222_2222_2222_2222
            let s = v ^ 0x5C5C_5C5C_5C5C_5C5C
            let u = v ^ underscore
            var marked = ((q &- ones) & ~q) | ((s &- ones) & ~s) | ((u &- ones) & ~u)
            marked |= (v &- 0x2020_2020_2020_2020) & ~v
            marked = (marked | v) & highs
            if marked != 0 {
                index += marked.trailingZeroBitCount >> 3
                return
            }
            index += 8
        }
    }

    /// `parseString` without building the string (an escaped string takes the building slow path).
    private mutating func skipString(isKey: Bool) throws(JSONParseError) {
        let open = index
        index += 1
        let contentStart = index
        while index < end {
            skipPlainStringBytes(isKey: isKey)
            guard index < end else { break }
            let b = bytes[index]
            if b == ASCII.quote {
                index += 1
                return
            } else if b == ASCII.backslash {
                let s = try parseEscapedString(open: open, contentStart: contentStart)
                if isKey && !underscoreInKey && s.utf8.contains(UInt8(ascii: "_")) { underscoreInKey = true }
                return
            } else if b < 0x20 {
                throw fail("control character \(describe(b)) in a string must be escaped", at: index)
            } else if b < 0x80 {
                if isKey && b == UInt8(ascii: "_") { underscoreInKey = true }
                index += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw fail("unterminated string opened at byte \(open)", at: index)
    }

    @inline(__always)
    private func isDigit(_ b: UInt8) -> Bool { b &- ASCII.zero < 10 }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var negative = false
        if bytes[index] == ASCII.minus {
            negative = true
            index += 1
        }
        guard index < end, isDigit(bytes[index]) else {
            throw fail("expected a digit after '-'", at: index)
        }
        var magnitude: UInt64 = 0
        var overflow = false
        if bytes[index] == ASCII.zero {
            index += 1
            if index < end && isDigit(bytes[index]) {
                throw fail("leading zeros are not allowed in numbers", at: start)
            }
        } else {
            while index < end, isDigit(bytes[index]) {
                let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(UInt64(bytes[index] &- ASCII.zero))
                magnitude = a
                overflow = overflow || o1 || o2
                index += 1
            }
        }
        var integral = true
        if index < end && bytes[index] == ASCII.dot {
            integral = false
            index += 1
            guard index < end, isDigit(bytes[index]) else {
                throw fail("expected a digit after the decimal point", at: index)
            }
            while index < end, isDigit(bytes[index]) { index += 1 }
        }
        if index < end && (bytes[index] == ASCII.lowerE || bytes[index] == ASCII.upperE) {
            integral = false
            index += 1
            if index < end && (bytes[index] == ASCII.plus || bytes[index] == ASCII.minus) { index += 1 }
            guard index < end, isDigit(bytes[index]) else {
                throw fail("expected a digit in the exponent", at: index)
            }
            while index < end, isDigit(bytes[index]) { index += 1 }
        }
        if integral && !overflow {
            if !negative {
                if magnitude <= UInt64(Int64.max) { return .int(Int64(magnitude)) }
            } else if magnitude == 0 {
                return .double(-0.0)
            } else if magnitude <= UInt64(Int64.max) + 1 {
                return .int(Int64(bitPattern: 0 &- magnitude))
            }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw fail("number \(text.prefix(40)) is out of the range of a 64-bit double", at: start)
        }
        return .double(value)
    }

    /// Parses a string starting at the opening quote; leaves `index` after the closing quote. For a key,
    /// notes a `_` in it (`underscoreInKey`).
    @inline(__always)
    private mutating func parseString(isKey: Bool) throws(JSONParseError) -> String {
        let open = index
        index += 1
        let contentStart = index
        while index < end {
            skipPlainStringBytes(isKey: isKey)
            guard index < end else { break }
            let b = bytes[index]
            if b == ASCII.quote {
                let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[contentStart..<index]), as: UTF8.self)
                index += 1
                return s
            } else if b == ASCII.backslash {
                let s = try parseEscapedString(open: open, contentStart: contentStart)
                if isKey && !underscoreInKey && s.utf8.contains(UInt8(ascii: "_")) { underscoreInKey = true }
                return s
            } else if b < 0x20 {
                throw fail("control character \(describe(b)) in a string must be escaped", at: index)
            } else if b < 0x80 {
                if isKey && b == UInt8(ascii: "_") { underscoreInKey = true }
                index += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw fail("unterminated string opened at byte \(open)", at: index)
    }

    /// The slow path: the string contains escapes, so its bytes are rebuilt.
    private mutating func parseEscapedString(open: Int, contentStart: Int) throws(JSONParseError) -> String {
        var out = [UInt8]()
        out.reserveCapacity(index - contentStart + 16)
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[contentStart..<index]))
        while index < end {
            let b = bytes[index]
            if b == ASCII.quote {
                index += 1
                return String(decoding: out, as: UTF8.self)
            } else if b == ASCII.backslash {
                let escapeStart = index
                index += 1
                guard index < end else { break }
                let e = bytes[index]
                index += 1
                switch e {
                case ASCII.quote: out.append(ASCII.quote)
                case ASCII.backslash: out.append(ASCII.backslash)
                case ASCII.slash: out.append(ASCII.slash)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    let unit = try parseHex4(escapeStart: escapeStart)
                    var scalarValue = UInt32(unit)
                    if unit >= 0xD800 && unit < 0xDC00 {
                        guard index + 1 < end, bytes[index] == ASCII.backslash, bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("high surrogate \\u\(hex16(unit)) is not followed by a low surrogate escape", at: escapeStart)
                        }
                        let lowStart = index
                        index += 2
                        let low = try parseHex4(escapeStart: lowStart)
                        guard low >= 0xDC00 && low < 0xE000 else {
                            throw fail("high surrogate \\u\(hex16(unit)) is followed by \\u\(hex16(low)), not a low surrogate", at: lowStart)
                        }
                        scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                    } else if unit >= 0xDC00 && unit < 0xE000 {
                        throw fail("lone low surrogate \\u\(hex16(unit)) without a preceding high surrogate", at: escapeStart)
                    }
                    appendUTF8(scalarValue, to: &out)
                default:
                    throw fail("invalid escape \\ followed by \(describe(e)); valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", at: escapeStart)
                }
            } else if b < 0x20 {
                throw fail("control character \(describe(b)) in a string must be escaped", at: index)
            } else if b < 0x80 {
                out.append(b)
                index += 1
            } else {
                let s = index
                try skipUTF8Sequence()
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[s..<index]))
            }
        }
        throw fail("unterminated string opened at byte \(open)", at: index)
    }

    private func hex16(_ unit: UInt16) -> String {
        RelayProtocol.hexString([UInt8(unit >> 8), UInt8(unit & 0xFF)])
    }

    private mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        guard index + 4 <= end else {
            throw fail("truncated \\u escape; expected 4 hex digits", at: escapeStart)
        }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt8
            switch c {
            case ASCII.zero...ASCII.nine: d = c - ASCII.zero
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw fail("invalid hex digit \(describe(c)) in a \\u escape", at: index)
            }
            v = v << 4 | UInt16(d)
            index += 1
        }
        return v
    }

    private func appendUTF8(_ v: UInt32, to out: inout [UInt8]) {
        switch v {
        case 0..<0x80:
            out.append(UInt8(v))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | (v >> 6)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | (v >> 12)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        default:
            out.append(UInt8(0xF0 | (v >> 18)))
            out.append(UInt8(0x80 | ((v >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `index` (whose lead byte is >= 0x80) and moves past it.
    @inline(__always)
    private mutating func skipUTF8Sequence() throws(JSONParseError) {
        switch UTF8Validation.sequence(bytes, at: index, end: end) {
        case .valid(let length): index += length
        case .invalid(let offset, let reason): throw fail("invalid UTF-8: \(reason)", at: offset)
        }
    }
}
