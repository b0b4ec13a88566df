import RelayProtocol
import Testing

private func decode(_ bytes: [UInt8]) -> Result<TerminalFrame, TerminalFrameError> {
    do throws(TerminalFrameError) { return .success(try TerminalFrame(decoding: bytes)) } catch { return .failure(error) }
}

@Suite struct TerminalFrameTests {
    @Test func exactBytes() throws {
        let f = TerminalFrame(sessionId: "ab", data: [0x1B, 0x5B, 0x41])
        #expect(try f.encoded() == [0x50, 0x54, 0x43, 0x31, 0x00, 0x02, 0x61, 0x62, 0x1B, 0x5B, 0x41])
        #expect(TerminalFrame.magic == [0x50, 0x54, 0x43, 0x31])
        #expect(TerminalFrame.maxChunkBytes == 16384)
    }

    @Test func roundTrips() throws {
        var rng = SeededRandom(seed: 99)
        let ids = ["", "t", "term-8d1c-é", String(repeating: "x", count: 300), "😀"]
        for id in ids {
            for size in [0, 1, 255, 256, TerminalFrame.maxChunkBytes] {
                let f = TerminalFrame(sessionId: id, data: rng.bytes(size))
                let bytes = try f.encoded()
                #expect(bytes.count == 6 + id.utf8.count + size)
                #expect(try TerminalFrame(decoding: bytes) == f)
                #expect(try TerminalFrame(decoding: bytes.lazy.map { $0 }) == f)  // non-contiguous input
                #expect(try TerminalFrame(decoding: ([0] + bytes)[1...]) == f)  // slice
            }
        }
    }

    @Test func sessionIdLengthBoundary() throws {
        let longest = TerminalFrame(sessionId: String(repeating: "s", count: 65535), data: [1])
        let bytes = try longest.encoded()
        #expect(bytes[4] == 0xFF && bytes[5] == 0xFF)
        #expect(try TerminalFrame(decoding: bytes) == longest)
        #expect(throws: TerminalFrameError(kind: .sessionIdTooLong, offset: 4,
                                           message: "session id is 65536 UTF-8 bytes; at most 65535 fit the u16 length")) {
            try TerminalFrame(sessionId: String(repeating: "s", count: 65536), data: []).encoded()
        }
    }

    @Test func everyTruncation() throws {
        let bytes = try TerminalFrame(sessionId: "sess", data: Array("hello".utf8)).encoded()
        for n in 0..<bytes.count {
            let prefix = Array(bytes[0..<n])
            let result = decode(prefix)
            switch n {
            case 0..<6:
                #expect(result == .failure(TerminalFrameError(kind: .shortHeader, offset: n,
                    message: "frame is \(n) bytes; the header needs 6 (magic + u16 session-id length)")), "prefix \(n)")
            case 6..<10:
                #expect(result == .failure(TerminalFrameError(kind: .sessionIdPastEnd, offset: 4,
                    message: "session id length 4 runs past the end of the \(n)-byte frame")), "prefix \(n)")
            default:
                // A cut inside the PTY bytes is a shorter, valid frame: PTC1 has no data length.
                #expect(result == .success(TerminalFrame(sessionId: "sess", data: Array(bytes[10..<n]))), "prefix \(n)")
            }
        }
    }

    @Test func badMagicNamesTheByte() {
        for i in 0..<4 {
            var bytes: [UInt8] = [0x50, 0x54, 0x43, 0x31, 0, 0]
            bytes[i] = 0x58
            guard case .failure(let e) = decode(bytes) else {
                Issue.record("accepted bad magic at \(i)")
                continue
            }
            #expect(e.kind == .badMagic && e.offset == i)
        }
        // Bad magic wins over a short header: a JSON text frame sent as binary is named for what it is.
        #expect(decode(Array("{\"".utf8)) == .failure(TerminalFrameError(kind: .badMagic, offset: 0,
            message: "bad magic: expected \"PTC1\" (50 54 43 31), found byte 0x7b")))
    }

    @Test func invalidUTF8SessionId() {
        let bytes: [UInt8] = [0x50, 0x54, 0x43, 0x31, 0x00, 0x03, 0x61, 0xC3, 0x28, 0x0A]
        #expect(decode(bytes) == .failure(TerminalFrameError(kind: .invalidSessionId, offset: 8,
            message: "session id is not valid UTF-8: bad continuation byte 0x28 (overlong, surrogate or out of range)")))
        // A character cut by the session-id length is invalid too, even when the data completes it.
        let cut: [UInt8] = [0x50, 0x54, 0x43, 0x31, 0x00, 0x01, 0xC3, 0xA9]
        guard case .failure(let e) = decode(cut) else {
            Issue.record("accepted a truncated character")
            return
        }
        #expect(e.kind == .invalidSessionId && e.offset == 6)
    }

    @Test func chunks() {
        let data = (0..<(2 * TerminalFrame.maxChunkBytes + 5)).map { UInt8(truncatingIfNeeded: $0) }
        let frames = TerminalFrame.chunks(sessionId: "t", data: data)
        #expect(frames.map(\.data.count) == [16384, 16384, 5])
        #expect(frames.flatMap(\.data) == data)
        #expect(frames.allSatisfy { $0.sessionId == "t" })
        #expect(TerminalFrame.chunks(sessionId: "t", data: []) == [TerminalFrame(sessionId: "t", data: [])])
        #expect(TerminalFrame.chunks(sessionId: "t", data: Array(data[0..<16384])).count == 1)
    }

    @Test func printablePreview() {
        let f = TerminalFrame(sessionId: "t", data: Array("ls\r\n\u{1B}[0m\tok\\ é😀".utf8) + [0x00, 0x7F, 0xFF])
        #expect(f.printablePreview(maxBytes: 1000) == "ls\\r\\n\\e[0m\\tok\\\\ é😀\\x00\\x7f\\xff")
        #expect(f.data.count == 22)
        #expect(f.printablePreview(maxBytes: 2) == "ls…(+20 bytes)")
        // "é" is 2 bytes at offset 13: a limit of 14 must not split it.
        #expect(f.printablePreview(maxBytes: 14) == "ls\\r\\n\\e[0m\\tok\\\\ …(+9 bytes)")
        #expect(f.printablePreview(maxBytes: 15) == "ls\\r\\n\\e[0m\\tok\\\\ é…(+7 bytes)")
        #expect(f.printablePreview(maxBytes: 0) == "…(+22 bytes)")
        #expect(f.printablePreview(maxBytes: -3) == "…(+22 bytes)")
        #expect(TerminalFrame(sessionId: "t", data: []).printablePreview(maxBytes: 10) == "")
    }
}
