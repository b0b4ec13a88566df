public import RelayClient
public import RelayProtocol
public import Trace
public import SpecCheck

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

    /// A rule of `relaytrace check`: its section, requirement and ID.
    public init(_ rule: CheckRule) {
        self.init(section: rule.section, summary: rule.requirement, id: rule.rawValue)
    }

    /// `{section, summary}`, and `id` when the rule has one.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["section": .string(section), "summary": .string(summary)]
        if let id { o["id"] = .string(id) }
        return .object(o)
    }

    /// The rule a record most likely concerns.
    public static func of(_ r: TraceRecord) -> SpecRule? {
        switch r.kind {
        case .transportOpen:
            return SpecRule(section: "A4", summary: "a socket per generation with the A4 upgrade headers")
        case .transportClosed:
            return SpecRule(section: "A5/A9", summary: "closing a generation (failure, path change, background)")
        case .frameText:
            guard let json = try? JSONValue(parsing: r.payload), let type = json["type"]?.stringValue else { return nil }
            switch type {
            case "register": return SpecRule(section: "A6/A7", summary: "register (1.6 form, stored session and token)")
            case "heartbeat": return SpecRule(section: "A6", summary: "heartbeat every 5 s after registration")
            case "rpc.request": return SpecRule(section: "A8", summary: "requests, keys, traceparent, timeouts")
            case "link.redeem": return SpecRule(section: "Part B", summary: "device link by code or QR (docs/DEVICE_LINK.md)")
            case "event":
                if json["payload"]?["eventType"] == "chat:timeline-interest" {
                    return SpecRule(section: "A11", summary: "timeline interest renewed every 20 s, re-issued after registration")
                }
                return nil
            default: return nil
            }
        case .action, .timerFired:
            guard let json = try? JSONValue(parsing: r.payload) else { return nil }
            let name = (json["timer"]?["timer"] ?? json["timer"] ?? json["action"])?.stringValue ?? ""
            return rule(named: name)
        default:
            return nil
        }
    }

    static func rule(named name: String) -> SpecRule? {
        switch name {
        case "handshake": SpecRule(section: "A6", summary: "handshake timeout 10 s")
        case "heartbeat": SpecRule(section: "A6", summary: "heartbeat every 5 s after registration")
        case "watchdog": SpecRule(section: "A6", summary: "watchdog after 15 s without inbound traffic")
        case "sendRetry", "sendAttempt": SpecRule(section: "A6", summary: "transient send retried after min(0.25 × attempt, 1.5) s")
        case "reRegister", "clearResume", "storeResume": SpecRule(section: "A7", summary: "resume tokens, invalidResume -> re-register after 0.2 s")
        case "rpcTimeout", "callCompleted", "callProgress": SpecRule(section: "A8", summary: "pending calls and per-method timeouts")
        case "epochDeadline", "probe", "foregroundRecovery", "epochOpened", "desktopStatusChanged":
            SpecRule(section: "A9", summary: "recovery epochs, 90 s window, foreground recovery after 1.5 s")
        case "interest.renewal", "interest.retry": SpecRule(section: "A11", summary: "lease renewed every 20 s; 4 jittered retries")
        case "auth.poll", "auth.refresh", "httpRequest": SpecRule(section: "A2", summary: "poll every 2 s (60 max); refresh at max(expiry - 300 s - now, 5 s)")
        case "reconnect", "connectionFailed", "phaseChanged": SpecRule(section: "A5/A6", summary: "generations, failure and reconnect")
        default:
            if name.hasPrefix("ingress.") { SpecRule(section: "A10", summary: "ingress: control events in order, snapshots coalesced, lease checked at delivery") }
            else if name.hasPrefix("identity.") { SpecRule(section: "A1", summary: "identity gate") }
            else if name.hasPrefix("region.") { SpecRule(section: "A3", summary: "region persisted before published; attempts bound to their origin") }
            else if name.hasPrefix("auth.") { SpecRule(section: "A2", summary: "login and token refresh") }
            else if name.hasPrefix("link.") {
                SpecRule(section: "Part B", summary: "device link: the desktop stored in linked_devices before the phone connects to it")
            }
            else { nil }
        }
    }
}

/// A readable picture of the machine at a point of a replay.
public struct ReplaySnapshot: Sendable, CustomStringConvertible {
    /// The machine.
    public var machine: RelayClientMachine
    /// The next record.
    public var position: Int
    /// The records in the trace.
    public var records: Int

