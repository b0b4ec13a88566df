#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Inspect
import RelayProtocol
import Trace
import Viewer

/// Opens `path` for writing (mode 0600; `-` is stdout) as an `Output`. An existing file is refused
/// unless `force` (then it is truncated), the one policy of every command that writes a file:
/// `Error: OUT exists; use --force to overwrite it` (the caller exits 74).
func openOutput(_ path: String, force: Bool, _ ctx: CLIContext) -> Output? {
    if path == "-" { return ctx.stdout }
    // A device or pipe (`/dev/null`, a FIFO) is written to, not overwritten.
    let special = !isExistingFile(path) && access(path, F_OK) == 0
    let fd = open(path, O_WRONLY | O_CLOEXEC | (special ? 0 : O_CREAT | (force ? O_TRUNC : O_EXCL)), 0o600)
    guard fd >= 0 else {
        let e = errno
        ctx.stderr.line(e == EEXIST ? existsMessage(path) : "Error: cannot create \(path): \(String(cString: strerror(e)))")
        return nil
    }
    return Output(fd: fd, name: path, owned: true)
}

/// Whether `path` is an existing regular file (what `--force` is needed to overwrite; a device such as
/// `/dev/null` or a pipe is not).
func isExistingFile(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
}

/// The refusal to overwrite an existing output file, the same for every command.
func existsMessage(_ path: String) -> String { "Error: \(path) exists; use --force to overwrite it" }

/// The `--force` option of a command that writes `what`.
func forceOption(_ what: String) -> OptionSpec {
    OptionSpec(long: "force", help: "Overwrite \(what) if it exists (otherwise an existing file is never touched).")
}

/// Whether a trace writer refused an existing file (`TraceWriterOptions.overwrite` false).
func refusedExisting(_ error: TraceError) -> Bool { error.code == .io && error.systemErrno == EEXIST }

/// The message for a trace writer that could not start on `path`: the refusal to overwrite, or the
/// error naming the file.
func writeFailure(_ error: TraceError, path: String) -> String {
    refusedExisting(error) ? existsMessage(path) : "Error: " + RelayTraceCommand.about(path, error.description)
}

/// After a command read `reader` to its end (or to `error`): on a trace its recorder did not close (no
/// valid index and trailer), says so on stderr with how many records are intact and when the last one
/// is, and returns true when `error` is only where the file was cut off (`truncated`): the trace's end,
/// not damage, so the command exits 0 after what it printed. Damage elsewhere stays an error.
@discardableResult
func noteIfIncomplete(_ reader: TraceReader, path: String, error: TraceError?, _ ctx: CLIContext) -> Bool {
    guard !reader.isComplete, error == nil || error?.code == .truncated else { return false }
    reader.rewind()
    var records: UInt64 = 0
    var last: Moment?
    while let e = try? reader.next() {
        records += 1
        last = e.record.time
    }
    var note = "note: \(path) is incomplete (no valid index and trailer: its recorder did not close it): \(records) intact records"
    note += last.map { ", the last at \($0)" } ?? ""
    if let error { note += "; the file ends in the middle of a frame (\(error.description))" }
    else if let why = reader.trailerProblem { note += "; \(why.description)" }
    ctx.stderr.line(note + ". What is shown ends there; 'relaytrace verify' exits 65 on it.")
    return error != nil
}

/// Finishes an output file: flushes and closes it; a failed write or close is reported (exit 74).
/// Stdout (`-`) is left to the command's end (`CLIContext.finish`).
func finishOutput(_ out: Output, _ ctx: CLIContext) -> ExitCode {
    if out === ctx.stdout { return .success }
    return out.finish(reportingTo: ctx.stderr) ?? .success
}

/// The `--since/--until` options of the commands that read a window of a trace.
let windowOptions = [
    OptionSpec(long: "since", valueName: "time", help: "Only records at or after this time (seconds or 1m30s, 250ms); the first chunk is found through the index."),
    OptionSpec(long: "until", valueName: "time", help: "Only records at or before this time; reading stops after the last chunk that can hold one."),
]

