import Inspect
import RelayProtocol
import Testing
import Trace

func rec(_ n: UInt64, _ t: Double, _ text: String, gen: UInt64 = 1, dir: FrameDirection = .outbound) -> InspectedRecord {
    InspectedRecord(number: n, record: .frame(.text(text), time: .seconds(t), generation: gen, direction: dir))
}

@Suite struct FilterTests {
    @Test(arguments: [("90", 90.0), ("1.5", 1.5), ("1m30s", 90.0), ("1h", 3600.0), ("250ms", 0.25), ("2m0.5s", 120.5), ("1h1m1s", 3661.0)])
    func times(text: String, seconds: Double) throws {
        #expect(try FrameFilter.time(text, option: "--since") == .seconds(seconds))
    }

    @Test(arguments: ["", "1x", "m", "1m30", "-5", "abc", "1.2.3s"])
    func badTimes(text: String) {
        #expect(throws: FilterError.self) { try FrameFilter.time(text, option: "--since") }
    }

    @Test func combinedCriteria() throws {
        var f = FrameFilter()
        f.generations = try FrameFilter.generations("1,3")
        f.types = ["rpc.request"]
        f.since = .seconds(1)
        #expect(f.matches(rec(0, 2, #"{"type":"rpc.request","payload":{"id":"a","method":"m"}}"#)))
        #expect(!f.matches(rec(0, 0.5, #"{"type":"rpc.request","payload":{"id":"a","method":"m"}}"#)))
        #expect(!f.matches(rec(0, 2, #"{"type":"rpc.request","payload":{"id":"a","method":"m"}}"#, gen: 2)))
        #expect(!f.matches(rec(0, 2, #"{"type":"heartbeat","payload":{}}"#)))
        #expect(throws: FilterError.self) { try FrameFilter.generations("x") }
    }
}

