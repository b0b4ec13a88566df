/// One header field of an HTTP/1.1 head, as written (name case preserved).
public struct HTTPHeaderField: Hashable, Sendable {
    /// The field name as it appeared (compare case-insensitively).
    public var name: String
    /// The field value with surrounding spaces and tabs removed.
    public var value: String

    /// A field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// The header fields of an HTTP/1.1 request or response, in order, with case-insensitive lookup.
///
/// A dictionary literal keeps its order: `["Authorization": "Bearer ...", "X-Device-ID": "..."]`.
public struct HTTPHeaders: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were written or received.
    public private(set) var fields: [HTTPHeaderField]

    /// Headers from `(name, value)` pairs, in order.
    public init(_ pairs: [(String, String)] = []) {
        fields = pairs.map { HTTPHeaderField(name: $0.0, value: $0.1) }
    }

    /// Headers from a literal, in the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// Appends a field (an existing field of the same name stays).
    public mutating func add(name: String, value: String) {
        fields.append(HTTPHeaderField(name: name, value: value))
    }

    /// The number of fields.
    public var count: Int { fields.count }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[HTTPHeaderField]> { fields.makeIterator() }

    /// The value of the first field called `name` (case-insensitive), or nil.
    public subscript(name: String) -> String? {
        fields.first { asciiCaseInsensitiveEquals($0.name, name) }?.value
    }

    /// The values of every field called `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        fields.filter { asciiCaseInsensitiveEquals($0.name, name) }.map(\.value)
    }

    /// Whether a field called `name` (case-insensitive) is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// The comma-separated tokens of every field called `name`, trimmed and lowercased; e.g.
    /// `Connection: keep-alive, Upgrade` gives `["keep-alive", "upgrade"]`.
    public func tokens(for name: String) -> [String] {
        values(for: name).flatMap { value in
            value.split(separator: ",").map { asciiLowercased(trimmingOWS(Substring($0))) }.filter { !$0.isEmpty }
        }
    }
}

func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    let x = a.utf8, y = b.utf8
    guard x.count == y.count else { return false }
    for (p, q) in zip(x, y) where p != q {
        let lp = (p >= 0x41 && p <= 0x5A) ? p | 0x20 : p
        let lq = (q >= 0x41 && q <= 0x5A) ? q | 0x20 : q
        if lp != lq { return false }
    }
    return true
}

func asciiLowercased(_ s: some StringProtocol) -> String {
    String(decoding: s.utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }, as: UTF8.self)
}

func trimmingOWS(_ s: Substring) -> String {
    var slice = s.unicodeScalars[...]
    while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
    while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
    return String(String.UnicodeScalarView(slice))
}

/// tchar of RFC 9110 §5.6.2: the characters allowed in a header field name or method.
func isTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
         UInt8(ascii: "A")...UInt8(ascii: "Z"):
        return true
    default:
        return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
    }
}

func isValidHeaderName(_ name: String) -> Bool {
    !name.isEmpty && name.utf8.allSatisfy(isTokenByte)
}

/// A header value we are willing to write: visible characters, spaces and tabs; no CR, LF or NUL
/// (which would let a value inject headers), no leading or trailing whitespace.
func isValidHeaderValue(_ value: String) -> Bool {
    for b in value.utf8 where (b < 0x20 && b != 0x09) || b == 0x7F { return false }
    if let first = value.utf8.first, first == 0x20 || first == 0x09 { return false }
    if let last = value.utf8.last, last == 0x20 || last == 0x09 { return false }
    return true
}

/// Collects the bytes of an HTTP head up to and including the blank line (CRLF CRLF), incrementally and
/// within a size bound. Bytes after the head are not taken: they belong to the next protocol layer.
struct HTTPHeadAccumulator: Sendable {
    let limit: Int
    private(set) var bytes: [UInt8] = []
    private var scanFrom = 0

    init(limit: Int) { self.limit = max(4, limit) }

    enum Step {
        case needMore
        /// The head is complete; `consumed` bytes of the last input belong to it.
        case complete(consumed: Int)
        case tooLarge
    }

    mutating func append(_ input: UnsafeRawBufferPointer) -> Step {
        let room = limit - bytes.count
        let take = min(room, input.count)
        let before = bytes.count
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[0..<take]))
        var i = max(0, scanFrom - 3)
        while i + 4 <= bytes.count {
            if bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
                let end = i + 4
                bytes.removeSubrange(end...)
                return .complete(consumed: end - before)
            }
            i += 1
        }
        scanFrom = bytes.count
        return bytes.count >= limit ? .tooLarge : .needMore
    }
}

/// One side's reading of a handshake head, shared by the server (requests) and the client (responses):
/// bytes accumulate until CRLF CRLF, the head is validated once, and the outcome is latched: once complete
/// every later call returns the same head with 0 bytes consumed, once failed every later call rethrows.
struct HTTPHeadReader<Head: Sendable>: Sendable {
    private var accumulator: HTTPHeadAccumulator
    private var result: Head?
    private var failure: WebSocketHandshakeError?

