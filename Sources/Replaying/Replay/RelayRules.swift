public import ReplayCore
public import RelayClient
public import RelayProtocol
public import Trace
public import SpecCheck

// The relay client's SPEC rules and state picture, on top of the replay core's `SpecRule`.

extension SpecRule {
    /// A rule of `relaytrace check`: its section, requirement and ID.
    public init(_ rule: CheckRule) {
        self.init(section: rule.section, summary: rule.requirement, id: rule.rawValue)
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
