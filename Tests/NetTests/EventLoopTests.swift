import Dispatch
import Foundation
import Net
import Synchronization
import Testing
import WebSocket
import Sync

/// Values recorded on loop threads, with a bounded wait for a condition.
final class Waiter<Value: Sendable>: Sendable {
    private let storage = Locked<[Value]>([])
    private let changed = DispatchSemaphore(value: 0)

    func append(_ value: Value) {
        storage.withLock { $0.append(value) }
        changed.signal()
    }

    var values: [Value] { storage.withLock { $0 } }

    /// Waits (at most `timeout`) until `condition` holds for the values; returns them.
    @discardableResult
    func wait(timeout: Duration = testTimeout, until condition: ([Value]) -> Bool) -> [Value] {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while true {
            let now = values
            if condition(now) { return now }
            if ContinuousClock.now >= deadline { return now }
            _ = changed.wait(timeout: .now() + .milliseconds(50))
        }
    }

    /// Waits until `count` values arrived.
    @discardableResult
    func wait(count: Int, timeout: Duration = testTimeout) -> [Value] {
        wait(timeout: timeout) { $0.count >= count }
    }
}

/// What a loop client saw: the upgrade's outcome, then its events.
enum ClientSaw: Sendable, Equatable {
    case opened(Int, String?)
    case failed(WebSocketError)
    case event(WebSocketEvent)
}

/// Opens a loop client to `url`, recording everything on `saw`.
@discardableResult
func loopClient(_ url: String, on loop: EventLoop, headers: HTTPHeaders = HTTPHeaders(), tls: TLSClientConfiguration = TLSClientConfiguration(),
                configuration: WebSocketConfiguration = WebSocketConfiguration(), timeout: Duration = testTimeout,
                closeTimeout: Duration = testTimeout, saw: Waiter<ClientSaw>,
                onEvent: @escaping LoopWebSocketHandler = { _, _ in }) throws -> LoopWebSocket {
    try LoopWebSocket.connect(url: url, headers: headers, tls: tls, on: loop, timeout: timeout, configuration: configuration,
                              closeTimeout: closeTimeout,
                              onUpgrade: { _, result in
                                  switch result {
                                  case .success(let r): saw.append(.opened(r.status, r.headers["X-Served-By"]))
                                  case .failure(let e): saw.append(.failed(e))
                                  }
                              },
                              handler: { ws, event in
                                  saw.append(.event(event))
                                  onEvent(ws, event)
                              })
}

/// Runs `body` on `loop` and waits for it.
func onLoop<R: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () throws -> R) throws -> R {
    let box = Waiter<Result<R, TestFailure>>()
    loop.execute {
        do { box.append(.success(try body())) } catch { box.append(.failure(TestFailure("\(error)"))) }
    }
    guard let result = box.wait(count: 1).first else { throw TestFailure("the loop did not run the task in time") }
    return try result.get()
}

@Suite("Event loop")
struct EventLoopTests {
    @Test("tasks posted from other threads run in order on the loop thread; timers fire in deadline order; a cancelled one never")
    func tasksAndTimers() throws {
        let loop = try EventLoop(name: "test.loop")
        defer { loop.stop() }
        let seen = Waiter<String>()
        let onThread = Waiter<Bool>()
        for i in 0..<100 { loop.execute { seen.append("task \(i)"); onThread.append(loop.inLoop) } }
        #expect(seen.wait(count: 100) == (0..<100).map { "task \($0)" })
        #expect(onThread.values.allSatisfy { $0 })
        #expect(!loop.inLoop)

        let fired = Waiter<Int>()
        let start = ContinuousClock.now
        loop.schedule(at: start.advanced(by: .milliseconds(30))) { fired.append(3) }
        loop.schedule(at: start.advanced(by: .milliseconds(10))) { fired.append(1) }
        let cancelled = loop.schedule(at: start.advanced(by: .milliseconds(20))) { fired.append(2) }
        loop.schedule(at: start.advanced(by: .milliseconds(20))) { fired.append(22) }
        cancelled.cancel()
        #expect(fired.wait(count: 3) == [1, 22, 3])
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        // A timer whose deadline has passed runs at once; timers armed from the loop run too.
        loop.execute { loop.schedule(after: .zero) { fired.append(4) } }
        #expect(fired.wait(count: 4) == [1, 22, 3, 4])
    }

