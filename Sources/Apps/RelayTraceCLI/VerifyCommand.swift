import Inspect
import RelayProtocol
import Trace

enum VerifyCommand {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "Check every checksum, the index against the chunks, and the trailer.",
        discussion: "Exits 0 when the trace is intact and complete, 65 with the byte offset of the first problem otherwise. The trailer's dropped count must equal the sum of the trace's dropped notices. Several FILEs or directories: one 'FILE: OK ...' line per intact trace (problems on stderr, each naming its file), or with --format jsonl one row per trace, opened or not: trace, traceId, status (ok, incomplete, damaged or unreadable), exitCode, records, chunks, complete, error (docs/COLUMNS.md); the exit code is the worst of all.",
        arguments: [TraceInputs.argument()],
        options: [
            OptionSpec(long: "allow-incomplete", help: "Accept a trace without index and trailer (a recorder that was killed), if every chunk checks out."),
            OptionSpec(long: "format", valueName: "format", help: "Output format: text or jsonl (one row per trace).", allowed: ["text", "jsonl"], defaultValue: "text"),
        ],
        run: { args, ctx in run(args, ctx) })

    /// What verifying one trace found: its verdict, exit code and figures, the line for stdout when it
    /// passed and the lines for stderr when it did not.
    struct Outcome {
        /// `ok`, `incomplete` (no index and trailer, accepted or not), `damaged` or `unreadable`.
        var status: String
        var code: ExitCode
        var records: UInt64 = 0
        var chunks = 0
        var complete = false
        /// The `OK...` line.
        var passed: String?
        /// What failed (said on stderr as `Error: ...`), and the line said under it.
        var problem: String?
        var detail: String?
    }

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let inputs: TraceInputs
        do { inputs = try TraceInputs(args, command: "verify") } catch { return RelayTraceCommand.usageError(error, ctx) }
        let jsonl = args.value("format") == "jsonl"
        return inputs.forEach(ctx) { file, opened in
            let outcome: Outcome
            var columns = TraceColumns(file: file, traceId: nil)
            switch opened {
            case .success(let reader):
                outcome = verify(reader, path: file, allowIncomplete: args.flag("allow-incomplete"))
                columns = TraceColumns(file: file, reader: reader)
            case .failure(let error):
                // Already reported on stderr by the opening.
                let code = RelayTraceCommand.exitCode(for: error)
                outcome = Outcome(status: Self.status(code), code: code, problem: error.description)
            }
            if jsonl {
                let row: JSONValue = [
                    "status": .string(outcome.status), "exitCode": .int(Int64(outcome.code.rawValue)),
                    "records": .int(Int64(outcome.records)), "chunks": .int(Int64(outcome.chunks)), "complete": .bool(outcome.complete),
                    "error": outcome.problem.map { .string($0) } ?? .null,
                ]
                PerTraceOutput.line(columns.tagged(row), ctx.stdout)
            }
            if case .failure = opened { return outcome.code }
            if let line = outcome.passed, !jsonl { ctx.stdout.line(inputs.isMany ? "\(columns.trace): \(line)" : line) }
            if let p = outcome.problem {
                ctx.stderr.line("Error: " + (inputs.isMany ? RelayTraceCommand.about(file, p) : p))
            }
            if let d = outcome.detail { ctx.stderr.line(d) }
            return outcome.code
        }
    }

    /// The status of a trace that could not be read for an error with exit code `code`: `damaged` (65:
    /// the data is wrong) or `unreadable` (66, 74: the file could not be opened or read).
    static func status(_ code: ExitCode) -> String { code == .dataError ? "damaged" : "unreadable" }

    /// Reads `reader` to its end checking every checksum, then the index, the trailer and the dropped
    /// notices against the trailer's count.
    static func verify(_ reader: TraceReader, path: String, allowIncomplete: Bool) -> Outcome {
        var records: UInt64 = 0
        var noticed: UInt64 = 0
        do {
            while let e = try reader.next() {
                records += 1
                guard e.record.kind == .dropped else { continue }
                guard let notice = DroppedNotice(payload: e.record.payload) else {
                    return Outcome(status: "damaged", code: .dataError, records: records, chunks: reader.statistics.chunksDecoded,
                                   problem: "verification failed: record \(e.number) is a dropped notice without a valid {count, overflow, oversized, firstTime, lastTime} (count = overflow + oversized >= 1, firstTime <= lastTime)")
                }
                noticed = noticed.addingReportingOverflow(notice.count).overflow ? .max : noticed + notice.count
            }
        } catch {
            let code = RelayTraceCommand.exitCode(for: error)
            return Outcome(status: Self.status(code), code: code, records: records, chunks: reader.statistics.chunksDecoded,
                           problem: "\(path): verification failed: \(error.description)",
                           detail: "  \(records) records before the problem are intact; 'relaytrace frames' reads them.")
        }
        let chunks = reader.statistics.chunksDecoded
        var o = Outcome(status: "ok", code: .success, records: records, chunks: chunks, complete: reader.isComplete)
        guard reader.isComplete else {
            let why = reader.trailerProblem.map { ": \($0.description)" } ?? ""
            o.status = "incomplete"
            if allowIncomplete {
                o.passed = "OK (incomplete): \(records) records in \(chunks) chunks check out; no index or trailer\(why)"
                return o
            }
            o.code = .dataError
            o.problem = "\(path) is incomplete: no valid index and trailer (the recorder did not close it)\(why)"
            o.detail = "  Its \(records) records in \(chunks) chunks check out; pass --allow-incomplete to accept it."
            return o
        }
        // A writer counts in its trailer exactly the drops its notices record (TRACE_FORMAT.md §3.6): a
        // claim beyond them is damage, however well checksummed.
        if let t = reader.trailer, t.droppedCount != noticed {
            o.status = "damaged"
            o.code = .dataError
            o.problem = "verification failed: the trailer claims \(t.droppedCount) dropped records but the trace's dropped notices account for \(noticed); the trailer is damaged"
            return o
        }
        o.passed = "OK: \(records) records in \(chunks) chunks; every CRC-32C and zstd checksum, the index and the trailer check out"
        return o
    }
}
