import RelayClient
import RelayProtocol
import Replay
import Trace

/// `relaytrace replay FILE` on a wire trace: the recorded relay side of one phone replayed into the
/// client model, and the model's traffic compared with the phone's (``WireReplayer``).
enum WireReplayCommand {
    /// Runs the wire replay of `path` with the `replay` command's arguments: exit 0 when the phone and
    /// the model agree, 1 when they part, 64 for a usage error, 65 for a damaged trace (66/74 as usual).
    static func run(path: String, _ args: ParsedArguments, json: Bool, _ ctx: CLIContext) -> ExitCode {
        let command = ["relaytrace", "replay"]
        func usage(_ message: String) -> ExitCode {
            RelayTraceCommand.usageError(UsageError(message: message, commandPath: command), ctx)
        }
        if let other = ["step", "what-if"].first(where: { args.flag($0) }) ?? ["until", "break", "perturb", "shrink"].first(where: { args.value($0) != nil }) {
            return usage("\(path) is a wire trace: it replays into the model (with --device, --tolerance, --all, --set, --format, --allow-incomplete); --\(other) is for machine traces")
        }
        var options = WireReplayOptions(device: args.value("device"))
        if let text = args.value("tolerance") {
            guard let ns = TimeSyntax.nanoseconds(text, bareSeconds: true) else {
                return usage("--tolerance '\(text)' is not a time; write e.g. 250ms, 1s")
            }
            options.tolerance = .nanoseconds(ns)
        }
        for text in args.array("set") {
            for part in text.split(separator: ",") {
                let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
                guard kv.count == 2, let ns = TimeSyntax.nanoseconds(kv[1], bareSeconds: true), options.tuning.set(kv[0], to: .nanoseconds(ns)) else {
                    return usage("--set '\(part)' is not NAME=TIME with NAME one of " + ClientTuning.names.keys.sorted().joined(separator: ", "))
                }
            }
        }
        let opened: (header: TraceHeader, records: ReplayRecords, readProblem: TraceError?)
        do throws(ReplayError) {
            opened = try ReplayRecords.open(path: path, allowDamaged: args.flag("allow-incomplete"))
        } catch {
            return ReplayCommand.openFailed(error, ctx)
        }
        let records: [TraceRecord]
        do throws(TraceError) {
            records = try opened.records.loadAll()
        } catch {
            ctx.stderr.line("Error: \(path): \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        }
        let replayer: WireReplayer
        do throws(WireReplayError) {
            replayer = try WireReplayer(header: opened.header, records: records, options: options)
        } catch {
            if error.isUsage { return usage("\(path): \(error.message)") }
            ctx.stderr.line("Error: \(path): \(error.message)")
            return .dataError
        }
        let report = replayer.run()
        let all = args.flag("all")
        if json {
            var o: [String: JSONValue] = ["file": .string(path), "mode": "wire", "source": .string(opened.header.wireSource ?? "unknown")]
            if case .object(let r) = report.json(all: all) { o.merge(r) { a, _ in a } }
            if let problem = opened.readProblem { o["incomplete"] = .string(problem.description) }
            ctx.stdout.line(JSONValue.object(o).prettyText())
        } else {
            ctx.stdout.line(report.text(all: all))
            if let problem = opened.readProblem {
                ctx.stdout.line("the trace is incomplete and ends there: \(problem.description)")
            }
        }
        return report.agrees ? .success : .found
    }
}
