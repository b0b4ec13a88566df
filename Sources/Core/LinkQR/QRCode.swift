import CQRencode

/// A QR symbol (Debian's libqrencode makes the modules): what `relaytrace relay` shows for a link code,
/// in the terminal (``terminalText(quietZone:)``) and as a PNG (``png(scale:quietZone:)``).
public struct QRCode: Sendable, Hashable {
    /// The symbol's width in modules (21 for version 1, +4 per version).
    public let width: Int
    /// The QR version (1...40).
    public let version: Int
    /// `width` × `width` modules, row by row; true is dark.
    public let modules: [Bool]

    /// Encodes `text` (UTF-8, byte mode) at error-correction level M in the smallest version that fits.
    public init(encoding text: String) throws(QRCodeError) {
        guard !text.isEmpty else { throw QRCodeError(message: "nothing to encode") }
        guard let symbol = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_M) else {
            throw QRCodeError(message: "libqrencode could not encode \(text.utf8.count) bytes (too long for a QR code?)")
        }
        defer { QRcode_free(symbol) }
        let w = Int(symbol.pointee.width)
        width = w
        version = Int(symbol.pointee.version)
        var m = [Bool](repeating: false, count: w * w)
        for i in 0..<(w * w) { m[i] = symbol.pointee.data[i] & 1 == 1 }
        modules = m
    }

    /// Creates a symbol from modules (for tests and decoders).
    public init(width: Int, version: Int, modules: [Bool]) {
        self.width = width
        self.version = version
        self.modules = modules
    }

    /// Whether the module at (`x`, `y`) is dark; false outside the symbol (the quiet zone).
    public func isDark(_ x: Int, _ y: Int) -> Bool {
        x >= 0 && y >= 0 && x < width && y < width && modules[y * width + x]
    }

    /// The symbol as lines of Unicode half blocks, two module rows per line, with `quietZone` light
    /// modules around it. Drawn for a dark terminal, as `qrencode -t UTF8` does: light modules are the
    /// foreground colour (`█` both halves, `▀` top, `▄` bottom), dark ones are spaces.
    public func terminalText(quietZone: Int = 2) -> String {
        let q = max(0, quietZone)
        var lines: [String] = []
        var y = -q
        while y < width + q {
            var line = ""
            for x in -q..<(width + q) {
                let top = !isDark(x, y), bottom = y + 1 < width + q ? !isDark(x, y + 1) : false
                line.append(top ? (bottom ? "█" : "▀") : (bottom ? "▄" : " "))
            }
            lines.append(line)
            y += 2
        }
        return lines.joined(separator: "\n")
    }

    /// The symbol as a PNG: 1-bit grayscale, `scale` pixels per module, `quietZone` modules of white
    /// around it (4, as ISO/IEC 18004 asks).
    public func png(scale: Int = 8, quietZone: Int = 4) -> [UInt8] {
        let s = max(1, scale), q = max(0, quietZone)
        let side = (width + 2 * q) * s
        let rowBytes = (side + 7) / 8
        var raw = [UInt8]()
        raw.reserveCapacity(side * (rowBytes + 1))
        for py in 0..<side {
            raw.append(0)  // filter: none
            var row = [UInt8](repeating: 0, count: rowBytes)
            for px in 0..<side where !isDark(px / s - q, py / s - q) {
                row[px / 8] |= 0x80 >> UInt8(px % 8)  // 1 is white
            }
            raw += row
        }
        var ihdr = PNG.bigEndian(UInt32(side)) + PNG.bigEndian(UInt32(side))
        ihdr += [1, 0, 0, 0, 0]  // bit depth 1, grayscale, deflate, adaptive filtering, no interlace
        return PNG.signature + PNG.chunk("IHDR", ihdr) + PNG.chunk("IDAT", PNG.zlibStored(raw)) + PNG.chunk("IEND", [])
    }
}

/// Why a QR code could not be made.
public struct QRCodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// `QR code: <message>`.
    public var description: String { "QR code: \(message)" }
}

/// The few pieces of PNG (RFC 2083) and zlib (RFC 1950/1951) a QR image needs, written here: chunks with
/// their CRC-32, and a zlib stream of stored (uncompressed) deflate blocks with its Adler-32. A QR image
/// is a few kilobytes, so compression would buy nothing worth a dependency.
public enum PNG {
    /// The 8-byte PNG signature.
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A chunk: length, type, data, CRC-32 of type and data.
    public static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    /// `data` as a zlib stream of stored deflate blocks (at most 65,535 bytes each).
    public static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]  // deflate, 32 KiB window, no dictionary, fastest (FCHECK makes it % 31 == 0)
        var i = 0
        repeat {
            let n = min(65_535, data.count - i)
            let final: UInt8 = i + n == data.count ? 1 : 0
            out.append(final)  // BFINAL, BTYPE 00 (stored)
            out += [UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            out += data[i..<(i + n)]
            i += n
        } while i < data.count
        return out + bigEndian(adler32(data))
    }

    /// CRC-32 (ISO 3309 / ITU-T V.42, the one PNG and zlib use), bitwise.
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return c ^ 0xFFFF_FFFF
    }

    /// Adler-32 (RFC 1950).
    public static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for x in bytes {
            a = (a + UInt32(x)) % 65_521
            b = (b + a) % 65_521
        }
        return b << 16 | a
    }

    /// `v` as four big-endian bytes.
    public static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
}
