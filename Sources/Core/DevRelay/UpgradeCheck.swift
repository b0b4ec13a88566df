import COpenSSL
public import RelayProtocol

/// Why the relay refused an upgrade: the HTTP status and a message that says what is wrong and what to do.
public struct UpgradeRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status (401, 404, ...).
    public var status: Int
    /// What is wrong.
    public var message: String

    /// Creates a refusal.
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    /// `HTTP 401: ...`.
    public var description: String { "HTTP \(status): \(message)" }
}

/// Who an accepted upgrade belongs to.
public struct UpgradeIdentity: Sendable, Hashable {
    /// The user (the JWT's `sub`).
    public var userId: String
    /// `X-Device-ID`, lower-cased.
    public var deviceId: String
    /// `X-Client-Type`.
    public var kind: ClientKind
    /// `X-Target-Desktop-Device-ID`, lower-cased (1.6 phones).
    public var targetDesktopDeviceId: String?
}

/// PROTOCOL.md §1 upgrade checks of the development relay (no JWT signature check).
public enum UpgradeCheck {
    /// Checks `request` and returns who it is, or the refusal.
    ///
    /// - Path other than `/ws/device-link` (query ignored): 404.
    /// - `Authorization` missing, not `Bearer <JWT>`, or a JWT whose payload is not base64url JSON
    ///   with a string `sub`: 401.
    /// - `X-Device-ID` missing or empty: 401.
    /// - JWT claim `device_id` present and not equal (lower-cased) to `X-Device-ID`: 401.
    /// - JWT claim `tbh` present and not SHA-256 of `X-Token-Binding`, written as unpadded or padded
    ///   base64url, or as hex (either case): 401.
    /// - `X-Client-Type` other than `mobile`/`desktop` (absent means `mobile`): 401.
    public static func check(_ request: UpgradeRequest) -> Result<UpgradeIdentity, UpgradeRefusal> {
        let path = request.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path == RelayConstants.devicePath else {
            return .failure(UpgradeRefusal(status: 404, message: "no WebSocket endpoint at \(path); connect to \(RelayConstants.devicePath)"))
        }
        guard let auth = request.value(of: "Authorization") else {
            return .failure(UpgradeRefusal(status: 401, message: "missing Authorization header; send 'Authorization: Bearer <JWT>'"))
        }
        let parts = auth.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, asciiCaseInsensitiveEquals(String(parts[0]), "Bearer") else {
            return .failure(UpgradeRefusal(status: 401, message: "Authorization is not 'Bearer <JWT>'"))
        }
        let claims: [String: JSONValue]
        switch decodeJWTPayload(String(parts[1])) {
        case .success(let c): claims = c
        case .failure(let r): return .failure(r)
        }
        guard case .string(let sub)? = claims["sub"], !sub.isEmpty else {
            return .failure(UpgradeRefusal(status: 401, message: "JWT payload has no string \"sub\" claim (the user)"))
        }
        guard let rawDevice = request.value(of: "X-Device-ID"), !rawDevice.isEmpty else {
            return .failure(UpgradeRefusal(status: 401, message: "missing X-Device-ID header; send the lower-cased device UUID"))
        }
        let deviceId = lowercasedASCII(rawDevice)
        if let claim = claims["device_id"] {
            guard case .string(let d) = claim, lowercasedASCII(d) == deviceId else {
                return .failure(UpgradeRefusal(status: 401, message: "JWT device_id claim does not match X-Device-ID \(deviceId)"))
            }
        }
        if let claim = claims["tbh"] {
            guard case .string(let tbh) = claim else {
                return .failure(UpgradeRefusal(status: 401, message: "JWT tbh claim is not a string"))
            }
            guard let binding = request.value(of: "X-Token-Binding") else {
                return .failure(UpgradeRefusal(status: 401, message: "JWT has a tbh claim but X-Token-Binding is missing"))
            }
            guard tokenBindingMatches(claim: tbh, binding: binding) else {
                return .failure(UpgradeRefusal(status: 401, message: "JWT tbh claim is not SHA-256 of X-Token-Binding (base64url or hex)"))
            }
        }
        let kind: ClientKind
        switch request.value(of: "X-Client-Type").map(lowercasedASCII) {
        case nil, "mobile": kind = .mobile
        case "desktop": kind = .desktop
        case let other?:
            return .failure(UpgradeRefusal(status: 401, message: "X-Client-Type \"\(other)\" is neither mobile nor desktop"))
        }
        let target = request.value(of: "X-Target-Desktop-Device-ID").flatMap { $0.isEmpty ? nil : lowercasedASCII($0) }
        return .success(UpgradeIdentity(userId: sub, deviceId: deviceId, kind: kind, targetDesktopDeviceId: target))
    }

