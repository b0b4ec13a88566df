public import RelayProtocol

/// How a ``ReplayingRelay`` treats a client that departs from the recording.
public struct ReplayingRelayOptions: Sendable, Hashable {
    /// End a socket at its first divergence (close 1008 with the record number), instead of answering
    /// what can be answered and reporting the rest.
    public var strict: Bool
    /// Recorded delays are divided by this (2: twice as fast). Must be positive.
    public var speed: Double

    /// Options; lenient at recorded speed by default.
    public init(strict: Bool = false, speed: Double = 1) {
        self.strict = strict
        self.speed = speed > 0 ? speed : 1
    }
}

/// A live connection, as the host numbers them.
public struct ReplayConnection: Sendable, Hashable, CustomStringConvertible {
    /// The host's number.
    public var id: UInt64
    /// A connection number.
    public init(_ id: UInt64) { self.id = id }
    /// `c7`.
    public var description: String { "c\(id)" }
}

/// What happened to a ``ReplayingRelay``.
public enum ReplayingRelayInput: Sendable, Hashable {
    /// A client asks to upgrade (request target and headers, in order).
    case upgrade(ReplayConnection, target: String, headers: [HTTPField])
    /// A message from a client.
    case frame(ReplayConnection, WireFrame)
    /// A client's connection ended: its close frame's code (nil: none or empty) or the transport's end.
    case closed(ReplayConnection, code: Int?, reason: String)
    /// A time asked for with ``ReplayingRelayAction/wake(at:)`` came (or any time: early wakes do nothing).
    case wake
    /// The host stops (its time limit): whatever the recording still expected is reported.
    case stop

    /// A header field.
    public struct HTTPField: Sendable, Hashable {
        /// The name as sent.
        public var name: String
        /// The value.
        public var value: String
        /// A field.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }
}

/// What a ``ReplayingRelay`` asks its host to do.
public enum ReplayingRelayAction: Sendable, Hashable {
    /// Answer the upgrade with 101.
    case accept(ReplayConnection)
    /// Refuse the upgrade with `status` and `body`.
    case refuse(ReplayConnection, status: Int, body: String)
    /// Send a message.
    case send(ReplayConnection, WireFrame)
    /// Start the close handshake (`code` nil: an empty close frame).
    case close(ReplayConnection, code: Int?, reason: String)
    /// Drop the connection without a close handshake (the recording's socket failed there).
    case abort(ReplayConnection)
    /// Feed ``ReplayingRelayInput/wake`` at `at` (or soon after).
    case wake(at: Moment)
    /// A place where the live client departed from the recording.
    case finding(ReplayFinding)
    /// Every recorded socket has been served and has ended: the replay is over.
    case finished
}

/// A place where a live client departed from the recording it is replayed against.
public struct ReplayFinding: Sendable, Hashable, CustomStringConvertible {
    /// What kind of departure.
    public enum Kind: String, Sendable, Hashable {
        /// The client sent a frame the recording has no counterpart for (on this socket).
        case unexpected
        /// The client sent a frame of a recorded kind whose content differs from the recorded one.
        case mismatch
        /// The client closed (or the replay ended) without sending frames the recording holds.
        case missing
        /// The client opened more sockets than the recording holds.
        case extraSocket
        /// A recorded socket the client never opened.
        case unopened
        /// The upgrade differs from the recorded one (path, desktop, client type).
        case upgrade
        /// The client closed with another code than it did in the recording.
        case close
    }

    /// What kind of departure.
    public var kind: Kind
    /// The recorded socket's generation (nil for a socket the recording does not have).
    public var generation: UInt64?
    /// The recorded record it is about (the expected frame, or the socket's open).
    public var record: UInt64?
    /// When, on the replaying relay's clock.
    public var time: Moment
    /// One sentence.
    public var message: String
    /// The recorded frame or value, with volatile values removed (nil when none).
    public var expected: JSONValue?
    /// What the client sent, likewise.
    public var received: JSONValue?
    /// The paths where they differ.
    public var differences: [String]