    @Test("stop joins the thread; tasks posted after it are not run")
    func stopDropsLaterTasks() throws {
        let loop = try EventLoop(name: "test.stop")
        let seen = Waiter<Int>()
        loop.execute { seen.append(1) }
        #expect(seen.wait(count: 1) == [1])
        loop.stop()
        loop.execute { seen.append(2) }
        loop.stop()
        #expect(seen.values == [1])
    }

    @Test("a group hands its loops out in turn")
    func groupRoundRobin() throws {
        let group = try EventLoopGroup(threads: 3, name: "test.group")
        defer { group.stop() }
        let picked = (0..<6).map { _ in group.next() }
        #expect(picked[0] !== picked[1] && picked[1] !== picked[2] && picked[0] !== picked[2])
        #expect(picked[3] === picked[0] && picked[4] === picked[1] && picked[5] === picked[2])
    }
}

@Suite("WebSocket on the event loop")
struct LoopWebSocketTests {
    private func echoServer(tls: TLSServerContext? = nil, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            limits: LoopBufferLimits = LoopBufferLimits(), group: EventLoopGroup? = nil,
                            closeTimeout: Duration = testTimeout,
                            decide: @escaping @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { _ in .accept(headers: ["X-Served-By": "loop"]) },
                            events: Recorder<WebSocketEvent>) throws -> WebSocketServer {
        try WebSocketServer(host: "127.0.0.1", tls: tls, configuration: configuration, limits: limits, handshakeTimeout: testTimeout,
                            closeTimeout: closeTimeout, group: group, decide: decide, handler: echoHandler(events))
    }

    @Test("a loop client: upgrade headers both ways, status and headers visible, echo of text and binary, close handshake")
    func loopClientRoundTrip() throws {
        let group = try EventLoopGroup(threads: 2, name: "test.client")
        defer { group.stop() }
        let serverEvents = Recorder<WebSocketEvent>()
        let server = try echoServer(decide: { request in
            request.headers["X-Device-ID"] == "d-1" ? .accept(headers: ["X-Served-By": "loop"]) : .refuse(status: 400)
        }, events: serverEvents)
        defer { server.stop() }
        var random = TestRandom(seed: 11)
        let text = random.text(3_000), blob = random.bytes(300_000)
        let saw = Waiter<ClientSaw>()
        let ws = try loopClient("ws://127.0.0.1:\(server.port)/echo?x=1", on: group.next(), headers: ["X-Device-ID": "d-1"], saw: saw,
                                onEvent: { _, _ in })
        #expect(saw.wait(count: 1).first == .opened(101, "loop"))
        try onLoop(ws.loop) {
            try ws.send(text: text)
            try ws.send(binary: blob)
        }
        #expect(Array(saw.wait(count: 3).dropFirst()) == [.event(.text(text)), .event(.binary(blob))])
        try onLoop(ws.loop) { try ws.close(code: WebSocketCloseCode(4000), reason: "bye") }
        #expect(saw.wait(count: 4).last == .event(.closed(code: WebSocketCloseCode(4000), reason: "")))
        let response = try onLoop(ws.loop) { ws.response }
        #expect(response?.headers["Sec-WebSocket-Accept"] != nil)
        server.stop()
        #expect(serverEvents.values == [.text(text), .binary(blob), .closed(code: WebSocketCloseCode(4000), reason: "bye")])
    }

    @Test("a refused upgrade reaches the loop client with its status and headers")
    func loopClientRefused() throws {
        let loop = try EventLoop(name: "test.refused")
        defer { loop.stop() }
        let server = try echoServer(decide: { _ in .refuse(status: 401, headers: ["WWW-Authenticate": "Bearer"], body: "bad token") },
                                    events: Recorder())
        defer { server.stop() }
        let saw = Waiter<ClientSaw>()
        try loopClient("ws://127.0.0.1:\(server.port)/", on: loop, saw: saw)
        guard case .failed(let error)? = saw.wait(count: 1).first, case .handshake(let e) = error else {
            Issue.record("expected a handshake failure, got \(saw.values)")
            return
        }
        #expect(e.kind == .refused)
        #expect(e.httpStatus == 401)
        #expect(e.responseHeaders["WWW-Authenticate"] == "Bearer")
    }

