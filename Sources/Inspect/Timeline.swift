public import RelayProtocol
import Trace

/// One thing drawn on a timeline lane.
public struct TimelineMark: Sendable, Hashable {
    /// What it is.
    public enum Kind: String, Sendable, Hashable {
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
        /// A timer fired.
        case timer

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
            }
        }

        var priority: Int {
            switch self {
            case .frame: 0
            case .heartbeat: 1
            case .rpc: 2
            case .timer: 3
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

/// A lane: one generation, the leases, or the recovery epochs.
public struct TimelineLane: Sendable, Hashable {
    /// `g3`, `leases`, `recovery`.
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

/// The timeline model of `relaytrace timeline`: lanes per generation (registration, heartbeats, RPC
/// spans, close reason), a lease lane and a recovery lane, and the derived checks. Built one record at
/// a time; each lane keeps at most `maxMarksPerLane` marks.
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

    /// An empty timeline.
    public init() {}

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
        lanes[i].marks.append(TimelineMark(kind: kind, time: rec.record.time, end: end, record: rec.number, label: rec.summary))
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
            }
        case .action:
            guard let name = rec.inputOrActionName else { break }
            if name == "armTimer", let t = rec.json?["timer"] {
                seenArm = true
                armed.insert(t.jsonText)
            } else if name == "cancelTimer", let t = rec.json?["timer"] {
                armed.remove(t.jsonText)
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
        m.label += "; ended at \(m.end ?? t) (\(Moment(nanoseconds: ((m.end ?? t) - m.time).nanoseconds)) after it opened): \(how)"
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
        if let ended = call.ended, call.isAnswered {
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
        if p["active"]?.boolValue == false {
            mark("leases", .leaseRelease, rec)
            lastRenewal[key] = nil
            return
        }
        mark("leases", .leaseRenew, rec)
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
                if let e = m.end, m.kind != .frame {
                    let b = col(e)
                    if b > a { for c in (a + 1)...b { put(c, .frame, m.kind == .epoch ? "~" : "=") } }
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
    static let asciiLegend = "o open, O opened, r register, R registered/resumed, . heartbeat, = rpc span (request to response), ! rpc error, ? unanswered (its span ends where the call failed, or at the end while pending), - frame, x closed, X failed, L lease renewed, l lease released, E recovery epoch (~ while it lasts, to its end or deadline), t timer"

    static func axis(_ a: Moment, _ b: Moment, _ cols: Int) -> String {
        let left = a.description
        let right = b.description
        let gap = max(1, cols - left.count - right.count)
        return left + String(repeating: " ", count: gap) + right
    }

    // MARK: HTML

    /// A self-contained HTML page with an SVG of the same lanes: mouse wheel or the buttons zoom,
    /// dragging pans, hovering a mark shows its frame (record number, time, summary).
    public func html(title: String) -> String {
        let t0 = start ?? .zero
        let spanNs = max(1, ((end ?? .zero) - t0).nanoseconds)
        let width = 1200.0
        let laneH = 34.0
        let top = 30.0
        let left = 90.0
        func x(_ t: Moment) -> Double { left + Double((t - t0).nanoseconds) / Double(spanNs) * (width - left - 20) }
        func fmt(_ v: Double) -> String { String((v * 10).rounded() / 10) }
        let height = top + Double(lanes.count) * laneH + 20
        var svg = "<svg id=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" preserveAspectRatio=\"none\" style=\"height:\(Int(height))px\">\n"
        for k in 0...10 {
            let t = Moment(nanoseconds: t0.nanoseconds + spanNs * Int64(k) / 10)
            let xx = fmt(x(t))
            svg += "<line class=\"grid\" x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(Int(top - 8))\" y2=\"\(Int(height - 10))\"/><text class=\"axis\" x=\"\(xx)\" y=\"\(Int(top - 12))\">\(t)</text>\n"
        }
        for (i, lane) in lanes.enumerated() {
            let y = top + Double(i) * laneH
            let mid = fmt(y + laneH / 2)
            svg += "<g class=\"lane\" data-lane=\"\(xml(lane.name))\"><rect class=\"laneBg\" x=\"0\" y=\"\(fmt(y))\" width=\"\(Int(width))\" height=\"\(Int(laneH - 2))\"/>"
            svg += "<text class=\"laneName\" x=\"6\" y=\"\(fmt(y + laneH / 2 + 4))\">\(xml(lane.name))</text>\n"
            for m in lane.marks where m.kind == .epoch {
                // A band across the lane from the epoch's opening to its end, behind the other marks, wide
                // enough to see however short the epoch was.
                let w = max(4, x(m.end ?? m.time) - x(m.time))
                svg += "<rect class=\"m epoch band\" x=\"\(fmt(x(m.time)))\" y=\"\(fmt(y))\" width=\"\(fmt(w))\" height=\"\(Int(laneH - 2))\"><title>#\(m.record) \(m.time) \(xml(m.label))</title></rect>\n"
            }
            for m in lane.marks where m.kind != .epoch {
                let tip = "<title>#\(m.record) \(m.time) \(xml(m.label))</title>"
                let cls = "m \(m.kind.rawValue)"
                if let e = m.end, m.kind != .frame {
                    let w = max(1.5, x(e) - x(m.time))
                    svg += "<rect class=\"\(cls)\" x=\"\(fmt(x(m.time)))\" y=\"\(fmt(y + 8))\" width=\"\(fmt(w))\" height=\"\(Int(laneH - 18))\">\(tip)</rect>\n"
                } else {
                    svg += "<circle class=\"\(cls)\" cx=\"\(fmt(x(m.time)))\" cy=\"\(mid)\" r=\"\(m.kind == .frame || m.kind == .heartbeat ? 3 : 5)\">\(tip)</circle>\n"
                }
            }
            svg += "</g>\n"
        }
        svg += "</svg>"
        var checksHTML = ""
        if checks.isEmpty { checksHTML = "<li class=\"ok\">none</li>" }
        for c in checks { checksHTML += "<li><b>\(xml(c.rule))</b> \(c.time)\(c.record.map { " record \($0)" } ?? ""): \(xml(c.message))</li>\n" }
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(xml(title)) - relaytrace timeline</title>
            <style>
            body{font:13px system-ui,sans-serif;margin:12px;background:#fff;color:#222}
            #wrap{overflow:hidden;border:1px solid #ccc;cursor:grab}
            .laneBg{fill:#f4f6f8}.laneName{font-weight:bold;fill:#333}.axis{font-size:10px;fill:#666;text-anchor:middle}.grid{stroke:#ddd}
            .m{stroke:#333;stroke-width:.5}.frame{fill:#9aa}.heartbeat{fill:#7bd}.open,.opened{fill:#fff;stroke:#080;stroke-width:2}
            .register{fill:#fc6}.registered{fill:#2a2}.rpc{fill:#69f;opacity:.7}.rpcError{fill:#e44;opacity:.8}.rpcUnanswered{fill:#f90;opacity:.6}
            .close{fill:#000}.fail{fill:#d00}.leaseRenew{fill:#a5d}.leaseRelease{fill:#fff;stroke:#a5d;stroke-width:2}.epoch{fill:#fd8;opacity:.6}.timer{fill:#ccc}
            .m:hover{stroke:#f00;stroke-width:2}#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:4px 6px;border-radius:3px;font:12px monospace;display:none;max-width:60em;white-space:pre-wrap}
            </style></head><body>
            <h1>\(xml(title))</h1>
            <p><button id="zin">zoom in</button> <button id="zout">zoom out</button> <button id="reset">reset</button>
            wheel to zoom, drag to pan, hover a mark to see its frame</p>
            <div id="wrap">
            \(svg)
            </div>
            <div id="tip"></div>
            <h2>Checks</h2><ul id="checks">\(checksHTML)</ul>
            <p>Legend: open/opened (hollow green), register (amber), registered (green), heartbeat (light blue), RPC span from request to response (blue; red error; orange unanswered, to where the call failed or to the end while pending), close (black), fail (red), lease renewal (purple), recovery epoch (yellow band from its opening to its end).</p>
            <script>
            (function(){
            var svg=document.getElementById('tl'),W=\(Int(width)),H=\(Int(height)),vx=0,vw=W,tip=document.getElementById('tip');
            function apply(){svg.setAttribute('viewBox',vx+' 0 '+vw+' '+H);}
            function zoom(f,cx){var nw=Math.min(W,Math.max(W/2000,vw*f));if(cx===undefined)cx=vx+vw/2;vx=Math.min(W-nw,Math.max(0,cx-(cx-vx)*nw/vw));vw=nw;apply();}
            svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect();zoom(e.deltaY<0?0.8:1.25,vx+(e.clientX-r.left)/r.width*vw);},{passive:false});
            document.getElementById('zin').onclick=function(){zoom(0.5);};
            document.getElementById('zout').onclick=function(){zoom(2);};
            document.getElementById('reset').onclick=function(){vx=0;vw=W;apply();};
            var drag=null;svg.addEventListener('mousedown',function(e){drag={x:e.clientX,vx:vx};});
            window.addEventListener('mouseup',function(){drag=null;});
            window.addEventListener('mousemove',function(e){if(drag){var r=svg.getBoundingClientRect();vx=Math.min(W-vw,Math.max(0,drag.vx-(e.clientX-drag.x)/r.width*vw));apply();}});
            svg.querySelectorAll('.m').forEach(function(m){var t=m.querySelector('title');
            m.addEventListener('mouseenter',function(e){tip.textContent=t?t.textContent:'';tip.style.display='block';});
            m.addEventListener('mousemove',function(e){tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';});
            m.addEventListener('mouseleave',function(){tip.style.display='none';});});
            })();
            </script>
            </body></html>

            """
    }
}

/// `text` escaped for XML/HTML text and attributes.
func xml(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for c in text.unicodeScalars {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        default:
            if c.value < 0x20 && c != "\n" && c != "\t" { out += "?" } else { out.unicodeScalars.append(c) }
        }
    }
    return out
}

extension String {
    func padded(_ w: Int) -> String { count >= w ? self + " " : self + String(repeating: " ", count: w - count) }
}
