public import RelayProtocol

/// The first place where the replayed client and the recorded one part ways.
public struct Divergence: Sendable, Equatable, CustomStringConvertible {
    /// How they differ.
    public enum Kind: String, Sendable, Equatable {
        /// Both did something here, and it differs.
        case different
        /// The trace has an action the replayed client did not do.
        case missing
        /// The replayed client did something the trace does not have.
        case extra
        /// A recorded input does not decode (a damaged or foreign record).
        case undecodable
    }

    /// The trace record number where it happened.
    public var record: Int
    /// The record's time.
    public var time: Moment
    /// The transport generation, where one applies.
    public var generation: UInt64?
    /// How they differ.
    public var kind: Kind
    /// The recorded side, one line.
    public var expected: String
    /// The replayed side, one line.
    public var actual: String
    /// The records before it (the divergent one marked `>`).
    public var context: [String]
    /// The SPEC rule the differing action belongs to, when it can be told.
    public var rule: SpecRule?

    /// A divergence report (for replayers of other machines, e.g. the watch channel's).
    public init(record: Int, time: Moment, generation: UInt64?, kind: Kind, expected: String, actual: String,
                context: [String], rule: SpecRule?) {
        self.record = record
        self.time = time
        self.generation = generation
        self.kind = kind
        self.expected = expected
        self.actual = actual
        self.context = context
        self.rule = rule
    }

    /// The member-by-member differences of the two JSON payloads (`$.path: expected X, got Y`), when both
    /// sides are JSON.
    public var jsonDifferences: [String] {
        guard let e = Divergence.json(after: expected), let a = Divergence.json(after: actual) else { return [] }
        return JSONDiff.differences(e, a)
    }

    /// A report: where, what was expected, what happened, the JSON diff, the context, the SPEC rule, and
    /// how to go on (with `FILE` for the trace; ``report(file:)`` names it).
    public var description: String { report(file: "FILE") }

    /// The report, its hint naming the trace at `file` (quoted for a shell when it needs it).
    public func report(file: String) -> String {
        let safe = file.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@%=,".contains($0) }
        let name = safe && !file.isEmpty ? file : "'" + file.replacingOccurrences(of: "'", with: "'\\''") + "'"
        var lines = ["divergence at record #\(record), t=\(time)\(generation.map { ", generation g\($0)" } ?? "") (\(kind.rawValue))"]
        if let rule { lines.append("  rule:     \(rule)") }
        lines.append("  expected: \(expected)")
        lines.append("  actual:   \(actual)")
        let diff = jsonDifferences
        if !diff.isEmpty {
            lines.append("  differences:")
            lines += diff.prefix(20).map { "    \($0)" }
        }
        lines.append("  context:")
        lines += context.map { "    \($0)" }
        lines.append("To investigate: relaytrace replay \(name) --until \(time.seconds)s --step, or relaytrace show \(name) \(record).")
        return lines.joined(separator: "\n")
    }

    /// The report as JSON (for scripts and CI): `record`, `time` (s), `timeNs`, `generation`, `kind`,
    /// `rule` {section, summary}, `expected`, `actual`, `differences`, `context`.
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "record": .int(Int64(record)), "time": .double(time.seconds), "timeNs": .int(time.nanoseconds),
            "kind": .string(kind.rawValue), "expected": .string(expected), "actual": .string(actual),
            "differences": .array(jsonDifferences.map { .string($0) }), "context": .array(context.map { .string($0) }),
        ]
        if let generation { o["generation"] = .int(Int64(bitPattern: generation)) }
        if let rule { o["rule"] = rule.json }
        return .object(o)
    }

    static func json(after line: String) -> JSONValue? {
        guard let brace = line.firstIndex(of: "{") else { return nil }
        return try? JSONValue(parsing: String(line[brace...]))
    }
}

/// The SPEC rule an action or input belongs to, for failure messages.
public struct SpecRule: Sendable, Equatable, CustomStringConvertible {
    /// The SPEC section, e.g. `A6`.
    public var section: String
    /// The rule in a few words.
    public var summary: String
    /// The rule's ID in `relaytrace check` (``CheckRule``, e.g. `A6.heartbeat`), when it is one of the
    /// SPEC's rules observable on the wire.
    public var id: String?
    /// `SPEC A6: heartbeat every 5 s after registration`, or with an ID `SPEC A6.heartbeat: ...`.
    public var description: String { "SPEC \(id ?? section): \(summary)" }

    /// The rule `section` (e.g. `C7`), in a few words, with its `relaytrace check` ID when it has one.
    public init(section: String, summary: String, id: String? = nil) {
        self.section = section
        self.summary = summary
        self.id = id
    }

    /// `{section, summary}`, and `id` when the rule has one.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["section": .string(section), "summary": .string(summary)]
        if let id { o["id"] = .string(id) }
        return .object(o)
    }
}
