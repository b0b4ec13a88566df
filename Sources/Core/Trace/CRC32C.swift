/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF), the
/// checksum of every RelayTrace metadata frame and of each chunk's compressed bytes. Slicing-by-8.
enum CRC32C {
    /// 8 tables of 256 entries, table k = CRC of a byte followed by k zero bytes.
    static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[i] = c
        }
        for k in 1..<8 {
            for i in 0..<256 {
                let prev = t[(k - 1) * 256 + i]
                t[k * 256 + i] = (prev >> 8) ^ t[Int(prev & 0xFF)]
            }
        }
        return t
    }()

    /// The CRC-32C of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        tables.withUnsafeBufferPointer { t in
            var crc: UInt32 = 0xFFFF_FFFF
            var i = 0
            let n = bytes.count
            guard let base = bytes.baseAddress else { return 0 }
            while n - i >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let lo = UInt32(truncatingIfNeeded: word) ^ crc
                let hi = UInt32(truncatingIfNeeded: word >> 32)
                crc = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                crc = (crc >> 8) ^ t[Int((crc ^ UInt32(base.load(fromByteOffset: i, as: UInt8.self))) & 0xFF)]
                i += 1
            }
            return crc ^ 0xFFFF_FFFF
        }
    }

    /// The CRC-32C of `bytes`.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// The CRC-32C of `bytes[range]`.
    static func checksum(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }
}

// Little-endian appends and bounds-checked loads.
extension Array where Element == UInt8 {
    @inline(__always) mutating func appendLE(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v))
        append(UInt8(truncatingIfNeeded: v >> 8))
    }

    @inline(__always) mutating func appendLE(_ v: UInt32) {
        Swift.withUnsafeBytes(of: v.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always) mutating func appendLE(_ v: UInt64) {
        Swift.withUnsafeBytes(of: v.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always) mutating func appendLE(_ v: Int64) { appendLE(UInt64(bitPattern: v)) }

    /// Writes `v` little-endian at `offset` (which the caller has allocated).
    mutating func storeLE(_ v: UInt32, at offset: Int) {
        withUnsafeMutableBytes { $0.storeBytes(of: v.littleEndian, toByteOffset: offset, as: UInt32.self) }
    }

    /// The `UInt16` at `offset`, or nil when it does not fit.
    func u16(at offset: Int) -> UInt16? {
        guard offset >= 0, offset <= count - 2 else { return nil }
        return UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    /// The `UInt32` at `offset`, or nil when it does not fit.
    func u32(at offset: Int) -> UInt32? {
        guard offset >= 0, offset <= count - 4 else { return nil }
        return withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    /// The `UInt64` at `offset`, or nil when it does not fit.
    func u64(at offset: Int) -> UInt64? {
        guard offset >= 0, offset <= count - 8 else { return nil }
        return withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    /// The `Int64` at `offset`, or nil when it does not fit.
    func i64(at offset: Int) -> Int64? { u64(at: offset).map { Int64(bitPattern: $0) } }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body with typed throws.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(TraceError) -> R) throws(TraceError) -> R {
        let r = withUnsafeBytes { b -> Result<R, TraceError> in
            do throws(TraceError) { return .success(try body(b)) } catch { return .failure(error) }
        }
        return try r.get()
    }
}
