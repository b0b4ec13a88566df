/// Limits and options of a ``WebSocketConnection``.
public struct WebSocketConfiguration: Hashable, Sendable {
    /// 32 MiB: the maximum frame and message size of the PlanToCode relay (SPEC.md A4, PROTOCOL.md §1).
    public static let defaultMaxMessageSize = 32 * 1024 * 1024

    /// Largest payload one received frame may declare; over it the connection fails with close 1009.
    public var maxFrameSize: Int
    /// Largest received message (sum of its fragments); over it the connection fails with close 1009.
    public var maxMessageSize: Int
    /// When set, outgoing text and binary messages longer than this are split into frames of at most this
    /// many payload bytes (for interop tests of fragmentation). nil sends every message as one frame.
    public var outboundFragmentSize: Int?
    /// Whether a received ping is answered with a pong carrying the same payload (RFC 6455 §5.5.2).
    public var automaticPong: Bool
    /// Whether a close frame received while open is answered at once with a close frame echoing its code
    /// (RFC 6455 §5.5.1). When false the connection reports `.closeReceived`, moves to `.closeReceived`
    /// and waits for ``WebSocketConnection/close(code:reason:)`` to send the answer (a proxy forwards the
    /// other side's close frame as the answer).
    public var automaticCloseReply: Bool

    /// A configuration; the defaults are the relay's: 32 MiB frames and messages, no outbound
    /// fragmentation, automatic pongs and close replies.
    public init(maxFrameSize: Int = defaultMaxMessageSize, maxMessageSize: Int = defaultMaxMessageSize,
                outboundFragmentSize: Int? = nil, automaticPong: Bool = true, automaticCloseReply: Bool = true) {
        self.maxFrameSize = max(0, maxFrameSize)
        self.maxMessageSize = max(0, maxMessageSize)
        self.outboundFragmentSize = outboundFragmentSize.map { max(1, $0) }
        self.automaticPong = automaticPong
        self.automaticCloseReply = automaticCloseReply
    }

    /// Transparent mode, for a proxy: pings, pongs and close frames are reported and never answered by
    /// the codec (the driver forwards them and forwards the other side's answers back); messages are still
    /// delivered whole (fragments reassembled) and the size limits hold.
    public static func transparent(maxMessageSize: Int = defaultMaxMessageSize) -> WebSocketConfiguration {
        WebSocketConfiguration(maxFrameSize: maxMessageSize, maxMessageSize: maxMessageSize,
                               automaticPong: false, automaticCloseReply: false)
    }

    /// Whether neither pings nor close frames are answered by the codec (see ``transparent(maxMessageSize:)``).
    public var isTransparent: Bool { !automaticPong && !automaticCloseReply }
}

/// Something the peer did, as reported by ``WebSocketConnection/receive(_:)-([UInt8])``.
public enum WebSocketEvent: Hashable, Sendable {
    /// A complete text message (fragments reassembled, UTF-8 validated).
    case text(String)
    /// A complete binary message (fragments reassembled).
    case binary([UInt8])
    /// A ping; when automatic pongs are on, the pong is already queued in the outbound bytes.
    case ping([UInt8])
    /// A pong (solicited or not).
    case pong([UInt8])
    /// Transparent mode only (``WebSocketConfiguration/automaticCloseReply`` off): the peer's close frame
    /// (code 1005 when it had no body). Nothing was answered: the connection is `.closeReceived` until
    /// ``WebSocketConnection/close(code:reason:)`` sends this end's close frame, which ends it.
    case closeReceived(code: WebSocketCloseCode, reason: String)
    /// The connection is closed. `code` is the peer's close code (1005 when its close frame had no body),
    /// or 1006 after ``WebSocketConnection/transportClosed()`` without a close handshake.
    case closed(code: WebSocketCloseCode, reason: String)
    /// The peer broke the protocol; a close frame with `error.closeCode` is queued (unless a close was
    /// already sent) and the connection is closed. This is the last event of the connection.
    case protocolError(WebSocketProtocolError)
}

/// A send that the connection refused, with nothing written to the outbound bytes.
public struct WebSocketSendError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Why the send was refused.
    public enum Kind: Hashable, Sendable {
        /// The connection is closing or closed: after a close frame nothing more may be sent.
        case notOpen
        /// A ping or pong payload over 125 bytes.
        case controlPayloadTooLarge
        /// A close code that may not appear on the wire (e.g. 1005, 1006, 1015, 2000).
        case invalidCloseCode
        /// A close reason over 123 bytes of UTF-8.
        case closeReasonTooLong
    }

    /// Why the send was refused.
    public var kind: Kind
    /// What was refused and what to do instead.
    public var message: String

    /// Makes an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    public var description: String { "WebSocket send refused: \(message)" }
}

