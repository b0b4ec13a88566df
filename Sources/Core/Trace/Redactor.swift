import COpenSSL
public import RelayProtocol
import Synchronization
import Sync

/// What the writer does with secrets.
public enum RedactionPolicy: String, Sendable, Hashable {
    /// Secrets are replaced by keyed hashes (`rt:redacted:<16 hex>`): the default.
    case hashed = "hmac-sha256"
    /// Everything is recorded as is. Only with an explicit option: the trace then holds live credentials.
    case raw = "raw"
}

/// Replaces secrets in JSON and text with stable keyed placeholders.
///
/// A secret is: the string value (or every string inside the value) of a member whose key is one of
/// `secretKeys` (case-insensitive), any string or substring shaped like a JWT (dot-separated base64url
/// segments, the first starting `eyJ`), and the credential after `Bearer `. Each becomes
/// `rt:redacted:` + the first 8 bytes (16 lower-case hex digits) of HMAC-SHA256(key, secret): the same
/// secret gives the same placeholder under one key (one trace), placeholders are left alone (redaction is
/// idempotent), and `Bearer X` keeps its `Bearer ` prefix. See docs/TRACE_FORMAT.md, "Redaction".
public struct Redactor: Sendable, Hashable {
    /// The policy; `.raw` makes every method return its input.
    public let policy: RedactionPolicy
    /// The HMAC key (32 random bytes per trace; stored in the trace header).
    public let key: [UInt8]

    /// The member names whose values are secrets, lower-cased (matching ignores case).
    public static let secretKeys: Set<String> = [
        "authorization", "resumetoken", "jwt", "token", "accesstoken", "refreshtoken", "appjwt",
        "x-token-binding", "tokenbinding", "bearer", "pkceverifier", "authcode", "pollingid",
        "password", "passwd", "passphrase", "secret", "clientsecret", "apikey", "privatekey",
        "cookie", "set-cookie", "proxy-authorization",
    ]
    /// The prefix of every placeholder.
    public static let placeholderPrefix = "rt:redacted:"

    /// Placeholders already computed by this redactor (and its copies): the same secrets (the JWT, the
    /// resume token) come back in many records of one trace, and each HMAC costs more than the rest of their
    /// redaction. Not part of the value: equality and hashing are by `policy` and `key`.
    private let memo = PlaceholderMemo()

    /// A redactor with `policy` and `key`.
    public init(policy: RedactionPolicy, key: [UInt8]) {
        self.policy = policy
        self.key = key
    }

    /// Equal when the policies and keys are.
    public static func == (a: Redactor, b: Redactor) -> Bool { a.policy == b.policy && a.key == b.key }

    /// Hashes the policy and the key.
    public func hash(into h: inout Hasher) {
        h.combine(policy)
        h.combine(key)
    }

