public import RelayProtocol
import Trace

/// One thing drawn on a timeline lane.
public struct TimelineMark: Sendable, Hashable {
    /// What it is.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// `transportOpen`.
        case open
        /// `transportOpened`.
        case opened
        /// `register` sent.
        case register
        /// `registered` / `resumed` received.
        case registered
        /// A heartbeat (or ping/pong).
        case heartbeat
        /// An RPC from request to response (`end`).
        case rpc
        /// An RPC answered with an error.
        case rpcError
        /// An RPC never answered: its span ends where it failed (the client's `callCompleted` or its
        /// timeout; in a wire trace its socket's end), or at the end of the trace while still pending.
        case rpcUnanswered
        /// Any other frame.
        case frame
        /// The socket closed.
        case close
        /// The socket failed.
        case fail
        /// A lease renewal (active interest).
        case leaseRenew
        /// A lease release (inactive interest).
        case leaseRelease
        /// A recovery epoch: a band from its opening to its end (the desktop answered or was shown
        /// offline, the next epoch, its deadline, or the end of the trace).
        case epoch
        /// A timer, from armed to its deadline (or to when it fired or was cancelled).
        case timer
        /// A watch-channel frame (phone <-> watch).
        case watchFrame
        /// A watch-channel launch, reachability change or other input.
        case watchEvent

        /// The ASCII glyph; higher `priority` wins a shared column.
        var glyph: Character {
            switch self {
            case .open: "o"
            case .opened: "O"
            case .register: "r"
            case .registered: "R"
            case .heartbeat: "."
            case .rpc: "="
            case .rpcError: "!"
            case .rpcUnanswered: "?"
            case .frame: "-"
            case .close: "x"
            case .fail: "X"
            case .leaseRenew: "L"
            case .leaseRelease: "l"
            case .epoch: "E"
            case .timer: "t"
            case .watchFrame: "-"
            case .watchEvent: "w"
            }
        }

        /// Which mark wins when several share a pixel column (higher wins).
        public var priority: Int {
            switch self {
            case .frame, .watchFrame: 0
            case .heartbeat: 1
            case .rpc: 2
            case .timer, .watchEvent: 3
            case .open, .opened: 4
            case .register: 5
            case .registered, .leaseRenew, .leaseRelease, .epoch: 6
            case .rpcUnanswered, .rpcError: 7
            case .close, .fail: 8
            }
        }
    }

    /// What it is.
    public var kind: Kind
    /// When it starts.
    public var time: Moment
    /// When a span ends.
    public var end: Moment?
    /// The record it comes from.
    public var record: UInt64
    /// The hover text: the record's summary.
    public var label: String
}

/// A lane: one generation, the leases, the recovery epochs, the timers, or one side of the watch channel.
public struct TimelineLane: Sendable, Hashable {
    /// `g3`, `leases`, `recovery`, `timers`, `watch`.
    public var name: String
    /// The marks, in record order.
    public var marks: [TimelineMark] = []
    /// Marks not kept (over `Timeline.maxMarksPerLane`).
    public var omitted = 0
}

/// A problem the timeline found.
public struct TimelineCheck: Sendable, Hashable {
    /// Which rule: `leaseLate`, `leaseExpired`, `twoLiveGenerations`, `registrationIncomplete`, `timerNotArmed`.
    public var rule: String
    /// When.
    public var time: Moment
    /// The record it is about.
    public var record: UInt64?
    /// What happened.
    public var message: String
}

/// The timeline model of `relaytrace timeline` and `relaytrace view`: lanes per generation (registration,
/// heartbeats and WebSocket pings, RPC spans, close reason), a lease lane (each renewal a band until the
/// next renewal, the release or expiry), a recovery lane (epochs as bands), a timer lane (each timer a
/// band from armed to fired, cancelled or its deadline), a `watch` lane for watch-channel records, and the
/// derived checks. Built one record at a time; each lane keeps at most `maxMarksPerLane` marks.
public struct Timeline: Sendable {
    /// The most marks a lane keeps (the rest are counted in `omitted`).
    public static let maxMarksPerLane = 200_000
    /// The lanes: generations in order of appearance, then `leases`, then `recovery`.
    public private(set) var lanes: [TimelineLane] = []
    /// The derived checks, in time order after `finish`.
    public private(set) var checks: [TimelineCheck] = []
    /// First record time.
    public private(set) var start: Moment?
    /// Last record time.
    public private(set) var end: Moment?

