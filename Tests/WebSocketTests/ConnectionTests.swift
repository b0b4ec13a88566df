import Testing
@testable import WebSocket

/// A frame as a client would send it to a server (masked with a fixed key).
func fromClient(fin: Bool = true, rsv: UInt8 = 0, _ opcode: UInt8, _ payload: [UInt8] = [], lengthForm: Int? = nil) -> [UInt8] {
    rawFrame(fin: fin, rsv: rsv, opcode: opcode, mask: WebSocketMaskingKey(0xA1B2_C3D4), payload: payload,
             lengthForm: lengthForm)
}

/// A frame as a server would send it to a client (unmasked).
func fromServer(fin: Bool = true, _ opcode: UInt8, _ payload: [UInt8] = []) -> [UInt8] {
    rawFrame(fin: fin, opcode: opcode, payload: payload)
}

@Suite("Connection state machine")
struct ConnectionTests {
    func server(_ configuration: WebSocketConfiguration = WebSocketConfiguration()) -> WebSocketConnection {
        WebSocketConnection(role: .server, configuration: configuration)
    }

    func client(_ configuration: WebSocketConfiguration = WebSocketConfiguration(), seed: UInt64 = 42) -> WebSocketConnection {
        WebSocketConnection(role: .client, configuration: configuration, maskingKeys: TestRandom(seed: seed))
    }

    // MARK: Messages

    @Test("RFC examples through a client connection: text, fragmented text, ping with automatic pong")
    func rfcExamplesAtClient() throws {
        var connection = WebSocketConnection(role: .client, maskingKeys: FixedMaskingKeySource(0x37fa_213d))
        let stream = goldenFrames[0].bytes + goldenFrames[2].bytes + goldenFrames[4].bytes + goldenFrames[3].bytes
        let events = connection.receive(stream)
        #expect(events == [.text("Hello"), .ping(hello), .text("Hello")])
        // The automatic pong is the RFC's masked pong, byte for byte.
        #expect(connection.takeOutbound() == goldenFrames[5].bytes)
        #expect(!connection.hasOutbound)
        #expect(connection.state == .open)
    }

    @Test("the same stream split at every offset gives the same events and replies")
    func connectionSplitEveryOffset() {
        let stream = goldenFrames[0].bytes + goldenFrames[2].bytes + goldenFrames[4].bytes + goldenFrames[3].bytes
            + goldenFrames[6].bytes + fromServer(8, closeBody(1000, Array("bye".utf8)))
        let expected: [WebSocketEvent] = [.text("Hello"), .ping(hello), .text("Hello"), .binary(bytes256),
                                          .closed(code: .normalClosure, reason: "bye")]
        var whole = WebSocketConnection(role: .client, maskingKeys: FixedMaskingKeySource(1))
        #expect(whole.receive(stream) == expected)
        let expectedOutbound = whole.takeOutbound()
        var failures: [Int] = []
        for offset in 0...stream.count {
            var connection = WebSocketConnection(role: .client, maskingKeys: FixedMaskingKeySource(1))
            let events = feed(&connection, split(stream, at: [offset]))
            if events != expected || connection.takeOutbound() != expectedOutbound { failures.append(offset) }
        }
        #expect(failures.isEmpty)
    }

    @Test("a masked client stream at a server, byte by byte")
    func serverByteByByte() {
        var connection = server()
        let stream = goldenFrames[1].bytes + fromClient(2, [1, 2, 3]) + fromClient(fin: false, 1, Array("ab".utf8))
            + fromClient(0, Array("cd".utf8))
        let events = feed(&connection, stream.map { [$0][...] })
        #expect(events == [.text("Hello"), .binary([1, 2, 3]), .text("abcd")])
    }

    @Test("fragmented message with control frames interleaved")
    func fragmentationWithInterleavedControl() {
        var connection = server()
        let stream = fromClient(fin: false, 2, [1, 2])
            + fromClient(9, Array("p1".utf8))
            + fromClient(fin: false, 0, [3])
            + fromClient(10, Array("unsolicited".utf8))
            + fromClient(fin: false, 0, [])
            + fromClient(9, [])
            + fromClient(0, [4, 5])
        let events = connection.receive(stream)
        #expect(events == [.ping(Array("p1".utf8)), .pong(Array("unsolicited".utf8)), .ping([]), .binary([1, 2, 3, 4, 5])])
        let replies = outboundFrames(&connection)
        #expect(replies == [WebSocketFrame(opcode: .pong, payload: Array("p1".utf8)), WebSocketFrame(opcode: .pong)])
    }