    /// The finding as JSON (for `--format json`).
    public var json: JSONValue {
        var o: [String: JSONValue] = ["kind": .string(kind.rawValue), "timeNs": .int(time.nanoseconds), "time": .double(time.seconds),
                                      "message": .string(message), "differences": .array(differences.map { .string($0) })]
        if let generation { o["generation"] = .int(Int64(bitPattern: generation)) }
        if let record { o["record"] = .int(Int64(bitPattern: record)) }
        if let expected { o["expected"] = expected }
        if let received { o["received"] = received }
        return .object(o)
    }

    /// `g2 record #14 at 1.234s: mismatch: ...`.
    public var description: String {
        var s = generation.map { "g\($0) " } ?? ""
        if let record { s += "record #\(record) " }
        s += "at \(time): \(kind.rawValue): \(message)"
        for d in differences { s += "\n    \(d)" }
        return s
    }
}

/// The relay side of a recorded session, served to live clients: a sans-IO machine (the host owns the
/// sockets and the clock).
///
/// Each new client socket takes the next recorded socket. A recorded refusal is refused again with its
/// status. Client frames are matched to the recorded ones **by meaning** (``FrameMeaning``): a `register`
/// to the recorded `register`, an `rpc.request` by method and params, an `event` by type and payload, with
/// request IDs, trace context, device IDs, timestamps and `appSessionId` left out of the comparison; a
/// frame may match any recorded frame of its socket that is still unmatched (clients reorder calls).
/// Heartbeats and text pings are answered at once; periodic frames (heartbeats, lease renewals) may come
/// more or fewer times than recorded.
///
/// The relay's recorded frames go out when the client frame they answer has been matched: an
/// `rpc.response` after its request with the recorded latency, carrying the live request's `id` and
/// trace ID; every other relay frame (registration answers, errors, events, the relay's close) in
/// recorded order, after the client frame that preceded it in the recording, at its recorded offset from
/// that frame and from the registration (delays divided by `speed`). Session IDs and tokens come from the
/// recording, consistently (a redacted token is served as a stable 48-character stand-in, and the client
/// presenting it back matches the recording); the recorded device ID is replaced by the live one.
public struct ReplayingRelay: Sendable {
    /// The recording.
    public let session: RecordedSession
    /// The options.
    public let options: ReplayingRelayOptions

    /// How a recorded relay entry is sent.
    enum Trigger: Sendable, Hashable {
        /// An `rpc.response`: after the recorded request at client entry `index`.
        case response(to: Int)
        /// After the client entry before it (nil: after the upgrade), in recorded order.
        case after(Int?)
        /// Not served: the live relay answers it itself (a pong to a heartbeat or ping).
        case skipped
    }

    /// A recorded socket, prepared.
    struct Plan: Sendable {
        var socket: RecordedSession.Socket
        /// Indices into `socket.entries` of the client's entries and their meanings.
        var client: [Int]
        var meanings: [Int: FrameMeaning]
        /// Each relay entry's trigger, by entry index.
        var triggers: [Int: Trigger]
        /// Indices of relay entries in recorded order (all of them).
        var relay: [Int]
        /// The recorded registration answer's time (the first `registered` or `resumed`).
        var registration: Moment?
    }

    /// A live socket being served.
    struct Live: Sendable {
        var plan: Int
        var openedAt: Moment
        var matched: [Int: Moment] = [:]
        var served: Set<Int> = []
        var nextOrdered = 0
        var registeredAt: Moment?
        var substitutions: [String: String] = [:]
        var deviceIds: Set<String> = []
        var repeats: Set<FrameMeaning> = []
        var closing = false
        var diverged = false
        var done = false
        var pendingWake: Moment?
        /// Relay entries recorded before this entry index go out now, whatever their delay: the client has
        /// already sent what came after them in the recording, so it must see them first.
        var flushBefore = 0
    }

    /// The JSON-RPC error code of the answer to a request the recording has no answer for (lenient
    /// mode): -32603, "internal error", with a message saying so.
    public static let noRecordedAnswer: Int64 = -32603

