extension JSONValue {
    /// The compact canonical UTF-8 encoding of this value.
    ///
    /// - Object keys are sorted by their UTF-8 bytes, so equal values give identical bytes.
    /// - Strings are escaped minimally: `"` and `\` with a backslash; `\n \r \t \b \f` by name; other
    ///   control characters (U+0000 to U+001F) as `\u00XX`; everything else (including `/`, U+007F and
    ///   non-ASCII) is written as raw UTF-8.
    /// - Integers are plain decimal. Finite doubles use Swift's shortest round-trip form
    ///   (`Double.description`): an integral double keeps its `.0` (`1.0`, `-0.0`) or an exponent
    ///   (`1e+16`), so it parses back as `.double`, never as `.int`. NaN and infinities become `null`.
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.out
    }

    /// The compact canonical JSON text; see `serialized()`.
    public var jsonText: String {
        String(decoding: serialized(), as: UTF8.self)
    }

    /// Multi-line JSON text with keys sorted as in `serialized()`, `indent` spaces per level, and
    /// `": "` between a key and its value. Empty arrays and objects stay on one line (`[]`, `{}`).
    public func prettyText(indent: Int = 2) -> String {
        var writer = JSONWriter()
        writer.writePretty(self, indent: max(0, indent), level: 0)
        return String(decoding: writer.out, as: UTF8.self)
    }
}

/// Returns whether `a` sorts before `b` by UTF-8 bytes (the canonical key order).
@inline(__always)
func utf8Precedes(_ a: String, _ b: String) -> Bool {
    let fast = a.utf8.withContiguousStorageIfAvailable { pa in
        b.utf8.withContiguousStorageIfAvailable { pb in
            pa.lexicographicallyPrecedes(pb)
        }
    }
    if let fast, let result = fast { return result }
    return a.utf8.lexicographicallyPrecedes(b.utf8)
}

/// Appends JSON text to a byte buffer.
struct JSONWriter {
    var out: [UInt8] = []

    init() { out.reserveCapacity(256) }