    @Test("loop client failures: a closed port, a server that never answers the upgrade, a bad URL")
    func loopClientFailures() throws {
        let loop = try EventLoop(name: "test.failures")
        defer { loop.stop() }
        let closedPort: UInt16 = try {
            let l = try TCPListener(host: "127.0.0.1")
            return l.port
        }()
        let refused = Waiter<ClientSaw>()
        try loopClient("ws://127.0.0.1:\(closedPort)/", on: loop, saw: refused)
        if case .failed(.transport(let e))? = refused.wait(count: 1).first {
            #expect(e.kind == .connectionRefused)
        } else {
            Issue.record("expected connectionRefused, got \(refused.values)")
        }

        let silent = try TCPListener(host: "127.0.0.1")
        let timedOut = Waiter<ClientSaw>()
        try loopClient("ws://127.0.0.1:\(silent.port)/", on: loop, timeout: .milliseconds(100), saw: timedOut)
        if case .failed(.transport(let e))? = timedOut.wait(count: 1).first {
            #expect(e.kind == .timedOut)
        } else {
            Issue.record("expected a timeout, got \(timedOut.values)")
        }
        #expect(throws: WebSocketError.self) { try loopClient("http://x/", on: loop, saw: Waiter()) }
    }

    @Test("wss on the loop both ways: verification on, 4 MiB messages (partial TLS writes), an untrusted CA refused",
          arguments: [false, true])
    func loopTLS(untrusted: Bool) throws {
        let pki = try TestPKI.get()
        let identity = try TLSServerContext(certificateFile: pki.certificateFile, privateKeyFile: pki.keyFile)
        let group = try EventLoopGroup(threads: 2, name: "test.tls")
        defer { group.stop() }
        let serverEvents = Recorder<WebSocketEvent>()
        let server = try echoServer(tls: identity, group: group, events: serverEvents)
        defer { server.stop() }
        let saw = Waiter<ClientSaw>()
        let trust = TLSClientConfiguration(trustedCAFile: untrusted ? pki.otherCAFile : pki.caFile)
        let ws = try loopClient("wss://localhost:\(server.port)/", on: group.next(), tls: trust, saw: saw)
        if untrusted {
            guard case .failed(.transport(let e))? = saw.wait(count: 1).first else {
                Issue.record("expected a verification failure, got \(saw.values)")
                return
            }
            #expect(e.kind == .certificateVerification)
            return
        }
        #expect(saw.wait(count: 1).first == .opened(101, "loop"))
        var random = TestRandom(seed: 12)
        let blobs = (0..<3).map { _ in random.bytes(4 << 20) }
        try onLoop(ws.loop) { for b in blobs { try ws.send(binary: b) } }
        #expect(Array(saw.wait(count: 4).dropFirst()) == blobs.map { .event(.binary($0)) })
        try onLoop(ws.loop) { try ws.close() }
        #expect(saw.wait(count: 5).last == .event(.closed(code: .normalClosure, reason: "")))
    }

    @Test("the blocking client against the loop server over many connections at once on two loops")
    func manyConnections() throws {
        let group = try EventLoopGroup(threads: 2, name: "test.many")
        defer { group.stop() }
        let server = try echoServer(group: group, events: Recorder())
        defer { server.stop() }
        let count = 60
        let sockets = try (0..<count).map { _ in try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout) }
        #expect(server.connectionCount == count)
        for (i, ws) in sockets.enumerated() { try ws.send(text: "hello \(i)") }
        for (i, ws) in sockets.enumerated() { #expect(try receiveMessage(ws) == .text("hello \(i)")) }
        for ws in sockets { try ws.closeAndWait() }
    }