    /// The same picture as JSON: `record`, `records`, `timeNs`, `phase`, `generation` (null when no
    /// socket), `lastGeneration`, `desktop`, `network`, `app`, `mediaPlaying`, `resume` {token, ownership},
    /// `epoch` (null or {id, reason, deadlineNs, failedProbes}), `calls` [{callId, method, requestId,
    /// sentOn, deadlineNs}], `timers` [{timer, deadlineNs}], `lease` (null or {sessionId, sinceNs,
    /// nextRenewalNs}).
    public var json: JSONValue {
        let m = machine
        var o: [String: JSONValue] = [
            "record": .int(Int64(position)), "records": .int(Int64(records)), "timeNs": .int(m.now.nanoseconds),
            "phase": .string("\(m.phase)"), "generation": m.generation.map { .int(Int64(bitPattern: $0.rawValue)) } ?? .null,
            "lastGeneration": .int(Int64(bitPattern: m.lastGeneration.rawValue)), "desktop": .string("\(m.desktopStatus)"),
            "network": .string("\(m.networkPath)"), "app": .string(m.appState.rawValue), "mediaPlaying": .bool(m.mediaPlaying),
            "resume": ["token": .bool(m.resumeCredentials != nil), "ownership": .string("\(m.resumeOwnership)")],
        ]
        if let e = m.epoch {
            o["epoch"] = ["id": .int(Int64(bitPattern: e.id)), "reason": .string(e.reason.rawValue),
                          "deadlineNs": .int(e.deadline.nanoseconds), "failedProbes": .int(Int64(e.failedProbes))]
        } else {
            o["epoch"] = .null
        }
        o["calls"] = .array(m.pendingCalls.all.map { c in
            ["callId": .string("\(c.callId)"), "method": .string(c.method), "requestId": .string(c.requestId),
             "sentOn": c.sentOn.map { .int(Int64(bitPattern: $0.rawValue)) } ?? .null, "deadlineNs": .int(c.deadline.nanoseconds)]
        })
        o["timers"] = .array(m.armedTimers.map { ["timer": .string("\($0.id)"), "deadlineNs": .int($0.deadline.nanoseconds)] })
        if let lease = m.interest.lease(for: m.configuration.desktopId) {
            o["lease"] = ["sessionId": .string(lease.sessionId), "sinceNs": .int(lease.since.nanoseconds),
                          "nextRenewalNs": lease.nextRenewal.map { .int($0.nanoseconds) } ?? .null]
        } else {
            o["lease"] = .null
        }
        return .object(o)
    }

    /// Phase, generation, pending calls, armed timers, lease, epoch, resume ownership.
    public var description: String {
        let m = machine
        var lines = [
            "record:     \(position) of \(records)",
            "time:       \(m.now)",
            "phase:      \(m.phase)",
            "generation: \(m.generation.map { $0.description } ?? "none") (last \(m.lastGeneration))",
            "desktop:    \(m.desktopStatus)",
            "network:    \(m.networkPath), app \(m.appState.rawValue)\(m.mediaPlaying ? ", media playing" : "")",
            "resume:     \(m.resumeCredentials == nil ? "no token" : "token held") (ownership \(m.resumeOwnership))",
        ]
        if let e = m.epoch {
            lines.append("epoch:      #\(e.id) (\(e.reason.rawValue)) deadline \(e.deadline), \(e.failedProbes) failed probe(s)")
        }
        let calls = m.pendingCalls.all
        lines.append("calls:      \(calls.count) pending")
        for c in calls {
            lines.append("  \(c.callId) \(c.method) id=\(c.requestId) on \(c.sentOn.map { $0.description } ?? "not sent") deadline \(c.deadline)")
        }
        let timers = m.armedTimers
        lines.append("timers:     \(timers.count) armed")
        for t in timers { lines.append("  \(t.id) at \(t.deadline)") }
        if let lease = m.interest.lease(for: m.configuration.desktopId) {
            lines.append("lease:      \(lease.sessionId) since \(lease.since)\(lease.nextRenewal.map { ", renews at \($0)" } ?? "")")
        } else {
            lines.append("lease:      none")
        }
        return lines.joined(separator: "\n")
    }
}
