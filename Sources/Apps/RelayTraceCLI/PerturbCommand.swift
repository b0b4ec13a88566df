#if canImport(Glibc)
import Glibc
#endif
import Replay
import Trace
import WatchReplay

/// `relaytrace replay FILE --perturb SEED[..SEED] [--shrink OUT]`: perturbation replay of either channel.
enum PerturbCommand {
    static func run(path: String, seeds text: String, shrinkTo out: String?, force: Bool, _ ctx: CLIContext) -> ExitCode {
        let range: SeedRange
        do throws(PerturbationError) { range = try SeedRange(parsing: text) } catch {
            return RelayTraceCommand.usageError(UsageError(message: error.message, commandPath: ["relaytrace", "replay"]), ctx)
        }
        // The output is checked before the (long) runs, as every command that writes a file does.
        if let out, !force {
            for existing in [out, out + ".faults.json"] where isExistingFile(existing) {
                ctx.stderr.line(existsMessage(existing))
                return .ioError
            }
        }
        let header: TraceHeader, records: [TraceRecord]
        do throws(TraceError) {
            let reader = try TraceReader(path: path)
            let all = reader.readAll()
            if let e = all.error { throw e }
            header = reader.header
            records = all.entries.map(\.record)
        } catch {
            ctx.stderr.line("Error: " + RelayTraceCommand.about(path, error.description))
            return RelayTraceCommand.exitCode(for: error)
        }
        // The channel: a watch trace has its records on channel `watch`.
        let isWatch = ReplayCommand.isWatchTrace(header) { records.contains { $0.channel == .watch } }
        let runSeed: (UInt64) -> PerturbedRun
        let shrink: (PerturbedRun) -> PerturbedRun
        let channel: String
        let deliveries: Int
        if isWatch {
            let p: WatchPerturbation
            do throws(PerturbationError) { p = try WatchPerturbation(header: header, records: records) } catch {
                ctx.stderr.line("Error: \(error.message)")
                return .dataError
            }
            runSeed = { p.run(seed: $0) }
            shrink = {
                let s = p.shrink($0)
                var r = s.run
                r.scriptNote = "\(s.taps) of \(p.tapCount) taps kept"
                return r
            }
            channel = "watch"
            deliveries = p.baselineDeliveries
        } else {
            let p: RelayPerturbation
            do throws(ReplayError) { p = try RelayPerturbation(header: header, records: records) } catch {
                ctx.stderr.line("Error: \(error.message)")
                return .dataError
            }
            runSeed = { p.run(seed: $0) }
            shrink = { p.shrink($0) }
            channel = "relay"
            deliveries = p.baselineDeliveries
        }
        ctx.stdout.line("perturbing \(path) (channel \(channel), \(deliveries) deliveries unperturbed), seeds \(range.lower)...\(range.upper)")
        var failures = 0, runs = 0
        var first: PerturbedRun?
        for seed in range.seeds {
            let r = runSeed(seed)
            runs += 1
            guard r.violation != nil else { continue }
            failures += 1
            if first == nil { first = r }
            ctx.stdout.line(r.line)
        }
        ctx.stdout.line("\(runs) seed(s) run, \(failures) broke an invariant" + (failures == 0 ? ": every invariant holds" : ""))
        if let out, let first {
            let shrunk = shrink(first)
            do throws(TraceError) {
                try PerturbationOutput.write(header: header, records: shrunk.records, run: shrunk, to: out, overwrite: force)
            } catch {
                ctx.stderr.line(writeFailure(error, path: out))
                return RelayTraceCommand.exitCode(for: error)
            }
            ctx.stdout.line("shrunk seed \(first.seed.map(String.init) ?? "?") from \(first.faults.count) to \(shrunk.faults.count) fault(s)" + (shrunk.scriptNote.map { ", \($0)" } ?? "") + ": \(shrunk.line)")
            ctx.stderr.line("wrote \(out) (\(shrunk.records.count) records) and \(out).faults.json")
        }
        return failures == 0 ? .success : .found
    }
}
