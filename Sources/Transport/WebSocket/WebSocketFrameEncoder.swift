/// Serializes frames (RFC 6455 §5.2) straight into an output buffer, with the minimal length encoding and
/// optional masking. It writes what it is given: the rules about which frames may be sent (control payload
/// at most 125 bytes, clients mask, servers do not) are enforced by ``WebSocketConnection``.
public enum WebSocketFrameEncoder {
    /// The header size for a payload of `payloadCount` bytes: 2, 4 or 10 bytes, plus 4 when masked.
    public static func headerSize(payloadCount: Int, masked: Bool) -> Int {
        let base = payloadCount < 126 ? 2 : (payloadCount <= 0xFFFF ? 4 : 10)
        return masked ? base + 4 : base
    }

    /// Appends one frame to `out`. `payload` is unmasked application data; when `maskingKey` is given the
    /// MASK bit is set, the key written, and the payload masked on its way into `out`.
    public static func encode(opcode: WebSocketOpcode, fin: Bool = true, payload: UnsafeRawBufferPointer,
                              maskingKey: WebSocketMaskingKey?, into out: inout [UInt8]) {
        let count = payload.count
        // No exact reserveCapacity here: it would defeat the array's geometric growth and make a run of
        // small frames into one buffer quadratic.
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
        if count < 126 {
            out.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(truncatingIfNeeded: count >> 8))
            out.append(UInt8(truncatingIfNeeded: count))
        } else {
            out.append(maskBit | 127)
            let length = UInt64(count)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: length >> UInt64(shift)))
            }
        }
        if let key = maskingKey {
            out.append(key.b0)
            out.append(key.b1)
            out.append(key.b2)
            out.append(key.b3)
        }
        let payloadStart = out.count
        out.append(contentsOf: payload)
        if let key = maskingKey {
            WebSocketMasking.apply(key, to: &out, range: payloadStart..<out.count)
        }
    }

    /// Appends one frame to `out` (see ``encode(opcode:fin:payload:maskingKey:into:)-(_,_,UnsafeRawBufferPointer,_,_)``).
    public static func encode(opcode: WebSocketOpcode, fin: Bool = true, payload: [UInt8],
                              maskingKey: WebSocketMaskingKey?, into out: inout [UInt8]) {
        payload.withUnsafeBytes {
            encode(opcode: opcode, fin: fin, payload: $0, maskingKey: maskingKey, into: &out)
        }
    }

    /// Appends `frame` to `out`, masked with `frame.maskingKey` when it has one.
    public static func encode(_ frame: WebSocketFrame, into out: inout [UInt8]) {
        encode(opcode: frame.opcode, fin: frame.fin, payload: frame.payload, maskingKey: frame.maskingKey,
               into: &out)
    }

    /// `frame` serialized on its own.
    public static func bytes(of frame: WebSocketFrame) -> [UInt8] {
        var out: [UInt8] = []
        encode(frame, into: &out)
        return out
    }
}