/// The window `--since/--until` ask for (usage errors name the command).
func window(_ args: ParsedArguments, _ command: String) throws(UsageError) -> (since: Moment?, until: Moment?) {
    let path = ["relaytrace", command]
    var since: Moment?
    var until: Moment?
    do throws(FilterError) {
        if let s = args.value("since") { since = try FrameFilter.time(s, option: "--since") }
        if let u = args.value("until") { until = try FrameFilter.time(u, option: "--until") }
    } catch {
        throw UsageError(message: error.message, commandPath: path)
    }
    if let since, let until, until < since {
        throw UsageError(message: "--until (\(until)) is before --since (\(since))", commandPath: path)
    }
    return (since, until)
}

/// Reports a read error of `path` after partial output.
func readFailure(_ e: TraceError, path: String, _ ctx: CLIContext) -> ExitCode {
    ctx.stdout.flush()
    ctx.stderr.line("Error: \(path == "-" ? "stdin" : path): \(e.description)")
    return RelayTraceCommand.exitCode(for: e)
}

/// The end of a command that read a whole trace: a read error (other than the cut-off end of an
/// incomplete trace, which is noted) is reported with the file's name.
func finishReading(_ reader: TraceReader, path: String, error: TraceError?, _ ctx: CLIContext) -> ExitCode? {
    ctx.stdout.flush()
    let cutEnd = noteIfIncomplete(reader, path: path == "-" ? "stdin" : path, error: error, ctx)
    if let error, !cutEnd { return readFailure(error, path: path, ctx) }
    return nil
}

enum ShowCommand {
    static let spec = CommandSpec(
        name: "show",
        abstract: "Show one record in full as pretty JSON, with redaction placeholders marked.",
        discussion: "The object has the fields of 'frames --format jsonl', the payload in full (json, text, or base64 for binary), and 'redacted': the JSON paths that hold redaction placeholders (coloured on a terminal). Seeks with the index: reads one chunk.",
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin)."),
                    ArgumentSpec(name: "n", help: "The record number (0-based, as 'frames' shows it).")],
        options: [OptionSpec(long: "color", valueName: "when", help: "auto, always or never; NO_COLOR always wins.", allowed: ["auto", "always", "never"], defaultValue: "auto")],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        guard let n = UInt64(args.positionals["n"] ?? "") else {
            return RelayTraceCommand.usageError(UsageError(message: "'\(args.positionals["n"] ?? "")' is not a record number; write a number from 0, as 'relaytrace frames' shows it", commandPath: ["relaytrace", "show"]), ctx)
        }
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(args.positionals["file"] ?? "", ctx) } catch { return error }
        let entry: TraceEntry?
        do {
            try reader.seek(toRecord: n)
            entry = try reader.next()
        } catch {
            if error.code == .invalidArgument {
                ctx.stderr.line("Error: \(error.message); 'relaytrace info' shows how many records it has")
                return .usage
            }
            return readFailure(error, path: args.positionals["file"] ?? "", ctx)
        }
        guard let entry, entry.number == n else {
            ctx.stderr.line("Error: record \(n) is past the end of the trace; 'relaytrace info' shows how many records it has")
            return .usage
        }
        let rec = InspectedRecord(entry)
        var text = rec.detail.prettyText()
        if Terminal.useColor(args.value("color")) {
            text = text.replacingAll(Redactor.placeholderPrefix) { "\u{1B}[35m" + $0 + "\u{1B}[0m" }
        }
        ctx.stdout.line(text)
        return .success
    }
}

extension String {
    /// Colours every placeholder (prefix + 16 hex digits).
    func replacingAll(_ prefix: String, _ paint: (String) -> String) -> String {
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: prefix) {
            out += rest[..<r.lowerBound]
            let end = rest.index(r.lowerBound, offsetBy: prefix.count + 16, limitedBy: rest.endIndex) ?? rest.endIndex
            out += paint(String(rest[r.lowerBound..<end]))
            rest = rest[end...]
        }
        return out + rest
    }
}

