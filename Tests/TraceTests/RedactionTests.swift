import Foundation
import RelayProtocol
import Testing
@testable import Trace

@Suite struct RedactionTests {
    let redactor = Redactor(policy: .hashed, key: Array(repeating: 1, count: 32))
    let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEiLCJ0YmgiOiJhYmMifQ.MEUCIQDx7c-9_sig"
    let resumeToken = "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA"

    func isPlaceholder(_ v: JSONValue?) -> Bool { v?.stringValue.map(Redactor.isPlaceholder) ?? false }

    @Test func placeholderIsKeyedHMACPrefix() throws {
        let p = redactor.placeholder(for: "secret")
        #expect(p.hasPrefix("rt:redacted:"))
        #expect(p.count == "rt:redacted:".count + 16)
        #expect(Redactor.isPlaceholder(p))
        // HMAC-SHA256(key = 32 x 0x01, "secret"), first 8 bytes; computed independently with
        // `printf secret | openssl dgst -sha256 -mac HMAC -macopt hexkey:0101...01`.
        let reference = try opensslHMAC(key: Array(repeating: 1, count: 32), message: "secret")
        #expect(reference.count == 64)
        #expect(p == "rt:redacted:" + String(reference.prefix(16)))
        // Another key (another trace) gives another placeholder.
        #expect(Redactor(policy: .hashed, key: Array(repeating: 2, count: 32)).placeholder(for: "secret") != p)
    }

    /// Remembered placeholders are the computed ones: a redactor that has seen a secret (itself or through a
    /// copy) answers what a fresh redactor with the same key computes, past the memo's capacity too, and a
    /// redactor with another key is not answered from the first one's memo.
    @Test func memoisedPlaceholdersEqualComputedOnes() {
        let key: [UInt8] = Array(repeating: 7, count: 32)
        let used = Redactor(policy: .hashed, key: key)
        let copy = used
        let secrets = (0..<1100).map { "secret-\($0)" } + [jwt, resumeToken, ""]
        let first = secrets.map { used.placeholder(for: $0) }
        for (n, secret) in secrets.enumerated() {
            let fresh = Redactor(policy: .hashed, key: key).placeholder(for: secret)
            #expect(first[n] == fresh)
            #expect(used.placeholder(for: secret) == fresh && copy.placeholder(for: secret) == fresh)
        }
        #expect(Set(first).count == secrets.count)
        #expect(Redactor(policy: .hashed, key: Array(repeating: 8, count: 32)).placeholder(for: jwt) != used.placeholder(for: jwt))
        #expect(used == Redactor(policy: .hashed, key: key) && used.hashValue == Redactor(policy: .hashed, key: key).hashValue)
        #expect(used != Redactor(policy: .raw, key: key))
    }

    /// Redacting a redacted payload gives the same bytes, for every kind the replayer compares (it matches
    /// a replayed action whose raw bytes equal the recorded, already redacted, ones without redacting it).
    @Test(arguments: [RecordKind.action, .transportOpen, .frameText, .transportClosed, .marker])
    func redactingARedactedPayloadKeepsItsBytes(kind: RecordKind) {
        let payloads = [
            #"{"type":"register","payload":{"resumeToken":"\#(resumeToken)","jwt":"\#(jwt)","n":[1,{"Authorization":"Bearer x"}]}}"#,
            #"{"url":"wss://h/ws","headers":{"Authorization":"Bearer \#(jwt)","X-Token-Binding":"tb"},"headerOrder":["Authorization"]}"#,
            #"{"note":"token was \#(jwt). Then bearer   abc123, done","token":7,"authCode":"","bearer":"Bearer "}"#,
            "not json: bearer \(jwt) and \(jwt).\(jwt)", #"{"a":"\u0062earer x","\u006Awt":"s"}"#, #"{"action":"armTimer"}"#,
        ]
        for p in payloads {
            let once = redactor.redact(payload: Array(p.utf8), kind: kind)
            #expect(redactor.redact(payload: once, kind: kind) == once, "\(p)")
        }
    }

