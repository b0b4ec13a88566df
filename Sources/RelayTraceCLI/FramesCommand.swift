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
            table (the default on a terminal): index, time, generation, direction, type, one-line summary. \
            jsonl (the default otherwise): one JSON object per record with index, t (seconds since start), \
            kind, channel, gen, dir, summary; text frames add type, eventType, method, id, eventId, json, \
            latencyMs; binary frames add bytes (and session, dataBytes, preview for PTC1). json: one JSON \
            array of the same objects. raw: each payload as is, one per line.
            """,
        arguments: [ArgumentSpec(name: "file", help: "The trace file ('-' for stdin).")],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "Output format: table, jsonl, json or raw (default: table on a terminal, jsonl otherwise).", allowed: ["table", "jsonl", "json", "raw"]),
            OptionSpec(long: "gen", valueName: "n[,m]", help: "Only these transport generations."),
            OptionSpec(long: "dir", valueName: "dir", help: "Only frames in this direction: in (relay to client) or out.", allowed: ["in", "out"]),
            OptionSpec(long: "type", valueName: "types", help: "Only these message types (rpc.request, event...) or record kinds (transportClosed...)."),
            OptionSpec(long: "event", valueName: "events", help: "Only events of these types (device-status, chat:timeline-interest...)."),
            OptionSpec(long: "method", valueName: "methods", help: "Only RPCs of these methods (requests and their responses)."),
            OptionSpec(long: "rpc-id", valueName: "ids", help: "Only RPCs with these ids."),
            OptionSpec(long: "since", valueName: "time", help: "Only records at or after this time (seconds or 1m30s, 250ms)."),
            OptionSpec(long: "until", valueName: "time", help: "Only records at or before this time."),
            OptionSpec(long: "grep", valueName: "text", help: "Only records whose payload contains this text (PTC1 frames: their terminal data)."),
            OptionSpec(long: "channel", valueName: "channel", help: "Only this channel.", allowed: ["relay", "watch"]),
            OptionSpec(long: "color", valueName: "when", help: "Colour the table: auto (on a terminal), always or never; NO_COLOR always wins.", allowed: ["auto", "always", "never"], defaultValue: "auto"),
            OptionSpec(long: "salvage", help: "Skip damaged chunks (reporting each on stderr) instead of stopping at the first."),
        ],
        run: { args, ctx in run(args, ctx) })

    /// Builds the filter from the options (usage errors name the option).
    static func filter(_ args: ParsedArguments) throws(UsageError) -> FrameFilter {
        let path = ["relaytrace", "frames"]
        var f = FrameFilter()
        do throws(FilterError) {
            if let g = args.value("gen") { f.generations = try FrameFilter.generations(g) }
            if let s = args.value("since") { f.since = try FrameFilter.time(s, option: "--since") }
            if let s = args.value("until") { f.until = try FrameFilter.time(s, option: "--until") }
        } catch {
            throw UsageError(message: error.message, commandPath: path)
        }
        if let d = args.value("dir") { f.direction = d == "in" ? .inbound : .outbound }
        if let t = args.value("type") { f.types = FrameFilter.list(t) }
        if let e = args.value("event") { f.events = FrameFilter.list(e) }
        if let m = args.value("method") { f.methods = FrameFilter.list(m) }
        if let i = args.value("rpc-id") { f.rpcIds = FrameFilter.list(i) }
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
        // Rendered where the record is built (on the scan's worker threads); written here in order.
        let render: @Sendable (InspectedRecord) -> [UInt8] = { rec in
            switch format {
            case "table": Array((tableLine(rec, color: color) + "\n").utf8)
            case "json": rec.jsonLine.serialized()
            case "raw": rec.record.payload + [0x0A]
            default: rec.jsonLine.serialized() + [0x0A]
            }
        }
        var first = true
        if format == "json" { ctx.stdout.write("[") }
        let (failure, problems) = RelayTraceCommand.listFrames(reader, f, render: render) { _, bytes in
            if format == "json" { ctx.stdout.write(first ? "\n" : ",\n") }
            ctx.stdout.write(bytes: bytes)
            first = false
            return !ctx.stdout.isBroken  // `| head` went away: stop quietly
        }
        if ctx.stdout.isBroken { return .success }
        if format == "json" { ctx.stdout.write(first ? "]\n" : "\n]\n") }
        if let failure {
            ctx.stdout.flush()
            ctx.stderr.line("Error: \(failure.description)")
            return RelayTraceCommand.exitCode(for: failure)
        }
        for p in problems { ctx.stderr.line("warning: skipped: \(p.description)") }
        return .success
    }

    /// One aligned line: index, time, generation, direction, type, summary.
    static func tableLine(_ rec: InspectedRecord, color: Bool) -> String {
        let r = rec.record
        let what = rec.typeName
        var line = String(rec.number).padding(7) + r.time.description.padding(11)
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