    private var plans: [Plan]
    private var live: [ReplayConnection: Live] = [:]
    private var nextPlan = 0
    private var finishedAnnounced = false
    /// Stand-ins served for redacted values, and back.
    private var standIns: [String: String] = [:]
    private var reverse: [String: String] = [:]
    /// Client frames matched so far, relay frames served, findings reported.
    public private(set) var matchedFrames = 0
    /// Relay frames served so far.
    public private(set) var servedFrames = 0
    /// Everything reported so far.
    public private(set) var findings: [ReplayFinding] = []

    /// A replaying relay for `session`.
    public init(session: RecordedSession, options: ReplayingRelayOptions = ReplayingRelayOptions()) {
        self.session = session
        self.options = options
        plans = session.sockets.map(Self.plan)
    }

    /// How many recorded sockets there are.
    public var recordedSockets: Int { plans.count }
    /// How many live sockets took a recorded one.
    public var servedSockets: Int { nextPlan }
    /// Whether every recorded socket was served and has ended.
    public var isFinished: Bool { nextPlan == plans.count && live.values.allSatisfy(\.done) }

    static func plan(_ socket: RecordedSession.Socket) -> Plan {
        var client: [Int] = [], relay: [Int] = []
        var meanings: [Int: FrameMeaning] = [:], triggers: [Int: Trigger] = [:]
        var requestById: [String: Int] = [:]
        var lastClient: Int?
        var lastClientKind: String?
        var registration: Moment?
        let devices: Set<String> = socket.deviceId.map { [$0, $0.lowercased()] } ?? []
        for (i, e) in socket.entries.enumerated() {
            switch e.side {
            case .client:
                client.append(i)
                if case .frame(let f) = e.event {
                    let m = FrameMeaning(f, deviceIds: devices)
                    meanings[i] = m
                    if m.kind.hasPrefix("rpc.request"), case .text(let t) = f, let j = try? JSONValue(parsing: t),
                       let id = (j["payload"]?["id"] ?? j["id"])?.stringValue {
                        requestById[id] = i
                    }
                    if !m.isPeriodic { lastClient = i }
                    lastClientKind = m.kind
                } else {
                    lastClientKind = nil
                }
            case .relay:
                relay.append(i)
                var trigger = Trigger.after(lastClient)
                if case .frame(.text(let t)) = e.event, let j = try? JSONValue(parsing: t) {
                    let type = j["type"]?.stringValue
                    if type == "rpc.response", let id = (j["payload"]?["id"] ?? j["id"])?.stringValue, let req = requestById[id] {
                        trigger = .response(to: req)
                    } else if type == "pong", lastClientKind == "heartbeat" || lastClientKind == "ping" {
                        trigger = .skipped
                    } else if (type == "registered" || type == "resumed"), registration == nil {
                        registration = e.time
                    }
                }
                triggers[i] = trigger
            }
        }
        return Plan(socket: socket, client: client, meanings: meanings, triggers: triggers, relay: relay, registration: registration)
    }

    /// Handles one input at `now` (the host's monotonic time) and returns what to do.
    public mutating func handle(_ input: ReplayingRelayInput, at now: Moment) -> [ReplayingRelayAction] {
        var out: [ReplayingRelayAction] = []
        switch input {
        case .upgrade(let c, let target, let headers):
            upgrade(c, target: target, headers: headers, now: now, &out)
        case .frame(let c, let frame):
            clientFrame(c, frame, now: now, &out)
        case .closed(let c, let code, let reason):
            clientClosed(c, code: code, reason: reason, now: now, &out)
        case .wake:
            for c in live.keys.sorted(by: { $0.id < $1.id }) { pump(c, now: now, &out) }
        case .stop:
            stop(now: now, &out)
        }
        if isFinished && !finishedAnnounced {
            finishedAnnounced = true
            out.append(.finished)
        }
        return out
    }

    // MARK: Upgrades

