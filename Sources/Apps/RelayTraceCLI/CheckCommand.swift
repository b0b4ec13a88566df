import Inspect
import RelayProtocol
import SpecCheck
import Trace

/// `relaytrace check FILE`: the SPEC's rules that can be seen on the wire, judged on any trace.
enum CheckCommand {
    static let spec = CommandSpec(
        name: "check",
        abstract: "Check a trace against the SPEC's rules that can be seen on the wire; exit 1 when the client broke one.",
        discussion: "Any trace: a machine trace (capture, simulate) or a wire trace (relay --record, proxy, an in-app recorder; every phone device, desktops not judged). Rules: "
            + CheckRule.allCases.map(\.rawValue).joined(separator: ", ")
            + ". Each finding names the rule, the record(s), the measured figure and the required one. A rule is judged only where the trace shows enough, and never blames the client for what the relay did (docs/CLI.md says what each rule measures). Several FILEs or directories: each report under a '==> FILE <==' heading (text), one JSON array of reports (json), or one row per finding of every trace (jsonl: the finding with trace, traceId and ts; docs/COLUMNS.md). Exit 0 when every rule holds, 1 when one is broken, 65 on a damaged trace after reporting what could be checked; with several traces, the worst of all.",
        arguments: [TraceInputs.argument()],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "Output format: text, json or jsonl (one row per finding).", allowed: ["text", "json", "jsonl"], defaultValue: "text"),
            OptionSpec(long: "tolerance", valueName: "time", help: "How far a deadline may be missed and an interval between two client messages be off.", defaultValue: milliseconds(CheckOptions.defaultTolerance)),
            OptionSpec(long: "early-tolerance", valueName: "time", help: "How much sooner than required a reaction to an inbound message may come.", defaultValue: milliseconds(CheckOptions.defaultEarlyTolerance)),
            OptionSpec(long: "skip", valueName: "rules", help: "Rules or sections to leave out (comma list), e.g. A11,A6.heartbeat."),
        ],
        run: { args, ctx in run(args, ctx) })

    /// `250ms`: a default tolerance as the option takes it.
    static func milliseconds(_ d: Duration) -> String { "\(d.nanoseconds / 1_000_000)ms" }

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let usage = { (m: String) in RelayTraceCommand.usageError(UsageError(message: m, commandPath: ["relaytrace", "check"]), ctx) }
        guard let tolerance = TimeSyntax.nanoseconds(args.value("tolerance") ?? "", bareSeconds: true) else {
            return usage("--tolerance '\(args.value("tolerance") ?? "")' is not a time; write e.g. 250ms, 1s")
        }
        guard let early = TimeSyntax.nanoseconds(args.value("early-tolerance") ?? "", bareSeconds: true) else {
            return usage("--early-tolerance '\(args.value("early-tolerance") ?? "")' is not a time; write e.g. 50ms")
        }
        var skip = Set<CheckRule>()
        if let list = args.value("skip") {
            let names = list.split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
            guard let rules = CheckRule.matching(names) else {
                return usage("--skip '\(list)' names no rule; rules are \(CheckRule.allCases.map(\.rawValue).joined(separator: ", ")) (or a section such as A6)")
            }
            skip = rules
        }
        let inputs: TraceInputs
        do { inputs = try TraceInputs(args, command: "check") } catch { return RelayTraceCommand.usageError(error, ctx) }
        let options = CheckOptions(tolerance: .nanoseconds(tolerance), earlyTolerance: .nanoseconds(early), skip: skip)
        var output = PerTraceOutput(format: args.value("format") ?? "text", isMany: inputs.isMany)
        let worst = inputs.forEachOpened(ctx) { file, reader in
            let (report, error) = check(reader, options)
            let columns = TraceColumns(file: file, reader: reader)
            output.add(columns, rows: {
                report.findings.map { f in
                    guard case .object(var o) = f.json else { return f.json }
                    o["ts"] = columns.ts(f.time)
                    return .object(o)
                }
            }, json: { report.json }, text: { report.text }, ctx.stdout)
            if let error { return readFailure(error, path: file, ctx) }
            return report.clientBrokeARule ? .found : .success
        }
        output.finish(ctx.stdout)
        return worst
    }

    /// Checks one trace; the read error that cut the check short, if any, is also in the report's notes.
    static func check(_ reader: TraceReader, _ options: CheckOptions) -> (CheckReport, TraceError?) {
        let checker = TraceChecker(header: reader.header, options: options)
        let error = readAll(reader, label: "check") { checker.add($0); return true }
        var report = checker.finish()
        if let error {
            report.notes.append("the trace is damaged (\(error.description)): only the records before the damage were checked, and the waits the damage cuts off were not judged")
        } else if !reader.isComplete {
            report.notes.append("the trace is incomplete (no trailer: the recorder stopped early); the waits its end cuts off were not judged")
        }
        return (report, error)
    }
}
