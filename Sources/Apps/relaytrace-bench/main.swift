// The trace benchmark driver (tools/bench-trace.sh runs it; figures in docs/BENCHMARKS.md).
//
//   relaytrace-bench write FILE [--bytes N] [--seed S]   generate realistic records, write them, report
//   relaytrace-bench scan FILE                           read every record, report
//   relaytrace-bench tour SOURCE FILE [--records N]      write SOURCE's records (a simulated tour) over and
//                                                        over, N in all, through TraceWriter; report records/s
//                                                        and the writer thread's CPU per record
//   relaytrace-bench wire-view IN OUT                    IN's socket records as a wire trace (tools/bench-replay.sh)
//   relaytrace-bench respell IN OUT                      IN with every inbound text frame written `type` first,
//                                                        as PROTOCOL.md's examples are (tools/bench-fast-routes.sh)
//
// `write` first builds a pool of ~64 MiB of varied records modelled on PROTOCOL.md traffic (heartbeats,
// pongs, rpc requests and responses with fresh ids, relay and desktop events, chat timeline updates,
// PTC1 terminal output, timers, inputs, actions) and then appends the pool over and over with advancing
// times until N bytes of record stream (payload + 24-byte record headers) were written; only appending
// and closing are timed. The pool is far larger than any compression window, so cycling it gives zstd
// no extra matches.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import RelayProtocol
import Trace

func say(_ text: String) {
    var t = text + "\n"
    t.withUTF8 { b in _ = write(1, b.baseAddress, b.count) }
}