@Suite struct CorrelationAndStatsTests {
    @Test func streamingResponsesKeepTheRequestOpenUntilFinal() {
        var c = RpcCorrelator()
        var req = rec(0, 1, #"{"type":"rpc.request","payload":{"id":"A","method":"job.get"}}"#)
        c.correlate(&req)
        var part = rec(1, 1.5, #"{"type":"rpc.response","payload":{"id":"A","result":{},"isFinal":false}}"#, dir: .inbound)
        c.correlate(&part)
        #expect(part.method == "job.get" && part.latency == .milliseconds(500))
        var fin = rec(2, 2, #"{"type":"rpc.response","payload":{"id":"A","result":{}}}"#, dir: .inbound)
        c.correlate(&fin)
        #expect(fin.latency == .seconds(1))
        #expect(c.openRequests == 0)
        var stray = rec(3, 3, #"{"type":"rpc.response","payload":{"id":"A","result":{}}}"#, dir: .inbound)
        c.correlate(&stray)
        #expect(stray.latency == nil && stray.method == nil)
    }

    @Test func capacityForgetsTheOldest() {
        var c = RpcCorrelator(capacity: 2)
        for (i, id) in ["a", "b", "c"].enumerated() {
            var r = rec(UInt64(i), Double(i), #"{"type":"rpc.request","payload":{"id":"\#(id)","method":"m"}}"#)
            c.correlate(&r)
        }
        #expect(c.pending.map(\.id) == ["b", "c"])
    }

    @Test func quantilesAreNearestRank() {
        var l = LatencySummary()
        l.latencies = (1...100).map { Int64($0) }
        #expect(l.quantile(0.5) == 50 && l.quantile(0.9) == 90 && l.quantile(0.99) == 99 && l.quantile(1) == 100)
        #expect(LatencySummary().quantile(0.5) == nil)
    }
}

@Suite struct FormatHelperTests {
    @Test func rfc3339RoundTrip() {
        #expect(unixNanoseconds(rfc3339: "1970-01-01T00:00:00Z") == 0)
        #expect(unixNanoseconds(rfc3339: "2026-01-15T10:00:00Z") == 1_768_471_200_000_000_000)
        #expect(unixNanoseconds(rfc3339: "2026-01-15T12:00:00.5+02:00") == 1_768_471_200_500_000_000)
        #expect(unixNanoseconds(rfc3339: "2026-13-15T10:00:00Z") == nil)
        #expect(unixNanoseconds(rfc3339: "yesterday") == nil)
        #expect(rfc3339(unixNanoseconds: 1_768_471_200_010_000_000) == "2026-01-15T10:00:00.010Z")
        #expect(rfc3339(unixNanoseconds: 951_782_400_000_000_000) == "2000-02-29T00:00:00.000Z")
    }

    @Test func base64MatchesRFC4648Vectors() {
        for (i, o) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")] {
            #expect(base64(Array(i.utf8)) == o)
        }
    }

    @Test func websocketFrameLengths() {
        #expect(PcapngExporter.websocketFrame(opcode: 1, payload: Array("hi".utf8)) == [0x81, 2, 0x68, 0x69])
        let mid = PcapngExporter.websocketFrame(opcode: 2, payload: [UInt8](repeating: 0, count: 300))
        #expect(Array(mid.prefix(4)) == [0x82, 126, 1, 44] && mid.count == 304)
        let big = PcapngExporter.websocketFrame(opcode: 1, payload: [UInt8](repeating: 0, count: 70_000))
        #expect(Array(big.prefix(10)) == [0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70])
    }
}

@Suite struct SecretsTests {
    @Test func scannerRules() {
        let s = SecretScanner()
        var found: [String] = []
        s.scanText("a eyJhbGciOi.eyJzdWIi.c2ln b") { rule, at, _ in found.append("\(rule)@\(at)") }
        s.scanText("Authorization: Bearer abcdefgh12345") { rule, at, _ in found.append("\(rule)@\(at)") }
        s.scanText("Bearer rt:redacted:0123456789abcdef") { rule, _, _ in found.append(rule) }
        s.scanText("tok h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA end") { rule, at, _ in found.append("\(rule)@\(at)") }
        s.scanText("Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D 4bf92f3577b34da6a3ce929d0e0e47364bf92f3577b34da6") { rule, _, _ in found.append(rule) }
        #expect(found == ["jwt@2", "bearer@15", "longToken@4"])
    }

    static func findings(_ text: String) -> [String] {
        var found: [String] = []
        SecretScanner().scanText(text) { rule, at, s in found.append("\(rule)@\(at):\(s)") }
        return found
    }

    /// What `redact` leaves is never a finding of `lint`, whatever follows a placeholder.
    @Test(arguments: ["Authorization: 'Bearer abcdefgh12345'", "h = \"Bearer abcdefgh12345\";", "Bearer abcdefgh12345, next",
                      "x Bearer\tabcdefgh12345;y", "('Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl')"])
    func redactedTextHasNoFindings(text: String) {
        let redactor = Redactor(policy: .hashed, key: [UInt8](repeating: 3, count: 32))
        #expect(!Self.findings(text).isEmpty, "the raw text has a secret: \(text)")
        let redacted = redactor.redact(text: text)
        #expect(redacted.contains(Redactor.placeholderPrefix))
        #expect(Self.findings(redacted) == [], "\(redacted)")
    }

    @Test func aPlaceholderFollowedByAQuoteIsNotASecret() {
        #expect(Self.findings("Authorization: 'Bearer rt:redacted:0123456789abcdef'") == [])
        #expect(Self.findings("['Bearer rt:redacted:0123456789abcdef', 'Bearer rt:redacted:fedcba9876543210']") == [])
        let s = SecretScanner()
        #expect(s.scan(json: ["authorization": "Bearer rt:redacted:0123456789abcdef"], kind: "header").isEmpty)
        #expect(s.scan(json: ["authorization": "Bearer  rt:redacted:0123456789abcdef"], kind: "header").isEmpty)
        // Not a placeholder, only placeholder-shaped: still a secret.
        #expect(s.scan(json: ["authorization": "Bearer rt:redacted:0123456789abcdeX"], kind: "header").map(\.rule) == ["secretKey"])
    }

    /// An unsigned JWT (RFC 7519 §6: `alg` none, empty signature) is a JWT to both lint and redact, its
    /// final dot included; a signed JWT at the end of a sentence keeps the sentence's dot out.
    @Test func unsignedJWTsAreRecognisedByLintAndRedact() {
        let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjMiLCJkZXZpY2VfaWQiOiJkIn0."
        #expect(Self.findings("token \(unsigned) next") == ["jwt@6:\(unsigned)"])
        #expect(Self.findings("\"\(unsigned)\"") == ["jwt@1:\(unsigned)"])
        let redactor = Redactor(policy: .hashed, key: [UInt8](repeating: 3, count: 32))
        #expect(redactor.redact(text: "token \(unsigned) next") == "token \(redactor.placeholder(for: unsigned)) next")
        #expect(redactor.redact(json: ["x": .string(unsigned)]) == ["x": .string(redactor.placeholder(for: unsigned))])
        let signed = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
        #expect(Self.findings("it was \(signed).") == ["jwt@7:\(signed)"])
        #expect(redactor.redact(text: "it was \(signed).") == "it was \(redactor.placeholder(for: signed)).")
        // Two segments only, or a second segment that is not JSON, is not a JWT.
        #expect(Self.findings("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0") == [])
        #expect(redactor.redact(text: "see eyJhbGciOiJub25lIn0.c3ViamVjdA. ok") == "see eyJhbGciOiJub25lIn0.c3ViamVjdA. ok")
    }

    @Test(arguments: ["password", "Password", "passwd", "passphrase", "clientSecret", "apiKey"])
    func aShortPasswordIsASecret(key: String) {
        let value: JSONValue = [key: "pw1"]
        #expect(SecretScanner().scan(json: ["login": value], kind: "header").map { "\($0.rule) \($0.location)" } == ["secretKey $.login.\(key)"])
        let redactor = Redactor(policy: .hashed, key: [UInt8](repeating: 3, count: 32))
        #expect(redactor.redact(json: value) == [key: .string(redactor.placeholder(for: "pw1"))])
        #expect(redactor.redact(payload: Array(#"{"\#(key)":"pw1"}"#.utf8), kind: .frameText) != Array(#"{"\#(key)":"pw1"}"#.utf8), "the pre-check sees it")
    }

    @Test func rekeyMapsEqualPlaceholdersToEqualPlaceholders() throws {
        let old = Redactor(policy: .hashed, key: [UInt8](repeating: 1, count: 32))
        let new = Redactor(policy: .hashed, key: [UInt8](repeating: 2, count: 32))
        let p = old.placeholder(for: "secret")
        let r = Rekeyer(redactor: new, extraKeys: ["DeviceName"])
        let json: JSONValue = ["a": .string(p), "b": ["c": .string("Bearer " + p)], "deviceName": "Alice"]
        let out = r.rewrite(json: json, key: nil)
        let q = try #require(out["a"]?.stringValue)
        #expect(q != p && Redactor.isPlaceholder(q) && q == new.placeholder(for: p))
        #expect(out["b"]?["c"] == .string("Bearer " + q))
        #expect(out["deviceName"] == .string(new.placeholder(for: "Alice")))
        #expect(r.rewrite(payload: Array("plain".utf8), kind: .frameBinary) == Array("plain".utf8))
    }

    @Test func diffNormalisesPlaceholdersVolatileKeysAndKeyOrder() throws {
        let d = TraceDiff()
        let a = try JSONValue(parsing: #"{"x":1,"token":"rt:redacted:0123456789abcdef","timestamp":"t1","y":[1.0]}"#)
        let b = try JSONValue(parsing: #"{"y":[1],"token":"rt:redacted:fedcba9876543210","timestamp":"t2","x":1}"#)
        #expect(d.normalise(a) == d.normalise(b))
        let c = try JSONValue(parsing: #"{"x":2}"#)
        #expect(d.normalise(a) != d.normalise(c))
    }
}

/// A diagnostic record's summary is its code and the sentence rendered from its fields (or, for a record
/// from before diagnostics were typed, its recorded sentence), on both channels, eager or deferred.
@Suite struct DiagnosticSummaryTests {
    func summary(_ json: String, channel: TraceChannel = .relay, deferring: Bool = false) -> String {
        InspectedRecord(number: 0, record: TraceRecord(kind: .action, time: .seconds(1), channel: channel, payload: Array(json.utf8)),
                        deferringJSON: deferring).summary
    }

    @Test(arguments: [false, true]) func diagnosticsAreShownInWords(deferring: Bool) {
        #expect(summary(#"{"action":"diagnostic","code":"staleGeneration","current":1,"gen":2,"input":"frame"}"#, deferring: deferring)
                == "diagnostic staleGeneration: stale frame on g2 (current g1)")
        #expect(summary(#"{"action":"diagnostic","code":"timeWentBackwards","from":2000000000,"to":1500000000}"#, deferring: deferring)
                == "diagnostic timeWentBackwards: time went backwards from 2.000s to 1.500s")
        #expect(summary(#"{"code":"sendFailedForUnknownSequence","sequence":9,"side":"watch","watch":"diagnostic"}"#, channel: .watch, deferring: deferring)
                == "diagnostic sendFailedForUnknownSequence: ignored a send failure for #9: not queued")
        #expect(summary(#"{"action":"diagnostic","text":"start held until the device identity is known"}"#, deferring: deferring)
                == "diagnostic: start held until the device identity is known")
        #expect(summary(#"{"action":"diagnostic","code":"newerCode","n":1}"#, deferring: deferring) == #"diagnostic newerCode: newerCode {"n":1}"#)
        #expect(summary(#"{"action":"callProgress","code":"x"}"#, deferring: deferring) == #"{"action":"callProgress","code":"x"}"#,
                "only diagnostics are rendered")
    }
}
