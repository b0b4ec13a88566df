import RelayProtocol
import Testing

/// The one hex codec (`hexString`, `hexDigitValue`, `hexDecoded`) that trace headers, action records, watch
/// tokens, the viewer's percent escapes and traceparents read and write through.
@Suite struct HexTests {
    @Test func everyByteRoundTripsInLowerAndUpperCase() {
        let all = (0...255).map { UInt8($0) }
        let text = hexString(all)
        #expect(text.count == 512)
        #expect(text.hasPrefix("000102") && text.hasSuffix("fdfeff"))
        #expect(text == text.lowercased())
        #expect(hexDecoded(text) == all)
        #expect(hexDecoded(text.uppercased()) == all)
        #expect(hexDecoded(Substring("0aFf")) == [0x0A, 0xFF])
        #expect(hexDecoded("") == [])
    }

    @Test func digitValuesAreExactlyTheTwentyTwoHexDigits() {
        var digits: [UInt8: UInt8] = [:]
        for c in UInt8.min...UInt8.max {
            if let v = hexDigitValue(c) { digits[c] = v }
        }
        #expect(digits.count == 22)
        for (c, v) in zip("0123456789abcdef".utf8, 0...15) { #expect(digits[c] == UInt8(v)) }
        for (c, v) in zip("ABCDEF".utf8, 10...15) { #expect(digits[c] == UInt8(v)) }
    }

    @Test func oddCountsAndNonDigitsAreRefused() {
        #expect(hexDecoded("abc") == nil)
        #expect(hexDecoded("0g") == nil)
        #expect(hexDecoded("g0") == nil)
        #expect(hexDecoded("00 1") == nil)
        #expect(hexDecoded("é0") == nil)  // two UTF-8 bytes, neither a digit
        #expect(hexDecoded("0x") == nil)
    }
}