/// A sans-IO RFC 6455 connection after the opening handshake: feed it received bytes, get events; ask it
/// to send, then take the bytes to write. Modelled on python websockets' `Protocol`
/// (`receive_data` / `events_received` / `data_to_send`).
///
/// It reassembles fragmented messages (control frames may arrive between fragments), answers pings,
/// runs the close handshake (echoing the peer's code; in transparent mode,
/// ``WebSocketConfiguration/transparent(maxMessageSize:)``, it answers neither and reports both), enforces the message size limit (close 1009),
/// fails on protocol errors (close 1002) and on invalid UTF-8 in text messages or close reasons
/// (close 1007). It reads no clock and no socket: the driver owns timeouts (e.g. how long to wait for
/// the peer's close frame after ``close(code:reason:)``, then drop the TCP connection) and decides when
/// to close TCP once ``state`` is `.closed` (RFC 6455 §7.1.1: the server closes TCP first; a client
/// waits a little for the server to do so).
public struct WebSocketConnection: Sendable {
    /// Where the connection is in its life.
    public enum State: Hashable, Sendable {
        /// Messages flow both ways.
        case open
        /// This end sent a close frame and waits for the peer's; received messages are still delivered.
        case closing
        /// Transparent mode: the peer's close frame arrived and is not answered yet. Messages may still be
        /// sent (RFC 6455 §5.5.1 lets an endpoint finish what it is sending); nothing more is parsed;
        /// ``WebSocketConnection/close(code:reason:)`` answers and closes.
        case closeReceived
        /// Both close frames were exchanged, or the connection failed: nothing more is parsed or sent.
        case closed
    }

    /// This end's role (decides masking).
    public let role: WebSocketRole
    /// Limits and options.
    public let configuration: WebSocketConfiguration
    /// Where the connection is in its life.
    public private(set) var state: State = .open
    /// The close code this end put on the wire (1005 when it sent a close frame without a body).
    public private(set) var sentCloseCode: WebSocketCloseCode?
    /// The close code the peer put on the wire (1005 when its close frame had no body).
    public private(set) var receivedCloseCode: WebSocketCloseCode?
    /// The reason of the peer's close frame, once one arrived.
    public private(set) var receivedCloseReason: String?

    private var parser: WebSocketFrameParser
    private var maskingKeys: (any MaskingKeySource)?
    private var outbound: [UInt8] = []
    /// Opcode (text or binary) of the fragmented message in progress.
    private var fragmentedOpcode: WebSocketOpcode?
    private var fragments: [UInt8] = []
    private var utf8 = UTF8Validator()

    /// A connection for `role`. A client masks its frames with keys from `maskingKeys` (the system's
    /// secure generator when nil); a server ignores it.
    public init(role: WebSocketRole, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                maskingKeys: (any MaskingKeySource)? = nil) {
        self.role = role
        self.configuration = configuration
        self.parser = WebSocketFrameParser(role: role, maxFrameSize: configuration.maxFrameSize)
        self.parser.newMessageBudget = configuration.maxMessageSize
        self.parser.continuationBudget = configuration.maxMessageSize
        if role == .client {
            self.maskingKeys = maskingKeys ?? SystemRandomMaskingKeySource()
        }
    }

    // MARK: Outbound

    /// True when bytes are waiting in the outbound buffer.
    public var hasOutbound: Bool { !outbound.isEmpty }

    /// The bytes to write to the transport, in order; the buffer is emptied.
    public mutating func takeOutbound() -> [UInt8] {
        defer { outbound = [] }
        return outbound
    }

    /// Queues a text message.
    /// - Throws: ``WebSocketSendError`` `.notOpen` when a close frame was already sent or received.
    public mutating func send(text: String) throws(WebSocketSendError) {
        try requireSendable("a text message")
        var text = text
        text.withUTF8 { writeMessage(.text, UnsafeRawBufferPointer($0)) }
    }

    /// Queues a binary message.
    /// - Throws: ``WebSocketSendError`` `.notOpen` when a close frame was already sent or received.
    public mutating func send(binary: [UInt8]) throws(WebSocketSendError) {
        try requireSendable("a binary message")
        binary.withUnsafeBytes { writeMessage(.binary, $0) }
    }

