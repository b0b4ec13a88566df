/// A parsed `ws://` or `wss://` URL (RFC 6455 §3): scheme, host, port and request target.
public struct WebSocketURL: Hashable, Sendable, CustomStringConvertible {
    /// Whether the scheme is `wss` (TLS).
    public var isSecure: Bool
    /// The host without brackets (`example.com`, `127.0.0.1`, `::1`).
    public var host: String
    /// The port (default 80 for ws, 443 for wss).
    public var port: UInt16
    /// The request target: path and query, starting with `/`.
    public var target: String

    /// Parses `ws[s]://host[:port][/path][?query]`. IPv6 hosts go in brackets (`ws://[::1]:8080/`).
    /// - Throws: ``WebSocketError/invalidURL(_:)`` for another scheme, user info, a fragment, an empty
    ///   host, a bad port, or characters that must be percent-encoded.
    public init(_ string: String) throws(WebSocketError) {
        let lower = string.lowercased()
        let rest: Substring
        if lower.hasPrefix("wss://") {
            isSecure = true
            rest = string.dropFirst(6)
        } else if lower.hasPrefix("ws://") {
            isSecure = false
            rest = string.dropFirst(5)
        } else {
            throw .invalidURL("\"\(string.prefix(80))\" does not start with ws:// or wss://")
        }
        guard string.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidURL("\"\(string.prefix(80))\" has spaces, control or non-ASCII characters; percent-encode them")
        }
        guard !rest.contains("#") else {
            throw .invalidURL("\"\(string.prefix(80))\" has a fragment (#...); WebSocket URLs may not (RFC 6455 §3)")
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if path.hasPrefix("?") { path = "/" + path }
        target = path.isEmpty ? "/" : path
        guard !authority.contains("@") else {
            throw .invalidURL("\"\(string.prefix(80))\" has user info (user@); send credentials in headers instead")
        }
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw .invalidURL("IPv6 host in \"\(authority)\" has no closing ]")
            }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidURL("unexpected \"\(after)\" after the IPv6 host; write [host]:port") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = String(authority[..<colon])
            portText = authority[authority.index(after: colon)...]
        } else {
            host = String(authority)
        }
        guard !host.isEmpty else { throw .invalidURL("\"\(string.prefix(80))\" has no host") }
        if let portText {
            guard let value = UInt16(portText), value != 0 else {
                throw .invalidURL("port \"\(portText.prefix(20))\" is not a number from 1 to 65535")
            }
            port = value
        } else {
            port = isSecure ? 443 : 80
        }
    }

    /// The `Host` header value: the host (bracketed when IPv6), with `:port` unless it is the default.
    public var hostHeader: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? h : "\(h):\(port)"
    }

    /// The URL in normal form, e.g. `wss://example.com/ws?x=1`.
    public var description: String { "\(isSecure ? "wss" : "ws")://\(hostHeader)\(target)" }
}
