/// Where a client gets the masking key of each frame it sends (RFC 6455 §5.3: "a fresh masking key").
///
/// The codec never reads a random source itself: the driver injects one. The live driver uses
/// ``SystemRandomMaskingKeySource``; tests and replays use a seeded source so output bytes are exact.
public protocol MaskingKeySource: Sendable {
    /// The key for the next frame, most significant byte first on the wire.
    mutating func nextMaskingKey() -> UInt32
}

/// Masking keys from the system's cryptographically secure generator (`SystemRandomNumberGenerator`),
/// as RFC 6455 §10.3 asks of a client talking to a real network.
public struct SystemRandomMaskingKeySource: MaskingKeySource {
    /// A source backed by the system generator.
    public init() {}

    /// A fresh unpredictable key.
    public mutating func nextMaskingKey() -> UInt32 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }
}

/// Always the same key: for golden-byte tests (the RFC 6455 §5.7 examples use `0x37fa213d`).
/// Never use it on a real network.
public struct FixedMaskingKeySource: MaskingKeySource {
    /// The key returned for every frame.
    public var key: UInt32

    /// A source that always returns `key`.
    public init(_ key: UInt32) { self.key = key }

    /// Returns ``key``.
    public mutating func nextMaskingKey() -> UInt32 { key }
}

/// XOR masking (RFC 6455 §5.3), eight bytes at a time. Masking and unmasking are the same operation.
public enum WebSocketMasking {
    /// XORs `bytes` in place with `key`, as if the first byte of `bytes` were payload byte `phase`
    /// (0 for a whole payload).
    public static func apply(_ key: WebSocketMaskingKey, to bytes: UnsafeMutableRawBufferPointer, phase: Int = 0) {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return }
        var keyBytes: (UInt8, UInt8, UInt8, UInt8) = (key.b0, key.b1, key.b2, key.b3)
        // Rotate the key so that index 0 of `bytes` uses key byte `phase % 4`.
        switch phase & 3 {
        case 1: keyBytes = (key.b1, key.b2, key.b3, key.b0)
        case 2: keyBytes = (key.b2, key.b3, key.b0, key.b1)
        case 3: keyBytes = (key.b3, key.b0, key.b1, key.b2)
        default: break
        }
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { p in
            p[0] = keyBytes.0; p[1] = keyBytes.1; p[2] = keyBytes.2; p[3] = keyBytes.3
            p[4] = keyBytes.0; p[5] = keyBytes.1; p[6] = keyBytes.2; p[7] = keyBytes.3
        }
        var i = 0
        while i + 32 <= count {
            for j in stride(from: i, to: i + 32, by: 8) {
                let word = base.loadUnaligned(fromByteOffset: j, as: UInt64.self)
                base.storeBytes(of: word ^ pattern, toByteOffset: j, as: UInt64.self)
            }
            i += 32
        }
        while i + 8 <= count {
            let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            base.storeBytes(of: word ^ pattern, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        // Tail: fewer than 8 bytes; i is a multiple of 8 so the key phase restarts at 0.
        withUnsafeBytes(of: pattern) { p in
            var k = 0
            while i < count {
                bytes[i] ^= p[k]
                i += 1
                k += 1
            }
        }
    }

    /// XORs `bytes[range]` in place with `key` (payload byte 0 at `range.lowerBound`).
    public static func apply(_ key: WebSocketMaskingKey, to bytes: inout [UInt8], range: Range<Int>) {
        guard !range.isEmpty, range.lowerBound >= 0, range.upperBound <= bytes.count else { return }
        bytes.withUnsafeMutableBytes { raw in
            apply(key, to: UnsafeMutableRawBufferPointer(rebasing: raw[range]))
        }
    }
}