    private mutating func upgrade(_ c: ReplayConnection, target: String, headers: [ReplayingRelayInput.HTTPField], now: Moment,
                                  _ out: inout [ReplayingRelayAction]) {
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
        guard nextPlan < plans.count else {
            report(.extraSocket, nil, nil, now, "the client opened socket \(live.count + 1); the recording has \(plans.count)", &out)
            out.append(.refuse(c, status: 503, body: "relaytrace replay: the recording has no more sockets (it holds \(plans.count))"))
            return
        }
        let p = nextPlan
        nextPlan += 1
        let socket = plans[p].socket
        var l = Live(plan: p, openedAt: now)
        if let recorded = socket.deviceId {
            let liveDevice = header("X-Device-ID") ?? recorded
            for r in [recorded, recorded.lowercased(), recorded.uppercased()] where r != liveDevice { l.substitutions[r] = liveDevice }
            l.deviceIds = [recorded, recorded.lowercased(), liveDevice, liveDevice.lowercased()]
        }
        let path = { (t: String) in t.split(separator: "?", maxSplits: 1).first.map(String.init) ?? t }
        let recordedPath = socket.target.hasPrefix("/") ? path(socket.target) : path(Self.pathOfURL(socket.target))
        var differences: [String] = []
        if path(target) != recordedPath { differences.append("path: expected \(recordedPath), got \(path(target))") }
        if let d = socket.desktopId, header("X-Target-Desktop-Device-ID") != d {
            differences.append("X-Target-Desktop-Device-ID: expected \(d), got \(header("X-Target-Desktop-Device-ID") ?? "none")")
        }
        if let t = socket.clientType, header("X-Client-Type") != t {
            differences.append("X-Client-Type: expected \(t), got \(header("X-Client-Type") ?? "none")")
        }
        if !differences.isEmpty {
            report(.upgrade, socket.generation, socket.openRecord, now, "the upgrade differs from the recorded one", &out, differences: differences)
            if options.strict {
                l.done = true
                live[c] = l
                out.append(.refuse(c, status: 400, body: "relaytrace replay: the upgrade differs from record #\(socket.openRecord): \(differences.joined(separator: "; "))"))
                return
            }
        }
        if let refusal = socket.refusal {
            l.done = true
            live[c] = l
            out.append(.refuse(c, status: refusal.status, body: refusal.reason))
            return
        }
        live[c] = l
        out.append(.accept(c))
        pump(c, now: now, &out)
    }

    /// The path of `url` (`wss://host/ws/device-link?x` -> `/ws/device-link?x`); `url` itself when it has no scheme.
    public static func pathOfURL(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }

    // MARK: Client frames

