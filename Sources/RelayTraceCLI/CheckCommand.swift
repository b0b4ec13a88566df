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
            + ". Each finding names the rule, the record(s), the measured figure and the required one. A rule is judged only where the trace shows enough, and never blames the client for what the relay did (docs/CLI.md says what each rule measures). Exit 0 when every rule holds, 1 when one is broken, 65 on a damaged trace after reporting what could be checked.",
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin).")],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "Output format: text or json.", allowed: ["text", "json"], defaultValue: "text"),
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
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(args.positionals["file"] ?? "", ctx) } catch { return error }
        let options = CheckOptions(tolerance: .nanoseconds(tolerance), earlyTolerance: .nanoseconds(early), skip: skip)
        let checker = TraceChecker(header: reader.header, options: options)
        let error = readAll(reader, label: "check") { checker.add($0); return true }
        var report = checker.finish()
        if let error {
            report.notes.append("the trace is damaged (\(error.description)): only the records before the damage were checked, and the waits the damage cuts off were not judged")
        } else if !reader.isComplete {
            report.notes.append("the trace is incomplete (no trailer: the recorder stopped early); the waits its end cuts off were not judged")
        }
        if args.value("format") == "json" { ctx.stdout.line(report.json.prettyText()) } else { ctx.stdout.write(report.text) }
        if let error { return readFailure(error, ctx) }
        return report.clientBrokeARule ? .found : .success
    }
}
