// The wire-recording benchmarks (tools/bench-proxy.sh and tools/bench-recorder.sh run them; figures in
// docs/BENCHMARKS.md). Everything runs in this one process on loopback, baseline and candidate
// interleaved in the same run:
//
//   relaytrace-wirebench proxy [--round-trips N] [--messages N] [--rounds R]
//       An echo server (the project's Net WebSocket server). Latency: N round trips of a 200-byte text
//       message, one at a time, straight to the echo server and through `RecordingProxy` (recording to a
//       temporary wire trace); p50/p90/p99/max per path and the difference. Throughput: N 1 KiB messages
//       sent as fast as one thread can while another reads the echoes; messages per second per path and
//       their ratio.
//
//   relaytrace-wirebench recorder [--sends N] [--rounds R] [--burst B]
//       The in-app recorder's cost on the send path of the project's Net client: N sends of a 300-byte
//       `rpc.request` over a WebSocket to a draining server, with and without `WireSocket.sent` before
//       each send; CPU time of the sending thread per send, wall time (and sends/s), and the whole
//       process's CPU per send once the server has drained and the writer has written everything (the
//       writer thread's redaction and compression included), per variant; then N sends again paced in
//       bursts of B (default 64) that never fill the socket, the sending thread's CPU per send; the ratios.
#if canImport(Glibc)
import Glibc
#endif
import Net
import Proxy
import RelayProtocol
import Synchronization
import Trace
import WebSocket
import WireRecording

func say(_ text: String) {
    var t = text + "\n"
    t.withUTF8 { b in _ = write(1, b.baseAddress, b.count) }
}

func fail(_ text: String) -> Never {
    var t = "relaytrace-wirebench: " + text + "\n"
    t.withUTF8 { b in _ = write(2, b.baseAddress, b.count) }
    exit(1)
}

func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func threadCPU() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// CPU time of every thread of this process (the sender, the draining server, the trace writer).
func processCPU() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func option(_ name: String, _ fallback: Int) -> Int {
    let args = CommandLine.arguments
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return fallback }
    guard let v = Int(args[i + 1]), v > 0 else { fail("\(name) takes a positive whole number") }
    return v
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1)]
}

func us(_ seconds: Double) -> String {
    let v = seconds * 1e6
    return v < 10 ? String(Int((v * 100).rounded())).withDecimals(2) : String(Int((v * 10).rounded())).withDecimals(1)
}

extension String {
    /// "1234" with 2 decimals -> "12.34".
    func withDecimals(_ n: Int) -> String {
        var s = self
        while s.count <= n { s = "0" + s }
        return String(s.dropLast(n)) + "." + String(s.suffix(n))
    }
}

func temporaryPath(_ name: String) -> String {
    let dir = String(cString: getenv("TMPDIR") ?? strdup("/tmp"))
    return "\(dir)/relaytrace-wirebench-\(getpid())-\(name).rtrace"
}

/// A WebSocket echo server on loopback (the project's Net server, on its event loops).
func echoServer() -> WebSocketServer {
    do {
        return try WebSocketServer(host: "127.0.0.1", port: 0, handler: { ws, event in
            switch event {
            case .text(let t): try? ws.send(text: t)
            case .binary(let b): try? ws.send(binary: b)
            default: return
            }
        })
    } catch {
        fail("echo server: \(error)")
    }
}

func connect(_ url: String) -> WebSocketChannel {
    do { return try WebSocketClient.connect(url: url) } catch { fail("connect \(url): \(error)") }
}

/// Round-trip times of `count` messages sent one at a time.
func roundTrips(_ url: String, count: Int) -> [Double] {
    let channel = connect(url)
    defer { _ = try? channel.closeAndWait() }
    let message = String(repeating: "x", count: 180)
    var out: [Double] = []
    out.reserveCapacity(count)
    for i in 0..<(count + 100) {
        let t0 = monotonic()
        do {
            try channel.send(text: "{\"i\":\(i),\"p\":\"\(message)\"}")
            guard case .text = try channel.receive(timeout: .seconds(10)) else { fail("no echo") }
        } catch {
            fail("round trip: \(error)")
        }
        if i >= 100 { out.append(monotonic() - t0) }  // the first 100 warm up
    }
    return out.sorted()
}

/// Messages per second for `count` 1 KiB messages sent by one thread while this one reads the echoes.
func throughput(_ url: String, count: Int) -> Double {
    let channel = connect(url)
    defer { _ = try? channel.closeAndWait() }
    let message = String(repeating: "y", count: 1024)
    let t0 = monotonic()
    let sender: NetThread
    do {
        sender = try NetThread(name: "sender") {
            for _ in 0..<count { try? channel.send(text: message) }
        }
    } catch {
        fail("thread: \(error)")
    }
    var received = 0
    while received < count {
        guard case .text = try? channel.receive(timeout: .seconds(30)) else { fail("echo \(received) of \(count) did not come") }
        received += 1
    }
    let elapsed = monotonic() - t0
    sender.join()
    return Double(count) / elapsed
}

