/// An error reading or writing a trace file: what went wrong (`code`), where (`offset`, the byte offset in
/// the file when it is known) and what to do (`message`).
public struct TraceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem. An open set: new codes may be added.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The code's name, e.g. `truncated`.
        public var rawValue: String
        /// Creates a code from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// The input does not start with a RelayTrace file header.
        public static let notATrace = Code(rawValue: "notATrace")
        /// The file's format version is newer than this reader understands.
        public static let unsupportedVersion = Code(rawValue: "unsupportedVersion")
        /// The file ends in the middle of a frame (or right after the index, before the trailer).
        public static let truncated = Code(rawValue: "truncated")
        /// A structure is inconsistent: bad magic, size field, record numbering, index mismatch.
        public static let corrupt = Code(rawValue: "corrupt")
        /// A CRC-32C or zstd content checksum does not match the bytes.
        public static let checksumMismatch = Code(rawValue: "checksumMismatch")
        /// A declared size is beyond a limit (record, chunk, index, header): refused before allocating.
        public static let limitExceeded = Code(rawValue: "limitExceeded")
        /// zstd refused to decompress or compress a frame.
        public static let compression = Code(rawValue: "compression")
        /// An operating-system call failed (open, read, write, fsync).
        public static let io = Code(rawValue: "io")
        /// The writer stopped early (write error) and did not finish the file.
        public static let writerStopped = Code(rawValue: "writerStopped")
        /// A header or record payload is not what its kind requires (e.g. header JSON without fields).
        public static let invalidPayload = Code(rawValue: "invalidPayload")
        /// The caller asked for something impossible (seek past the end, writer already closed).
        public static let invalidArgument = Code(rawValue: "invalidArgument")
    }

    /// What went wrong.
    public var code: Code
    /// The byte offset in the file where the problem was found, when known.
    public var offset: UInt64?
    /// A sentence for a human: what, where, and what to do about it.
    public var message: String
    /// The system `errno` behind an `.io` error (e.g. ENOENT, ENOSPC), when there is one.
    public var systemErrno: Int32?

    /// Creates an error.
    public init(_ code: Code, offset: UInt64? = nil, _ message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }

    /// `code at byte offset N: message`.
    public var description: String {
        if let offset { return "\(code) at byte offset \(offset): \(message)" }
        return "\(code): \(message)"
    }
}
