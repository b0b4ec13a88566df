import Capture
public import RelayClient
public import RelayProtocol
public import Trace

/// A recorded frame the changed client gave no occasion for (or that found no socket to arrive on).
public struct UnmatchedFrame: Sendable, Equatable, CustomStringConvertible {
    /// The record number.
    public var record: Int
    /// Its time.
    public var time: Moment
    /// The message type (`rpc.response`, `registered`, `event job:created`, ...).
    public var type: String
    /// Why it was not delivered.
    public var reason: String
    /// `#42 12.000s rpc.response: the client never sent the request it answers`.
    public var description: String { "#\(record) \(time) \(type): \(reason)" }
}

/// What a what-if replay did.
public struct WhatIfReport: Sendable, CustomStringConvertible {
    /// Inputs fed to the machine (recorded UI and lifecycle inputs, matched peer answers, timers).
    public var inputs = 0
    /// The changed client's actions, in order, with their times.
    public var actions: [(time: Moment, action: ClientAction)] = []
    /// Recorded frames that had no counterpart.
    public var unmatched: [UnmatchedFrame] = []
    /// Requests the changed client sent that the recording has no answer for.
    public var unanswered: [String] = []
    /// The virtual time at the end.
    public var end: Moment = .zero

    /// The report as JSON: `inputs`, `actions` (a count), `endNs`, `unmatched` [{record, timeNs, type,
    /// reason}], `unanswered` (lines).
    public var json: JSONValue {
        [
            "inputs": .int(Int64(inputs)), "actions": .int(Int64(actions.count)), "endNs": .int(end.nanoseconds),
            "unmatched": .array(unmatched.map { u in
                ["record": .int(Int64(u.record)), "timeNs": .int(u.time.nanoseconds), "type": .string(u.type), "reason": .string(u.reason)]
            }),
            "unanswered": .array(unanswered.map { .string($0) }),
        ]
    }

    /// A summary: counts, then every unmatched frame and unanswered request.
    public var description: String {
        var lines = ["what-if replay: \(inputs) inputs fed, \(actions.count) actions, ended at \(end)"]
        lines.append("  recorded frames without a counterpart: \(unmatched.count)")
        lines += unmatched.prefix(50).map { "    \($0)" }
        lines.append("  requests the recording does not answer: \(unanswered.count)")
        lines += unanswered.prefix(50).map { "    \($0)" }
        return lines.joined(separator: "\n")
    }
}

/// What-if replay: runs a (possibly changed) client against the recorded peer.
///
/// Timers fire from the virtual clock (recorded `timerFired` records are ignored); the recorded UI,
/// lifecycle, identity and auth inputs are fed at their recorded times; recorded answers of the peer are
/// matched to what the client actually sends — `registered`/`resumed`/`error` to the n-th `register`, an
/// `rpc.response` to the request of the same method and occurrence (its `id` and trace ID rewritten to the
/// actual request's), a `pong` to the n-th `heartbeat` or `ping` — and delivered after their recorded
/// latency; unsolicited frames (events, terminal output) and peer closes arrive at their recorded times on
/// the socket that stands for the recorded one. Frames with no counterpart are reported, not dropped
/// silently.
///
/// A `client restart seed=N` marker (the process was killed and started again) ends one client's life:
/// its pending timers and events die with it, and a fresh client (the same configuration and timing, the
/// marker's seed) runs the records after it, matched against the answers recorded after it. Frames that
/// still arrive after the restart on a socket of the dead process are delivered as recorded (the
/// restarted client ignores them, as the recorded one did).
public final class WhatIfReplayer {
    /// The trace's header.
    public let header: TraceHeader
    /// The trace's records.
    public let records: [TraceRecord]
    /// The machine (its state at the end after ``run()``).
    public private(set) var machine: RelayClientMachine

    private enum Event {
        case input(ClientInput)
        case timer(TimerID, Moment)
        case unsolicited(record: Int, recordedGen: UInt64, frame: WireFrame, type: String)
        case peerClose(record: Int, recordedGen: UInt64, code: UInt16?, reason: String)
        case answer(Generation, WireFrame)
        case leftover(record: Int, ClientInput)
        case opened(Generation)
        case failed(Generation, TransportFailure)
        case perturbed(Generation, WireFrame)
        /// A recorded socket failure after its upgrade (the connection died without a close).
        case peerFailure(record: Int, recordedGen: UInt64, TransportFailure)
        /// A record of the recorded client's own (an open, a frame it sent, its close), for ``clientRecordInputs``.
        case client(record: Int)
        /// A timer whose fire ``timerFiring`` moved to this time.
        case heldTimer(TimerID, deadline: Moment)
    }

