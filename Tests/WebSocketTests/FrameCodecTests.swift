import Testing
@testable import WebSocket

@Suite("Frame parser and encoder")
struct FrameCodecTests {
    // MARK: Golden frames (RFC 6455 §5.7)

    @Test("encoder writes the RFC 6455 §5.7 bytes", arguments: goldenFrames)
    func encoderMatchesGolden(_ golden: GoldenFrame) {
        #expect(WebSocketFrameEncoder.bytes(of: golden.frame) == golden.bytes)
    }

    @Test("golden frame parsed whole", arguments: goldenFrames)
    func parseWhole(_ golden: GoldenFrame) {
        let result = parseAll([golden.bytes[...]], role: golden.receiver)
        #expect(result.error == nil)
        #expect(result.frames == [golden.frame])
    }

    @Test("golden frame parsed one byte at a time", arguments: goldenFrames)
    func parseByteAtATime(_ golden: GoldenFrame) {
        var parser = WebSocketFrameParser(role: golden.receiver)
        var frames: [WebSocketFrame] = []
        for (i, byte) in golden.bytes.enumerated() {
            parser.append([byte])
            let frame = try? parser.nextFrame()
            if let frame {
                frames.append(frame)
                #expect(i == golden.bytes.count - 1, "frame completed early at byte \(i)")
            }
        }
        #expect(frames == [golden.frame])
        #expect(parser.bufferedByteCount == 0)
        #expect(parser.streamOffset == golden.bytes.count)
    }

    @Test("golden frame split in two at every offset", arguments: goldenFrames)
    func parseSplitEveryOffset(_ golden: GoldenFrame) {
        var failures = 0
        for offset in 0...golden.bytes.count {
            let result = parseAll(split(golden.bytes, at: [offset]), role: golden.receiver)
            if result.error != nil || result.frames.count != 1 || !sameFrame(result.frames[0], golden.frame) {
                failures += 1
            }
        }
        #expect(failures == 0)
    }

    @Test("golden frame split in three pieces (seeded sample)", arguments: goldenFrames)
    func parseSplitThreeWays(_ golden: GoldenFrame) {
        var random = TestRandom(seed: 0x3_5713)
        var failures: [[Int]] = []
        for _ in 0..<300 {
            let offsets = [random.int(0...golden.bytes.count), random.int(0...golden.bytes.count)]
            let result = parseAll(split(golden.bytes, at: offsets), role: golden.receiver)
            if result.error != nil || result.frames != [golden.frame] { failures.append(offsets) }
        }
        #expect(failures.isEmpty)
    }

    @Test("a stream of every unmasked golden frame, split at every offset, through the cursor API")
    func streamSplitEveryOffset() {
        let unmasked = goldenFrames.filter { $0.receiver == .client && $0.bytes.count < 1000 }
        let stream = unmasked.flatMap(\.bytes)
        let expected = unmasked.map(\.frame)
        var failures = 0
        for offset in 0...stream.count {
            var parser = WebSocketFrameParser(role: .client)
            var frames: [WebSocketFrame] = []
            for piece in split(stream, at: [offset]) {
                piece.withUnsafeBytes { raw in
                    var cursor = 0
                    while let frame = try? parser.nextFrame(in: raw, cursor: &cursor) { frames.append(frame) }
                }
            }
            if frames != expected || parser.streamOffset != stream.count { failures += 1 }
        }
        #expect(failures == 0)
    }

    @Test("the cursor API reads complete frames from the input and buffers only a partial tail")
    func cursorAPIBuffersOnlyTail() throws {
        let stream = goldenFrames[0].bytes + goldenFrames[4].bytes + goldenFrames[0].bytes.prefix(3)
        var parser = WebSocketFrameParser(role: .client)
        var frames: [WebSocketFrame] = []
        try stream.withUnsafeBytes { raw in
            var cursor = 0
            while let frame = try parser.nextFrame(in: raw, cursor: &cursor) { frames.append(frame) }
            #expect(cursor == raw.count)
        }
        #expect(frames == [goldenFrames[0].frame, goldenFrames[4].frame])
        #expect(parser.bufferedByteCount == 3)
        parser.append(Array(goldenFrames[0].bytes.dropFirst(3)))
        #expect(try parser.nextFrame() == goldenFrames[0].frame)
    }

    // MARK: Round trips