    private var laneIndex: [String: Int] = [:]
    private var calls = RpcCallTracker()
    private var openRPCs: [String: (lane: Int, mark: Int)] = [:]
    private var live: [UInt64: Moment] = [:]
    private var registration: [UInt64: (sent: Moment, record: UInt64)] = [:]
    private var lastRenewal: [String: Moment] = [:]
    private var armed: Set<String> = []
    private var seenArm = false
    private var openEpoch: (lane: Int, mark: Int)?
    private var reportedPairs = Set<[UInt64]>()
    private var openTimers: [String: (lane: Int, mark: Int)] = [:]
    private var openLeases: [String: (lane: Int, mark: Int)] = [:]
    /// Whether marks keep their record's summary as `label` (the viewer fetches labels on demand and
    /// leaves them out to keep memory down).
    public let keepsLabels: Bool

    /// An empty timeline; `labels: false` leaves every mark's `label` empty.
    public init(labels: Bool = true) { keepsLabels = labels }

    private mutating func lane(_ name: String) -> Int {
        if let i = laneIndex[name] { return i }
        lanes.append(TimelineLane(name: name))
        laneIndex[name] = lanes.count - 1
        return lanes.count - 1
    }

    @discardableResult
    private mutating func mark(_ laneName: String, _ kind: TimelineMark.Kind, _ rec: InspectedRecord, end: Moment? = nil) -> Int? {
        let i = lane(laneName)
        guard lanes[i].marks.count < Self.maxMarksPerLane else {
            lanes[i].omitted += 1
            return nil
        }
        lanes[i].marks.append(TimelineMark(kind: kind, time: rec.record.time, end: end, record: rec.number, label: keepsLabels ? rec.summary : ""))
        return lanes[i].marks.count - 1
    }

    private mutating func check(_ rule: String, _ time: Moment, _ record: UInt64?, _ message: String) {
        checks.append(TimelineCheck(rule: rule, time: time, record: record, message: message))
    }

    /// Adds one record.
    public mutating func add(_ rec: InspectedRecord) {
        let r = rec.record
        start = min(start ?? r.time, r.time)
        end = max(end ?? r.time, r.time)
        var endedByThis = false
        for event in calls.add(rec) {
            switch event {
            case .started(let call):
                if let g = call.generation, r.channel == .relay, let m = mark("g\(g)", .rpcUnanswered, rec) { openRPCs[call.requestId] = (lane("g\(g)"), m) }
            case .ended(let call):
                endedByThis = endedByThis || call.endRecord == rec.number && rec.type == "rpc.response"
                finishSpan(call, rec.summary)
            }
        }
        if let g = r.generation, r.channel == .relay {
            let name = "g\(g)"
            switch r.kind {
            case .transportOpen: mark(name, .open, rec)
            case .transportOpened:
                mark(name, .opened, rec)
                for (other, since) in live where other != g && !reportedPairs.contains([other, g]) {
                    reportedPairs.insert([other, g])
                    check("twoLiveGenerations", r.time, rec.number, "generation \(g) opened while generation \(other) (live since \(since)) was still open")
                }
                live[g] = r.time
            case .transportClosed, .transportFailed:
                mark(name, r.kind == .transportFailed ? .fail : .close, rec)
                live[g] = nil
                if let reg = registration.removeValue(forKey: g) {
                    check("registrationIncomplete", reg.sent, reg.record, "generation \(g) sent register at \(reg.sent) but ended at \(r.time) without registered/resumed")
                }
            case .frameText:
                switch rec.type {
                case "register":
                    mark(name, .register, rec)
                    if r.direction == .outbound, registration[g] == nil { registration[g] = (r.time, rec.number) }
                case "registered", "resumed":
                    mark(name, .registered, rec)
                    registration[g] = nil
                case "heartbeat", "ping", "pong":
                    mark(name, .heartbeat, rec)
                case "rpc.request":
                    if rec.rpcId == nil { mark(name, .frame, rec) }  // with an id: its span, made above
                case "rpc.response":
                    if !endedByThis { mark(name, .frame, rec) }  // a final response is drawn as its request's span
                default:
                    mark(name, .frame, rec)
                }
                if rec.eventType == "chat:timeline-interest", r.direction == .outbound, let p = rec.eventPayload {
                    lease(rec, p)
                }
            case .frameBinary:
                mark(name, .frame, rec)
            case .ping, .pong:
                // Wire traces record WebSocket control frames as their own kinds.
                mark(name, .heartbeat, rec)
            default: break
            }
        }
        if r.channel == .watch {
            switch r.kind {
            case .frameText, .frameBinary: mark("watch", .watchFrame, rec)
            case .input, .action, .marker: mark("watch", .watchEvent, rec)
            default: break
            }
        }
        switch r.kind {
        case .timerFired:
            if let j = rec.json {
                if seenArm && !armed.contains(j.jsonText) {
                    check("timerNotArmed", r.time, rec.number, "timer \(j.jsonText) fired but was not armed (or was cancelled or already fired)")
                }
                armed.remove(j.jsonText)
                endTimer(j.jsonText, at: r.time)
                if !seenArm || r.channel == .watch { mark("timers", .timer, rec) }
            }
        case .action:
            guard let name = rec.inputOrActionName else { break }
            if name == "armTimer", let t = rec.json?["timer"] {
                seenArm = true
                armed.insert(t.jsonText)
                endTimer(t.jsonText, at: r.time)
                let deadline = rec.json?["deadline"]?.intValue.map { Moment(nanoseconds: $0) }
                if let m = mark("timers", .timer, rec, end: deadline ?? r.time) { openTimers[t.jsonText] = (lane("timers"), m) }
            } else if name == "cancelTimer", let t = rec.json?["timer"] {
                armed.remove(t.jsonText)
                endTimer(t.jsonText, at: r.time)
            } else if name == "epochOpened" {
                closeEpoch(at: r.time, "the next epoch opened")
                let deadline = rec.json?["deadline"]?.intValue.map { Moment(nanoseconds: $0) }
                if let m = mark("recovery", .epoch, rec, end: deadline) { openEpoch = (lane("recovery"), m) }
            } else if name == "desktopStatusChanged", let status = rec.json?["status"]?.stringValue, !status.hasPrefix("recovering") {
                // The epoch ended: the desktop answered (online) or is shown temporarily offline.
                closeEpoch(at: r.time, "desktop \(status)")
            }
        default: break
        }
    }

