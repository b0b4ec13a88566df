/// An incremental UTF-8 validator (Unicode 15, table 3-7 "well-formed UTF-8 byte sequences"): rejects
/// overlong forms, surrogates (U+D800-DFFF) and code points above U+10FFFF, like Swift's own `String`
/// validation. It keeps its state across chunks, so a text message split into fragments mid-character is
/// checked as it arrives and fails at the first bad byte.
struct UTF8Validator: Sendable {
    /// Continuation bytes still expected for the current sequence.
    private var needed = 0
    /// Allowed range of the next continuation byte (narrower than 80-BF right after E0, ED, F0, F4).
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// True when the bytes seen so far end on a character boundary.
    var isAtBoundary: Bool { needed == 0 }

    /// Forgets any partial sequence.
    mutating func reset() {
        needed = 0
        lower = 0x80
        upper = 0xBF
    }

    /// Validates the next chunk. Returns the index in `bytes` of the first byte that cannot be part of
    /// well-formed UTF-8, or nil when the chunk is fine so far (possibly ending mid-sequence).
    mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return nil }
        var i = 0
        while i < count {
            if needed == 0 {
                // ASCII fast path, eight bytes at a time.
                while i + 8 <= count {
                    let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    if word & 0x8080_8080_8080_8080 != 0 { break }
                    i += 8
                }
                if i >= count { break }
                let byte = bytes[i]
                switch byte {
                case 0x00...0x7F: break
                case 0xC2...0xDF: needed = 1
                case 0xE0: needed = 2; lower = 0xA0
                case 0xE1...0xEC, 0xEE...0xEF: needed = 2
                case 0xED: needed = 2; upper = 0x9F
                case 0xF0: needed = 3; lower = 0x90
                case 0xF1...0xF3: needed = 3
                case 0xF4: needed = 3; upper = 0x8F
                default: return i
                }
            } else {
                let byte = bytes[i]
                if byte < lower || byte > upper { return i }
                lower = 0x80
                upper = 0xBF
                needed -= 1
            }
            i += 1
        }
        return nil
    }

    /// Validates a whole byte string: nil when it is complete, well-formed UTF-8, otherwise the index of
    /// the first bad byte (`bytes.count` when it ends in the middle of a character).
    static func firstInvalidIndex(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var validator = UTF8Validator()
        if let bad = validator.validate(bytes) { return bad }
        return validator.isAtBoundary ? nil : bytes.count
    }
}
