import Capture
import DevRelay
import Foundation
import RelayClient
import RelayProtocol
import Replay
import Trace
import WatchReplay

/// `relaytrace replay`: strict replay, stepping and breakpoints.
enum ReplayCommand {
    static let spec = CommandSpec(
        name: "replay",
        abstract: "Replay a trace into the relay client machine (or the WatchLink machines) and report the first divergence.",
        discussion: """
            Builds a fresh client from the trace header, feeds every recorded input at its recorded time on \
            a virtual clock, and compares every action with the recorded one (JSON canonically, binary byte \
            for byte). Exit 0 when the replay matches the trace to the end, 1 at the first divergence (the \
            report names the record, time, generation, the SPEC rule, the JSON differences and the records \
            before it). A complete trace is read a chunk at a time; a damaged chunk met on the way ends the \
            replay with exit 65 (naming the record and byte offset) after every record before it; a trace \
            without index and trailer (a killed recorder) exits 65 unless --allow-incomplete.
            A watch-channel trace (header client.channel "watch", from simulate --scenario watch-*) replays \
            strictly through the four WatchLink machines instead: each launch rebuilds them from the recorded \
            values and incarnation token, each recorded input goes to its machine, each action is compared; \
            same output, JSON and exit codes. Watch traces take --until, --break (time=, record=, timer=), \
            --step, --format, --allow-incomplete and --perturb; --set and --what-if are for relay-client traces.
            Break expressions (comma-separated): time=T (e.g. time=1m30s), record=N, type=T (message type, \
            e.g. registered), method=M, event=E, timer=NAME (e.g. heartbeat, interest.renewal), phase=P \
            (registered, connecting, suspended...), gen=N (the current generation).
            --step reads commands from stdin (a terminal or a pipe): next [N], continue, back [N], break EXPR, \
            delete, state, timers, frames [N], where, quit.
            --what-if runs the (possibly changed) client against the recorded peer: recorded UI and lifecycle \
            inputs at their times, timers from the virtual clock, each recorded answer (registered, \
            rpc.response, pong) delivered after its recorded latency once the client sends what it answers \
            (RPC responses re-addressed to the actual request ID and trace ID). Exit 0 when every recorded \
            frame found its counterpart, 1 when some did not (they are listed).
            A wire trace (relay --record, proxy, an in-app WireRecorder) replays into the model instead: the \
            recorded relay side of one phone (--device ID when the trace holds several) drives the client \
            machine on the virtual clock, its inputs inferred from the phone's own traffic (start from its \
            upgrade headers, calls from its rpc.requests, lease claims from its chat:timeline-interest, a \
            stop or a new start where it closed or opened a socket the model would not), and what the model \
            sends is compared with what the phone sent: content (request IDs, trace IDs, appSessionId left \
            out) and time within --tolerance (default 250ms). The first parting is reported (--all: every \
            one) with the record, the SPEC rule and the client's figure against the model's. Exit 0 when \
            they agree (or part only where an inference is involved, which the report says), 1 when they \
            part, 65 for a damaged trace, 64 for a usage error (several phones and no --device). Wire \
            traces take --device, --tolerance, --all, --set, --format and --allow-incomplete.
            --perturb SEED or A..B replays the trace once per seed with seeded faults (relay channel: drop, \
            duplicate, reorder, delay an inbound frame, kill the socket at frame N; watch channel: drop, \
            duplicate, reorder, delay a datagram, relaunch the watch app) and checks the channel's invariants \
            (relay: one live generation, no lease renewed after expiry; watch: exactly-once, in-order, \
            monotonic snapshots). One line per failing seed, then a summary; exit 0 when every seed holds, 1 \
            when one breaks. --shrink OUT writes the first failure, shrunk by delta debugging, as a trace \
            (and its fault list as OUT.faults.json).
            """,
        arguments: [ArgumentSpec(name: "file", help: "The trace file.")],
        options: [
            OptionSpec(long: "until", valueName: "time", help: "Stop before the first record at or after this time and print the state."),
            OptionSpec(long: "break", valueName: "expr", help: "Pause before records matching these expressions (with --step: the prompt; without: print the state and stop); every --break adds its own.", repeatable: true),
            OptionSpec(long: "step", help: "Step interactively; commands come from stdin."),
            OptionSpec(long: "set", valueName: "name=time,...", help: "Change the client's timing for the replay (a what-if experiment): " + ClientTuning.names.keys.sorted().joined(separator: ", ") + ".", repeatable: true),
            OptionSpec(long: "perturb", valueName: "seeds", help: "Perturbation replay: one run per seed (SEED or A..B) with seeded faults; report seeds that break an invariant."),
            OptionSpec(long: "shrink", valueName: "out", help: "With --perturb: write the first failure, shrunk to a minimal fault list and script, as a trace at OUT (faults in OUT.faults.json)."),
            forceOption("the --shrink files"),
            OptionSpec(long: "format", valueName: "format", help: "Output format of the result (not with --step or --perturb): text or json.", allowed: ["text", "json"], defaultValue: "text"),
            OptionSpec(long: "allow-incomplete", help: "Replay a trace without index and trailer (a recorder that was killed) up to its last intact record."),
            OptionSpec(long: "what-if", help: "Run the client against the recorded peer instead: timers from the virtual clock, recorded answers matched to what the client actually sends; report frames without a counterpart."),
            OptionSpec(long: "device", valueName: "id", help: "Wire traces: the phone to replay into the model (its X-Device-ID); default: the trace's only phone."),
            OptionSpec(long: "tolerance", valueName: "time", help: "Wire traces: how far a message's time may lie from the model's, either way (default 250ms)."),
            OptionSpec(long: "all", help: "Wire traces: report every parting, not only the first."),
        ],
        rules: modeRules,
        run: { args, ctx in run(args, ctx) })