    @Test("a fragmented text message split inside a multi-byte character is valid")
    func utf8SplitAcrossFragments() {
        let text = "héllo wörld €𝄞"
        let bytes = Array(text.utf8)
        for cut in 1..<bytes.count {
            var connection = server()
            let events = connection.receive(fromClient(fin: false, 1, Array(bytes[..<cut])) + fromClient(0, Array(bytes[cut...])))
            #expect(events == [.text(text)], "cut at \(cut)")
        }
    }

    @Test("empty messages")
    func emptyMessages() {
        var connection = server()
        #expect(connection.receive(fromClient(1) + fromClient(2) + fromClient(fin: false, 1) + fromClient(0))
            == [.text(""), .binary([]), .text("")])
    }

    @Test("automatic pong can be turned off")
    func noAutomaticPong() {
        var connection = server(WebSocketConfiguration(automaticPong: false))
        #expect(connection.receive(fromClient(9, [7])) == [.ping([7])])
        #expect(!connection.hasOutbound)
    }

    // MARK: Sending

    @Test("a client masks each frame with the next key from its source")
    func clientMasksWithInjectedKeys() throws {
        var connection = client(seed: 9)
        try connection.send(text: "Hello")
        try connection.send(binary: [1, 2, 3])
        try connection.ping([9])
        try connection.pong()
        var keys = TestRandom(seed: 9)
        let expectedKeys = (0..<4).map { _ in WebSocketMaskingKey(keys.nextMaskingKey()) }
        let frames = outboundFrames(&connection)
        #expect(frames == [
            WebSocketFrame(opcode: .text, maskingKey: expectedKeys[0], payload: hello),
            WebSocketFrame(opcode: .binary, maskingKey: expectedKeys[1], payload: [1, 2, 3]),
            WebSocketFrame(opcode: .ping, maskingKey: expectedKeys[2], payload: [9]),
            WebSocketFrame(opcode: .pong, maskingKey: expectedKeys[3]),
        ])
    }

    @Test("a client without an injected source still masks, with keys from the system generator")
    func defaultMaskingSource() throws {
        var connection = WebSocketConnection(role: .client)
        for _ in 0..<8 { try connection.send(binary: [1, 2, 3, 4]) }
        let frames = outboundFrames(&connection)
        #expect(frames.count == 8)
        #expect(frames.allSatisfy { $0.maskingKey != nil && $0.payload == [1, 2, 3, 4] })
        #expect(Set(frames.compactMap(\.maskingKey)).count > 1)
    }

    @Test("the RFC's masked Hello is what a client with key 37fa213d sends")
    func clientGoldenBytes() throws {
        var connection = WebSocketConnection(role: .client, maskingKeys: FixedMaskingKeySource(0x37fa_213d))
        try connection.send(text: "Hello")
        #expect(connection.takeOutbound() == goldenFrames[1].bytes)
    }

    @Test("a server sends unmasked frames; its 64 KiB binary matches the RFC bytes")
    func serverGoldenBytes() throws {
        var connection = server()
        try connection.send(binary: bytes64K)
        #expect(sameBytes(connection.takeOutbound(), goldenFrames[7].bytes))
    }

    @Test("outbound fragmentation splits messages into frames of at most the configured size")
    func outboundFragmentation() throws {
        var sender = client(WebSocketConfiguration(outboundFragmentSize: 4))
        try sender.send(text: "Hello, world")
        try sender.send(binary: [1, 2, 3, 4])
        let frames = outboundFrames(&sender)
        #expect(frames.map(\.opcode) == [.text, .continuation, .continuation, .binary])
        #expect(frames.map(\.fin) == [false, false, true, true])
        #expect(frames.map(\.payload.count) == [4, 4, 4, 4])
        // The receiving end reassembles them.
        var sender2 = client(WebSocketConfiguration(outboundFragmentSize: 3))
        try sender2.send(text: "€𝄞 fragments cut through characters")
        var receiver = server()
        #expect(receiver.receive(sender2.takeOutbound()) == [.text("€𝄞 fragments cut through characters")])
    }

    @Test("send refusals: control payload over 125, bad close codes, long reasons")
    func sendRefusals() {
        var connection = client()
        #expect(throws: WebSocketSendError.self) { try connection.ping([UInt8](repeating: 0, count: 126)) }
        #expect(throws: WebSocketSendError.self) { try connection.pong([UInt8](repeating: 0, count: 126)) }
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000] {
            #expect(throws: WebSocketSendError.self) { try connection.close(code: WebSocketCloseCode(code)) }
        }
        #expect(throws: WebSocketSendError.self) {
            try connection.close(code: .normalClosure, reason: String(repeating: "x", count: 124))
        }
        #expect(throws: WebSocketSendError.self) { try connection.close(code: nil, reason: "no code") }
        #expect(!connection.hasOutbound)
        #expect(connection.state == .open)
    }

    @Test("a 123-byte close reason is accepted")
    func longestCloseReason() throws {
        var connection = client()
        try connection.close(code: WebSocketCloseCode(4000), reason: String(repeating: "é", count: 61) + "x")
        let frames = outboundFrames(&connection)
        #expect(frames.first?.payload.count == 125)
    }

    // MARK: Close handshake

    @Test("peer-initiated close: the code is echoed and the connection closes")
    func peerInitiatedClose() throws {
        var connection = server()
        let events = connection.receive(fromClient(8, closeBody(1001, Array("going".utf8))) + fromClient(1, hello))
        #expect(events == [.closed(code: .goingAway, reason: "going")])
        #expect(connection.state == .closed)
        #expect(connection.receivedCloseCode == .goingAway)
        #expect(connection.sentCloseCode == .goingAway)
        #expect(outboundFrames(&connection) == [WebSocketFrame(opcode: .close, payload: closeBody(1001))])
        // After close nothing more is parsed or sent.
        #expect(connection.receive(fromClient(1, hello)) == [])
        #expect(throws: WebSocketSendError.self) { try connection.send(text: "late") }
        #expect(throws: WebSocketSendError.self) { try connection.ping() }
        #expect(!connection.hasOutbound)
        #expect(connection.transportClosed() == [])
    }

    @Test("an empty close body is allowed and answered with an empty one")
    func emptyCloseBody() {
        var connection = client()
        #expect(connection.receive(fromServer(8)) == [.closed(code: .noStatusReceived, reason: "")])
        #expect(connection.receivedCloseCode == .noStatusReceived)
        let frames = outboundFrames(&connection)
        #expect(frames.count == 1)
        #expect(frames.first?.opcode == .close)
        #expect(frames.first?.payload == [])
    }

    @Test("locally initiated close: closing until the peer's close, messages still delivered, no pong")
    func localClose() throws {
        var connection = client()
        try connection.close(code: .goingAway, reason: "background")
        #expect(connection.state == .closing)
        #expect(connection.sentCloseCode == .goingAway)
        #expect(outboundFrames(&connection) == [WebSocketFrame(opcode: .close, maskingKey: WebSocketMaskingKey(TestRandom(seed: 42).nextFrameKey()),
                                                                payload: closeBody(1001, Array("background".utf8)))])
        #expect(throws: WebSocketSendError.self) { try connection.send(text: "after close") }
        #expect(throws: WebSocketSendError.self) { try connection.close() }
        let events = connection.receive(fromServer(1, hello) + fromServer(9, [1]) + fromServer(8, closeBody(1001)))
        #expect(events == [.text("Hello"), .ping([1]), .closed(code: .goingAway, reason: "")])
        #expect(connection.state == .closed)
        #expect(!connection.hasOutbound)  // no pong after our close, no second close
    }

    @Test("transparent mode: pings and the peer's close frame are reported, never answered; close() answers")
    func transparentClose() throws {
        var connection = server(.transparent())
        #expect(connection.configuration.isTransparent)
        let events = connection.receive(fromClient(9, [7]) + fromClient(fin: false, 1, Array("He".utf8)) + fromClient(0, Array("llo".utf8))
                                        + fromClient(8, closeBody(4001, Array("bye".utf8))) + fromClient(1, hello))
        #expect(events == [.ping([7]), .text("Hello"), .closeReceived(code: WebSocketCloseCode(4001), reason: "bye")])
        #expect(!connection.hasOutbound, "no pong, no close echo")
        #expect(connection.state == .closeReceived)
        #expect(connection.receivedCloseCode == WebSocketCloseCode(4001))
        #expect(connection.receivedCloseReason == "bye")
        #expect(connection.receive(fromClient(1, hello)) == [], "nothing is parsed after the peer's close")
        // Messages may still go out (what was in flight), then the answer ends the connection.
        try connection.send(text: "last words")
        try connection.close(code: WebSocketCloseCode(4002), reason: "forwarded")
        #expect(connection.state == .closed)
        #expect(connection.sentCloseCode == WebSocketCloseCode(4002))
        #expect(outboundFrames(&connection) == [WebSocketFrame(opcode: .text, payload: Array("last words".utf8)),
                                                WebSocketFrame(opcode: .close, payload: closeBody(4002, Array("forwarded".utf8)))])
        #expect(throws: WebSocketSendError.self) { try connection.send(text: "after") }
        #expect(connection.transportClosed() == [])
    }

    @Test("transparent mode: a transport lost while the close frame waits for its answer ends with the peer's code")
    func transparentTransportLost() throws {
        var connection = client(.transparent())
        #expect(connection.receive(fromServer(8, closeBody(1012, Array("restart".utf8)))) == [.closeReceived(code: WebSocketCloseCode(1012), reason: "restart")])
        #expect(connection.transportClosed() == [.closed(code: WebSocketCloseCode(1012), reason: "restart")])
        #expect(connection.state == .closed)
        // A close this end started still completes as usual in transparent mode.
        var initiator = client(.transparent())
        try initiator.close(code: .goingAway)
        #expect(initiator.state == .closing)
        #expect(initiator.receive(fromServer(8, closeBody(1001))) == [.closed(code: .goingAway, reason: "")])
        #expect(initiator.state == .closed)
    }

    @Test("every close code the RFC allows is accepted and echoed", arguments: [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] as [UInt16])
    func validCloseCodes(code: UInt16) {
        var connection = server()
        #expect(connection.receive(fromClient(8, closeBody(code))) == [.closed(code: WebSocketCloseCode(code), reason: "")])
        #expect(outboundFrames(&connection).first?.payload == closeBody(code))
    }

    @Test("transport loss while waiting for the peer's close is also 1006")
    func transportLossWhileClosing() throws {
        var connection = server()
        try connection.close(code: .goingAway)
        #expect(connection.transportClosed() == [.closed(code: .abnormalClosure, reason: "")])
        #expect(connection.receive(fromClient(8, closeBody(1000))) == [])
    }

    @Test("transport loss before the close handshake is an abnormal closure (1006)")
    func transportLoss() {
        var connection = client()
        _ = connection.receive(fromServer(fin: false, 1, Array("par".utf8)))
        #expect(connection.transportClosed() == [.closed(code: .abnormalClosure, reason: "")])
        #expect(connection.state == .closed)
        #expect(connection.transportClosed() == [])
    }

    // MARK: Protocol errors

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var name: String
        var role: WebSocketRole
        var bytes: [UInt8]
        var kind: WebSocketProtocolError.Kind
        var code: UInt16
        var configuration = WebSocketConfiguration()
        var testDescription: String { name }
    }

    static let errorCases: [ErrorCase] = [
        ErrorCase(name: "reserved bits", role: .server, bytes: fromClient(rsv: 2, 1, hello), kind: .reservedBitsSet, code: 1002),
        ErrorCase(name: "bad opcode", role: .server, bytes: fromClient(0x7), kind: .unknownOpcode, code: 1002),
        ErrorCase(name: "unmasked client frame at server", role: .server, bytes: fromServer(1, hello),
                  kind: .unmaskedFrameFromClient, code: 1002),
        ErrorCase(name: "masked server frame at client", role: .client, bytes: fromClient(1, hello),
                  kind: .maskedFrameFromServer, code: 1002),
        ErrorCase(name: "fragmented control frame", role: .server, bytes: fromClient(fin: false, 9, hello),
                  kind: .fragmentedControlFrame, code: 1002),
        ErrorCase(name: "control frame over 125 bytes", role: .server, bytes: fromClient(10, [UInt8](repeating: 1, count: 126)),
                  kind: .controlFrameTooLarge, code: 1002),
        ErrorCase(name: "continuation without start", role: .server, bytes: fromClient(0, hello),
                  kind: .unexpectedContinuation, code: 1002),
        ErrorCase(name: "new data frame mid-fragment", role: .server,
                  bytes: fromClient(fin: false, 1, Array("He".utf8)) + fromClient(2, [1]),
                  kind: .expectedContinuation, code: 1002),
        ErrorCase(name: "close code 1005 on the wire", role: .server, bytes: fromClient(8, closeBody(1005)),
                  kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 1006 on the wire", role: .client, bytes: fromServer(8, closeBody(1006)),
                  kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 999", role: .server, bytes: fromClient(8, closeBody(999)), kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 1004", role: .server, bytes: fromClient(8, closeBody(1004)), kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 1015", role: .server, bytes: fromClient(8, closeBody(1015)), kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 2999", role: .server, bytes: fromClient(8, closeBody(2999)), kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "close code 5000", role: .server, bytes: fromClient(8, closeBody(5000)), kind: .invalidCloseCode, code: 1002),
        ErrorCase(name: "1-byte close", role: .server, bytes: fromClient(8, [0x03]), kind: .invalidClosePayloadLength, code: 1002),
        ErrorCase(name: "non-minimal length", role: .server, bytes: fromClient(2, hello, lengthForm: 16),
                  kind: .nonMinimalLength, code: 1002),
        ErrorCase(name: "invalid UTF-8 in text", role: .server, bytes: fromClient(1, [0x48, 0xC3, 0x28]),
                  kind: .invalidUTF8, code: 1007),
        ErrorCase(name: "surrogate in text", role: .client, bytes: fromServer(1, [0xED, 0xA0, 0x80]),
                  kind: .invalidUTF8, code: 1007),
        ErrorCase(name: "overlong encoding in text", role: .client, bytes: fromServer(1, [0xC0, 0xAF]),
                  kind: .invalidUTF8, code: 1007),
        ErrorCase(name: "invalid UTF-8 in a later fragment", role: .server,
                  bytes: fromClient(fin: false, 1, Array("ok".utf8)) + fromClient(0, [0xFF]),
                  kind: .invalidUTF8, code: 1007),
        ErrorCase(name: "text ending mid-character", role: .server,
                  bytes: fromClient(fin: false, 1, [0xE2, 0x82]) + fromClient(0, []),
                  kind: .invalidUTF8, code: 1007),
        ErrorCase(name: "invalid UTF-8 in close reason", role: .server, bytes: fromClient(8, closeBody(1000, [0x80])),
                  kind: .invalidUTF8InCloseReason, code: 1007),
        ErrorCase(name: "frame over the limit", role: .server, bytes: fromClient(2, [UInt8](repeating: 0, count: 65)),
                  kind: .frameTooLarge, code: 1009, configuration: WebSocketConfiguration(maxFrameSize: 64, maxMessageSize: 100)),
        ErrorCase(name: "single-frame message over the message limit", role: .server,
                  bytes: fromClient(2, [UInt8](repeating: 0, count: 101)),
                  kind: .messageTooLarge, code: 1009, configuration: WebSocketConfiguration(maxFrameSize: 200, maxMessageSize: 100)),
        ErrorCase(name: "fragmented message over the limit", role: .server,
                  bytes: fromClient(fin: false, 2, [UInt8](repeating: 0, count: 60)) + fromClient(0, [UInt8](repeating: 0, count: 41)),
                  kind: .messageTooLarge, code: 1009, configuration: WebSocketConfiguration(maxFrameSize: 64, maxMessageSize: 100)),
    ]

    @Test("protocol errors fail the connection with the right close code", arguments: errorCases)
    func protocolError(_ c: ErrorCase) throws {
        var connection = WebSocketConnection(role: c.role, configuration: c.configuration, maskingKeys: TestRandom(seed: 5))
        let events = connection.receive(c.bytes + (c.role == .server ? fromClient(1, hello) : fromServer(1, hello)))
        let last = try #require(events.last)
        guard case .protocolError(let error) = last else {
            Issue.record("expected a protocol error, got \(events)")
            return
        }
        #expect(error.kind == c.kind)
        #expect(error.closeCode.rawValue == c.code)
        #expect(!error.message.isEmpty)
        #expect(connection.state == .closed)
        #expect(connection.sentCloseCode?.rawValue == c.code)
        // Exactly one close frame with the code goes out; the trailing "Hello" was not parsed.
        let frames = outboundFrames(&connection)
        #expect(frames.count == 1)
        #expect(frames.first?.opcode == .close)
        #expect(frames.first.map { Array($0.payload.prefix(2)) } == closeBody(c.code))
        #expect(connection.receive(fromClient(1, hello)) == [])
    }

    @Test("the same errors are found when the bytes arrive one at a time", arguments: errorCases)
    func protocolErrorByteByByte(_ c: ErrorCase) {
        var connection = WebSocketConnection(role: c.role, configuration: c.configuration, maskingKeys: TestRandom(seed: 5))
        let events = feed(&connection, c.bytes.map { [$0][...] })
        if case .protocolError(let error) = events.last {
            #expect(error.kind == c.kind)
        } else {
            Issue.record("expected a protocol error, got \(events)")
        }
    }

    @Test("a protocol error after our close sends no second close frame")
    func errorWhileClosing() throws {
        var connection = server()
        try connection.close(code: .normalClosure)
        _ = connection.takeOutbound()
        let events = connection.receive(fromClient(0x3))
        #expect(events.count == 1)
        #expect(connection.state == .closed)
        #expect(connection.sentCloseCode == .normalClosure)
        #expect(!connection.hasOutbound)
    }

    @Test("UTF-8 error offsets point at the bad byte in the stream")
    func utf8ErrorOffset() {
        var connection = client()
        let events = connection.receive(fromServer(1, hello) + fromServer(1, [0x41, 0x42, 0xFE]))
        guard case .protocolError(let error) = events.last else {
            Issue.record("expected a protocol error")
            return
        }
        // 7 bytes of the first frame, 2 of the second header, then "AB".
        #expect(error.streamOffset == 7 + 2 + 2)
    }

    // MARK: The 32 MiB limit

    @Test("the default limit is 32 MiB: a 32 MiB message passes, one byte more fails with 1009 from the header alone")
    func realLimitBoundary() throws {
        let limit = WebSocketConfiguration.defaultMaxMessageSize
        #expect(limit == 33_554_432)
        // One 32 MiB buffer: a 10-byte header then zero bytes. The connection parses it straight from the
        // input, so the only other 32 MiB is the delivered message.
        var frame = [UInt8](repeating: 0, count: 10 + limit)
        frame[0] = 0x82
        frame[1] = 127
        frame[6] = 0x02  // 0x0000_0000_0200_0000 = 32 MiB
        var connection = client()
        let events = connection.receive(frame)
        #expect(events.count == 1)
        if case .binary(let payload) = events.first {
            #expect(payload.count == limit)
        } else {
            Issue.record("expected one binary message")
        }
        // One byte more: refused as soon as the 10-byte header is in, without any payload.
        var tooBig = client()
        let header: [UInt8] = [0x82, 127, 0, 0, 0, 0, 0x02, 0, 0, 1]
        let refusal = tooBig.receive(header)
        guard case .protocolError(let error) = refusal.first else {
            Issue.record("expected a protocol error, got \(refusal)")
            return
        }
        #expect(error.closeCode == .messageTooBig)
        #expect(error.kind == .frameTooLarge)
        // Fragments adding up to one byte over the limit fail as a message.
        var fragmented = client(WebSocketConfiguration(maxFrameSize: limit))
        _ = fragmented.receive(fromServer(fin: false, 2, [1]))
        // The header of a 32 MiB continuation: the frame size is allowed, but 1 + 32 MiB is over the
        // message limit, and that is known from the header, before any payload is buffered.
        let over = fragmented.receive([0x80, 127, 0, 0, 0, 0, 0x02, 0, 0, 0])
        guard case .protocolError(let messageError) = over.first else {
            Issue.record("expected a protocol error, got \(over)")
            return
        }
        #expect(messageError.kind == .messageTooLarge)
        #expect(messageError.closeCode == .messageTooBig)
    }
}

extension TestRandom {
    /// The first masking key of a fresh generator (for expected outbound frames).
    func nextFrameKey() -> UInt32 {
        var copy = self
        return copy.nextMaskingKey()
    }
}
