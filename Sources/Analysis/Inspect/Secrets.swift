public import RelayProtocol
public import Trace

/// A secret `relaytrace lint` found.
public struct SecretFinding: Sendable, Hashable, CustomStringConvertible {
    /// Which rule: `jwt`, `bearer`, `secretKey` (a member redaction should have covered), `longToken`.
    public var rule: String
    /// The record number (nil for the header).
    public var record: UInt64?
    /// The record's time.
    public var time: Moment
    /// The record kind.
    public var kind: String
    /// Where in the payload: a JSON path (`$.payload.resumeToken`) or `text[offset]`.
    public var location: String
    /// A masked excerpt: the first 6 characters and the length.
    public var excerpt: String

    /// `record 12 (frameText, 1.250s) $.payload.jwt: jwt eyJhbG... (120 chars)`.
    public var description: String {
        "\(record.map { "record \($0)" } ?? "header") (\(kind), \(time)) \(location): \(rule) \(excerpt)"
    }
}

/// Scans payloads for secrets that escaped redaction: JWT-shaped strings, bearer credentials, values of
/// secret-named members (the redactor's list) that are not placeholders, and long random tokens
/// (at least `minTokenLength` characters of `[A-Za-z0-9_-]` mixing upper case, lower case and digits).
/// Placeholders (`rt:redacted:...`) never count.
public struct SecretScanner: Sendable {
    /// Shortest run that counts as a random token (relay session ids are 32 characters and are not
    /// credentials; resume tokens are 48).
    public var minTokenLength = 40

    /// A scanner with the default thresholds.
    public init() {}

    /// The findings in one record.
    public func scan(_ rec: InspectedRecord) -> [SecretFinding] {
        var out: [SecretFinding] = []
        let r = rec.record
        func add(_ rule: String, _ location: String, _ secret: Substring) {
            let head = secret.prefix(6)
            out.append(SecretFinding(rule: rule, record: rec.number, time: r.time, kind: r.kind.name, location: location,
                                     excerpt: "\(head)... (\(secret.count) chars)"))
        }
        if let json = rec.json {
            walk(json, "$", nil) { rule, path, s in add(rule, path, s) }
        } else {
            let text: String
            switch r.kind {
            case .frameBinary: text = rec.terminal.map { String(decoding: $0.data, as: UTF8.self) } ?? ""
            default: text = r.payloadText
            }
            scanText(text) { rule, offset, s in add(rule, "text[\(offset)]", s) }
        }
        return out
    }

    /// The findings in a JSON value (e.g. the header's `client`), reported with `record: nil`.
    public func scan(json: JSONValue, kind: String) -> [SecretFinding] {
        var out: [SecretFinding] = []
        walk(json, "$", nil) { rule, path, s in
            out.append(SecretFinding(rule: rule, record: nil, time: .zero, kind: kind, location: path, excerpt: "\(s.prefix(6))... (\(s.count) chars)"))
        }
        return out
    }

    private func walk(_ j: JSONValue, _ path: String, _ key: String?, _ report: (String, String, Substring) -> Void) {
        switch j {
        case .object(let o):
            for (k, v) in o.sorted(by: { $0.key < $1.key }) { walk(v, path + "." + k, k, report) }
        case .array(let a):
            for (i, v) in a.enumerated() { walk(v, "\(path)[\(i)]", key, report) }
        case .string(let s):
            if let key, Redactor.secretKeys.contains(key.lowercased()), !s.isEmpty, !Redactor.isRedactedSecret(s) {
                report("secretKey", path, Substring(s))
                return
            }
            scanText(s) { rule, _, found in report(rule, path, found) }
        default: break
        }
    }

