internal import COpenSSL

/// A failed opening handshake (RFC 6455 §4), on either side.
///
/// Server side: ``httpStatus`` is the status to refuse the request with (400, or 426 for an unsupported
/// `Sec-WebSocket-Version`), and ``refusalResponse()`` builds that response. Client side: kind `.refused`
/// carries the status the server answered (401, 429, 500, ...) and its headers (e.g. `Retry-After`).
public struct WebSocketHandshakeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Hashable, Sendable {
        /// The head did not end (CRLF CRLF) within the size limit.
        case headTooLarge
        /// The bytes are not an HTTP/1.1 head (start line, CRLF, header syntax).
        case malformedHead
        /// A request method other than GET.
        case methodNotGET
        /// An HTTP version other than HTTP/1.1.
        case unsupportedHTTPVersion
        /// A required header is absent.
        case missingHeader(String)
        /// A header has a value the handshake cannot accept.
        case invalidHeader(String)
        /// `Sec-WebSocket-Version` is not 13 (the server answers 426 with `Sec-WebSocket-Version: 13`).
        case unsupportedWebSocketVersion
        /// The server answered with a status other than 101.
        case refused
        /// The server's `Sec-WebSocket-Accept` does not match the key the client sent.
        case acceptMismatch
        /// An argument given to a builder cannot be written into a head (e.g. a CR/LF in a header value).
        case invalidArgument
    }

    /// What went wrong.
    public var kind: Kind
    /// What was received or given, where, and what to do.
    public var message: String
    /// Byte offset in the HTTP head where the problem is, when one byte is at fault.
    public var byteOffset: Int?
    /// Server side: the status to answer with. Client side, kind `.refused`: the status received.
    public var httpStatus: Int?
    /// Kind `.refused`: the headers of the server's refusal (e.g. `Retry-After`, `WWW-Authenticate`).
    public var responseHeaders: HTTPHeaders

    /// Makes an error.
    public init(_ kind: Kind, _ message: String, byteOffset: Int? = nil, httpStatus: Int? = nil,
                responseHeaders: HTTPHeaders = HTTPHeaders()) {
        self.kind = kind
        self.message = message
        self.byteOffset = byteOffset
        self.httpStatus = httpStatus
        self.responseHeaders = responseHeaders
    }

    /// `WebSocket handshake failed[ at head byte N][ (HTTP S)]: message`.
    public var description: String {
        var s = "WebSocket handshake failed"
        if let byteOffset { s += " at head byte \(byteOffset)" }
        if let httpStatus { s += " (HTTP \(httpStatus))" }
        return s + ": " + message
    }

    /// Server side: the plain-text refusal to send for this error (its ``httpStatus``, 400 when nil),
    /// with `Sec-WebSocket-Version: 13` on a 426, and the message as the body.
    public func refusalResponse() -> [UInt8] {
        let status = httpStatus ?? 400
        var headers = HTTPHeaders()
        if status == 426 { headers.add(name: "Sec-WebSocket-Version", value: "13") }
        return WebSocketHandshake.writeRefusal(status: status, reason: WebSocketHandshake.reasonPhrase(for: status),
                                               headers: headers, body: Array(message.utf8))
    }
}

/// The progress of an incremental handshake parser.
public enum WebSocketHandshakeProgress<Value: Sendable>: Sendable {
    /// The head is not complete yet: every byte given was taken; feed more.
    case needMore
    /// The head is complete. `consumedBytes` of the bytes passed to *this* call belong to it; the rest
    /// (`bytes[consumedBytes...]`) are the first WebSocket frame bytes and go to the connection.
    case complete(Value, consumedBytes: Int)
}