    @Test func secretKeysAreReplacedStablyAndIdempotently() throws {
        let msg = try JSONValue(parsing: """
            {"type":"register","payload":{"deviceId":"5b0e6c8a","resumeToken":"\(resumeToken)","relaySessionId":"Qm3x8c",
             "nested":{"ResumeToken":"\(resumeToken)","appJwt":"abc","tokenBinding":{"value":"tb-1","n":3}},"accessToken":"a1","refreshToken":"r1"}}
            """)
        let r = redactor.redact(json: msg)
        let p = r["payload"]
        #expect(isPlaceholder(p?["resumeToken"]))
        // Same secret, same placeholder (case-insensitive key match too).
        #expect(p?["resumeToken"] == p?["nested"]?["ResumeToken"])
        #expect(isPlaceholder(p?["nested"]?["appJwt"]))
        #expect(isPlaceholder(p?["nested"]?["tokenBinding"]?["value"]))
        #expect(p?["nested"]?["tokenBinding"]?["n"] == 3)
        #expect(isPlaceholder(p?["accessToken"]))
        #expect(isPlaceholder(p?["refreshToken"]))
        // Not secrets: kept.
        #expect(p?["deviceId"] == "5b0e6c8a")
        #expect(p?["relaySessionId"] == "Qm3x8c")
        #expect(r["type"] == "register")
        // Idempotent.
        #expect(redactor.redact(json: r) == r)
        #expect(!r.jsonText.contains(resumeToken))
    }

