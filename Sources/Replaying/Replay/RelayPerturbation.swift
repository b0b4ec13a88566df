import Capture
import Foundation
public import RelayClient
import RelayProtocol
public import Trace

/// Perturbation replay of a relay-client trace: the what-if replayer (``WhatIfReplayer``: the client on
/// virtual time against the recorded peer) with seeded faults on the inbound frames (drop, duplicate,
/// reorder, delay, kill the socket at frame N), checking two invariants as the run goes:
///
/// - `one-live-generation`: at most one socket is live at any moment. A generation is live from the
///   client's `openTransport` until its `closeTransport`, or until the transport reports it closed or
///   failed; an `openTransport` while another is live breaks the invariant.
/// - `lease-renewed-after-expiry`: a lease (`chat:timeline-interest` with `active: true` for session S)
///   expires ``leaseInterval`` + ``leaseGrace`` after it was last sent. A renewal for S sent later than
///   that after the previous one, with nothing in between that ends or restarts the lease (a socket
///   closing or failing, a `registered`/`resumed` answer, `active: false` for S, a lease for another
///   session), is a lapse: the client renewed a lease the relay had already let go.
public final class RelayPerturbation: PerturbationReplay {
    /// The trace's header.
    public let header: TraceHeader
    /// The trace's records.
    public let records: [TraceRecord]
    /// The renewal interval of a lease (SPEC A11: 20 s).
    public static let leaseInterval = ClientConstants.interestRenewalInterval
    /// How late a renewal may come before the lease counts as expired: 5 s, more than the four delivery
    /// retries (0.25 + 0.5 + 1 + 2 s, +20 % jitter) can take.
    public static let leaseGrace: Duration = .seconds(5)
    /// The kinds seeded faults are drawn from.
    public static let kinds: [FaultKind] = [.drop, .duplicate, .reorder, .delay, .kill]
    /// A change to the machine's actions before the driver performs them; nil for the real client. Tests
    /// use it for a deliberately broken driver (e.g. one that never closes a socket).
    public var actionTransform: (@Sendable (ClientAction) -> [ClientAction])?
    private let configuration: ClientConfiguration

    /// A perturbation replayer of `records` under `header`.
    public init(header: TraceHeader, records: [TraceRecord]) throws(ReplayError) {
        self.header = header
        self.records = records
        do { configuration = try ClientCapture.configuration(from: header) } catch {
            throw ReplayError(message: "the trace header does not describe a relay client: \(error)")
        }
    }

    /// Inbound frames an unperturbed run delivers (what seeded faults target).
    public private(set) lazy var baselineDeliveries: Int = run(faults: []).deliveries

    /// Runs with `faults`; `record` keeps the run's own records.
    public func run(faults: [Fault], record: Bool = false) -> PerturbedRun {
        run(faults: faults, records: records, record: record)
    }

    /// Runs with `faults` with only the recorded inputs at these record numbers (the other `input` records
    /// left out: a shrunk script, see ``PerturbedRun/keptInputs``); nil keeps them all.
    public func run(faults: [Fault], keepingInputs kept: [Int]?, record: Bool = false) -> PerturbedRun {
        guard let kept else { return run(faults: faults, record: record) }
        return run(faults: faults, records: records(keepingInputs: kept), record: record)
    }

    /// The trace's records with only the `input` records at `kept`.
    private func records(keepingInputs kept: [Int]) -> [TraceRecord] {
        let keep = Set(kept)
        return records.indices.filter { records[$0].kind != .input || keep.contains($0) }.map { records[$0] }
    }

    /// Runs with `faults` against `records` (the trace's, or fewer of its inputs when shrinking).
    private func run(faults: [Fault], records: [TraceRecord], record: Bool) -> PerturbedRun {
        let replayer: WhatIfReplayer
        do { replayer = try WhatIfReplayer(header: header, records: records, machine: RelayClientMachine(configuration: configuration)) } catch {
            return PerturbedRun(seed: nil, faults: faults, violation: nil, deliveries: 0)
        }
        var byTarget: [Int: Fault] = [:]
        for f in faults where byTarget[f.target] == nil { byTarget[f.target] = f }
        var deliveries = 0
        replayer.inboundFate = { ordinal in
            deliveries = max(deliveries, ordinal + 1)
            guard let f = byTarget[ordinal] else { return .deliver }
            switch f.kind {
            case .drop: return .drop
            case .duplicate: return .duplicate(f.amount)
            case .reorder: return .holdUntilNext
            case .delay: return .delay(f.amount)
            case .kill: return .kill
            case .restart: return .deliver
            }
        }
        replayer.actionTransform = actionTransform
        let checker = RelayInvariants()
        var out: [TraceRecord] = []
        replayer.onInput = { input, t in
            checker.input(input, at: t)
            if record { out.append(ClientRecordCodec.record(input, at: t)) }
        }
        replayer.onAction = { action, t in
            checker.action(action, at: t)
            if record { out += ClientRecordCodec.records(action, at: t) }
        }
        replayer.onRestart = { t, seed in
            checker.restart()
            if record { out.append(TraceRecord(kind: .marker, time: t, payload: Array("client restart seed=\(seed)".utf8))) }
        }
        _ = replayer.run()
        return PerturbedRun(seed: nil, faults: faults, violation: checker.violation, deliveries: deliveries, records: out)
    }