    private mutating func clientFrame(_ c: ReplayConnection, _ frame: WireFrame, now: Moment, _ out: inout [ReplayingRelayAction]) {
        guard var l = live[c], !l.done else { return }
        let plan = plans[l.plan]
        let meaning = FrameMeaning(frame, deviceIds: l.deviceIds, reverse: reverse)
        let answersItself = meaning.kind == "heartbeat" || meaning.kind == "ping"
        defer {
            // The live pong, after whatever the recording sent before this frame (see `flush`).
            if answersItself, live[c]?.closing == false { out.append(.send(c, .text(#"{"type":"pong"}"#))) }
        }
        let candidates = plan.client.filter { l.matched[$0] == nil && plan.meanings[$0]?.kind == meaning.kind }
        if let exact = candidates.first(where: { plan.meanings[$0] == meaning }) {
            match(&l, exact, frame, now: now)
        } else if let first = candidates.first, !meaning.isPeriodic {
            let expected = plan.meanings[first]!.content
            let recorded = plan.socket.entries[first]
            report(.mismatch, plan.socket.generation, recorded.record, now,
                   "the client's \(meaning.kind) differs from the recorded one (recorded at \(recorded.time))", &out,
                   expected: expected, received: meaning.content, differences: JSONDiff.differences(expected, meaning.content))
            if options.strict {
                live[c] = l
                endStrictly(c, record: recorded.record, now: now, &out)
                return
            }
            match(&l, first, frame, now: now)
        } else if meaning.isPeriodic {
            // One more (or one fewer) renewal than recorded is the client's timing, not a departure;
            // a periodic frame whose content changed is reported.
            if let first = candidates.first {
                match(&l, first, frame, now: now)
                let expected = plan.meanings[first]!.content
                if expected != meaning.content && meaning.kind != "heartbeat" && meaning.kind != "ping" {
                    report(.mismatch, plan.socket.generation, plan.socket.entries[first].record, now,
                           "the client's \(meaning.kind) differs from the recorded one", &out,
                           expected: expected, received: meaning.content, differences: JSONDiff.differences(expected, meaning.content))
                }
            } else if !l.repeats.contains(meaning) && !plan.meanings.values.contains(meaning) && meaning.kind != "heartbeat" && meaning.kind != "ping" {
                report(.unexpected, plan.socket.generation, nil, now, "the client sent a \(meaning.kind) the recording never holds on this socket", &out,
                       received: meaning.content)
            }
            l.repeats.insert(meaning)
        } else {
            // Name the frame the recording expected next on this socket, when there is one.
            let next = plan.client.first { i in l.matched[i] == nil && plan.meanings[i].map { !$0.isPeriodic } == true }
            let nextRecord = next.map { plan.socket.entries[$0].record }
            let expectation = next.map { "; the recording's next client frame here is record #\(plan.socket.entries[$0].record), \(plan.meanings[$0]!.kind)" }
                ?? "; the recording has no more client frames on this socket"
            report(.unexpected, plan.socket.generation, nextRecord, now,
                   "the client sent \(meaning.kind), which the recording does not hold on this socket" + expectation, &out,
                   expected: next.map { plan.meanings[$0]!.content }, received: meaning.content)
            if options.strict {
                live[c] = l
                endStrictly(c, record: nextRecord, now: now, &out)
                return
            }
            // A request with no recorded answer gets an explicit error rather than silence.
            if meaning.kind.hasPrefix("rpc.request"), case .text(let t) = frame, let j = try? JSONValue(parsing: t) {
                let p = j["payload"] ?? j
                var payload: [String: JSONValue] = [
                    "id": p["id"] ?? .null, "isFinal": .bool(true),
                    "error": ["code": .int(Self.noRecordedAnswer),
                              "message": .string("relaytrace replay: the recording has no answer for \(meaning.kind.dropFirst("rpc.request ".count))")],
                ]
                if let tp = p["traceparent"] { payload["traceparent"] = tp }
                out.append(.send(c, .text(JSONValue.object(["type": "rpc.response", "payload": .object(payload)]).jsonText)))
            }
        }
        live[c] = l
        pump(c, now: now, &out)
    }

    private mutating func match(_ l: inout Live, _ index: Int, _ frame: WireFrame, now: Moment) {
        l.matched[index] = now
        matchedFrames += 1
        let plan = plans[l.plan]
        defer { l.flushBefore = max(l.flushBefore, index) }
        // The live request's id and trace ID stand in for the recorded ones in what the relay sends back.
        guard case .frame(.text(let recordedText)) = plan.socket.entries[index].event, case .text(let liveText) = frame,
              let recorded = try? JSONValue(parsing: recordedText), let current = try? JSONValue(parsing: liveText),
              recorded["type"]?.stringValue == "rpc.request" else { return }
        let rp = recorded["payload"] ?? recorded, lp = current["payload"] ?? current
        if let a = rp["id"]?.stringValue, let b = lp["id"]?.stringValue, a != b { l.substitutions[a] = b }
        if let a = rp["traceparent"]?.stringValue.flatMap(Self.traceID), let b = lp["traceparent"]?.stringValue.flatMap(Self.traceID), a != b {
            l.substitutions[a] = b
        }
    }

    /// The trace ID of a W3C traceparent (`00-<32 hex>-<16 hex>-<2 hex>`).
    static func traceID(_ traceparent: String) -> String? {
        let parts = traceparent.split(separator: "-")
        return parts.count == 4 && parts[1].count == 32 ? String(parts[1]) : nil
    }

    private mutating func endStrictly(_ c: ReplayConnection, record: UInt64?, now: Moment, _ out: inout [ReplayingRelayAction]) {
        guard var l = live[c], !l.closing else { return }
        l.closing = true
        l.diverged = true
        live[c] = l
        let reason = record.map { "relaytrace replay: diverged at record #\($0)" } ?? "relaytrace replay: diverged"
        out.append(.close(c, code: 1008, reason: reason))
    }

    private mutating func clientClosed(_ c: ReplayConnection, code: Int?, reason: String, now: Moment, _ out: inout [ReplayingRelayAction]) {
        guard var l = live[c], !l.done else { return }
        let plan = plans[l.plan]
        if !l.closing {
            // The client closed: the recorded client close is expected; what it did not send is missing.
            if let close = plan.client.first(where: { i in
                if case .close = plan.socket.entries[i].event { return l.matched[i] == nil }
                return false
            }) {
                l.matched[close] = now
                if case .close(let recordedCode, _, let clean) = plan.socket.entries[close].event, clean, recordedCode != code {
                    report(.close, plan.socket.generation, plan.socket.entries[close].record, now,
                           "the client closed with \(code.map(String.init) ?? "no code"); it closed with \(recordedCode.map(String.init) ?? "no code") in the recording", &out)
                }
            }
        }
        l.done = true
        live[c] = l
        if !l.diverged { reportMissing(l, now: now, &out) }
    }

    private mutating func reportMissing(_ l: Live, now: Moment, _ out: inout [ReplayingRelayAction]) {
        let plan = plans[l.plan]
        let missing = plan.client.filter { i in
            guard l.matched[i] == nil else { return false }
            if let m = plan.meanings[i] { return !m.isPeriodic }
            return false
        }
        guard let first = missing.first else { return }
        let m = plan.meanings[first]!
        report(.missing, plan.socket.generation, plan.socket.entries[first].record, now,
               "the socket ended without \(missing.count) frame\(missing.count == 1 ? "" : "s") the client sent in the recording; the first: \(m.kind)", &out,
               expected: m.content)
    }

    private mutating func stop(now: Moment, _ out: inout [ReplayingRelayAction]) {
        for c in live.keys.sorted(by: { $0.id < $1.id }) where live[c]?.done == false {
            var l = live[c]!
            l.done = true
            live[c] = l
            reportMissing(l, now: now, &out)
        }
        while nextPlan < plans.count {
            let s = plans[nextPlan].socket
            report(.unopened, s.generation, s.openRecord, now, "the client never opened the recording's socket g\(s.generation)", &out)
            nextPlan += 1
        }
    }

    // MARK: The relay's frames

    /// Sends what is due on `c`, and asks for a wake at the next due time.
    private mutating func pump(_ c: ReplayConnection, now: Moment, _ out: inout [ReplayingRelayAction]) {
        guard var l = live[c], !l.done, !l.closing else { return }
        let plan = plans[l.plan]
        let speed = options.speed
        func later(_ base: Moment, _ recordedFrom: Moment, _ recordedTo: Moment) -> Moment {
            let delay = Double(max(0, (recordedTo - recordedFrom).nanoseconds)) / speed
            return Moment(nanoseconds: base.nanoseconds + Int64(delay))
        }
        var nextWake: Moment?
        func wake(_ t: Moment) { nextWake = min(nextWake ?? t, t) }
        // Responses: each after its own request.
        for i in plan.relay where !l.served.contains(i) {
            guard case .response(let req)? = plan.triggers[i] else { continue }
            guard let at = l.matched[req] else { continue }
            let due = later(at, plan.socket.entries[req].time, plan.socket.entries[i].time)
            if due <= now { serve(&l, c, i, now: now, &out) } else { wake(due) }
        }
        // Everything else, in recorded order.
        while l.nextOrdered < plan.relay.count {
            let i = plan.relay[l.nextOrdered]
            let trigger = plan.triggers[i] ?? .after(nil)
            if case .skipped = trigger { l.nextOrdered += 1; continue }
            if case .response = trigger { l.nextOrdered += 1; continue }
            guard case .after(let anchor) = trigger else { break }
            let entry = plan.socket.entries[i]
            var due = later(l.openedAt, plan.socket.openTime, entry.time)
            if let anchor {
                guard let at = l.matched[anchor] else { break }  // waits for the client frame before it
                due = max(due, later(at, plan.socket.entries[anchor].time, entry.time))
            }
            if let reg = plan.registration, let liveReg = l.registeredAt, entry.time > reg {
                due = max(due, later(liveReg, reg, entry.time))
            }
            if i < l.flushBefore { due = now }
            if due > now { wake(due); break }
            l.nextOrdered += 1
            serve(&l, c, i, now: now, &out)
            if l.closing || l.done { break }
        }
        if let nextWake, l.pendingWake.map({ $0 > nextWake || $0 <= now }) ?? true {
            l.pendingWake = nextWake
            out.append(.wake(at: nextWake))
        }
        live[c] = l
    }

    private mutating func serve(_ l: inout Live, _ c: ReplayConnection, _ i: Int, now: Moment, _ out: inout [ReplayingRelayAction]) {
        l.served.insert(i)
        let entry = plans[l.plan].socket.entries[i]
        switch entry.event {
        case .frame(.text(let text)):
            let sent = rewrite(text, l.substitutions)
            if l.registeredAt == nil, let j = try? JSONValue(parsing: text), ["registered", "resumed"].contains(j["type"]?.stringValue ?? "") {
                l.registeredAt = now
            }
            servedFrames += 1
            out.append(.send(c, .text(sent)))
        case .frame(.binary(let bytes)):
            servedFrames += 1
            out.append(.send(c, .binary(bytes)))
        case .close(let code, let reason, let clean):
            l.closing = true
            out.append(clean ? .close(c, code: code, reason: reason) : .abort(c))
        case .failed:
            l.closing = true
            out.append(.abort(c))
        }
    }

    /// `text` with recorded values replaced by live ones: request IDs, trace IDs, the device ID, and
    /// redacted placeholders by stable stand-ins. Unchanged bytes when nothing is replaced.
    private mutating func rewrite(_ text: String, _ substitutions: [String: String]) -> String {
        guard let json = try? JSONValue(parsing: text) else { return text }
        var changed = false
        func walk(_ v: JSONValue) -> JSONValue {
            switch v {
            case .object(let o):
                var out: [String: JSONValue] = [:]
                for (k, x) in o { out[k] = walk(x) }
                return .object(out)
            case .array(let a):
                return .array(a.map(walk))
            case .string(let s):
                if let r = substitutions[s] { changed = true; return .string(r) }
                if let t = Self.traceID(s), let r = substitutions[t] {
                    changed = true
                    return .string(s.replacingFirst(t, with: r))
                }
                if s.hasPrefix("rt:redacted:") {
                    changed = true
                    return .string(standIn(for: s))
                }
                return v
            default:
                return v
            }
        }
        let result = walk(json)
        return changed ? result.jsonText : text
    }

    /// A stable 48-character `[A-Za-z0-9]` value for a redacted placeholder (the relay's token shape),
    /// remembered both ways so the client presenting it back matches the recording.
    private mutating func standIn(for placeholder: String) -> String {
        if let s = standIns[placeholder] { return s }
        var seed: UInt64 = 1469598103934665603
        for b in placeholder.utf8 { seed = (seed ^ UInt64(b)) &* 1099511628211 }
        var rng = SeededRandom(seed: seed)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let value = String(decoding: (0..<48).map { _ in alphabet[Int(rng.next(upperBound: UInt64(alphabet.count)))] }, as: UTF8.self)
        standIns[placeholder] = value
        reverse[value] = placeholder
        return value
    }

    private mutating func report(_ kind: ReplayFinding.Kind, _ generation: UInt64?, _ record: UInt64?, _ now: Moment, _ message: String,
                                 _ out: inout [ReplayingRelayAction], expected: JSONValue? = nil, received: JSONValue? = nil,
                                 differences: [String] = []) {
        let f = ReplayFinding(kind: kind, generation: generation, record: record, time: now, message: message, expected: expected,
                              received: received, differences: differences)
        findings.append(f)
        out.append(.finding(f))
    }
}

extension String {
    /// The string with the first occurrence of `target` replaced.
    func replacingFirst(_ target: String, with replacement: String) -> String {
        let u = Array(utf8), t = Array(target.utf8)
        guard !t.isEmpty, u.count >= t.count else { return self }
        for i in 0...(u.count - t.count) where u[i..<(i + t.count)].elementsEqual(t) {
            return String(decoding: u[..<i], as: UTF8.self) + replacement + String(decoding: u[(i + t.count)...], as: UTF8.self)
        }
        return self
    }
}
