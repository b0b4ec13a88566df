/// Hexadecimal, written and read in one place: trace IDs, redaction keys, binary frames in action records,
/// incarnation tokens, percent escapes and traceparents all go through these.

/// Lower-case hexadecimal of `bytes`.
public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits: StaticString = "0123456789abcdef"
    var out = [UInt8]()
    out.reserveCapacity(2 * bytes.underestimatedCount)
    digits.withUTF8Buffer { d in
        for b in bytes {
            out.append(d[Int(b >> 4)])
            out.append(d[Int(b & 0x0F)])
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// The value of the hex digit `c` (`0`-`9`, `a`-`f`, `A`-`F`); nil for any other byte.
@inlinable
public func hexDigitValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: c - 0x30
    case 0x61...0x66: c - 0x61 + 10
    case 0x41...0x46: c - 0x41 + 10
    default: nil
    }
}

/// The bytes that `hex` spells, two digits (either case) a byte, first digit high; nil for an odd number of
/// digits or a character that is not a hex digit. The inverse of ``hexString(_:)``.
public func hexDecoded(_ hex: some StringProtocol) -> [UInt8]? {
    let u = Array(hex.utf8)
    guard u.count % 2 == 0 else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(u.count / 2)
    var i = 0
    while i < u.count {
        guard let high = hexDigitValue(u[i]), let low = hexDigitValue(u[i + 1]) else { return nil }
        out.append(high << 4 | low)
        i += 2
    }
    return out
}
