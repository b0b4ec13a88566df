import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Synchronization
import Testing

/// The package root (this file is Tests/RelayTraceCLITests/RelayInteropTests.swift).
private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The venv's python with `websockets` 17 (made by tools/interop/setup-venv.sh), or nil when absent.
private let interopPython: String? = {
    let path = packageRoot.appendingPathComponent(".venv/bin/python").path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}()

/// Every check of tools/interop/relay_client_checks.py, in its order: a check that disappears from the
/// script (or is not run) fails the test, as does one that fails.
private let expectedChecks = [
    "register", "resume", "invalid-resume", "heartbeat", "text-ping", "snake-case", "unknown-type", "invalid-json",
    "rpc", "rpc-fragmented", "rpc-before-register", "binary-ignored", "event-replay", "offline-desktop", "ws-ping", "too-big", "close-1000", "close-4001", "replaced-by-same-device", "double-register",
    "missing-bearer", "wrong-binding", "wrong-path", "tls-untrusted",
]

/// How long any one wait of these tests may take before the test gives up (and kills what it started).
private let startTimeout: DispatchTimeInterval = .seconds(30)
private let checksTimeout: DispatchTimeInterval = .seconds(150)
private let stopTimeout: DispatchTimeInterval = .seconds(15)

/// Everything a child process writes to one pipe, collected by a thread so the pipe never fills; the
/// test waits for lines or EOF with a deadline.
private final class PipeCollector: Sendable {
    private let state = Mutex<(data: [UInt8], eof: Bool)>(([], false))
    private let changed = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread { [self] in
            while true {
                let chunk = handle.availableData
                state.withLock { s in
                    if chunk.isEmpty { s.eof = true } else { s.data += chunk }
                }
                changed.signal()
                if chunk.isEmpty { return }
            }
        }.start()
    }

    /// What was collected so far.
    var text: String { String(decoding: state.withLock { $0.data }, as: UTF8.self) }

    /// The first line (without its newline), or nil when EOF or the deadline comes first.
    func firstLine(within timeout: DispatchTimeInterval) -> String? {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (line, eof) = state.withLock { s -> (String?, Bool) in
                guard let nl = s.data.firstIndex(of: UInt8(ascii: "\n")) else { return (nil, s.eof) }
                return (String(decoding: s.data[..<nl], as: UTF8.self), s.eof)
            }
            if let line { return line }
            if eof || changed.wait(timeout: deadline) == .timedOut { return nil }
        }
    }

    /// Waits for EOF; false when the deadline comes first.
    func waitForEOF(within timeout: DispatchTimeInterval) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while !state.withLock({ $0.eof }) {
            if changed.wait(timeout: deadline) == .timedOut { return state.withLock { $0.eof } }
        }
        return true
    }
}

/// Set once by a process's termination handler; waits on it return at once after that.
private final class ExitSignal: Sendable {
    private let exited = Mutex(false)
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() {
        exited.withLock { $0 = true }
        semaphore.signal()
    }

    /// True when the process has exited (now or within `timeout`).
    func wait(within timeout: DispatchTimeInterval) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while !exited.withLock({ $0 }) {
            if semaphore.wait(timeout: deadline) == .timedOut { return exited.withLock { $0 } }
        }
        return true
    }
}

