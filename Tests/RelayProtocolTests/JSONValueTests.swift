import Foundation
import RelayProtocol
import Testing

/// Parses or records the failure, for table tests.
private func parse(_ text: String) -> Result<JSONValue, JSONParseError> {
    do throws(JSONParseError) { return .success(try JSONValue(parsing: text)) } catch { return .failure(error) }
}

private func parse(bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
    do throws(JSONParseError) { return .success(try JSONValue(parsing: bytes)) } catch { return .failure(error) }
}

@Suite struct JSONParsingTests {
    @Test func scalars() throws {
        #expect(try JSONValue(parsing: "null") == .null)
        #expect(try JSONValue(parsing: "true") == .bool(true))
        #expect(try JSONValue(parsing: "false") == .bool(false))
        #expect(try JSONValue(parsing: "0") == .int(0))
        #expect(try JSONValue(parsing: "-17") == .int(-17))
        #expect(try JSONValue(parsing: "9223372036854775807") == .int(.max))
        #expect(try JSONValue(parsing: "-9223372036854775808") == .int(.min))
        #expect(try JSONValue(parsing: "\"hi\"") == .string("hi"))
        #expect(try JSONValue(parsing: " \t\r\n[ ]\n ") == .array([]))
        #expect(try JSONValue(parsing: "{ }") == .object([:]))
    }

    @Test func bigIntegersBecomeDoubles() throws {
        #expect(try JSONValue(parsing: "9223372036854775808") == .double(9223372036854775808.0))
        #expect(try JSONValue(parsing: "-9223372036854775809") == .double(-9223372036854775809.0))
        #expect(try JSONValue(parsing: "123456789012345678901234567890") == .double(1.2345678901234568e29))
    }

    @Test func fractionsAndExponentsAreDoubles() throws {
        #expect(try JSONValue(parsing: "1.0") == .double(1.0))
        #expect(try JSONValue(parsing: "1E2") == .double(100))
        #expect(try JSONValue(parsing: "1e+2") == .double(100))
        #expect(try JSONValue(parsing: "-2.5e-3") == .double(-0.0025))
        #expect(try JSONValue(parsing: "0.1") == .double(0.1))
        // Underflow is not an error: it rounds to zero.
        #expect(try JSONValue(parsing: "1e-400") == .double(0))
    }

    @Test func negativeZeroKeepsItsSign() throws {
        let v = try JSONValue(parsing: "-0")
        guard case .double(let d) = v else {
            Issue.record("expected .double, got \(v)")
            return
        }
        #expect(d == 0 && d.sign == .minus)
        #expect(v.jsonText == "-0.0")
        #expect(try JSONValue(parsing: "0") == .int(0))
    }

    @Test func overflowingNumbersAreRejected() {
        #expect(parse("1e400") == .failure(JSONParseError(offset: 0, message: "number 1e400 is out of the range of a 64-bit double")))
        guard case .failure(let e) = parse("[1, -1e999]") else {
            Issue.record("-1e999 was accepted")
            return
        }
        #expect(e.offset == 4)
    }

