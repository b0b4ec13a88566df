/// Strict UTF-8 checks shared by the JSON parser and the PTC1 decoder.
enum UTF8Validation {
    /// The outcome of checking one multi-byte sequence.
    enum Sequence {
        /// A well-formed sequence of `length` bytes.
        case valid(length: Int)
        /// Ill-formed: `offset` is the first bad byte.
        case invalid(offset: Int, reason: String)
    }

    /// Checks the sequence whose lead byte (>= 0x80) is at `start`, reading no further than `end`.
    /// Strict: no overlong forms, no encoded surrogates, nothing above U+10FFFF, no truncation.
    @inline(__always)
    static func sequence(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int, end: Int) -> Sequence {
        let lead = bytes[start]
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; upper = 0x9F
        case 0xF0: length = 4; lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; upper = 0x8F
        default:
            return .invalid(offset: start, reason: "byte 0x\(hexString([lead])) cannot start a character")
        }
        guard start + length <= end else {
            return .invalid(offset: start, reason: "truncated \(length)-byte sequence")
        }
        let second = bytes[start + 1]
        guard second >= lower && second <= upper else {
            return .invalid(offset: start + 1, reason: "bad continuation byte 0x\(hexString([second])) (overlong, surrogate or out of range)")
        }
        if length > 2 {
            for k in 2..<length {
                let c = bytes[start + k]
                guard c & 0xC0 == 0x80 else {
                    return .invalid(offset: start + k, reason: "bad continuation byte 0x\(hexString([c]))")
                }
            }
        }
        return .valid(length: length)
    }

    /// The first problem in `bytes[range]`, or nil when it is all well-formed UTF-8.
    static func firstError(_ bytes: UnsafeBufferPointer<UInt8>, in range: Range<Int>) -> (offset: Int, reason: String)? {
        var i = range.lowerBound
        while i < range.upperBound {
            if bytes[i] < 0x80 {
                i += 1
                continue
            }
            switch sequence(bytes, at: i, end: range.upperBound) {
            case .valid(let length): i += length
            case .invalid(let offset, let reason): return (offset, reason)
            }
        }
        return nil
    }
}