/// A child process with its output collected, its exit awaited with deadlines, and killed when the
/// test is done with it (whatever happened).
private final class Child {
    let process = Process()
    let stdout: PipeCollector
    let stderr: PipeCollector
    private let exit = ExitSignal()
    /// Its standard input: closed when the child is stopped, so a child reading it sees EOF.
    private let stdin = Pipe()

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = stdin
        stdout = PipeCollector(out)
        stderr = PipeCollector(err)
        let exit = exit
        process.terminationHandler = { _ in exit.signal() }
        try process.run()
    }

    /// Waits for the child to exit by itself; nil (and the child killed) when the deadline comes first.
    func waitForExit(within timeout: DispatchTimeInterval) -> Int32? {
        guard exit.wait(within: timeout) else {
            kill()
            return nil
        }
        _ = stdout.waitForEOF(within: .seconds(5))
        _ = stderr.waitForEOF(within: .seconds(5))
        return process.terminationStatus
    }

    /// SIGTERM (and stdin closed), then the exit status; SIGKILL and nil when it does not exit in time.
    func terminate(within timeout: DispatchTimeInterval) -> Int32? {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        return waitForExit(within: timeout)
    }

    /// SIGKILL if still running, and reaps it.
    func kill() {
        try? stdin.fileHandleForWriting.close()
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        _ = exit.wait(within: .seconds(5))
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

/// A throw-away self-signed certificate for 127.0.0.1 and localhost, made with the `openssl` CLI
/// (tools/setup.sh installs it) in a temporary directory: the relay serves it, python trusts it alone.
private struct ThrowAwayCertificate {
    let directory: URL
    var certificateFile: String { directory.appendingPathComponent("cert.pem").path }
    var keyFile: String { directory.appendingPathComponent("key.pem").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-relay-interop-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let openssl = ["/usr/bin/openssl", "/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/openssl"
        let result = try runProcess(openssl, [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", keyFile, "-out", certificateFile,
        ])
        guard result.status == 0 else {
            remove()
            throw InteropFailure("openssl req -x509 exited \(result.status): \(result.stderr)")
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

private struct InteropFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// python `websockets` 17 client (a peer nobody here wrote) <-> the built `relaytrace relay`, over ws and
/// wss: tools/interop/relay_client_checks.py runs its checks (register, resume, invalid resume, heartbeat,
/// text ping, camelCase/unknown-type/invalid-JSON errors, RPCs with traceparent, a fragmented RPC, an
/// RPC before register, a phone's binary frame, event replay, WebSocket ping, 1009 over 32 MiB, close
/// codes, replacement by the same device, double register, HTTP refusals, TLS trust) and prints one
/// JSON line per check; the relay's log must show the closes and refusals the checks caused.
// Enabled only when the venv exists: tools/test.sh makes it (tools/interop/setup-venv.sh) before the
// tests, so the test command always runs these; without it they are reported as skipped with this reason.
@Suite("python websockets client <-> relaytrace relay",
       .enabled(if: interopPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does) to run the relay interop tests"))
struct RelayInteropTests {
    @Test("every python check passes against the relay", .timeLimit(.minutes(4)), arguments: [false, true])
    func pythonChecks(tls: Bool) throws {
        let python = try #require(interopPython)
        let certificate = tls ? try ThrowAwayCertificate() : nil
        defer { certificate?.remove() }
        let offline = "0ff11e00-dead-4bad-8bad-000000000001"
        var relayArguments = ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--offline", offline]
        if let certificate { relayArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile] }
        let relay = try Child(productsDirectory().appendingPathComponent("relaytrace").path, relayArguments)
        defer { relay.kill() }

        // The first line names the URL.
        guard let first = relay.stdout.firstLine(within: startTimeout) else {
            _ = relay.terminate(within: stopTimeout)
            Issue.record("relaytrace relay printed no first line; stdout: \(relay.stdout.text) stderr: \(relay.stderr.text)")
            return
        }
        let scheme = tls ? "wss" : "ws"
        let prefix = "listening on \(scheme)://127.0.0.1:"
        try #require(first.hasPrefix(prefix) && first.hasSuffix("/ws/device-link"), "unexpected first line \"\(first)\"")
        let url = String(first.dropFirst("listening on ".count))

        var checkArguments = [packageRoot.appendingPathComponent("tools/interop/relay_client_checks.py").path, url, "--offline-desktop", offline]
        if let certificate { checkArguments += ["--ca-file", certificate.certificateFile] }
        let checks = try Child(python, checkArguments)
        defer { checks.kill() }
        let status = checks.waitForExit(within: checksTimeout)
        let relayStatus = relay.terminate(within: stopTimeout)
        let report = """
            python exited \(status.map(String.init) ?? "(killed after the timeout)")
            --- python stdout
            \(checks.stdout.text)--- python stderr
            \(checks.stderr.text)--- relay stdout
            \(relay.stdout.text)--- relay stderr
            \(relay.stderr.text)
            """

        // One JSON line per check, every one passed, none missing.
        var seen: [String] = []
        for line in checks.stdout.text.split(separator: "\n") {
            guard let json = try? JSONValue(parsing: String(line)), let name = json["check"]?.stringValue else {
                Issue.record("not a check line: \(line)\n\(report)")
                continue
            }
            seen.append(name)
            #expect(json["ok"]?.boolValue == true, "check \(name) failed: \(json["detail"]?.stringValue ?? "?")\n\(report)")
        }
        #expect(seen == expectedChecks, "checks run \(seen), expected \(expectedChecks)\n\(report)")
        #expect(status == 0, "\(report)")

        // The relay saw the clean closes and the refusals, and stopped on SIGTERM by itself.
        let log = relay.stdout.text
        for needle in ["closed by peer (1000, python bye)", "closed by peer (4001, python bye)", "(same device): closed",
                       "refused 401: missing Authorization header", "refused 401: JWT tbh claim", "refused 404",
                       "second register on one socket", "invalid resume of", "binary frame from a phone ignored",
                       "closed by peer (1009, failed by the relay: "] {
            #expect(log.contains(needle), "the relay log has no \"\(needle)\"\n\(report)")
        }
        #expect(relayStatus == 0, "relay exit status \(relayStatus.map(String.init) ?? "(killed)")\n\(report)")
        #expect(log.hasSuffix("relay stopped\n"), "the relay log does not end with 'relay stopped'\n\(report)")
    }

    /// The steps of tools/interop/device_link_peers.py, in order.
    static let linkSteps = ["desktop-makes-code", "wrong-account", "phone-links", "code-used-once", "rpc-through-relay",
                            "events-both-ways", "relay-code"]

    @Test("a python desktop and phone link by code through the relay; the relay's own code and its PNG QR agree",
          .timeLimit(.minutes(2)))
    func pythonPeersLinkByCode() throws {
        let python = try #require(interopPython)
        let zbarimg = try #require(["/usr/bin/zbarimg", "/bin/zbarimg"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                   "zbarimg (Debian zbar-tools) is missing: run tools/setup.sh")
        let png = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-link-\(getpid())-\(UUID().uuidString).png").path
        defer { try? FileManager.default.removeItem(atPath: png) }
        let relay = try Child(productsDirectory().appendingPathComponent("relaytrace").path,
                              ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--link-qr", png])
        defer { relay.kill() }
        guard let first = relay.stdout.firstLine(within: startTimeout), first.hasPrefix("listening on ws://127.0.0.1:") else {
            _ = relay.terminate(within: stopTimeout)
            Issue.record("no 'listening on' line; stdout: \(relay.stdout.text) stderr: \(relay.stderr.text)")
            return
        }
        let url = String(first.dropFirst("listening on ".count))
        // The relay's link desktop shows its code (and the QR in half blocks), and wrote the PNG.
        var code: String?
        let deadline = DispatchTime.now() + startTimeout
        while code == nil, DispatchTime.now() < deadline {
            let text = relay.stdout.text
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("link code ") && $0.contains("wrote") == false }),
               text.contains("wrote the link QR (PNG) to \(png)") {
                code = String(line.split(separator: " ")[2])
            } else {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        let printed = try #require(code, "no link code printed: \(relay.stdout.text)")
        #expect(relay.stdout.text.contains("any account"))
        #expect(relay.stdout.text.contains("▀") && relay.stdout.text.contains("█"), "the QR in half blocks")
        let decoded = try runProcess(zbarimg, ["--quiet", "--raw", png])
        #expect(decoded.status == 0, "zbarimg: \(decoded.stderr)")
        #expect(decoded.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "relaytrace://link?code=\(printed)")

        let peers = try Child(python, [packageRoot.appendingPathComponent("tools/interop/device_link_peers.py").path, url, "--relay-code", printed])
        defer { peers.kill() }
        let status = peers.waitForExit(within: checksTimeout)
        _ = relay.terminate(within: stopTimeout)
        let report = "python: \(peers.stdout.text)\(peers.stderr.text)\n--- relay\n\(relay.stdout.text)"
        let lines = peers.stdout.text.split(separator: "\n").compactMap { try? JSONValue(parsing: String($0)) }
        #expect(lines.compactMap { $0["check"]?.stringValue } == Self.linkSteps, "\(report)")
        #expect(lines.allSatisfy { $0["ok"]?.boolValue == true }, "\(report)")
        #expect(status == 0, "\(report)")
        for needle in ["refused: user ", "refused: already used", "linked phone ", "with code \(printed)"] {
            #expect(relay.stdout.text.contains(needle), "the relay log has no \"\(needle)\"\n\(report)")
        }
    }
}

/// An unsigned development JWT with `sub` (what the relay reads; no device_id or tbh claims to match).
private func developmentJWT(sub: String) -> String {
    func b64url(_ s: String) -> String {
        Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
    return b64url(#"{"alg":"none"}"#) + "." + b64url(#"{"sub":"\#(sub)"}"#) + ".dev"
}

/// `relaytrace capture --url ws://...` against `relaytrace relay` on loopback, and what it says when it
/// cannot: a usage error (64) for a plain URL without --plain, 74 when no connection ever opened.
@Suite("relaytrace capture --url")
struct CaptureURLTests {
    @Test func aPlainURLWithoutPlainIsAUsageErrorNamingTheFlag() throws {
        let r = try relaytrace(["capture", "--url", "ws://127.0.0.1:1/ws/device-link", "--jwt", developmentJWT(sub: "u"), "-o", "/tmp/never.rtrace"])
        #expect(r.status == 64, "\(r)")
        #expect(r.stderr.contains("add --plain"), "\(r.stderr)")
        #expect(r.stderr.contains("Usage: relaytrace capture"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/never.rtrace"))
        let remote = try relaytrace(["capture", "--url", "ws://relay.example/ws/device-link", "--plain", "--jwt", "x"])
        #expect(remote.status == 64, "plain ws only to a loopback host: \(remote)")
        let link = try relaytrace(["capture", "--url", "ws://127.0.0.1:1/ws/device-link", "--plain", "--jwt", "x", "--scenario", "link"])
        #expect(link.status == 64 && link.stderr.contains("--link-code"), "\(link)")
    }

    @Test func aCaptureWhoseEveryConnectionFailedSaysSoAndExits74() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("refused-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try relaytrace(["capture", "--url", "ws://127.0.0.1:1/ws/device-link", "--plain", "--jwt", developmentJWT(sub: "u"),
                                "--scenario", "lease", "--duration", "2s", "-o", out])
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("no connection succeeded"), "\(r.stderr)")
        #expect(r.stdout.contains("sockets opened 0 of "), "\(r.stdout)")
        // Nothing recorded is lost: the failures are in the trace, which replays.
        #expect(try relaytrace(["replay", out]).status == 0)
    }

    @Test("a live link capture over ws to relaytrace relay replays strictly", .timeLimit(.minutes(1)))
    func aLinkCaptureAgainstTheRelayReplaysStrictly() throws {
        let relay = try Child(productsDirectory().appendingPathComponent("relaytrace").path, ["relay", "--listen", "127.0.0.1:0", "--for", "40s"])
        defer { relay.kill() }
        guard let first = relay.stdout.firstLine(within: startTimeout), first.hasPrefix("listening on ws://127.0.0.1:") else {
            Issue.record("no 'listening on' line: \(relay.stdout.text) \(relay.stderr.text)")
            return
        }
        let url = String(first.dropFirst("listening on ".count))
        var code: String?
        for _ in 0..<200 where code == nil {
            code = relay.stdout.text.split(separator: "\n").first { $0.hasPrefix("link code ") }.map { String($0.split(separator: " ")[2]) }
            if code == nil { Thread.sleep(forTimeInterval: 0.05) }
        }
        let printed = try #require(code)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("link-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try relaytrace(["capture", "--url", url, "--plain", "--jwt", developmentJWT(sub: "auth0|cli-\(getpid())"),
                                "--scenario", "link", "--link-code", printed.lowercased(), "--duration", "6s", "-o", out])
        #expect(r.status == 0, "\(r)\n--- relay\n\(relay.stdout.text)")
        #expect(r.stdout.contains("linked 1"), "\(r.stdout)")
        let replay = try relaytrace(["replay", out])
        #expect(replay.status == 0, "\(replay)")
        let frames = try relaytrace(["frames", out, "--type", "link.redeem,link.accepted,register", "--format", "jsonl"])
        #expect(frames.stdout.split(separator: "\n").count == 4, "two redeems, one accepted, one register: \(frames.stdout)")
        _ = relay.terminate(within: stopTimeout)
        #expect(relay.stdout.text.contains("with code \(printed)"))
    }
}
