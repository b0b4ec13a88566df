/// A violation of RFC 6455 by the peer, found while parsing its frames or assembling its messages.
///
/// Every error maps to the close code the connection sends before it fails (``closeCode``): 1002 for
/// framing violations, 1007 for invalid UTF-8, 1009 for sizes over the limit. ``streamOffset`` is the
/// offset, counted in bytes from the first byte after the HTTP handshake, of the frame (or byte) at fault.
public struct WebSocketProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a closed set of cases (switch on it; the message is for people).
    public enum Kind: Hashable, Sendable {
        /// RSV1, RSV2 or RSV3 set although no extension was negotiated (RFC 6455 §5.2). Close 1002.
        case reservedBitsSet
        /// Opcode 0x3-0x7 or 0xB-0xF (RFC 6455 §5.2). Close 1002.
        case unknownOpcode
        /// A 16-bit length below 126 or a 64-bit length below 65536 (RFC 6455 §5.2: "the minimal number
        /// of bytes MUST be used"). Close 1002.
        case nonMinimalLength
        /// A 64-bit length with its most significant bit set (RFC 6455 §5.2). Close 1002.
        case lengthMostSignificantBitSet
        /// A masked frame received by a client (RFC 6455 §5.1). Close 1002.
        case maskedFrameFromServer
        /// An unmasked frame received by a server (RFC 6455 §5.1). Close 1002.
        case unmaskedFrameFromClient
        /// A control frame with FIN clear (RFC 6455 §5.5). Close 1002.
        case fragmentedControlFrame
        /// A control frame with a payload over 125 bytes (RFC 6455 §5.5). Close 1002.
        case controlFrameTooLarge
        /// A continuation frame with no fragmented message in progress (RFC 6455 §5.4). Close 1002.
        case unexpectedContinuation
        /// A text or binary frame while a fragmented message is in progress (RFC 6455 §5.4). Close 1002.
        case expectedContinuation
        /// A close frame with a 1-byte body (RFC 6455 §5.5.1). Close 1002.
        case invalidClosePayloadLength
        /// A close frame whose status code may not be sent (RFC 6455 §7.4). Close 1002.
        case invalidCloseCode
        /// A text message that is not valid UTF-8 (RFC 6455 §8.1). Close 1007.
        case invalidUTF8
        /// A close reason that is not valid UTF-8 (RFC 6455 §5.5.1). Close 1007.
        case invalidUTF8InCloseReason
        /// A frame whose declared payload length exceeds the configured maximum frame size. Close 1009.
        case frameTooLarge
        /// A (fragmented) message whose total length exceeds the configured maximum. Close 1009.
        case messageTooLarge
    }

    /// What went wrong.
    public var kind: Kind
    /// A sentence that says what was received, where, and what the peer should have sent.
    public var message: String
    /// Byte offset in the frame stream (0 = first byte after the handshake) where the problem was found.
    public var streamOffset: Int

    /// Makes an error; `message` should say what, where and what was expected.
    public init(_ kind: Kind, _ message: String, streamOffset: Int) {
        self.kind = kind
        self.message = message
        self.streamOffset = streamOffset
    }

    /// The close code to send when failing the connection because of this error (RFC 6455 §7.4.1).
    public var closeCode: WebSocketCloseCode {
        switch kind {
        case .invalidUTF8, .invalidUTF8InCloseReason: .invalidPayloadData
        case .frameTooLarge, .messageTooLarge: .messageTooBig
        default: .protocolError
        }
    }

    /// `WebSocket protocol error at stream byte N: <message> (close 1002 (protocol error))`.
    public var description: String {
        "WebSocket protocol error at stream byte \(streamOffset): \(message) (close \(closeCode))"
    }
}
