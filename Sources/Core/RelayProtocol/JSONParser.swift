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

extension JSONValue {
    /// Parses an inbound message like `parsingNotingUnderscoreKeys`, except that an object at
    /// `$.payload.payload` (an event's own payload) is only validated (syntax, UTF-8, depth, `_` in its
    /// keys), not built: `.null` stands in its place in `value` and `deferred` holds its bytes. When the
    /// text has more than one top-level or envelope `payload` key, `ambiguous` is true and the caller must
    /// parse fully (the last key wins in a full parse).
    static func parsingDeferringEventPayload(_ text: String) throws(JSONParseError)
        -> (value: JSONValue, underscoreInKey: Bool, deferred: RawJSON?, ambiguous: Bool) {
        var text = text
        return try text.withUTF8 { buffer -> Result<(value: JSONValue, underscoreInKey: Bool, deferred: RawJSON?, ambiguous: Bool), JSONParseError> in
            var parser = JSONByteParser(buffer)
            parser.deferEventPayload = true
            do throws(JSONParseError) {
                let value = try parser.parseDocument()
                let deferred = parser.deferredRange.map { r -> RawJSON in
                    let bytes = Array(UnsafeBufferPointer(rebasing: buffer[r]))
                    let index = parser.deferredIndex.map { m in
                        RawMember(key: m.key, built: m.scalar, source: bytes,
                                  range: (m.range.lowerBound - r.lowerBound)..<(m.range.upperBound - r.lowerBound))
                    }
                    return RawJSON(validated: bytes, index: index)
                }
                let ambiguous = parser.topPayloadKeys > 1 || parser.envelopePayloadKeys > 1
                return .success((value, parser.underscoreInKey, deferred, ambiguous))
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
    /// When set (`parsingDeferringEventPayload`), an object value at `$.payload.payload` is validated and
    /// skipped instead of built: `.null` stands in its place and `deferredRange` holds its bytes.
    var deferEventPayload = false
    /// The next object parsed is the value of the top-level `payload` member.
    private var nextObjectIsEnvelope = false
    /// The byte range of the skipped `$.payload.payload` object.
    var deferredRange: Range<Int>?
    /// Its top-level members: key, built scalar (nil for an object or array), byte range.
    var deferredIndex: [ShallowMember] = []
    /// How many `payload` keys the top-level object and the envelope object had (more than one: ambiguous,
    /// the caller must parse fully).
    var topPayloadKeys = 0
    var envelopePayloadKeys = 0

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

    /// `parseDocument` (same checks, same errors) that reads a top-level object shallowly
    /// (`parseShallowObject(expanding:)`) and only validates any other value. Nil members: not an object.
    mutating func parseShallowDocument(expanding: String?, keeping: [String]?) throws(JSONParseError) -> [ShallowMember]? {
        if end >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail("a byte order mark is not allowed; send UTF-8 without a BOM", at: 0)
        }
        skipWhitespace()
        var members: [ShallowMember]?
        if index < end && bytes[index] == ASCII.openBrace {
            members = try parseShallowObject(expanding: expanding, keeping: keeping)
        } else {
            try skipValue()
        }
        skipWhitespace()
        if index < end {
            throw fail("unexpected \(describe(bytes[index])) after the JSON value; only whitespace may follow", at: index)
        }
        return members
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if end >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail("a byte order mark is not allowed; send UTF-8 without a BOM", at: 0)
        }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index < end {
            throw fail("unexpected \(describe(bytes[index])) after the JSON value; only whitespace may follow", at: index)
        }
        return value
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < end {
            let b = bytes[index]
            guard b == ASCII.space || b == ASCII.newline || b == ASCII.carriageReturn || b == ASCII.tab else { return }
            index += 1
        }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
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

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        let open = index
        let isEnvelope = nextObjectIsEnvelope
        nextObjectIsEnvelope = false
        try enter(at: open)
        index += 1
        skipWhitespace()
        if index < end && bytes[index] == ASCII.closeBrace {
            index += 1
            depth -= 1
            return .object([:])
        }
        let base = members.count
        while true {
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.quote else {
                if bytes[index] == ASCII.closeBrace {
                    throw fail("trailing comma before '}'", at: index)
                }
                throw fail("unexpected \(describe(bytes[index])); expected a string key", at: index)
            }
            let key = try parseString(isKey: true)
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.colon else {
                throw fail("unexpected \(describe(bytes[index])); expected ':' after the key", at: index)
            }
            index += 1
            skipWhitespace()
            let value: JSONValue
            if deferEventPayload && (depth == 1 || isEnvelope) && key == "payload" {
                let isObject = index < end && bytes[index] == ASCII.openBrace
                if depth == 1 {
                    topPayloadKeys += 1
                    nextObjectIsEnvelope = isObject
                    value = try parseValue()
                    nextObjectIsEnvelope = false
                } else {
                    envelopePayloadKeys += 1
                    if isObject {
                        let start = index
                        deferredIndex = try parseShallowObject()
                        deferredRange = start..<index
                        value = .null
                    } else {
                        value = try parseValue()
                    }
                }
            } else {
                value = try parseValue()
            }
            members.append((key, value))
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            switch bytes[index] {
            case ASCII.comma:
                index += 1
                skipWhitespace()
            case ASCII.closeBrace:
                index += 1
                depth -= 1
                var object = [String: JSONValue](minimumCapacity: members.count - base)
                for k in base..<members.count {
                    object[members[k].0] = members[k].1  // in order: with a repeated key the last one wins
                }
                members.removeSubrange(base...)
                return .object(object)
            case let b:
                throw fail("unexpected \(describe(b)); expected ',' or '}' in the object opened at byte \(open)", at: index)
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        let open = index
        try enter(at: open)
        index += 1
        var elements = [JSONValue]()
        skipWhitespace()
        if index < end && bytes[index] == ASCII.closeBracket {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            guard index < end else { throw fail("unterminated array opened at byte \(open)", at: index) }
            if bytes[index] == ASCII.closeBracket {
                throw fail("trailing comma before ']'", at: index)
            }
            elements.append(try parseValue())
            skipWhitespace()
            guard index < end else { throw fail("unterminated array opened at byte \(open)", at: index) }
            switch bytes[index] {
            case ASCII.comma:
                index += 1
                skipWhitespace()
            case ASCII.closeBracket:
                index += 1
                depth -= 1
                return .array(elements)
            case let b:
                throw fail("unexpected \(describe(b)); expected ',' or ']' in the array opened at byte \(open)", at: index)
            }
        }
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
        let open = index
        try enter(at: open)
        index += 1
        var out: [ShallowMember] = []
        skipWhitespace()
        if index < end && bytes[index] == ASCII.closeBrace {
            index += 1
            depth -= 1
            return out
        }
        out.reserveCapacity(8)
        while true {
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.quote else {
                if bytes[index] == ASCII.closeBrace {
                    throw fail("trailing comma before '}'", at: index)
                }
                throw fail("unexpected \(describe(bytes[index])); expected a string key", at: index)
            }
            let key = try parseString(isKey: true)
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.colon else {
                throw fail("unexpected \(describe(bytes[index])); expected ':' after the key", at: index)
            }
            index += 1
            skipWhitespace()
            let start = index
            if let expanding, index < end, bytes[index] == ASCII.openBrace, key == expanding {
                let inner = try parseShallowObject(keeping: keeping)
                out.append(ShallowMember(key: key, scalar: nil, range: start..<index, members: inner))
            } else if index < end && (bytes[index] == ASCII.openBrace || bytes[index] == ASCII.openBracket) {
                try skipValue()
                out.append(ShallowMember(key: key, scalar: nil, range: start..<index))
            } else if let keeping, !keeping.contains(key) {
                try skipValue()
                out.append(ShallowMember(key: key, scalar: nil, range: start..<index))
            } else {
                let v = try parseValue()
                out.append(ShallowMember(key: key, scalar: v, range: start..<index))
            }
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            switch bytes[index] {
            case ASCII.comma:
                index += 1
                skipWhitespace()
            case ASCII.closeBrace:
                index += 1
                depth -= 1
                return out
            case let b:
                throw fail("unexpected \(describe(b)); expected ',' or '}' in the object opened at byte \(open)", at: index)
            }
        }
    }

    private mutating func skipObject() throws(JSONParseError) {
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
            try skipString(isKey: true)
            skipWhitespace()
            guard index < end else { throw fail("unterminated object opened at byte \(open)", at: index) }
            guard bytes[index] == ASCII.colon else {
                throw fail("unexpected \(describe(bytes[index])); expected ':' after the key", at: index)
            }
            index += 1
            skipWhitespace()
            try skipValue()
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

    private mutating func skipArray() throws(JSONParseError) {
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
            try skipValue()
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

/// The fields of an `event` frame read by ``JSONValue/readingCanonicalEvent(_:)``.
struct CanonicalEventFields {
    var eventId: Int64
    var eventType: String
    var payload: RawJSON
    var sourceDeviceId: String
    var targetDeviceId: String?
    var timestamp: String
}

extension JSONValue {
    /// Reads an `event` frame in exactly the shape the relay writes (compact, keys in canonical order):
    /// `{"eventId":<int>,"payload":{"eventType":"…","payload":{…}},"sourceDeviceId":"…","targetDeviceId":null|"…",`
    /// `"timestamp":"…","type":"event"}`, the envelope strings printable ASCII without escapes, the eventId a
    /// plain non-negative integer, and `$.payload.payload` an object validated and indexed as by
    /// ``parsingDeferringEventPayload(_:)`` (no tree built) with no `_` in any key. Anything else (other
    /// spacing or order, escapes, a `_` key, a syntax error, ...) gives nil: the caller then takes the general
    /// route, which stays the reference for results and errors.
    static func readingCanonicalEvent(_ text: String) -> CanonicalEventFields? {
        var text = text
        return text.withUTF8 { buffer -> CanonicalEventFields? in
            var parser = JSONByteParser(buffer)
            return parser.readCanonicalEvent()
        }
    }
}

extension JSONByteParser {
    /// Moves past `literal` when the input continues with it; false (index unchanged) otherwise.
    private mutating func consume(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard end - index >= n, let base = bytes.baseAddress else { return false }
        let a = UnsafeRawPointer(base + index)
        let b = UnsafeRawPointer(literal.utf8Start)
        var k = 0
        while n - k >= 8 {  // eight bytes at a time
            guard a.loadUnaligned(fromByteOffset: k, as: UInt64.self) == b.loadUnaligned(fromByteOffset: k, as: UInt64.self) else {
                return false
            }
            k += 8
        }
        while k < n {
            guard a.load(fromByteOffset: k, as: UInt8.self) == b.load(fromByteOffset: k, as: UInt8.self) else { return false }
            k += 1
        }
        index += n
        return true
    }

    /// A string of printable ASCII without escapes at `index`; nil for anything else.
    private mutating func plainString() -> String? {
        guard index < end, bytes[index] == ASCII.quote else { return nil }
        let start = index + 1
        var i = start
        while i < end {
            let b = bytes[i]
            if b == ASCII.quote {
                index = i + 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            }
            guard b >= 0x20 && b < 0x7F && b != ASCII.backslash else { return nil }
            i += 1
        }
        return nil
    }

    /// A non-negative integer of at most 18 digits without fraction or exponent at `index`; nil otherwise.
    private mutating func plainInteger() -> Int64? {
        var i = index
        var v: Int64 = 0
        while i < end && bytes[i] >= ASCII.zero && bytes[i] <= ASCII.nine {
            guard i - index < 18 else { return nil }
            v = v * 10 + Int64(bytes[i] - ASCII.zero)
            i += 1
        }
        let n = i - index
        guard n > 0, n == 1 || bytes[index] != ASCII.zero else { return nil }
        if i < end && (bytes[i] == ASCII.dot || bytes[i] == ASCII.lowerE || bytes[i] == ASCII.upperE) { return nil }
        index = i
        return v
    }

    /// See ``JSONValue/readingCanonicalEvent(_:)``.
    mutating func readCanonicalEvent() -> CanonicalEventFields? {
        guard consume(#"{"eventId":"#), let eventId = plainInteger(),
              consume(#","payload":{"eventType":"#), let eventType = plainString(),
              consume(#","payload":"#), index < end, bytes[index] == ASCII.openBrace else { return nil }
        let start = index
        depth = 2  // the object's depth in the whole message, as in the general parse
        guard let members = try? parseShallowObject(), !underscoreInKey else { return nil }
        let range = start..<index
        guard consume(#"},"sourceDeviceId":"#), let source = plainString(), consume(#","targetDeviceId":"#) else {
            return nil
        }
        var target: String?
        if !consume("null") {
            guard let t = plainString() else { return nil }
            target = t
        }
        guard consume(#","timestamp":"#), let timestamp = plainString(), consume(#","type":"event"}"#), index == end else {
            return nil
        }
        let raw = Array(UnsafeBufferPointer(rebasing: bytes[range]))
        let index = members.map { m in
            RawMember(key: m.key, built: m.scalar, source: raw,
                      range: (m.range.lowerBound - range.lowerBound)..<(m.range.upperBound - range.lowerBound))
        }
        return CanonicalEventFields(eventId: eventId, eventType: eventType, payload: RawJSON(validated: raw, index: index),
                                    sourceDeviceId: source, targetDeviceId: target, timestamp: timestamp)
    }
}

/// The fields of an `rpc.response` frame read by ``JSONValue/readingCanonicalRpcResponse(_:)``.
struct CanonicalRpcResponseFields {
    var id: String
    var isFinal: Bool
    var result: JSONValue
    var traceparent: String
}

extension JSONValue {
    /// Reads an `rpc.response` frame in exactly the shape the relay writes for a result:
    /// `{"payload":{"id":"…","isFinal":true|false,"result":<any value>,"traceparent":"…"},"type":"rpc.response"}`
    /// (compact, keys in canonical order, `id` and `traceparent` printable ASCII without escapes), the result
    /// parsed with no `_` in any key. Anything else gives nil: the caller takes the general route, which stays
    /// the reference for results and errors.
    static func readingCanonicalRpcResponse(_ text: String) -> CanonicalRpcResponseFields? {
        var text = text
        return text.withUTF8 { buffer -> CanonicalRpcResponseFields? in
            var parser = JSONByteParser(buffer)
            return parser.readCanonicalRpcResponse()
        }
    }
}

extension JSONByteParser {
    /// See ``JSONValue/readingCanonicalRpcResponse(_:)``.
    mutating func readCanonicalRpcResponse() -> CanonicalRpcResponseFields? {
        guard consume(#"{"payload":{"id":"#), let id = plainString(), consume(#","isFinal":"#) else { return nil }
        let isFinal: Bool
        if consume("true") {
            isFinal = true
        } else if consume("false") {
            isFinal = false
        } else {
            return nil
        }
        guard consume(#","result":"#) else { return nil }
        depth = 2  // the value's depth in the whole message, as in the general parse
        guard let result = try? parseValue(), !underscoreInKey,
              consume(#","traceparent":"#), let traceparent = plainString(),
              consume(#"},"type":"rpc.response"}"#), index == end else { return nil }
        return CanonicalRpcResponseFields(id: id, isFinal: isFinal, result: result, traceparent: traceparent)
    }
}
