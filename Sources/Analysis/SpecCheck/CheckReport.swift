public import RelayProtocol

/// One place where a rule was broken: the rule, the records that show it, what was measured and what
/// the SPEC requires, and one line saying why it matters. A value on its own (it names its trace's
/// device, desktop and generation), so a list of findings streams one per line (`finding.json`).
public struct CheckFinding: Sendable, Hashable {
    /// The rule broken.
    public var rule: CheckRule
    /// The records that show it (numbers as `relaytrace frames` prints them), the main one first.
    public var records: [UInt64]
    /// The time of the main record.
    public var time: Moment
    /// The socket's generation, when the finding is about one socket.
    public var generation: UInt64?
    /// The phone's device ID (as recorded: maybe a redaction placeholder).
    public var device: String?
    /// The desktop the socket targets.
    public var desktop: String?
    /// What the trace shows, e.g. `6.000 s between heartbeats`, `absent`.
    public var measured: String
    /// What the SPEC requires, e.g. `5 s ± 0.25 s`.
    public var required: String
    /// The measured figure in seconds, for timing rules (for sorting and plotting).
    public var measuredSeconds: Double?
    /// One line: what went wrong.
    public var explanation: String

    /// Creates a finding.
    public init(rule: CheckRule, records: [UInt64], time: Moment, generation: UInt64? = nil, device: String? = nil,
                desktop: String? = nil, measured: String, required: String, measuredSeconds: Double? = nil,
                explanation: String) {
        self.rule = rule
        self.records = records
        self.time = time
        self.generation = generation
        self.device = device
        self.desktop = desktop
        self.measured = measured
        self.required = required
        self.measuredSeconds = measuredSeconds
        self.explanation = explanation
    }

    /// Whether the finding is the relay's or desktop's doing (it does not fail the check).
    public var blamesPeer: Bool { rule.blamesPeer }

    /// `{rule, section, party, records, t, gen, device, desktop, measured, required, measuredSeconds?,
    /// explanation}`: one row of `check --format json`'s `findings` (and of a JSON-lines stream).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "rule": .string(rule.rawValue), "section": .string(rule.section),
            "party": .string(blamesPeer ? "peer" : "client"),
            "records": .array(records.map { .int(Int64(bitPattern: $0)) }),
            "t": .double(time.seconds),
            "gen": generation.map { .int(Int64(bitPattern: $0)) } ?? .null,
            "device": device.map { .string($0) } ?? .null,
            "desktop": desktop.map { .string($0) } ?? .null,
            "measured": .string(measured), "required": .string(required),
            "explanation": .string(explanation),
        ]
        if let measuredSeconds { o["measuredSeconds"] = .double(measuredSeconds) }
        return .object(o)
    }

    /// One line for people: rule, record, time and generation, measured against required, why.
    public var text: String {
        var at = "record " + records.map(String.init).joined(separator: ", ")
        at += " (\(time)"
        if let generation { at += ", gen \(generation)" }
        at += ")"
        let who = blamesPeer ? " [peer]" : ""
        return "\(rule.rawValue)\(who) at \(at): \(measured); required \(required). \(explanation)"
    }
}

/// How one rule fared over a trace.
public struct RuleTally: Sendable, Hashable {
    /// The verdict of a rule.
    public enum Status: String, Sendable, Hashable {
        /// Judged at least once, never broken.
        case held
        /// Broken at least once.
        case broken
        /// The trace holds nothing this rule judges (no such message, or not enough of the trace).
        case notApplicable
        /// Left out with `--skip`.
        case skipped
    }

    /// The rule.
    public var rule: CheckRule
    /// How many times it was judged (per rule: sockets, messages, intervals; docs/CLI.md says which).
    public var checked: Int = 0
    /// How many of those broke it.
    public var broken: Int = 0
    /// Whether it was left out.
    public var skipped = false

    /// Creates an empty tally.
    public init(rule: CheckRule, skipped: Bool = false) {
        self.rule = rule
        self.skipped = skipped
    }

    /// Judged and not broken.
    public var held: Int { checked - broken }

    /// The verdict.
    public var status: Status {
        if skipped { return .skipped }
        if checked == 0 { return .notApplicable }
        return broken > 0 ? .broken : .held
    }

