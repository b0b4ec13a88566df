/// Which end of the connection this codec plays. It decides masking (RFC 6455 §5.1): a client masks every
/// frame it sends and rejects masked frames; a server sends unmasked frames and rejects unmasked ones.
public enum WebSocketRole: Hashable, Sendable {
    /// The end that sent the upgrade request.
    case client
    /// The end that answered it.
    case server
}

/// An incremental RFC 6455 frame parser: a value type over an internal buffer, with no I/O and no clock.
///
/// Feed bytes as they arrive with ``append(_:)-(UnsafeRawBufferPointer)``, then call ``nextFrame()``
/// until it returns nil (more bytes needed). Frames come out unmasked. The parser checks everything that
/// one frame alone can violate (reserved bits, opcodes, masking direction, control frame rules, minimal
/// length encoding, the 64-bit length MSB, ``maxFrameSize``); rules that span frames (fragmentation order,
/// UTF-8, close codes) belong to ``WebSocketConnection``.
///
/// Memory is bounded: the declared length of a frame is checked against ``maxFrameSize`` as soon as the
/// header is complete, and nothing is reserved ahead of the bytes actually received, so a header that
/// announces 2^62 bytes costs nothing. After an error the parser stays failed and rethrows that error.
///
/// Non-minimal length encodings (e.g. a 16-bit length of 5) are rejected with close 1002: RFC 6455 §5.2
/// says the minimal encoding MUST be used, and every known peer (browsers, python websockets, swift-nio)
/// sends minimal lengths, so accepting them would only hide broken peers.
public struct WebSocketFrameParser: Sendable {
    /// The role of the endpoint that runs this parser (decides which masking direction is legal).
    public let role: WebSocketRole
    /// The largest payload a single frame may declare; larger ones fail with close 1009.
    public var maxFrameSize: Int

    private var buffer: [UInt8] = []
    private var readIndex = 0
    /// Stream offset of `buffer[readIndex]`.
    private var offset = 0
    private var failure: WebSocketProtocolError?
    /// Set by ``WebSocketConnection``: the most a text or binary frame may declare (the message limit).
    var newMessageBudget = Int.max
    /// Set by ``WebSocketConnection``: the most a continuation frame may declare (what is left of the
    /// message limit), so an oversized fragmented message fails at the header, before its bytes arrive.
    var continuationBudget = Int.max

    /// A parser for `role`, rejecting frames whose payload exceeds `maxFrameSize` bytes.
    public init(role: WebSocketRole, maxFrameSize: Int = WebSocketConfiguration.defaultMaxMessageSize) {
        self.role = role
        self.maxFrameSize = max(0, maxFrameSize)
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Offset in the stream of the next byte to parse (the start of the next frame).
    public var streamOffset: Int { offset }

    /// The error the parser failed with, if it did.
    public var error: WebSocketProtocolError? { failure }

    /// Appends received bytes. Ignored once the parser has failed.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, !bytes.isEmpty else { return }
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Appends received bytes. Ignored once the parser has failed.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends received bytes. Ignored once the parser has failed.
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { append($0) }
    }

    private mutating func compact() {
        if readIndex == 0 { return }
        if readIndex >= buffer.count {
            // Drop a large buffer's storage after a big frame so it is not held forever.
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
        } else {
            buffer.removeSubrange(0..<readIndex)
        }
        readIndex = 0
    }

    /// The next complete frame from the buffered bytes, or nil when more bytes are needed.
    /// - Throws: ``WebSocketProtocolError`` when the bytes violate RFC 6455; the parser then stays failed.
    public mutating func nextFrame() throws(WebSocketProtocolError) -> WebSocketFrame? {
        if let failure { throw failure }
        do throws(WebSocketProtocolError) {
            let start = readIndex
            let (role, maxFrameSize, frameOffset) = (role, maxFrameSize, offset)
            let budgets = (newMessageBudget, continuationBudget)
            let outcome = buffer.withUnsafeBytes { raw in
                Result { () throws(WebSocketProtocolError) in
                    try Self.parse(UnsafeRawBufferPointer(rebasing: raw[start...]), role: role,
                                   maxFrameSize: maxFrameSize, budgets: budgets, frameOffset: frameOffset)
                }
            }
            guard let (frame, length) = try outcome.get() else { return nil }
            readIndex += length
            offset += length
            return frame
        } catch {
            failure = error
            throw error
        }
    }

    /// The next complete frame from the buffered bytes followed by `input[cursor...]`, without copying
    /// `input` into the buffer when it can: if nothing is buffered and `input[cursor...]` starts with a
    /// complete frame, the frame is read straight from `input` and `cursor` moves past it. Otherwise the
    /// rest of `input` is appended to the buffer (`cursor` becomes `input.count`) and parsing goes on from
    /// there. Call it until it returns nil; then every byte of `input` has been taken.
    /// - Throws: ``WebSocketProtocolError`` when the bytes violate RFC 6455; the parser then stays failed.
    public mutating func nextFrame(in input: UnsafeRawBufferPointer, cursor: inout Int)
        throws(WebSocketProtocolError) -> WebSocketFrame? {
        if let failure { throw failure }
        let begin = min(max(cursor, 0), input.count)
        if bufferedByteCount == 0 && begin < input.count {
            do throws(WebSocketProtocolError) {
                if let (frame, length) = try Self.parse(UnsafeRawBufferPointer(rebasing: input[begin...]), role: role,
                                                         maxFrameSize: maxFrameSize,
                                                         budgets: (newMessageBudget, continuationBudget),
                                                         frameOffset: offset) {
                    cursor = begin + length
                    offset += length
                    return frame
                }
            } catch {
                failure = error
                throw error
            }
        }
        if begin < input.count {
            append(UnsafeRawBufferPointer(rebasing: input[begin...]))
        }
        cursor = input.count
        return try nextFrame()
    }

