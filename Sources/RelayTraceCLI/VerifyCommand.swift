import Trace

enum VerifyCommand {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "Check every checksum, the index against the chunks, and the trailer.",
        discussion: "Exits 0 when the trace is intact and complete, 65 with the byte offset of the first problem otherwise. The trailer's dropped count must equal the sum of the trace's dropped notices.",
        arguments: [ArgumentSpec(name: "file", help: "The trace file.")],
        options: [OptionSpec(long: "allow-incomplete", help: "Accept a trace without index and trailer (a recorder that was killed), if every chunk checks out.")],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = args.positionals["file"] ?? ""
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(path, ctx) } catch { return error }
        var records: UInt64 = 0
        var noticed: UInt64 = 0
        do {
            while let e = try reader.next() {
                records += 1
                guard e.record.kind == .dropped else { continue }
                guard let notice = DroppedNotice(payload: e.record.payload) else {
                    ctx.stderr.line("Error: verification failed: record \(e.number) is a dropped notice without a valid {count, overflow, oversized, firstTime, lastTime} (count = overflow + oversized >= 1, firstTime <= lastTime)")
                    return .dataError
                }
                noticed = noticed.addingReportingOverflow(notice.count).overflow ? .max : noticed + notice.count
            }
        } catch {
            ctx.stderr.line("Error: \(path): verification failed: \(error.description)")
            ctx.stderr.line("  \(records) records before the problem are intact; 'relaytrace frames' reads them.")
            return RelayTraceCommand.exitCode(for: error)
        }
        let chunks = reader.statistics.chunksDecoded
        guard reader.isComplete else {
            let why = reader.trailerProblem.map { ": \($0.description)" } ?? ""
            if args.flag("allow-incomplete") {
                ctx.stdout.line("OK (incomplete): \(records) records in \(chunks) chunks check out; no index or trailer\(why)")
                return .success
            }
            ctx.stderr.line("Error: \(path) is incomplete: no valid index and trailer (the recorder did not close it)\(why)")
            ctx.stderr.line("  Its \(records) records in \(chunks) chunks check out; pass --allow-incomplete to accept it.")
            return .dataError
        }
        // A writer counts in its trailer exactly the drops its notices record (TRACE_FORMAT.md §3.6): a
        // claim beyond them is damage, however well checksummed.
        if let t = reader.trailer, t.droppedCount != noticed {
            ctx.stderr.line("Error: verification failed: the trailer claims \(t.droppedCount) dropped records but the trace's dropped notices account for \(noticed); the trailer is damaged")
            return .dataError
        }
        ctx.stdout.line("OK: \(records) records in \(chunks) chunks; every CRC-32C and zstd checksum, the index and the trailer check out")
        return .success
    }
}
