import Testing
@testable import WebSocket

@Suite("No-trap fuzzing (seeded)")
struct FuzzTests {
    /// Every close code a protocol error may map to.
    static let errorCodes: Set<WebSocketCloseCode> = [.protocolError, .invalidPayloadData, .messageTooBig]

    /// Runs `bytes` through a connection in random chunks and checks the invariants: no trap (the test
    /// would crash), a protocol error is the last event and maps to 1002/1007/1009, the close frame that
    /// goes out carries that code, and a closed connection ignores further bytes.
    func check(_ bytes: [UInt8], role: WebSocketRole, random: inout TestRandom, stats: inout [UInt16: Int]) -> Bool {
        var connection = WebSocketConnection(
            role: role, configuration: WebSocketConfiguration(maxFrameSize: 4096, maxMessageSize: 8192),
            maskingKeys: TestRandom(seed: 1))
        var events: [WebSocketEvent] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + random.int(1...64))
            events += connection.receive(bytes[start..<end])
            start = end
        }
        for (index, event) in events.enumerated() {
            if case .protocolError(let error) = event {
                guard index == events.count - 1, Self.errorCodes.contains(error.closeCode),
                      connection.state == .closed,
                      // This end never closes on its own here, so the only close it sent is the error's.
                      connection.sentCloseCode == error.closeCode,
                      error.streamOffset >= 0, error.streamOffset <= bytes.count
                else { return false }
                stats[error.closeCode.rawValue, default: 0] += 1
            }
            if case .closed = event, index != events.count - 1 { return false }
        }
        if connection.state == .closed {
            if !connection.receive(bytes).isEmpty { return false }
        }
        // Whatever the connection wants to send must itself be valid framing for the peer.
        let peer: WebSocketRole = role == .client ? .server : .client
        let out = parseAll([connection.takeOutbound()[...]], role: peer)
        return out.error == nil
    }

    @Test("seeded random byte strings never trap; every error maps to 1002, 1007 or 1009")
    func randomBytes() {
        var random = TestRandom(seed: 0xF022)
        var stats: [UInt16: Int] = [:]
        var failures = 0
        for i in 0..<4000 {
            var bytes = random.bytes(random.int(0...300))
            // Bias a share of cases towards plausible headers so parsing gets past byte 0.
            if i % 2 == 0, bytes.count >= 2 {
                bytes[0] = [0x81, 0x82, 0x01, 0x02, 0x80, 0x88, 0x89, 0x8A][random.int(0...7)]
                bytes[1] = (i % 4 == 0 ? 0x80 : 0) | UInt8(random.int(0...127))
            }
            let role: WebSocketRole = i % 4 == 0 ? .server : .client
            if !check(bytes, role: role, random: &random, stats: &stats) { failures += 1 }
        }
        #expect(failures == 0)
        // The corpus reached every error class.
        #expect(stats[1002, default: 0] > 0)
        #expect(stats[1007, default: 0] > 0)
        #expect(stats[1009, default: 0] > 0)
    }

    @Test("mutated golden frames and streams never trap")
    func mutatedGoldenFrames() {
        var random = TestRandom(seed: 0x60_1DE7)
        var stats: [UInt16: Int] = [:]
        var failures = 0
        let sources: [(bytes: [UInt8], role: WebSocketRole)] = goldenFrames.filter { $0.bytes.count < 1000 }.map { ($0.bytes, $0.receiver) }
            + [(goldenFrames[0].bytes + goldenFrames[2].bytes + goldenFrames[4].bytes + goldenFrames[3].bytes
                + fromServer(8, closeBody(1000, Array("bye".utf8))), .client),
               (fromClient(fin: false, 1, Array("é".utf8)) + fromClient(9, hello) + fromClient(0, Array("tè".utf8))
                + fromClient(8, closeBody(1001)), .server)]
        for i in 0..<6000 {
            let source = sources[i % sources.count]
            var bytes = source.bytes
            for _ in 0..<random.int(1...4) {
                switch random.int(0...3) {
                case 0:  // flip a bit
                    let index = random.int(0...(bytes.count - 1))
                    bytes[index] ^= 1 << UInt8(random.int(0...7))
                case 1:  // replace a byte
                    bytes[random.int(0...(bytes.count - 1))] = UInt8(random.int(0...255))
                case 2:  // truncate
                    bytes = Array(bytes.prefix(random.int(0...bytes.count)))
                default:  // insert random bytes
                    bytes.insert(contentsOf: random.bytes(random.int(1...4)), at: random.int(0...bytes.count))
                }
                if bytes.isEmpty { bytes = [0] }
            }
            if !check(bytes, role: source.role, random: &random, stats: &stats) { failures += 1 }
        }
        #expect(failures == 0)
        #expect(stats[1002, default: 0] > 0)
    }

    @Test("the incremental UTF-8 validator agrees with Swift's String validation, in any chunking")
    func utf8ValidatorAgreesWithStdlib() {
        var random = TestRandom(seed: 0x07F8)
        let alphabet: [[UInt8]] = [
            [0x41], [0x7F], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEF, 0xBF, 0xBF],
            [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
            // invalid pieces: continuation alone, overlongs, surrogate, above U+10FFFF, bad leads
            [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF5], [0xFF], [0xE2, 0x82], [0xF0, 0x9F],
        ]
        var disagreements = 0
        for _ in 0..<5000 {
            var bytes: [UInt8] = []
            for _ in 0..<random.int(0...12) {
                bytes += random.int(0...4) == 0 ? [UInt8(random.int(0...255))] : alphabet[random.int(0...(alphabet.count - 1))]
            }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            var validator = UTF8Validator()
            var valid = true
            var start = 0
            while start < bytes.count, valid {
                let end = min(bytes.count, start + random.int(1...5))
                if bytes[start..<end].withUnsafeBytes({ validator.validate($0) }) != nil { valid = false }
                start = end
            }
            if valid && !validator.isAtBoundary { valid = false }
            let whole = bytes.withUnsafeBytes { UTF8Validator.firstInvalidIndex($0) } == nil
            if valid != expected || whole != expected { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }

    @Test("handshake parsers never trap on random or mutated heads")
    func handshakeFuzz() throws {
        var random = TestRandom(seed: 0x4A5)
        let nonce = random.bytes(16)
        let clientHandshake = try WebSocketClientHandshake(host: "relay.test", path: "/ws/device-link", nonce: nonce,
                                                           extraHeaders: ["Authorization": "Bearer abc"])
        let request = clientHandshake.requestBytes
        let response = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(clientHandshake.expectedAccept)\r\n\r\n".utf8)
        var outcomes: [String: Int] = [:]
        for i in 0..<3000 {
            var bytes = i % 2 == 0 ? request : response
            for _ in 0..<random.int(1...3) {
                switch random.int(0...2) {
                case 0: bytes[random.int(0...(bytes.count - 1))] = UInt8(random.int(0...255))
                case 1: bytes = Array(bytes.prefix(random.int(1...bytes.count)))
                default: bytes.insert(contentsOf: random.bytes(random.int(1...3)), at: random.int(0...bytes.count))
                }
            }
            do {
                if i % 2 == 0 {
                    var server = WebSocketServerHandshake(maxHeadSize: 512)
                    switch try server.receive(bytes) {
                    case .needMore: outcomes["needMore", default: 0] += 1
                    case .complete(_, let consumed):
                        #expect(consumed <= bytes.count)
                        outcomes["complete", default: 0] += 1
                    }
                } else {
                    var client = clientHandshake
                    switch try client.receive(bytes) {
                    case .needMore: outcomes["needMore", default: 0] += 1
                    case .complete(_, let consumed):
                        #expect(consumed <= bytes.count)
                        outcomes["complete", default: 0] += 1
                    }
                }
            } catch {
                #expect(!error.message.isEmpty)
                if i % 2 == 0 { #expect(error.httpStatus == 400 || error.httpStatus == 426) }
                outcomes["error", default: 0] += 1
            }
        }
        #expect(outcomes["error", default: 0] > 0)
        #expect(outcomes["complete", default: 0] > 0)
        #expect(outcomes["needMore", default: 0] > 0)
    }
}