    @Test func headersJWTsAndBearerAreCaught() throws {
        let open = try JSONValue(parsing: """
            {"url":"wss://relay.example/ws/device-link?token=\(jwt)","headers":{"Authorization":"Bearer \(jwt)",
             "X-Token-Binding":"binding-value","x-token-binding":"binding-value","X-Device-ID":"5b0e6c8a"}}
            """)
        let r = redactor.redact(json: open)
        let headers = r["headers"]
        let auth = try #require(headers?["Authorization"]?.stringValue)
        #expect(auth.hasPrefix("Bearer rt:redacted:"))
        #expect(Redactor.isPlaceholder(String(auth.dropFirst("Bearer ".count))))
        #expect(isPlaceholder(headers?["X-Token-Binding"]))
        #expect(headers?["X-Token-Binding"] == headers?["x-token-binding"])
        #expect(headers?["X-Device-ID"] == "5b0e6c8a")
        // A JWT inside any string (a URL here) is replaced by the same placeholder as in the header.
        let url = try #require(r["url"]?.stringValue)
        #expect(url == "wss://relay.example/ws/device-link?token=" + String(auth.dropFirst("Bearer ".count)))
        #expect(!r.jsonText.contains("eyJ"))
        #expect(redactor.redact(json: r) == r)
        // A JWT-shaped string under an ordinary key, and in free text.
        #expect(isPlaceholder(redactor.redact(json: ["note": .string(jwt)])["note"]))
        let text = redactor.redact(text: "token was \(jwt). Then bearer   abc123, done")
        #expect(!text.contains(jwt))
        #expect(text.hasSuffix("."
            + " Then bearer   \(redactor.placeholder(for: "abc123")), done"))
        #expect(redactor.redact(text: text) == text)
        // Not JWT-shaped: kept.
        #expect(redactor.redact(text: "eyJ only.one") == "eyJ only.one")
        #expect(redactor.redact(text: "a keyJunk.x.y") == "a keyJunk.x.y")
    }

    @Test func preCheckSkipsOnlyPayloadsWithoutSecrets() throws {
        // "tokens" is not a secret key: the bytes stay exactly as they were (no re-serialisation).
        let counts = Array(#"{"type":"event","payload":{"eventType":"job:tokens-updated","tokens":12}}"#.utf8)
        #expect(!Redactor.mayContainSecret(counts))
        #expect(redactor.redact(payload: counts, kind: .frameText) == counts)
        // Secret keys in any case, a key spelled with a \u escape, a bare JWT, a Bearer credential.
        for text in [#"{"Token":"s3"}"#, #"{"tok\u0065n":"s3"}"#, #"{"a":"\#(jwt)"}"#, #"{"h":"BEARER s3"}"#] {
            let bytes = Array(text.utf8)
            #expect(Redactor.mayContainSecret(bytes), "\(text)")
            let out = String(decoding: redactor.redact(payload: bytes, kind: .input), as: UTF8.self)
            #expect(!out.contains("s3") && !out.contains(jwt), "\(text) -> \(out)")
            #expect(out.contains("rt:redacted:"))
        }
    }

    @Test func preCheckFindsEveryQuotedSecretKeyAndNoNearMiss() {
        // Every secret key, whatever its first letter (the filter is derived from `secretKeys`).
        for key in Redactor.secretKeys {
            for variant in [key, key.uppercased(), key.prefix(1).uppercased() + key.dropFirst()] {
                #expect(Redactor.mayContainSecret(Array("{\"a\":1,\"\(variant)\":\"v\"}".utf8)), "\(variant)")
                #expect(Redactor.mayContainSecret(Array("\"\(variant)\"".utf8)), "\(variant) at the end")
                // One byte longer or shorter is another key; a missing closing quote is no key.
                #expect(!Redactor.mayContainSecret(Array("{\"\(variant)s\":1}".utf8)), "\(variant)s")
                #expect(!Redactor.mayContainSecret(Array("{\"\(variant.dropLast())\":1}".utf8)) || Redactor.secretKeys
                    .contains(String(variant.dropLast()).lowercased()), "\(variant.dropLast())")
                #expect(!Redactor.mayContainSecret(Array("{\"\(variant)".utf8)), "\(variant) unterminated")
            }
        }
    }

    /// The pre-check as first written, one byte at a time: the reference the word-at-a-time one must equal.
    static func referencePreCheck(_ b: [UInt8]) -> Bool {
        let keys = Redactor.secretKeys.map { Array($0.utf8) }
        let span = (keys.map(\.count).max() ?? 0) + 1  // a key and its closing quote
        let n = b.count
        var i = 0
        while i + 3 <= n {
            switch b[i] {
            case 0x65: if b[i + 1] == 0x79, b[i + 2] == 0x4A { return true }
            case 0x62, 0x42:
                if i + 7 <= n, b[i + 1] | 0x20 == 0x65, b[i + 2] | 0x20 == 0x61, b[i + 3] | 0x20 == 0x72,
                    b[i + 4] | 0x20 == 0x65, b[i + 5] | 0x20 == 0x72, b[i + 6] == 0x20 || b[i + 6] == 0x09 { return true }
            case 0x5C: if b[i + 1] == 0x75 { return true }
            case 0x22:
                let start = i + 1
                var j = start
                while j < min(n, start + span), b[j] != 0x22 { j += 1 }
                if j < min(n, start + span), keys.contains(where: { k in k.count == j - start && (0..<k.count).allSatisfy { b[start + $0] | 0x20 == k[$0] } }) {
                    return true
                }
            default: break
            }
            i += 1
        }
        return false
    }

    @Test func theWordAtATimePreCheckEqualsTheByteAtATimeOne() {
        // Every position and every length: each trigger planted at each offset of short and long texts,
        // among bytes that look like triggers (e, b, quotes, backslashes) but are not.
        let triggers = ["eyJ", "Bearer ", "bEaReR\t", "\\u", "\"jwt\"", "\"Authorization\"", "\"X-TOKEN-BINDING\"", "\"pollingid\"", "\"Proxy-Authorization\"", "\"set-cookie\""]
        let fillers: [[UInt8]] = [Array("ebBe\"a\\xeyjbeare".utf8), Array("{\"type\":\"event\",\"payload\":{}}".utf8), [0x80, 0xFF, 0x00, 0x22, 0x65]]
        var checked = 0
        for filler in fillers {
            for length in [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 40] {
                let base = (0..<length).map { filler[$0 % filler.count] }
                #expect(Redactor.mayContainSecret(base) == Self.referencePreCheck(base), "\(base)")
                for t in triggers.map({ Array($0.utf8) }) {
                    for at in 0...base.count {
                        for cut in [0, 1] {
                            var text = base
                            text.insert(contentsOf: t, at: at)
                            if cut == 1 { text.removeLast(min(text.count, 1)) }
                            #expect(Redactor.mayContainSecret(text) == Self.referencePreCheck(text), "\(String(decoding: text, as: UTF8.self))")
                            checked += 1
                        }
                    }
                }
            }
        }
        // And random bytes drawn from the trigger alphabet.
        var rng = SeededRandom(seed: 77)
        let alphabet = Array("eyJbBeareR \t\\u\"jwtokenAX-".utf8) + [0x80, 0x20]
        for _ in 0..<20_000 {
            let text = (0..<Int(rng.next(upperBound: UInt64(40)))).map { _ in alphabet[Int(rng.next(upperBound: UInt64(alphabet.count)))] }
            #expect(Redactor.mayContainSecret(text) == Self.referencePreCheck(text), "\(text)")
        }
        #expect(checked > 1000)
    }

    @Test func loginSecretsOfTheAuthFlowAreRedacted() {
        let redactor = Redactor(policy: .hashed, key: Array(repeating: 7, count: 32))
        let text = #"{"event":"startLogin","input":"auth","pkceChallenge":"c","pkceVerifier":"verifier-secret","pollingId":"polling-secret"}"#
        let out = String(decoding: redactor.redact(payload: Array(text.utf8), kind: .input), as: UTF8.self)
        #expect(!out.contains("verifier-secret") && !out.contains("polling-secret"), "\(out)")
        let code = #"{"body":{"authCode":"code-secret","body":"poll","result":"completed"},"event":"httpResponse","id":1,"input":"auth","status":200}"#
        #expect(!String(decoding: redactor.redact(payload: Array(code.utf8), kind: .input), as: UTF8.self).contains("code-secret"))
    }

    @Test func rawPolicyKeepsEverything() throws {
        let raw = Redactor(policy: .raw, key: [])
        let v: JSONValue = ["resumeToken": .string(resumeToken), "h": .string("Bearer \(jwt)")]
        #expect(raw.redact(json: v) == v)
        #expect(raw.redact(text: jwt) == jwt)
    }

    @Test func payloadsWithoutSecretsKeepTheirExactBytes() {
        let bytes = Array(#"{"type":"heartbeat",  "payload":{"activeSessionId":"s-1"}}"#.utf8)
        #expect(redactor.redact(payload: bytes, kind: .frameText) == bytes)
        // Not JSON: text rules only.
        let broken = Array("{not json Bearer xyz".utf8)
        #expect(String(decoding: redactor.redact(payload: broken, kind: .frameText), as: UTF8.self)
            == "{not json Bearer \(redactor.placeholder(for: "xyz"))")
        // Binary frames are not touched.
        let binary = Array("PTC1\u{0}\u{1}sBearer xyz".utf8)
        #expect(redactor.redact(payload: binary, kind: .frameBinary) == binary)
    }

    @Test func theWriterRedactsAndTheHeaderLetsAReplayRedactTheSameWay() throws {
        let sink = MemorySink()
        var o = testOptions(raw: false)
        o.redactionKey = nil  // a fresh random key, as in production
        var h = testHeader()
        h.client = ["url": "wss://relay.example/ws", "jwt": .string(jwt)]
        let w = try TraceWriter(sink: sink, header: h, options: o)
        let register = #"{"type":"register","payload":{"deviceId":"d","resumeToken":"\#(resumeToken)"}}"#
        w.append(.frame(.text(register), time: .seconds(1), generation: 1, direction: .outbound))
        w.append(TraceRecord(kind: .transportOpen, time: .seconds(0.5), generation: 1,
                             payload: Array(#"{"url":"wss://r","headers":{"Authorization":"Bearer \#(jwt)"}}"#.utf8)))
        w.append(.frame(.text(#"{"type":"registered","sessionId":"s","resumeToken":"\#(resumeToken)","expiresAt":"x"}"#),
                        time: .seconds(2), generation: 1, direction: .inbound))
        w.append(TraceRecord(kind: .marker, time: .seconds(3), payload: Array("user pasted \(jwt)".utf8)))
        try w.close()
        let bytes = sink.bytes
        let r = try TraceReader(bytes: bytes)
        #expect(r.header.redaction.policy == .hashed)
        #expect(r.header.redaction.key.count == 32)
        #expect(r.header.redaction.keyID == r.header.redaction.redactor.keyID)
        #expect(isPlaceholder(r.header.client["jwt"]))
        let records = r.readAll().entries.map(\.record)
        // No secret reaches the records (decompressed) nor the file.
        for rec in records {
            #expect(!rec.payloadText.contains(resumeToken))
            #expect(!rec.payloadText.contains(jwt))
        }
        #expect(!bytes.containsSubsequence(Array(resumeToken.utf8)))
        // The same secret in two frames maps to one placeholder, and a replayer holding the header's key
        // produces it from the live value.
        let out = try JSONValue(parsing: records[0].payload)["payload"]?["resumeToken"]
        let inb = try JSONValue(parsing: records[2].payload)["resumeToken"]
        #expect(out == inb)
        #expect(out?.stringValue == r.header.redaction.redactor.placeholder(for: resumeToken))
        #expect(try JSONValue(parsing: records[1].payload)["headers"]?["Authorization"]?.stringValue
            == "Bearer " + r.header.redaction.redactor.placeholder(for: jwt))
        #expect(records[3].payloadText == "user pasted " + r.header.redaction.redactor.placeholder(for: jwt))
    }

    @Test func redactionIsTheDefaultAndRawMustBeAskedFor() throws {
        #expect(TraceWriterOptions().redaction == .hashed)
        let sink = MemorySink()
        let w = try TraceWriter(sink: sink, header: testHeader())  // default options
        w.append(.frame(.text(#"{"type":"resumed","resumeToken":"\#(resumeToken)"}"#), time: .zero, generation: 1, direction: .inbound))
        try w.close()
        let r = try TraceReader(bytes: sink.bytes)
        #expect(r.header.redaction.policy == .hashed)
        #expect(r.header.redaction.key.count == 32)
        #expect(r.readAll().entries.first?.record.payloadText.contains(resumeToken) == false)
    }

    @Test func rawCaptureKeepsSecretsAndSaysSo() throws {
        let register = #"{"type":"register","payload":{"resumeToken":"\#(resumeToken)"}}"#
        let bytes = try writeTrace([.frame(.text(register), time: .zero, generation: 1, direction: .outbound)],
                                   options: testOptions(raw: true))
        let r = try TraceReader(bytes: bytes)
        #expect(r.header.redaction.policy == .raw)
        #expect(r.readAll().entries.first?.record.payloadText == register)
    }
}

extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for i in 0...(count - needle.count) where self[i] == needle[0] && Array(self[i..<(i + needle.count)]) == needle {
            return true
        }
        return false
    }
}

/// HMAC-SHA256 hex computed by the `openssl` command (an independent implementation).
func opensslHMAC(key: [UInt8], message: String) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    p.arguments = ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:" + hexString(key)]
    let input = Pipe()
    let output = Pipe()
    p.standardInput = input
    p.standardOutput = output
    try p.run()
    input.fileHandleForWriting.write(Data(message.utf8))
    try input.fileHandleForWriting.close()
    let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    // "HMAC-SHA2-256(stdin)= <hex>"
    return String(out.split(separator: " ").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
}