/// Handshake constants and builders shared by both sides (RFC 6455 §1.3, §4).
public enum WebSocketHandshake {
    /// The GUID appended to the key before hashing (RFC 6455 §1.3).
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// The only protocol version (RFC 6455 §4.1).
    public static let version = "13"
    /// Default bound on the size of a request or response head: 16 KiB.
    public static let defaultMaxHeadSize = 16 * 1024

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)). For the RFC's
    /// `dGhlIHNhbXBsZSBub25jZQ==` it is `s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`.
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)  // SHA_DIGEST_LENGTH
        input.withUnsafeBufferPointer { inBuf in
            digest.withUnsafeMutableBufferPointer { outBuf in
                _ = SHA1(inBuf.baseAddress, inBuf.count, outBuf.baseAddress)
            }
        }
        return Base64.encode(digest)
    }

    /// `Sec-WebSocket-Key` for a 16-byte nonce: its base64 form.
    /// - Throws: `.invalidArgument` when `nonce` is not 16 bytes.
    public static func key(nonce: [UInt8]) throws(WebSocketHandshakeError) -> String {
        guard nonce.count == 16 else {
            throw WebSocketHandshakeError(
                .invalidArgument, "the Sec-WebSocket-Key nonce must be 16 bytes, got \(nonce.count); draw 16 random bytes")
        }
        return Base64.encode(nonce)
    }

    /// The standard reason phrase of an HTTP status ("Unauthorized" for 401), "Error" when unknown.
    public static func reasonPhrase(for status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }

    /// Server side: the `101 Switching Protocols` response accepting `request`, with `extraHeaders` after
    /// the required ones.
    /// - Throws: `.invalidArgument` for a header name that is not a token or a value with CR, LF or NUL.
    public static func acceptResponse(for request: WebSocketUpgradeRequest,
                                      extraHeaders: HTTPHeaders = HTTPHeaders()) throws(WebSocketHandshakeError) -> [UInt8] {
        try validate(extraHeaders)
        var out = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
        out += Array("Sec-WebSocket-Accept: \(acceptValue(forKey: request.key))\r\n".utf8)
        writeHeaders(extraHeaders, into: &out)
        out += [13, 10]
        return out
    }

    /// Server side: a plain-text refusal (e.g. 401 when `Authorization` is wrong, 429, 500) with
    /// `Content-Length` and `Connection: close`; the server closes the TCP connection after sending it.
    /// - Throws: `.invalidArgument` for a status outside 200-599 (or 101), a reason or header with CR/LF.
    public static func refusalResponse(status: Int, reason: String? = nil, headers: HTTPHeaders = HTTPHeaders(),
                                       body: String = "") throws(WebSocketHandshakeError) -> [UInt8] {
        guard (200...599).contains(status) else {
            throw WebSocketHandshakeError(.invalidArgument, "refusal status \(status) is not 200-599")
        }
        let phrase = reason ?? reasonPhrase(for: status)
        guard isValidHeaderValue(phrase) else {
            throw WebSocketHandshakeError(.invalidArgument, "reason phrase contains CR, LF or another control character")
        }
        try validate(headers)
        return writeRefusal(status: status, reason: phrase, headers: headers, body: Array(body.utf8))
    }

    static func writeRefusal(status: Int, reason: String, headers: HTTPHeaders, body: [UInt8]) -> [UInt8] {
        var out = Array("HTTP/1.1 \(status) \(reason)\r\n".utf8)
        out += Array("Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.count)\r\nConnection: close\r\n".utf8)
        writeHeaders(headers, into: &out)
        out += [13, 10]
        out += body
        return out
    }

    static func writeHeaders(_ headers: HTTPHeaders, into out: inout [UInt8]) {
        for field in headers {
            out += Array(field.name.utf8)
            out += [UInt8(ascii: ":"), UInt8(ascii: " ")]
            out += Array(field.value.utf8)
            out += [13, 10]
        }
    }

    static func validate(_ headers: HTTPHeaders) throws(WebSocketHandshakeError) {
        for field in headers {
            guard isValidHeaderName(field.name) else {
                throw WebSocketHandshakeError(
                    .invalidArgument, "header name \"\(field.name)\" is not an HTTP token (letters, digits, !#$%&'*+-.^_`|~)")
            }
            guard isValidHeaderValue(field.value) else {
                throw WebSocketHandshakeError(
                    .invalidArgument,
                    "the value of header \(field.name) contains CR, LF or another control character, or surrounding spaces; remove them")
            }
        }
    }
}

