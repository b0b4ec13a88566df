import Testing
@testable import WebSocket

/// The RFC 6455 §1.3 nonce: base64 "dGhlIHNhbXBsZSBub25jZQ==" is "the sample nonce".
let rfcNonce = Array("the sample nonce".utf8)

func head(_ lines: [String]) -> [UInt8] {
    Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
}

let validRequestLines = [
    "GET /ws/device-link HTTP/1.1",
    "Host: relay.test:8443",
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
    "Authorization: Bearer jwt",
]

func serverParse(_ bytes: [UInt8]) throws(WebSocketHandshakeError) -> WebSocketUpgradeRequest? {
    var server = WebSocketServerHandshake()
    if case .complete(let request, _) = try server.receive(bytes) { return request }
    return nil
}

@Suite("Opening handshake")
struct HandshakeTests {
    // MARK: Accept value

    @Test("RFC 6455 test vector: key dGhlIHNhbXBsZSBub25jZQ== gives s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    func rfcAcceptVector() throws {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(try WebSocketHandshake.key(nonce: rfcNonce) == "dGhlIHNhbXBsZSBub25jZQ==")
    }

    @Test("base64 round trips and strict decoding")
    func base64() {
        var random = TestRandom(seed: 64)
        for length in 0..<40 {
            let bytes = random.bytes(length)
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("Man".utf8)) == "TWFu")
        #expect(Base64.encode(Array("Ma".utf8)) == "TWE=")
        #expect(Base64.encode(Array("M".utf8)) == "TQ==")
        for bad in ["TWF", "TW=u", "T===", "TWFu=", "TW!u", "=TWF", "TQ==TQ=="] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
    }

    // MARK: Client request

    @Test("the client request, byte for byte, with extra headers in the given order")
    func clientRequestBytes() throws {
        let handshake = try WebSocketClientHandshake(
            host: "relay.test:8443", path: "/ws/device-link", nonce: rfcNonce,
            extraHeaders: ["Authorization": "Bearer jwt", "X-Device-ID": "3f2a", "X-Client-Type": "mobile"])
        let expected = head([
            "GET /ws/device-link HTTP/1.1", "Host: relay.test:8443", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
            "Authorization: Bearer jwt", "X-Device-ID: 3f2a", "X-Client-Type: mobile",
        ])
        #expect(handshake.requestBytes == expected)
        #expect(handshake.key == "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(handshake.expectedAccept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test("client builder refuses bad arguments instead of writing them")
    func clientBuilderRefusals() {
        let cases: [(String, String, [UInt8], HTTPHeaders)] = [
            ("h", "/", [1, 2, 3], [:]),                                       // nonce not 16 bytes
            ("h", "ws/no-slash", rfcNonce, [:]),                              // path
            ("h", "/a b", rfcNonce, [:]),                                     // space in path
            ("h\r\nX: y", "/", rfcNonce, [:]),                                // host injection
            ("h", "/", rfcNonce, ["Authorization": "Bearer x\r\nEvil: 1"]),  // value injection
            ("h", "/", rfcNonce, ["Bad Name": "x"]),                          // name not a token
            ("h", "/", rfcNonce, ["sec-websocket-key": "x"]),                 // duplicates a handshake header
            ("h", "/", rfcNonce, ["Host": "other"]),
        ]
        for (host, path, nonce, headers) in cases {
            #expect(throws: WebSocketHandshakeError.self) {
                try WebSocketClientHandshake(host: host, path: path, nonce: nonce, extraHeaders: headers)
            }
        }
    }

    // MARK: Server side

    @Test("the server accepts the client's own request and exposes its headers")
    func serverAcceptsClientRequest() throws {
        let client = try WebSocketClientHandshake(host: "relay.test", path: "/ws/device-link?v=1", nonce: rfcNonce,
                                                  extraHeaders: ["Authorization": "Bearer jwt", "X-Device-ID": "abc"])
        let request = try #require(try serverParse(client.requestBytes))
        #expect(request.target == "/ws/device-link?v=1")
        #expect(request.key == "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(request.headers["authorization"] == "Bearer jwt")
        #expect(request.headers["X-DEVICE-ID"] == "abc")
        #expect(request.headers.count == 7)
    }

    @Test("header names are case-insensitive and token lists are understood")
    func caseInsensitiveHeaders() throws {
        let bytes = head([
            "GET / HTTP/1.1", "host: a", "UPGRADE: WebSocket", "connection: keep-alive,  upgrade",
            "sec-websocket-key:dGhlIHNhbXBsZSBub25jZQ==   ", "SEC-WEBSOCKET-VERSION: 13",
        ])
        let request = try #require(try serverParse(bytes))
        #expect(request.key == "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(request.headers.tokens(for: "Connection") == ["keep-alive", "upgrade"])
    }

    @Test("the 101 response, byte for byte")
    func acceptResponseBytes() throws {
        let request = try #require(try serverParse(head(validRequestLines)))
        let response = try WebSocketHandshake.acceptResponse(for: request, extraHeaders: ["X-Relay": "dev"])
        #expect(response == head([
            "HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "X-Relay: dev",
        ]))
    }

    struct BadRequest: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var kind: WebSocketHandshakeError.Kind
        var status: Int
        var testDescription: String { name }
    }

    static func replacing(_ prefix: String, with line: String?) -> [UInt8] {
        head(validRequestLines.compactMap { $0.lowercased().hasPrefix(prefix.lowercased()) ? line : $0 })
    }

    static let badRequests: [BadRequest] = [
        BadRequest(name: "POST", bytes: replacing("GET", with: "POST /ws/device-link HTTP/1.1"), kind: .methodNotGET, status: 400),
        BadRequest(name: "HTTP/1.0", bytes: replacing("GET", with: "GET /ws/device-link HTTP/1.0"),
                   kind: .unsupportedHTTPVersion, status: 400),
        BadRequest(name: "absolute target", bytes: replacing("GET", with: "GET http://x/ HTTP/1.1"), kind: .malformedHead, status: 400),
        BadRequest(name: "two-part request line", bytes: replacing("GET", with: "GET /"), kind: .malformedHead, status: 400),
        BadRequest(name: "no Host", bytes: replacing("Host:", with: nil), kind: .missingHeader("Host"), status: 400),
        BadRequest(name: "no Upgrade", bytes: replacing("Upgrade:", with: nil), kind: .missingHeader("Upgrade"), status: 400),
        BadRequest(name: "Upgrade: h2c", bytes: replacing("Upgrade:", with: "Upgrade: h2c"), kind: .invalidHeader("Upgrade"), status: 400),
        BadRequest(name: "no Connection", bytes: replacing("Connection:", with: nil), kind: .missingHeader("Connection"), status: 400),
        BadRequest(name: "Connection: close", bytes: replacing("Connection:", with: "Connection: close"),
                   kind: .invalidHeader("Connection"), status: 400),
        BadRequest(name: "no key", bytes: replacing("Sec-WebSocket-Key:", with: nil), kind: .missingHeader("Sec-WebSocket-Key"), status: 400),
        BadRequest(name: "key of 15 bytes", bytes: replacing("Sec-WebSocket-Key:", with: "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j"),
                   kind: .invalidHeader("Sec-WebSocket-Key"), status: 400),
        BadRequest(name: "key not base64", bytes: replacing("Sec-WebSocket-Key:", with: "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!=="),
                   kind: .invalidHeader("Sec-WebSocket-Key"), status: 400),
        BadRequest(name: "no version", bytes: replacing("Sec-WebSocket-Version:", with: nil),
                   kind: .missingHeader("Sec-WebSocket-Version"), status: 400),
        BadRequest(name: "version 8", bytes: replacing("Sec-WebSocket-Version:", with: "Sec-WebSocket-Version: 8"),
                   kind: .unsupportedWebSocketVersion, status: 426),
        BadRequest(name: "obsolete line folding", bytes: replacing("Authorization:", with: "Authorization: Bearer\r\n jwt"),
                   kind: .malformedHead, status: 400),
        BadRequest(name: "space before colon", bytes: replacing("Authorization:", with: "Authorization : Bearer"),
                   kind: .malformedHead, status: 400),
        BadRequest(name: "bare LF", bytes: replacing("Authorization:", with: "Authorization: a\nb"), kind: .malformedHead, status: 400),
        BadRequest(name: "NUL in a value", bytes: replacing("Authorization:", with: "Authorization: a\u{0}b"), kind: .malformedHead, status: 400),
        BadRequest(name: "line without colon", bytes: replacing("Authorization:", with: "Authorization"), kind: .malformedHead, status: 400),
    ]

    @Test("bad upgrade requests are refused with 400 or 426 and a reason", arguments: badRequests)
    func badRequest(_ bad: BadRequest) {
        var server = WebSocketServerHandshake()
        do {
            _ = try server.receive(bad.bytes)
            Issue.record("expected a refusal")
        } catch {
            #expect(error.kind == bad.kind)
            #expect(error.httpStatus == bad.status)
            let response = String(decoding: error.refusalResponse(), as: UTF8.self)
            #expect(response.hasPrefix("HTTP/1.1 \(bad.status) "))
            #expect(response.contains("Connection: close\r\n"))
            #expect(response.hasSuffix(error.message))
            if bad.status == 426 { #expect(response.contains("Sec-WebSocket-Version: 13\r\n")) }
            // A failed handshake stays failed.
            #expect(throws: WebSocketHandshakeError.self) { try server.receive(head(validRequestLines)) }
        }
    }

    @Test("a head over the size bound is refused without waiting for its end")
    func headTooLarge() {
        var server = WebSocketServerHandshake(maxHeadSize: 1024)
        let big = Array(("GET / HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 2000)).utf8)
        #expect { try server.receive(big) } throws: { ($0 as? WebSocketHandshakeError)?.kind == .headTooLarge }
        // Exactly at the bound is fine.
        var lines = validRequestLines
        let base = head(lines).count
        lines.append("X-Pad: " + String(repeating: "b", count: 1024 - base - 9))
        #expect(head(lines).count == 1024)
        var exact = WebSocketServerHandshake(maxHeadSize: 1024)
        #expect(throws: Never.self) { _ = try exact.receive(head(lines)) }
    }

    @Test("server handshake: needMore, then complete with the frame bytes left over, at every split")
    func serverIncrementalEverySplit() throws {
        let frame = fromClient(1, hello)
        let stream = head(validRequestLines) + frame
        let headLength = stream.count - frame.count
        for offset in 0...stream.count {
            var server = WebSocketServerHandshake()
            var leftover: [UInt8]?
            for piece in split(stream, at: [offset]) {
                if leftover != nil {
                    leftover! += piece
                    continue
                }
                switch try server.receive(Array(piece)) {
                case .needMore: #expect(piece.count > 0 || offset == 0 || offset == stream.count)
                case .complete(let request, let consumed):
                    #expect(request.key == "dGhlIHNhbXBsZSBub25jZQ==")
                    leftover = Array(piece.dropFirst(consumed))
                }
            }
            #expect(leftover == frame, "split at \(offset), head is \(headLength) bytes")
            var connection = WebSocketConnection(role: .server)
            #expect(connection.receive(leftover ?? []) == [.text("Hello")])
        }
    }

    @Test("byte-at-a-time server handshake completes on the last byte of the head")
    func serverByteAtATime() throws {
        let bytes = head(validRequestLines)
        var server = WebSocketServerHandshake()
        for (i, byte) in bytes.enumerated() {
            let progress = try server.receive([byte])
            if case .complete(_, let consumed) = progress {
                #expect(i == bytes.count - 1)
                #expect(consumed == 1)
            }
        }
        // After completion further calls consume nothing.
        if case .complete(_, let consumed) = try server.receive([0x81]) { #expect(consumed == 0) } else {
            Issue.record("expected the completed request again")
        }
    }

    // MARK: Client response

    func response(_ lines: [String]) -> [UInt8] { head(lines) }

    @Test("client accepts a valid 101 and hands over leftover bytes, at every split")
    func clientIncrementalEverySplit() throws {
        let client = try WebSocketClientHandshake(host: "relay.test", path: "/", nonce: rfcNonce)
        let frame = fromServer(1, hello)
        let stream = response(["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
                               "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]) + frame
        for offset in 0...stream.count {
            var handshake = client
            var leftover: [UInt8]?
            for piece in split(stream, at: [offset]) {
                if leftover != nil {
                    leftover! += piece
                    continue
                }
                if case .complete(let r, let consumed) = try handshake.receive(Array(piece)) {
                    #expect(r.status == 101)
                    leftover = Array(piece.dropFirst(consumed))
                }
            }
            #expect(leftover == frame, "split at \(offset)")
        }
    }

    @Test("server accept response satisfies the client, end to end")
    func endToEnd() throws {
        var random = TestRandom(seed: 2024)
        var client = try WebSocketClientHandshake(host: "127.0.0.1:9000", path: "/ws/device-link", nonce: random.bytes(16),
                                                  extraHeaders: ["Authorization": "Bearer t"])
        var server = WebSocketServerHandshake()
        guard case .complete(let request, _) = try server.receive(client.requestBytes) else {
            Issue.record("request incomplete")
            return
        }
        let reply = try WebSocketHandshake.acceptResponse(for: request)
        guard case .complete(let response, let consumed) = try client.receive(reply) else {
            Issue.record("response incomplete")
            return
        }
        #expect(consumed == reply.count)
        #expect(response.headers["sec-websocket-accept"] == client.expectedAccept)
    }

    @Test("refusal statuses surface as typed errors with the status and headers", arguments: [401, 403, 429, 500, 503, 200, 302])
    func refusals(status: Int) throws {
        var client = try WebSocketClientHandshake(host: "h", path: "/", nonce: rfcNonce)
        let refusal = try WebSocketHandshake.refusalResponse(status: status, headers: ["Retry-After": "7"], body: "no")
        #expect(String(decoding: refusal, as: UTF8.self).hasPrefix("HTTP/1.1 \(status) \(WebSocketHandshake.reasonPhrase(for: status))\r\n"))
        do {
            _ = try client.receive(refusal)
            Issue.record("expected a refusal error")
        } catch {
            #expect(error.kind == .refused)
            #expect(error.httpStatus == status)
            #expect(error.responseHeaders["retry-after"] == "7")
            #expect(error.description.contains("HTTP \(status)"))
        }
    }

    @Test("refusal builder rejects bad statuses and header injection")
    func refusalBuilderRefusals() {
        #expect(throws: WebSocketHandshakeError.self) { try WebSocketHandshake.refusalResponse(status: 101) }
        #expect(throws: WebSocketHandshakeError.self) { try WebSocketHandshake.refusalResponse(status: 600) }
        #expect(throws: WebSocketHandshakeError.self) { try WebSocketHandshake.refusalResponse(status: 401, reason: "a\r\nb") }
        #expect(throws: WebSocketHandshakeError.self) {
            try WebSocketHandshake.refusalResponse(status: 401, headers: ["WWW-Authenticate": "x\ny"])
        }
        #expect(throws: WebSocketHandshakeError.self) {
            try WebSocketHandshake.acceptResponse(for: WebSocketUpgradeRequest(target: "/", headers: [:], key: "k"),
                                                  extraHeaders: ["X": "\r\n"])
        }
    }

    struct BadResponse: Sendable, CustomTestStringConvertible {
        var name: String
        var lines: [String]
        var kind: WebSocketHandshakeError.Kind
        var testDescription: String { name }
    }

    static let goodResponse = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
                               "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]

    static let badResponses: [BadResponse] = [
        BadResponse(name: "wrong accept", lines: goodResponse.dropLast() + ["Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA="],
                    kind: .acceptMismatch),
        BadResponse(name: "no accept", lines: Array(goodResponse.dropLast()), kind: .missingHeader("Sec-WebSocket-Accept")),
        BadResponse(name: "no Upgrade", lines: [goodResponse[0], goodResponse[2], goodResponse[3]], kind: .missingHeader("Upgrade")),
        BadResponse(name: "Upgrade: h2c", lines: [goodResponse[0], "Upgrade: h2c", goodResponse[2], goodResponse[3]],
                    kind: .invalidHeader("Upgrade")),
        BadResponse(name: "no Connection", lines: [goodResponse[0], goodResponse[1], goodResponse[3]], kind: .missingHeader("Connection")),
        BadResponse(name: "unrequested extension", lines: goodResponse + ["Sec-WebSocket-Extensions: permessage-deflate"],
                    kind: .invalidHeader("Sec-WebSocket-Extensions")),
        BadResponse(name: "unrequested subprotocol", lines: goodResponse + ["Sec-WebSocket-Protocol: chat"],
                    kind: .invalidHeader("Sec-WebSocket-Protocol")),
        BadResponse(name: "HTTP/1.0", lines: ["HTTP/1.0 101 Switching Protocols"] + goodResponse.dropFirst(), kind: .unsupportedHTTPVersion),
        BadResponse(name: "status not 3 digits", lines: ["HTTP/1.1 1O1 Switching Protocols"] + goodResponse.dropFirst(),
                    kind: .malformedHead),
        BadResponse(name: "garbage", lines: ["SSH-2.0-OpenSSH_9.2"], kind: .malformedHead),
    ]

    @Test("bad 101 responses are rejected with a typed error", arguments: badResponses)
    func badResponse(_ bad: BadResponse) throws {
        var client = try WebSocketClientHandshake(host: "h", path: "/", nonce: rfcNonce)
        do {
            _ = try client.receive(response(bad.lines))
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == bad.kind)
            #expect(error.httpStatus == nil)
        }
    }

    @Test("a 101 with an empty reason phrase and extra headers is fine; an offered subprotocol may be selected")
    func lenientResponseParts() throws {
        var client = try WebSocketClientHandshake(host: "h", path: "/", nonce: rfcNonce,
                                                  extraHeaders: ["Sec-WebSocket-Protocol": "chat, superchat"])
        let lines = ["HTTP/1.1 101", "upgrade: WebSocket", "connection: upgrade", "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
                     "Sec-WebSocket-Protocol: superchat", "Server: test"]
        guard case .complete(let r, _) = try client.receive(response(lines)) else {
            Issue.record("incomplete")
            return
        }
        #expect(r.reason == "")
        #expect(r.headers["server"] == "test")
    }
}