    /// A timer's band ends when it fires, is cancelled or is armed again (whichever comes before its deadline).
    private mutating func endTimer(_ key: String, at t: Moment) {
        guard let at = openTimers.removeValue(forKey: key) else { return }
        if let end = lanes[at.lane].marks[at.mark].end, end <= t { return }
        lanes[at.lane].marks[at.mark].end = t
    }

    /// A lease's band: from a renewal to the next renewal or the release, at most until it expires.
    private mutating func endLease(_ key: String, at t: Moment) {
        guard let at = openLeases.removeValue(forKey: key) else { return }
        let start = lanes[at.lane].marks[at.mark].time
        lanes[at.lane].marks[at.mark].end = min(t, start + TraceStats.leaseExpiry)
    }

    /// Ends the open epoch at `t` (or at its deadline, when that came first), saying how it ended.
    private mutating func closeEpoch(at t: Moment, _ why: String) {
        guard let e = openEpoch else { return }
        var m = lanes[e.lane].marks[e.mark]
        let how: String
        if let deadline = m.end, deadline < t {
            how = "its deadline passed"
        } else {
            m.end = t
            how = why
        }
        if keepsLabels { m.label += "; ended at \(m.end ?? t) (\(Moment(nanoseconds: ((m.end ?? t) - m.time).nanoseconds)) after it opened): \(how)" }
        lanes[e.lane].marks[e.mark] = m
        openEpoch = nil
    }

    /// Draws how an RPC ended on its span (made when its request was added).
    private mutating func finishSpan(_ call: RpcCall, _ summary: String) {
        guard let at = openRPCs.removeValue(forKey: call.requestId) else { return }
        var m = lanes[at.lane].marks[at.mark]
        m.end = call.ended ?? end
        switch call.outcome {
        case .answered: m.kind = .rpc
        case .error: m.kind = .rpcError
        case .pending, .failed, .socketEnded: m.kind = .rpcUnanswered
        }
        if !keepsLabels {
            // The viewer keeps no labels (it shows the record itself).
        } else if let ended = call.ended, call.isAnswered {
            m.label += " -> " + summary + " (after \(Moment(nanoseconds: (ended - call.sent).nanoseconds)))"
        } else if let ended = call.ended {
            m.label += " -> \(call.why) at \(ended) (after \(Moment(nanoseconds: (ended - call.sent).nanoseconds)))"
        } else {
            m.label += " -> still pending when the trace ended"
        }
        lanes[at.lane].marks[at.mark] = m
    }

    private mutating func lease(_ rec: InspectedRecord, _ p: JSONValue) {
        let t = rec.record.time
        let key = p["sessionId"]?.stringValue ?? p["appSessionId"]?.stringValue ?? "?"
        endLease(key, at: t)
        if p["active"]?.boolValue == false {
            mark("leases", .leaseRelease, rec)
            lastRenewal[key] = nil
            return
        }
        if let m = mark("leases", .leaseRenew, rec) { openLeases[key] = (lane("leases"), m) }
        if let last = lastRenewal[key] {
            let gap = t - last
            if gap > TraceStats.leaseExpiry {
                check("leaseExpired", t, rec.number, "lease \(key) renewed \(Moment(nanoseconds: gap.nanoseconds)) after the previous renewal: after expiry (> \(TraceStats.leaseExpiry))")
            } else if gap > TraceStats.leaseLate {
                check("leaseLate", t, rec.number, "lease \(key) renewed late: \(Moment(nanoseconds: gap.nanoseconds)) after the previous renewal (every \(TraceStats.leaseRenewal), late after \(TraceStats.leaseLate))")
            }
        }
        lastRenewal[key] = t
    }