    /// Queues a ping with `payload` (at most 125 bytes).
    /// - Throws: ``WebSocketSendError`` when not open or the payload is too large.
    public mutating func ping(_ payload: [UInt8] = []) throws(WebSocketSendError) {
        try requireSendable("a ping")
        try requireControlPayload(payload, "ping")
        writeFrame(.ping, fin: true, payload)
    }

    /// Queues an unsolicited pong with `payload` (at most 125 bytes), e.g. as a unidirectional heartbeat.
    /// - Throws: ``WebSocketSendError`` when not open or the payload is too large.
    public mutating func pong(_ payload: [UInt8] = []) throws(WebSocketSendError) {
        try requireSendable("a pong")
        try requireControlPayload(payload, "pong")
        writeFrame(.pong, fin: true, payload)
    }

    /// Starts the close handshake: queues a close frame and moves to `.closing`; in `.closeReceived`
    /// (transparent mode) it answers the peer's close frame and moves to `.closed`. A nil `code` sends an
    /// empty close body (then `reason` must be empty).
    /// - Throws: ``WebSocketSendError`` when closing or closed, the code may not be sent (1005, 1006,
    ///   1015, ...), or the reason is over 123 bytes of UTF-8.
    public mutating func close(code: WebSocketCloseCode? = .normalClosure, reason: String = "") throws(WebSocketSendError) {
        try requireSendable("a close frame")
        var body: [UInt8] = []
        if let code {
            guard code.isSendable else {
                throw WebSocketSendError(
                    .invalidCloseCode,
                    "close code \(code) may not be sent; use 1000-1003, 1007-1014 or 3000-4999")
            }
            let reasonBytes = Array(reason.utf8)
            guard reasonBytes.count <= 123 else {
                throw WebSocketSendError(
                    .closeReasonTooLong,
                    "close reason is \(reasonBytes.count) bytes of UTF-8; at most 123 fit in a close frame")
            }
            body = [UInt8(truncatingIfNeeded: code.rawValue >> 8), UInt8(truncatingIfNeeded: code.rawValue)]
            body += reasonBytes
        } else if !reason.isEmpty {
            throw WebSocketSendError(.invalidCloseCode, "a close reason needs a close code; pass one or an empty reason")
        }
        writeFrame(.close, fin: true, body)
        sentCloseCode = code ?? .noStatusReceived
        state = state == .closeReceived ? .closed : .closing
    }

    /// Sending is allowed while open, and in `.closeReceived` (transparent mode) until this end's close.
    private func requireSendable(_ what: String) throws(WebSocketSendError) {
        guard state == .open || state == .closeReceived else {
            throw WebSocketSendError(
                .notOpen, "cannot send \(what): the connection is \(state) (a close frame was already sent or received)")
        }
    }

    private func requireControlPayload(_ payload: [UInt8], _ what: String) throws(WebSocketSendError) {
        guard payload.count <= 125 else {
            throw WebSocketSendError(
                .controlPayloadTooLarge, "\(what) payload is \(payload.count) bytes; control frames carry at most 125")
        }
    }

    private mutating func nextKey() -> WebSocketMaskingKey? {
        // `maskingKeys` is set for every client by `init`.
        guard role == .client, let value = maskingKeys?.nextMaskingKey() else { return nil }
        return WebSocketMaskingKey(value)
    }

    private mutating func writeFrame(_ opcode: WebSocketOpcode, fin: Bool, _ payload: [UInt8]) {
        let key = nextKey()
        WebSocketFrameEncoder.encode(opcode: opcode, fin: fin, payload: payload, maskingKey: key, into: &outbound)
    }

    private mutating func writeMessage(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer) {
        guard let size = configuration.outboundFragmentSize, payload.count > size else {
            let key = nextKey()
            WebSocketFrameEncoder.encode(opcode: opcode, fin: true, payload: payload, maskingKey: key, into: &outbound)
            return
        }
        var start = 0
        var frameOpcode = opcode
        while start < payload.count {
            let end = min(start + size, payload.count)
            let key = nextKey()
            WebSocketFrameEncoder.encode(opcode: frameOpcode, fin: end == payload.count,
                                         payload: UnsafeRawBufferPointer(rebasing: payload[start..<end]),
                                         maskingKey: key, into: &outbound)
            frameOpcode = .continuation
            start = end
        }
    }

    // MARK: Inbound