// MARK: - Server side

/// A validated client upgrade request (RFC 6455 §4.2.1). The relay checks ``headers`` (e.g.
/// `Authorization`, `X-Device-ID`) and then answers with ``WebSocketHandshake/acceptResponse(for:extraHeaders:)``
/// or a refusal (401, 429, ...).
public struct WebSocketUpgradeRequest: Hashable, Sendable {
    /// The request target, e.g. `/ws/device-link` (path and query).
    public var target: String
    /// All header fields, in order.
    public var headers: HTTPHeaders
    /// The `Sec-WebSocket-Key` value (base64 of 16 bytes).
    public var key: String

    /// Makes a request value (for tests and tools; a server gets it from ``WebSocketServerHandshake``).
    public init(target: String, headers: HTTPHeaders, key: String) {
        self.target = target
        self.headers = headers
        self.key = key
    }
}

/// Server side of the opening handshake: reads and validates the client's upgrade request, incrementally.
///
/// Feed bytes with ``receive(_:)-(UnsafeRawBufferPointer)`` until `.complete`; bytes after the head go to
/// a server ``WebSocketConnection``. On an error, send ``WebSocketHandshakeError/refusalResponse()`` and
/// close. Validation (RFC 6455 §4.2.1): `GET`, origin-form target, `HTTP/1.1`, one `Host`, `Upgrade`
/// containing `websocket`, `Connection` containing `Upgrade`, one `Sec-WebSocket-Key` that is base64 of
/// 16 bytes (else 400), `Sec-WebSocket-Version: 13` (else 426). Header names are case-insensitive.
public struct WebSocketServerHandshake: Sendable {
    private var reader: HTTPHeadReader<WebSocketUpgradeRequest>

    /// A parser that refuses heads over `maxHeadSize` bytes (16 KiB by default).
    public init(maxHeadSize: Int = WebSocketHandshake.defaultMaxHeadSize) {
        reader = HTTPHeadReader(limit: maxHeadSize)
    }

    /// Takes received bytes. Once complete it keeps returning the request with 0 bytes consumed; once
    /// failed it rethrows the error.
    /// - Throws: ``WebSocketHandshakeError`` with the HTTP status to refuse with.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer)
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<WebSocketUpgradeRequest> {
        try reader.receive(bytes, tooLarge: { limit in
            WebSocketHandshakeError(
                .headTooLarge,
                "the request head has no end (CRLF CRLF) within \(limit) bytes; send fewer or shorter headers",
                byteOffset: limit, httpStatus: 400)
        }, validate: Self.validate)
    }

    /// Takes received bytes (see ``receive(_:)-(UnsafeRawBufferPointer)``).
    public mutating func receive(_ bytes: [UInt8])
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<WebSocketUpgradeRequest> {
        try HTTPHeadReader.receive(bytes) { raw throws(WebSocketHandshakeError) in try receive(raw) }
    }