    /// How replay's modes combine, in one place (checked by the parser before anything runs).
    static let modeRules: [OptionRule] = [
        .excludes("perturb", ["step", "what-if", "until", "break"], "--perturb runs the whole trace per seed"),
        .excludes("what-if", ["step", "until", "break"], "--what-if runs the whole trace"),
        .excludes("format=json", ["step", "perturb"], "--format json is for a replay's result; --step and --perturb write text"),
        .requires("shrink", ["perturb"], "--shrink writes the first failing seed's run"),
        .requires("force", ["shrink"]),
    ]

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = args.positionals["file"] ?? ""
        let command = ["relaytrace", "replay"]
        var conditions: [ReplayCondition<RelayClientMachine>] = []
        if let until = args.value("until") {
            guard let ns = TimeSyntax.nanoseconds(until, bareSeconds: true) else {
                return RelayTraceCommand.usageError(UsageError(message: "--until '\(until)' is not a time; write e.g. 12.5, 90s, 1m30s", commandPath: command), ctx)
            }
            conditions.append(.time(Moment(nanoseconds: ns)))
        }
        var breakpoints: [ReplayCondition<RelayClientMachine>] = []
        do throws(UsageError) {
            for text in args.array("break") { breakpoints += try parseBreakpoints(text, commandPath: command) }
        } catch {
            return RelayTraceCommand.usageError(error, ctx)
        }
        let json = args.value("format") == "json"
        if (try? TraceReader(path: path))?.header.isWireTrace == true {
            return WireReplayCommand.run(path: path, args, json: json, ctx)
        }
        if let wireOnly = ["device", "tolerance"].first(where: { args.value($0) != nil }) ?? (args.flag("all") ? "all" : nil) {
            return RelayTraceCommand.usageError(UsageError(message: "--\(wireOnly) is for wire traces (relay --record, proxy, WireRecorder); \(path) is a machine trace", commandPath: command), ctx)
        }
        if let seeds = args.value("perturb") {
            return PerturbCommand.run(path: path, seeds: seeds, shrinkTo: args.value("shrink"), force: args.flag("force"), ctx)
        }
        if isWatchTrace(path: path) {
            guard !args.flag("what-if"), args.value("set") == nil else {
                return RelayTraceCommand.usageError(UsageError(message: "\(path) is a watch-channel trace: it takes strict replay (with --until, --break, --step, --format json, --allow-incomplete) and --perturb SEED[..SEED]; --set and --what-if are for relay-client traces", commandPath: command), ctx)
            }
            let watchConditions: [ReplayCondition<WatchReplaySnapshot>], watchBreakpoints: [ReplayCondition<WatchReplaySnapshot>]
            do throws(UsageError) {
                watchConditions = try watchOnly(conditions, commandPath: command)
                watchBreakpoints = try watchOnly(breakpoints, commandPath: command)
            } catch {
                return RelayTraceCommand.usageError(UsageError(message: "\(path) is a watch-channel trace: \(error.message)", commandPath: command), ctx)
            }
            return watchReplay(path: path, allowIncomplete: args.flag("allow-incomplete"), json: json, step: args.flag("step"),
                               conditions: watchConditions, breakpoints: watchBreakpoints, ctx)
        }
        var tuning = ClientTuning.spec
        for text in args.array("set") {
            for part in text.split(separator: ",") {
                let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
                let names = ClientTuning.names.keys.sorted()
                if kv.count == 2, ClientTuning.names[kv[0]] == nil {
                    return RelayTraceCommand.usageError(UsageError(message: "--set '\(kv[0])' is not a client constant\(KnownNames.didYouMean(kv[0], among: names)) (one of \(names.joined(separator: ", ")))", commandPath: command), ctx)
                }
                guard kv.count == 2, let ns = TimeSyntax.nanoseconds(kv[1], bareSeconds: true), tuning.set(kv[0], to: .nanoseconds(ns)) else {
                    return RelayTraceCommand.usageError(UsageError(message: "--set '\(part)' is not NAME=TIME with NAME one of " + names.joined(separator: ", "), commandPath: command), ctx)
                }
            }
        }
        let replayer: Replayer
        do throws(ReplayError) {
            replayer = try Replayer(path: path, allowDamaged: args.flag("allow-incomplete"), checkpointInterval: args.flag("step") ? 512 : Int.max, tuning: tuning)
        } catch {
            return openFailed(error, ctx)
        }
        replayer.breakpoints = breakpoints
        if args.flag("what-if") {
            let records: [TraceRecord]
            do throws(TraceError) {
                records = try replayer.records.loadAll()
            } catch {
                ctx.stderr.line("Error: \(path): \(error.description)")
                return RelayTraceCommand.exitCode(for: error)
            }
            do throws(ReplayError) {
                let report = try WhatIfReplayer(header: replayer.header, records: records, machine: replayer.machine).run()
                if json {
                    var o = ["file": JSONValue.string(path), "result": .string(report.unmatched.isEmpty ? "matched" : "unmatched")]
                    if case .object(let r) = report.json { o.merge(r) { a, _ in a } }
                    ctx.stdout.line(JSONValue.object(o).prettyText())
                } else {
                    ctx.stdout.line(report.description)
                }
                return report.unmatched.isEmpty ? .success : .found
            } catch {
                ctx.stderr.line("Error: \(error.message)")
                return .dataError
            }
        }
        if args.flag("step") {
            return interactive(replayer, file: path, ctx)
        }
        let progress = Progress("replay", totalBytes: UInt64(replayer.records.count))
        replayer.onProgress = { n in progress.report(records: UInt64(n), bytes: UInt64(n)) }
        let stop = replayer.run(until: conditions)
        progress.done()
        if json { return result(stop, replayer, path: path, ctx) }
        switch stop {
        case .finished:
            ctx.stdout.line("replayed \(replayer.records.count) records: no divergence (\(replayer.machine.lastGeneration.rawValue) generation(s), ended \(replayer.machine.phase))")
            if let problem = replayer.readProblem {
                ctx.stdout.line("the trace is incomplete and ends there: \(problem.description)")
            }
            return .success
        case .paused(let at, let why):
            ctx.stdout.line("paused before record #\(at) (\(why))")
            ctx.stdout.line(replayer.snapshot.description)
            return .success
        case .diverged(let d):
            ctx.stdout.line(d.report(file: path))
            return .found
        case .damaged(let at, let error):
            ctx.stderr.line("Error: \(path): damaged at record #\(at) (the \(at) records before it replayed without divergence): \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        case .refused(let condition, let why):
            ctx.stderr.line("Error: \(path): cannot break on \(condition): \(why)")
            return .usage
        }
    }

