public import Inspect
public import Trace
import RelayProtocol

/// Checks a trace against the SPEC's rules that can be seen on the wire (`CheckRule`), one record at a
/// time: feed every record in order with ``add(_:)``, then ``finish()``.
///
/// Any trace: a *machine trace* (`capture`/`simulate`: the client machine's frames with its inputs and
/// actions) or a *wire trace* (header member `wire`: what a recording relay, proxy or in-app recorder saw
/// cross the wire; several devices, desktops too). Only what crossed the wire is judged: frames, the
/// upgrade, closes and failures, pings. Inputs and actions of a machine trace are used only to tell a
/// send retry from a new message (`sendAttempt`), a client restart (marker) and a start (`start`).
///
/// Principles:
/// - **Only where the trace shows enough.** A socket closed 2 s after registering has no heartbeat to
///   judge; a wait the trace ends before is not judged.
/// - **Never blame the client for the relay.** A socket the relay closed, a watchdog that the relay's
///   silence triggered, a response with a wrong trace ID are not the client's findings. "The client gave
///   the socket up" means: it closed it, or (wire traces) sent nothing more on it; a machine trace shows
///   the client's own close, so there a socket is open until its close or failure is recorded.
/// - **Tolerances** for real clocks (`CheckOptions`).
///
/// Memory grows with open sockets and their requests in flight, not with the trace.
public final class TraceChecker {
    /// The options.
    public let options: CheckOptions
    /// Machine or wire convention (from the header).
    public let kind: CheckReport.TraceKind

    private let header: TraceHeader
    private let redactor: Redactor?
    private var life = 0
    private var sockets: [SocketKey: Socket] = [:]
    private var pairs: [String: Pair] = [:]
    private var tallies: [CheckRule: RuleTally]
    private var findings: [CheckFinding] = []
    private var records: UInt64 = 0
    private var traceEnd: Moment = .zero
    private var lastRecord: UInt64 = 0
    private var phoneSockets = 0
    private var desktopSockets = 0
    private var phoneDevices: Set<String> = []
    private var otherChannels = 0

    /// A checker for a trace with `header`.
    public init(header: TraceHeader, options: CheckOptions = CheckOptions()) {
        self.header = header
        self.options = options
        kind = header.isWireTrace ? .wire : .machine
        redactor = header.redaction.key.isEmpty ? nil : Redactor(policy: .hashed, key: header.redaction.key)
        tallies = Dictionary(uniqueKeysWithValues: CheckRule.allCases.map { ($0, RuleTally(rule: $0, skipped: options.skip.contains($0))) })
    }

    private var tol: Duration { options.tolerance }

    // MARK: - Feeding

    /// Feeds the next record of the trace (in file order).
    public func add(_ rec: InspectedRecord) {
        records += 1
        lastRecord = rec.number
        let r = rec.record
        if r.time > traceEnd { traceEnd = r.time }
        guard r.channel == .relay else {
            otherChannels += 1
            return
        }
        let n = rec.number
        switch r.kind {
        case .marker:
            if kind == .machine, r.payloadText.hasPrefix("client restart") { restart(at: r.time, record: n) }
        case .input:
            // A client started (again) by the app may register again after an ended loop.
            if kind == .machine, rec.inputOrActionName == "start" {
                for p in pairs.values where p.loopStop != nil {
                    p.loopStop = nil
                    judge(.invalidResumeLoop, ok: true)
                }
            }
        case .action:
            if kind == .machine, rec.inputOrActionName == "sendAttempt", let g = rec.json?["gen"]?.intValue,
               let s = sockets[SocketKey(life: life, generation: UInt64(bitPattern: g))] {
                s.nextIsRetry = true
            }
        case .transportOpen:
            guard let g = r.generation else { return }
            open(rec, generation: g)
        case .transportOpened, .header, .timerFired, .dropped, .writerStopped:
            break
        case .frameText, .frameBinary, .transportClosed, .transportFailed, .ping, .pong:
            guard let g = r.generation, let s = sockets[SocketKey(life: life, generation: g)] else { return }
            let out = r.direction == .outbound
            switch r.kind {
            case .frameText, .frameBinary:
                if out { clientSent(rec, on: s) } else { received(rec, on: s) }
            case .transportClosed:
                end(s, at: r.time, record: n, byClient: out)
            case .transportFailed:
                end(s, at: r.time, record: n, byClient: false)
            default:
                // WebSocket pings and pongs (wire traces): traffic, and proof the client is on the socket.
                guard s.isPhone else { return }
                if out { clientActivity(s, at: r.time, record: n) } else { inboundTraffic(s, at: r.time, record: n) }
            }
        case .unknown:
            break
        }
    }

    /// Ends the check: judges what is still open at the trace's end (only as far as the trace reaches)
    /// and returns the report.
    public func finish() -> CheckReport {
        for s in sockets.values.sorted(by: { $0.openRecord < $1.openRecord }) {
            end(s, at: traceEnd, record: lastRecord, byClient: false)
        }
        for p in pairs.values where p.loopStop != nil {
            p.loopStop = nil
            judge(.invalidResumeLoop, ok: true)
        }
        var notes: [String] = []
        if phoneSockets == 0 {
            notes.append(otherChannels > 0 && records == UInt64(otherChannels)
                ? "no relay-channel socket (a watch-channel trace): no relay rule applies"
                : "no phone socket in the trace: no relay rule applies")
        }
        let sorted = findings.enumerated().sorted { a, b in
            (a.element.records.first ?? 0, a.offset) < (b.element.records.first ?? 0, b.offset)
        }.map(\.element)
        return CheckReport(kind: kind, records: records, phoneSockets: phoneSockets, desktopSockets: desktopSockets,
                           phoneDevices: phoneDevices.count, findings: sorted,
                           rules: CheckRule.allCases.compactMap { tallies[$0] }, notes: notes)
    }