    /// `{rule, section, requirement, checked, held, broken, status}`.
    public var json: JSONValue {
        ["rule": .string(rule.rawValue), "section": .string(rule.section), "requirement": .string(rule.requirement),
         "checked": .int(Int64(checked)), "held": .int(Int64(held)), "broken": .int(Int64(broken)),
         "status": .string(status.rawValue)]
    }
}

/// What `relaytrace check` found in one trace.
public struct CheckReport: Sendable, Hashable {
    /// Which convention the trace follows.
    public enum TraceKind: String, Sendable, Hashable {
        /// Written by `capture`/`simulate`: the client machine's frames, inputs and actions.
        case machine
        /// Written by a recording relay, proxy or in-app recorder: only what crossed the wire.
        case wire
    }

    /// Machine or wire trace.
    public var kind: TraceKind
    /// Records read.
    public var records: UInt64
    /// Phone sockets (generations) seen, and desktop sockets (not judged).
    public var phoneSockets: Int
    /// Desktop sockets seen (a wire trace of a relay records them; no phone rule applies to them).
    public var desktopSockets: Int
    /// Distinct phone devices.
    public var phoneDevices: Int
    /// Every finding, in record order.
    public var findings: [CheckFinding]
    /// One tally per rule, in catalogue order.
    public var rules: [RuleTally]
    /// Facts about the trace worth saying (no relay socket at all, a damaged tail...).
    public var notes: [String]

    /// Creates a report.
    public init(kind: TraceKind, records: UInt64, phoneSockets: Int, desktopSockets: Int, phoneDevices: Int,
                findings: [CheckFinding], rules: [RuleTally], notes: [String]) {
        self.kind = kind
        self.records = records
        self.phoneSockets = phoneSockets
        self.desktopSockets = desktopSockets
        self.phoneDevices = phoneDevices
        self.findings = findings
        self.rules = rules
        self.notes = notes
    }

    /// True when the client broke a rule (peer findings do not count).
    public var clientBrokeARule: Bool { findings.contains { !$0.blamesPeer } }

    /// The whole report: `{trace: {kind, records, phoneDevices, phoneSockets, desktopSockets}, result,
    /// findings: [...], rules: [...], notes: [...]}`; `result` is `held` or `broken`.
    public var json: JSONValue {
        [
            "trace": ["kind": .string(kind.rawValue), "records": .int(Int64(bitPattern: records)),
                      "phoneDevices": .int(Int64(phoneDevices)), "phoneSockets": .int(Int64(phoneSockets)),
                      "desktopSockets": .int(Int64(desktopSockets))],
            "result": .string(clientBrokeARule ? "broken" : "held"),
            "findings": .array(findings.map(\.json)),
            "rules": .array(rules.map(\.json)),
            "notes": .array(notes.map { .string($0) }),
        ]
    }

    /// The report for people: the trace, each finding on one line, then one line per rule.
    public var text: String {
        var out = "\(kind.rawValue) trace: \(records) records, \(phoneDevices) phone device(s), \(phoneSockets) phone socket(s)"
        if desktopSockets > 0 { out += ", \(desktopSockets) desktop socket(s) (not judged)" }
        out += "\n"
        for n in notes { out += "note: \(n)\n" }
        if !findings.isEmpty {
            out += "\n"
            for f in findings { out += f.text + "\n" }
        }
        out += "\nrules:\n"
        let width = (rules.map { $0.rule.rawValue.count }.max() ?? 0) + 2
        for t in rules {
            let name = t.rule.rawValue + String(repeating: " ", count: max(1, width - t.rule.rawValue.count))
            var verdict: String
            switch t.status {
            case .held: verdict = "held, \(t.checked) checked"
            case .broken: verdict = "BROKEN \(t.broken) of \(t.checked)" + (t.rule.blamesPeer ? " (peer)" : "")
            case .notApplicable: verdict = "not applicable"
            case .skipped: verdict = "skipped"
            }
            verdict += String(repeating: " ", count: max(1, 24 - verdict.count))
            out += "  \(name)\(verdict)\(t.rule.requirement)\n"
        }
        let client = findings.filter { !$0.blamesPeer }
        let brokenRules = Set(client.map(\.rule)).count
        if client.isEmpty {
            out += "\nresult: every rule judged held" + (findings.isEmpty ? "" : " (\(findings.count) finding(s) about the peer)") + "\n"
        } else {
            out += "\nresult: \(client.count) finding(s), \(brokenRules) rule(s) broken\n"
        }
        return out
    }
}