    init(limit: Int) { accumulator = HTTPHeadAccumulator(limit: limit) }

    /// Takes `bytes`; `tooLarge` words the error for a head with no end within the limit (given the limit),
    /// `validate` reads the complete head.
    mutating func receive(_ bytes: UnsafeRawBufferPointer, tooLarge: (Int) -> WebSocketHandshakeError,
                          validate: ([UInt8]) throws(WebSocketHandshakeError) -> Head)
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<Head> {
        if let failure { throw failure }
        if let result { return .complete(result, consumedBytes: 0) }
        do throws(WebSocketHandshakeError) {
            switch accumulator.append(bytes) {
            case .needMore:
                return .needMore
            case .tooLarge:
                throw tooLarge(accumulator.limit)
            case .complete(let consumed):
                let head = try validate(accumulator.bytes)
                result = head
                return .complete(head, consumedBytes: consumed)
            }
        } catch {
            failure = error
            throw error
        }
    }

    /// `receive` of an array, through its bytes.
    static func receive(_ bytes: [UInt8], _ receive: (UnsafeRawBufferPointer) throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<Head>)
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<Head> {
        let outcome = bytes.withUnsafeBytes { raw in
            Result { () throws(WebSocketHandshakeError) in try receive(raw) }
        }
        return try outcome.get()
    }
}

/// A parsed HTTP/1.1 head: start line split in three, then the fields.
struct ParsedHead {
    var startLine: (String, String, String)
    var headers: HTTPHeaders
}

/// Parses a complete head (ending in CRLF CRLF). Strict: lines end in CRLF, no bare CR or LF, no obsolete
/// line folding, field names are tokens with no space before the colon. Bytes >= 0x80 in values are read
/// as ISO-8859-1 so nothing is lost. `isResponse` allows an empty reason phrase in the start line.
func parseHead(_ head: [UInt8], isResponse: Bool) -> Result<ParsedHead, HeadSyntaxError> {
    var lines: [(start: Int, end: Int)] = []
    var lineStart = 0
    var i = 0
    while i < head.count {
        let b = head[i]
        if b == 13 {
            guard i + 1 < head.count, head[i + 1] == 10 else {
                return .failure(HeadSyntaxError(message: "bare CR (not followed by LF)", offset: i))
            }
            lines.append((lineStart, i))
            i += 2
            lineStart = i
            continue
        }
        if b == 10 {
            return .failure(HeadSyntaxError(message: "bare LF (lines must end in CRLF)", offset: i))
        }
        i += 1
    }
    // The head ends in CRLF CRLF, so the last line is empty.
    guard let first = lines.first, first.end > first.start else {
        return .failure(HeadSyntaxError(message: "empty start line", offset: 0))
    }
    let startBytes = head[first.start..<first.end]
    let parts = startBytes.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
    let startLine: (String, String, String)
    if parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty {
        startLine = (latin1(parts[0]), latin1(parts[1]), latin1(parts[2]))
    } else if isResponse, parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty {
        startLine = (latin1(parts[0]), latin1(parts[1]), "")
    } else {
        return .failure(HeadSyntaxError(
            message: "start line \"\(latin1(startBytes.prefix(80)))\" does not have three space-separated parts",
            offset: first.start))
    }
    var headers = HTTPHeaders()
    for line in lines.dropFirst() where line.end > line.start {
        let bytes = head[line.start..<line.end]
        if let firstByte = bytes.first, firstByte == 0x20 || firstByte == 0x09 {
            return .failure(HeadSyntaxError(message: "obsolete line folding (header line starts with whitespace)",
                                            offset: line.start))
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else {
            return .failure(HeadSyntaxError(message: "header line without a colon", offset: line.start))
        }
        let name = bytes[line.start..<colon]
        guard !name.isEmpty, name.allSatisfy(isTokenByte) else {
            return .failure(HeadSyntaxError(
                message: "invalid header name \"\(latin1(name.prefix(80)))\" (a token, no spaces before the colon)",
                offset: line.start))
        }
        let valueBytes = bytes[(colon + 1)...]
        if let bad = valueBytes.firstIndex(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            return .failure(HeadSyntaxError(message: "control byte 0x\(hex(head[bad])) in a header value", offset: bad))
        }
        headers.add(name: latin1(name), value: trimmingOWS(Substring(latin1(valueBytes))))
    }
    return .success(ParsedHead(startLine: startLine, headers: headers))
}

struct HeadSyntaxError: Error {
    var message: String
    var offset: Int
}

/// Bytes as ISO-8859-1 (every byte is one scalar): lossless for HTTP's obs-text.
func latin1(_ bytes: some Sequence<UInt8>) -> String {
    var s = String.UnicodeScalarView()
    for b in bytes { s.append(Unicode.Scalar(b)) }
    return String(s)
}
