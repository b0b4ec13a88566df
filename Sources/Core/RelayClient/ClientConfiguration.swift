/// The fixed identity and endpoint of one relay client (one phone, one target desktop).
public struct ClientConfiguration: Sendable, Hashable {
    /// The phone's device ID (sent lower-cased, PROTOCOL.md §1).
    public var deviceId: String
    /// The device name sent in `register`.
    public var deviceName: String
    /// The target desktop's device ID (`X-Target-Desktop-Device-ID`, `targetDesktopDeviceId`).
    public var desktopId: String
    /// The relay socket URL, e.g. `wss://api-eu.plantocode.com/ws/device-link`.
    public var relayURL: String
    /// Whether a plain `ws://` URL to a loopback host is allowed (local development relays only).
    public var allowInsecureLoopback: Bool
    /// The seed of the machine's generator (request IDs, trace IDs, jitter); recorded in the trace header.
    public var seed: UInt64

    /// Creates a configuration, validating the URL (SPEC A4: only `wss`).
    ///
    /// - Throws: ``ClientConfigurationError`` when the URL is not `wss` (or `ws` to a loopback host with
    ///   `allowInsecureLoopback`), or has no host.
    public init(deviceId: String, deviceName: String, desktopId: String, relayURL: String,
                allowInsecureLoopback: Bool = false, seed: UInt64) throws(ClientConfigurationError) {
        try RelayURLPolicy.validate(relayURL, allowInsecureLoopback: allowInsecureLoopback)
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.desktopId = desktopId
        self.relayURL = relayURL
        self.allowInsecureLoopback = allowInsecureLoopback
        self.seed = seed
    }

    /// The device ID as it goes on the wire: lower-cased (PROTOCOL.md §1).
    public var wireDeviceId: String { deviceId.lowercased() }

    /// The resume-token key of this client: `<device ID>::<desktop ID>` (SPEC A7).
    public var resumeKey: String { ResumeTokenStore.key(deviceId: wireDeviceId, desktopId: desktopId) }
}

/// A relay URL the client refuses, and why.
public struct ClientConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The refused URL.
    public var url: String
    /// What is wrong and what to do.
    public var message: String
    /// `relay URL '<url>' refused: <message>`.
    public var description: String { "relay URL '\(url)' refused: \(message)" }
}

/// SPEC A4: which relay URLs the client accepts.
public enum RelayURLPolicy {
    /// Accepts `wss://host[:port][/path]`; `ws://` only to a loopback host (127.0.0.0/8, `::1`,
    /// `localhost`) and only when `allowInsecureLoopback` is set; refuses everything else.
    public static func validate(_ url: String, allowInsecureLoopback: Bool) throws(ClientConfigurationError) {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else {
            throw ClientConfigurationError(url: url, message: "not an absolute URL; use wss://host/ws/device-link")
        }
        let scheme = parts[0].lowercased()
        let rest = parts[1]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = hostPart(of: Substring(authority))
        guard !host.isEmpty else {
            throw ClientConfigurationError(url: url, message: "the URL has no host")
        }
        switch scheme {
        case "wss":
            return
        case "ws":
            guard isLoopback(host) else {
                throw ClientConfigurationError(
                    url: url, message: "only wss URLs are accepted (SPEC A4); plain ws is allowed only to a loopback host")
            }
            guard allowInsecureLoopback else {
                throw ClientConfigurationError(
                    url: url,
                    message: "only wss URLs are accepted (SPEC A4); for a local development relay set allowInsecureLoopback")
            }
        default:
            throw ClientConfigurationError(url: url, message: "scheme '\(scheme)' is not a WebSocket scheme; use wss")
        }
    }

    /// Whether `host` (without brackets or port) names the loopback interface.
    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { p in UInt8(p) != nil }
    }

    private static func hostPart(of authority: Substring) -> String {
        var a = authority
        if let at = a.lastIndex(of: "@") { a = a[a.index(after: at)...] }
        if a.hasPrefix("[") {
            guard let close = a.firstIndex(of: "]") else { return "" }
            return String(a[a.index(after: a.startIndex)..<close])
        }
        if let colon = a.firstIndex(of: ":") { return String(a[..<colon]) }
        return String(a)
    }
}