    /// 32 bytes from OpenSSL's CSPRNG (`RAND_bytes`), falling back to `/dev/urandom`.
    public static func randomKey() -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 32)
        let ok = key.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, 32) }
        if ok == 1 { return key }
        var g = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &g) }
    }

    /// A short public name of the key: the first 4 bytes of SHA-256(key), hex.
    public var keyID: String { sha256Hex(key, bytes: 4) }

    /// The placeholder for `secret`: `rt:redacted:<16 hex of HMAC-SHA256(key, secret)>`.
    public func placeholder(for secret: String) -> String {
        if let known = memo.lookup(secret) { return known }
        let computed = computePlaceholder(for: secret)
        memo.store(secret, computed)
        return computed
    }

    private func computePlaceholder(for secret: String) -> String {
        var mac = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 32
        var s = secret
        s.withUTF8 { msg in
            key.withUnsafeBufferPointer { k in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), msg.baseAddress, msg.count, &mac, &len)
            }
        }
        return Self.placeholderPrefix + hexString(mac.prefix(8))
    }

    /// Whether `s` is exactly a placeholder.
    public static func isPlaceholder(_ s: String) -> Bool {
        let u = Array(s.utf8)
        return isPlaceholder(u[...])
    }

    static func isPlaceholder(_ u: ArraySlice<UInt8>) -> Bool {
        let prefix = Array(placeholderPrefix.utf8)
        guard u.count == prefix.count + 16, u.starts(with: prefix) else { return false }
        return u.dropFirst(prefix.count).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// `value` with every secret replaced (see the type's documentation).
    public func redact(json value: JSONValue) -> JSONValue {
        guard policy == .hashed else { return value }
        return redact(value, secret: false)
    }

    private func redact(_ value: JSONValue, secret: Bool) -> JSONValue {
        switch value {
        case .string(let s):
            return .string(secret ? redactSecret(s) : redact(text: s))
        case .array(let a):
            return .array(a.map { redact($0, secret: secret) })
        case .object(let o):
            var out = [String: JSONValue](minimumCapacity: o.count)
            for (k, v) in o {
                out[k] = redact(v, secret: secret || Self.secretKeys.contains(k.lowercased()))
            }
            return .object(out)
        case .null, .bool, .int, .double:
            return value
        }
    }

    /// A whole secret value: `Bearer X` keeps its prefix, placeholders stay.
    private func redactSecret(_ s: String) -> String {
        let u = Array(s.utf8)
        if Self.isPlaceholder(u[...]) || u.isEmpty { return s }
        if let cred = Self.bearerCredentialStart(u, at: 0), cred < u.count {
            let rest = u[cred...]
            if Self.isPlaceholder(rest) { return s }
            return String(decoding: u[..<cred], as: UTF8.self) + placeholder(for: String(decoding: rest, as: UTF8.self))
        }
        return placeholder(for: s)
    }

    /// `text` with JWT-shaped substrings and `Bearer` credentials replaced.
    public func redact(text: String) -> String {
        guard policy == .hashed else { return text }
        let u = Array(text.utf8)
        guard Self.mayContainSecret(u) else { return text }
        var out = [UInt8]()
        out.reserveCapacity(u.count)
        var i = 0
        var changed = false
        while i < u.count {
            let c = u[i]
            let boundary = i == 0 || !Self.isTokenChar(u[i - 1])
            if boundary, c | 0x20 == 0x62, let cred = Self.bearerCredentialStart(u, at: i) {
                var end = cred
                while end < u.count, !Self.endsCredential(u[end]) { end += 1 }
                if end > cred {
                    out.append(contentsOf: u[i..<cred])
                    let x = u[cred..<end]
                    if Self.isPlaceholder(x) { out.append(contentsOf: x) } else {
                        out.append(contentsOf: placeholder(for: String(decoding: x, as: UTF8.self)).utf8)
                        changed = true
                    }
                    i = end
                    continue
                }
            }
            if boundary, c == 0x65, let end = Self.jwtEnd(u, at: i) {
                out.append(contentsOf: placeholder(for: String(decoding: u[i..<end], as: UTF8.self)).utf8)
                changed = true
                i = end
                continue
            }
            out.append(c)
            i += 1
        }
        return changed ? String(decoding: out, as: UTF8.self) : text
    }

    /// The redacted payload of a record of `kind`: JSON kinds are parsed and re-serialised only when a
    /// secret was replaced (otherwise the bytes are kept as they are); JSON kinds whose payload is not
    /// JSON, and markers, get `redact(text:)`; binary frames and unknown kinds are kept as they are.
    public func redact(payload: [UInt8], kind: RecordKind) -> [UInt8] {
        guard policy == .hashed, kind.hasJSONPayload || kind == .marker, Self.mayContainSecret(payload) else { return payload }
        if kind.hasJSONPayload, let value = try? JSONValue(parsing: payload) {
            let redacted = redact(json: value)
            return redacted == value ? payload : redacted.serialized()
        }
        let text = String(decoding: payload, as: UTF8.self)
        let r = redact(text: text)
        return r == text ? payload : Array(r.utf8)
    }

    // MARK: scanning helpers

    /// A fast pre-check: false when `u` cannot hold a secret. True when it contains `eyJ` (a JWT),
    /// `bearer` followed by a space or tab (any case), a `\u` escape (which could spell a key), or a
    /// quote followed by a secret key name (any case) and a closing quote.
    static func mayContainSecret(_ u: [UInt8]) -> Bool {
        let firstBytes = secretKeyFirstBytes
        let byLength = secretKeysByLength
        return u.withUnsafeBufferPointer { b in
            firstBytes.withUnsafeBufferPointer { first in
                let n = b.count
                guard n >= 3, let base = b.baseAddress else { return false }
                let last = n - 3  // the positions checked: 0...last
                // The test at one position.
                func check(_ i: Int) -> Bool {
                    switch b[i] {
                    case 0x65:  // e
                        return b[i + 1] == 0x79 && b[i + 2] == 0x4A
                    case 0x62, 0x42:  // b B
                        return i + 7 <= n && b[i + 1] | 0x20 == 0x65 && b[i + 2] | 0x20 == 0x61 && b[i + 3] | 0x20 == 0x72
                            && b[i + 4] | 0x20 == 0x65 && b[i + 5] | 0x20 == 0x72 && (b[i + 6] == 0x20 || b[i + 6] == 0x09)
                    case 0x5C:  // backslash
                        return b[i + 1] == 0x75
                    case 0x22:  // quote: a secret key name?
                        return first[Int(b[i + 1] | 0x20)] && quotedSecretKey(b, at: i + 1, byLength)
                    default:
                        return false
                    }
                }
                // Eight positions at a time, testing only those where one can start: a quote, a
                // backslash, `e` before `y`, `b`/`B` before `e`/`E` (the word masks may also mark a few
                // other positions; the test decides each).
                let ones: UInt64 = 0x0101_0101_0101_0101
                let highs: UInt64 = 0x8080_8080_8080_8080
                let lower: UInt64 = 0x2020_2020_2020_2020
                @inline(__always) func zeros(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
                let raw = UnsafeRawPointer(base)
                var i = 0
                while i + 9 <= n {
                    let w = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                    let w1 = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i + 1, as: UInt64.self))
                    var m = zeros(w ^ (0x22 &* ones)) | zeros(w ^ (0x5C &* ones))
                        | (zeros(w ^ (0x65 &* ones)) & zeros(w1 ^ (0x79 &* ones)))
                        | (zeros((w | lower) ^ (0x62 &* ones)) & zeros((w1 | lower) ^ (0x65 &* ones)))
                    while m != 0 {
                        let p = i + m.trailingZeroBitCount / 8
                        if p <= last, check(p) { return true }
                        m &= m &- 1
                    }
                    i += 8
                }
                while i <= last {
                    if check(i) { return true }
                    i += 1
                }
                return false
            }
        }
    }

    private static let secretKeyBytes: [[UInt8]] = secretKeys.map { Array($0.utf8) }

    /// Whether a (lower-cased) byte starts some secret key name: derived from `secretKeys`, so a key added
    /// there is always caught by the pre-check.
    private static let secretKeyFirstBytes: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for key in secretKeyBytes { if let f = key.first { table[Int(f)] = true } }
        return table
    }()

    /// The longest secret key name, in UTF-8 bytes (`proxy-authorization`, 19).
    private static let longestSecretKey = secretKeyBytes.map(\.count).max() ?? 0

    /// The secret key names by their UTF-8 length.
    private static let secretKeysByLength: [[[UInt8]]] = {
        var table = [[[UInt8]]](repeating: [], count: longestSecretKey + 1)
        for key in secretKeyBytes { table[key.count].append(key) }
        return table
    }()

    /// Whether the bytes from `start` up to the next `"` spell a secret key name (ASCII case-insensitive).
    /// No key byte can match a `"` (`"` | 0x20 is still `"`), so only the keys as long as the distance to
    /// the first quote can match: that quote is found first, then only those keys are compared.
    private static func quotedSecretKey(_ b: UnsafeBufferPointer<UInt8>, at start: Int, _ byLength: [[[UInt8]]]) -> Bool {
        let limit = min(b.count, start + byLength.count)
        var j = start
        while j < limit, b[j] != 0x22 { j += 1 }
        guard j < limit else { return false }
        for key in byLength[j - start] {
            var match = true
            for k in 0..<key.count where b[start + k] | 0x20 != key[k] {
                match = false
                break
            }
            if match { return true }
        }
        return false
    }

    static func isBase64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
    }

    static func isTokenChar(_ c: UInt8) -> Bool { isBase64URL(c) || c == 0x2E }

    /// Whether `c` ends a `Bearer` credential: white space, a quote (either), a comma or a semicolon.
    public static func endsCredential(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == 0x22 || c == 0x27 || c == 0x2C || c == 0x3B
    }

    /// Whether a secret member's whole value is already redacted: a placeholder, or `Bearer` and
    /// white space before one (what `redact(json:)` makes of a secret).
    public static func isRedactedSecret(_ s: String) -> Bool {
        let u = Array(s.utf8)
        if isPlaceholder(u[...]) { return true }
        guard let cred = bearerCredentialStart(u, at: 0) else { return false }
        return isPlaceholder(u[cred...])
    }

    /// If `u[i...]` starts with `bearer` (any case) and one or more spaces or tabs, the index of the
    /// credential after them.
    public static func bearerCredentialStart(_ u: [UInt8], at i: Int) -> Int? {
        let word: [UInt8] = Array("bearer".utf8)
        guard i + word.count < u.count else { return nil }
        for k in 0..<word.count where u[i + k] | 0x20 != word[k] { return nil }
        var j = i + word.count
        guard u[j] == 0x20 || u[j] == 0x09 else { return nil }
        while j < u.count, u[j] == 0x20 || u[j] == 0x09 { j += 1 }
        return j
    }

    /// If a JWT-shaped token starts at `i` (`eyJ`, then base64url segments joined by dots, at least
    /// three, the first two non-empty), the index just past it. An unsigned JWT (RFC 7519 §6: header
    /// `eyJ...`, payload `eyJ...`, an empty signature) ends with its dot, which belongs to it; otherwise a
    /// dot at the end is a sentence's, not the token's. Both `redact` and `relaytrace lint` use this.
    public static func jwtEnd(_ u: [UInt8], at i: Int) -> Int? {
        guard i + 3 <= u.count, u[i] == 0x65, u[i + 1] == 0x79, u[i + 2] == 0x4A else { return nil }
        var j = i
        var dots = 0
        var segmentLengths = [0]
        while j < u.count, isTokenChar(u[j]) {
            if u[j] == 0x2E {
                dots += 1
                segmentLengths.append(0)
            } else {
                segmentLengths[segmentLengths.count - 1] += 1
            }
            j += 1
        }
        // header.payload. with both parts JSON (`eyJ`): an unsigned JWT, final dot included.
        if dots == 2, segmentLengths[0] >= 4, segmentLengths[1] >= 4, segmentLengths[2] == 0 {
            let payload = i + segmentLengths[0] + 1
            if u[payload] == 0x65, u[payload + 1] == 0x79, u[payload + 2] == 0x4A { return j }
        }
        // A sentence-ending dot is not part of the token.
        while j > i, u[j - 1] == 0x2E {
            j -= 1
            dots -= 1
            segmentLengths.removeLast()
        }
        guard dots >= 2, segmentLengths[0] >= 4, segmentLengths[1] >= 1 else { return nil }
        return j
    }
}

/// A bounded secret -> placeholder table shared by a redactor's copies (one key, so one mapping).
private final class PlaceholderMemo: Sendable {
    /// At most this many secrets are remembered (bounded memory on any input); later ones are computed.
    static let capacity = 1024
    private let table = Locked<[String: String]>([:])

    func lookup(_ secret: String) -> String? {
        table.withLock { $0[secret] }
    }

    func store(_ secret: String, _ placeholder: String) {
        table.withLock { t in
            if t.count < Self.capacity { t[secret] = placeholder }
        }
    }
}