    // MARK: - Verdicts

    private func judge(_ rule: CheckRule, ok: Bool) {
        guard !options.skip.contains(rule) else { return }
        tallies[rule]?.checked += 1
        if !ok { tallies[rule]?.broken += 1 }
    }

    private func report(_ rule: CheckRule, _ records: [UInt64], at time: Moment, on s: Socket?, measured: String,
                        required: String, seconds: Double? = nil, _ explanation: String) {
        guard !options.skip.contains(rule) else { return }
        findings.append(CheckFinding(rule: rule, records: records, time: time, generation: s?.key.generation,
                                     device: s?.device, desktop: s?.desktop, measured: measured, required: required,
                                     measuredSeconds: seconds, explanation: explanation))
    }

    /// One thing wrong with a message: what was seen, what is required, why it matters.
    private struct Problem {
        var measured: String
        var required: String
        var why: String
        var seconds: Double?

        init(_ measured: String, _ required: String, _ why: String, seconds: Double? = nil) {
            self.measured = measured
            self.required = required
            self.why = why
            self.seconds = seconds
        }
    }

    /// Judges `rule` once over `problems` (each one a finding).
    private func judge(_ rule: CheckRule, _ problems: [Problem], records: [UInt64], at time: Moment, on s: Socket) {
        judge(rule, ok: problems.isEmpty)
        for p in problems { report(rule, records, at: time, on: s, measured: p.measured, required: p.required, seconds: p.seconds, p.why) }
    }

    // MARK: - Sockets

    private func pair(_ s: Socket) -> Pair {
        if let p = pairs[s.pair] { return p }
        let p = Pair()
        pairs[s.pair] = p
        return p
    }

    private func open(_ rec: InspectedRecord, generation g: UInt64) {
        let r = rec.record
        let key = SocketKey(life: life, generation: g)
        if let old = sockets[key] { end(old, at: r.time, record: rec.number, byClient: false) }
        let j = rec.json
        let headers = UpgradeHeaders(j)
        let clientJSON: JSONValue? = kind == .machine ? header.client : nil
        let device = j?["deviceId"]?.stringValue ?? headers.value("x-device-id") ?? clientJSON?["deviceId"]?.stringValue
        let desktop = j?["desktopId"]?.stringValue ?? headers.value("x-target-desktop-device-id") ?? clientJSON?["desktopId"]?.stringValue
        let clientType = j?["clientType"]?.stringValue ?? headers.value("x-client-type")
        let isPhone = kind == .machine || clientType?.lowercased() != SpecNumbers.desktopClientType
        let s = Socket(key: key, record: rec.number, time: r.time, isPhone: isPhone, device: device, desktop: desktop)
        sockets[key] = s
        guard isPhone else {
            desktopSockets += 1
            return
        }
        phoneSockets += 1
        phoneDevices.insert(device ?? "?")
        s.handshake = Deadline(rule: .handshake, start: r.time, startRecord: rec.number, due: SpecNumbers.handshakeTimeout,
                               awaited: "registration", since: "after the socket opened", fromInbound: false)
        checkURL(j?["url"]?.stringValue, rec, s)
        if headers.present && headers.value("x-target-desktop-device-id") == nil {
            s.pendingHeaders = headers  // a link socket names no desktop: judged at its first message
        } else {
            checkHeaders(headers, record: rec.number, at: r.time, s, linking: false)
        }
        // A5: the pair's earlier sockets must be gone.
        let p = pair(s)
        let others = p.live.compactMap { sockets[$0] }
        if others.isEmpty {
            judge(.oneLiveGeneration, ok: true)
        } else if kind == .machine {
            judge(.oneLiveGeneration, ok: false)
            for o in others {
                report(.oneLiveGeneration, [rec.number, o.openRecord], at: r.time, on: s,
                       measured: "generation \(o.key.generation) still live when generation \(g) opened",
                       required: "one live socket per phone/desktop pair",
                       "A5: the previous socket must be closed before its successor opens.")
            }
        } else {
            for o in others where o.successor == nil { o.successor = (r.time, rec.number, g) }
        }
        p.live.append(key)
    }

