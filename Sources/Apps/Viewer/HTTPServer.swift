public import Net
import RelayProtocol
import Synchronization
import Sync

/// An HTTP/1.1 request as the viewer's server reads it: GET (or HEAD) of a path with a query.
public struct HTTPRequest: Sendable, Hashable {
    /// `GET`, `HEAD`, ...
    public var method: String
    /// The path without the query (`/api/records`).
    public var path: String
    /// The query's parameters, percent-decoded (`+` is a space); a repeated name keeps its last value.
    public var query: [String: String]
    /// The header fields, names lowercased.
    public var headers: [String: String]

    /// A request.
    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:]) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
    }

    /// Parses a request head (the bytes before the empty line, without it). Nil when it is not
    /// `METHOD TARGET HTTP/1.x` with well-formed fields.
    public init?(head: [UInt8]) {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1."), !requestLine[0].isEmpty, requestLine[1].hasPrefix("/") else { return nil }
        method = String(requestLine[0])
        let target = requestLine[1]
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let p = Self.percentDecoded(parts[0], plusIsSpace: false) else { return nil }
        path = p
        var q: [String: String] = [:]
        if parts.count == 2 {
            for item in parts[1].split(separator: "&") where !item.isEmpty {
                let kv = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let k = Self.percentDecoded(kv[0], plusIsSpace: true),
                      let v = Self.percentDecoded(kv.count == 2 ? kv[1] : "", plusIsSpace: true) else { return nil }
                q[k] = v
            }
        }
        query = q
        var h: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].lowercased()
            guard !name.isEmpty, !name.contains(" ") else { return nil }
            h[name] = String(line[line.index(after: colon)...]).trimmingCharacters(in: " \t")
        }
        headers = h
    }

    /// `%41` and (in queries) `+` decoded; nil for a bad escape or bytes that are not UTF-8.
    static func percentDecoded(_ s: Substring, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%") {
                guard bytes.count >= 2, let hi = hexDigitValue(bytes[bytes.startIndex]), let lo = hexDigitValue(bytes[bytes.startIndex + 1]) else { return nil }
                out.append(hi << 4 | lo)
                bytes = bytes.dropFirst(2)
            } else if b == UInt8(ascii: "+") && plusIsSpace {
                out.append(0x20)
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

/// An HTTP response: status, content type, body.
public struct HTTPResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String
    /// The body.
    public var body: [UInt8]

    /// A response.
    public init(status: Int, contentType: String, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    /// A plain-text response.
    public static func text(_ status: Int, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((message + "\n").utf8))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The response as bytes: status line, `Content-Type`, `Content-Length`, `Cache-Control: no-store`,
    /// `X-Content-Type-Options: nosniff`, and `Connection: close` when `close`; no body for HEAD.
    func serialized(close: Bool, head: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        text += "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
        if close { text += "Connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8) + (head ? [] : body)
    }
}

/// A small HTTP/1.1 server for the viewer (loopback by default): GET and HEAD only, keep-alive, one
/// thread per connection and at most `maxConnections` at once (more are answered 503 and closed), a
/// request head of at most 16 KiB, an idle connection closed after `idleTimeout`. Requests whose `Host`
/// is not a loopback name or the listening host are refused (403), so a web page elsewhere cannot read
/// the trace through a DNS name it points at 127.0.0.1.
public final class ViewerHTTPServer: Sendable {
    /// The listener.
    public let listener: TCPListener
    /// The most connections served at once.
    public let maxConnections: Int
    /// How long a connection may sit idle between requests.
    public let idleTimeout: Duration
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let live = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let allowedHosts: Set<String>

    /// Binds `host:port` (port 0: an ephemeral one); `handler` answers every well-formed GET/HEAD.
    public init(host: String, port: UInt16, maxConnections: Int = 16, idleTimeout: Duration = .seconds(30),
                handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws(NetError) {
        listener = try TCPListener(host: host, port: port)
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.handler = handler
        var hosts: Set<String> = ["127.0.0.1", "localhost", "[::1]"]
        hosts.insert(host.contains(":") ? "[\(host)]" : host)
        allowedHosts = hosts
    }

    /// The URL of the page (`http://127.0.0.1:PORT/`).
    public var url: String { "http://\(listener.localAddress)/" }

    /// Accepts and serves connections until `stop()`.
    public func serve() {
        while !stopped.load(ordering: .acquiring) {
            let stream: TCPStream
            do { stream = try listener.accept(timeout: nil) } catch {
                if error.kind == .closed { return }
                continue
            }
            if live.add(1, ordering: .acquiringAndReleasing).newValue > maxConnections {
                live.subtract(1, ordering: .acquiringAndReleasing)
                try? write(stream, HTTPResponse.text(503, "too many connections (\(maxConnections)); try again").serialized(close: true, head: false))
                stream.close()
                continue
            }
            // Detached: each connection thread ends with its connection and frees itself (nobody joins it,
            // and one still serving when the process exits is not left unjoined behind).
            do {
                try NetThread.detached(name: "viewer-http") { [self] in
                    connection(stream)
                    live.subtract(1, ordering: .acquiringAndReleasing)
                }
            } catch {
                live.subtract(1, ordering: .acquiringAndReleasing)
                try? write(stream, HTTPResponse.text(503, error.description).serialized(close: true, head: false))
                stream.close()
            }
        }
    }

    /// Stops accepting (serve() returns); open connections end after their current request.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        listener.close()
    }

    private func write(_ stream: TCPStream, _ bytes: [UInt8]) throws(NetError) {
        var failure: NetError?
        bytes.withUnsafeBytes { p in
            do throws(NetError) { try stream.write(p, timeout: .seconds(30)) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func read(_ stream: TCPStream, into chunk: inout [UInt8]) throws(NetError) -> Int {
        var result: Result<Int, NetError> = .success(0)
        chunk.withUnsafeMutableBytes { p in
            do throws(NetError) { result = .success(try stream.read(into: p, timeout: idleTimeout)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    private func connection(_ stream: TCPStream) {
        defer { stream.close() }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while !stopped.load(ordering: .acquiring) {
            // Read a head.
            var end: Int?
            while true {
                if let e = Self.headEnd(buffer) { end = e; break }
                if buffer.count > 16_384 {
                    try? write(stream, HTTPResponse.text(431, "request head over 16 KiB").serialized(close: true, head: false))
                    return
                }
                let n: Int
                do { n = try read(stream, into: &chunk) } catch { return }
                if n == 0 { return }
                buffer += chunk[0..<n]
            }
            guard let end else { return }
            let head = Array(buffer[0..<end])
            buffer.removeFirst(end + 4)
            guard let request = HTTPRequest(head: head) else {
                try? write(stream, HTTPResponse.text(400, "not an HTTP/1.1 request").serialized(close: true, head: false))
                return
            }
            let close = request.headers["connection"]?.lowercased().contains("close") == true
            let response: HTTPResponse
            if request.method != "GET" && request.method != "HEAD" {
                response = .text(405, "\(request.method) is not served: the viewer answers GET")
            } else if (Int(request.headers["content-length"] ?? "0") ?? 1) != 0 || request.headers["transfer-encoding"] != nil {
                response = .text(413, "a GET with a body is not served")
            } else if let host = request.headers["host"], !allowedHosts.contains(Self.hostName(host)) {
                response = .text(403, "Host \(host) is not this viewer's (open it at \(url))")
            } else {
                response = handler(request)
            }
            let bodyless = response.status == 413 || response.status == 405
            do { try write(stream, response.serialized(close: close || bodyless, head: request.method == "HEAD")) } catch { return }
            if close || bodyless { return }
        }
    }

    /// The host of a `Host` value without its port (`[::1]:8080` -> `[::1]`).
    static func hostName(_ value: String) -> String {
        if value.hasPrefix("[") { return value.firstIndex(of: "]").map { String(value[...$0]) } ?? value }
        return value.split(separator: ":", maxSplits: 1).first.map(String.init) ?? value
    }

    static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        var i = 0
        while i + 3 < b.count {
            if b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
            i += 1
        }
        return nil
    }
}

