public import RelayProtocol

/// The trace header: what a reader needs before the first record. Stored as the JSON payload of the
/// header record in the file-header frame (see docs/TRACE_FORMAT.md, "Header JSON").
public struct TraceHeader: Sendable, Hashable {
    /// The version of the relaytrace tool that wrote traces with this build.
    public static let currentToolVersion = "0.1.0"
    /// The relay protocol version the client of this build speaks.
    public static let currentClientProtocolVersion = "1.6"

    /// How secrets were treated.
    public struct Redaction: Sendable, Hashable {
        /// The policy.
        public var policy: RedactionPolicy
        /// A short public name of the key (`Redactor.keyID`).
        public var keyID: String
        /// The HMAC key, so a replayer can redact the replayed client's own actions the same way and
        /// compare (see docs/TRACE_FORMAT.md for why storing it is safe). Empty with `.raw`.
        public var key: [UInt8]

        /// Creates the redaction description.
        public init(policy: RedactionPolicy, keyID: String, key: [UInt8]) {
            self.policy = policy
            self.keyID = keyID
            self.key = key
        }

        /// The description of `redactor`.
        public init(_ redactor: Redactor) {
            self.init(policy: redactor.policy, keyID: redactor.keyID, key: redactor.key)
        }

        /// The redactor this describes.
        public var redactor: Redactor { Redactor(policy: policy, key: key) }
    }

    /// The file format version (1).
    public var formatVersion: Int
    /// The relaytrace version that wrote the file.
    public var toolVersion: String
    /// The relay protocol version the client spoke ("1.6").
    public var clientProtocolVersion: String
    /// The seed of the client machine's random generator.
    public var seed: UInt64
    /// How secrets were treated (the writer fills this in from its options).
    public var redaction: Redaction
    /// The wall-clock time the trace started, RFC 3339 (taken by the caller; the writer never reads
    /// the wall clock).
    public var wallClockStart: String
    /// True when the trace was made by a simulation (dev relay, tests) rather than a real device.
    public var simulated: Bool
    /// Client identity and configuration, free-form (deviceId, desktopId, deviceName, url...).
    public var client: JSONValue
    /// Other members, kept for forward compatibility.
    public var extra: [String: JSONValue]

    /// Creates a header.
    public init(
        formatVersion: Int = Int(TraceFormat.version), toolVersion: String = TraceHeader.currentToolVersion,
        clientProtocolVersion: String = TraceHeader.currentClientProtocolVersion, seed: UInt64,
        redaction: Redaction = Redaction(policy: .raw, keyID: "", key: []), wallClockStart: String,
        simulated: Bool = false, client: JSONValue = .object([:]), extra: [String: JSONValue] = [:]
    ) {
        self.formatVersion = formatVersion
        self.toolVersion = toolVersion
        self.clientProtocolVersion = clientProtocolVersion
        self.seed = seed
        self.redaction = redaction
        self.wallClockStart = wallClockStart
        self.simulated = simulated
        self.client = client
        self.extra = extra
    }

    /// The `wire` member of a *wire trace* (one written by the recording relay, the recording proxy or the
    /// in-app recorder: what crossed the wire for any client, with no client inputs; TRACE_FORMAT.md §14):
    /// `{"source": "relay" | "proxy" | "recorder", ...}`. Nil for a machine trace (`capture`, `simulate`).
    public var wire: JSONValue? {
        get { extra["wire"] }
        set { extra["wire"] = newValue }
    }

    /// Where a wire trace came from (`relay`, `proxy`, `recorder`, or another writer's name); nil for a
    /// machine trace.
    public var wireSource: String? { wire?["source"]?.stringValue ?? (wire == nil ? nil : "unknown") }

    /// Whether this is a wire trace (see ``wire``).
    public var isWireTrace: Bool { wire != nil }

    /// The header as JSON (`seed` as a decimal string: JSON numbers cannot hold every `UInt64`).
    public var json: JSONValue {
        var o = extra
        o["formatVersion"] = .int(Int64(formatVersion))
        o["toolVersion"] = .string(toolVersion)
        o["clientProtocolVersion"] = .string(clientProtocolVersion)
        o["seed"] = .string(String(seed))
        o["redaction"] = .object([
            "policy": .string(redaction.policy.rawValue), "keyId": .string(redaction.keyID),
            "key": .string(hexString(redaction.key)),
        ])
        o["wallClockStart"] = .string(wallClockStart)
        o["simulated"] = .bool(simulated)
        o["client"] = client
        return .object(o)
    }

    static let knownKeys: Set<String> = [
        "formatVersion", "toolVersion", "clientProtocolVersion", "seed", "redaction", "wallClockStart",
        "simulated", "client",
    ]

    /// Reads a header from its JSON. Throws `.invalidPayload` naming the member that is missing or wrong.
    public init(json: JSONValue) throws(TraceError) {
        guard case .object(let o) = json else {
            throw TraceError(.invalidPayload, "the header JSON is \(json.typeDescription), expected an object")
        }
        func string(_ key: String) throws(TraceError) -> String {
            guard let s = o[key]?.stringValue else {
                throw TraceError(.invalidPayload, "header member \(key) is missing or not a string")
            }
            return s
        }
        guard let fv = o["formatVersion"]?.intValue else {
            throw TraceError(.invalidPayload, "header member formatVersion is missing or not an integer")
        }
        formatVersion = Int(fv)
        toolVersion = try string("toolVersion")
        clientProtocolVersion = try string("clientProtocolVersion")
        guard let seed = UInt64(try string("seed")) else {
            throw TraceError(.invalidPayload, "header member seed is not a decimal UInt64")
        }
        self.seed = seed
        guard let r = o["redaction"], let p = r["policy"]?.stringValue, let policy = RedactionPolicy(rawValue: p) else {
            throw TraceError(.invalidPayload, "header member redaction.policy is missing or unknown (expected hmac-sha256 or raw)")
        }
        guard let keyHex = r["key"]?.stringValue, let key = hexDecoded(keyHex) else {
            throw TraceError(.invalidPayload, "header member redaction.key is missing or not hexadecimal")
        }
        redaction = Redaction(policy: policy, keyID: r["keyId"]?.stringValue ?? "", key: key)
        wallClockStart = try string("wallClockStart")
        guard let sim = o["simulated"]?.boolValue else {
            throw TraceError(.invalidPayload, "header member simulated is missing or not a boolean")
        }
        simulated = sim
        client = o["client"] ?? .object([:])
        extra = o.filter { !Self.knownKeys.contains($0.key) }
    }
}

extension TraceHeader {
    /// Parses the JSON payload of a header record (errors point at the header record, offset 16).
    static func parse(record: TraceRecord) throws(TraceError) -> TraceHeader {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: record.payload)
        } catch {
            throw TraceError(.invalidPayload, offset: 16, "the header record is not valid JSON: \(error)")
        }
        do {
            return try TraceHeader(json: value)
        } catch {
            var e = error
            e.offset = 16
            throw e
        }
    }
}