func proxyBenchmark() {
    let trips = option("--round-trips", 5_000), messages = option("--messages", 50_000), rounds = option("--rounds", 3)
    let server = echoServer()
    defer { server.stop() }
    let direct = "ws://127.0.0.1:\(server.port)/ws/device-link"
    let path = temporaryPath("proxy")
    defer { unlink(path) }
    var options = TraceWriterOptions()
    options.blockWhenFull = true
    let recorder: WireRecorder
    let proxy: RecordingProxy
    do {
        recorder = try WireRecorder(path: path, source: .proxy, wallClockStart: "1970-01-01T00:00:00Z", options: options)
        proxy = try RecordingProxy(upstream: ProxyUpstream(url: try WebSocketURL(direct)), recorder: recorder)
    } catch {
        fail("proxy: \(error)")
    }
    say("proxy benchmark: \(rounds) rounds, each \(trips) round trips (200-byte text) and \(messages) x 1 KiB messages, direct then through the recording proxy")
    var directTrips: [Double] = [], proxyTrips: [Double] = [], directRate: [Double] = [], proxyRate: [Double] = []
    for _ in 0..<rounds {
        directTrips += roundTrips(direct, count: trips)
        proxyTrips += roundTrips(proxy.url, count: trips)
        directRate.append(throughput(direct, count: messages))
        proxyRate.append(throughput(proxy.url, count: messages))
    }
    proxy.stop()
    let summary: TraceWriterSummary
    do { summary = try recorder.close() } catch { fail("closing the recording: \(error)") }
    directTrips.sort()
    proxyTrips.sort()
    for (name, t) in [("direct", directTrips), ("proxy", proxyTrips)] {
        say("rtt_\(name)_us p50 \(us(percentile(t, 50))) p90 \(us(percentile(t, 90))) p99 \(us(percentile(t, 99))) max \(us(t.last ?? 0))")
    }
    say("added_us p50 \(us(percentile(proxyTrips, 50) - percentile(directTrips, 50))) p99 \(us(percentile(proxyTrips, 99) - percentile(directTrips, 99)))")
    let d = directRate.sorted()[rounds / 2], p = proxyRate.sorted()[rounds / 2]
    say("throughput_msgs_per_s direct \(Int(d)) proxy \(Int(p)) ratio \(String(Int((p / d * 1000).rounded())).withDecimals(3))")
    say("recorded \(summary.records) records, \(summary.dropped) dropped")
}

