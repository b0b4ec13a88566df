/// A WebSocket frame opcode (RFC 6455 §5.2). Only the six defined opcodes are representable: the parser
/// rejects the reserved ones with close 1002.
public enum WebSocketOpcode: UInt8, Hashable, Sendable, CaseIterable {
    /// 0x0: continues a fragmented text or binary message.
    case continuation = 0x0
    /// 0x1: first (or only) frame of a text message.
    case text = 0x1
    /// 0x2: first (or only) frame of a binary message.
    case binary = 0x2
    /// 0x8: close (control).
    case close = 0x8
    /// 0x9: ping (control).
    case ping = 0x9
    /// 0xA: pong (control).
    case pong = 0xA

    /// Control frames (close, ping, pong) have the high bit of the opcode set; they are never fragmented
    /// and carry at most 125 bytes.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// The 4-byte masking key of a frame, in wire order (RFC 6455 §5.3).
public struct WebSocketMaskingKey: Hashable, Sendable, CustomStringConvertible {
    /// First key byte on the wire (masks payload bytes 0, 4, 8, ...).
    public var b0: UInt8
    /// Second key byte on the wire.
    public var b1: UInt8
    /// Third key byte on the wire.
    public var b2: UInt8
    /// Fourth key byte on the wire.
    public var b3: UInt8

    /// A key from its four wire bytes.
    public init(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        self.b0 = b0
        self.b1 = b1
        self.b2 = b2
        self.b3 = b3
    }

    /// A key from a 32-bit value, most significant byte first on the wire (so `0x37fa213d` is the
    /// key `37 fa 21 3d` of RFC 6455 §5.7).
    public init(_ value: UInt32) {
        self.init(UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                  UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value))
    }

    /// The key as a 32-bit value, first wire byte most significant.
    public var value: UInt32 {
        UInt32(b0) << 24 | UInt32(b1) << 16 | UInt32(b2) << 8 | UInt32(b3)
    }

    /// The key as 8 lowercase hex digits in wire order.
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in [b0, b1, b2, b3] {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// One parsed (or to-be-serialized) WebSocket frame. The payload is always stored unmasked.
public struct WebSocketFrame: Hashable, Sendable {
    /// FIN: this is the last frame of its message.
    public var fin: Bool
    /// The frame opcode.
    public var opcode: WebSocketOpcode
    /// The masking key the frame carried on the wire (nil for an unmasked frame).
    public var maskingKey: WebSocketMaskingKey?
    /// The payload, unmasked.
    public var payload: [UInt8]

    /// Makes a frame. `payload` is the unmasked application data; masking happens at serialization.
    public init(fin: Bool = true, opcode: WebSocketOpcode, maskingKey: WebSocketMaskingKey? = nil,
                payload: [UInt8] = []) {
        self.fin = fin
        self.opcode = opcode
        self.maskingKey = maskingKey
        self.payload = payload
    }
}
