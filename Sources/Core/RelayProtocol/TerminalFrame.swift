/// Why bytes are not a PTC1 terminal frame, or a frame cannot be encoded.
public struct TerminalFrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem.
    public enum Kind: Sendable, Hashable {
        /// Fewer than the 6 header bytes (magic + length).
        case shortHeader
        /// The first 4 bytes are not `PTC1`.
        case badMagic
        /// The session-ID length runs past the end of the frame.
        case sessionIdPastEnd
        /// The session ID is not valid UTF-8.
        case invalidSessionId
        /// Encoding: the session ID is longer than 65535 UTF-8 bytes.
        case sessionIdTooLong
    }

    /// The kind of problem.
    public let kind: Kind
    /// The byte offset in the frame where the problem is.
    public let offset: Int
    /// What is wrong, in words.
    public let message: String

    /// Creates an error.
    public init(kind: Kind, offset: Int, message: String) {
        self.kind = kind
        self.offset = offset
        self.message = message
    }

    /// `invalid PTC1 frame at byte <offset>: <message>`.
    public var description: String { "invalid PTC1 frame at byte \(offset): \(message)" }
}

/// A binary terminal-output frame (PROTOCOL.md §6), desktop -> mobile:
/// `"PTC1"` + session-ID length (u16 big-endian) + session ID (UTF-8) + raw PTY bytes.
public struct TerminalFrame: Sendable, Hashable {
    /// `PTC1`.
    public static let magic: [UInt8] = Array("PTC1".utf8)
    /// The largest PTY chunk a sender puts in one frame (16 KiB). Decoding accepts larger frames.
    public static let maxChunkBytes = 16 * 1024
    /// Magic (4) + length (2).
    public static let headerBytes = 6

    /// The terminal session the output belongs to.
    public var sessionId: String
    /// The raw PTY bytes.
    public var data: [UInt8]

    /// Creates a frame.
    public init(sessionId: String, data: [UInt8]) {
        self.sessionId = sessionId
        self.data = data
    }

    /// Splits `data` into frames of at most `maxChunkBytes` each (one empty frame for empty data).
    public static func chunks(sessionId: String, data: [UInt8]) -> [TerminalFrame] {
        guard !data.isEmpty else { return [TerminalFrame(sessionId: sessionId, data: [])] }
        return stride(from: 0, to: data.count, by: maxChunkBytes).map {
            TerminalFrame(sessionId: sessionId, data: Array(data[$0..<min($0 + maxChunkBytes, data.count)]))
        }
    }

    /// The frame's bytes. Throws when the session ID exceeds 65535 UTF-8 bytes.
    public func encoded() throws(TerminalFrameError) -> [UInt8] {
        let sid = sessionId.utf8
        guard sid.count <= Int(UInt16.max) else {
            throw TerminalFrameError(kind: .sessionIdTooLong, offset: 4,
                                     message: "session id is \(sid.count) UTF-8 bytes; at most 65535 fit the u16 length")
        }
        var out = [UInt8]()
        out.reserveCapacity(TerminalFrame.headerBytes + sid.count + data.count)
        out.append(contentsOf: TerminalFrame.magic)
        out.append(UInt8(sid.count >> 8))
        out.append(UInt8(sid.count & 0xFF))
        out.append(contentsOf: sid)
        out.append(contentsOf: data)
        return out
    }

    /// Decodes a frame; every malformation is a `TerminalFrameError` naming its byte offset.
    public init(decoding bytes: some Collection<UInt8>) throws(TerminalFrameError) {
        let fast: Result<TerminalFrame, TerminalFrameError>? = bytes.withContiguousStorageIfAvailable {
            TerminalFrame.decode($0)
        }
        if let fast {
            self = try fast.get()
        } else {
            self = try Array(bytes).withUnsafeBufferPointer { TerminalFrame.decode($0) }.get()
        }
    }

    private static func decode(_ b: UnsafeBufferPointer<UInt8>) -> Result<TerminalFrame, TerminalFrameError> {
        let n = b.count
        for i in 0..<min(4, n) where b[i] != magic[i] {
            return .failure(TerminalFrameError(kind: .badMagic, offset: i,
                                               message: "bad magic: expected \"PTC1\" (50 54 43 31), found byte 0x\(hexString([b[i]]))"))
        }
        guard n >= headerBytes else {
            return .failure(TerminalFrameError(kind: .shortHeader, offset: n,
                                               message: "frame is \(n) bytes; the header needs \(headerBytes) (magic + u16 session-id length)"))
        }
        let length = Int(b[4]) << 8 | Int(b[5])
        guard headerBytes + length <= n else {
            return .failure(TerminalFrameError(kind: .sessionIdPastEnd, offset: 4,
                                               message: "session id length \(length) runs past the end of the \(n)-byte frame"))
        }
        let idRange = headerBytes..<(headerBytes + length)
        if let bad = UTF8Validation.firstError(b, in: idRange) {
            return .failure(TerminalFrameError(kind: .invalidSessionId, offset: bad.offset,
                                               message: "session id is not valid UTF-8: \(bad.reason)"))
        }
        let sessionId = String(decoding: UnsafeBufferPointer(rebasing: b[idRange]), as: UTF8.self)
        let data = Array(UnsafeBufferPointer(rebasing: b[idRange.upperBound..<n]))
        return .success(TerminalFrame(sessionId: sessionId, data: data))
    }

    /// The first `maxBytes` bytes of `data` as one line of text for the CLI.
    ///
    /// Printable ASCII and well-formed UTF-8 characters stay as they are; `\` becomes `\\`; `\n`, `\r`,
    /// `\t` and ESC are written `\n`, `\r`, `\t`, `\e`; other control bytes, DEL and ill-formed bytes
    /// are `\xNN`. A character that would cross `maxBytes` is left out, and a cut is marked
    /// `…(+N bytes)`.
    public func printablePreview(maxBytes: Int) -> String {
        data.withUnsafeBufferPointer { b in
            let limit = min(max(0, maxBytes), b.count)
            var out = ""
            out.reserveCapacity(limit + 16)
            var i = 0
            while i < limit {
                let c = b[i]
                switch c {
                case 0x5C: out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                case 0x1B: out += "\\e"
                case 0x20..<0x7F: out.unicodeScalars.append(Unicode.Scalar(c))
                case 0x80...:
                    if case .valid(let length) = UTF8Validation.sequence(b, at: i, end: b.count) {
                        guard i + length <= limit else {
                            return out + "…(+\(b.count - i) bytes)"
                        }
                        out += String(decoding: UnsafeBufferPointer(rebasing: b[i..<(i + length)]), as: UTF8.self)
                        i += length
                        continue
                    }
                    out += "\\x" + hexString([c])
                default: out += "\\x" + hexString([c])
                }
                i += 1
            }
            if limit < b.count { out += "…(+\(b.count - limit) bytes)" }
            return out
        }
    }
}
