import Net
import Testing
import WebSocket

/// wss over loopback with a CA and server certificate made by the test itself (`openssl` CLI).
@Suite("TLS")
struct TLSTests {
    private func withTLSServer(_ body: (WebSocketServer, TestPKI) throws -> Void) throws -> [WebSocketEvent] {
        let pki = try TestPKI.get()
        let identity = try TLSServerContext(certificateFile: pki.certificateFile, privateKeyFile: pki.keyFile)
        let events = Recorder<WebSocketEvent>()
        let server = try WebSocketServer(host: "127.0.0.1", tls: identity, handshakeTimeout: testTimeout,
                                         closeTimeout: testTimeout, handler: echoHandler(events))
        defer { server.stop() }
        try body(server, pki)
        server.stop()
        return events.values
    }

    @Test("wss round trip with verification on, by IP address and by host name")
    func roundTrip() throws {
        var random = TestRandom(seed: 3)
        let text = random.text(3_000)
        let blob = random.bytes(1 << 20)
        let serverEvents = try withTLSServer { server, pki in
            let trust = TLSClientConfiguration(trustedCAFile: pki.caFile)
            for url in ["wss://127.0.0.1:\(server.port)/secure", "wss://localhost:\(server.port)/secure"] {
                let ws = try WebSocketClient.connect(url: url, tls: trust, timeout: testTimeout)
                try ws.send(text: text)
                #expect(try receiveMessage(ws) == .text(text))
                try ws.send(binary: blob)
                #expect(try receiveMessage(ws) == .binary(blob))
                try ws.ping([7])
                #expect(try ws.receive(timeout: testTimeout) == .pong([7]))
                #expect(try ws.closeAndWait(code: WebSocketCloseCode(4000)) == .closed(code: WebSocketCloseCode(4000), reason: ""))
            }
        }
        let once: [WebSocketEvent] = [.text(text), .binary(blob), .ping([7]), .closed(code: WebSocketCloseCode(4000), reason: "")]
        #expect(serverEvents == once + once)
    }

    @Test("a certificate from a CA the client does not trust fails verification", arguments: [false, true])
    func untrusted(useOtherCA: Bool) throws {
        _ = try withTLSServer { server, pki in
            // Either the system store (which never saw the test CA) or an unrelated CA.
            let config = TLSClientConfiguration(trustedCAFile: useOtherCA ? pki.otherCAFile : nil)
            let error = #expect(throws: WebSocketError.self) {
                _ = try WebSocketClient.connect(url: "wss://localhost:\(server.port)/", tls: config, timeout: testTimeout)
            }
            guard case .transport(let e)? = error else {
                Issue.record("expected a transport error, got \(String(describing: error))")
                return
            }
            #expect(e.kind == .certificateVerification)
            #expect(e.message.contains("local issuer"))
        }
    }

    @Test("a certificate for another name fails verification", arguments: ["wrong.example", "127.0.0.2"])
    func wrongHostName(name: String) throws {
        _ = try withTLSServer { server, pki in
            let config = TLSClientConfiguration(trustedCAFile: pki.caFile, serverName: name)
            let error = #expect(throws: WebSocketError.self) {
                _ = try WebSocketClient.connect(url: "wss://127.0.0.1:\(server.port)/", tls: config, timeout: testTimeout)
            }
            guard case .transport(let e)? = error else {
                Issue.record("expected a transport error, got \(String(describing: error))")
                return
            }
            #expect(e.kind == .certificateVerification)
            #expect(e.message.contains("mismatch"))
        }
    }

    @Test("verification off accepts the untrusted certificate; a plain client to a TLS port fails cleanly")
    func verificationOffAndPlainClient() throws {
        _ = try withTLSServer { server, _ in
            let ws = try WebSocketClient.connect(url: "wss://127.0.0.1:\(server.port)/", tls: TLSClientConfiguration(verifyPeer: false),
                                                 timeout: testTimeout)
            try ws.send(text: "unverified")
            #expect(try receiveMessage(ws) == .text("unverified"))
            try ws.closeAndWait()

            let error = #expect(throws: WebSocketError.self) {
                _ = try WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", timeout: testTimeout)
            }
            guard case .transport? = error else {
                Issue.record("expected a transport error, got \(String(describing: error))")
                return
            }
        }
    }

    @Test("a missing key file is a typed TLS error naming the file")
    func badIdentity() throws {
        let pki = try TestPKI.get()
        let error = #expect(throws: NetError.self) {
            _ = try TLSServerContext(certificateFile: pki.certificateFile, privateKeyFile: pki.directory.path + "/missing.key")
        }
        #expect(error?.kind == .tls)
        #expect(error?.message.contains("missing.key") == true)
        let mismatch = #expect(throws: NetError.self) {
            _ = try TLSServerContext(certificateFile: pki.caFile, privateKeyFile: pki.keyFile)
        }
        #expect(mismatch?.kind == .tls)
        #expect(mismatch?.message.contains("mismatch") == true, "\(String(describing: mismatch))")
    }
}