    /// Perturbation hooks (``RelayPerturbation``): the fate of every inbound frame about to be delivered,
    /// by its ordinal among deliveries; and a transform of the machine's actions (a broken driver, in tests).
    var inboundFate: ((_ ordinal: Int) -> InboundFate)?
    var actionTransform: (@Sendable (ClientAction) -> [ClientAction])?
    /// Every input fed, with its time (for the perturbation's invariants).
    var onInput: ((ClientInput, Moment) -> Void)?
    /// Every action performed, with its time.
    var onAction: ((ClientAction, Moment) -> Void)?
    /// A client restart (the marker's time and seed), before the fresh client's first input.
    var onRestart: ((Moment, UInt64) -> Void)?
    /// Wire replay (``WireReplayer``): the inputs to feed at the time of each record of the recorded
    /// client's own (a socket open, a frame it sent, its close), given the machine then. When set, those
    /// records become events of the run; set it before ``run()``.
    var clientRecordInputs: ((_ record: Int, _ machine: RelayClientMachine) -> [ClientInput])?
    /// Wire replay: when a due timer fires (at once, later, or never), given the machine then.
    var timerFiring: ((_ id: TimerID, _ deadline: Moment, _ machine: RelayClientMachine) -> TimerFiring)?
    /// How long the run goes on after the last record's time (a wire replay: the tolerance, so that a
    /// model timer due just after the recording stopped still fires).
    var endSlack: Duration = .zero
    /// Wire replay: an answer is delivered no earlier than it was recorded (the model, reacting at the
    /// recorded times of the relay's messages, asks a little sooner than the recorded client did; the
    /// relay's timeline stays as recorded). Off for what-if: a changed client gets answers after their
    /// recorded latency.
    var answersNoEarlierThanRecorded = false
    /// Whether the records have been indexed (at the start of the run, so that hooks set after `init`
    /// take part).
    private var indexed = false
    /// The restart markers (record index, seed), in order.
    private let restarts: [(record: Int, seed: UInt64)]
    /// True for the life of a client after a restart: frames on sockets it never opened are the dead
    /// process's.
    private var afterRestart = false
    /// The IDs of the requests recorded in earlier lives: a response to one (the relay may hand it to the
    /// resumed session) is delivered as recorded, not matched.
    private var earlierRequests: Set<String> = []
    private var deliveries = 0
    /// Deliveries made by the lives before this one (the ordinals faults target are over the whole run).
    private var deliveryBase = 0
    private var held: (Generation, WireFrame)?

    private struct Answer {
        var record: Int
        var delay: Duration
        var message: RelayMessage
        var type: String
    }

    private var queue = TimedQueue<Event>()
    private var timers: [TimerID: Moment] = [:]
    private var report = WhatIfReport()
    private var now: Moment = .zero
    // Recorded peer answers, by what they answer.
    private var registerAnswers: [[Answer]] = []
    private var heartbeatAnswers: [[Answer]] = []
    private var rpcAnswers: [String: [[Answer]]] = [:]  // method -> per occurrence
    /// The outcome of each recorded socket opening, in the order of the openings; nil for one the
    /// recording never saw answered (the trace or the process ended while it was connecting).
    private var openOutcomes: [(delay: Duration, failure: TransportFailure?)?] = []
    private var recordedGenerations: [UInt64] = []
    // What the actual client has sent so far.
    private var registersSent = 0
    private var heartbeatsSent = 0
    private var requestsSent: [String: Int] = [:]
    private var opensSent = 0
    private var actualGenerations: [Generation] = []
    private var consumed = Set<Int>()

    /// A what-if replay of `records` under `header`; `machine` replaces the client built from the header
    /// (a changed client: another seed, another configuration).
    public init(header: TraceHeader, records: [TraceRecord], machine: RelayClientMachine? = nil) throws(ReplayError) {
        self.header = header
        self.records = records
        restarts = Self.restartMarkers(records)
        if let machine {
            self.machine = machine
        } else {
            do { self.machine = RelayClientMachine(configuration: try ClientCapture.configuration(from: header)) } catch {
                throw ReplayError(message: "the trace header does not describe a relay client: \(error)")
            }
        }
    }

