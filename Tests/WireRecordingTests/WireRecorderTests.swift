import Foundation
import Glibc
import Net
import RelayProtocol
import Runtime
import Simulation
import Synchronization
import Testing
import Trace
import WebSocket
import WireRecording
import Sync

/// A trace file in the temporary directory, removed by the caller.
func temporaryTrace() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("wire-\(getpid())-\(UUID().uuidString).rtrace").path
}

func records(_ path: String) throws -> (TraceHeader, [TraceRecord]) {
    let reader = try TraceReader(path: path)
    var out: [TraceRecord] = []
    while let e = try reader.next() { out.append(e.record) }
    return (reader.header, out)
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let now = Locked(Moment.zero)
    func advance(ms: Int64) { now.withLock { $0 = $0 + .milliseconds(ms) } }
    var read: @Sendable () -> Moment { { [self] in now.withLock { $0 } } }
}

@Suite("WireRecorder")
struct WireRecorderTests {
    @Test("every socket event becomes its record: kind, generation, direction, time and payload")
    func recordsEachEvent() throws {
        let path = temporaryTrace()
        defer { unlink(path) }
        let clock = ManualClock()
        let recorder = try WireRecorder(path: path, source: .recorder, details: ["app": "Test 1.0"], wallClockStart: "2026-12-01T10:00:00Z",
                                        clock: clock.read)
        clock.advance(ms: 10)
        let s = recorder.openSocket(url: "wss://relay.example/ws/device-link", headers: [
            ("Authorization", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1In0.sig"), ("X-Device-ID", "dev-1"),
            ("X-Token-Binding", "dev-1"), ("X-Client-Type", "mobile"), ("X-Target-Desktop-Device-ID", "desk-9"), ("Cookie", "a=1"),
        ], peer: "10.0.0.2:5555")
        clock.advance(ms: 5)
        s.opened(status: 101, headers: [("Upgrade", "websocket"), ("Set-Cookie", "b=2")])
        clock.advance(ms: 1)
        s.sent(.text(#"{"type":"heartbeat"}"#))
        clock.advance(ms: 2)
        s.received(.text(#"{"type":"pong"}"#))
        s.received(.binary([0x50, 0x54, 0x43, 0x31, 0, 1, 0x41, 0x7A]))
        s.ping([1, 2], .inbound)
        s.pong([1, 2], .outbound)
        clock.advance(ms: 3)
        s.closed(code: 1001, reason: "going away", byClient: true)
        s.closed(code: 1000, reason: "the echo", byClient: false)  // ignored: the socket is done
        s.failed("late")  // ignored too
        let t = recorder.openSocket(url: "wss://relay.example/ws/device-link", headers: [])
        t.refused(status: 401, reason: "bad token")
        recorder.connectionFailed("TLS handshake failed", peer: "10.0.0.3:1")
        #expect(recorder.sockets == 3)
        try recorder.close()

        let (header, rs) = try records(path)
        #expect(header.isWireTrace && header.wireSource == "recorder" && header.wire?["app"]?.stringValue == "Test 1.0")
        #expect(header.seed == 0 && header.wallClockStart == "2026-12-01T10:00:00Z")
        #expect(rs.map(\.kind) == [.transportOpen, .transportOpened, .frameText, .frameText, .frameBinary, .ping, .pong,
                                   .transportClosed, .transportOpen, .transportFailed, .transportFailed])
        #expect(rs.map(\.generation) == [1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3])
        #expect(rs.map(\.direction) == [.outbound, .inbound, .outbound, .inbound, .inbound, .inbound, .outbound, .outbound, .outbound, .inbound, .inbound])
        #expect(rs.map(\.time.nanoseconds) == [10, 15, 16, 18, 18, 18, 18, 21, 21, 21, 21].map { $0 * 1_000_000 })
        let open = try JSONValue(parsing: rs[0].payload)
        #expect(open["deviceId"] == "dev-1" && open["desktopId"] == "desk-9" && open["clientType"] == "mobile" && open["peer"] == "10.0.0.2:5555")
        #expect(open["url"] == "wss://relay.example/ws/device-link")
        #expect(open["headerOrder"]?.arrayValue?.count == 6)
        for secret in ["Authorization", "X-Token-Binding", "Cookie"] {
            #expect(open["headers"]?[secret]?.stringValue?.contains("rt:redacted:") == true, "\(secret) is redacted")
        }
        #expect(open["headers"]?["X-Device-ID"] == "dev-1")
        let upgraded = try JSONValue(parsing: rs[1].payload)
        #expect(upgraded["status"] == 101 && upgraded["headers"]?["Set-Cookie"]?.stringValue?.hasPrefix("rt:redacted:") == true)
        #expect(rs[4].payload == [0x50, 0x54, 0x43, 0x31, 0, 1, 0x41, 0x7A] && rs[5].payload == [1, 2])
        let closed = try JSONValue(parsing: rs[7].payload)
        #expect(closed["code"] == 1001 && closed["reason"] == "going away" && closed["clean"] == true)
        #expect(try JSONValue(parsing: rs[9].payload)["status"] == 401)
        #expect(try JSONValue(parsing: rs[10].payload)["peer"] == "10.0.0.3:1")
    }

    @Test("sockets recorded from many threads at once: every record, per-socket order kept, times never go back")
    func concurrentSockets() throws {
        let path = temporaryTrace()
        defer { unlink(path) }
        var options = TraceWriterOptions()
        options.blockWhenFull = true
        let recorder = try WireRecorder(path: path, source: .proxy, wallClockStart: "2026-12-01T10:00:00Z", options: options)
        let threads = 8, messages = 2_000
        let done = DispatchGroup()
        for i in 0..<threads {
            DispatchQueue.global().async(group: done) {
                let s = recorder.openSocket(url: "/ws/device-link", headers: [("X-Device-ID", "dev-\(i)")])
                s.opened()
                for m in 0..<messages { s.message(.text(#"{"type":"n","n":\#(m)}"#), m % 2 == 0 ? .outbound : .inbound) }
                s.closed(code: 1000, reason: "", byClient: true)
            }
        }
        done.wait()
        let summary = try recorder.close()
        #expect(summary.dropped == 0)
        let (_, rs) = try records(path)
        #expect(rs.count == threads * (messages + 3))
        #expect(zip(rs, rs.dropFirst()).allSatisfy { $0.time <= $1.time }, "times never go back in the file")
        var byGeneration: [UInt64: [TraceRecord]] = [:]
        for r in rs { byGeneration[r.generation!, default: []].append(r) }
        #expect(Set(byGeneration.keys) == Set(1...UInt64(threads)))
        for (_, socket) in byGeneration {
            #expect(socket.first?.kind == .transportOpen && socket.last?.kind == .transportClosed)
            let numbers = socket.filter { $0.kind == .frameText }.compactMap { try? JSONValue(parsing: $0.payload)["n"]?.intValue }
            #expect(numbers == (0..<Int64(messages)).map { $0 }, "a socket's messages stay in order")
        }
    }

    @Test("a recorder that is never closed leaves an incomplete trace whose flushed records are all readable")
    func unclosedTraceIsReadable() throws {
        let path = temporaryTrace()
        defer { unlink(path) }
        let recorder = try WireRecorder(path: path, source: .recorder, wallClockStart: "2026-12-01T10:00:00Z")
        let s = recorder.openSocket(url: "/ws/device-link", headers: [])
        s.opened()
        for i in 0..<100 { s.sent(.text("{\"i\":\(i)}")) }
        recorder.flush()
        let reader = try TraceReader(path: path)
        #expect(!reader.isComplete)
        var count = 0
        while try reader.next() != nil { count += 1 }
        #expect(count == 102)
        try recorder.close()
        #expect(try TraceReader(path: path).isComplete)
    }

    @Test("an existing file is kept unless the options allow overwriting")
    func refusesToOverwrite() throws {
        let path = temporaryTrace()
        defer { unlink(path) }
        try Array("precious".utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        #expect(throws: TraceError.self) { _ = try WireRecorder(path: path, source: .recorder, wallClockStart: "x") }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious")
        var options = TraceWriterOptions()
        options.overwrite = true
        try WireRecorder(path: path, source: .recorder, wallClockStart: "x", options: options).close()
        #expect(try TraceReader(path: path).header.isWireTrace)
    }

    /// The documented example (RecordedChannel.swift): the project's own Net client records itself
    /// against the development relay; the trace holds the exchange as the client saw it.
    @Test("the Net client wrapped in the recorder records its own session against the relay", .timeLimit(.minutes(5)))
    func netClientRecordsItself() throws {
        let path = temporaryTrace()
        defer { unlink(path) }
        let relay = try RelayHost(host: "127.0.0.1", port: 0, wallClockOrigin: 1_764_000_000_000)
        defer { relay.stop() }
        let recorder = try WireRecorder(path: path, source: .recorder, details: ["app": "RecordedChannel test"], wallClockStart: "2026-12-01T10:00:00Z")
        let device = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", desktop = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
        let headers = HTTPHeaders([
            ("Authorization", "Bearer " + Simulation.phoneJWT(userId: "user-dev", deviceId: device, serial: 0)),
            ("X-Device-ID", device), ("X-Token-Binding", device), ("X-Client-Type", "mobile"), ("X-Target-Desktop-Device-ID", desktop),
        ])
        let client = try RecordedChannel.connect(url: relay.url, headers: headers, recorder: recorder)
        func next(_ type: String) throws -> String {
            while true {
                if case .text(let t) = try client.receive(timeout: .seconds(10)), (try? JSONValue(parsing: t))?["type"]?.stringValue == type { return t }
            }
        }
        try client.send(text: #"{"type":"register","payload":{"deviceId":"\#(device)","deviceName":"test","relayProtocolVersion":"1.6","targetDesktopDeviceId":"\#(desktop)"}}"#)
        _ = try next("registered")
        try client.send(text: #"{"type":"rpc.request","payload":{"id":"A1","method":"system.ping","params":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#)
        let response = try next("rpc.response")
        try client.ping([7, 7])
        while true { if case .pong = try client.receive(timeout: .seconds(10)) { break } }
        try client.close(code: .goingAway, reason: "bye")
        try recorder.close()

        let (header, rs) = try records(path)
        #expect(header.wireSource == "recorder")
        #expect(Set(rs.compactMap(\.generation)) == [1])
        let outText = rs.filter { $0.kind == .frameText && $0.direction == .outbound }.map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(outText.count == 2 && outText[0].contains("\"register\"") && outText[1].contains("system.ping"))
        let inText = rs.filter { $0.kind == .frameText && $0.direction == .inbound }.map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(inText.contains { $0.contains("\"registered\"") } && inText.contains(response))
        #expect(rs.contains { $0.kind == .ping && $0.direction == .outbound && $0.payload == [7, 7] })
        #expect(rs.contains { $0.kind == .pong && $0.direction == .inbound && $0.payload == [7, 7] })
        let close = try #require(rs.last)
        #expect(close.kind == .transportClosed && close.direction == .outbound)
        #expect(try JSONValue(parsing: close.payload)["code"] == 1001)
        let open = try JSONValue(parsing: rs[0].payload)
        #expect(open["deviceId"]?.stringValue == device && open["headers"]?["Authorization"]?.stringValue?.hasPrefix("Bearer rt:redacted:") == true)
    }
}