    /// The claims of a JWT's payload (the middle part, base64url JSON object). The signature is not checked.
    public static func decodeJWTPayload(_ jwt: String) -> Result<[String: JSONValue], UpgradeRefusal> {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(UpgradeRefusal(status: 401, message: "malformed JWT: \(parts.count) dot-separated parts, expected 3"))
        }
        guard let bytes = base64URLDecode(parts[1]) else {
            return .failure(UpgradeRefusal(status: 401, message: "malformed JWT: the payload (part 2) is not base64url"))
        }
        guard let json = try? JSONValue(parsing: bytes), case .object(let o) = json else {
            return .failure(UpgradeRefusal(status: 401, message: "malformed JWT: the payload is not a JSON object"))
        }
        return .success(o)
    }

    /// Whether `claim` is SHA-256 of `binding` (UTF-8) as base64url (padded or not) or hex.
    public static func tokenBindingMatches(claim: String, binding: String) -> Bool {
        let digest = sha256(Array(binding.utf8))
        if let decoded = base64URLDecode(Substring(claim)), decoded == digest { return true }
        return lowercasedASCII(claim) == hexString(digest)
    }

    /// SHA-256 of `bytes` (OpenSSL).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { o in
                _ = SHA256(input.baseAddress, input.count, o.baseAddress)
            }
        }
        return out
    }

    /// Base64url without padding of `bytes` (how a `tbh` claim is usually written).
    public static func base64URLEncode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if i + 1 < bytes.count { out.append(alphabet[Int(n >> 6 & 63)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(n & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url (also accepts `+`/`/` and trailing `=` padding); nil on any other byte or a
    /// length that cannot be base64.
    public static func base64URLDecode(_ text: Substring) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        var sawPad = false
        for c in text.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"), UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "_"), UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="):
                sawPad = true
                continue
            default: return nil
            }
            if sawPad { return nil }
            values.append(v)
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i < values.count {
            let n = values.count - i
            let v0 = UInt32(values[i]), v1 = n > 1 ? UInt32(values[i + 1]) : 0
            let v2 = n > 2 ? UInt32(values[i + 2]) : 0, v3 = n > 3 ? UInt32(values[i + 3]) : 0
            let w = v0 << 18 | v1 << 12 | v2 << 6 | v3
            out.append(UInt8(w >> 16 & 0xFF))
            if n > 2 { out.append(UInt8(w >> 8 & 0xFF)) }
            if n > 3 { out.append(UInt8(w & 0xFF)) }
            i += 4
        }
        return out
    }

    /// A development JWT (`{"alg":"none"}` header, unsigned) with these claims, for the simulated
    /// desktop and tests. Claims must be camelCase-free only where the relay cares (it does not).
    public static func developmentJWT(claims: [String: JSONValue]) -> String {
        let header = base64URLEncode(JSONValue.object(["alg": "none", "typ": "JWT"]).serialized())
        let payload = base64URLEncode(JSONValue.object(claims).serialized())
        return header + "." + payload + ".dev"
    }
}