func recorderBenchmark() {
    let sends = option("--sends", 100_000), rounds = option("--rounds", 5)
    let counted = Atomic<Int>(0)
    let server: WebSocketServer
    do {
        server = try WebSocketServer(host: "127.0.0.1", port: 0, handler: { _, event in
            if case .text = event { counted.add(1, ordering: .relaxed) }
        })
    } catch {
        fail("server: \(error)")
    }
    defer { server.stop() }
    let url = "ws://127.0.0.1:\(server.port)/ws/device-link"
    let path = temporaryPath("recorder")
    defer { unlink(path) }
    let recorder: WireRecorder
    do {
        // The in-app default: never block the app; drops would be counted (and reported below).
        recorder = try WireRecorder(path: path, source: .recorder, wallClockStart: "1970-01-01T00:00:00Z")
    } catch {
        fail("recorder: \(error)")
    }
    let message = #"{"type":"rpc.request","payload":{"id":"0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44","method":"session.update","params":{"sessionId":"sess-8d1c","updateData":{"name":"Refactor"}},"idempotencyKey":"0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#
    say("recorder benchmark: \(rounds) rounds of \(sends) sends of a \(message.utf8.count)-byte rpc.request on the Net client, without and with WireSocket.sent before each")
    let burst = option("--burst", 64)
    var plainCPU: [Double] = [], recordedCPU: [Double] = [], plainWall: [Double] = [], recordedWall: [Double] = []
    var plainAll: [Double] = [], recordedAll: [Double] = []
    var plainPaced: [Double] = [], recordedPaced: [Double] = []
    for _ in 0..<rounds {
        for recording in [false, true] {
            let channel = connect(url)
            let socket = recording ? recorder.openSocket(url: url, headers: []) : nil
            socket?.opened()
            var before = counted.load(ordering: .relaxed)
            let c0 = threadCPU(), w0 = monotonic(), p0 = processCPU()
            for _ in 0..<sends {
                socket?.sent(.text(message))
                do { try channel.send(text: message) } catch { fail("send: \(error)") }
            }
            let cpu = (threadCPU() - c0) / Double(sends), wall = (monotonic() - w0) / Double(sends)
            // Until the server has drained every send and the writer has written every record: the whole
            // process's CPU per send then holds the receiving side and the writer's compression too.
            while counted.load(ordering: .relaxed) - before < sends { usleep(1000) }
            recorder.flush()
            let all = (processCPU() - p0) / Double(sends)
            // Paced: bursts of `burst` sends (a few kilobytes, well inside the socket buffer), each timed
            // alone, the next once the server has counted the last. The sender then never meets a full
            // socket in either mode, so its CPU per send is the send path's own cost; flat out, a plain
            // sender outruns the server and pays for the blocking and wake-ups the slower recorded sender
            // does not (docs/BENCHMARKS.md, "Capture overhead").
            before = counted.load(ordering: .relaxed)
            var paced = 0.0
            var done = 0
            while done < sends {
                let n = min(burst, sends - done)
                let t0 = threadCPU()
                for _ in 0..<n {
                    socket?.sent(.text(message))
                    do { try channel.send(text: message) } catch { fail("send: \(error)") }
                }
                paced += threadCPU() - t0
                done += n
                while counted.load(ordering: .relaxed) - before < done { usleep(20) }
            }
            socket?.closed(code: 1000, reason: "", byClient: true)
            _ = try? channel.closeAndWait()
            if recording {
                recordedCPU.append(cpu); recordedWall.append(wall); recordedAll.append(all); recordedPaced.append(paced / Double(sends))
            } else {
                plainCPU.append(cpu); plainWall.append(wall); plainAll.append(all); plainPaced.append(paced / Double(sends))
            }
        }
    }
    let summary: TraceWriterSummary
    do { summary = try recorder.close() } catch { fail("closing the recording: \(error)") }
    // Medians, and minimums: on a shared machine the least disturbed round is the closest to the cost.
    func median(_ a: [Double]) -> Double { a.sorted()[a.count / 2] }
    func ratio(_ a: Double, _ b: Double) -> String { String(Int((a / b * 1000).rounded())).withDecimals(3) }
    for (name, plain, recorded) in [("paced_send_cpu_us", plainPaced, recordedPaced), ("send_cpu_us", plainCPU, recordedCPU), ("send_wall_us", plainWall, recordedWall),
                                      ("process_cpu_us", plainAll, recordedAll)] {
        let pm = median(plain), rm = median(recorded), p0 = plain.min() ?? 0, r0 = recorded.min() ?? 0
        say("\(name) median plain \(us(pm)) recorded \(us(rm)) ratio \(ratio(rm, pm)); min plain \(us(p0)) recorded \(us(r0)) ratio \(ratio(r0, p0))")
    }
    say("sends_per_s median plain \(Int(1 / median(plainWall))) recorded \(Int(1 / median(recordedWall)))")
    say("(paced_send_cpu_us: the sending thread's CPU per send in bursts of \(burst) that never fill the socket; send_cpu_us and send_wall_us: flat out; process_cpu_us: flat out, every thread of the process, the sender, the draining server and the trace writer)")
    say("recorded \(summary.records) records, \(summary.dropped) dropped; the server counted \(counted.load(ordering: .relaxed)) messages")
}

/// The recorder alone: `WireSocket.sent` of the same message, no socket (what the send path pays).
func appendOnly() {
    let sends = option("--sends", 1_000_000)
    let path = temporaryPath("append")
    defer { unlink(path) }
    let recorder: WireRecorder
    do {
        var o = TraceWriterOptions()
        o.blockWhenFull = true
        recorder = try WireRecorder(path: path, source: .recorder, wallClockStart: "1970-01-01T00:00:00Z", options: o)
    } catch {
        fail("recorder: \(error)")
    }
    let socket = recorder.openSocket(url: "ws://x/", headers: [])
    let message = String(repeating: "m", count: 300)
    let c0 = threadCPU(), w0 = monotonic()
    for _ in 0..<sends { socket.sent(.text(message)) }
    let cpu = (threadCPU() - c0) / Double(sends), wall = (monotonic() - w0) / Double(sends)
    _ = try? recorder.close()
    say("append_only cpu_us \(us(cpu)) wall_us \(us(wall)) per record")
}

switch CommandLine.arguments.dropFirst().first {
case "append": appendOnly()
case "proxy": proxyBenchmark()
case "recorder": recorderBenchmark()
default: fail("usage: relaytrace-wirebench proxy|recorder [options] (see the comment at the top of main.swift)")
}