    /// The socket ends (closed by either side, failed, the client process restarted, the trace ended):
    /// every wait still open is judged by how long the client stayed on the socket.
    private func end(_ s: Socket, at t: Moment, record n: UInt64, byClient: Bool) {
        sockets[s.key] = nil
        guard s.isPhone else { return }
        if let h = s.pendingHeaders {
            s.pendingHeaders = nil
            checkHeaders(h, record: s.openRecord, at: s.openTime, s, linking: false)
        }
        if byClient { clientActivity(s, at: t, record: n) }
        // How long the client is known to have kept the socket: a machine trace records the client's own
        // close, so until the end; a wire trace only shows what the client sent.
        let until = kind == .machine ? t : s.lastClientTime
        let evidence = kind == .machine ? n : s.lastClientRecord
        for o in s.overdue { judgeDeadline(o.deadline, ok: true) }
        s.overdue = []
        var waits = [s.handshake, s.heartbeat, s.watchdog, s.reRegister, s.renewal].compactMap { $0 }
        waits += s.requests.values.sorted { $0.record < $1.record }.compactMap(\.timeout)
        for d in waits {
            if until > d.start + d.due + tol {
                judgeDeadline(d, ok: false)
                reportDeadline(d, until - d.start, evidence: evidence, at: until, on: s, discharged: false)
            } else if (d.rule == .handshake || d.rule == .timeout) && until >= d.start + d.due - tol {
                judgeDeadline(d, ok: true)  // the client gave the socket up at the deadline
            }
        }
        // A re-issue never sent is not judged: the lease may have been released while no socket was up.
        if let reg = s.registeredAt, until - reg >= SpecNumbers.watchdogSilence {
            judge(.watchdog, ok: !s.watchdogBroken)
        }
        if s.successor != nil { judge(.oneLiveGeneration, ok: true) }
        pair(s).live.removeAll { $0 == s.key }
    }

    /// A client restart in a machine trace: the process died with its sockets; the next life numbers its
    /// generations from 1 again and starts with an empty memory (the keychain remains).
    private func restart(at t: Moment, record n: UInt64) {
        for s in sockets.values.sorted(by: { $0.openRecord < $1.openRecord }) { end(s, at: t, record: n, byClient: false) }
        life += 1
        for p in pairs.values {
            p.recentInvalid = []
            if p.loopStop != nil {
                p.loopStop = nil
                judge(.invalidResumeLoop, ok: true)
            }
            p.pendingReRegister = nil
            p.lease = nil
        }
    }

    // MARK: - Waits

    /// A record of the client on `s`: proof it still uses the socket.
    private func clientActivity(_ s: Socket, at t: Moment, record n: UInt64) {
        for o in s.overdue {
            judgeDeadline(o.deadline, ok: false)
            reportDeadline(o.deadline, o.at - o.deadline.start, evidence: n, at: o.at, on: s, discharged: true, lateInbound: true)
        }
        s.overdue = []
        if let succ = s.successor, t > succ.time + tol {
            s.successor = nil
            judge(.oneLiveGeneration, ok: false)
            report(.oneLiveGeneration, [n, succ.record], at: t, on: s,
                   measured: "sent on generation \(s.key.generation) \(format(t - succ.time)) after generation \(succ.generation) opened",
                   required: "nothing sent on a socket after its successor opened (+\(seconds(tol)))",
                   "A5: one live generation per phone/desktop pair; a send prepared for a socket never reaches its successor's time.")
        }
        s.lastClientTime = t
        s.lastClientRecord = n
    }

    /// A wait ended by something the client sent (a heartbeat, a register, a lease): on time, or late
    /// (then the message itself shows the client was still there).
    private func dischargeByClient(_ d: Deadline, at t: Moment, record n: UInt64, on s: Socket) {
        let elapsed = t - d.start
        let early = d.fromInbound ? options.earlyTolerance : tol
        let tooEarly = d.rule == .heartbeat && elapsed < d.due - early
        let late = elapsed > d.due + tol
        judgeDeadline(d, ok: !tooEarly && !late)
        if late {
            reportDeadline(d, elapsed, evidence: n, at: t, on: s, discharged: true)
        } else if tooEarly {
            report(d.rule, [n, d.startRecord], at: t, on: s,
                   measured: "\(d.awaited) \(format(elapsed)) \(d.since)", required: "\(requiredText(d)), not sooner than \(seconds(d.due - early))",
                   seconds: elapsed.seconds, explanation(d.rule))
        }
    }

    /// A wait ended by something the client received (registration, inbound traffic, a response). Late
    /// is a finding only if the client was still on the socket after the deadline.
    private func dischargeByInbound(_ d: Deadline, at t: Moment, record n: UInt64, on s: Socket, countHeld: Bool = true) {
        let deadline = d.start + d.due + tol
        if t <= deadline {
            if countHeld { judgeDeadline(d, ok: true) }
            return
        }
        if kind == .machine {
            judgeDeadline(d, ok: false)
            reportDeadline(d, t - d.start, evidence: n, at: t, on: s, discharged: true, lateInbound: true)
        } else if s.lastClientTime > deadline {
            judgeDeadline(d, ok: false)
            reportDeadline(d, t - d.start, evidence: s.lastClientRecord, at: t, on: s, discharged: true, lateInbound: true)
        } else {
            s.overdue.append(Overdue(deadline: d, at: t, record: n))
        }
    }

    /// Counts a wait's verdict (the watchdog is counted once per socket, at its end).
    private func judgeDeadline(_ d: Deadline, ok: Bool) {
        if d.rule != .watchdog { judge(d.rule, ok: ok) }
    }