    /// Calls `report(rule, utf8Offset, secret)` for every secret in `text`.
    public func scanText(_ text: String, _ report: (String, Int, Substring) -> Void) {
        let u = Array(text.utf8)
        var i = 0
        func tokenChar(_ c: UInt8) -> Bool {
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
        func sub(_ a: Int, _ b: Int) -> Substring { Substring(String(decoding: u[a..<b], as: UTF8.self)) }
        while i < u.count {
            // Skip placeholders whole.
            if u[i] == UInt8(ascii: "r"), i + 28 <= u.count, Redactor.isPlaceholder(String(decoding: u[i..<(i + 28)], as: UTF8.self)) {
                i += 28
                continue
            }
            // Bearer credentials, delimited as the redactor delimits them (a quote of either kind ends one).
            if u[i] | 0x20 == 0x62, i == 0 || !tokenChar(u[i - 1]), let start = Redactor.bearerCredentialStart(u, at: i) {
                var j = start
                while j < u.count, !Redactor.endsCredential(u[j]) { j += 1 }
                let cred = sub(start, j)
                if cred.count >= 8, !Redactor.isPlaceholder(String(cred)) {
                    report("bearer", i, cred)
                    i = j
                    continue
                }
            }
            guard tokenChar(u[i]) || u[i] == 0x2E, i == 0 || !tokenChar(u[i - 1]) else {
                i += 1
                continue
            }
            // A JWT, recognised exactly as the redactor recognises one (signed or unsigned).
            if let end = Redactor.jwtEnd(u, at: i) {
                report("jwt", i, sub(i, end))
                i = end
                continue
            }
            // A run of token characters and dots.
            var j = i
            while j < u.count, tokenChar(u[j]) || u[j] == 0x2E { j += 1 }
            let run = u[i..<j]
            let segments = run.split(separator: 0x2E, omittingEmptySubsequences: false)
            var at = i
            for seg in segments {
                if seg.count >= minTokenLength, seg.contains(where: { $0 >= 0x41 && $0 <= 0x5A }),
                    seg.contains(where: { $0 >= 0x61 && $0 <= 0x7A }), seg.contains(where: { $0 >= 0x30 && $0 <= 0x39 }) {
                    report("longToken", at, sub(at, at + seg.count))
                }
                at += seg.count + 1
            }
            i = j
        }
    }
}

/// Rewrites payloads for `relaytrace redact`: every placeholder `p` becomes `new.placeholder(for: p)`
/// (so equal secrets stay equal under the new key and the old key no longer confirms guesses), and the
/// string values of members named in `extraKeys` (any case) become placeholders too. The writer then
/// applies its own standard redaction with the new key.
public struct Rekeyer: Sendable {
    /// The new redactor.
    public let redactor: Redactor
    /// Extra member names to redact (lower-cased).
    public let extraKeys: Set<String>
    /// Whether to re-key existing placeholders.
    public let rekey: Bool

    /// A rewriter.
    public init(redactor: Redactor, extraKeys: Set<String>, rekey: Bool = true) {
        self.redactor = redactor
        self.extraKeys = Set(extraKeys.map { $0.lowercased() })
        self.rekey = rekey
    }

    /// The rewritten payload (the same bytes when nothing changed).
    public func rewrite(payload: [UInt8], kind: RecordKind) -> [UInt8] {
        if kind.hasJSONPayload, let j = try? JSONValue(parsing: payload) {
            let n = rewrite(json: j, key: nil)
            return n == j ? payload : n.serialized()
        }
        if kind == .marker {
            let t = String(decoding: payload, as: UTF8.self)
            let n = rewrite(text: t)
            return n == t ? payload : Array(n.utf8)
        }
        return payload
    }

    /// `j` rewritten.
    public func rewrite(json j: JSONValue, key: String?) -> JSONValue {
        switch j {
        case .object(let o):
            var n: [String: JSONValue] = [:]
            for (k, v) in o { n[k] = rewrite(json: v, key: k) }
            return .object(n)
        case .array(let a): return .array(a.map { rewrite(json: $0, key: key) })
        case .string(let s):
            if let key, extraKeys.contains(key.lowercased()), !s.isEmpty, !s.contains(Redactor.placeholderPrefix) {
                return .string(redactor.placeholder(for: s))
            }
            return .string(rewrite(text: s))
        default: return j
        }
    }

    /// `text` with every placeholder re-keyed.
    public func rewrite(text: String) -> String {
        guard rekey, text.contains(Redactor.placeholderPrefix) else { return text }
        var out = ""
        var rest = Substring(text)
        while let r = rest.range(of: Redactor.placeholderPrefix) {
            out += rest[..<r.lowerBound]
            let end = rest.index(r.lowerBound, offsetBy: 28, limitedBy: rest.endIndex) ?? rest.endIndex
            let candidate = String(rest[r.lowerBound..<end])
            if Redactor.isPlaceholder(candidate) {
                out += redactor.placeholder(for: candidate)
                rest = rest[end...]
            } else {
                out += Redactor.placeholderPrefix
                rest = rest[r.upperBound...]
            }
        }
        return out + rest
    }
}