    /// A what-if replay of `records` with `machine` (a wire replay's: nothing is read from the header).
    init(header: TraceHeader, records: [TraceRecord], given machine: RelayClientMachine) {
        self.header = header
        self.records = records
        self.machine = machine
        restarts = Self.restartMarkers(records)
    }

    private static func restartMarkers(_ records: [TraceRecord]) -> [(record: Int, seed: UInt64)] {
        records.indices.compactMap { i in
            let r = records[i]
            guard r.kind == .marker, r.channel == .relay, let seed = Replayer.restartSeed(r) else { return nil }
            return (i, seed)
        }
    }

    /// One client's life: the records between two restarts.
    private init(life header: TraceHeader, records: [TraceRecord], machine: RelayClientMachine, earlierRequests: Set<String>?) {
        self.header = header
        self.records = records
        self.machine = machine
        self.restarts = []
        self.afterRestart = earlierRequests != nil
        self.earlierRequests = earlierRequests ?? []
    }

    /// Runs to the last record's time (then stops the client) and reports.
    public func run() -> WhatIfReport {
        restarts.isEmpty ? runLife(until: (records.last?.time ?? .zero) + endSlack) : runLives()
    }

    /// Each client's life in turn, every one by its own replayer; the reports joined, with record numbers
    /// of the whole trace.
    private func runLives() -> WhatIfReport {
        var joined = WhatIfReport()
        let first = machine
        var deliveredBefore = 0
        var requests: Set<String> = []
        for k in 0...restarts.count {
            let from = k == 0 ? 0 : restarts[k - 1].record + 1
            let to = k < restarts.count ? restarts[k].record : records.count
            var m = first
            if k > 0 {
                var configuration = first.configuration
                configuration.seed = restarts[k - 1].seed
                m = RelayClientMachine(configuration: configuration, tuning: first.tuning)
                onRestart?(records[restarts[k - 1].record].time, restarts[k - 1].seed)
            }
            let lifeRecords = Array(records[from..<to])
            let life = WhatIfReplayer(life: header, records: lifeRecords, machine: m, earlierRequests: k > 0 ? requests : nil)
            for r in lifeRecords where r.kind == .frameText && r.direction == .outbound {
                if case .rpcRequest(let req)? = try? RelayMessage(decodingText: r.payloadText) { requests.insert(req.id) }
            }
            life.actionTransform = actionTransform
            life.onInput = onInput
            life.onAction = onAction
            if let fate = inboundFate {
                let base = deliveredBefore
                life.deliveryBase = base
                life.inboundFate = { fate($0 + base) }
            }
            // A life ends when the process dies (the next marker), not at its last record.
            let end = k < restarts.count ? records[restarts[k].record].time : (records.last?.time ?? .zero)
            let r = life.runLife(until: end)
            deliveredBefore += life.deliveries
            joined.inputs += r.inputs
            joined.actions += r.actions
            joined.unmatched += r.unmatched.map { var u = $0; u.record += from; return u }
            joined.unanswered += r.unanswered
            joined.end = r.end
            machine = life.machine
        }
        return joined
    }

    private func runLife(until end: Moment) -> WhatIfReport {
        if !indexed {
            indexed = true
            index()
        }
        while let (t, e) = queue.pop() {
            if t > end { break }
            now = t
            handle(e)
        }
        report.end = end
        for (i, r) in records.enumerated() where r.kind == .frameText && r.direction == .inbound && !consumed.contains(i) {
            if let m = try? RelayMessage(decodingText: r.payloadText), isAnswer(m) {
                report.unmatched.append(UnmatchedFrame(record: i, time: r.time, type: typeName(m),
                                                       reason: "the client never sent the request it answers"))
            }
        }
        report.unmatched.sort { $0.record < $1.record }
        return report
    }

    // MARK: Indexing the recording