enum StatsCommand {
    static let spec = CommandSpec(
        name: "stats",
        abstract: "Counts, bytes, RPC latencies, generations, reconnects, leases and heartbeat jitter of traces.",
        discussion: "Counts and bytes per record kind, message type and event type; RPC latency p50/p90/p99/max per method; per generation: open, registered, closed and why, duration; reconnects; lease renewals, late renewals (> 25 s) and gaps (> 40 s); heartbeat spacing and jitter (standard deviation). Several FILEs or directories: each trace's figures under a '==> FILE <==' heading (text), one JSON array (json), or one row per trace (jsonl: the json object with trace, traceId, start, complete and error; docs/COLUMNS.md). Exits 65 on a damaged trace after printing the figures of what could be read; with several traces, the worst exit code of all.",
        arguments: [TraceInputs.argument()],
        options: [OptionSpec(long: "format", valueName: "format", help: "Output format: text, json or jsonl (one row per trace).", allowed: ["text", "json", "jsonl"], defaultValue: "text")] + windowOptions,
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let w: (since: Moment?, until: Moment?)
        let inputs: TraceInputs
        do {
            w = try window(args, "stats")
            inputs = try TraceInputs(args, command: "stats")
        } catch { return RelayTraceCommand.usageError(error, ctx) }
        var output = PerTraceOutput(format: args.value("format") ?? "text", isMany: inputs.isMany)
        let worst = inputs.forEachOpened(ctx) { file, reader in
            let (stats, error) = figures(reader, since: w.since, until: w.until)
            let columns = TraceColumns(file: file, reader: reader)
            output.add(columns, rows: {
                guard case .object(var o) = stats.json else { return [] }
                o["start"] = columns.ts(.zero)
                o["complete"] = .bool(reader.isComplete)
                o["error"] = error.map { .string($0.description) } ?? .null
                return [.object(o)]
            }, json: { stats.json }, text: { stats.text }, ctx.stdout)
            return finishReading(reader, path: file, error: error, ctx) ?? .success
        }
        output.finish(ctx.stdout)
        return worst
    }

    /// The figures of one trace (within the window), and the error that cut them short.
    static func figures(_ reader: TraceReader, since: Moment?, until: Moment?) -> (TraceStats, TraceError?) {
        var stats = TraceStats()
        let error: TraceError?
        if RelayTraceCommand.scanWorkers == 0 {
            error = readAll(reader, label: "stats", since: since, until: until) { stats.add($0); return true }
        } else {
            let progress = Progress("stats", totalBytes: reader.source.size)
            (stats, error) = TraceStats.read(reader, since: since, until: until, workers: RelayTraceCommand.scanWorkers) {
                progress.report(records: $0, bytes: reader.statistics.bytesRead)
            }
            progress.done()
        }
        stats.finish()
        return (stats, error)
    }
}

