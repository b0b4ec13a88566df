import Foundation
import Net
import Synchronization
import Testing
import WebSocket
import Sync

/// Timeout of every blocking call in these tests: generous for a loaded 2-core machine, and still a
/// bound, so that every test stops by itself.
let testTimeout: Duration = .seconds(20)

/// SplitMix64: seeded test data.
struct TestRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count + 8)
        while out.count < count {
            withUnsafeBytes(of: next()) { out.append(contentsOf: $0) }
        }
        return Array(out.prefix(count))
    }
    /// Printable text with some multi-byte characters.
    mutating func text(_ scalars: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz 0123456789 éßж€😀".unicodeScalars)
        var s = String.UnicodeScalarView()
        for _ in 0..<scalars { s.append(alphabet[Int(next() % UInt64(alphabet.count))]) }
        return String(s)
    }
}

/// A value shared between a server thread and the test (read after `stop()`, which joins the threads).
final class Recorder<Value: Sendable>: Sendable {
    private let storage: Locked<[Value]>
    init() { storage = Locked([]) }
    func append(_ value: Value) { storage.withLock { $0.append(value) } }
    var values: [Value] { storage.withLock { $0 } }
}

/// Runs a command and returns its standard output; throws with its standard error when it fails.
@discardableResult
func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw TestFailure("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): "
                          + String(decoding: errData, as: UTF8.self))
    }
    return String(decoding: outData, as: UTF8.self)
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A throw-away PKI made with the `openssl` CLI (installed by tools/setup.sh): a CA, a server
/// certificate for `localhost`, `127.0.0.1` and `::1` signed by it, and an unrelated self-signed CA.
struct TestPKI: Sendable {
    let directory: URL
    var caFile: String { directory.appendingPathComponent("ca.pem").path }
    var otherCAFile: String { directory.appendingPathComponent("other-ca.pem").path }
    var certificateFile: String { directory.appendingPathComponent("server.pem").path }
    var keyFile: String { directory.appendingPathComponent("server.key").path }

    /// Made once per test process.
    static let shared: Result<TestPKI, TestFailure> = {
        do { return .success(try TestPKI.make()) } catch { return .failure(TestFailure("cannot make the test PKI: \(error)")) }
    }()

    static func get() throws -> TestPKI { try shared.get() }

    private static func make() throws -> TestPKI {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-net-pki-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let openssl = ["/usr/bin/openssl", "/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/openssl"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for (name, cn) in [("ca", "RelayTrace Test CA"), ("other-ca", "Untrusted Test CA")] {
            try run(openssl, ["req", "-x509"] + ec + ["-keyout", "\(name).key", "-out", "\(name).pem", "-days", "2",
                              "-subj", "/CN=\(cn)", "-addext", "basicConstraints=critical,CA:TRUE",
                              "-addext", "keyUsage=critical,keyCertSign,cRLSign"], in: dir)
        }
        try run(openssl, ["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"], in: dir)
        let ext = "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\n"
            + "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        try ext.write(to: dir.appendingPathComponent("server.ext"), atomically: true, encoding: .utf8)
        try run(openssl, ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                          "-out", "server.pem", "-days", "2", "-extfile", "server.ext"], in: dir)
        return TestPKI(directory: dir)
    }
}

/// Behaviour of the Swift test server (on its event loop).
///
/// It echoes; a text `close:CODE:REASON` makes the server close with that code; a text `ping:P` makes
/// it ping with payload P and, once the pong arrives, send `pong:P`. Every event the handler receives is
/// recorded.
func echoHandler(_ events: Recorder<WebSocketEvent>) -> LoopWebSocketHandler {
    { ws, event in
        events.append(event)
        switch event {
        case .text(let text) where text.hasPrefix("close:"):
            let parts = text.split(separator: ":", maxSplits: 2).map(String.init)
            let code = WebSocketCloseCode(UInt16(parts[1]) ?? 1000)
            try? ws.close(code: code, reason: parts.count > 2 ? parts[2] : "")
        case .text(let text) where text.hasPrefix("ping:"):
            try? ws.ping(Array(text.dropFirst(5).utf8))
        case .pong(let payload):
            try? ws.send(text: "pong:" + String(decoding: payload, as: UTF8.self))
        case .text(let text):
            try? ws.send(text: text)
        case .binary(let bytes):
            try? ws.send(binary: bytes)
        case .ping, .closeReceived, .closed, .protocolError:
            return
        }
    }
}

/// Receives the next event that is not a ping or pong.
func receiveMessage(_ channel: WebSocketChannel) throws -> WebSocketEvent {
    for _ in 0..<100 {
        let event = try channel.receive(timeout: testTimeout)
        switch event {
        case .ping, .pong: continue
        default: return event
        }
    }
    throw TestFailure("100 control frames in a row")
}
