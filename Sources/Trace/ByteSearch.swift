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
        let first = needle[0]
        if n == 1 {
            guard let p = memchr(hay, Int32(first), h) else { return nil }
            return hay.distance(to: UnsafeRawPointer(p))
        }
        let last = needle[n - 1]
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let bf = UInt64(first) &* ones
        let bl = UInt64(last) &* ones
        let limit = h - n  // the last possible start
        var i = 0
        while i + 7 <= limit {
            let a = UInt64(littleEndian: hay.loadUnaligned(fromByteOffset: i, as: UInt64.self)) ^ bf
            let b = UInt64(littleEndian: hay.loadUnaligned(fromByteOffset: i + n - 1, as: UInt64.self)) ^ bl
            // Bytes equal to the needle's first (a) and last (b) byte come out zero; the masks mark them
            // (and, rarely, a byte above a marked one: every candidate is confirmed).
            var m = ((a &- ones) & ~a & highs) & ((b &- ones) & ~b & highs)
            while m != 0 {
                let k = i + m.trailingZeroBitCount / 8
                if memcmp(hay + k, pin, n) == 0 { return k }
                m &= m &- 1
            }
            i += 8
        }
        while i <= limit {
            if hay.load(fromByteOffset: i, as: UInt8.self) == first, hay.load(fromByteOffset: i + n - 1, as: UInt8.self) == last,
               memcmp(hay + i, pin, n) == 0 {
                return i
            }
            i += 1
        }
        return nil
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
