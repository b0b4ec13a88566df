import Foundation
import Testing
@testable import WebSocket

/// SplitMix64: a small seeded generator for reproducible test data (the WebSocket target does not depend
/// on RelayProtocol, so its `SeededRandom` is not available here).
struct TestRandom: RandomNumberGenerator, MaskingKeySource {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func nextMaskingKey() -> UInt32 { UInt32(truncatingIfNeeded: next()) }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}

/// Raw frame bytes, with full control over every header bit (for malformed frames).
func rawFrame(fin: Bool = true, rsv: UInt8 = 0, opcode: UInt8, mask: WebSocketMaskingKey? = nil,
              payload: [UInt8] = [], lengthForm: Int? = nil) -> [UInt8] {
    var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 7) << 4 | (opcode & 0x0F)]
    let maskBit: UInt8 = mask == nil ? 0 : 0x80
    let form = lengthForm ?? (payload.count < 126 ? 7 : payload.count <= 0xFFFF ? 16 : 64)
    switch form {
    case 7: out.append(maskBit | UInt8(payload.count))
    case 16:
        out.append(maskBit | 126)
        out += [UInt8(payload.count >> 8 & 0xFF), UInt8(payload.count & 0xFF)]
    default:
        out.append(maskBit | 127)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: payload.count >> shift)) }
    }
    var body = payload
    if let mask {
        out += [mask.b0, mask.b1, mask.b2, mask.b3]
        body.withUnsafeMutableBytes { WebSocketMasking.apply(mask, to: $0) }
    }
    return out + body
}

/// The key of the RFC 6455 §5.7 examples.
let rfcKey = WebSocketMaskingKey(0x37, 0xfa, 0x21, 0x3d)

/// A golden frame: its exact bytes and what a parser must make of them.
struct GoldenFrame: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    /// The role that receives these bytes (masked frames go to a server, unmasked to a client).
    var receiver: WebSocketRole
    var frame: WebSocketFrame
    var testDescription: String { name }
}

let hello = Array("Hello".utf8)
let bytes256 = (0..<256).map { UInt8($0 & 0xFF) }
let bytes64K = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

/// RFC 6455 §5.7 examples, byte for byte.
let goldenFrames: [GoldenFrame] = [
    GoldenFrame(name: "unmasked text Hello",
                bytes: [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f],
                receiver: .client, frame: WebSocketFrame(opcode: .text, payload: hello)),
    GoldenFrame(name: "masked text Hello",
                bytes: [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58],
                receiver: .server, frame: WebSocketFrame(opcode: .text, maskingKey: rfcKey, payload: hello)),
    GoldenFrame(name: "fragment Hel",
                bytes: [0x01, 0x03, 0x48, 0x65, 0x6c],
                receiver: .client, frame: WebSocketFrame(fin: false, opcode: .text, payload: Array("Hel".utf8))),
    GoldenFrame(name: "fragment lo",
                bytes: [0x80, 0x02, 0x6c, 0x6f],
                receiver: .client, frame: WebSocketFrame(opcode: .continuation, payload: Array("lo".utf8))),
    GoldenFrame(name: "unmasked ping Hello",
                bytes: [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f],
                receiver: .client, frame: WebSocketFrame(opcode: .ping, payload: hello)),
    GoldenFrame(name: "masked pong Hello",
                bytes: [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58],
                receiver: .server, frame: WebSocketFrame(opcode: .pong, maskingKey: rfcKey, payload: hello)),
    GoldenFrame(name: "256-byte binary, 16-bit length",
                bytes: [0x82, 0x7E, 0x01, 0x00] + bytes256,
                receiver: .client, frame: WebSocketFrame(opcode: .binary, payload: bytes256)),
    GoldenFrame(name: "64 KiB binary, 64-bit length",
                bytes: [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0] + bytes64K,
                receiver: .client, frame: WebSocketFrame(opcode: .binary, payload: bytes64K)),
]

/// Feeds `pieces` to a fresh parser in order, collecting every frame; stops at the first error.
func parseAll(_ pieces: [ArraySlice<UInt8>], role: WebSocketRole,
              maxFrameSize: Int = WebSocketConfiguration.defaultMaxMessageSize)
    -> (frames: [WebSocketFrame], error: WebSocketProtocolError?) {
    var parser = WebSocketFrameParser(role: role, maxFrameSize: maxFrameSize)
    var frames: [WebSocketFrame] = []
    for piece in pieces {
        parser.append(piece)
        do {
            while let frame = try parser.nextFrame() { frames.append(frame) }
        } catch {
            return (frames, error)
        }
    }
    return (frames, nil)
}

/// The bytes split at the given offsets (sorted, within bounds).
func split(_ bytes: [UInt8], at offsets: [Int]) -> [ArraySlice<UInt8>] {
    var pieces: [ArraySlice<UInt8>] = []
    var start = 0
    for offset in offsets.sorted() where offset >= start && offset <= bytes.count {
        pieces.append(bytes[start..<offset])
        start = offset
    }
    pieces.append(bytes[start...])
    return pieces
}

/// Feeds `pieces` to `connection` in order and returns every event.
func feed(_ connection: inout WebSocketConnection, _ pieces: [ArraySlice<UInt8>]) -> [WebSocketEvent] {
    var events: [WebSocketEvent] = []
    for piece in pieces { events += connection.receive(piece) }
    return events
}

/// Parses everything `connection` wants to send, as its peer would.
func outboundFrames(_ connection: inout WebSocketConnection) -> [WebSocketFrame] {
    let peer: WebSocketRole = connection.role == .client ? .server : .client
    let result = parseAll([connection.takeOutbound()[...]], role: peer)
    return result.frames
}

/// A close frame body: code (big-endian) then reason.
func closeBody(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
    [UInt8(code >> 8), UInt8(code & 0xFF)] + reason
}

/// Byte equality through memcmp: debug builds compare arrays element by element, which is too slow for
/// the 64 KiB golden frame split at each of its 65 546 offsets.
func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            guard let x = pa.baseAddress, let y = pb.baseAddress else { return true }
            return memcmp(x, y, a.count) == 0
        }
    }
}

/// Frame equality with a fast payload comparison.
func sameFrame(_ a: WebSocketFrame, _ b: WebSocketFrame) -> Bool {
    a.fin == b.fin && a.opcode == b.opcode && a.maskingKey == b.maskingKey && sameBytes(a.payload, b.payload)
}
