import Inspect
import RelayProtocol
import Trace

enum FramesCommand {
    static let spec = CommandSpec(
        name: "frames",
        abstract: "List the records of a trace, one per line, with filters.",
        discussion: """
            Filters combine (all must hold; a comma list matches any of its values). RPC responses are \
            correlated with their requests (method and latency on the response). PTC1 frames are decoded. \
            Streams in constant memory. FILE '-' reads stdin.
            Names are checked: an unknown --type, --event or --method value is a usage error with a \
            suggestion; a known one that matched nothing gets a warning on stderr. --follow ID tells one \
            RPC's story. A trace its recorder did not close is read to its last intact record and said so \
            on stderr (exit 0).
            table (the default on a terminal): a header row, then index, time, generation, direction, type, \
            one-line summary. \
            jsonl (the default otherwise): one JSON object per record with index, t (seconds since start), \
            kind, channel, gen, dir, summary; text frames add type, eventType, method, id, eventId, json, \
            latencyMs; binary frames add bytes (and session, dataBytes, preview for PTC1). json: one JSON \
            array of the same objects. raw: each payload as is, one per line.
            """,
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin).")],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "Output format: table, jsonl, json or raw (default: table on a terminal, jsonl otherwise).", allowed: ["table", "jsonl", "json", "raw"]),
            OptionSpec(long: "gen", valueName: "n[,m]", help: "Only these transport generations.", repeatable: true),
            OptionSpec(long: "dir", valueName: "dir", help: "Only frames in this direction: in (relay to client) or out.", allowed: ["in", "out"]),
            OptionSpec(long: "type", valueName: "types", help: "Only these message types (rpc.request, event...) or record kinds (transportClosed...).", repeatable: true),
            OptionSpec(long: "event", valueName: "events", help: "Only events of these types (device-status, chat:timeline-interest...).", repeatable: true),
            OptionSpec(long: "method", valueName: "methods", help: "Only RPCs of these methods (requests and their responses).", repeatable: true),
            OptionSpec(long: "rpc-id", valueName: "ids", help: "Only RPCs with these ids: requests, responses and the client's records naming them (rpcTimeout timers).", repeatable: true),
            OptionSpec(long: "follow", valueName: "id", help: "Tell one RPC's story (a request id, or a call id): the call input, the request, its timers, responses or failure, the socket's end and callCompleted, with the time since it started."),
            OptionSpec(long: "since", valueName: "time", help: "Only records at or after this time (seconds or 1m30s, 250ms)."),
            OptionSpec(long: "until", valueName: "time", help: "Only records at or before this time."),
            OptionSpec(long: "grep", valueName: "text", help: "Only records whose payload contains this text (PTC1 frames: their terminal data)."),
            OptionSpec(long: "channel", valueName: "channel", help: "Only this channel.", allowed: ["relay", "watch"]),
            OptionSpec(long: "color", valueName: "when", help: "Colour the table: auto (on a terminal), always or never; NO_COLOR always wins.", allowed: ["auto", "always", "never"], defaultValue: "auto"),
            OptionSpec(long: "salvage", help: "Skip damaged chunks (reporting each on stderr) instead of stopping at the first."),
        ],
        run: { args, ctx in run(args, ctx) })

    /// The values of a list option: every `--name a,b` given, as one comma list (nil when not given).
    static func list(_ args: ParsedArguments, _ name: String) -> String? {
        let all = args.array(name)
        return all.isEmpty ? nil : all.joined(separator: ",")
    }

    /// Builds the filter from the options (usage errors name the option; unknown names are refused).
    static func filter(_ args: ParsedArguments) throws(UsageError) -> FrameFilter {
        let path = ["relaytrace", "frames"]
        var f = FrameFilter()
        do throws(FilterError) {
            if let g = list(args, "gen") { f.generations = try FrameFilter.generations(g) }
            if let s = args.value("since") { f.since = try FrameFilter.time(s, option: "--since") }
            if let s = args.value("until") { f.until = try FrameFilter.time(s, option: "--until") }
        } catch {
            throw UsageError(message: error.message, commandPath: path)
        }
        if let d = args.value("dir") { f.direction = d == "in" ? .inbound : .outbound }
        if let t = list(args, "type") { f.types = FrameFilter.list(t) }
        if let e = list(args, "event") { f.events = FrameFilter.list(e) }
        if let m = list(args, "method") { f.methods = FrameFilter.list(m) }
        if let i = list(args, "rpc-id") { f.rpcIds = FrameFilter.list(i) }
        try NameCheck.check((f.types ?? []).sorted(), NameCheck.types, path: path)
        try NameCheck.check((f.events ?? []).sorted(), NameCheck.events, path: path)
        try NameCheck.check((f.methods ?? []).sorted(), NameCheck.methods, path: path)
        if let g = args.value("grep") { f.grep = g }
        if let c = args.value("channel") { f.channel = c == "relay" ? .relay : .watch }
        if let s = f.since, let u = f.until, u < s {
            throw UsageError(message: "--until (\(u)) is before --since (\(s))", commandPath: path)
        }
        return f
    }

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let f: FrameFilter
        do { f = try filter(args) } catch { return RelayTraceCommand.usageError(error, ctx) }
        let path = args.positionals["file"] ?? ""
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(path, ctx, salvage: args.flag("salvage")) } catch { return error }
        let format = args.value("format") ?? (Terminal.isTTY(1) ? "table" : "jsonl")
        let color = format == "table" && Terminal.useColor(args.value("color"))
        let name = path == "-" ? "stdin" : path
        if let id = args.value("follow") { return follow(id, reader, f, format: format, color: color, file: name, ctx) }
        let hits = FilterHits()
        // Rendered where the record is built (on the scan's worker threads); written here in order.
        let render: @Sendable (InspectedRecord) -> [UInt8] = { rec in
            hits.note(rec)
            switch format {
            case "table": return Array((tableLine(rec, color: color) + "\n").utf8)
            case "json": return rec.jsonLine.serialized()
            case "raw": return rec.record.payload + [0x0A]
            default: return rec.jsonLine.serialized() + [0x0A]
            }
        }
        var first = true
        if format == "json" { ctx.stdout.write("[") }
        if format == "table" { ctx.stdout.line(tableHeader(color: color)) }
        let (failure, problems) = RelayTraceCommand.listFrames(reader, f, render: render) { _, bytes in
            if format == "json" { ctx.stdout.write(first ? "\n" : ",\n") }
            ctx.stdout.write(bytes: bytes)
            first = false
            return !ctx.stdout.isBroken  // `| head` went away: stop quietly
        }
        if ctx.stdout.isBroken { return .success }
        if format == "json" { ctx.stdout.write(first ? "]\n" : "\n]\n") }
        ctx.stdout.flush()
        let cutEnd = noteIfIncomplete(reader, path: name, error: failure, ctx)
        if let failure, !cutEnd {
            ctx.stderr.line("Error: \(name): \(failure.description)")
            return RelayTraceCommand.exitCode(for: failure)
        }
        for p in problems { ctx.stderr.line("warning: skipped: \(p.description)") }
        for w in hits.warnings(f, file: name) { ctx.stderr.line(w) }
        return .success
    }

    /// `--follow ID`: the records of one RPC's story (``RpcFollow``) that pass the other filters, each
    /// with the time since the story's first record, then (in a table) how it ended.
    static func follow(_ id: String, _ reader: TraceReader, _ f: FrameFilter, format: String, color: Bool, file: String, _ ctx: CLIContext) -> ExitCode {
        var story = RpcFollow(id)
        var correlator = RpcCorrelator()
        var first = true
        if format == "json" { ctx.stdout.write("[") }
        if format == "table" { ctx.stdout.line(tableHeader(color: color, since: true)) }
        func emit(_ rec: InspectedRecord) {
            guard f.matches(rec) else { return }
            let since = rec.record.time - (story.start ?? rec.record.time)
            switch format {
            case "table": ctx.stdout.line(tableLine(rec, color: color, since: since))
            case "raw":
                ctx.stdout.write(bytes: rec.record.payload)
                ctx.stdout.write("\n")
            default:
                guard case .object(var o) = rec.jsonLine else { return }
                o["sinceStartMs"] = .double(Double(since.nanoseconds) / 1e6)
                if format == "json" { ctx.stdout.write(first ? "\n" : ",\n") }
                ctx.stdout.write(bytes: JSONValue.object(o).serialized())
                if format != "json" { ctx.stdout.write("\n") }
            }
            first = false
        }
        var failure: TraceError?
        do {
            while let e = try reader.next() {
                var rec = InspectedRecord(e)
                correlator.correlate(&rec)
                for r in story.add(rec) { emit(r) }
                if ctx.stdout.isBroken { return .success }
            }
        } catch {
            failure = error
        }
        story.finish()
        if format == "json" { ctx.stdout.write(first ? "]\n" : "\n]\n") }
        if format == "table", story.call != nil { ctx.stdout.line(story.outcome) }
        ctx.stdout.flush()
        let cutEnd = noteIfIncomplete(reader, path: file, error: failure, ctx)
        if let failure, !cutEnd {
            ctx.stderr.line("Error: \(file): \(failure.description)")
            return RelayTraceCommand.exitCode(for: failure)
        }
        if story.call == nil { ctx.stderr.line("warning: \(story.outcome) \(file)") }
        return .success
    }

    /// The table's header row (the columns of ``tableLine(_:color:since:)``).
    static func tableHeader(color: Bool, since: Bool = false) -> String {
        let head = "#".padding(7) + "time".padding(11) + (since ? "since".padding(10) : "") + "gen".padding(5) + "dir".padding(3) + "type".padding(16) + "summary"
        return Terminal.paint(head, "2", color)
    }

    /// One aligned line: index, time, (with `since`: the time since the story's start,) generation,
    /// direction, type, summary.
    static func tableLine(_ rec: InspectedRecord, color: Bool, since: Duration? = nil) -> String {
        let r = rec.record
        let what = rec.typeName
        var line = String(rec.number).padding(7) + r.time.description.padding(11)
        if let since { line += ("+" + Moment(nanoseconds: since.nanoseconds).description).padding(10) }
        line += (r.generation.map { "g\($0)" } ?? "-").padding(5)
        let dir = (r.direction.map { $0 == .inbound ? "<-" : "->" } ?? " ").padding(3)
        line += Terminal.paint(dir, r.direction == .inbound ? "36" : "32", color && r.direction != nil)
        line += Terminal.paint(what.padding(16), rec.isFailure ? "31" : "1", color)
        var summary = rec.summary
        if rec.type != nil, summary.hasPrefix(what + " ") { summary = String(summary.dropFirst(what.count + 1)) }
        if r.channel != .relay { summary = "[\(r.channel)] " + summary }
        return line + summary
    }
}
