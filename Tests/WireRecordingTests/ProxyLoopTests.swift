import Foundation
import Glibc
import Net
import Proxy
import Synchronization
import Testing
import Trace
import WebSocket
import WireRecording
import Sync

/// The recording proxy on its event loops, against the loop echo server, with the blocking client.
@Suite("RecordingProxy on event loops")
struct ProxyLoopTests {
    @Test("megabytes both ways through the proxy while a reader thread takes the echoes: no stall, nothing lost, all recorded",
          .timeLimit(.minutes(5)))
    func bulkThroughTheProxy() throws {
        // Backpressure crosses over in the proxy (a leg that does not drain pauses the other leg's
        // reading) while the echo server pauses its own reading: both must keep 8 MiB moving each way.
        // Loopback's kernel buffers are megabytes, so this checks flow and completeness, not the bound.
        let echo = try WebSocketServer(host: "127.0.0.1", handler: { ws, event in
            if case .binary(let b) = event { try? ws.send(binary: b) }
        })
        defer { echo.stop() }
        let path = temporaryTrace()
        defer { unlink(path) }
        var options = TraceWriterOptions()
        options.blockWhenFull = true
        let recorder = try WireRecorder(path: path, source: .proxy, wallClockStart: "2026-12-01T10:00:00Z", options: options)
        let proxy = try RecordingProxy(upstream: ProxyUpstream(url: try WebSocketURL("ws://127.0.0.1:\(echo.port)/ws/device-link")),
                                       recorder: recorder)
        let ws = try WebSocketClient.connect(url: proxy.url, timeout: .seconds(20))
        let blobs = (0..<16).map { i in [UInt8](repeating: UInt8(i), count: 512 << 10) }
        let received = Locked<[[UInt8]]>([])
        let reader = try NetThread {
            for _ in blobs {
                guard case .binary(let b)? = try? ws.receive(timeout: .seconds(20)) else { return }
                received.withLock { $0.append(b) }
            }
        }
        for blob in blobs { try ws.send(binary: blob) }
        reader.join()
        #expect(received.withLock { $0 } == blobs)
        #expect(try ws.closeAndWait(code: .normalClosure) == .closed(code: .normalClosure, reason: ""))
        proxy.stop()
        _ = try recorder.close()
        let (_, all) = try records(path)
        let binaries = all.filter { $0.kind == .frameBinary }
        #expect(binaries.filter { $0.direction == .outbound }.count == blobs.count)
        #expect(binaries.filter { $0.direction == .inbound }.count == blobs.count)
        #expect(all.contains { $0.kind == .transportClosed })
    }
}