    static func validate(_ head: [UInt8]) throws(WebSocketHandshakeError) -> WebSocketUpgradeRequest {
        let parsed: ParsedHead
        switch parseHead(head, isResponse: false) {
        case .success(let p): parsed = p
        case .failure(let e):
            throw WebSocketHandshakeError(.malformedHead, "malformed request head: \(e.message)",
                                          byteOffset: e.offset, httpStatus: 400)
        }
        let (method, target, version) = parsed.startLine
        guard method == "GET" else {
            throw WebSocketHandshakeError(.methodNotGET, "method is \(method); a WebSocket upgrade must be a GET",
                                          byteOffset: 0, httpStatus: 400)
        }
        guard target.hasPrefix("/") else {
            throw WebSocketHandshakeError(.malformedHead, "request target \"\(target.prefix(80))\" must be a path starting with /",
                                          byteOffset: method.utf8.count + 1, httpStatus: 400)
        }
        guard version == "HTTP/1.1" else {
            throw WebSocketHandshakeError(.unsupportedHTTPVersion, "HTTP version is \"\(version.prefix(20))\"; the upgrade needs HTTP/1.1",
                                          byteOffset: method.utf8.count + target.utf8.count + 2, httpStatus: 400)
        }
        let headers = parsed.headers
        let hosts = headers.values(for: "Host")
        guard hosts.count == 1 else {
            throw WebSocketHandshakeError(
                hosts.isEmpty ? .missingHeader("Host") : .invalidHeader("Host"),
                hosts.isEmpty ? "no Host header; HTTP/1.1 requires one" : "\(hosts.count) Host headers; send exactly one",
                httpStatus: 400)
        }
        guard headers.contains("Upgrade") else {
            throw WebSocketHandshakeError(.missingHeader("Upgrade"), "no Upgrade header; send Upgrade: websocket", httpStatus: 400)
        }
        guard headers.tokens(for: "Upgrade").contains("websocket") else {
            throw WebSocketHandshakeError(.invalidHeader("Upgrade"),
                                          "Upgrade is \"\(headers["Upgrade"] ?? "")\"; it must contain websocket", httpStatus: 400)
        }
        guard headers.contains("Connection") else {
            throw WebSocketHandshakeError(.missingHeader("Connection"), "no Connection header; send Connection: Upgrade", httpStatus: 400)
        }
        guard headers.tokens(for: "Connection").contains("upgrade") else {
            throw WebSocketHandshakeError(.invalidHeader("Connection"),
                                          "Connection is \"\(headers["Connection"] ?? "")\"; it must contain Upgrade", httpStatus: 400)
        }
        let keys = headers.values(for: "Sec-WebSocket-Key")
        guard let key = keys.first else {
            throw WebSocketHandshakeError(.missingHeader("Sec-WebSocket-Key"),
                                          "no Sec-WebSocket-Key header; send base64 of 16 random bytes", httpStatus: 400)
        }
        guard keys.count == 1, let nonce = Base64.decode(key), nonce.count == 16 else {
            throw WebSocketHandshakeError(
                .invalidHeader("Sec-WebSocket-Key"),
                keys.count > 1 ? "\(keys.count) Sec-WebSocket-Key headers; send exactly one"
                    : "Sec-WebSocket-Key \"\(key.prefix(40))\" is not base64 of 16 bytes",
                httpStatus: 400)
        }
        let versions = headers.values(for: "Sec-WebSocket-Version")
        guard !versions.isEmpty else {
            throw WebSocketHandshakeError(.missingHeader("Sec-WebSocket-Version"),
                                          "no Sec-WebSocket-Version header; send Sec-WebSocket-Version: 13", httpStatus: 400)
        }
        guard versions == [WebSocketHandshake.version] else {
            throw WebSocketHandshakeError(
                .unsupportedWebSocketVersion,
                "Sec-WebSocket-Version is \"\(versions.joined(separator: ", ").prefix(40))\"; this server speaks only 13",
                httpStatus: 426)
        }
        return WebSocketUpgradeRequest(target: target, headers: headers, key: key)
    }
}

// MARK: - Client side

/// A server's `101 Switching Protocols` response that passed validation.
public struct WebSocketUpgradeResponse: Hashable, Sendable {
    /// The status code (always 101 here).
    public var status: Int
    /// The reason phrase as sent.
    public var reason: String
    /// All header fields, in order.
    public var headers: HTTPHeaders
}

/// Client side of the opening handshake: builds the upgrade request and validates the server's answer,
/// incrementally.
///
/// Send ``requestBytes``, then feed received bytes to ``receive(_:)-(UnsafeRawBufferPointer)`` until
/// `.complete`; bytes after the head go to a client ``WebSocketConnection``. A status other than 101
/// (401 for a bad JWT, 429, 500, ...) throws kind `.refused` with the status and headers.
public struct WebSocketClientHandshake: Sendable {
    /// The `Sec-WebSocket-Key` sent.
    public let key: String
    /// The `Sec-WebSocket-Accept` the server must answer with.
    public let expectedAccept: String
    /// The request head to send, byte for byte.
    public let requestBytes: [UInt8]

    private let offeredProtocols: [String]
    private var reader: HTTPHeadReader<WebSocketUpgradeResponse>