    /// `--format json`: the result as one JSON object on stdout (a damage also on stderr), with the same
    /// exit code as the text form.
    static func result(_ stop: ReplayStop, _ r: Replayer, path: String, _ ctx: CLIContext) -> ExitCode {
        emit(stop, resultFields(r, path: path), state: { r.snapshot.json }, path: path, ctx)
    }

    /// The members of a relay replay's JSON result besides the stop's.
    static func resultFields(_ r: Replayer, path: String) -> [String: JSONValue] {
        var o: [String: JSONValue] = [
            "file": .string(path), "records": .int(Int64(r.records.count)), "position": .int(Int64(r.position)),
            "generations": .int(Int64(bitPattern: r.machine.lastGeneration.rawValue)), "phase": .string("\(r.machine.phase)"),
        ]
        if let problem = r.readProblem { o["incomplete"] = .string(problem.description) }
        return o
    }

    /// Prints `o` with the stop's `result` and its member (`paused` with `state()`, `divergence`, `damage`;
    /// a damage also on stderr), and returns the exit code the text form would.
    static func emit(_ stop: ReplayStop, _ o: [String: JSONValue], state: () -> JSONValue, path: String, _ ctx: CLIContext) -> ExitCode {
        let (json, code) = resultObject(stop, o, state: state)
        if case .damaged(let at, let error) = stop { ctx.stderr.line("Error: \(path): damaged at record #\(at): \(error.description)") }
        ctx.stdout.line(json.prettyText())
        return code
    }