    /// Parses one frame at the start of `view`: the frame and its length on the wire, or nil when `view`
    /// holds only part of it. Errors are detected as early as the bytes allow (a bad first byte fails
    /// before the second arrives; an oversized length fails before the payload arrives).
    private static func parse(_ view: UnsafeRawBufferPointer, role: WebSocketRole, maxFrameSize: Int,
                              budgets: (newMessage: Int, continuation: Int), frameOffset: Int) throws(WebSocketProtocolError) -> (WebSocketFrame, Int)? {
        let available = view.count
        guard available >= 1 else { return nil }
        let b0 = view[0]
        let fin = b0 & 0x80 != 0
        if b0 & 0x70 != 0 {
            throw WebSocketProtocolError(
                .reservedBitsSet,
                "frame header byte 0x\(hex(b0)) has reserved bits RSV1-3 = \((b0 >> 4) & 7) set but no extension was negotiated; the peer must send RSV bits 0",
                streamOffset: frameOffset)
        }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
            throw WebSocketProtocolError(
                .unknownOpcode,
                "opcode 0x\(hex(b0 & 0x0F)) is reserved; valid opcodes are 0x0-0x2 and 0x8-0xA",
                streamOffset: frameOffset)
        }
        if opcode.isControl && !fin {
            throw WebSocketProtocolError(
                .fragmentedControlFrame,
                "\(opcode) control frame has FIN clear; control frames must not be fragmented",
                streamOffset: frameOffset)
        }
        guard available >= 2 else { return nil }
        let b1 = view[1]
        let masked = b1 & 0x80 != 0
        let length7 = Int(b1 & 0x7F)
        switch role {
        case .server where !masked:
            throw WebSocketProtocolError(
                .unmaskedFrameFromClient,
                "unmasked \(opcode) frame from the client; a client must mask every frame it sends",
                streamOffset: frameOffset)
        case .client where masked:
            throw WebSocketProtocolError(
                .maskedFrameFromServer,
                "masked \(opcode) frame from the server; a server must not mask the frames it sends",
                streamOffset: frameOffset)
        default:
            break
        }
        if opcode.isControl && length7 > 125 {
            throw WebSocketProtocolError(
                .controlFrameTooLarge,
                "\(opcode) control frame declares a payload longer than 125 bytes (length code \(length7))",
                streamOffset: frameOffset)
        }
        var headerLength = 2
        var length: UInt64
        switch length7 {
        case 126:
            headerLength = 4
            guard available >= headerLength else { return nil }
            length = UInt64(view[2]) << 8 | UInt64(view[3])
            if length < 126 {
                throw WebSocketProtocolError(
                    .nonMinimalLength,
                    "payload length \(length) is encoded in 16 bits; lengths below 126 must use the 7-bit form",
                    streamOffset: frameOffset)
            }
        case 127:
            headerLength = 10
            guard available >= headerLength else { return nil }
            length = 0
            for i in 2..<10 { length = length << 8 | UInt64(view[i]) }
            if length & (1 << 63) != 0 {
                throw WebSocketProtocolError(
                    .lengthMostSignificantBitSet,
                    "64-bit payload length 0x\(String(length, radix: 16)) has its most significant bit set",
                    streamOffset: frameOffset)
            }
            if length < 65536 {
                throw WebSocketProtocolError(
                    .nonMinimalLength,
                    "payload length \(length) is encoded in 64 bits; lengths below 65536 must use a shorter form",
                    streamOffset: frameOffset)
            }
        default:
            length = UInt64(length7)
        }
        if length > UInt64(maxFrameSize) {
            throw WebSocketProtocolError(
                .frameTooLarge,
                "\(opcode) frame declares \(length) payload bytes, over the limit of \(maxFrameSize) bytes",
                streamOffset: frameOffset)
        }
        let budget = opcode == .continuation ? budgets.continuation : (opcode.isControl ? Int.max : budgets.newMessage)
        if length > UInt64(max(0, budget)) {
            throw WebSocketProtocolError(
                .messageTooLarge,
                "\(opcode) frame of \(length) bytes would take its message over the limit (\(max(0, budget)) bytes left)",
                streamOffset: frameOffset)
        }
        let payloadLength = Int(length)  // <= maxFrameSize, so it fits.
        var key: WebSocketMaskingKey?
        if masked {
            guard available >= headerLength + 4 else { return nil }
            key = WebSocketMaskingKey(view[headerLength], view[headerLength + 1], view[headerLength + 2],
                                      view[headerLength + 3])
            headerLength += 4
        }
        guard available - headerLength >= payloadLength else { return nil }
        var payload = [UInt8](UnsafeRawBufferPointer(rebasing: view[headerLength..<(headerLength + payloadLength)]))
        if let key {
            payload.withUnsafeMutableBytes { WebSocketMasking.apply(key, to: $0) }
        }
        return (WebSocketFrame(fin: fin, opcode: opcode, maskingKey: key, payload: payload), headerLength + payloadLength)
    }
}

/// Two lowercase hex digits.
func hex(_ byte: UInt8) -> String {
    let s = String(byte, radix: 16)
    return s.count == 1 ? "0" + s : s
}