    @Test("backpressure: output over the pause mark stops reading; draining resumes it (onWritable), nothing lost")
    func backpressurePausesAndResumes() throws {
        let group = try EventLoopGroup(threads: 1, name: "test.bp")
        defer { group.stop() }
        let observations = Waiter<String>()
        let chunk = [UInt8](repeating: 7, count: 512 << 10)
        let server = try WebSocketServer(host: "127.0.0.1", limits: LoopBufferLimits(pauseReadingAbove: 1 << 20, resumeReadingBelow: 64 << 10),
                                         group: group, decide: { _ in .accept() }) { ws, event in
            switch event {
            case .text("burst"):
                for _ in 0..<4 { try? ws.send(binary: chunk) }
                observations.append("paused \(ws.isReadingPaused) buffered \(ws.bufferedOutputBytes > 1 << 20)")
                ws.onWritable = { w in observations.append("writable, paused \(w.isReadingPaused)") }
            case .text(let t):
                try? ws.send(text: t)
            default:
                break
            }
        }
        defer { server.stop() }
        let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
        try ws.send(text: "burst")
        #expect(observations.wait(count: 1).first == "paused true buffered true")
        try ws.send(text: "after the burst")
        for _ in 0..<4 { #expect(try receiveMessage(ws) == .binary(chunk)) }
        #expect(try receiveMessage(ws) == .text("after the burst"))
        #expect(observations.wait(count: 2).last == "writable, paused false")
        try ws.closeAndWait()
    }

    @Test("a peer that never reads: over maxBufferedOutput the send throws and the connection ends with 1006, saying why")
    func boundedOutputDropsANonReader() throws {
        let group = try EventLoopGroup(threads: 1, name: "test.bound")
        defer { group.stop() }
        let outcome = Waiter<String>()
        let megabyte = [UInt8](repeating: 1, count: 1 << 20)
        let server = try WebSocketServer(host: "127.0.0.1", limits: LoopBufferLimits(maxBufferedOutput: 8 << 20),
                                         group: group, decide: { _ in .accept() }) { ws, event in
            switch event {
            case .text("flood"):
                var sent = 0
                do {
                    while sent < 100 {
                        try ws.send(binary: megabyte)
                        sent += 1
                    }
                    outcome.append("all sent")
                } catch {
                    outcome.append("sent \(sent), then \("\(error)".contains("not reading") ? "refused" : "\(error)")")
                }
            case .closed(let code, let reason):
                outcome.append("closed \(code.rawValue) \(reason.contains("not reading"))")
            default:
                break
            }
        }
        defer { server.stop() }
        let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
        try ws.send(text: "flood")
        // The sends are queued before any write: the 8th megabyte (plus frame headers) passes the bound.
        #expect(outcome.wait(count: 2) == ["sent 7, then refused", "closed 1006 true"], "the last event waits until the handler returns")
        ws.abort()
    }

    @Test("transparent mode, server side: pings, pongs and the close frame go to the handler, which answers them")
    func transparentServer() throws {
        let group = try EventLoopGroup(threads: 1, name: "test.transparent")
        defer { group.stop() }
        let seen = Waiter<WebSocketEvent>()
        let server = try WebSocketServer(host: "127.0.0.1", configuration: .transparent(), group: group,
                                         decide: { _ in .accept() }) { ws, event in
            seen.append(event)
            switch event {
            case .ping(let p): try? ws.pong(Array("handler:".utf8) + p)
            case .closeReceived(let code, _): try? ws.close(code: WebSocketCloseCode(code.rawValue + 1), reason: "answered by the handler")
            case .text(let t): try? ws.send(text: t)
            default: break
            }
        }
        defer { server.stop() }
        let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout,
                                             configuration: WebSocketConfiguration(outboundFragmentSize: 5))
        try ws.ping(Array("p1".utf8))
        #expect(try ws.receive(timeout: testTimeout) == .pong(Array("handler:p1".utf8)))
        try ws.pong(Array("unsolicited".utf8))
        try ws.send(text: "fragmented into five-byte frames")
        #expect(try receiveMessage(ws) == .text("fragmented into five-byte frames"))
        #expect(try ws.closeAndWait(code: WebSocketCloseCode(4001), reason: "bye") == .closed(code: WebSocketCloseCode(4002), reason: "answered by the handler"))
        #expect(seen.wait(count: 5) == [.ping(Array("p1".utf8)), .pong(Array("unsolicited".utf8)), .text("fragmented into five-byte frames"),
                                        .closeReceived(code: WebSocketCloseCode(4001), reason: "bye"),
                                        .closed(code: WebSocketCloseCode(4001), reason: "bye")])
    }

    @Test("transparent mode, client side: the server's ping is not answered by the codec; the handler forwards a close")
    func transparentClient() throws {
        let group = try EventLoopGroup(threads: 1, name: "test.transparent-client")
        defer { group.stop() }
        let serverSaw = Recorder<WebSocketEvent>()
        let server = try echoServer(group: group, events: serverSaw)
        defer { server.stop() }
        let saw = Waiter<ClientSaw>()
        let ws = try loopClient("ws://127.0.0.1:\(server.port)/", on: group.next(), configuration: .transparent(), saw: saw) { ws, event in
            if case .ping(let p) = event { try? ws.pong(Array("client handler:".utf8) + p) }
        }
        #expect(saw.wait(count: 1).first == .opened(101, "loop"))
        try onLoop(ws.loop) { try ws.send(text: "ping:from-server") }
        // The echo server pings; our handler (not the codec) answers; the server reports the pong's payload.
        let events = saw.wait(count: 3)
        #expect(Array(events.dropFirst()) == [.event(.ping(Array("from-server".utf8))), .event(.text("pong:client handler:from-server"))])
        try onLoop(ws.loop) { try ws.send(text: "close:4003:server closes") }
        #expect(saw.wait(count: 4).last == .event(.closeReceived(code: WebSocketCloseCode(4003), reason: "server closes")))
        try onLoop(ws.loop) { try ws.close(code: WebSocketCloseCode(4003), reason: "forwarded") }
        #expect(saw.wait(count: 5).last == .event(.closed(code: WebSocketCloseCode(4003), reason: "server closes")))
        server.stop()
        #expect(serverSaw.values.last == .closed(code: WebSocketCloseCode(4003), reason: "forwarded"))
    }

    @Test("a close the peer never answers ends with 1006 after the close timeout, on a loop timer")
    func loopCloseTimeout() throws {
        let loop = try EventLoop(name: "test.close-timeout")
        defer { loop.stop() }
        let listener = try TCPListener(host: "127.0.0.1")
        let server = try NetThread {
            guard let tcp = try? listener.accept(timeout: testTimeout) else { return }
            var handshake = WebSocketServerHandshake()
            while let chunk = try? tcp.read(maxCount: 4096, timeout: testTimeout), !chunk.isEmpty {
                if case .complete(let request, _)? = try? handshake.receive(chunk),
                   let response = try? WebSocketHandshake.acceptResponse(for: request) {
                    try? tcp.write(response, timeout: testTimeout)
                    break
                }
            }
            while let chunk = try? tcp.read(maxCount: 1 << 16, timeout: testTimeout), !chunk.isEmpty {}
        }
        defer { server.join() }
        let saw = Waiter<ClientSaw>()
        let ws = try loopClient("ws://127.0.0.1:\(listener.port)/", on: loop, closeTimeout: .milliseconds(50), saw: saw)
        #expect(saw.wait(count: 1).first == .opened(101, nil))
        let start = ContinuousClock.now
        try onLoop(loop) { try ws.close(code: .goingAway) }
        guard case .event(.closed(let code, let reason))? = saw.wait(count: 2).last else {
            Issue.record("expected closed, got \(saw.values)")
            return
        }
        #expect(code == .abnormalClosure)
        #expect(reason.contains("no close frame"))
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test("stop drops open connections: handlers get 1006, clients see the end")
    func stopDropsConnections() throws {
        let events = Recorder<WebSocketEvent>()
        let server = try echoServer(events: events)
        let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
        try ws.send(text: "hi")
        #expect(try receiveMessage(ws) == .text("hi"))
        server.stop()
        if case .closed(let code, let reason)? = events.values.last { #expect(code == .abnormalClosure && reason.contains("the server stopped"), "\(reason)") } else { Issue.record("no closed event: \(events.values)") }
        guard case .closed(let code, _) = try receiveMessage(ws) else {
            Issue.record("expected closed")
            return
        }
        #expect(code == .abnormalClosure)
        #expect(server.connectionCount == 0)
    }
}