enum TimelineCommand {
    static let spec = CommandSpec(
        name: "timeline",
        abstract: "Draw a trace's timeline (ASCII, or self-contained HTML/SVG) with derived checks.",
        discussion: "One lane per generation (open, register, registered, heartbeats and pings, RPC spans, close), a lease lane (renewals held until the next, the release or expiry), a recovery lane (epochs), a timer lane (armed to fired, cancelled or deadline) and a watch lane for watch-channel records. Checks printed under the picture: lease renewed late (> 25 s) or after expiry (> 40 s), two live generations at once, a registration that never completed, a timer that fired without being armed. --html saves the page of 'relaytrace view' with the trace's data in it (one self-contained file to share: generations packed into rows, zoom that redraws its ticks, frame list, filter, detail pane; the first \(SavedPage.maxRecords) records listed).",
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin).")],
        options: [
            OptionSpec(long: "html", valueName: "out", help: "Write the HTML page to this file instead of drawing ASCII."),
            OptionSpec(long: "width", valueName: "columns", help: "Width of the ASCII picture.", defaultValue: "100"),
            OptionSpec(long: "strict", help: "Exit 1 when a check fails."),
            forceOption("the --html file"),
        ] + windowOptions,
        rules: [.requires("force", ["html"])],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        guard let width = Int(args.value("width") ?? ""), (40...1000).contains(width) else {
            return RelayTraceCommand.usageError(UsageError(message: "--width must be a number of columns from 40 to 1000", commandPath: ["relaytrace", "timeline"]), ctx)
        }
        let w: (since: Moment?, until: Moment?)
        do { w = try window(args, "timeline") } catch { return RelayTraceCommand.usageError(error, ctx) }
        if args.value("html") != nil && (w.since != nil || w.until != nil) {
            return RelayTraceCommand.usageError(UsageError(message: "--since/--until draw part of the ASCII picture; the page --html saves covers the whole trace (relaytrace view zooms into any window)", commandPath: ["relaytrace", "timeline"]), ctx)
        }
        let path = args.positionals["file"] ?? ""
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(path, ctx) } catch { return error }
        if let out = args.value("html") {
            // The viewer's page saved with its data (relaytrace view serves the same page live).
            let title = path == "-" ? "stdin" : path
            let page = SavedPage(reader: reader, title: title)
            guard let o = openOutput(out, force: args.flag("force"), ctx) else { return .ioError }
            o.write(page.html(title: title))
            let code = finishOutput(o, ctx)
            if code != .success { return code }
            let rows = TimelineLayout(page.timeline).rows.count
            ctx.stderr.line("wrote \(out): \(page.timeline.lanes.count) lanes in \(rows) rows, \(page.timeline.checks.count) check(s) failed")
            if let code = finishReading(reader, path: path, error: page.problem, ctx) { return code }
            return args.flag("strict") && !page.timeline.checks.isEmpty ? .found : .success
        }
        var t = Timeline()
        let error = readAll(reader, label: "timeline", since: w.since, until: w.until) { t.add($0); return true }
        t.finish()
        ctx.stdout.write(t.ascii(width: width))
        if let code = finishReading(reader, path: path, error: error, ctx) { return code }
        return args.flag("strict") && !t.checks.isEmpty ? .found : .success
    }
}