    /// Builds the request `GET <path> HTTP/1.1` with `Host`, `Upgrade: websocket`, `Connection: Upgrade`,
    /// `Sec-WebSocket-Key` (base64 of `nonce`), `Sec-WebSocket-Version: 13`, then `extraHeaders` in order
    /// (e.g. `Authorization`, `X-Device-ID`).
    /// - Parameters:
    ///   - host: the `Host` value: host name, with `:port` when not the scheme's default.
    ///   - path: the request target, starting with `/` (query included).
    ///   - nonce: 16 bytes from the driver's random source (injected for determinism).
    ///   - extraHeaders: more headers; they must not repeat the five above.
    ///   - maxHeadSize: bound on the response head (16 KiB by default).
    /// - Throws: `.invalidArgument` for a nonce that is not 16 bytes, a path without a leading `/`, a host
    ///   or header with CR/LF/control characters, or an extra header that repeats a handshake header.
    public init(host: String, path: String, nonce: [UInt8], extraHeaders: HTTPHeaders = HTTPHeaders(),
                maxHeadSize: Int = WebSocketHandshake.defaultMaxHeadSize) throws(WebSocketHandshakeError) {
        try self.init(host: host, path: path, key: try WebSocketHandshake.key(nonce: nonce), extraHeaders: extraHeaders,
                      maxHeadSize: maxHeadSize)
    }