    private func index() {
        var lastRegister: [UInt64: Int] = [:]      // gen -> index into registerAnswers
        var lastHeartbeat: [UInt64: Int] = [:]
        var requestAt: [String: (method: String, occurrence: Int, time: Moment)] = [:]
        var methodCount: [String: Int] = [:]
        var sendTimes: [UInt64: Moment] = [:]
        var openAt: [UInt64: (time: Moment, slot: Int)] = [:]
        var opened: Set<UInt64> = []
        for (i, r) in records.enumerated() {
            if afterRestart, r.direction == .inbound, let g = r.generation, !opened.contains(g),
               r.kind == .frameText || r.kind == .frameBinary || r.kind == .transportClosed {
                // The dead process's socket: delivered as recorded.
                if let input = try? ClientRecordCodec.decodeInput(r) {
                    queue.push(.leftover(record: i, input), at: r.time)
                    continue
                }
            }
            if r.kind == .transportOpen, let g = r.generation { opened.insert(g) }
            if clientRecordInputs != nil, r.direction == .outbound,
               [.transportOpen, .frameText, .frameBinary, .transportClosed].contains(r.kind) {
                queue.push(.client(record: i), at: r.time)
            }
            switch r.kind {
            case .transportOpen:
                if let g = r.generation {
                    openAt[g] = (r.time, openOutcomes.count)
                    openOutcomes.append(nil)
                    recordedGenerations.append(g)
                }
            case .transportOpened:
                if let g = r.generation, let o = openAt.removeValue(forKey: g) { openOutcomes[o.slot] = (r.time - o.time, nil) }
            case .transportFailed:
                guard let g = r.generation, let input = try? ClientRecordCodec.decodeInput(r),
                      case .transportFailed(_, let failure) = input else { continue }
                if let o = openAt.removeValue(forKey: g) {
                    openOutcomes[o.slot] = (r.time - o.time, failure)
                } else if recordedGenerations.contains(g) {
                    // The socket died after its upgrade, without a close: the client learns it then.
                    queue.push(.peerFailure(record: i, recordedGen: g, failure), at: r.time)
                }
            case .transportClosed where r.direction == .inbound:
                if let g = r.generation, let input = try? ClientRecordCodec.decodeInput(r), case .transportClosed(_, let code, let reason) = input {
                    queue.push(.peerClose(record: i, recordedGen: g, code: code, reason: reason), at: r.time)
                }
            case .frameText where r.direction == .outbound:
                guard let m = try? RelayMessage(decodingText: r.payloadText), let g = r.generation else { continue }
                sendTimes[g] = r.time
                switch m {
                case .register:
                    registerAnswers.append([])
                    lastRegister[g] = registerAnswers.count - 1
                    lastHeartbeat[g] = nil
                case .heartbeat, .ping:
                    heartbeatAnswers.append([])
                    lastHeartbeat[g] = heartbeatAnswers.count - 1
                case .rpcRequest(let req):
                    let k = methodCount[req.method, default: 0]
                    methodCount[req.method] = k + 1
                    requestAt[req.id] = (req.method, k, r.time)
                    var list = rpcAnswers[req.method, default: []]
                    while list.count <= k { list.append([]) }
                    rpcAnswers[req.method] = list
                default: break
                }
            case .frameText where r.direction == .inbound:
                guard let m = try? RelayMessage(decodingText: r.payloadText), let g = r.generation else { continue }
                switch m {
                case .registered, .resumed, .error:
                    if let k = lastRegister[g] {
                        registerAnswers[k].append(Answer(record: i, delay: r.time - (sendTimes[g] ?? r.time), message: m, type: typeName(m)))
                        if case .error = m {} else { lastRegister[g] = nil }
                        continue
                    }
                    queue.push(.unsolicited(record: i, recordedGen: g, frame: .text(r.payloadText), type: typeName(m)), at: r.time)
                case .pong:
                    if let k = lastHeartbeat[g] {
                        heartbeatAnswers[k].append(Answer(record: i, delay: r.time - (sendTimes[g] ?? r.time), message: m, type: "pong"))
                        lastHeartbeat[g] = nil
                    } else {
                        consumed.insert(i)  // an unsolicited pong carries nothing
                    }
                case .rpcResponse(let resp):
                    if requestAt[resp.id] == nil, earlierRequests.contains(resp.id) {
                        // Answers a request of the process before the restart: delivered as recorded.
                        queue.push(.unsolicited(record: i, recordedGen: g, frame: .text(r.payloadText), type: "rpc.response"), at: r.time)
                    } else if let req = requestAt[resp.id] {
                        rpcAnswers[req.method]?[req.occurrence].append(Answer(record: i, delay: r.time - req.time, message: m, type: "rpc.response"))
                    } else {
                        report.unmatched.append(UnmatchedFrame(record: i, time: r.time, type: "rpc.response",
                                                               reason: "answers no request in the recording"))
                        consumed.insert(i)
                    }
                default:
                    queue.push(.unsolicited(record: i, recordedGen: g, frame: .text(r.payloadText), type: typeName(m)), at: r.time)
                }
            case .frameBinary where r.direction == .inbound:
                queue.push(.unsolicited(record: i, recordedGen: r.generation ?? 0, frame: .binary(r.payload), type: "binary"), at: r.time)
            case .input:
                // Recorded UI, lifecycle, identity and auth inputs; socket facts come from the run itself.
                guard let input = try? ClientRecordCodec.decodeInput(r) else { continue }
                if case .sendFailed = input { continue }
                queue.push(.input(input), at: r.time)
            default:
                continue
            }
        }
    }

