import Net
import Testing
import WebSocket

/// Swift client <-> Swift server over real loopback sockets.
@Suite("WebSocket loopback")
struct WebSocketLoopbackTests {
    private func withServer(configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            decide: @escaping @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { _ in .accept() },
                            _ body: (WebSocketServer, Recorder<WebSocketEvent>) throws -> Void) throws -> [WebSocketEvent] {
        let events = Recorder<WebSocketEvent>()
        let server = try WebSocketServer(host: "127.0.0.1", configuration: configuration, handshakeTimeout: testTimeout,
                                         closeTimeout: testTimeout, decide: decide, handler: echoHandler(events))
        defer { server.stop() }
        try body(server, events)
        server.stop()
        return events.values
    }

    @Test("text and binary round trips, including multi-byte text and a 1 MiB message")
    func roundTrips() throws {
        var random = TestRandom(seed: 1)
        let texts = [random.text(1), random.text(200), random.text(70_000), ""]
        let blobs = [random.bytes(1), random.bytes(125), random.bytes(126), random.bytes(65_536), random.bytes(1 << 20)]
        let serverEvents = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/echo", timeout: testTimeout)
            for text in texts {
                try ws.send(text: text)
                #expect(try receiveMessage(ws) == .text(text))
            }
            for blob in blobs {
                try ws.send(binary: blob)
                #expect(try receiveMessage(ws) == .binary(blob))
            }
            let closed = try ws.closeAndWait(code: .normalClosure, reason: "done")
            // The server echoes the code (RFC 6455 §5.5.1), not the reason.
            #expect(closed == .closed(code: .normalClosure, reason: ""))
            #expect(ws.state == .closed)
            #expect(throws: WebSocketError.self) { try ws.receive(timeout: testTimeout) }
        }
        #expect(serverEvents == texts.map { .text($0) } + blobs.map { .binary($0) } + [.closed(code: .normalClosure, reason: "done")])
    }

    @Test("IPv6 loopback and a URL without a path")
    func ipv6() throws {
        let events = Recorder<WebSocketEvent>()
        let server = try WebSocketServer(host: "::1", handshakeTimeout: testTimeout, handler: echoHandler(events))
        defer { server.stop() }
        let ws = try WebSocketClient.connect(url: "ws://[::1]:\(server.port)", timeout: testTimeout)
        try ws.send(text: "v6")
        #expect(try receiveMessage(ws) == .text("v6"))
        try ws.closeAndWait()
    }

    @Test("fragmented messages both ways are reassembled")
    func fragmented() throws {
        var random = TestRandom(seed: 2)
        let text = random.text(5_000)
        let blob = random.bytes(10_000)
        // The server fragments what it sends into 100-byte frames; the client into 7-byte frames.
        let serverEvents = try withServer(configuration: WebSocketConfiguration(outboundFragmentSize: 100)) { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout,
                                                 configuration: WebSocketConfiguration(outboundFragmentSize: 7))
            try ws.send(text: text)
            #expect(try receiveMessage(ws) == .text(text))
            try ws.send(binary: blob)
            #expect(try receiveMessage(ws) == .binary(blob))
            try ws.closeAndWait()
        }
        #expect(Array(serverEvents.prefix(2)) == [.text(text), .binary(blob)])
    }

    @Test("pings both ways are answered with the same payload")
    func pingPong() throws {
        let serverEvents = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            try ws.ping(Array("client-ping".utf8))
            #expect(try ws.receive(timeout: testTimeout) == .pong(Array("client-ping".utf8)))
            // Ask the server to ping us: the client answers automatically and the server reports the pong.
            try ws.send(text: "ping:server-ping")
            #expect(try ws.receive(timeout: testTimeout) == .ping(Array("server-ping".utf8)))
            #expect(try ws.receive(timeout: testTimeout) == .text("pong:server-ping"))
            let tooLarge = #expect(throws: WebSocketError.self) { try ws.ping([UInt8](repeating: 0, count: 126)) }
            if case .send(let e)? = tooLarge { #expect(e.kind == .controlPayloadTooLarge) } else { Issue.record("expected a send error") }
            try ws.closeAndWait()
        }
        #expect(serverEvents.contains(.ping(Array("client-ping".utf8))))
        #expect(serverEvents.contains(.pong(Array("server-ping".utf8))))
    }

    @Test("close codes both ways", arguments: [WebSocketCloseCode.normalClosure, .goingAway, WebSocketCloseCode(4001)])
    func closeCodes(code: WebSocketCloseCode) throws {
        // Client-initiated: the server sees the client's code; the client gets the echo.
        let serverEvents = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            #expect(try ws.closeAndWait(code: code, reason: "client \(code.rawValue)") == .closed(code: code, reason: ""))
        }
        #expect(serverEvents == [.closed(code: code, reason: "client \(code.rawValue)")])

        // Server-initiated: the client receives the server's code.
        _ = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            try ws.send(text: "close:\(code.rawValue):server bye")
            #expect(try receiveMessage(ws) == .closed(code: code, reason: "server bye"))
            #expect(ws.state == .closed)
            let after = #expect(throws: WebSocketError.self) { try ws.send(text: "late") }
            if case .send(let e)? = after { #expect(e.kind == .notOpen) } else { Issue.record("expected a send error") }
        }
    }

    @Test("a close without an answer times out as 1006")
    func closeTimeout() throws {
        // A raw TCP "server" that answers the upgrade and then never reads or answers the close frame.
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
            // Hold the connection until the client drops it.
            _ = try? tcp.read(maxCount: 1 << 16, timeout: testTimeout)
            _ = try? tcp.read(maxCount: 1 << 16, timeout: testTimeout)
        }
        defer { server.join() }
        let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(listener.port)/", timeout: testTimeout,
                                             closeTimeout: .milliseconds(50))
        let event = try ws.closeAndWait(code: .goingAway)
        guard case .closed(let code, _)? = event else {
            Issue.record("expected a closed event, got \(String(describing: event))")
            return
        }
        #expect(code == .abnormalClosure)
    }

    @Test("a refusal with 401 surfaces as a typed handshake error with the status")
    func refusal401() throws {
        let decide: @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { request in
            request.headers["Authorization"] == "Bearer good"
                ? .accept() : .refuse(status: 401, headers: ["WWW-Authenticate": "Bearer"], body: "bad token")
        }
        let serverEvents = try withServer(decide: decide) { server, _ in
            let url = "ws://127.0.0.1:\(server.port)/ws/device-link"
            let error = #expect(throws: WebSocketError.self) {
                _ = try WebSocketClient.connect(url: url, headers: ["Authorization": "Bearer bad"], timeout: testTimeout)
            }
            #expect(error?.httpStatus == 401)
            if case .handshake(let e)? = error {
                #expect(e.kind == .refused)
                #expect(e.responseHeaders["WWW-Authenticate"] == "Bearer")
            } else {
                Issue.record("expected a handshake error, got \(String(describing: error))")
            }
            let ws = try WebSocketClient.connect(url: url, headers: ["Authorization": "Bearer good"], timeout: testTimeout)
            try ws.send(text: "authorized")
            #expect(try receiveMessage(ws) == .text("authorized"))
            try ws.closeAndWait()
        }
        #expect(serverEvents.first == .text("authorized"))
    }

    @Test("a malformed upgrade request is refused with 400 by the server")
    func malformedRequest() throws {
        _ = try withServer { server, _ in
            let tcp = try TCP.connect(host: "127.0.0.1", port: server.port, timeout: testTimeout)
            try tcp.write(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), timeout: testTimeout)
            var response: [UInt8] = []
            while true {
                let chunk = try tcp.read(maxCount: 4096, timeout: testTimeout)
                if chunk.isEmpty { break }
                response += chunk
            }
            #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 400 "))
        }
    }

    @Test("receive times out without losing anything; a dropped transport reads as 1006")
    func receiveTimeoutAndAbort() throws {
        _ = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            let timeout = #expect(throws: WebSocketError.self) { try ws.receive(timeout: .milliseconds(20)) }
            #expect(timeout?.isTimeout == true)
            try ws.send(text: "still here")
            #expect(try receiveMessage(ws) == .text("still here"))
            ws.abort()
            guard case .closed(let code, _) = try ws.receive(timeout: testTimeout) else {
                Issue.record("expected closed")
                return
            }
            #expect(code == .abnormalClosure)
        }
    }

    @Test("a reader thread and a sender thread share one channel; close from the sender ends the reader")
    func readerAndSenderThreads() throws {
        let count = 200
        _ = try withServer { server, _ in
            let ws = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            let received = Recorder<WebSocketEvent>()
            let reader = try NetThread {
                while let event = try? ws.receive(timeout: testTimeout) {
                    received.append(event)
                    if case .closed = event { return }
                }
            }
            for i in 0..<count { try ws.send(text: "message \(i)") }
            // Close from this thread right away. The server stops echoing once it has parsed the close frame,
            // so the reader gets a prefix of the echoes, in order, then the close echo.
            try ws.close(code: .goingAway)
            reader.join()
            let values = received.values
            let echoes = values.dropLast().count
            #expect(Array(values.dropLast()) == (0..<echoes).map { .text("message \($0)") })
            #expect(values.last == .closed(code: .goingAway, reason: ""))
        }
    }

    @Test("a sender writing megabytes while a reader thread takes the echoes does not deadlock", arguments: [false, true])
    func bulkWhileReading(tls: Bool) throws {
        // Before the reader stopped waiting for the write lock, the reader blocked behind a writer that
        // was blocked because the server waited for the reader: this stalled until the write timeout.
        var random = TestRandom(seed: 5)
        let blobs = (0..<24).map { _ in random.bytes(256 * 1024) }
        let pki = try TestPKI.get()
        let identity = tls ? try TLSServerContext(certificateFile: pki.certificateFile, privateKeyFile: pki.keyFile) : nil
        let server = try WebSocketServer(host: "127.0.0.1", tls: identity, handshakeTimeout: testTimeout,
                                         handler: echoHandler(Recorder<WebSocketEvent>()))
        defer { server.stop() }
        let ws = try WebSocketClient.connect(url: "\(tls ? "wss" : "ws")://127.0.0.1:\(server.port)/",
                                             tls: TLSClientConfiguration(trustedCAFile: pki.caFile), timeout: testTimeout)
        let received = Recorder<WebSocketEvent>()
        let reader = try NetThread {
            for _ in blobs {
                guard let event = try? receiveMessage(ws) else { return }
                received.append(event)
            }
        }
        for blob in blobs { try ws.send(binary: blob) }
        reader.join()
        #expect(received.values == blobs.map { .binary($0) })
        try ws.closeAndWait()
    }

    @Test("URL parsing", arguments: [
        ("ws://example.com/ws?x=1", false, "example.com", 80, "/ws?x=1", "example.com"),
        ("WSS://example.com", true, "example.com", 443, "/", "example.com"),
        ("wss://example.com:8443?q", true, "example.com", 8443, "/?q", "example.com:8443"),
        ("ws://[::1]:9000/a", false, "::1", 9000, "/a", "[::1]:9000"),
    ])
    func urlParsing(url: String, secure: Bool, host: String, port: Int, target: String, hostHeader: String) throws {
        let parsed = try WebSocketURL(url)
        #expect(parsed.isSecure == secure)
        #expect(parsed.host == host)
        #expect(Int(parsed.port) == port)
        #expect(parsed.target == target)
        #expect(parsed.hostHeader == hostHeader)
    }

    @Test("bad URLs are typed errors", arguments: ["http://x/", "ws://", "ws://x:0/", "ws://x:65536/", "ws://u@x/",
                                                   "ws://x/#frag", "ws://x/a b", "ws://[::1/"])
    func badURLs(url: String) {
        let error = #expect(throws: WebSocketError.self) { _ = try WebSocketURL(url) }
        if case .invalidURL? = error {} else { Issue.record("expected invalidURL, got \(String(describing: error))") }
    }
}