enum DiffCommand {
    static let spec = CommandSpec(
        name: "diff",
        abstract: "Compare two traces semantically; exit 0 when equal, 1 when they differ.",
        discussion: "Aligns the k-th generation of A with the k-th of B and compares records in order: kind, channel, direction and payload. JSON is compared as values (key order ignored); redaction placeholders match each other; volatile members are ignored at every depth: \(TraceDiff.volatileKeys.sorted().joined(separator: ", ")), and at a payload's top level: \(TraceDiff.topLevelVolatileKeys.sorted().joined(separator: ", ")) (the relay's session). Times are compared only with --times: records of A and B more than TOLERANCE apart are a difference (a changed backoff shows). Prints the first difference, then all.",
        arguments: [ArgumentSpec(name: "a", help: "The first trace."), ArgumentSpec(name: "b", help: "The second trace.")],
        options: [
            OptionSpec(long: "ignore", valueName: "keys", help: "More member names to ignore (comma list)."),
            OptionSpec(long: "max", valueName: "n", help: "Print at most this many differences.", defaultValue: "100"),
            OptionSpec(long: "times", valueName: "tolerance", help: "Compare record times too: aligned records more than this apart differ (e.g. 50ms, 1s, 0)."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        guard let limit = Int(args.value("max") ?? ""), limit >= 1 else {
            return RelayTraceCommand.usageError(UsageError(message: "--max must be a positive number", commandPath: ["relaytrace", "diff"]), ctx)
        }
        var tolerance: Duration?
        if let t = args.value("times") {
            guard let ns = TimeSyntax.nanoseconds(t, bareSeconds: true), ns >= 0 else {
                return RelayTraceCommand.usageError(UsageError(message: "--times '\(t)' is not a tolerance; write e.g. 50ms, 1s, 0", commandPath: ["relaytrace", "diff"]), ctx)
            }
            tolerance = .nanoseconds(ns)
        }
        let d = TraceDiff(ignoring: args.value("ignore").map(FrameFilter.list) ?? [], timeTolerance: tolerance)
        var sides: [[String: [TraceDiff.Item]]] = []
        for name in ["a", "b"] {
            let path = args.positionals[name] ?? ""
            let reader: TraceReader
            do { reader = try RelayTraceCommand.openTrace(path, ctx) } catch { return error }
            do { sides.append(try d.streams(reader)) } catch { return readFailure(error, path: path, ctx) }
        }
        let diffs = d.compare(sides[0], sides[1])
        let records = sides.map { $0.values.reduce(0) { $0 + $1.count } }
        guard let first = diffs.first else {
            ctx.stdout.line("no differences (\(records[0]) records in A, \(records[1]) in B)")
            return .success
        }
        ctx.stdout.line("first difference: \(first)")
        ctx.stdout.line("\(diffs.count) difference(s) (\(records[0]) records in A, \(records[1]) in B):")
        for x in diffs.prefix(limit) { ctx.stdout.line("  \(x)") }
        if diffs.count > limit { ctx.stdout.line("  ... \(diffs.count - limit) more (--max)") }
        return .found
    }
}

enum ExportCommand {
    static let spec = CommandSpec(
        name: "export",
        abstract: "Export traces as JSONL (DuckDB, Spark, jq: many traces in one table), or one trace as pcapng (Wireshark/tshark), HAR (Chrome DevTools) or Chrome trace-event JSON.",
        discussion: "jsonl: one JSON object per record, the lines of 'frames --format jsonl' with the columns trace (the file), traceId (its header's identity), ts (wall-clock time, ISO 8601) and payload (the payload's JSON as a string); several FILEs and directories make one table, read one trace after another in constant memory (docs/COLUMNS.md: every column, its type, and DuckDB and Spark schemas). pcapng: one interface per transport generation named gen<N> (tshark: frame.interface_name == \"gen2\"), link type 252 exported PDUs for the websocket dissector (tshark -o websocket.text_type:\"As JSON\"). har: one entry per socket (transport generation) with _resourceType websocket and _webSocketMessages, the shape Chrome DevTools' HAR importer reads. chrome-trace: tracks per generation, slices for RPCs, async spans for leases (chrome://tracing, ui.perfetto.dev). pcapng, har and chrome-trace take one trace (several are a usage error, exit 64). With several traces a trace that cannot be read is reported and the others exported; the exit code is the worst of all. Shows a progress line on a terminal.",
        arguments: [TraceInputs.argument("The trace files (several only with jsonl)")],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "pcapng, har, jsonl or chrome-trace.", allowed: ["pcapng", "har", "jsonl", "chrome-trace"]),
            OptionSpec(long: "output", short: "o", valueName: "out", help: "The output file ('-' for stdout)."),
            forceOption("the output file"),
        ] + windowOptions,
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "export"]
        guard let format = args.value("format") else {
            return RelayTraceCommand.usageError(UsageError(message: "Missing expected option '--format <format>'", commandPath: path), ctx)
        }
        guard let outPath = args.value("output") else {
            return RelayTraceCommand.usageError(UsageError(message: "Missing expected option '-o <out>'", commandPath: path), ctx)
        }
        let w: (since: Moment?, until: Moment?)
        let inputs: TraceInputs
        do {
            w = try window(args, "export")
            inputs = try TraceInputs(args, command: "export")
        } catch { return RelayTraceCommand.usageError(error, ctx) }
        if format == "jsonl" { return jsonl(inputs, outPath: outPath, window: w, args, ctx) }
        if inputs.isMany {
            return RelayTraceCommand.usageError(UsageError(message: "--format \(format) writes one trace's file; give one trace (--format jsonl exports many into one table)", commandPath: path), ctx)
        }
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(args.positionals["file"] ?? "", ctx) } catch { return error }
        guard let out = openOutput(outPath, force: args.flag("force"), ctx) else { return .ioError }
        let start = unixNanoseconds(rfc3339: reader.header.wallClockStart) ?? 0
        var error: TraceError?
        var count = 0
        switch format {
        case "pcapng":
            var x = PcapngExporter(wallClockStartNs: start) { out.write(bytes: $0) }
            error = readAll(reader, label: "export", since: w.since, until: w.until) { x.add($0); return !out.isBroken }
            x.finish()
            count = x.packets
        case "har":
            var x = HARExporter(wallClockStartNs: start)
            error = readAll(reader, label: "export", since: w.since, until: w.until) { x.add($0); return true }
            let doc = x.finish()
            count = doc["log"]?["entries"]?.arrayValue?.count ?? 0
            out.write(doc.prettyText())
            out.write("\n")
        default:
            var x = ChromeTraceExporter { out.write(bytes: $0) }
            error = readAll(reader, label: "export", since: w.since, until: w.until) { x.add($0); count += 1; return !out.isBroken }
            x.finish()
        }
        let code = finishOutput(out, ctx)
        if code != .success { return code }
        if let code = finishReading(reader, path: args.positionals["file"] ?? "", error: error, ctx) { return code }
        if outPath != "-" {
            let unit = ["pcapng": "packets", "har": "entries"][format] ?? "records"
            ctx.stderr.line("wrote \(outPath): \(count) \(unit)")
        }
        return .success
    }

    /// `--format jsonl`: every trace's rows (``InspectedRecord/exportLine(_:)``, RPCs correlated within
    /// their trace) into one output, opened when the first trace opens (no trace: no file).
    static func jsonl(_ inputs: TraceInputs, outPath: String, window w: (since: Moment?, until: Moment?), _ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        var out: Output?
        var count = 0
        var traces = 0
        var failedOutput = false
        let worst = inputs.forEachOpened(ctx) { file, reader in
            if failedOutput || out?.isBroken == true { return .ioError }
            if out == nil {
                out = openOutput(outPath, force: args.flag("force"), ctx)
                if out == nil { failedOutput = true; return .ioError }
            }
            guard let o = out else { return .ioError }
            let columns = TraceColumns(file: file, reader: reader)
            var c = RpcCorrelator()
            let error = readAll(reader, label: "export", since: w.since, until: w.until) { r in
                var rec = r
                c.correlate(&rec)
                o.write(bytes: rec.exportLine(columns).serialized())
                o.write("\n")
                count += 1
                return !o.isBroken
            }
            traces += 1
            if o.isBroken { return .success }  // reported when the output is finished
            return finishReading(reader, path: file, error: error, ctx) ?? .success
        }
        if let out {
            let code = finishOutput(out, ctx)
            if code != .success { return code }
            // One trace: said only when it was read to its end, as always; many: also after a failure.
            if outPath != "-", inputs.isMany || worst == .success {
                ctx.stderr.line("wrote \(outPath): \(count) records" + (inputs.isMany ? " from \(traces) traces" : ""))
            }
        }
        return worst
    }
}

