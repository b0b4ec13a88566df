#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Substring search over bytes, eight positions at a time: a position is a candidate when both the
/// needle's first and last bytes are in place (a word compare for each), and candidates are confirmed
/// with `memcmp`. For the summary rule, the inspection filters and `--grep`, which look for a few bytes
/// in every record's payload.
public enum ByteSearch {
    /// The offset of the first occurrence of `needle` in `haystack` (0 for an empty needle), or nil.
    public static func firstIndex(of needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Int? {
        let n = needle.count
        let h = haystack.count
        if n == 0 { return 0 }
        guard n <= h, let hay = haystack.baseAddress, let pin = needle.baseAddress else { return nil }
        if n == 1 {
            guard let p = memchr(hay, Int32(needle[0]), h) else { return nil }
            return hay.distance(to: UnsafeRawPointer(p))
        }
        // The two needle positions tested eight at a time: the first and last bytes that are not among
        // the most frequent bytes of JSON and text (fewer false candidates than quotes or spaces).
        var a = 0
        var b = n - 1
        if let f = (0..<n).first(where: { !common(needle[$0]) }), let l = (0..<n).last(where: { !common(needle[$0]) }), f != l {
            a = f
            b = l
        }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let ba = UInt64(needle[a]) &* ones
        let bb = UInt64(needle[b]) &* ones
        let limit = h - n  // the last possible start
        var i = 0
        while i + 7 <= limit {
            let x = UInt64(littleEndian: hay.loadUnaligned(fromByteOffset: i + a, as: UInt64.self)) ^ ba
            let y = UInt64(littleEndian: hay.loadUnaligned(fromByteOffset: i + b, as: UInt64.self)) ^ bb
            // Starts whose bytes at a and b match come out zero in x and y; the masks mark them (and, rarely,
            // a byte above a marked one: every candidate is confirmed).
            var m = ((x &- ones) & ~x & highs) & ((y &- ones) & ~y & highs)
            while m != 0 {
                let k = i + m.trailingZeroBitCount / 8
                if memcmp(hay + k, pin, n) == 0 { return k }
                m &= m &- 1
            }
            i += 8
        }
        while i <= limit {
            if hay.load(fromByteOffset: i + a, as: UInt8.self) == needle[a], hay.load(fromByteOffset: i + b, as: UInt8.self) == needle[b],
               memcmp(hay + i, pin, n) == 0 {
                return i
            }
            i += 1
        }
        return nil
    }

    /// Bytes frequent in JSON and English text.
    @inline(__always)
    private static func common(_ c: UInt8) -> Bool {
        switch c {
        case 0x22, 0x3A, 0x2C, 0x20, 0x7B, 0x7D, 0x65, 0x74, 0x61, 0x6F, 0x69, 0x6E, 0x73, 0x72: true  // " : , space { } e t a o i n s r
        default: false
        }
    }

    /// Whether every byte of `bytes` is ASCII and none is `excluded`, eight at a time.
    public static func isASCII(_ bytes: UnsafeRawBufferPointer, excluding excluded: UInt8) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let n = bytes.count
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let bx = UInt64(excluded) &* ones
        var i = 0
        while i + 8 <= n {
            let w = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let x = w ^ bx
            if (w | ((x &- ones) & ~x)) & highs != 0 { return false }
            i += 8
        }
        while i < n {
            let c = base.load(fromByteOffset: i, as: UInt8.self)
            if c >= 0x80 || c == excluded { return false }
            i += 1
        }
        return true
    }

    /// Whether `haystack` contains `needle`.
    @inline(__always)
    public static func contains(_ needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Bool {
        firstIndex(of: needle, in: haystack) != nil
    }

    /// Whether `haystack` contains the bytes of `needle`.
    public static func contains(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Bool {
        needle.withUnsafeBytes { firstIndex(of: $0, in: haystack) != nil }
    }

    /// Whether every byte of `bytes` is ASCII (below 0x80), eight at a time.
    public static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let n = bytes.count
        var i = 0
        var acc: UInt64 = 0
        while i + 8 <= n {
            acc |= base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < n {
            acc |= UInt64(base.load(fromByteOffset: i, as: UInt8.self))
            i += 1
        }
        return acc & 0x8080_8080_8080_8080 == 0
    }
}