    /// The members of an object in canonical (UTF-8 byte) order.
    @inline(__always)
    static func sortedMembers(_ o: [String: JSONValue]) -> [(key: String, value: JSONValue)] {
        o.sorted { utf8Precedes($0.key, $1.key) }
    }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .null: appendASCII("null")
        case .bool(let b): appendASCII(b ? "true" : "false")
        case .int(let i): writeInt(i)
        case .double(let d): writeDouble(d)
        case .string(let s): writeString(s)
        case .array(let a):
            out.append(ASCII.openBracket)
            var first = true
            for e in a {
                if !first { out.append(ASCII.comma) }
                first = false
                write(e)
            }
            out.append(ASCII.closeBracket)
        case .object(let o):
            out.append(ASCII.openBrace)
            var first = true
            if o.count == 1, let only = o.first {
                writeString(only.key)
                out.append(ASCII.colon)
                write(only.value)
            } else {
                for (k, v) in JSONWriter.sortedMembers(o) {
                    if !first { out.append(ASCII.comma) }
                    first = false
                    writeString(k)
                    out.append(ASCII.colon)
                    write(v)
                }
            }
            out.append(ASCII.closeBrace)
        }
    }

    mutating func writePretty(_ value: JSONValue, indent: Int, level: Int) {
        switch value {
        case .array(let a) where !a.isEmpty:
            out.append(ASCII.openBracket)
            for (n, e) in a.enumerated() {
                if n > 0 { out.append(ASCII.comma) }
                newline(indent: indent, level: level + 1)
                writePretty(e, indent: indent, level: level + 1)
            }
            newline(indent: indent, level: level)
            out.append(ASCII.closeBracket)
        case .object(let o) where !o.isEmpty:
            out.append(ASCII.openBrace)
            for (n, member) in JSONWriter.sortedMembers(o).enumerated() {
                if n > 0 { out.append(ASCII.comma) }
                newline(indent: indent, level: level + 1)
                writeString(member.key)
                out.append(ASCII.colon)
                out.append(ASCII.space)
                writePretty(member.value, indent: indent, level: level + 1)
            }
            newline(indent: indent, level: level)
            out.append(ASCII.closeBrace)
        default:
            write(value)
        }
    }

    private mutating func newline(indent: Int, level: Int) {
        out.append(ASCII.newline)
        out.append(contentsOf: repeatElement(ASCII.space, count: indent * level))
    }

    @inline(__always)
    private mutating func appendASCII(_ s: StaticString) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    mutating func writeInt(_ i: Int64) {
        if i == 0 {
            out.append(ASCII.zero)
            return
        }
        var m = i.magnitude
        // 20 digits hold UInt64.max; write them backwards into a stack tuple.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = withUnsafeMutableBytes(of: &digits) { raw -> Int in
            var n = 0
            while m > 0 {
                raw[23 - n] = UInt8(truncatingIfNeeded: m % 10) &+ ASCII.zero
                m /= 10
                n += 1
            }
            return n
        }
        if i < 0 { out.append(ASCII.minus) }
        withUnsafeBytes(of: &digits) { raw in
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[(24 - count)...]))
        }
    }

    mutating func writeDouble(_ d: Double) {
        guard d.isFinite else {
            appendASCII("null")
            return
        }
        out.append(contentsOf: d.description.utf8)
    }

    mutating func writeString(_ s: String) {
        out.append(ASCII.quote)
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { writeEscaped($0) }
        if done == nil {
            var copy = s
            copy.withUTF8 { writeEscaped($0) }
        }
        out.append(ASCII.quote)
    }

    private mutating func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            if b >= 0x20 && b != ASCII.quote && b != ASCII.backslash {
                i += 1
                continue
            }
            if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
            out.append(ASCII.backslash)
            switch b {
            case ASCII.quote: out.append(ASCII.quote)
            case ASCII.backslash: out.append(ASCII.backslash)
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            default:
                // b < 0x20 here: \u00XX with lower-case hex.
                let low = b & 0x0F
                out.append(UInt8(ascii: "u"))
                out.append(ASCII.zero)
                out.append(ASCII.zero)
                out.append(ASCII.zero + (b >> 4))
                out.append(low < 10 ? ASCII.zero + low : UInt8(ascii: "a") + low - 10)
            }
            i += 1
            runStart = i
        }
        if runStart < n { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<n])) }
    }
}

/// Writes canonical JSON bytes piece by piece, for hot paths that know their object's keys in advance and
/// must produce exactly what `JSONValue.serialized()` would, without building a `JSONValue`.
///
/// The caller is responsible for the structure: keys of one object in UTF-8 byte order, commas and
/// colons in place (`key(_:first:)` writes them). Strings are escaped exactly as `serialized()` escapes them.
public struct CanonicalJSONWriter: Sendable {
    private var writer = JSONWriter()

    /// An empty writer.
    public init() {}

    /// The bytes written so far.
    public var bytes: [UInt8] { writer.out }

    /// Appends ASCII text verbatim (punctuation, a known key, a literal).
    @inline(__always)
    public mutating func raw(_ text: StaticString) {
        // One-byte punctuation (`{`, `}`, `,`) as a single append: the generic `append(contentsOf:)` costs
        // more per call (count estimate, capacity reservation, leftover-iterator check) than such a byte.
        let n = text.utf8CodeUnitCount
        if n == 1 {
            writer.out.append(text.utf8Start.pointee)
        } else {
            writer.out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: n))
        }
    }

    /// Appends `,"name":` (or `"name":` when `first`); `name` must need no escaping.
    @inline(__always)
    public mutating func key(_ name: StaticString, first: Bool = false) {
        if !first { writer.out.append(ASCII.comma) }
        writer.out.append(ASCII.quote)
        raw(name)
        writer.out.append(ASCII.quote)
        writer.out.append(ASCII.colon)
    }

    /// Appends a quoted, escaped string.
    public mutating func string(_ s: String) { writer.writeString(s) }

    /// Appends a decimal integer.
    public mutating func int(_ i: Int64) { writer.writeInt(i) }

    /// Appends a whole value in canonical form.
    public mutating func value(_ v: JSONValue) { writer.write(v) }
}