enum RedactCommand {
    static let spec = CommandSpec(
        name: "redact",
        abstract: "Rewrite a trace with a new redaction key (re-key) and/or more redacted members (strengthen).",
        discussion: "Every placeholder of IN is mapped to a new placeholder keyed with a fresh random key (equal secrets stay equal; the old key no longer confirms guesses), the values of --keys members become placeholders, and the standard redaction (docs/TRACE_FORMAT.md section 8) is applied with the new key, so a raw trace comes out redacted. OUT must not exist unless --force.",
        arguments: [ArgumentSpec(name: "in", help: "The trace to read ('-' for stdin)."), ArgumentSpec(name: "out", help: "The trace to write.")],
        options: [
            OptionSpec(long: "keys", valueName: "names", help: "More member names to redact (comma list, any case), e.g. deviceId,deviceName."),
            OptionSpec(long: "keep-key", help: "Keep IN's key and placeholders (only strengthen)."),
            OptionSpec(long: "force", help: "Overwrite OUT."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let inPath = args.positionals["in"] ?? ""
        let outPath = args.positionals["out"] ?? ""
        if inPath == outPath {
            return RelayTraceCommand.usageError(UsageError(message: "IN and OUT are the same file; write to a new file", commandPath: ["relaytrace", "redact"]), ctx)
        }
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(inPath, ctx) } catch { return error }
        let keep = args.flag("keep-key") && reader.header.redaction.policy != .raw
        let key = keep ? reader.header.redaction.key : Redactor.randomKey()
        let rewriter = Rekeyer(redactor: Redactor(policy: .hashed, key: key), extraKeys: args.value("keys").map(FrameFilter.list) ?? [], rekey: !keep)
        var header = reader.header
        header.client = rewriter.rewrite(json: header.client, key: nil)
        var options = TraceWriterOptions()
        options.redaction = .hashed
        options.redactionKey = key
        options.overwrite = args.flag("force")
        options.removeIncompleteFile = true  // OUT can be made again from IN
        let writer: TraceWriter
        do { writer = try TraceWriter(path: outPath, header: header, options: options) } catch {
            ctx.stderr.line(writeFailure(error, path: outPath))
            return error.code == .io ? .ioError : .dataError
        }
        var written: UInt64 = 0
        let error = readAll(reader, label: "redact") { rec in
            var r = rec.record
            r.payload = rewriter.rewrite(payload: r.payload, kind: r.kind)
            while writer.queueDepth > options.queueCapacity / 2 { usleep(500) }  // back-pressure: never drop
            _ = writer.append(r)
            written += 1
            return true
        }
        let summary: TraceWriterSummary
        do { summary = try writer.close() } catch {
            ctx.stderr.line("Error: writing \(outPath) failed: \(error.description)")
            return .ioError
        }
        if let error { return readFailure(error, path: inPath, ctx) }
        guard summary.dropped == 0 else {
            ctx.stderr.line("Error: the writer dropped \(summary.dropped) records; \(outPath) is incomplete")
            return .ioError
        }
        ctx.stderr.line("wrote \(outPath): \(written) records, key id \(Redactor(policy: .hashed, key: key).keyID)" + (keep ? " (kept)" : " (new)"))
        return .success
    }
}

enum LintCommand {
    static let spec = CommandSpec(
        name: "lint",
        abstract: "Scan every payload for secrets; exit 1 with their locations when any is found.",
        discussion: "Finds JWT-shaped strings (signed or unsigned, as redact recognises them), bearer credentials, values of secret-named members (authorization, resumeToken, jwt, token, password...) that are not placeholders, and long random tokens (40+ characters of [A-Za-z0-9_-] mixing upper case, lower case and digits). Placeholders never count. Prints record number, time, kind, JSON path (or text offset), rule and a masked excerpt. Shows a progress line on a terminal.",
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin).")],
        options: [OptionSpec(long: "format", valueName: "format", help: "Output format: text or json.", allowed: ["text", "json"], defaultValue: "text")],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(args.positionals["file"] ?? "", ctx) } catch { return error }
        let scanner = SecretScanner()
        var findings = scanner.scan(json: reader.header.client, kind: "header")
        var records: UInt64 = 0
        let error = readAll(reader, label: "lint") { rec in
            records += 1
            findings += scanner.scan(rec)
            return true
        }
        if args.value("format") == "json" {
            let list: [JSONValue] = findings.map {
                ["rule": .string($0.rule), "record": $0.record.map { .int(Int64(bitPattern: $0)) } ?? .null, "t": .double($0.time.seconds),
                 "kind": .string($0.kind), "location": .string($0.location), "excerpt": .string($0.excerpt)]
            }
            ctx.stdout.line(JSONValue.object(["records": .int(Int64(records)), "findings": .array(list)]).prettyText())
        } else if findings.isEmpty {
            ctx.stdout.line("no secrets found in \(records) records")
        } else {
            for f in findings { ctx.stdout.line(f.description) }
            ctx.stdout.line("\(findings.count) secret(s) found in \(records) records")
        }
        if let code = finishReading(reader, path: args.positionals["file"] ?? "", error: error, ctx) { return code }
        return findings.isEmpty ? .success : .found
    }
}