    private func reportDeadline(_ d: Deadline, _ elapsed: Duration, evidence: UInt64, at t: Moment, on s: Socket,
                                discharged: Bool, lateInbound: Bool = false) {
        if d.rule == .watchdog { s.watchdogBroken = true }
        let measured: String
        if discharged && !lateInbound {
            measured = "\(d.awaited) \(format(elapsed)) \(d.since)"
        } else if discharged {
            measured = "\(d.awaited) only \(format(elapsed)) \(d.since), and the client still used the socket"
        } else {
            measured = "socket still in use \(format(elapsed)) \(d.since) without \(d.awaited)"
        }
        var recs = [evidence]
        if d.startRecord != evidence { recs.append(d.startRecord) }
        report(d.rule, recs, at: t, on: s, measured: measured, required: requiredText(d), seconds: elapsed.seconds, explanation(d.rule))
    }

    private func requiredText(_ d: Deadline) -> String {
        let plus = "(+\(seconds(tol)) tolerance)"
        switch d.rule {
        case .handshake: return "registered within \(seconds(d.due)) \(plus), or the socket given up"
        case .heartbeat: return "every \(seconds(d.due)) \(d.fromInbound ? plus : "(±\(seconds(tol)))")"
        case .watchdog: return "the socket given up after \(seconds(d.due)) of inbound silence \(plus)"
        case .reRegister: return "register again \(seconds(d.due)) after invalidResume \(plus)"
        case .leaseRenewal: return "renewed every \(seconds(d.due)) \(plus)"
        case .leaseReissue: return "re-issued at registration \(plus)"
        case .timeout: return "the socket replaced at the \(seconds(d.due)) timeout \(plus)"
        default: return seconds(d.due)
        }
    }

    private func explanation(_ rule: CheckRule) -> String {
        switch rule {
        case .handshake: "A6: a socket not registered within 10 s must be given up (handshake timeout)."
        case .heartbeat: "A6: after registration the client sends its own heartbeat every 5 s."
        case .watchdog: "A6: the watchdog must fail a connection after 15 s without inbound traffic."
        case .reRegister: "A7: invalidResume makes the client re-register after 0.2 s without a token."
        case .leaseRenewal: "A11: an active lease is renewed every 20 s."
        case .leaseReissue: "A11: an active lease is re-issued after every registration."
        case .timeout: "A8: a timeout fails the call and reconnects the socket generation that sent it."
        default: rule.requirement
        }
    }

    // MARK: - Outbound

    private func clientSent(_ rec: InspectedRecord, on s: Socket) {
        guard s.isPhone else { return }
        let r = rec.record
        let n = rec.number
        let t = r.time
        clientActivity(s, at: t, record: n)
        let retry = s.nextIsRetry
        s.nextIsRetry = false
        if let h = s.pendingHeaders {
            s.pendingHeaders = nil
            checkHeaders(h, record: s.openRecord, at: s.openTime, s, linking: rec.type == SpecNumbers.linkRedeem)
        }
        guard r.kind == .frameText else {
            judge(.clientMessage, ok: false)
            report(.clientMessage, [n], at: t, on: s, measured: "a binary frame of \(r.payload.count) bytes from the phone",
                   required: "text frames only (binary frames carry the desktop's terminal output)",
                   "PROTOCOL.md §6: terminal input goes as the terminal.write RPC; the relay ignores a phone's binary frame.")
            return
        }
        guard let j = rec.json, case .object = j, let type = rec.type else {
            judge(.clientMessage, ok: false)
            let what = rec.json == nil ? "not JSON (\(rec.jsonError ?? "?"))" : "JSON without a string type"
            report(.clientMessage, [n], at: t, on: s, measured: what, required: "a JSON object with a string type",
                   "PROTOCOL.md §2: the relay answers invalidJson or drops the message.")
            return
        }
        let known = SpecNumbers.clientMessageTypes.contains(type)
        judge(.clientMessage, ok: known)
        if !known {
            report(.clientMessage, [n], at: t, on: s, measured: "type \"\(type)\"", required: "one of \(SpecNumbers.clientMessageTypes.sorted().joined(separator: ", "))",
                   "PROTOCOL.md §3: the relay answers error/unknownMessageType.")
        }
        let snake = CamelCaseGuard.violations(in: j)
        judge(.camelCase, ok: snake.isEmpty)
        if let first = snake.first {
            report(.camelCase, [n], at: t, on: s,
                   measured: "key \"\(first.key)\" at \(first.path)" + (snake.count > 1 ? " (and \(snake.count - 1) more)" : ""),
                   required: "camelCase keys only, at any depth",
                   "A8: the outgoing encoder must refuse a snake_case key; the relay answers invalidPayload and drops the message.")
        }
        guard !retry else { return }  // a retry of a message already judged
        if s.registeredAt == nil {
            let allowed = SpecNumbers.beforeRegistration.contains(type)
            judge(.registerFirst, ok: allowed)
            if !allowed {
                report(.registerFirst, [n], at: t, on: s, measured: "\(type) sent before the socket registered",
                       required: "register first; nothing else before registered/resumed",
                       "A6: after the upgrade the client sends register; other messages wait for the registration.")
            }
        }
        switch type {
        case "register": sentRegister(j, rec, s)
        case "heartbeat": sentHeartbeat(rec, s)
        case "rpc.request": sentRequest(j, rec, s)
        case "event" where rec.eventType == SpecNumbers.leaseEventType: sentLease(rec, s)
        default: break
        }
    }

