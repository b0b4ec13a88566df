import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Testing
import Trace

/// A python client sending one numbered message every 20 ms, printing each number with its
/// `time.monotonic()` (CLOCK_MONOTONIC, the clock the test reads) once the echo came back.
private let streamingClient = #"""
import asyncio, json, sys, time
from websockets.asyncio.client import connect

async def main(url):
    async with connect(url, compression=None, ping_interval=None) as ws:
        seq = 0
        while True:
            sent = time.monotonic()
            await ws.send(json.dumps({"type": "heartbeat", "seq": seq}))
            await ws.recv()
            print(seq, sent, flush=True)
            seq += 1
            await asyncio.sleep(0.02)

try:
    asyncio.run(main(sys.argv[1]))
except Exception:
    pass
"""#

/// The wire trace is crash-safe as the capture trace is: `relaytrace proxy` killed with SIGKILL mid-session
/// leaves a trace whose records run without a gap up to at most one second before the kill. Integration
/// test: it waits real time (about 2 s of traffic) because the property is about what a killed process
/// leaves on disk.
@Suite("wire traces survive kill -9",
       .enabled(if: interopPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does)"))
struct WireCrashTests {
    @Test("a proxy killed with SIGKILL loses at most the last second", .timeLimit(.minutes(5)))
    func killedProxyLosesAtMostOneSecond() throws {
        let python = try #require(interopPython)
        let recording = tempPath("rtrace")
        defer { unlink(recording) }
        let echo = try Child(python, [packageRoot.appendingPathComponent("tools/interop/ws_echo_server.py").path, "--timeout", "60"])
        defer { echo.kill() }
        let port = try #require(echo.stdout.firstLine(within: .seconds(30)), "the echo server printed no port: \(echo.stderr.text)")
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        let proxy = try Child(binary, ["proxy", "--listen", "127.0.0.1:0", "--upstream", "ws://127.0.0.1:\(port)/echo", "-o", recording, "--for", "60s"])
        defer { proxy.kill() }
        let line = try #require(proxy.stdout.firstLine(within: .seconds(30)), "the proxy printed no first line: \(proxy.stderr.text)")
        let url = try #require(line.split(separator: " ").dropFirst(2).first.map(String.init), "unexpected first line \(line)")

        let client = try Child(python, ["-c", streamingClient, url])
        defer { client.kill() }
        // About 2 s of traffic (100 round trips at 20 ms), then the kill.
        try #require(client.stdout.waitForLines(100, within: .seconds(60)), "the client stopped early: \(client.stderr.text)")
        var killedAt = timespec()
        clock_gettime(CLOCK_MONOTONIC, &killedAt)
        Glibc.kill(proxy.process.processIdentifier, SIGKILL)
        #expect(proxy.waitForExit(within: .seconds(10)) != nil)
        #expect(proxy.process.terminationReason == .uncaughtSignal)
        let killed = Double(killedAt.tv_sec) + Double(killedAt.tv_nsec) / 1e9
        _ = client.waitForExit(within: .seconds(10))

        // When the client sent each number (it printed only those whose echo came back before the kill).
        var sentAt: [Int: Double] = [:]
        for line in client.stdout.text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let seq = Int(fields[0]), let t = Double(fields[1]) { sentAt[seq] = t }
        }
        let confirmed = try #require(sentAt.keys.max())

        // The recording is incomplete (no trailer) and reads up to, at worst, a torn last chunk.
        let reader = try TraceReader(path: recording)
        #expect(!reader.isComplete)
        #expect(reader.header.isWireTrace)
        let (entries, error) = reader.readAll()
        if let error { #expect(error.code == .truncated, "\(error)") }
        var outbound: [Int] = []
        for entry in entries where entry.record.kind == .frameText && entry.record.direction == .outbound {
            if let seq = (try? JSONValue(parsing: entry.record.payload))?["seq"]?.intValue { outbound.append(Int(seq)) }
        }
        // Every message the client sent is there in order, with no gap, up to the last one recorded...
        #expect(!outbound.isEmpty && outbound == Array(0..<outbound.count), "recorded \(outbound.prefix(5))... of \(outbound.count)")
        // ...which the client sent at most one second before the kill (or later: it was confirmed).
        let last = try #require(outbound.last)
        if last < confirmed {
            let lastSent = try #require(sentAt[last])
            #expect(killed - lastSent <= 1.0, "the last recorded message was sent \(killed - lastSent) s before the kill")
        }
        #expect(outbound.count >= 50, "only \(outbound.count) messages recorded")
    }
}
