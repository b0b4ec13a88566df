import DevRelay
import Foundation
import RelayProtocol
import Simulation
import Trace
import WatchSimulation

/// `relaytrace simulate`: client + relay + desktop on virtual time, written as a trace.
enum SimulateCommand {
    static let scenarioList: String = (Scenario.all.map { (s: Scenario) -> String in "  " + s.name.padding(21) + s.summary }
        + WatchScenario.all.map { (s: WatchScenario) -> String in "  " + s.name.padding(21) + s.summary })
        .joined(separator: "\n")

    static let spec = CommandSpec(
        name: "simulate",
        abstract: "Run a scenario (client, relay and desktop in one process on virtual time) and write its trace.",
        discussion: "Scenarios:\n" + scenarioList
            + "\n\nThe same scenario, seed and duration write the same bytes. A 24-hour tour (--duration 24h) takes seconds.",
        options: [
            OptionSpec(long: "scenario", valueName: "name", help: "The scenario to run.", allowed: Scenario.all.map { $0.name } + WatchScenario.all.map { $0.name }, defaultValue: "tour"),
            OptionSpec(long: "output", short: "o", valueName: "file", help: "Where to write the trace (default: <scenario>.rtrace)."),
            OptionSpec(long: "seed", valueName: "n", help: "The seed of every random choice (request IDs, jitter, relay tokens).", defaultValue: "1"),
            OptionSpec(long: "duration", valueName: "time", help: "How much virtual time to run, e.g. 90s, 10m, 24h (default: the scenario's)."),
            OptionSpec(long: "faults", valueName: "file", help: "A fault script (docs/FAULTS.md) applied on top of the scenario's."),
            OptionSpec(long: "force", help: "Overwrite the output file if it exists (otherwise an existing trace is never touched)."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let name = args.value("scenario") ?? "tour"
        if let watchScenario = WatchScenario.named(name) { return runWatch(watchScenario, args, ctx) }
        guard var scenario = Scenario.named(name) else {
            return RelayTraceCommand.usageError(UsageError(message: "Unknown scenario '\(name)'", commandPath: ["relaytrace", "simulate"]), ctx)
        }
        guard let seed = UInt64(args.value("seed") ?? "1") else {
            return RelayTraceCommand.usageError(UsageError(message: "--seed takes a whole number from 0 to \(UInt64.max)", commandPath: ["relaytrace", "simulate"]), ctx)
        }
        var duration: Duration?
        if let text = args.value("duration") {
            guard let ns = FaultScript.parseDuration(text), ns > 0 else {
                return RelayTraceCommand.usageError(UsageError(message: "--duration '\(text)' is not a time; write e.g. 90s, 10m, 24h", commandPath: ["relaytrace", "simulate"]), ctx)
            }
            duration = .nanoseconds(ns)
        }
        if let file = args.value("faults") {
            guard let text = readTextFile(file) else {
                ctx.stderr.line("Error: cannot read the fault script '\(file)'")
                return .noInput
            }
            do throws(FaultScriptError) {
                _ = try FaultScript.parse(text)
            } catch {
                ctx.stderr.line("Error: \(file): \(error)")
                return .dataError
            }
            scenario.faults += "\n" + text
        }
        let output = args.value("output") ?? "\(scenario.name).rtrace"
        do {
            let (result, summary) = try ScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: output, overwrite: args.flag("force"))
            let c = result.counts
            ctx.stdout.line("simulated \(scenario.name) for \(result.end) (seed \(seed)): \(summary.records) records in \(summary.chunks) chunks, \(summary.bytes) bytes -> \(output)")
            ctx.stdout.line("  sockets opened \(c["opens", default: 0]), frames out \(c["framesOut", default: 0]), calls completed \(c["calls", default: 0]), events \(c["events", default: 0]), snapshots \(c["snapshots", default: 0]), faults \(c["faults", default: 0])")
            ctx.stdout.line("next: relaytrace info \(output)   relaytrace frames \(output) --format table")
            return .success
        } catch let error as TraceError {
            return writeFailed(error, output: output, ctx)
        } catch {
            ctx.stderr.line("Error: \(error)")
            return .dataError
        }
    }
}

extension SimulateCommand {
    /// `--scenario watch-*`: the watch channel's simulation (WatchSimulation), same options but `--faults`.
    static func runWatch(_ scenario: WatchScenario, _ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let usage = { (m: String) in RelayTraceCommand.usageError(UsageError(message: m, commandPath: ["relaytrace", "simulate"]), ctx) }
        guard args.value("faults") == nil else {
            return usage("--faults applies to the relay scenarios; \(scenario.name) has its own seeded datagram faults")
        }
        guard let seed = UInt64(args.value("seed") ?? "1") else { return usage("--seed takes a whole number from 0 to \(UInt64.max)") }
        var duration: Duration?
        if let text = args.value("duration") {
            guard let ns = FaultScript.parseDuration(text), ns > 0 else { return usage("--duration '\(text)' is not a time; write e.g. 90s, 10m, 24h") }
            duration = .nanoseconds(ns)
        }
        let output = args.value("output") ?? "\(scenario.name).rtrace"
        do throws(TraceError) {
            let (result, summary) = try WatchScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: output, overwrite: args.flag("force"))
            let c = result.counts
            ctx.stdout.line("simulated \(scenario.name) for \(result.end) (seed \(seed)): \(summary.records) records in \(summary.chunks) chunks, \(summary.bytes) bytes -> \(output)")
            ctx.stdout.line("  taps \(c["taps", default: 0]), confirmed \(c["confirmed", default: 0]), executed \(c["executed", default: 0]), sends \(c["sends", default: 0]), resends \(c["resends", default: 0]), datagrams lost \(c["datagramsLost", default: 0]), duplicated \(c["datagramsDuplicated", default: 0]), snapshots \(c["snapshotsSent", default: 0]), resyncs \(c["resyncs", default: 0])")
            ctx.stdout.line("next: relaytrace info \(output)   relaytrace frames \(output) --format table")
            return .success
        } catch {
            return writeFailed(error, output: output, ctx)
        }
    }

    /// Reports a trace error of a simulation (74 for a write error: the writer removes what it could
    /// not finish, so the next run needs no --force).
    static func writeFailed(_ error: TraceError, output: String, _ ctx: CLIContext) -> ExitCode {
        let left = FileManager.default.fileExists(atPath: output) ? "" : "; no file was left at \(output)"
        ctx.stderr.line(writeFailure(error, path: output) + left)
        return RelayTraceCommand.exitCode(for: error)
    }
}

/// The contents of a small text file, or nil.
func readTextFile(_ path: String) -> String? {
    try? String(contentsOfFile: path, encoding: .utf8)
}