    private func sentRegister(_ j: JSONValue, _ rec: InspectedRecord, _ s: Socket) {
        let n = rec.number
        let t = rec.record.time
        let p = j["payload"] ?? .object([:])
        let pr = pair(s)
        // A6: the 1.6 fields.
        var problems: [Problem] = []
        let why = "A6: register carries the device ID, device name, relayProtocolVersion 1.6 and the target desktop."
        func field(_ name: String, equals expected: String?, header: String) {
            guard let v = p[name]?.stringValue, !v.isEmpty else {
                problems.append(Problem("\(name) absent", "\(name) (a non-empty string)", why))
                return
            }
            if let expected, !same(v, expected) {
                problems.append(Problem("\(name) \"\(v)\" differs from \(header) \"\(expected)\"", "\(name) = \(header)", why))
            }
        }
        field("deviceId", equals: s.device, header: "X-Device-ID")
        if (p["deviceName"]?.stringValue ?? "").isEmpty { problems.append(Problem("deviceName absent", "deviceName (a non-empty string)", why)) }
        let version = p["relayProtocolVersion"]
        if version?.stringValue != SpecNumbers.relayProtocolVersion {
            problems.append(Problem("relayProtocolVersion \(version.map { $0.jsonText } ?? "absent")", "relayProtocolVersion \"\(SpecNumbers.relayProtocolVersion)\"", why))
        }
        field("targetDesktopDeviceId", equals: s.desktop, header: "X-Target-Desktop-Device-ID")
        if p["sessionId"] != nil && p["relaySessionId"] == nil {
            problems.append(Problem("the pre-1.6 member sessionId", "relaySessionId (protocol 1.6)", "A6/PROTOCOL.md §3: protocol 1.6 names the relay session relaySessionId."))
        }
        judge(.register, problems, records: [n], at: t, on: s)
        // A6: one successful registration per socket.
        judge(.registerOnce, ok: s.registeredAt == nil)
        if s.registeredAt != nil {
            report(.registerOnce, [n, s.registeredRecord], at: t, on: s, measured: "register on a socket registered at \(s.registeredAt ?? .zero)",
                   required: "one successful register per socket", "PROTOCOL.md §4: a second successful register makes the relay close the socket.")
        }
        let token = p["resumeToken"]?.stringValue
        let session = (p["relaySessionId"] ?? p["sessionId"])?.stringValue
        // A7: the re-register after invalidResume.
        var isReRegister = false
        if let pending = pr.pendingReRegister {
            isReRegister = true
            pr.pendingReRegister = nil
            var problems: [Problem] = []
            let why = explanation(.reRegister)
            if let d = s.reRegister {
                s.reRegister = nil
                let delay = t - d.start
                if delay < d.due - options.earlyTolerance {
                    problems.append(Problem("re-registered \(format(delay)) after invalidResume", "\(seconds(d.due)) later (not sooner than \(seconds(d.due - options.earlyTolerance)))", why, seconds: delay.seconds))
                } else if delay > d.due + tol {
                    problems.append(Problem("re-registered \(format(delay)) after invalidResume", requiredText(d), why, seconds: delay.seconds))
                }
            }
            if token != nil {
                problems.append(Problem("the re-register still carries the resume token", "register without a token after invalidResume", why))
            }
            judge(.reRegister, problems, records: [n, pending.record], at: t, on: s)
        }
        // A7: the third invalid resume ended the loop.
        if let stop = pr.loopStop {
            pr.loopStop = nil
            let within = t - stop.time < SpecNumbers.invalidResumeWindow
            judge(.invalidResumeLoop, ok: !within)
            if within {
                report(.invalidResumeLoop, [n, stop.record], at: t, on: s, measured: "register \(format(t - stop.time)) after the third invalid resume within \(seconds(SpecNumbers.invalidResumeWindow))",
                       required: "no register after it: the loop ends with invalidResumeLoop",
                       "A7: three invalid resumes within a rolling 30 s end the loop.")
            }
        }
        // A6/A7: the credentials of a resume.
        if token != nil || session != nil {
            var problems: [Problem] = []
            var judged = false
            let why = "A6/A7: a resume presents the relay session ID and resume token the relay issued last."
            if (token == nil) != (session == nil) {
                judged = true
                problems.append(Problem(token == nil ? "relaySessionId without resumeToken" : "resumeToken without relaySessionId", "both or neither", why))
            }
            if let token, let refused = pr.refused[token] {
                judged = true
                if !isReRegister {
                    problems.append(Problem("a resume token the relay refused (invalidResume at record \(refused))", "never a refused token", "A7: invalidResume forgets the token; presenting it again cannot resume."))
                }
            } else if let token, let issued = pr.issued {
                judged = true
                if token != issued.token || (session != nil && issued.session != nil && session != issued.session) {
                    problems.append(Problem("credentials other than those issued at record \(issued.record)", "the last relaySessionId and resumeToken issued for the pair", "A7: a stale client must not resume with an older token."))
                }
            }
            if judged { judge(.resumeCredentials, problems, records: [n], at: t, on: s) }
        }
        s.lastRegisterToken = token
        // A6: the handshake timer is re-armed by every register; a register past the deadline shows the
        // client did not give the socket up.
        if s.registeredAt == nil {
            if let d = s.handshake, t > d.start + d.due + tol {
                judgeDeadline(d, ok: false)
                reportDeadline(d, t - d.start, evidence: n, at: t, on: s, discharged: false)
            }
            s.handshake = Deadline(rule: .handshake, start: t, startRecord: n, due: SpecNumbers.handshakeTimeout,
                                   awaited: "registration", since: "after the last register", fromInbound: false)
        }
    }