    /// `o` with the stop's `result` and its member (`paused` with `state()`, `divergence`, `damage`), and
    /// the exit code the text form returns (what `--format json` prints and `relaytrace view` shows).
    static func resultObject(_ stop: ReplayStop, _ o: [String: JSONValue], state: () -> JSONValue) -> (JSONValue, ExitCode) {
        var o = o
        let code: ExitCode
        switch stop {
        case .finished:
            o["result"] = "finished"
            code = .success
        case .paused(let at, let why):
            o["result"] = "paused"
            o["paused"] = ["record": .int(Int64(at)), "reason": .string(why)]
            o["state"] = state()
            code = .success
        case .diverged(let d):
            o["result"] = "diverged"
            o["divergence"] = d.json
            code = .found
        case .damaged(let at, let error):
            o["result"] = "damaged"
            o["damage"] = ["record": .int(Int64(at)), "code": .string(error.code.rawValue),
                           "offset": error.offset.map { .int(Int64(bitPattern: $0)) } ?? .null, "message": .string(error.description)]
            code = RelayTraceCommand.exitCode(for: error)
        case .refused(let condition, let why):
            o["result"] = "refused"
            o["refused"] = ["condition": .string(condition), "reason": .string(why)]
            code = .usage
        }
        return (.object(o), code)
    }

    // MARK: Watch-channel traces

    /// Whether the trace at `path` is a watch-channel trace (``isWatchTrace(_:hasWatchRecord:)``). False
    /// when the file does not open (the relay path reports why).
    static func isWatchTrace(path: String) -> Bool {
        guard let reader = try? TraceReader(path: path) else { return false }
        return isWatchTrace(reader.header) {
            while let entry = try? reader.next() {
                if entry.record.channel == .watch { return true }
            }
            return false
        }
    }

    /// The one rule `replay` and `replay --perturb` tell the channel by: the header's `client.channel` is
    /// `watch`; or the header names no channel, describes no relay client, and a record is on channel
    /// `watch` (`hasWatchRecord` is asked only then).
    static func isWatchTrace(_ header: TraceHeader, hasWatchRecord: () -> Bool) -> Bool {
        if WatchReplayer.isWatchTrace(header) { return true }
        guard header.client["channel"] == nil, (try? ClientCapture.configuration(from: header)) == nil else { return false }
        return hasWatchRecord()
    }

    /// A trace that would not open for replay: the error, the `--allow-incomplete` hint when records
    /// before the problem are intact, and the exit code.
    static func openFailed(_ error: ReplayError, _ ctx: CLIContext) -> ExitCode {
        ctx.stderr.line("Error: \(error.message)")
        if let n = error.intactRecords, error.traceError?.code != .io {
            ctx.stderr.line("  The \(n) records before the problem are intact; pass --allow-incomplete to replay them.")
        }
        if let t = error.traceError { return RelayTraceCommand.exitCode(for: t) }
        return .dataError
    }

