import RelayProtocol
import Testing

private func parse(_ header: String) -> Result<TraceParent, TraceParentError> {
    do throws(TraceParentError) { return .success(try TraceParent(parsing: header)) } catch { return .failure(error) }
}

@Suite struct TraceParentTests {
    static let example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func protocolExampleParses() throws {
        let t = try TraceParent(parsing: Self.example)
        #expect(t.traceId == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(t.parentId == "00f067aa0ba902b7")
        #expect(t.flags == 1)
        #expect(t.isSampled)
        #expect(t.header == Self.example)
        #expect(t.description == Self.example)
        #expect(try TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").isSampled == false)
        #expect(try TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff").flags == 0xFF)
    }

    @Test(arguments: [
        // upper case anywhere
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", 4, "upper-case hex digit; traceparent must be lower case"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067aa0ba902b7-01", 38, "upper-case hex digit; traceparent must be lower case"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A", 54, "upper-case hex digit; traceparent must be lower case"),
        // lengths
        ("", 0, "length is 0 bytes, not 55"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", 0, "length is 56 bytes, not 55"),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", 0, "length is 54 bytes, not 55"),
        ("00-4bf92f3577b34da6a3ce929d0e0e47366-0f067aa0ba902b7-01", 35, "expected '-' separator"),
        // all-zero ids
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", 3, "trace id is all zeros, which W3C forbids"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", 36, "parent id is all zeros, which W3C forbids"),
        // versions
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0, "unsupported version ff; only 00 is accepted"),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0, "unsupported version 01; only 00 is accepted"),
        // separators and digits
        ("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 2, "expected '-' separator"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", 35, "expected '-' separator"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7:01", 52, "expected '-' separator"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902g7-01", 50, "not a hex digit"),
        ("00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01", 0, "length is 56 bytes, not 55"),
    ])
    func rejections(header: String, offset: Int, message: String) {
        #expect(parse(header) == .failure(TraceParentError(offset: offset, message: message)))
    }

    @Test func partsAreValidated() throws {
        #expect(try TraceParent(traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7").header == Self.example)
        #expect(throws: TraceParentError(offset: 3, message: "trace id has 31 characters, not 32")) {
            try TraceParent(traceId: "4bf92f3577b34da6a3ce929d0e0e473", parentId: "00f067aa0ba902b7")
        }
        #expect(throws: TraceParentError(offset: 36, message: "parent id has 17 characters, not 16")) {
            try TraceParent(traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b71")
        }
        #expect(throws: TraceParentError(offset: 3, message: "upper-case hex digit; traceparent must be lower case")) {
            try TraceParent(traceId: "Abf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7")
        }
        #expect(throws: TraceParentError(offset: 36, message: "parent id is all zeros, which W3C forbids")) {
            try TraceParent(traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "0000000000000000")
        }
    }

    @Test func randomIsDeterministicValidAndRoundTrips() throws {
        var a = SeededRandom(seed: 7)
        var b = SeededRandom(seed: 7)
        var seen = Set<String>()
        for _ in 0..<200 {
            let t = TraceParent.random(using: &a)
            #expect(t == TraceParent.random(using: &b))
            #expect(try TraceParent(parsing: t.header) == t)
            #expect(t.header.utf8.count == 55)
            #expect(t.isSampled)
            seen.insert(t.traceId)
        }
        #expect(seen.count == 200)
        var c = SeededRandom(seed: 8)
        let unsampled = TraceParent.random(using: &c, sampled: false)
        #expect(unsampled.flags == 0 && unsampled.header.hasSuffix("-00"))
        let child = unsampled.child(using: &c)
        #expect(child.traceId == unsampled.traceId && child.parentId != unsampled.parentId && child.flags == 0)
    }

    @Test func descriptionSaysWhatIsExpected() {
        #expect(TraceParentError(offset: 2, message: "expected '-' separator").description
            == "invalid traceparent at character 2: expected '-' separator; expected 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lower case")
    }
}

/// `uuidString()` is the upper-case 8-4-4-4-12 form of the next 16 bytes with the version-4 and RFC 4122
/// variant bits set (the same bytes and text as before it was written byte by byte).
@Suite struct SeededUUIDTests {
    @Test(arguments: [UInt64(0), 1, 42, .max])
    func uuidIsTheNextSixteenBytes(seed: UInt64) {
        var a = SeededRandom(seed: seed)
        var b = SeededRandom(seed: seed)
        for _ in 0..<50 {
            var bytes = b.bytes(16)
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            let h = Array(hexString(bytes).uppercased())
            let expected = String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-"
                + String(h[16..<20]) + "-" + String(h[20..<32])
            #expect(a.uuidString() == expected)
        }
    }
}