    private func isAnswer(_ m: RelayMessage) -> Bool {
        switch m {
        case .registered, .resumed, .error, .pong, .rpcResponse: true
        default: false
        }
    }

    private func typeName(_ m: RelayMessage) -> String {
        if case .event(let e) = m { return "event \(e.eventType)" }
        if case .error(let e) = m { return "error \(e.code.rawValue)" }
        return m.typeName
    }

    // MARK: Running

    private func handle(_ e: Event) {
        switch e {
        case .input(let input):
            feed(input)
        case .timer(let id, let deadline):
            guard timers[id] == deadline else { return }
            if let timerFiring {
                switch timerFiring(id, deadline, machine) {
                case .now:
                    break
                case .at(let t):
                    if t > now { return queue.push(.heldTimer(id, deadline: deadline), at: t) }
                case .never:
                    return  // stays armed in the machine; nothing fires it
                }
            }
            timers[id] = nil
            feed(.timerFired(id))
        case .heldTimer(let id, let deadline):
            guard timers[id] == deadline else { return }
            timers[id] = nil
            feed(.timerFired(id))
        case .client(let record):
            for input in clientRecordInputs?(record, machine) ?? [] { feed(input) }
        case .peerFailure(let record, let recordedGen, let failure):
            guard let g = actualGeneration(for: recordedGen) else {
                report.unmatched.append(UnmatchedFrame(record: record, time: now, type: "failure", reason: "no socket stands for the recorded one"))
                return
            }
            feed(.transportFailed(g, failure))
        case .opened(let g):
            feed(.transportOpened(g))
        case .failed(let g, let failure):
            feed(.transportFailed(g, failure))
        case .answer(let g, let frame):
            deliverInbound(g, frame)
        case .perturbed(let g, let frame):
            feed(.transportFrame(g, frame))
        case .leftover(let record, let input):
            consumed.insert(record)
            feed(input)
        case .unsolicited(let record, let recordedGen, let frame, let type):
            // Delivered on the socket that stands for the recorded one, even when the client has already
            // retired it (it then ignores the frame, as the recorded client may have done too).
            consumed.insert(record)
            guard let g = actualGeneration(for: recordedGen) else {
                report.unmatched.append(UnmatchedFrame(record: record, time: now, type: type, reason: "no socket stands for the recorded one"))
                return
            }
            deliverInbound(g, frame)
        case .peerClose(let record, let recordedGen, let code, let reason):
            guard let g = actualGeneration(for: recordedGen) else {
                report.unmatched.append(UnmatchedFrame(record: record, time: now, type: "close", reason: "no socket stands for the recorded one"))
                return
            }
            feed(.transportClosed(g, code: code, reason: reason))
        }
    }

    /// The actual generation that stands for recorded generation `recorded`: the same position in the
    /// order of opens, or (when the run opened fewer sockets) the current one.
    private func actualGeneration(for recorded: UInt64) -> Generation? {
        if let k = recordedGenerations.firstIndex(of: recorded), k < actualGenerations.count { return actualGenerations[k] }
        return machine.generation
    }

    private func feed(_ input: ClientInput) {
        report.inputs += 1
        onInput?(input, now)
        let out = machine.handle(input, at: now)
        for a in out {
            for a in actionTransform?(a) ?? [a] {
                report.actions.append((now, a))
                onAction?(a, now)
                perform(a)
            }
        }
    }