    /// Strict replay of a watch-channel trace: the same output, JSON and exit codes as a relay trace's.
    static func watchReplay(path: String, allowIncomplete: Bool, json: Bool, step: Bool, conditions: [ReplayCondition<WatchReplaySnapshot>],
                            breakpoints: [ReplayCondition<WatchReplaySnapshot>], _ ctx: CLIContext) -> ExitCode {
        let replayer: WatchReplayer
        do throws(ReplayError) {
            replayer = try WatchReplayer(path: path, allowDamaged: allowIncomplete)
        } catch {
            return openFailed(error, ctx)
        }
        replayer.breakpoints = breakpoints
        if step { return interactive(replayer, file: path, ctx) }
        let progress = Progress("replay", totalBytes: UInt64(replayer.records.count))
        replayer.onProgress = { n in progress.report(records: UInt64(n), bytes: UInt64(n)) }
        let stop = replayer.run(until: conditions)
        progress.done()
        if json { return watchResult(stop, replayer, path: path, ctx) }
        switch stop {
        case .paused(let at, let why):
            ctx.stdout.line("paused before record #\(at) (\(why))")
            ctx.stdout.line(replayer.description)
            return .success
        case .finished:
            ctx.stdout.line("replayed \(replayer.records.count) records: no divergence (channel watch: \(replayer.inputsFed) inputs, \(replayer.actionsMatched) actions matched, \(replayer.watchLaunches) watch launch(es), \(replayer.phoneLaunches) phone launch(es))")
            if let problem = replayer.readProblem {
                ctx.stdout.line("the trace is incomplete and ends there: \(problem.description)")
            }
            return .success
        case .diverged(let d):
            ctx.stdout.line(d.report(file: path))
            ctx.stdout.line("the machines where the replay stopped (before record #\(d.record)):")
            ctx.stdout.line(replayer.description.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n"))
            return .found
        case .damaged(let at, let error):
            ctx.stderr.line("Error: \(path): damaged at record #\(at) (the \(at) records before it replayed without divergence): \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        case .refused(let condition, let why):
            ctx.stderr.line("Error: \(path): cannot break on \(condition): \(why)")
            return .usage
        }
    }

    /// The break conditions parsed for a relay trace, for a watch trace: the relay machine's states
    /// (`phase=`, `gen=`) and the conditions ``WatchReplayer/refusal(_:)`` refuses are usage errors.
    static func watchOnly(_ conditions: [ReplayCondition<RelayClientMachine>], commandPath: [String]) throws(UsageError) -> [ReplayCondition<WatchReplaySnapshot>] {
        var out: [ReplayCondition<WatchReplaySnapshot>] = []
        for c in conditions {
            guard let w = c.retargeted(to: WatchReplaySnapshot.self), WatchReplayer.refusal(of: w) == nil else {
                throw UsageError(message: "break on time=, record= or timer= (stalledAck, heartbeat); '\(c)' is for relay-client traces", commandPath: commandPath)
            }
            out.append(w)
        }
        return out
    }

    /// `--format json` of a watch replay: `file`, `channel` (`watch`), `records`, `position`, `inputs`,
    /// `actions`, `watchLaunches`, `phoneLaunches`, `result` (`finished`, `diverged`, `damaged`),
    /// `divergence` or `damage` as for a relay trace, `incomplete` when so, and `state` (the machines).
    static func watchResult(_ stop: ReplayStop, _ r: WatchReplayer, path: String, _ ctx: CLIContext) -> ExitCode {
        // A watch replay does not pause (no breakpoints): its stops are finished, diverged or damaged.
        emit(stop, watchResultFields(r, path: path), state: { r.snapshot.json }, path: path, ctx)
    }

    /// The members of a watch replay's JSON result besides the stop's.
    static func watchResultFields(_ r: WatchReplayer, path: String) -> [String: JSONValue] {
        var o: [String: JSONValue] = [
            "file": .string(path), "channel": "watch", "records": .int(Int64(r.records.count)), "position": .int(Int64(r.position)),
            "inputs": .int(Int64(r.inputsFed)), "actions": .int(Int64(r.actionsMatched)),
            "watchLaunches": .int(Int64(r.watchLaunches)), "phoneLaunches": .int(Int64(r.phoneLaunches)), "state": r.snapshot.json,
        ]
        if let problem = r.readProblem { o["incomplete"] = .string(problem.description) }
        return o
    }

    /// The exit code of an interactive replay: the damage's, 1 after a divergence, else 0.
    static func exitCode(of r: Replayer) -> ExitCode {
        if let damage = r.damage { return RelayTraceCommand.exitCode(for: damage.error) }
        return r.divergence == nil ? .success : .found
    }

    /// The phases `phase=` names (``phaseName(_:)``).
    static let phaseNames = ["idle", "connecting", "registering", "registered", "linking", "waitingToReconnect", "suspended", "stopped"]

    /// Parses `time=T,record=N,type=T,method=M,event=E,timer=NAME,phase=P,gen=N`: each part is its own
    /// breakpoint (any one pauses). Names are checked: an unknown message type, method, event type, timer
    /// or phase is a usage error with a suggestion; a value with spaces (`type=error AND gen=1`) is refused,
    /// as there is no AND.
    static func parseBreakpoints(_ text: String, commandPath: [String]) throws(UsageError) -> [ReplayCondition<RelayClientMachine>] {
        var out: [ReplayCondition<RelayClientMachine>] = []
        func known(_ value: String, _ names: [String], _ what: String, _ key: String) throws(UsageError) {
            guard !names.contains(value) else { return }
            var message = "break \(key)='\(value)' is not \(what)"
            if let s = KnownNames.suggestion(for: value, among: names) { message += "; did you mean '\(s)'?" }
            else if names.count <= 40 { message += " (one of: \(names.joined(separator: ", ")))" }
            throw UsageError(message: message, commandPath: commandPath)
        }
        for part in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !part.isEmpty {
            let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2, !kv[1].isEmpty else {
                throw UsageError(message: "break expression '\(part)' is not key=value (time=, record=, type=, method=, event=, timer=, phase=, gen=)", commandPath: commandPath)
            }
            let (key, value) = (kv[0], kv[1])
            if value.contains(where: \.isWhitespace) {
                throw UsageError(message: "break expression '\(part)' has spaces in its value: each key=value is a breakpoint of its own and any one pauses (there is no AND); separate them with commas or give --break again", commandPath: commandPath)
            }
            switch key {
            case "time", "t":
                guard let ns = TimeSyntax.nanoseconds(value, bareSeconds: true) else {
                    throw UsageError(message: "break time '\(value)' is not a time", commandPath: commandPath)
                }
                out.append(.time(Moment(nanoseconds: ns)))
            case "record":
                guard let n = Int(value), n >= 0 else { throw UsageError(message: "break record '\(value)' is not a record number", commandPath: commandPath) }
                out.append(.record(n))
            case "type":
                try known(value, KnownNames.messageTypes, "a message type", key)
                out.append(.messageType(value))
            case "method":
                try known(value, KnownNames.methods, "an RPC method of the catalogue", key)
                out.append(.method(value))
            case "event":
                try known(value, KnownNames.eventTypes, "an event type", key)
                out.append(.eventType(value))
            case "timer":
                try known(value, ClientRecordCodec.timerNames + ["stalledAck"], "a timer (watch traces: stalledAck, heartbeat)", key)
                out.append(.timer(value))
            case "phase":
                try known(value, phaseNames, "a connection phase", key)
                out.append(.state({ m in phaseName(m.phase) == value }, "phase \(value)"))
            case "gen":
                guard let g = UInt64(value) else { throw UsageError(message: "break gen '\(value)' is not a generation number", commandPath: commandPath) }
                out.append(.state({ m in m.generation?.rawValue == g }, "generation \(g)"))
            default:
                throw UsageError(message: "unknown break key '\(key)' (time, record, type, method, event, timer, phase, gen)", commandPath: commandPath)
            }
        }
        return out
    }

    static func phaseName(_ p: ConnectionPhase) -> String {
        switch p {
        case .idle: "idle"
        case .connecting: "connecting"
        case .registering: "registering"
        case .registered: "registered"
        case .linking: "linking"
        case .waitingToReconnect: "waitingToReconnect"
        case .suspended: "suspended"
        case .stopped: "stopped"
        }
    }

    // MARK: Interactive

    /// `--step`: commands from stdin (a terminal or a pipe) drive `r`, a relay-client or a watch-channel
    /// replay; exit 0, 1 after a divergence, the damage's code after damage.
    static func interactive(_ r: some SteppedReplay, file: String, _ ctx: CLIContext) -> ExitCode {
        let out = ctx.stdout
        out.line("replaying \(r.records.count) records\(r.channelNote); 'help' lists the commands")
        if let problem = r.readProblem { out.line("the trace is incomplete and ends after them: \(problem.description)") }
        // The replay's clock (what `state` shows), not the next record's time (`next:` shows that).
        func prompt() {
            out.write("(replay #\(r.position) t=\(r.now)) ")
            out.flush()
        }
        // Commands from a pipe are echoed after the prompt, so a transcript reads as a session.
        let echo = !Terminal.isTTY(0)
        func showNext() {
            if r.position < r.records.count { out.line("next: #\(r.position) \(r.describe(r.records[r.position]))") }
            else { out.line("at the end of the trace") }
        }
        func report(_ stop: ReplayStop) {
            switch stop {
            case .finished: out.line("finished: no divergence")
            case .paused(let at, let why): out.line("paused before #\(at): \(why)")
            case .diverged(let d): out.line(d.report(file: file))
            case .damaged(let at, let error): out.line("the trace is damaged at record #\(at): \(error.description)")
            case .refused(let condition, let why): out.line("error: cannot break on \(condition): \(why)")
            }
        }
        func code() -> ExitCode {
            if let damage = r.damage { return RelayTraceCommand.exitCode(for: damage.error) }
            return r.divergence == nil ? .success : .found
        }
        showNext()
        prompt()
        while let line = readLine() {
            if echo { out.line(line) }
            let words = line.split(separator: " ").map(String.init)
            let n = words.count > 1 ? max(1, Int(words[1]) ?? 1) : 1
            switch words.first ?? "next" {
            case "n", "next", "s", "step":
                steps: for _ in 0..<n {
                    switch r.stepOne() {
                    case .wentOn: continue
                    case .atEnd: break steps
                    case .stopped(let stop):
                        report(stop)
                        break steps
                    }
                }
                showNext()
            case "c", "continue":
                report(r.run(until: []))
                showNext()
            case "b", "back":
                for _ in 0..<n { if !r.stepBack() { break } }
                showNext()
            case "break":
                do throws(UsageError) {
                    let parsed = try parseBreakpoints(words.dropFirst().joined(separator: " "), commandPath: ["break"])
                    r.breakpoints += try r.conditions(parsed, commandPath: ["break"])
                    out.line("breakpoints: " + r.breakpoints.map { $0.description }.joined(separator: "; "))
                } catch {
                    out.line("error: \(error.message)")
                }
            case "delete":
                r.breakpoints = []
                out.line("breakpoints cleared")
            case "state":
                out.line(r.stateText)
            case "timers":
                out.line(r.timersText)
            case "frames":
                let end = min(r.records.count, r.position + (words.count > 1 ? n : 10))
                for i in r.position..<end { out.line("#\(i) \(r.describe(r.records[i]))") }
            case "where":
                showNext()
            case "q", "quit", "exit":
                return code()
            case "help", "?":
                out.line("next [N], continue, back [N], break EXPR, delete, state, timers, frames [N], where, quit")
            default:
                out.line("unknown command '\(words.first ?? "")'; 'help' lists the commands")
            }
            prompt()
        }
        out.line("")
        return code()
    }
}

/// What the `--step` prompt drives: the relay client's replayer or the watch channel's (the replay core's
/// ``InteractiveReplay``), with the prompt's texts.
protocol SteppedReplay: InteractiveReplay {
    /// Said after the record count at the start (`" of a watch-channel trace"`).
    var channelNote: String { get }
    /// The `state` command's text.
    var stateText: String { get }
    /// The `timers` command's text.
    var timersText: String { get }
    /// The break conditions the prompt parsed (for a relay trace), for this replay; a usage error for one
    /// that cannot hold here.
    func conditions(_ parsed: [ReplayCondition<RelayClientMachine>], commandPath: [String]) throws(UsageError) -> [ReplayCondition<Subject>]
}

extension Replayer: SteppedReplay {
    var channelNote: String { "" }
    var stateText: String { snapshot.description }
    var timersText: String {
        let timers = machine.armedTimers
        return timers.isEmpty ? "no timers armed" : timers.map { "\($0.id) at \($0.deadline)" }.joined(separator: "\n")
    }
    func conditions(_ parsed: [ReplayCondition<RelayClientMachine>], commandPath: [String]) throws(UsageError) -> [ReplayCondition<RelayClientMachine>] {
        parsed
    }
}

extension WatchReplayer: SteppedReplay {
    var channelNote: String { " of a watch-channel trace" }
    var stateText: String { description }
    var timersText: String { description }
    func conditions(_ parsed: [ReplayCondition<RelayClientMachine>], commandPath: [String]) throws(UsageError) -> [ReplayCondition<WatchReplaySnapshot>] {
        do throws(UsageError) {
            return try ReplayCommand.watchOnly(parsed, commandPath: commandPath)
        } catch {
            throw UsageError(message: "a watch trace: \(error.message)", commandPath: commandPath)
        }
    }
}