    private func sentHeartbeat(_ rec: InspectedRecord, _ s: Socket) {
        guard s.registeredAt != nil else { return }
        let t = rec.record.time
        if let d = s.heartbeat { dischargeByClient(d, at: t, record: rec.number, on: s) }
        s.heartbeat = Deadline(rule: .heartbeat, start: t, startRecord: rec.number, due: SpecNumbers.heartbeatInterval,
                               awaited: "heartbeat", since: "after the previous heartbeat", fromInbound: false)
    }

    private func sentRequest(_ j: JSONValue, _ rec: InspectedRecord, _ s: Socket) {
        let n = rec.number
        let t = rec.record.time
        let p = j["payload"] ?? .object([:])
        let methodName = rec.method
        let method = methodName.flatMap { RpcCatalogue.method(named: $0) }
        judge(.knownMethod, ok: method != nil)
        if method == nil {
            report(.knownMethod, [n], at: t, on: s, measured: methodName.map { "method \"\($0)\"" } ?? "no method",
                   required: "one of the \(RpcCatalogue.methodCount) methods of RpcMethod",
                   "A8: the client rejects an unknown method before anything is sent.")
        }
        if let method, method.needsIdempotencyKey {
            let key = p["idempotencyKey"]?.stringValue ?? ""
            judge(.idempotencyKey, ok: !key.isEmpty)
            if key.isEmpty {
                report(.idempotencyKey, [n], at: t, on: s, measured: "\(method.name) without idempotencyKey",
                       required: "an idempotencyKey on each of the \(RpcCatalogue.idempotencyKeyedCount) mutations",
                       "A8: the client rejects a mutation without a key before anything is sent.")
            }
        }
        var traceId: String?
        let tp = (p["traceparent"] ?? j["traceparent"])?.stringValue
        if let tp {
            do {
                traceId = try TraceParent(parsing: tp).traceId
                judge(.traceparent, ok: true)
            } catch {
                judge(.traceparent, ok: false)
                report(.traceparent, [n], at: t, on: s, measured: "traceparent \"\(tp)\": \(error.message)",
                       required: "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>", "A8: every request carries a W3C traceparent.")
            }
        } else {
            judge(.traceparent, ok: false)
            report(.traceparent, [n], at: t, on: s, measured: "no traceparent", required: "a W3C traceparent on every rpc.request",
                   "A8: every request carries a W3C traceparent.")
        }
        guard let id = rec.rpcId, !id.isEmpty else {
            judge(.requestId, ok: false)
            report(.requestId, [n], at: t, on: s, measured: "no id", required: "a request id", "A8: pending calls are keyed by request ID.")
            return
        }
        if let old = s.requests[id] {
            judge(.requestId, ok: false)
            report(.requestId, [n, old.record], at: t, on: s, measured: "id \(id) still in flight since record \(old.record)",
                   required: "no second in-flight request with the same id", "A8: a second in-flight request with the same ID is rejected.")
            return
        }
        judge(.requestId, ok: true)
        let timeout = method.map {
            Deadline(rule: .timeout, start: t, startRecord: n, due: $0.timeout, awaited: "a response to \($0.name)",
                     since: "after the request", fromInbound: false)
        }
        s.requests[id] = Request(method: methodName, time: t, record: n, traceId: traceId, timeout: timeout)
    }

    private func sentLease(_ rec: InspectedRecord, _ s: Socket) {
        let n = rec.number
        let t = rec.record.time
        let inner = rec.eventPayload
        let app = inner?["appSessionId"]?.stringValue ?? ""
        let flag = inner?["active"]?.boolValue
        var problems: [Problem] = []
        let why = "A11: the lease is sent as chat:timeline-interest with appSessionId and an active flag."
        if app.isEmpty { problems.append(Problem("appSessionId absent", "appSessionId (a non-empty string)", why)) }
        if flag == nil { problems.append(Problem("active \(inner?["active"].map { $0.jsonText } ?? "absent")", "active (true or false)", why)) }
        judge(.leaseMessage, problems, records: [n], at: t, on: s)
        let active = flag ?? true
        if let d = s.reissue {
            s.reissue = nil
            if active { dischargeByClient(d, at: t, record: n, on: s) }
        }
        if let d = s.renewal {
            s.renewal = nil
            dischargeByClient(d, at: t, record: n, on: s)
        }
        let pr = pair(s)
        if active {
            pr.lease = inner?["sessionId"]?.stringValue ?? app
            if s.registeredAt != nil {
                s.renewal = Deadline(rule: .leaseRenewal, start: t, startRecord: n, due: SpecNumbers.leaseRenewal,
                                     awaited: "lease renewal", since: "after the last lease", fromInbound: false)
            }
        } else {
            pr.lease = nil
        }
    }

    // MARK: - Inbound

    private func inboundTraffic(_ s: Socket, at t: Moment, record n: UInt64) {
        guard s.registeredAt != nil else { return }
        if let d = s.watchdog { dischargeByInbound(d, at: t, record: n, on: s, countHeld: false) }
        s.watchdog = Deadline(rule: .watchdog, start: t, startRecord: n, due: SpecNumbers.watchdogSilence,
                              awaited: "inbound traffic", since: "after the last inbound traffic", fromInbound: true)
    }

