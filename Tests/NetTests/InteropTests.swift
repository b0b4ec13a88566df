import Foundation
import Net
import Testing
import WebSocket

/// The package root (this file is Tests/NetTests/InteropTests.swift).
private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The venv's python with `websockets` 17 (made by tools/interop/setup-venv.sh), or nil when absent.
private let venvPython: String? = {
    let path = packageRoot.appendingPathComponent(".venv/bin/python").path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}()

/// tools/interop/ws_echo_server.py running as a subprocess.
private final class PythonServer {
    let process = Process()
    let port: UInt16
    private let stderr = Pipe()
    /// The script exits when its standard input reaches EOF: closing this (or dying) stops it.
    private let stdin = Pipe()

    init(python: String, pki: TestPKI?) throws {
        process.executableURL = URL(fileURLWithPath: python)
        var arguments = [packageRoot.appendingPathComponent("tools/interop/ws_echo_server.py").path, "--timeout", "120"]
        if let pki { arguments += ["--cert", pki.certificateFile, "--key", pki.keyFile] }
        process.arguments = arguments
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        // The first stdout line is the port; EOF (the script died) ends the loop.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let port = UInt16(text) else {
            try? stdin.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
            let err = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw TestFailure("ws_echo_server.py did not print its port (got \"\(text)\"): \(err)")
        }
        self.port = port
    }

    func stop() {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

/// Swift client <-> python `websockets` 17 server (a peer nobody here wrote), with and without TLS.
// Enabled only when the venv exists: tools/test.sh makes it (tools/interop/setup-venv.sh) before the tests,
// so CI always runs these; on a machine without it they are reported as skipped with this reason.
@Suite("Interop with python websockets",
       .enabled(if: venvPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does) to run the interop tests"))
struct InteropTests {
    private static let maxSize = 32 * 1024 * 1024

    private func withPython(tls: Bool, _ body: (_ base: String, _ trust: TLSClientConfiguration) throws -> Void) throws {
        let python = try #require(venvPython)
        let pki = tls ? try TestPKI.get() : nil
        let server = try PythonServer(python: python, pki: pki)
        defer { server.stop() }
        let base = "\(tls ? "wss" : "ws")://127.0.0.1:\(server.port)"
        try body(base, TLSClientConfiguration(trustedCAFile: pki?.caFile))
    }

    private func lastClose(_ base: String, _ trust: TLSClientConfiguration, id: String) throws -> String {
        let ws = try WebSocketClient.connect(url: "\(base)/last-close?of=\(id)", tls: trust, timeout: testTimeout)
        let event = try receiveMessage(ws)
        _ = try? ws.closeAndWait()
        guard case .text(let report) = event else { throw TestFailure("expected the close report, got \(event)") }
        return report
    }

    @Test("text and binary round trips", arguments: [false, true])
    func roundTrip(tls: Bool) throws {
        var random = TestRandom(seed: 10)
        let texts = [random.text(1), random.text(40_000)]
        let blobs = [random.bytes(125), random.bytes(70_000), random.bytes(1 << 20)]
        try withPython(tls: tls) { base, trust in
            let ws = try WebSocketClient.connect(url: "\(base)/echo", tls: trust, timeout: testTimeout)
            for text in texts {
                try ws.send(text: text)
                #expect(try receiveMessage(ws) == .text(text))
            }
            for blob in blobs {
                try ws.send(binary: blob)
                #expect(try receiveMessage(ws) == .binary(blob))
            }
            // Our fragments are reassembled by python: the echo is the whole message.
            let fragmenting = try WebSocketClient.connect(url: "\(base)/echo", tls: trust, timeout: testTimeout,
                                                          configuration: WebSocketConfiguration(outboundFragmentSize: 333))
            try fragmenting.send(text: texts[1])
            #expect(try receiveMessage(fragmenting) == .text(texts[1]))
            try fragmenting.closeAndWait()
            try ws.closeAndWait()
        }
    }

    @Test("a fragmented message from python is reassembled", arguments: [false, true])
    func fragmented(tls: Bool) throws {
        let count = 7, size = 1000
        let text = (0..<count).map { i in
            String((String(format: "f%04d", i) + String(repeating: "x", count: size)).prefix(size))
        }.joined()
        let binary = (0..<count).flatMap { i in [UInt8](repeating: UInt8(i % 256), count: size) }
        try withPython(tls: tls) { base, trust in
            let ws = try WebSocketClient.connect(url: "\(base)/fragments?count=\(count)&size=\(size)", tls: trust, timeout: testTimeout)
            #expect(try receiveMessage(ws) == .text(text))
            #expect(try receiveMessage(ws) == .binary(binary))
            try ws.closeAndWait()
        }
    }

    @Test("the server's ping is answered; our ping gets python's pong", arguments: [false, true])
    func ping(tls: Bool) throws {
        try withPython(tls: tls) { base, trust in
            let ws = try WebSocketClient.connect(url: "\(base)/ping", tls: trust, timeout: testTimeout)
            #expect(try ws.receive(timeout: testTimeout) == .ping(Array("interop-ping".utf8)))
            #expect(try ws.receive(timeout: testTimeout) == .text("pong received"))
            try ws.ping(Array("swift-ping".utf8))
            #expect(try ws.receive(timeout: testTimeout) == .pong(Array("swift-ping".utf8)))
            try ws.closeAndWait()
        }
    }

    @Test("close codes both ways", arguments: [false, true])
    func closeCodes(tls: Bool) throws {
        try withPython(tls: tls) { base, trust in
            // python closes with 4003.
            let closedByServer = try WebSocketClient.connect(url: "\(base)/close?code=4003&reason=bye", tls: trust, timeout: testTimeout)
            #expect(try receiveMessage(closedByServer) == .closed(code: WebSocketCloseCode(4003), reason: "bye"))

            // We close with 4001 (and 1001); python echoes the code and reports what it received.
            for (id, code) in [("c4001", WebSocketCloseCode(4001)), ("c1001", .goingAway)] {
                let ws = try WebSocketClient.connect(url: "\(base)/echo?id=\(id)", tls: trust, timeout: testTimeout)
                guard case .closed(let echoed, _)? = try ws.closeAndWait(code: code, reason: "swift bye") else {
                    Issue.record("expected the close echo")
                    continue
                }
                #expect(echoed == code)
                #expect(try lastClose(base, trust, id: id) == "\(code.rawValue) swift bye")
            }
        }
    }

    @Test("the 32 MiB message limit (1009) both ways", arguments: [false, true])
    func sizeLimit(tls: Bool) throws {
        var random = TestRandom(seed: 11)
        let atLimit = random.bytes(Self.maxSize)
        try withPython(tls: tls) { base, trust in
            // Exactly 32 MiB passes both limits.
            let ws = try WebSocketClient.connect(url: "\(base)/echo", tls: trust, timeout: testTimeout)
            try ws.send(binary: atLimit)
            #expect(try receiveMessage(ws) == .binary(atLimit))

            // One byte more: python fails the connection with 1009, possibly before it has read all of it,
            // so the send may end with a reset; the close frame still arrives.
            do {
                try ws.send(binary: atLimit + [0])
            } catch WebSocketError.transport {
                // Reset by python mid-message.
            }
            guard case .closed(let code, _) = try receiveMessage(ws) else {
                Issue.record("expected python to close")
                return
            }
            #expect(code == .messageTooBig)

            // python sends one byte over our limit: we fail with 1009 and python receives 1009.
            let big = try WebSocketClient.connect(url: "\(base)/big?size=\(Self.maxSize + 1)&id=big", tls: trust, timeout: testTimeout)
            guard case .protocolError(let error) = try receiveMessage(big) else {
                Issue.record("expected a protocol error")
                return
            }
            #expect(error.closeCode == .messageTooBig)
            #expect(try lastClose(base, trust, id: "big").hasPrefix("1009 "))
        }
    }
}
