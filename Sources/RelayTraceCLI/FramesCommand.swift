import RelayProtocol
import Trace

enum FramesCommand {
    static let spec = CommandSpec(
        name: "frames",
        abstract: "List the records of a trace, one per line.",
        discussion: """
            jsonl: one JSON object per record with index, t (seconds since start), kind, channel, gen, dir; \
            text frames add type, eventType, method, id and the parsed json; binary frames add bytes (and \
            session for PTC1); other JSON records add json. table: one aligned line per record.
            """,
        arguments: [ArgumentSpec(name: "file", help: "The trace file.")],
        options: [
            OptionSpec(long: "format", valueName: "format", help: "Output format: jsonl or table.", allowed: ["jsonl", "table"], defaultValue: "jsonl"),
            OptionSpec(long: "salvage", help: "Skip damaged chunks (reporting each on stderr) instead of stopping at the first."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = args.positionals["file"] ?? ""
        let reader: TraceReader
        switch RelayTraceCommand.openTrace(path, ctx, salvage: args.flag("salvage")) {
        case .success(let r): reader = r
        case .failure(let code): return code
        }
        let table = args.value("format") == "table"
        do {
            while let e = try reader.next() {
                if table {
                    ctx.stdout.line(tableLine(e))
                } else {
                    ctx.stdout.write(bytes: jsonLine(e).serialized())
                    ctx.stdout.write("\n")
                }
                if ctx.stdout.isBroken { return .success }  // `| head` went away: stop quietly
            }
        } catch {
            ctx.stdout.flush()
            ctx.stderr.line("Error: \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        }
        for p in reader.problems { ctx.stderr.line("warning: skipped: \(p.description)") }
        return .success
    }

    /// The JSON object for one record.
    static func jsonLine(_ e: TraceEntry) -> JSONValue {
        let r = e.record
        var o: [String: JSONValue] = [
            "index": .int(Int64(bitPattern: e.number)),
            "t": .double(r.time.seconds),
            "kind": .string(r.kind.name),
            "channel": .string(r.channel.description),
            "gen": r.generation.map { .int(Int64(bitPattern: $0)) } ?? .null,
            "dir": r.direction.map { .string($0.description) } ?? .null,
        ]
        switch r.kind {
        case .frameText:
            for k in ["type", "eventType", "method", "id"] { o[k] = .null }
            do {
                let json = try JSONValue(parsing: r.payload)
                o["json"] = json
                o["type"] = json["type"] ?? .null
                let inner = json["payload"]
                o["eventType"] = inner?["eventType"] ?? json["eventType"] ?? .null
                o["method"] = inner?["method"] ?? json["method"] ?? .null
                o["id"] = inner?["id"] ?? json["id"] ?? .null
                if let eventId = json["eventId"] { o["eventId"] = eventId }
            } catch {
                o["text"] = .string(r.payloadText)
                o["jsonError"] = .string(error.description)
            }
        case .frameBinary:
            o["bytes"] = .int(Int64(r.payload.count))
            if let t = try? TerminalFrame(decoding: r.payload) {
                o["session"] = .string(t.sessionId)
                o["dataBytes"] = .int(Int64(t.data.count))
            }
        case .marker:
            o["text"] = .string(r.payloadText)
        case .unknown, .transportOpened:
            if !r.payload.isEmpty { o["bytes"] = .int(Int64(r.payload.count)) }
        case .header, .transportOpen, .transportClosed, .transportFailed, .timerFired, .input, .action, .dropped, .writerStopped:
            if let json = try? JSONValue(parsing: r.payload) { o["json"] = json } else if !r.payload.isEmpty { o["text"] = .string(r.payloadText) }
        }
        return .object(o)
    }

    /// One aligned line for one record.
    static func tableLine(_ e: TraceEntry) -> String {
        let r = e.record
        var line = String(e.number).padding(7) + r.time.description.padding(11) + r.kind.name.padding(16)
        line += r.channel.description.padding(6)
        line += (r.generation.map { "g\($0)" } ?? "-").padding(5) + (r.direction?.description ?? "-").padding(4)
        switch r.kind {
        case .frameText: line += WireFrame.text(r.payloadText).dissect().summary
        case .frameBinary: line += WireFrame.binary(r.payload).dissect().summary
        default:
            let text = r.payloadText
            line += text.count > 120 ? String(text.prefix(120)) + "..." : text
        }
        return line
    }
}