    /// Shrinks a failing run: the fault list reduced by delta debugging to a 1-minimal list that still
    /// breaks the same invariant; then, with those faults, the recorded inputs (UI calls, lifecycle and
    /// network changes, identity and auth answers; at most 600 runs) the same way; then the faults once
    /// more against the kept inputs (fault targets are delivery numbers, and fewer inputs can mean other
    /// deliveries), so the result is 1-minimal for the script it runs. Returns the run of the result with
    /// its records kept, `keptInputs` and `scriptNote`.
    public func shrink(_ failing: PerturbedRun) -> PerturbedRun {
        guard let broken = failing.violation?.invariant else { return failing }
        let minimal = DeltaDebugging.minimize(failing.faults) { run(faults: $0).violation?.invariant == broken }
        let inputs = records.indices.filter { records[$0].kind == .input }
        let kept = DeltaDebugging.minimize(inputs, budget: 600) { keep in
            run(faults: minimal, records: records(keepingInputs: keep), record: false).violation?.invariant == broken
        }
        let script = records(keepingInputs: kept)
        let faults = DeltaDebugging.minimize(minimal) { run(faults: $0, records: script, record: false).violation?.invariant == broken }
        var r = run(faults: faults, records: script, record: true)
        guard r.violation?.invariant == broken else { return run(faults: minimal, record: true) }  // (ddmin keeps a failing set; defensive)
        r.keptInputs = kept
        r.scriptNote = "\(kept.count) of \(inputs.count) recorded inputs kept"
        return r
    }
}

/// The relay client's invariants, checked input by input and action by action.
final class RelayInvariants {
    private(set) var violation: InvariantViolation?
    private var live: Set<Generation> = []
    private var lastActive: [String: Moment] = [:]

    func input(_ input: ClientInput, at t: Moment) {
        switch input {
        case .transportClosed(let g, _, _), .transportFailed(let g, _):
            live.remove(g)
            lastActive.removeAll()
        case .transportFrame(_, .text(let text)):
            guard text.contains("\"registered\"") || text.contains("\"resumed\"") else { return }
            switch try? RelayMessage(decodingText: text) {
            case .registered?, .resumed?: lastActive.removeAll()
            default: return
            }
        default:
            return
        }
    }

    /// The client process restarted: its sockets and leases died with it (a fresh client numbers its
    /// generations from 1 again).
    func restart() {
        live.removeAll()
        lastActive.removeAll()
    }

    func action(_ action: ClientAction, at t: Moment) {
        switch action {
        case .openTransport(let g, _, _):
            if !live.isEmpty {
                let others = live.map { "\($0)" }.sorted().joined(separator: ", ")
                fail("one-live-generation", t, "opened \(g) while \(others) still live")
            }
            live.insert(g)
        case .closeTransport(let g, _, _):
            live.remove(g)
            lastActive.removeAll()
        case .send(_, .text(let text), _):
            guard text.contains(EventNames.chatTimelineInterest),
                  case .event(let e)? = try? RelayMessage(decodingText: text), e.eventType == EventNames.chatTimelineInterest,
                  let lease = try? TimelineInterest(json: e.payload) else { return }
            guard lease.active else {
                lastActive[lease.sessionId] = nil
                return
            }
            if let last = lastActive[lease.sessionId], t - last > RelayPerturbation.leaseInterval + RelayPerturbation.leaseGrace {
                fail("lease-renewed-after-expiry", t,
                     "session \(lease.sessionId) renewed \(Moment(nanoseconds: (t - last).nanoseconds)) after the previous active:true (interval \(RelayPerturbation.leaseInterval), grace \(RelayPerturbation.leaseGrace)) with no socket end, registration or release in between")
            }
            lastActive = [lease.sessionId: t]
        default:
            return
        }
    }

    private func fail(_ name: String, _ t: Moment, _ detail: String) {
        if violation == nil { violation = InvariantViolation(invariant: name, time: t, detail: detail) }
    }
}

/// Writes shrunk runs out.
public enum PerturbationOutput {
    /// Writes `records` as a trace at `path` under `header` (with `perturbation` = the faults and the
    /// violation in its extra members), and the fault list as JSON at `path + ".faults.json"`. Without
    /// `overwrite`, an existing file at either path is refused (an `io` error with `EEXIST`) before
    /// anything is written.
    public static func write(header: TraceHeader, records: [TraceRecord], run: PerturbedRun, to path: String, overwrite: Bool = true) throws(TraceError) {
        if !overwrite, let existing = [path, path + ".faults.json"].first(where: { FileManager.default.fileExists(atPath: $0) }) {
            var e = TraceError(.io, "cannot create \(existing): File exists")
            e.systemErrno = EEXIST
            throw e
        }
        var h = header
        var info: [String: JSONValue] = ["faults": Fault.json(run.faults)]
        if let s = run.seed { info["seed"] = .string(String(s)) }
        if let note = run.scriptNote { info["script"] = .string(note) }
        if let kept = run.keptInputs { info["keptInputs"] = .array(kept.map { .int(Int64($0)) }) }
        if let v = run.violation {
            info["violation"] = .object(["invariant": .string(v.invariant), "timeNs": .int(v.time.nanoseconds), "detail": .string(v.detail)])
        }
        h.extra["perturbation"] = .object(info)
        var options = TraceWriterOptions()
        options.blockWhenFull = true
        options.wallClockFlush = false
        options.overwrite = true
        options.redaction = .raw
        options.removeIncompleteFile = true  // the shrunk run can be made again
        let writer = try TraceWriter(path: path, header: h, options: options)
        for r in records { _ = writer.append(r) }
        _ = try writer.close()
        var json = Fault.json(run.faults).prettyText()
        json += "\n"
        guard FileManager.default.createFile(atPath: path + ".faults.json", contents: Data(json.utf8)) else {
            throw TraceError(.io, "could not create \(path).faults.json: check that its directory exists and is writable")
        }
    }
}