    /// Ends the timeline: an RPC whose socket ended without anything else ending it spans to that end,
    /// RPCs still pending span to the end of the trace, registrations still waiting are reported, checks
    /// sorted by time.
    public mutating func finish() {
        let last = end ?? .zero
        for call in calls.finish() { finishSpan(call, "") }
        openRPCs = [:]
        for key in openLeases.keys.sorted() { endLease(key, at: last) }
        openTimers = [:]
        closeEpoch(at: last, "the trace ended")
        for (g, reg) in registration.sorted(by: { $0.key < $1.key }) {
            check("registrationIncomplete", reg.sent, reg.record, "generation \(g) sent register at \(reg.sent) and never got registered/resumed before the trace ended")
        }
        registration = [:]
        checks.sort { ($0.time, $0.record ?? 0) < ($1.time, $1.record ?? 0) }
    }

    // MARK: ASCII

    /// The ASCII picture: a time axis, one row per lane, a legend, and the checks under it.
    public func ascii(width: Int = 100) -> String {
        let cols = max(20, width - 12)
        let t0 = start ?? .zero
        let span = max(1, ((end ?? .zero) - t0).nanoseconds)
        func col(_ t: Moment) -> Int { min(cols - 1, max(0, Int(Double((t - t0).nanoseconds) / Double(span) * Double(cols - 1)))) }
        var out = "time".padded(10) + "| " + Self.axis(t0, end ?? t0, cols) + "\n"
        for lane in lanes {
            var row = [Character](repeating: " ", count: cols)
            var prio = [Int](repeating: -1, count: cols)
            func put(_ c: Int, _ k: TimelineMark.Kind, _ glyph: Character? = nil) {
                if k.priority > prio[c] { row[c] = glyph ?? k.glyph; prio[c] = k.priority }
            }
            for m in lane.marks {
                let a = col(m.time)
                if let e = m.end, m.kind != .frame, m.kind != .timer {
                    let b = col(e)
                    let fill: Character = m.kind == .epoch ? "~" : m.kind == .leaseRenew ? "_" : "="
                    if b > a { for c in (a + 1)...b { put(c, .frame, fill) } }
                }
                put(a, m.kind)
            }
            out += lane.name.padded(10) + "| " + String(row) + "\n"
        }
        out += "\nlegend: " + Self.asciiLegend + "\n"
        for lane in lanes where lane.name.hasPrefix("g") {
            if let c = lane.marks.last(where: { $0.kind == .close || $0.kind == .fail }) {
                out += "\(lane.name): \(c.kind == .fail ? "failed" : "closed") at \(c.time): \(c.label)\n"
            }
            if lane.omitted > 0 { out += "\(lane.name): \(lane.omitted) marks omitted\n" }
        }
        // How each failed RPC and each recovery epoch ended, as drawn (the first few of each).
        var notes: [String] = []
        for lane in lanes {
            for m in lane.marks where m.kind == .rpcUnanswered || m.kind == .rpcError || m.kind == .epoch {
                notes.append(m.kind == .epoch ? "recovery: epoch at \(m.time): \(m.label)" : "\(lane.name): rpc at \(m.time) (record \(m.record)): \(m.label)")
            }
        }
        let shown = 20
        for n in notes.prefix(shown) { out += n + "\n" }
        if notes.count > shown { out += "... \(notes.count - shown) more failed RPCs and epochs (timeline --html shows each)\n" }
        out += "\nchecks:\n"
        if checks.isEmpty { out += "  none: no late lease, no overlapping generations, every registration completed, every fired timer was armed\n" }
        for c in checks { out += "  [\(c.rule)] \(c.time)" + (c.record.map { " record \($0)" } ?? "") + ": \(c.message)\n" }
        return out
    }

    /// The ASCII legend: every glyph, as `ascii` draws it.
    static let asciiLegend = "o open, O opened, r register, R registered/resumed, . heartbeat, = rpc span (request to response), ! rpc error, ? unanswered (its span ends where the call failed, or at the end while pending), - frame, x closed, X failed, l lease released, E recovery epoch (~ while it lasts, to its end or deadline), L lease renewed (_ held), t timer armed or fired, w watch-channel event"

    static func axis(_ a: Moment, _ b: Moment, _ cols: Int) -> String {
        let left = a.description
        let right = b.description
        let gap = max(1, cols - left.count - right.count)
        return left + String(repeating: " ", count: gap) + right
    }
}

extension String {
    func padded(_ w: Int) -> String { count >= w ? self + " " : self + String(repeating: " ", count: w - count) }
}
