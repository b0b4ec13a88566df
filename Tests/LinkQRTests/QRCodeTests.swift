import LinkQR
import Testing

/// Reads back a PNG made of stored deflate blocks (what `QRCode.png` writes): the chunks' CRCs, the
/// IHDR, the zlib header and Adler-32, and the pixels as rows of white/black.
private func readStoredPNG(_ png: [UInt8]) throws -> (side: Int, white: [[Bool]]) {
    try #require(Array(png.prefix(8)) == PNG.signature)
    var i = 8
    var ihdr: [UInt8] = [], idat: [UInt8] = []
    func u32(_ at: Int) -> Int { Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3]) }
    while i < png.count {
        let length = u32(i)
        let typed = Array(png[(i + 4)..<(i + 8 + length)])
        #expect(UInt32(u32(i + 8 + length)) == PNG.crc32(typed), "chunk CRC")
        let type = String(decoding: typed.prefix(4), as: UTF8.self)
        let data = Array(typed.dropFirst(4))
        if type == "IHDR" { ihdr = data } else if type == "IDAT" { idat += data }
        i += 12 + length
    }
    try #require(ihdr.count == 13)
    let side = Int(ihdr[0]) << 24 | Int(ihdr[1]) << 16 | Int(ihdr[2]) << 8 | Int(ihdr[3])
    #expect(Array(ihdr[8...]) == [1, 0, 0, 0, 0])
    #expect((Int(idat[0]) << 8 | Int(idat[1])) % 31 == 0, "zlib FCHECK")
    var raw: [UInt8] = []
    var j = 2
    while true {
        let final = idat[j] & 1
        #expect(idat[j] & 6 == 0, "stored block")
        let n = Int(idat[j + 1]) | Int(idat[j + 2]) << 8
        #expect(Int(idat[j + 3]) | Int(idat[j + 4]) << 8 == ~n & 0xFFFF)
        raw += idat[(j + 5)..<(j + 5 + n)]
        j += 5 + n
        if final == 1 { break }
    }
    #expect(UInt32(Int(idat[j]) << 24 | Int(idat[j + 1]) << 16 | Int(idat[j + 2]) << 8 | Int(idat[j + 3])) == PNG.adler32(raw))
    let rowBytes = (side + 7) / 8
    try #require(raw.count == side * (rowBytes + 1))
    var rows: [[Bool]] = []
    for y in 0..<side {
        let row = raw[(y * (rowBytes + 1))..<((y + 1) * (rowBytes + 1))]
        #expect(row.first == 0, "filter byte")
        let bits = Array(row.dropFirst())
        rows.append((0..<side).map { x in bits[x / 8] & (0x80 >> UInt8(x % 8)) != 0 })
    }
    return (side, rows)
}

@Suite struct QRCodeTests {
    @Test func checksumsMatchTheirReferenceValues() {
        #expect(PNG.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(PNG.crc32([]) == 0)
        #expect(PNG.adler32(Array("Wikipedia".utf8)) == 0x11E6_0398)
        #expect(PNG.adler32([]) == 1)
    }

    @Test func aLinkURIEncodesInASmallSymbolWithFinderPatterns() throws {
        let qr = try QRCode(encoding: "relaytrace://link?code=K7QF-3M9X")
        #expect(qr.width == 17 + 4 * qr.version)
        #expect(qr.version <= 3)
        // The three finder patterns: a dark 7x7 ring around a light ring around a dark 3x3 centre.
        for (ox, oy) in [(0, 0), (qr.width - 7, 0), (0, qr.width - 7)] {
            #expect(qr.isDark(ox, oy) && qr.isDark(ox + 6, oy + 6) && !qr.isDark(ox + 1, oy + 1) && qr.isDark(ox + 3, oy + 3))
        }
        #expect(!qr.isDark(-1, 0) && !qr.isDark(qr.width, 0))
    }

    @Test func thePNGHoldsEveryModuleScaledWithAQuietZone() throws {
        let qr = try QRCode(encoding: "relaytrace://link?code=ABCD-2345")
        let (side, white) = try readStoredPNG(qr.png(scale: 3, quietZone: 4))
        #expect(side == (qr.width + 8) * 3)
        for py in 0..<side {
            for px in 0..<side {
                #expect(white[py][px] == !qr.isDark(px / 3 - 4, py / 3 - 4))
            }
        }
    }

    @Test func aLargePayloadSpansSeveralStoredBlocks() throws {
        let data = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let z = PNG.zlibStored(data)
        #expect(z.count == 2 + 3 * 5 + data.count + 4)
        #expect(z[2] == 0 && z[2 + 5 + 65_535] == 0 && z[2 + 2 * (5 + 65_535)] == 1)
    }

    @Test func theTerminalTextIsTwoModuleRowsPerLineInHalfBlocks() throws {
        let qr = try QRCode(encoding: "relaytrace://link?code=ABCD-2345")
        let lines = qr.terminalText(quietZone: 2).split(separator: "\n").map { Array($0) }
        #expect(lines.count == (qr.width + 4 + 1) / 2)
        for (row, line) in lines.enumerated() {
            #expect(line.count == qr.width + 4)
            for (col, ch) in line.enumerated() {
                let x = col - 2, y = row * 2 - 2
                let top = !qr.isDark(x, y), bottom = y + 1 < qr.width + 2 && !qr.isDark(x, y + 1)
                #expect(ch == (top ? (bottom ? "█" : "▀") : (bottom ? "▄" : " ")), "line \(row) column \(col)")
            }
        }
    }

    @Test func anEmptyTextIsAnError() {
        #expect(throws: QRCodeError.self) { try QRCode(encoding: "") }
    }
}