    @Test func escapes() throws {
        let v = try JSONValue(parsing: #""a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20AC""#)
        #expect(v == .string("a\"b\\c/d\u{8}\u{c}\n\r\tAé€"))
    }

    @Test func surrogatePairs() throws {
        #expect(try JSONValue(parsing: #""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSONValue(parsing: #""x\uD834\uDD1Ey""#) == .string("x𝄞y"))
    }

    @Test func rawUTF8IsKept() throws {
        let text = "\"grüße 漢字 😀\""
        #expect(try JSONValue(parsing: Array(text.utf8)) == .string("grüße 漢字 😀"))
    }

    @Test func duplicateKeysLastWins() throws {
        #expect(try JSONValue(parsing: #"{"a":1,"b":2,"a":3}"#) == ["a": 3, "b": 2])
    }

    @Test func everyCollectionKindParses() throws {
        let text = #"{"k":[1,2.5,"s",null,true]}"#
        let bytes = Array(text.utf8)
        let expected: JSONValue = ["k": [1, 2.5, "s", nil, true]]
        #expect(try JSONValue(parsing: bytes) == expected)
        #expect(try JSONValue(parsing: ([0x20] + bytes + [0x20])[1...]) == expected)  // slice
        #expect(try JSONValue(parsing: bytes.lazy.map { $0 }) == expected)  // not contiguous
        #expect(try JSONValue(parsing: Data(bytes)) == expected)
    }

    @Test(arguments: [
        ("", 0, "unexpected end of input; expected a value"),
        ("   ", 3, "unexpected end of input; expected a value"),
        ("[1,]", 3, "trailing comma before ']'"),
        (#"{"a":1,}"#, 7, "trailing comma before '}'"),
        ("01", 0, "leading zeros are not allowed in numbers"),
        ("-01", 0, "leading zeros are not allowed in numbers"),
        ("NaN", 0, "unexpected 'N'; expected a value (object, array, string, number, true, false or null)"),
        ("Infinity", 0, "unexpected 'I'; expected a value (object, array, string, number, true, false or null)"),
        ("-Infinity", 1, "expected a digit after '-'"),
        ("+1", 0, "unexpected '+'; expected a value (object, array, string, number, true, false or null)"),
        (".5", 0, "unexpected '.'; expected a value (object, array, string, number, true, false or null)"),
        ("1.", 2, "expected a digit after the decimal point"),
        ("1.e5", 2, "expected a digit after the decimal point"),
        ("1e", 2, "expected a digit in the exponent"),
        ("1e+", 3, "expected a digit in the exponent"),
        ("-", 1, "expected a digit after '-'"),
        ("tru", 0, "invalid literal; expected 'true'"),
        ("nul", 0, "invalid literal; expected 'null'"),
        ("falsey", 5, "unexpected 'y' after the JSON value; only whitespace may follow"),
        ("1 2", 2, "unexpected '2' after the JSON value; only whitespace may follow"),
        ("[1 2]", 3, "unexpected '2'; expected ',' or ']' in the array opened at byte 0"),
        ("[1", 2, "unterminated array opened at byte 0"),
        (#"{"a" 1}"#, 5, "unexpected '1'; expected ':' after the key"),
        ("{1:2}", 1, "unexpected '1'; expected a string key"),
        ("{'a':1}", 1, "unexpected '''; expected a string key"),
        (#"{"a":1"#, 6, "unterminated object opened at byte 0"),
        (#"{"a":1 "b":2}"#, 7, "unexpected '\"'; expected ',' or '}' in the object opened at byte 0"),
        (#"["abc"#, 5, "unterminated string opened at byte 1"),
        ("\"a\u{1}b\"", 2, "control character byte 0x01 in a string must be escaped"),
        ("\"tab\there\"", 4, "control character byte 0x09 in a string must be escaped"),
        (#""\x""#, 1, #"invalid escape \ followed by 'x'; valid escapes are \" \\ \/ \b \f \n \r \t \uXXXX"#),
        ("\"\\\u{1}\"", 1, #"invalid escape \ followed by byte 0x01; valid escapes are \" \\ \/ \b \f \n \r \t \uXXXX"#),
        (#""\u12"#, 1, #"truncated \u escape; expected 4 hex digits"#),
        (#""\u12G4""#, 5, "invalid hex digit 'G' in a \\u escape"),
        (#""\ud83d""#, 1, #"high surrogate \ud83d is not followed by a low surrogate escape"#),
        (#""\ud83dx""#, 1, #"high surrogate \ud83d is not followed by a low surrogate escape"#),
        (#""\ud83d\u0041""#, 7, #"high surrogate \ud83d is followed by \u0041, not a low surrogate"#),
        (#""\ude00""#, 1, #"lone low surrogate \ude00 without a preceding high surrogate"#),
    ])
    func rejections(text: String, offset: Int, message: String) {
        #expect(parse(text) == .failure(JSONParseError(offset: offset, message: message)))
    }

    @Test(arguments: [
        ([0x22, 0xC0, 0x80, 0x22], 1),  // overlong NUL
        ([0x22, 0xE0, 0x80, 0xAF, 0x22], 2),  // overlong 3-byte
        ([0x22, 0xED, 0xA0, 0x80, 0x22], 2),  // encoded surrogate U+D800
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 2),  // above U+10FFFF
        ([0x22, 0xFF, 0x22], 1),  // never valid
        ([0x22, 0x80, 0x22], 1),  // lone continuation
        ([0x22, 0xE2, 0x82, 0x22], 3),  // bad continuation (the quote)
        ([0x22, 0xE2, 0x82], 1),  // truncated at end of input
        ([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], 4),  // invalid after an escape (slow path)
    ] as [([UInt8], Int)])
    func invalidUTF8IsRejected(bytes: [UInt8], offset: Int) {
        guard case .failure(let error) = parse(bytes: bytes) else {
            Issue.record("accepted invalid UTF-8 \(bytes)")
            return
        }
        #expect(error.offset == offset)
        #expect(error.message.hasPrefix("invalid UTF-8"))
    }

    @Test func byteOrderMarkIsRejected() {
        #expect(parse(bytes: [0xEF, 0xBB, 0xBF, 0x31]) == .failure(JSONParseError(offset: 0, message: "a byte order mark is not allowed; send UTF-8 without a BOM")))
    }

    @Test func depthLimit() throws {
        let limit = JSONValue.maxDepth
        #expect(limit == 512)
        let ok = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        var v = try JSONValue(parsing: ok)
        var depth = 0
        while case .array(let a) = v, let first = a.first {
            v = first
            depth += 1
        }
        #expect(depth == limit - 1)

        let deep = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        #expect(parse(deep) == .failure(JSONParseError(offset: limit, message: "nesting deeper than 512 arrays/objects")))
        let deepObjects = String(repeating: #"{"a":"#, count: 100_000)
        guard case .failure(let e) = parse(deepObjects) else {
            Issue.record("100000 nested objects were accepted")
            return
        }
        #expect(e.offset == limit * 5)
    }

    @Test func errorDescriptionSaysWhere() {
        #expect(JSONParseError(offset: 7, message: "boom").description == "invalid JSON at byte 7: boom")
    }
}

@Suite struct JSONSerializationTests {
    @Test func compactAndSortedByUTF8Bytes() {
        let v: JSONValue = ["b": 1, "a": [true, false, nil], "B": "x", "é": 1.5, "aa": [:], "z": []]
        #expect(v.jsonText == #"{"B":"x","a":[true,false,null],"aa":{},"b":1,"z":[],"é":1.5}"#)
        #expect(v.serialized() == Array(v.jsonText.utf8))
    }

    @Test func keyOrderIsByBytesNotUnicodeCollation() {
        // U+FF21 (3 UTF-8 bytes, starts 0xEF) sorts after U+00E9 (starts 0xC3) and after "z".
        let v: JSONValue = ["\u{FF21}": 1, "é": 2, "z": 3, "Z": 4]
        #expect(v.jsonText == "{\"Z\":4,\"z\":3,\"é\":2,\"\u{FF21}\":1}")
    }

    @Test func minimalEscaping() throws {
        let v = JSONValue.string("q\" b\\ / \n\r\t\u{8}\u{c} \u{0}\u{1f}\u{7f} é 😀")
        #expect(v.jsonText == "\"q\\\" b\\\\ / \\n\\r\\t\\b\\f \\u0000\\u001f\u{7f} é 😀\"")
        #expect(try JSONValue(parsing: v.jsonText) == v)
    }

    @Test func numbers() {
        #expect(JSONValue.int(0).jsonText == "0")
        #expect(JSONValue.int(-42).jsonText == "-42")
        #expect(JSONValue.int(.max).jsonText == "9223372036854775807")
        #expect(JSONValue.int(.min).jsonText == "-9223372036854775808")
        #expect(JSONValue.double(1).jsonText == "1.0")
        #expect(JSONValue.double(0.1).jsonText == "0.1")
        #expect(JSONValue.double(1e16).jsonText == "1e+16")
        #expect(JSONValue.double(.leastNonzeroMagnitude).jsonText == "5e-324")
        #expect(JSONValue.double(.nan).jsonText == "null")
        #expect(JSONValue.double(.infinity).jsonText == "null")
        #expect(JSONValue.double(-.infinity).jsonText == "null")
    }

    @Test func integralDoublesStayDoubles() throws {
        for d in [1.0, -3.0, 1e16, 9007199254740993.0, 1e300, -0.0] {
            let back = try JSONValue(parsing: JSONValue.double(d).jsonText)
            #expect(back == .double(d), "\(d)")
        }
    }

    @Test func prettyText() {
        let v: JSONValue = ["b": [1, ["c": nil]], "a": "x", "e": [], "o": [:]]
        #expect(v.prettyText() == """
            {
              "a": "x",
              "b": [
                1,
                {
                  "c": null
                }
              ],
              "e": [],
              "o": {}
            }
            """)
        #expect(v.prettyText(indent: 0) == "{\n\"a\": \"x\",\n\"b\": [\n1,\n{\n\"c\": null\n}\n],\n\"e\": [],\n\"o\": {}\n}")
        #expect(JSONValue.int(3).prettyText() == "3")
    }

    @Test func descriptionIsTheCompactText() {
        let v: JSONValue = ["k": [1, "two"]]
        #expect(v.description == #"{"k":[1,"two"]}"#)
    }
}

@Suite struct JSONRoundTripTests {
    @Test func trickyInputsRoundTrip() throws {
        let inputs = [
            #"{"a":[1,-2,3.25,-0.0,1e-07,"\u0000\u001f\"\\",null,true,false,{}],"b":{"c":{"d":[]}}}"#,
            #"["😀","\ud83d\ude00","é","e\u0301","\/"]"#,
            "[9223372036854775807,-9223372036854775808,9223372036854775808,1.7976931348623157e308]",
        ]
        for text in inputs {
            let v = try JSONValue(parsing: text)
            let again = try JSONValue(parsing: v.serialized())
            #expect(again == v)
            #expect(again.serialized() == v.serialized())
            #expect(try JSONValue(parsing: v.prettyText()) == v)
        }
    }

    /// A random JSON value; `budget` bounds the size.
    private func randomValue(_ rng: inout SeededRandom, depth: Int) -> JSONValue {
        let kind = rng.next(upperBound: depth > 4 ? 5 : 7 as UInt64)
        switch kind {
        case 0: return .null
        case 1: return .bool(rng.next() & 1 == 1)
        case 2:
            switch rng.next(upperBound: 3 as UInt64) {
            case 0: return .int(Int64(bitPattern: rng.next()))
            case 1: return .int(Int64(rng.next(upperBound: 2000 as UInt64)) - 1000)
            default: return .int(rng.next() & 1 == 0 ? .max : .min)
            }
        case 3:
            switch rng.next(upperBound: 3 as UInt64) {
            case 0:
                let d = Double(bitPattern: rng.next())
                return .double(d.isFinite ? d : 0.5)
            case 1: return .double((rng.unitDouble() - 0.5) * 1e6)
            default: return .double(Double(Int64(rng.next(upperBound: 100 as UInt64))))
            }
        case 4: return .string(randomString(&rng))
        case 5:
            let n = Int(rng.next(upperBound: 6 as UInt64))
            return .array((0..<n).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            let n = Int(rng.next(upperBound: 6 as UInt64))
            var o = [String: JSONValue]()
            for _ in 0..<n { o[randomString(&rng)] = randomValue(&rng, depth: depth + 1) }
            return .object(o)
        }
    }

    private func randomString(_ rng: inout SeededRandom) -> String {
        let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1f}", "\u{7f}",
                                      "é", "€", "😀", "\u{2028}", "\u{FFFF}", "\u{10FFFF}", "_"]
        let n = Int(rng.next(upperBound: 12 as UInt64))
        var s = String.UnicodeScalarView()
        for _ in 0..<n { s.append(pool[Int(rng.next(upperBound: UInt64(pool.count)))]) }
        return String(s)
    }

    @Test func randomValuesRoundTrip() throws {
        var rng = SeededRandom(seed: 0x5EED_1234)
        for _ in 0..<500 {
            let v = randomValue(&rng, depth: 0)
            let bytes = v.serialized()
            let back = try JSONValue(parsing: bytes)
            #expect(back == v, "\(v.jsonText)")
            #expect(back.serialized() == bytes)
            #expect(try JSONValue(parsing: v.prettyText(indent: 3)) == v)
        }
    }
}

@Suite struct JSONValueAPITests {
    @Test func accessors() {
        let v: JSONValue = ["s": "x", "i": 7, "d": 2.0, "f": 2.5, "b": true, "n": nil, "a": [1, 2], "o": ["k": 1]]
        #expect(v["s"]?.stringValue == "x")
        #expect(v["i"]?.intValue == 7)
        #expect(v["d"]?.intValue == 2)
        #expect(v["f"]?.intValue == nil)
        #expect(v["i"]?.doubleValue == 7.0)
        #expect(v["f"]?.doubleValue == 2.5)
        #expect(v["b"]?.boolValue == true)
        #expect(v["n"]?.isNull == true)
        #expect(v["missing"] == nil)
        #expect(v["a"]?[1] == .int(2))
        #expect(v["a"]?[2] == nil)
        #expect(v["a"]?[-1] == nil)
        #expect(v["o"]?.objectValue == ["k": .int(1)])
        #expect(v["a"]?.arrayValue == [1, 2])
        #expect(v["s"]?["k"] == nil)
        #expect(v[0] == nil)
        #expect(v["s"]?.intValue == nil)
        #expect(v["i"]?.stringValue == nil)
        #expect(JSONValue.double(1e300).intValue == nil)
        #expect(JSONValue.double(.nan).intValue == nil)
        #expect(v["i"]?.isNull == false)
    }

    @Test func canonicalEquality() {
        #expect(JSONValue.int(1) != JSONValue.double(1.0))
        #expect(JSONValue.int(1).canonicallyEquals(.double(1.0)))
        #expect(JSONValue.double(1.0).canonicallyEquals(.int(1)))
        #expect(!JSONValue.int(1).canonicallyEquals(.double(1.5)))
        #expect(JSONValue.int(0).canonicallyEquals(.double(-0.0)))
        #expect(!JSONValue.int(.max).canonicallyEquals(.double(9223372036854775807.0)))
        let a: JSONValue = ["x": [1, 2.0, ["y": 3]]]
        let b: JSONValue = ["x": [1.0, 2, ["y": 3.0]]]
        #expect(a.canonicallyEquals(b))
        #expect(!a.canonicallyEquals(["x": [1, 2, ["y": 4]]]))
        #expect(!a.canonicallyEquals(["x": [1, 2]]))
        #expect(!a.canonicallyEquals(["z": [1, 2, ["y": 3]]]))
        #expect(!JSONValue.string("1").canonicallyEquals(.int(1)))
    }

    @Test func literals() {
        let v: JSONValue = ["s": "x", "i": 1, "d": 1.5, "b": false, "n": nil, "a": [1, "2"]]
        #expect(v == .object(["s": .string("x"), "i": .int(1), "d": .double(1.5), "b": .bool(false),
                              "n": .null, "a": .array([.int(1), .string("2")])]))
        #expect(JSONValue(dictionaryLiteral: ("k", 1), ("k", 2)) == ["k": 2])
    }

    @Test func codableInsideACodableType() throws {
        struct Envelope: Codable, Equatable {
            var name: String
            var body: JSONValue
        }
        let e = Envelope(name: "n", body: ["a": [1, 2.5, "s", nil, true, ["x": []]]])
        let data = try JSONEncoder().encode(e)
        let back = try JSONDecoder().decode(Envelope.self, from: data)
        #expect(back == e)
        // What JSONEncoder wrote is the same JSON our parser reads.
        #expect(try JSONValue(parsing: data)["body"] == e.body)
    }
}

/// `parsingNotingUnderscoreKeys` finds a `_` in any key (escaped or not, at any depth) and never in values.
@Suite struct UnderscoreKeyNotingTests {
    @Test(arguments: [
        (#"{"a":1}"#, false),
        (#"{"a":"x_y","b":["_"]}"#, false),
        (#"["_",{"k":"_"}]"#, false),
        (#"{"a_b":1}"#, true),
        (#"{"a":{"b":[{"c":{"d_":null}}]}}"#, true),
        (#"{"a\u005fb":1}"#, true),
        (#"{"\u00e9\n":1,"x":{"é_":2}}"#, true),
        (#"{"a\nb":1}"#, false),
        (#"{"a_b":1,"a_b":2}"#, true),
    ])
    func notesUnderscoreKeys(text: String, expected: Bool) throws {
        let (value, noted) = try JSONValue.parsingNotingUnderscoreKeys(text)
        #expect(noted == expected)
        #expect(value == (try JSONValue(parsing: text)))
        #expect(noted == !CamelCaseGuard.violations(in: value).isEmpty)
    }

    @Test func duplicateKeysLastOneWinsWithExactCapacity() throws {
        let value = try JSONValue(parsing: #"{"a":1,"b":{"x":1,"x":2},"a":3,"c":[{"d":4},{}]}"#)
        #expect(value == ["a": 3, "b": ["x": 2], "c": [["d": 4], .object([:])]])
    }

    @Test func errorsAreTheSame() {
        #expect(throws: JSONParseError.self) { try JSONValue.parsingNotingUnderscoreKeys(#"{"a_b":}"#) }
    }
}