    /// Parses received bytes and returns what the peer did, in order. Replies (pongs, the close echo, the
    /// close frame of a protocol error) are queued for ``takeOutbound()``. Once closed, bytes are ignored.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) -> [WebSocketEvent] {
        guard isParsing else { return [] }
        var events: [WebSocketEvent] = []
        var cursor = 0
        while isParsing {
            let frameStart = parser.streamOffset
            let frame: WebSocketFrame?
            do {
                frame = try parser.nextFrame(in: bytes, cursor: &cursor)
            } catch {
                fail(error, &events)
                break
            }
            guard let frame else { break }
            do {
                try handle(frame, at: frameStart, &events)
            } catch {
                fail(error, &events)
            }
            parser.continuationBudget = configuration.maxMessageSize - fragments.count
        }
        return events
    }

    /// Parses received bytes (see ``receive(_:)-(UnsafeRawBufferPointer)``).
    public mutating func receive(_ bytes: [UInt8]) -> [WebSocketEvent] {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// Parses received bytes (see ``receive(_:)-(UnsafeRawBufferPointer)``).
    public mutating func receive(_ bytes: ArraySlice<UInt8>) -> [WebSocketEvent] {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// Whether received bytes are still parsed: open, or closing while waiting for the peer's close frame.
    private var isParsing: Bool { state == .open || state == .closing }

    /// Tells the connection that the transport closed (EOF or error). When the close handshake had not
    /// finished, returns `.closed(code: 1006, ...)` (RFC 6455 §7.1.5, abnormal closure), or in
    /// `.closeReceived` `.closed` with the peer's code and reason (a close frame was received); otherwise
    /// nothing.
    public mutating func transportClosed() -> [WebSocketEvent] {
        guard state != .closed else { return [] }
        if state == .closeReceived, let code = receivedCloseCode {
            state = .closed
            return [.closed(code: code, reason: receivedCloseReason ?? "")]
        }
        state = .closed
        receivedCloseCode = .abnormalClosure
        fragments = []
        fragmentedOpcode = nil
        return [.closed(code: .abnormalClosure, reason: "")]
    }

    private mutating func fail(_ error: WebSocketProtocolError, _ events: inout [WebSocketEvent]) {
        events.append(.protocolError(error))
        if state == .open {
            let code = error.closeCode
            var body = [UInt8(truncatingIfNeeded: code.rawValue >> 8), UInt8(truncatingIfNeeded: code.rawValue)]
            body += Array(Self.shortReason(error.kind).utf8)
            writeFrame(.close, fin: true, body)
            sentCloseCode = code
        }
        state = .closed
        fragments = []
        fragmentedOpcode = nil
    }

    /// A close reason (well under 123 bytes) naming the violation.
    private static func shortReason(_ kind: WebSocketProtocolError.Kind) -> String {
        switch kind {
        case .reservedBitsSet: "reserved bits set"
        case .unknownOpcode: "unknown opcode"
        case .nonMinimalLength: "non-minimal length encoding"
        case .lengthMostSignificantBitSet: "64-bit length with MSB set"
        case .maskedFrameFromServer: "masked frame from server"
        case .unmaskedFrameFromClient: "unmasked frame from client"
        case .fragmentedControlFrame: "fragmented control frame"
        case .controlFrameTooLarge: "control frame over 125 bytes"
        case .unexpectedContinuation: "continuation frame without a message"
        case .expectedContinuation: "new message before the previous one ended"
        case .invalidClosePayloadLength: "1-byte close payload"
        case .invalidCloseCode: "invalid close code"
        case .invalidUTF8: "invalid UTF-8 in text message"
        case .invalidUTF8InCloseReason: "invalid UTF-8 in close reason"
        case .frameTooLarge: "frame too big"
        case .messageTooLarge: "message too big"
        }
    }

    private mutating func handle(_ frame: WebSocketFrame, at frameStart: Int,
                                 _ events: inout [WebSocketEvent]) throws(WebSocketProtocolError) {
        let payloadOffset = frameStart
            + WebSocketFrameEncoder.headerSize(payloadCount: frame.payload.count, masked: frame.maskingKey != nil)
        switch frame.opcode {
        case .text, .binary:
            if let open = fragmentedOpcode {
                throw WebSocketProtocolError(
                    .expectedContinuation,
                    "\(frame.opcode) frame while a fragmented \(open) message is unfinished; expected a continuation frame (opcode 0x0)",
                    streamOffset: frameStart)
            }
            try checkMessageSize(frame.payload.count, at: frameStart)
            if frame.opcode == .text {
                // Single-frame text (the common case): one validating decode; the incremental validator
                // runs only to locate the bad byte for the error, or to check a first fragment.
                if frame.fin, let text = String(validating: frame.payload, as: UTF8.self) {
                    events.append(.text(text))
                    return
                }
                utf8.reset()
                try checkUTF8(frame.payload, at: payloadOffset, final: frame.fin)
            }
            if frame.fin {
                events.append(Self.message(frame.opcode, frame.payload))
            } else {
                fragmentedOpcode = frame.opcode
                fragments = frame.payload
            }
        case .continuation:
            guard let opcode = fragmentedOpcode else {
                throw WebSocketProtocolError(
                    .unexpectedContinuation,
                    "continuation frame with no fragmented message in progress; a message must start with a text or binary frame",
                    streamOffset: frameStart)
            }
            try checkMessageSize(fragments.count + frame.payload.count, at: frameStart)
            if opcode == .text {
                try checkUTF8(frame.payload, at: payloadOffset, final: frame.fin)
            }
            fragments += frame.payload
            if frame.fin {
                events.append(Self.message(opcode, fragments))
                fragments = []
                fragmentedOpcode = nil
            }
        case .ping:
            events.append(.ping(frame.payload))
            if state == .open && configuration.automaticPong {
                writeFrame(.pong, fin: true, frame.payload)
            }
        case .pong:
            events.append(.pong(frame.payload))
        case .close:
            let (code, reason) = try Self.parseCloseBody(frame.payload, at: payloadOffset)
            receivedCloseCode = code ?? .noStatusReceived
            receivedCloseReason = reason
            fragments = []
            fragmentedOpcode = nil
            if state == .open && !configuration.automaticCloseReply {
                state = .closeReceived
                events.append(.closeReceived(code: code ?? .noStatusReceived, reason: reason))
                return
            }
            if state == .open {
                // Echo the peer's code (RFC 6455 §5.5.1); an empty close body is answered with an empty one.
                var body: [UInt8] = []
                if let code {
                    body = [UInt8(truncatingIfNeeded: code.rawValue >> 8), UInt8(truncatingIfNeeded: code.rawValue)]
                }
                writeFrame(.close, fin: true, body)
                sentCloseCode = code ?? .noStatusReceived
            }
            state = .closed
            events.append(.closed(code: code ?? .noStatusReceived, reason: reason))
        }
    }

    private static func message(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> WebSocketEvent {
        // Text payloads were validated as they arrived, so decoding cannot repair anything.
        opcode == .text ? .text(String(decoding: payload, as: UTF8.self)) : .binary(payload)
    }

    private func checkMessageSize(_ size: Int, at offset: Int) throws(WebSocketProtocolError) {
        if size > configuration.maxMessageSize {
            throw WebSocketProtocolError(
                .messageTooLarge,
                "message reached \(size) bytes, over the limit of \(configuration.maxMessageSize) bytes",
                streamOffset: offset)
        }
    }

    private mutating func checkUTF8(_ payload: [UInt8], at offset: Int, final: Bool) throws(WebSocketProtocolError) {
        let bad = payload.withUnsafeBytes { utf8.validate($0) }
        if let bad {
            throw WebSocketProtocolError(
                .invalidUTF8,
                "text message has invalid UTF-8 (byte 0x\(hex(payload[bad])) at payload index \(bad)); text frames must carry UTF-8, use binary for other data",
                streamOffset: offset + bad)
        }
        if final && !utf8.isAtBoundary {
            throw WebSocketProtocolError(
                .invalidUTF8,
                "text message ends in the middle of a UTF-8 character; text frames must carry UTF-8",
                streamOffset: offset + payload.count)
        }
    }

    private static func parseCloseBody(_ body: [UInt8], at offset: Int)
        throws(WebSocketProtocolError) -> (WebSocketCloseCode?, String) {
        switch body.count {
        case 0:
            return (nil, "")
        case 1:
            throw WebSocketProtocolError(
                .invalidClosePayloadLength,
                "close frame has a 1-byte body; it must be empty or start with a 2-byte status code",
                streamOffset: offset)
        default:
            let code = WebSocketCloseCode(UInt16(body[0]) << 8 | UInt16(body[1]))
            guard code.isSendable else {
                throw WebSocketProtocolError(
                    .invalidCloseCode,
                    "close frame carries status code \(code), which may not be sent; valid are 1000-1003, 1007-1014, 3000-4999",
                    streamOffset: offset)
            }
            let reasonBytes = body[2...]
            if let bad = reasonBytes.withUnsafeBytes({ UTF8Validator.firstInvalidIndex($0) }) {
                throw WebSocketProtocolError(
                    .invalidUTF8InCloseReason,
                    "close reason is not valid UTF-8 (at reason byte \(bad)); a close reason must be UTF-8",
                    streamOffset: offset + 2 + bad)
            }
            return (code, String(decoding: reasonBytes, as: UTF8.self))
        }
    }
}