    @Test("random frames round-trip through encoder and parser (seeded)", arguments: [WebSocketRole.client, .server])
    func randomRoundTrip(receiver: WebSocketRole) throws {
        var random = TestRandom(seed: receiver == .client ? 1 : 2)
        var stream: [UInt8] = []
        var expected: [WebSocketFrame] = []
        let sizes = [0, 1, 3, 7, 8, 9, 125, 126, 127, 65535, 65536, 70000]
        for i in 0..<200 {
            let opcode: WebSocketOpcode = [.text, .binary, .continuation, .ping, .pong, .close][i % 6]
            let size = opcode.isControl ? random.int(0...125) : (i < sizes.count ? sizes[i] : random.int(0...3000))
            let key = receiver == .server ? WebSocketMaskingKey(random.nextMaskingKey()) : nil
            let frame = WebSocketFrame(fin: opcode.isControl || random.int(0...1) == 1, opcode: opcode,
                                       maskingKey: key, payload: random.bytes(size))
            expected.append(frame)
            WebSocketFrameEncoder.encode(frame, into: &stream)
        }
        // Whole, and in random chunks.
        #expect(parseAll([stream[...]], role: receiver).frames == expected)
        var offsets: [Int] = []
        var position = 0
        while position < stream.count {
            position += random.int(1...5000)
            offsets.append(min(position, stream.count))
        }
        let chunked = parseAll(split(stream, at: offsets), role: receiver)
        #expect(chunked.error == nil)
        #expect(chunked.frames == expected)
    }

