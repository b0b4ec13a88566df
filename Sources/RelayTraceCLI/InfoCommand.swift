import RelayProtocol
import Trace

/// What a full scan of a trace found.
struct TraceScan {
    var records: UInt64 = 0
    var kinds: [String: UInt64] = [:]
    var firstTime: Moment?
    var lastTime: Moment?
    var generations = Set<UInt64>()
    var channels = Set<String>()
    var droppedNotices: UInt64 = 0
    var writerStopped: String?
    var error: TraceError?

    /// Reads every record of `reader` (memory bounded by one chunk).
    static func scan(_ reader: TraceReader) -> TraceScan {
        var s = TraceScan()
        do {
            while let e = try reader.next() {
                let r = e.record
                s.records += 1
                s.kinds[r.kind.name, default: 0] += 1
                s.firstTime = min(s.firstTime ?? r.time, r.time)
                s.lastTime = max(s.lastTime ?? r.time, r.time)
                if let g = r.generation { s.generations.insert(g) }
                s.channels.insert(r.channel.description)
                if r.kind == .dropped, let n = (try? JSONValue(parsing: r.payload))?["count"]?.intValue { s.droppedNotices += UInt64(max(0, n)) }
                if r.kind == .writerStopped {
                    s.writerStopped = (try? JSONValue(parsing: r.payload))?["reason"]?.stringValue ?? r.payloadText
                }
            }
        } catch {
            s.error = error
        }
        return s
    }
}

enum InfoCommand {
    static let spec = CommandSpec(
        name: "info",
        abstract: "Show a trace's header, record counts, duration, generations, chunks and completeness.",
        discussion: "Reads the whole trace (checking every chunk) in constant memory. Exits 65 if the trace is damaged, after printing what could be read.",
        arguments: [ArgumentSpec(name: "file", help: "The trace file.")],
        options: [OptionSpec(long: "format", valueName: "format", help: "Output format: text or json.", allowed: ["text", "json"], defaultValue: "text")],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = args.positionals["file"] ?? ""
        let reader: TraceReader
        do { reader = try RelayTraceCommand.openTrace(path, ctx) } catch { return error }
        let scan = TraceScan.scan(reader)
        let chunks = reader.statistics.chunksDecoded
        let h = reader.header
        let duration = (scan.lastTime ?? .zero) - (scan.firstTime ?? .zero)
        let dropped = reader.trailer?.droppedCount ?? scan.droppedNotices
        if args.value("format") == "json" {
            var o: [String: JSONValue] = [
                "file": .string(path),
                "formatVersion": .int(Int64(reader.formatVersion)),
                "complete": .bool(reader.isComplete),
                "toolVersion": .string(h.toolVersion),
                "clientProtocolVersion": .string(h.clientProtocolVersion),
                "seed": .string(String(h.seed)),
                "redaction": ["policy": .string(h.redaction.policy.rawValue), "keyId": .string(h.redaction.keyID)],
                "wallClockStart": .string(h.wallClockStart),
                "simulated": .bool(h.simulated),
                "client": h.client,
                "records": .int(Int64(scan.records)),
                "kinds": .object(scan.kinds.mapValues { .int(Int64($0)) }),
                "firstTime": scan.firstTime.map { .double($0.seconds) } ?? .null,
                "lastTime": scan.lastTime.map { .double($0.seconds) } ?? .null,
                "duration": .double(duration.seconds),
                "generations": .array(scan.generations.sorted().map { .int(Int64(bitPattern: $0)) }),
                "chunks": .int(Int64(chunks)),
                "dropped": .int(Int64(dropped)),
                "bytes": .int(Int64(reader.source.size ?? 0)),
            ]
            if let w = scan.writerStopped { o["writerStopped"] = .string(w) }
            if let e = scan.error { o["problem"] = .string(e.description) }
            ctx.stdout.line(JSONValue.object(o).prettyText())
        } else {
            func row(_ k: String, _ v: String) { ctx.stdout.line(k.padding(13) + v) }
            row("file:", path)
            row("format:", "version \(reader.formatVersion), " + (reader.isComplete ? "complete" : "INCOMPLETE (no valid index/trailer: the recorder did not close it)"))
            row("tool:", "relaytrace \(h.toolVersion), client protocol \(h.clientProtocolVersion)")
            row("seed:", String(h.seed))
            row("redaction:", h.redaction.policy == .raw ? "raw (secrets recorded as is)" : "\(h.redaction.policy.rawValue) (key id \(h.redaction.keyID))")
            row("started:", h.wallClockStart + (h.simulated ? " (simulated)" : ""))
            if case .object(let c) = h.client, !c.isEmpty { row("client:", h.client.jsonText) }
            row("records:", String(scan.records))
            if !scan.kinds.isEmpty {
                row("kinds:", scan.kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            }
            row("time:", "\(scan.firstTime ?? .zero) ... \(scan.lastTime ?? .zero) (duration \(Moment(nanoseconds: duration.nanoseconds)))")
            row("generations:", scan.generations.isEmpty ? "none" : scan.generations.sorted().map(String.init).joined(separator: ", "))
            row("chunks:", String(chunks))
            row("dropped:", String(dropped))
            if let w = scan.writerStopped { row("stopped:", w) }
            row("bytes:", String(reader.source.size ?? 0))
        }
        if let e = scan.error {
            ctx.stderr.line("Error: \(e.description)")
            return RelayTraceCommand.exitCode(for: e)
        }
        return .success
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