    /// An inbound frame delivered on `g`, through the perturbation's fate for it when one is set.
    private func deliverInbound(_ g: Generation, _ frame: WireFrame) {
        guard let inboundFate else { return feed(.transportFrame(g, frame)) }
        let fate = inboundFate(deliveries)
        deliveries += 1
        switch fate {
        case .deliver:
            feed(.transportFrame(g, frame))
        case .drop:
            break
        case .duplicate(let gap):
            feed(.transportFrame(g, frame))
            queue.push(.perturbed(g, frame), at: now + gap)
        case .delay(let d):
            queue.push(.perturbed(g, frame), at: now + d)
        case .holdUntilNext:
            if let (hg, hf) = held { queue.push(.perturbed(hg, hf), at: now) }
            held = (g, frame)
            return
        case .kill:
            feed(.transportClosed(g, code: 1006, reason: "perturbation: socket killed at inbound frame \(deliveryBase + deliveries - 1)"))
        }
        if let (hg, hf) = held {
            held = nil
            queue.push(.perturbed(hg, hf), at: now)
        }
    }

    private func perform(_ a: ClientAction) {
        switch a {
        case .armTimer(let id, let deadline):
            timers[id] = deadline
            queue.push(.timer(id, deadline), at: deadline)
        case .cancelTimer(let id):
            timers[id] = nil
        case .openTransport(let g, _, _):
            actualGenerations.append(g)
            if opensSent < openOutcomes.count {
                if let o = openOutcomes[opensSent] {
                    queue.push(o.failure.map { .failed(g, $0) } ?? .opened(g), at: now + o.delay)
                } else {
                    report.unanswered.append("\(now) open \(g): never answered in the recording either (it ended while connecting); left pending")
                }
            } else {
                report.unanswered.append("\(now) open \(g): the recording has no more socket openings; accepted at once")
                queue.push(.opened(g), at: now)
            }
            opensSent += 1
        case .send(let g, .text(let text), _):
            guard let m = try? RelayMessage(decodingText: text) else { return }
            switch m {
            case .register:
                deliver(registersSent < registerAnswers.count ? registerAnswers[registersSent] : nil, on: g, what: "register")
                registersSent += 1
            case .heartbeat, .ping:
                deliver(heartbeatsSent < heartbeatAnswers.count ? heartbeatAnswers[heartbeatsSent] : nil, on: g, what: m.typeName)
                heartbeatsSent += 1
            case .rpcRequest(let req):
                let k = requestsSent[req.method, default: 0]
                requestsSent[req.method] = k + 1
                let answers = rpcAnswers[req.method].flatMap { k < $0.count ? $0[k] : nil }
                deliver(answers?.map { rewrite($0, for: req) }, on: g, what: "rpc.request \(req.method) #\(k + 1)")
            default:
                return
            }
        default:
            return
        }
    }

    private func deliver(_ answers: [Answer]?, on g: Generation, what: String) {
        guard let answers, !answers.isEmpty else {
            report.unanswered.append("\(now) \(what) on \(g)")
            return
        }
        for a in answers {
            consumed.insert(a.record)
            guard let text = try? a.message.encodedText() else { continue }
            let at = answersNoEarlierThanRecorded ? max(now + a.delay, records[a.record].time) : now + a.delay
            queue.push(.answer(g, .text(text)), at: at)
        }
    }

    /// A recorded response rewritten for the actual request: its ID, and its trace ID (keeping the
    /// desktop's span).
    private func rewrite(_ a: Answer, for req: RpcRequest) -> Answer {
        guard case .rpcResponse(var resp) = a.message else { return a }
        resp.id = req.id
        if let recorded = resp.traceparent, let sent = req.traceparent,
           let tp = try? TraceParent(traceId: sent.traceId, parentId: recorded.parentId, flags: recorded.flags) {
            resp.traceparent = tp
        }
        var out = a
        out.message = .rpcResponse(resp)
        return out
    }
}

/// When a due timer fires in a wire replay (``WhatIfReplayer/timerFiring``).
enum TimerFiring {
    /// At its deadline.
    case now
    /// Later, at this time (the recorded client acted then).
    case at(Moment)
    /// Not at all (it stays armed).
    case never
}

/// What the perturbation does to one inbound frame.
enum InboundFate {
    case deliver, drop, kill, holdUntilNext
    case duplicate(Duration)
    case delay(Duration)
}