    @Test("encoder uses the minimal length form at each boundary")
    func encoderLengthBoundaries() {
        for (size, header) in [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10)] {
            let bytes = WebSocketFrameEncoder.bytes(of: WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 1, count: size)))
            #expect(bytes.count == size + header)
            #expect(WebSocketFrameEncoder.headerSize(payloadCount: size, masked: false) == header)
            #expect(WebSocketFrameEncoder.headerSize(payloadCount: size, masked: true) == header + 4)
        }
    }

    @Test("word-at-a-time masking equals the byte-wise definition at every length and phase")
    func maskingMatchesDefinition() {
        var random = TestRandom(seed: 77)
        for length in 0..<80 {
            for phase in 0..<4 {
                let key = WebSocketMaskingKey(random.nextMaskingKey())
                let data = random.bytes(length)
                let keyBytes = [key.b0, key.b1, key.b2, key.b3]
                let expected = data.enumerated().map { $0.element ^ keyBytes[($0.offset + phase) % 4] }
                var masked = data
                masked.withUnsafeMutableBytes { WebSocketMasking.apply(key, to: $0, phase: phase) }
                #expect(masked == expected, "length \(length) phase \(phase)")
            }
        }
    }

    @Test("masking key value and wire bytes agree")
    func maskingKeyValue() {
        let key = WebSocketMaskingKey(0x37fa_213d)
        #expect(key == rfcKey)
        #expect(key.value == 0x37fa_213d)
        #expect(key.description == "37fa213d")
    }

    // MARK: Parser errors

    struct BadFrame: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var receiver: WebSocketRole
        var kind: WebSocketProtocolError.Kind
        var closeCode: UInt16
        var testDescription: String { name }
    }

    static let badFrames: [BadFrame] = [
        BadFrame(name: "RSV1 set", bytes: rawFrame(rsv: 4, opcode: 1, payload: hello), receiver: .client,
                 kind: .reservedBitsSet, closeCode: 1002),
        BadFrame(name: "RSV3 set", bytes: rawFrame(rsv: 1, opcode: 2, mask: rfcKey), receiver: .server,
                 kind: .reservedBitsSet, closeCode: 1002),
        BadFrame(name: "opcode 0x3", bytes: rawFrame(opcode: 3), receiver: .client, kind: .unknownOpcode, closeCode: 1002),
        BadFrame(name: "opcode 0xB", bytes: rawFrame(opcode: 0xB, mask: rfcKey), receiver: .server,
                 kind: .unknownOpcode, closeCode: 1002),
        BadFrame(name: "unmasked frame at server", bytes: rawFrame(opcode: 1, payload: hello), receiver: .server,
                 kind: .unmaskedFrameFromClient, closeCode: 1002),
        BadFrame(name: "masked frame at client", bytes: rawFrame(opcode: 1, mask: rfcKey, payload: hello),
                 receiver: .client, kind: .maskedFrameFromServer, closeCode: 1002),
        BadFrame(name: "fragmented ping", bytes: rawFrame(fin: false, opcode: 9), receiver: .client,
                 kind: .fragmentedControlFrame, closeCode: 1002),
        BadFrame(name: "ping of 126 bytes", bytes: rawFrame(opcode: 9, payload: [UInt8](repeating: 0, count: 126)),
                 receiver: .client, kind: .controlFrameTooLarge, closeCode: 1002),
        BadFrame(name: "close of 126 bytes (masked)",
                 bytes: rawFrame(opcode: 8, mask: rfcKey, payload: [UInt8](repeating: 0, count: 126)),
                 receiver: .server, kind: .controlFrameTooLarge, closeCode: 1002),
        BadFrame(name: "16-bit length of 5", bytes: rawFrame(opcode: 2, payload: hello, lengthForm: 16),
                 receiver: .client, kind: .nonMinimalLength, closeCode: 1002),
        BadFrame(name: "64-bit length of 300", bytes: rawFrame(opcode: 2, payload: bytes256 + bytes256, lengthForm: 64),
                 receiver: .client, kind: .nonMinimalLength, closeCode: 1002),
        BadFrame(name: "64-bit length with MSB set", bytes: [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 5] + hello,
                 receiver: .client, kind: .lengthMostSignificantBitSet, closeCode: 1002),
        BadFrame(name: "declared 2^62 bytes", bytes: [0x82, 0x7F, 0x40, 0, 0, 0, 0, 0, 0, 0], receiver: .client,
                 kind: .frameTooLarge, closeCode: 1009),
    ]

    @Test("malformed frames fail with the right kind and close code, whole and byte by byte", arguments: badFrames)
    func malformedFrame(_ bad: BadFrame) {
        let whole = parseAll([bad.bytes[...]], role: bad.receiver)
        #expect(whole.frames.isEmpty)
        #expect(whole.error?.kind == bad.kind)
        #expect(whole.error?.closeCode.rawValue == bad.closeCode)
        #expect(whole.error?.streamOffset == 0)
        let bytewise = parseAll(bad.bytes.map { [$0][...] }, role: bad.receiver)
        #expect(bytewise.error?.kind == bad.kind)
    }

    @Test("errors are found as soon as the header shows them, before the payload arrives")
    func earlyErrors() throws {
        var parser = WebSocketFrameParser(role: .client, maxFrameSize: 1000)
        parser.append([0x82, 0x7E, 0x03])  // 16-bit length, first byte only: nothing to say yet
        #expect(try parser.nextFrame() == nil)
        parser.append([0xE9])  // 0x03E9 = 1001 > 1000
        #expect(throws: WebSocketProtocolError.self) { try parser.nextFrame() }
        #expect(parser.error?.kind == .frameTooLarge)
        // A failed parser stays failed and ignores input.
        parser.append(goldenFrames[0].bytes)
        #expect(throws: WebSocketProtocolError.self) { try parser.nextFrame() }
        #expect(parser.error?.kind == .frameTooLarge)

        var reserved = WebSocketFrameParser(role: .server)
        reserved.append([0xF1])  // one byte with RSV bits: fails without waiting for byte 2
        #expect(throws: WebSocketProtocolError.self) { try reserved.nextFrame() }
    }

    @Test("the error offset points at the frame at fault in a stream")
    func errorOffsetInStream() {
        let stream = goldenFrames[0].bytes + goldenFrames[4].bytes + rawFrame(opcode: 5)
        let result = parseAll([stream[...]], role: .client)
        #expect(result.frames.count == 2)
        #expect(result.error?.kind == .unknownOpcode)
        #expect(result.error?.streamOffset == goldenFrames[0].bytes.count + goldenFrames[4].bytes.count)
        #expect(result.error?.description.contains("stream byte 14") == true)
    }

    @Test("a frame of exactly maxFrameSize passes, one byte more fails with 1009")
    func maxFrameSizeBoundary() {
        let ok = parseAll([rawFrame(opcode: 2, payload: [UInt8](repeating: 9, count: 300))[...]], role: .client,
                          maxFrameSize: 300)
        #expect(ok.error == nil)
        #expect(ok.frames.first?.payload.count == 300)
        let tooBig = parseAll([rawFrame(opcode: 2, payload: [UInt8](repeating: 9, count: 301))[...]], role: .client,
                              maxFrameSize: 300)
        #expect(tooBig.error?.kind == .frameTooLarge)
        #expect(tooBig.error?.closeCode == .messageTooBig)
    }
}