    private func received(_ rec: InspectedRecord, on s: Socket) {
        guard s.isPhone else { return }
        let n = rec.number
        let t = rec.record.time
        inboundTraffic(s, at: t, record: n)
        guard rec.record.kind == .frameText, let j = rec.json, let type = rec.type else { return }
        func member(_ name: String) -> JSONValue? { j[name] ?? j["payload"]?[name] }
        switch type {
        case "registered", "resumed":
            guard s.registeredAt == nil else { return }
            if let d = s.handshake { dischargeByInbound(d, at: t, record: n, on: s) }
            s.handshake = nil
            s.registeredAt = t
            s.registeredRecord = n
            s.heartbeat = Deadline(rule: .heartbeat, start: t, startRecord: n, due: SpecNumbers.heartbeatInterval,
                                   awaited: "first heartbeat", since: "after registration", fromInbound: true)
            s.watchdog = Deadline(rule: .watchdog, start: t, startRecord: n, due: SpecNumbers.watchdogSilence,
                                  awaited: "inbound traffic", since: "after the last inbound traffic", fromInbound: true)
            let pr = pair(s)
            if type == "registered", let token = member("resumeToken")?.stringValue {
                pr.issued = ((member("relaySessionId") ?? member("sessionId"))?.stringValue, token, n)
            }
            if pr.lease != nil {
                s.reissue = Deadline(rule: .leaseReissue, start: t, startRecord: n, due: .zero, awaited: "lease re-issued",
                                     since: "after registration", fromInbound: true)
            }
        case "error":
            guard member("code")?.stringValue == "invalidResume", s.registeredAt == nil else { return }
            let pr = pair(s)
            s.handshake = nil
            if let token = s.lastRegisterToken {
                pr.refused[token] = n
                if pr.issued?.token == token { pr.issued = nil }
            }
            pr.recentInvalid.removeAll { t - $0 >= SpecNumbers.invalidResumeWindow }
            pr.recentInvalid.append(t)
            if pr.recentInvalid.count >= SpecNumbers.invalidResumeLoopCount {
                pr.loopStop = (t, n)
                pr.pendingReRegister = nil
                s.reRegister = nil
            } else {
                pr.pendingReRegister = (t, n)
                s.reRegister = Deadline(rule: .reRegister, start: t, startRecord: n, due: SpecNumbers.reRegisterDelay,
                                        awaited: "register", since: "after invalidResume", fromInbound: true)
            }
        case "rpc.response":
            guard let id = rec.rpcId, var req = s.requests[id] else { return }
            if let d = req.timeout {
                dischargeByInbound(d, at: t, record: n, on: s)
                req.timeout = nil
            }
            if let tp = member("traceparent")?.stringValue, let want = req.traceId {
                let got = try? TraceParent(parsing: tp).traceId
                judge(.responseTraceId, ok: got == want)
                if got != want {
                    report(.responseTraceId, [n, req.record], at: t, on: s, measured: got.map { "trace ID \($0)" } ?? "traceparent \"\(tp)\" not valid",
                           required: "the request's trace ID \(want)",
                           "A8: the client must reject a response whose trace ID does not match its request's.")
                }
            }
            let partial = member("isFinal")?.boolValue == false
            s.requests[id] = partial ? req : nil
        default:
            break
        }
    }

    // MARK: - The upgrade (A4)

    private func checkURL(_ url: String?, _ rec: InspectedRecord, _ s: Socket) {
        guard let url else { return }
        let parts = SocketURL(url)
        var problems: [Problem] = []
        if let scheme = parts.scheme {
            if scheme == "ws" && !parts.isLoopback || scheme != "ws" && scheme != "wss" {
                problems.append(Problem("URL \(url)", "a wss URL", "A4: only wss URLs are accepted (ws only on loopback, for development)."))
            }
        }
        if parts.path != SpecNumbers.deviceLinkPath {
            problems.append(Problem("path \(parts.path.isEmpty ? "/" : parts.path)", SpecNumbers.deviceLinkPath, "A3/A4: the socket is the region's \(SpecNumbers.deviceLinkPath)."))
        }
        judge(.url, problems, records: [rec.number], at: rec.record.time, on: s)
    }