func fail(_ text: String) -> Never {
    var t = "relaytrace-bench: " + text + "\n"
    t.withUTF8 { b in _ = write(2, b.baseAddress, b.count) }
    exit(1)
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

let words = """
    the a session job plan file update model token stream response progress merge diff commit branch test \
    build error warning function struct class import return value result request desktop mobile relay \
    terminal output chat timeline block thread run revision project directory settings estimate prompt \
    refactor implement fix add remove rename move extract inline cache index query schema migration
    """.split(separator: " ").map(String.init)

struct Generator {
    var rng: SeededRandom
    var eventId: Int64 = 1000
    let sessions: [String]
    let jobs: [String]
    let desktop: String

    init(seed: UInt64) {
        rng = SeededRandom(seed: seed)
        var r = rng
        sessions = (0..<8).map { _ in "sess-" + r.hex(bytes: 4) }
        jobs = (0..<50).map { _ in r.uuidString() }
        desktop = r.uuidString().lowercased()
        rng = r
    }

    mutating func pick<T>(_ a: [T]) -> T { a[Int(rng.next(upperBound: UInt64(a.count)))] }

    mutating func sentence(_ n: Int) -> String {
        (0..<n).map { _ in pick(words) }.joined(separator: " ")
    }

    mutating func timestamp() -> String {
        "2026-01-15T10:\(10 + rng.next(upperBound: UInt64(50))):\(10 + rng.next(upperBound: UInt64(50))).\(100 + rng.next(upperBound: UInt64(900)))Z"
    }

    /// One record of a plausible mix (kind, generation, direction, payload).
    mutating func record() -> TraceRecord {
        let roll = rng.next(upperBound: UInt64(100))
        func text(_ s: String, _ dir: FrameDirection) -> TraceRecord {
            TraceRecord(kind: .frameText, time: .zero, generation: 3, direction: dir, payload: Array(s.utf8))
        }
        switch roll {
        case 0..<10:
            return text(#"{"type":"heartbeat","payload":{"activeSessionId":"\#(pick(sessions))"}}"#, .outbound)
        case 10..<18:
            return text(#"{"type":"pong"}"#, .inbound)
        case 18..<28:
            let id = rng.uuidString()
            let tp = "00-\(rng.hex(bytes: 16))-\(rng.hex(bytes: 8))-01"
            return text(#"{"type":"rpc.request","payload":{"id":"\#(id)","method":"\#(pick(["session.update", "session.get", "job.get", "files.search", "actions.estimatePromptTokens"]))","params":{"sessionId":"\#(pick(sessions))","updateData":{"name":"\#(sentence(3))"}},"idempotencyKey":"\#(id)","traceparent":"\#(tp)"}}"#, .outbound)
        case 28..<38:
            let items = (0..<Int(1 + rng.next(upperBound: UInt64(6)))).map { _ in
                #"{"id":"\#(pick(sessions))","name":"\#(sentence(4))","projectDirectory":"/Users/alice/src/\#(pick(words))","updatedAt":\#(1_760_000_000_000 + Int64(rng.next(upperBound: UInt64(1_000_000_000))))}"#
            }.joined(separator: ",")
            return text(#"{"type":"rpc.response","payload":{"id":"\#(rng.uuidString())","result":{"sessions":[\#(items)]},"isFinal":true,"traceparent":"00-\#(rng.hex(bytes: 16))-\#(rng.hex(bytes: 8))-01"}}"#, .inbound)
        case 38..<62:
            eventId += 1
            let ev = pick(["job:stream-progress", "job:response-appended", "job:status-changed", "job:tokens-updated", "session-updated"])
            return text(#"{"type":"event","payload":{"eventType":"\#(ev)","payload":{"jobId":"\#(pick(jobs))","sessionId":"\#(pick(sessions))","chunk":"\#(sentence(Int(5 + rng.next(upperBound: UInt64(40)))))","tokens":\#(rng.next(upperBound: UInt64(100_000)))}},"eventId":\#(eventId),"sourceDeviceId":"\#(desktop)","targetDeviceId":null,"timestamp":"\#(timestamp())"}"#, .inbound)
        case 62..<70:
            eventId += 1
            let blocks = (0..<Int(1 + rng.next(upperBound: UInt64(4)))).map { _ in
                #"{"kind":"text","id":"\#(rng.hex(bytes: 6))","text":"\#(sentence(Int(10 + rng.next(upperBound: UInt64(80)))))"}"#
            }.joined(separator: ",")
            return text(#"{"type":"event","payload":{"eventType":"chat:timeline-updated","payload":{"sessionId":"\#(pick(sessions))","runId":"\#(rng.hex(bytes: 8))","threadId":"\#(rng.hex(bytes: 8))","revision":\#(eventId),"blocks":[\#(blocks)]}},"eventId":\#(eventId),"sourceDeviceId":"\#(desktop)","timestamp":"\#(timestamp())"}"#, .inbound)
        case 70..<85:
            // PTC1 terminal output: ANSI-coloured build and test log lines, up to 16 KiB.
            var data = [UInt8]()
            let lines = Int(1 + rng.next(upperBound: UInt64(60)))
            for _ in 0..<lines {
                let line = "\u{1B}[32m[\(rng.next(upperBound: UInt64(1000)))/1000]\u{1B}[0m Compiling \(pick(words))/\(pick(words)).swift \(sentence(6)) 0x\(rng.hex(bytes: 4))\r\n"
                data.append(contentsOf: line.utf8)
            }
            let session = "term-" + pick(sessions)
            var payload = Array("PTC1".utf8) + [UInt8(session.utf8.count >> 8), UInt8(session.utf8.count & 0xFF)] + Array(session.utf8)
            payload += data.prefix(16 * 1024)
            return TraceRecord(kind: .frameBinary, time: .zero, generation: 3, direction: .inbound, payload: payload)
        case 85..<90:
            return TraceRecord(kind: .timerFired, time: .zero, payload: Array(#"{"timer":"\#(pick(["heartbeat", "watchdog", "rpc:" + rng.uuidString()]))"}"#.utf8))
        case 90..<95:
            return TraceRecord(kind: .input, time: .zero, payload: Array(#"{"input":"uiCall","method":"session.update","args":{"sessionId":"\#(pick(sessions))","name":"\#(sentence(3))"}}"#.utf8))
        default:
            return TraceRecord(kind: .action, time: .zero, generation: 3, payload: Array(#"{"action":"send","generation":3,"bytes":\#(rng.next(upperBound: UInt64(2000)))}"#.utf8))
        }
    }
}

/// CPU seconds used by the whole process (all threads) so far.
func cpuTime() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func writeBench(path: String, bytes target: Int, seed: UInt64) {
    var gen = Generator(seed: seed)
    var pool = [TraceRecord]()
    var poolBytes = 0
    while poolBytes < 64 << 20 {
        let r = gen.record()
        poolBytes += r.payload.count + 24
        pool.append(r)
    }
    var options = TraceWriterOptions()
    options.overwrite = true
    let header = TraceHeader(seed: seed, wallClockStart: "2026-01-15T10:00:00Z", simulated: true, client: ["bench": true])
    let writer: TraceWriter
    do { writer = try TraceWriter(path: path, header: header, options: options) } catch { fail("\(error)") }
    let capacity = options.queueCapacity
    var written = 0
    var records = 0
    var t: Int64 = 0
    var waits = 0
    let start = now()
    let cpuStart = cpuTime()
    outer: while true {
        for var r in pool {
            // ~20k records per second of capture time, so chunks fill by size (1 MiB), as in a busy session.
            t += 50_000
            r.time = Moment(nanoseconds: t)
            while writer.queueDepth >= capacity - 1 {
                waits += 1
                usleep(50)
            }
            writer.append(r)
            written += r.payload.count + 24
            records += 1
            if written >= target { break outer }
        }
    }
    let summary: TraceWriterSummary
    do { summary = try writer.close() } catch { fail("\(error)") }
    let seconds = now() - start
    let cpu = cpuTime() - cpuStart
    say("write.records \(records)")
    say("write.raw_bytes \(written)")
    say("write.file_bytes \(summary.bytes)")
    say("write.chunks \(summary.chunks)")
    say("write.dropped \(summary.dropped)")
    say("write.seconds \(String(format3(seconds)))")
    say("write.records_per_second \(Int(Double(records) / seconds))")
    say("write.mb_per_second \(format3(Double(written) / seconds / 1e6))")
    // Producer and writer thread together: what the writer costs per CPU-second, whatever the load.
    say("write.cpu_seconds \(format3(cpu))")
    say("write.mb_per_cpu_second \(format3(Double(written) / cpu / 1e6))")
}

func format3(_ x: Double) -> String {
    let v = (x * 1000).rounded() / 1000
    return "\(v)"
}

func scanBench(path: String) {
    let start = now()
    var records = 0
    var payload = 0
    do {
        let reader = try TraceReader(path: path)
        while let e = try reader.next() {
            records += 1
            payload += e.record.payload.count + 24
        }
    } catch {
        fail("\(error)")
    }
    let seconds = now() - start
    say("scan.records \(records)")
    say("scan.raw_bytes \(payload)")
    say("scan.seconds \(format3(seconds))")
    say("scan.mb_per_second \(format3(Double(payload) / seconds / 1e6))")
}

/// CPU seconds used so far by this process's threads other than the main one (from
/// /proc/self/task/*/stat, in clock ticks): in `tour`, the writer's thread.
func otherThreadsCPU() -> Double {
    guard let dir = opendir("/proc/self/task") else { return 0 }
    defer { closedir(dir) }
    var total = 0.0
    let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
    let main = String(getpid())
    while let e = readdir(dir) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard name != ".", name != "..", name != main else { continue }
        guard let stat = try? String(contentsOfFile: "/proc/self/task/\(name)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state (0), ..., utime (11), stime (12).
        if fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) { total += (u + s) / hz }
    }
    return total
}

/// The tour's record mix through the writer: SOURCE's records appended again and again (one microsecond
/// apart, as a capture at 1M records/s would make them), `count` in all, with the default options (zstd 3, 1 MiB chunks, redaction on) and
/// `blockWhenFull` (the producer waits for room: nothing may be dropped).
func tourBench(source: String, path: String, count: Int) {
    var pool: [TraceRecord] = []
    do {
        let r = try TraceReader(path: source)
        while let e = try r.next() { pool.append(e.record) }
    } catch {
        fail("\(source): \(error)")
    }
    guard !pool.isEmpty else { fail("\(source) has no records") }
    var options = TraceWriterOptions()
    options.overwrite = true
    options.blockWhenFull = true
    let header = TraceHeader(seed: 1, wallClockStart: "2026-01-15T10:00:00Z", simulated: true, client: ["bench": "tour"])
    let writer: TraceWriter
    do { writer = try TraceWriter(path: path, header: header, options: options) } catch { fail("\(error)") }
    let start = now()
    let cpuStart = cpuTime()
    var written = 0
    var bytes = 0
    outer: while true {
        for var r in pool {
            // A capture at 1M records/s: one microsecond apart (chunks then fill by size, as they would).
            r.time = Moment(nanoseconds: Int64(written) * 1_000)
            writer.append(r)
            written += 1
            bytes += r.payload.count + 24
            if written >= count { break outer }
        }
    }
    writer.flush()  // everything appended is in the file: the writer thread's CPU is all of it
    let writerCPU = otherThreadsCPU()
    let summary: TraceWriterSummary
    do { summary = try writer.close() } catch { fail("\(error)") }
    let seconds = now() - start
    let cpu = cpuTime() - cpuStart
    say("tour.source_records \(pool.count)")
    say("tour.records \(summary.records)")
    say("tour.dropped \(summary.dropped)")
    say("tour.mean_record_bytes \(bytes / max(1, written))")
    say("tour.seconds \(format3(seconds))")
    say("tour.records_per_second \(Int(Double(written) / seconds))")
    say("tour.cpu_seconds \(format3(cpu))")
    say("tour.records_per_cpu_second \(Int(Double(written) / cpu))")
    say("tour.writer_thread_cpu_seconds \(format3(writerCPU))")
    say("tour.records_per_writer_cpu_second \(Int(Double(written) / max(writerCPU, 1e-9)))")
}

/// A machine trace's socket records (opens, upgrades, messages, closes, failures) as the wire trace an
/// in-app recorder would have written of the same session: no inputs, actions or timers, the header's
/// `wire` member set, the same redaction key (so the replay redacts the model's output as the trace is).
func wireView(from input: String, to output: String) {
    let socket: Set<RecordKind> = [.transportOpen, .transportOpened, .frameText, .frameBinary, .transportClosed, .transportFailed]
    do {
        let reader = try TraceReader(path: input)
        var header = reader.header
        header.extra["wire"] = ["source": "recorder", "from": .string("machine trace")]
        var options = TraceWriterOptions()
        options.overwrite = true
        options.blockWhenFull = true
        options.redaction = header.redaction.policy
        options.redactionKey = header.redaction.key
        let writer = try TraceWriter(path: output, header: header, options: options)
        var kept = 0
        while let e = try reader.next() {
            guard socket.contains(e.record.kind), e.record.generation != nil else { continue }
            writer.append(e.record)
            kept += 1
        }
        _ = try writer.close()
        say("wire-view.records \(kept)")
    } catch {
        fail("\(error)")
    }
}

/// `input` with every inbound JSON text frame written with `type` first and the other top-level keys after
/// it in order, compact (the spelling of PROTOCOL.md's examples, `{"type":"event","payload":...}`); every
/// other record as it was. The frames mean what they meant, so the trace replays strictly as before, but
/// the relay frame reader's canonical readers (which take only the development relay's spelling) pass every
/// one of them over: what a trace recorded against a relay that spells its frames otherwise costs. The
/// output is chunked as a simulated trace is, so the two files differ in spelling only.
func respell(from input: String, to output: String) {
    do {
        let reader = try TraceReader(path: input)
        let header = reader.header
        // Chunked as a simulation chunks (by capture time and size only), so that only the spelling differs
        // from the input; the input's redaction key.
        var options = TraceWriterOptions.simulated(seed: header.seed, overwrite: true)
        options.redaction = header.redaction.policy
        options.redactionKey = header.redaction.key
        let writer = try TraceWriter(path: output, header: header, options: options)
        var respelled = 0
        while let e = try reader.next() {
            var r = e.record
            if r.kind == .frameText, r.direction == .inbound, case .object(let o)? = try? JSONValue(parsing: r.payload),
               let type = o["type"] {
                var text = #"{"type":"# + type.jsonText
                for (key, value) in o.sorted(by: { $0.key < $1.key }) where key != "type" {
                    text += "," + JSONValue.string(key).jsonText + ":" + value.jsonText
                }
                r.payload = Array((text + "}").utf8)
                respelled += 1
            }
            writer.append(r)
        }
        _ = try writer.close()
        say("respell.frames \(respelled)")
    } catch {
        fail("\(error)")
    }
}

let args = Array(CommandLine.arguments.dropFirst())
guard let verb = args.first, args.count >= 2 else { fail("usage: relaytrace-bench write FILE [--bytes N] [--seed S] | scan FILE") }
func option(_ name: String) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}
switch verb {
case "write":
    writeBench(path: args[1], bytes: Int(option("--bytes") ?? "") ?? 1_100_000_000, seed: UInt64(option("--seed") ?? "") ?? 1)
case "scan":
    scanBench(path: args[1])
case "tour":
    guard args.count >= 3 else { fail("usage: relaytrace-bench tour SOURCE FILE [--records N]") }
    tourBench(source: args[1], path: args[2], count: Int(option("--records") ?? "") ?? 5_000_000)
case "wire-view" where args.count == 3:
    wireView(from: args[1], to: args[2])
case "respell" where args.count == 3:
    respell(from: args[1], to: args[2])
default:
    fail("unknown verb \(verb)")
}
