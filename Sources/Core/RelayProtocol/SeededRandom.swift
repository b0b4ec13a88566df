/// A deterministic random generator: xoshiro256** seeded through SplitMix64.
///
/// Machines take their randomness (request IDs, trace IDs, app-session IDs, jitter) from a
/// `SeededRandom` built from the seed recorded in the trace header, so the same seed and the same
/// inputs produce byte-identical actions. It is a value type: copying it forks the stream, which is what
/// checkpoints for backward stepping need.
public struct SeededRandom: RandomNumberGenerator, Sendable, Hashable, Codable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    /// The seed this generator started from.
    public let seed: UInt64

    /// Creates a generator whose whole stream is determined by `seed`.
    public init(seed: UInt64) {
        self.seed = seed
        var sm = seed
        func splitmix(_ x: inout UInt64) -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitmix(&sm)
        s1 = splitmix(&sm)
        s2 = splitmix(&sm)
        s3 = splitmix(&sm)
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count {
            var word = next()
            for _ in 0..<min(8, count - out.count) {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return out
    }

    /// `count` random bytes as lower-case hexadecimal (2 × `count` characters).
    public mutating func hex(bytes count: Int) -> String {
        hexString(bytes(count))
    }

    /// A random RFC 4122 version-4 UUID in the upper-case form Apple platforms print
    /// (e.g. `0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44`).
    public mutating func uuidString() -> String {
        var b = bytes(16)
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        // Upper-case hex in 8-4-4-4-12 groups, written as bytes.
        let digits: StaticString = "0123456789ABCDEF"
        return String(unsafeUninitializedCapacity: 36) { out in
            var n = 0
            for (i, byte) in b.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[n] = UInt8(ascii: "-")
                    n += 1
                }
                out[n] = digits.utf8Start[Int(byte >> 4)]
                out[n + 1] = digits.utf8Start[Int(byte & 0x0F)]
                n += 2
            }
            return n
        }
    }

    /// A random alphanumeric string (`[A-Za-z0-9]`) of `length` characters.
    public mutating func alphanumeric(_ length: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var out = [UInt8]()
        out.reserveCapacity(length)
        for _ in 0..<length { out.append(alphabet[Int(next(upperBound: UInt64(alphabet.count)))]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// A uniformly distributed `Double` in `[0, 1)`.
    public mutating func unitDouble() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// `value` scaled by a random factor in `[1 - fraction, 1 + fraction]`.
    public mutating func jittered(_ value: Duration, fraction: Double) -> Duration {
        let factor = 1 + fraction * (2 * unitDouble() - 1)
        return .nanoseconds(Int64((Double(value.nanoseconds) * factor).rounded()))
    }
}