    /// The same request with a given `Sec-WebSocket-Key` instead of a nonce: for a proxy that forwards its
    /// client's key upstream, so that the server's `Sec-WebSocket-Accept` is valid for that client too.
    /// - Throws: `.invalidHeader("Sec-WebSocket-Key")` when `key` is not base64 of 16 bytes, and what the
    ///   nonce form throws otherwise.
    public init(host: String, path: String, key: String, extraHeaders: HTTPHeaders = HTTPHeaders(),
                maxHeadSize: Int = WebSocketHandshake.defaultMaxHeadSize) throws(WebSocketHandshakeError) {
        guard let decoded = Base64.decode(key), decoded.count == 16 else {
            throw WebSocketHandshakeError(.invalidHeader("Sec-WebSocket-Key"), "Sec-WebSocket-Key \"\(key.prefix(40))\" is not base64 of 16 bytes")
        }
        guard path.hasPrefix("/"), path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw WebSocketHandshakeError(
                .invalidArgument, "path \"\(path.prefix(80))\" must start with / and contain only visible ASCII (percent-encode the rest)")
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw WebSocketHandshakeError(.invalidArgument, "host \"\(host.prefix(80))\" must be non-empty visible ASCII")
        }
        try WebSocketHandshake.validate(extraHeaders)
        for reserved in ["Host", "Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version"]
        where extraHeaders.contains(reserved) {
            throw WebSocketHandshakeError(
                .invalidArgument, "extra header \(reserved) is written by the handshake itself; remove it from extraHeaders")
        }
        var out = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
        out += Array("Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n".utf8)
        WebSocketHandshake.writeHeaders(extraHeaders, into: &out)
        out += [13, 10]
        self.key = key
        self.expectedAccept = WebSocketHandshake.acceptValue(forKey: key)
        self.requestBytes = out
        self.offeredProtocols = extraHeaders.tokens(for: "Sec-WebSocket-Protocol")
        self.reader = HTTPHeadReader(limit: maxHeadSize)
    }

    /// Takes received bytes. Once complete it keeps returning the response with 0 bytes consumed; once
    /// failed it rethrows the error.
    /// - Throws: ``WebSocketHandshakeError``: `.refused` (with ``WebSocketHandshakeError/httpStatus``)
    ///   for a non-101 status, or a validation error for a bad 101.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer)
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<WebSocketUpgradeResponse> {
        let (key, expectedAccept, offeredProtocols) = (key, expectedAccept, offeredProtocols)
        return try reader.receive(bytes, tooLarge: { limit in
            WebSocketHandshakeError(
                .headTooLarge, "the response head has no end (CRLF CRLF) within \(limit) bytes", byteOffset: limit)
        }, validate: { head throws(WebSocketHandshakeError) in
            try Self.validate(head, key: key, expectedAccept: expectedAccept, offeredProtocols: offeredProtocols)
        })
    }

    /// Takes received bytes (see ``receive(_:)-(UnsafeRawBufferPointer)``).
    public mutating func receive(_ bytes: [UInt8])
        throws(WebSocketHandshakeError) -> WebSocketHandshakeProgress<WebSocketUpgradeResponse> {
        try HTTPHeadReader.receive(bytes) { raw throws(WebSocketHandshakeError) in try receive(raw) }
    }

    private static func validate(_ head: [UInt8], key: String, expectedAccept: String, offeredProtocols: [String])
        throws(WebSocketHandshakeError) -> WebSocketUpgradeResponse {
        let parsed: ParsedHead
        switch parseHead(head, isResponse: true) {
        case .success(let p): parsed = p
        case .failure(let e):
            throw WebSocketHandshakeError(.malformedHead, "malformed response head: \(e.message)", byteOffset: e.offset)
        }
        let (version, statusText, reason) = parsed.startLine
        guard version == "HTTP/1.1" else {
            throw WebSocketHandshakeError(.unsupportedHTTPVersion,
                                          "response version is \"\(version.prefix(20))\"; expected HTTP/1.1", byteOffset: 0)
        }
        guard statusText.utf8.count == 3, statusText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let status = Int(statusText) else {
            throw WebSocketHandshakeError(.malformedHead, "status \"\(statusText.prefix(20))\" is not a 3-digit code",
                                          byteOffset: version.utf8.count + 1)
        }
        let headers = parsed.headers
        guard status == 101 else {
            throw WebSocketHandshakeError(
                .refused,
                "the server refused the upgrade with \(status) \(reason.prefix(80))"
                    + (status == 401 ? "; check the Authorization token and device binding" : "")
                    + (status == 429 ? "; back off before retrying" + (headers["Retry-After"].map { " (Retry-After: \($0))" } ?? "") : ""),
                httpStatus: status, responseHeaders: headers)
        }
        guard headers.tokens(for: "Upgrade").contains("websocket") else {
            throw WebSocketHandshakeError(headers.contains("Upgrade") ? .invalidHeader("Upgrade") : .missingHeader("Upgrade"),
                                          "101 response without Upgrade: websocket (got \"\(headers["Upgrade"] ?? "none")\")")
        }
        guard headers.tokens(for: "Connection").contains("upgrade") else {
            throw WebSocketHandshakeError(headers.contains("Connection") ? .invalidHeader("Connection") : .missingHeader("Connection"),
                                          "101 response without Connection: Upgrade (got \"\(headers["Connection"] ?? "none")\")")
        }
        let accepts = headers.values(for: "Sec-WebSocket-Accept")
        guard !accepts.isEmpty else {
            throw WebSocketHandshakeError(.missingHeader("Sec-WebSocket-Accept"), "101 response without Sec-WebSocket-Accept")
        }
        guard accepts == [expectedAccept] else {
            throw WebSocketHandshakeError(
                .acceptMismatch,
                "Sec-WebSocket-Accept is \"\(accepts.joined(separator: ", ").prefix(60))\", expected \"\(expectedAccept)\" for key \(key); the server did not hash this request's key")
        }
        if let extensions = headers["Sec-WebSocket-Extensions"] {
            throw WebSocketHandshakeError(
                .invalidHeader("Sec-WebSocket-Extensions"),
                "the server selected extensions \"\(extensions.prefix(80))\" that the client did not offer")
        }
        let selected = headers.values(for: "Sec-WebSocket-Protocol")
        if !selected.isEmpty {
            guard selected.count == 1, offeredProtocols.contains(asciiLowercased(selected[0])) else {
                throw WebSocketHandshakeError(
                    .invalidHeader("Sec-WebSocket-Protocol"),
                    "the server selected subprotocol \"\(selected.joined(separator: ", ").prefix(80))\" that the client did not offer")
            }
        }
        return WebSocketUpgradeResponse(status: status, reason: reason, headers: headers)
    }
}
