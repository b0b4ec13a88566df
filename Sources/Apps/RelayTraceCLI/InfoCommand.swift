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
    /// Wire traces: what each socket was (from its records), by generation.
    var sockets: [UInt64: SocketSummary] = [:]

    /// One socket of a wire trace, as `info` lists it.
    struct SocketSummary {
        var generation: UInt64
        var opened: Moment?
        var url: String?
        var deviceId: String?
        var desktopId: String?
        var clientType: String?
        var status: Int64?
        var messagesIn: UInt64 = 0
        var messagesOut: UInt64 = 0
        var end: String?
        var endTime: Moment?

        var json: JSONValue {
            var o: [String: JSONValue] = ["gen": .int(Int64(bitPattern: generation)),
                                          "messagesIn": .int(Int64(messagesIn)), "messagesOut": .int(Int64(messagesOut))]
            if let opened { o["opened"] = .double(opened.seconds) }
            if let url { o["url"] = .string(url) }
            if let deviceId { o["deviceId"] = .string(deviceId) }
            if let desktopId { o["desktopId"] = .string(desktopId) }
            if let clientType { o["clientType"] = .string(clientType) }
            if let status { o["status"] = .int(status) }
            if let end { o["end"] = .string(end) }
            if let endTime { o["ended"] = .double(endTime.seconds) }
            return .object(o)
        }

        var line: String {
            var s = "g\(generation)".padding(6)
            s += (opened.map { "\($0)" } ?? "-").padding(11)
            s += (clientType ?? "-").padding(8)
            s += "device=\(deviceId ?? "-") desktop=\(desktopId ?? "-")"
            s += "  \(status.map(String.init) ?? "-"), \(messagesOut) out / \(messagesIn) in"
            if let end { s += ", " + end }
            if let endTime { s += " at \(endTime)" }
            return s
        }
    }

    /// Notes what `r` says about its socket (wire traces).
    mutating func noteSocket(_ r: TraceRecord) {
        guard let g = r.generation, r.channel == .relay else { return }
        var k = sockets[g] ?? SocketSummary(generation: g)
        switch r.kind {
        case .transportOpen:
            let j = try? JSONValue(parsing: r.payload)
            k.opened = r.time
            k.url = j?["url"]?.stringValue
            k.deviceId = j?["deviceId"]?.stringValue
            k.desktopId = j?["desktopId"]?.stringValue
            k.clientType = j?["clientType"]?.stringValue
        case .transportOpened:
            k.status = (try? JSONValue(parsing: r.payload))?["status"]?.intValue ?? 101
        case .frameText, .frameBinary:
            if r.direction == .inbound { k.messagesIn += 1 } else { k.messagesOut += 1 }
        case .transportClosed:
            let j = try? JSONValue(parsing: r.payload)
            let code = j?["code"]?.intValue.map(String.init) ?? "no code"
            k.end = (r.direction == .outbound ? "closed by the client " : "closed by the relay ") + code
            k.endTime = r.time
        case .transportFailed:
            let j = try? JSONValue(parsing: r.payload)
            if let st = j?["status"]?.intValue { k.status = st; k.end = "refused \(st)" } else {
                k.end = "failed: " + (j?["error"]?.stringValue ?? "?")
            }
            k.endTime = r.time
        default:
            break
        }
        sockets[g] = k
    }

    /// Reads every record of `reader` (memory bounded by one chunk; a wire trace also keeps one summary per socket).
    static func scan(_ reader: TraceReader) -> TraceScan {
        var s = TraceScan()
        let wire = reader.header.isWireTrace
        do {
            while let e = try reader.next() {
                let r = e.record
                if wire { s.noteSocket(r) }
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
            if let wire = h.wire {
                o["wire"] = wire
                o["sockets"] = .array(scan.sockets.keys.sorted().map { scan.sockets[$0]!.json })
            }
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
            if let wire = h.wire { row("wire trace:", "recorded by the \(h.wireSource ?? "?")" + (wire.jsonText == "{\"source\":\"\(h.wireSource ?? "")\"}" ? "" : " \(wire.jsonText)")) }
            row("records:", String(scan.records))
            if !scan.kinds.isEmpty {
                row("kinds:", scan.kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            }
            row("time:", "\(scan.firstTime ?? .zero) ... \(scan.lastTime ?? .zero) (duration \(Moment(nanoseconds: duration.nanoseconds)))")
            row("generations:", scan.generations.isEmpty ? "none" : Self.ranges(scan.generations.sorted()))
            row("chunks:", String(chunks))
            row("dropped:", String(dropped))
            if let w = scan.writerStopped { row("stopped:", w) }
            row("bytes:", String(reader.source.size ?? 0))
            if h.isWireTrace {
                let shown = 50
                let gens = scan.sockets.keys.sorted()
                row("sockets:", "\(gens.count) (generation, opened, client type, device and desktop, upgrade status, messages, end)")
                for g in gens.prefix(shown) { ctx.stdout.line("  " + scan.sockets[g]!.line) }
                if gens.count > shown { ctx.stdout.line("  ... and \(gens.count - shown) more (info --format json lists every socket)") }
            }
        }
        if let e = scan.error {
            ctx.stderr.line("Error: " + RelayTraceCommand.about(path, e.description))
            return RelayTraceCommand.exitCode(for: e)
        }
        return .success
    }
}

extension InfoCommand {
    /// Sorted numbers as runs: `1-47, 49, 52-60`.
    static func ranges(_ sorted: [UInt64]) -> String {
        var parts: [String] = []
        var i = 0
        while i < sorted.count {
            var j = i
            while j + 1 < sorted.count, sorted[j + 1] == sorted[j] + 1 { j += 1 }
            parts.append(j - i >= 2 ? "\(sorted[i])-\(sorted[j])" : (i...j).map { String(sorted[$0]) }.joined(separator: ", "))
            i = j + 1
        }
        return parts.joined(separator: ", ")
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