    /// A4's headers; a link socket (docs/DEVICE_LINK.md: it sends `link.redeem` to learn its desktop)
    /// carries them without `X-Target-Desktop-Device-ID`.
    private func checkHeaders(_ h: UpgradeHeaders, record n: UInt64, at t: Moment, _ s: Socket, linking: Bool) {
        guard h.present else { return }
        var problems: [Problem] = []
        let why = "A4: the upgrade carries the app JWT as Bearer, X-Device-ID and X-Token-Binding with the device ID, X-Client-Type: mobile and X-Target-Desktop-Device-ID."
        let required = SpecNumbers.upgradeHeaders.filter { !linking || $0 != SpecNumbers.targetDesktopHeader }
        for name in required where h.value(name.lowercased()) == nil {
            problems.append(Problem("\(name) absent", "\(name) present", why))
        }
        if let auth = h.value("authorization") {
            let credential = auth.hasPrefix("Bearer ") ? auth.dropFirst(7).trimmingSpaces : ""
            if credential.isEmpty { problems.append(Problem("Authorization \"\(auth.prefix(12))...\" is not a bearer token", "Authorization: Bearer <app JWT>", why)) }
        }
        if let device = h.value("x-device-id"), let binding = h.value("x-token-binding"), !same(binding, device) {
            problems.append(Problem("X-Token-Binding \"\(binding)\" is not the device ID \"\(device)\"", "X-Token-Binding = X-Device-ID", why))
        }
        for name in ["x-device-id", "x-target-desktop-device-id"] {
            if let v = h.value(name), v.isEmpty { problems.append(Problem("\(h.spelling(name)) empty", "a non-empty value", why)) }
        }
        if let type = h.value("x-client-type"), type != SpecNumbers.phoneClientType {
            problems.append(Problem("X-Client-Type \"\(type)\"", "X-Client-Type: \(SpecNumbers.phoneClientType)", why))
        }
        if let v = h.value("sec-websocket-version"), v != SpecNumbers.webSocketVersion {
            problems.append(Problem("Sec-WebSocket-Version \(v)", "WebSocket version \(SpecNumbers.webSocketVersion)", "A4: the socket speaks WebSocket version 13."))
        }
        let expected = Set(SpecNumbers.upgradeHeaders.map { $0.lowercased() })
        for name in h.names where !expected.contains(name) && !SpecNumbers.transportHeaders.contains(name) {
            problems.append(Problem("an extra header \(h.spelling(name))", "exactly the five A4 headers", why))
        }
        for name in h.duplicates { problems.append(Problem("\(h.spelling(name)) sent more than once", "each header once", why)) }
        judge(.upgradeHeaders, problems, records: [n], at: t, on: s)
    }

    /// Whether two recorded values are the same value: equal (case-insensitive: IDs are UUIDs), or one is
    /// the redaction placeholder of the other under the trace's key (the token binding is a secret-named
    /// header, so it is recorded redacted while the device ID is not).
    private func same(_ a: String, _ b: String) -> Bool {
        if a.lowercased() == b.lowercased() { return true }
        guard let redactor else { return false }
        return redactor.placeholder(for: a) == b || redactor.placeholder(for: b) == a
            || redactor.placeholder(for: a.lowercased()) == b || redactor.placeholder(for: b.lowercased()) == a
    }
}

/// `6.000 s`.
func format(_ d: Duration) -> String {
    let ms = (Double(d.nanoseconds) / 1e6).rounded()
    let neg = ms < 0
    let a = Int64(abs(ms))
    let frac = String(a % 1000)
    return (neg ? "-" : "") + "\(a / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac) s"
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}

/// The upgrade request's headers from a `transportOpen` payload (`headers`, `headerOrder`), looked up
/// without regard to case.
struct UpgradeHeaders {
    /// Whether the record has a `headers` object at all.
    let present: Bool
    /// Lower-cased names in the order recorded.
    let names: [String]
    /// Names recorded more than once (lower-cased).
    let duplicates: [String]
    private let values: [String: String]
    private let spellings: [String: String]

    init(_ json: JSONValue?) {
        guard let object = json?["headers"]?.objectValue else {
            present = false
            names = []
            duplicates = []
            values = [:]
            spellings = [:]
            return
        }
        present = true
        var values: [String: String] = [:]
        var spellings: [String: String] = [:]
        var counts: [String: Int] = [:]
        let order = json?["headerOrder"]?.arrayValue?.compactMap(\.stringValue) ?? object.keys.sorted()
        var names: [String] = []
        for (name, value) in object.sorted(by: { $0.key < $1.key }) {
            let lower = name.lowercased()
            counts[lower, default: 0] += 1
            values[lower] = value.stringValue ?? value.jsonText
            spellings[lower] = name
        }
        var orderCounts: [String: Int] = [:]
        for name in order { orderCounts[name.lowercased(), default: 0] += 1 }
        for name in order + object.keys.sorted() where !names.contains(name.lowercased()) { names.append(name.lowercased()) }
        self.names = names
        duplicates = names.filter { max(counts[$0] ?? 0, orderCounts[$0] ?? 0) > 1 }
        self.values = values
        self.spellings = spellings
    }

    /// The value of a header (name lower-cased).
    func value(_ lower: String) -> String? { values[lower] }

    /// The name as recorded.
    func spelling(_ lower: String) -> String { spellings[lower] ?? lower }
}

/// The parts of a socket URL that A4 judges.
struct SocketURL {
    var scheme: String?
    var host = ""
    var path = ""

    init(_ text: String) {
        var rest = Substring(text)
        if let r = rest.range(of: "://") {
            scheme = rest[..<r.lowerBound].lowercased()
            rest = rest[r.upperBound...]
            let hostEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            var authority = rest[..<hostEnd]
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
                host = String(authority[authority.index(after: authority.startIndex)..<close])
            } else {
                host = String(authority.prefix { $0 != ":" })
            }
            rest = rest[hostEnd...]
        }
        path = String(rest.prefix { $0 != "?" && $0 != "#" })
    }

    /// 127.0.0.0/8, ::1 or localhost.
    var isLoopback: Bool {
        let h = host.lowercased()
        return h == "localhost" || h == "::1" || h.hasPrefix("127.")
    }
}
