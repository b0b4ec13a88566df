import Dispatch
import Foundation
import Glibc
import Synchronization
import Sync

// Child processes for the tests that run real peers (python websockets clients, `relaytrace relay`,
// `relaytrace proxy`): output collected by threads, exits awaited with deadlines, killed when done.

/// The package root (this file is Tests/RelayTraceCLITests/RelayInteropTests.swift).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The venv's python with `websockets` 17 (made by tools/interop/setup-venv.sh), or nil when absent.
let interopPython: String? = {
    let path = packageRoot.appendingPathComponent(".venv/bin/python").path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}()

/// Everything a child process writes to one pipe, collected by a thread so the pipe never fills; the
/// test waits for lines or EOF with a deadline.
final class PipeCollector: Sendable {
    private let state = Locked<(data: [UInt8], eof: Bool)>(([], false))
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

    /// Waits until at least `count` lines are complete; false when EOF or the deadline comes first.
    func waitForLines(_ count: Int, within timeout: DispatchTimeInterval) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (lines, eof) = state.withLock { s in (s.data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }, s.eof) }
            if lines >= count { return true }
            if eof || changed.wait(timeout: deadline) == .timedOut { return false }
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
final class ExitSignal: Sendable {
    private let exited = Locked(false)
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
final class Child {
    let process = Process()
    let stdout: PipeCollector
    let stderr: PipeCollector
    private let exit = ExitSignal()
    /// Its standard input: closed when the child is stopped, so a child reading it sees EOF.
    private let stdin = Pipe()

    /// Starts `executable` with `arguments`; `environment` adds to (or overrides) this process's.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        // Extra variables go through env(1) rather than `Process.environment`: with an environment of
        // its own, Foundation's Process left that environment (a dictionary of every variable, 185 kB for
        // two children) allocated and unreachable at exit, which LeakSanitizer reported
        // (tools/sanitize.sh address; docs/BENCHMARKS.md, "Sanitizers").
        if environment.isEmpty {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + [executable] + arguments
        }
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
struct ThrowAwayCertificate {
    let directory: URL
    var certificateFile: String { directory.appendingPathComponent("cert.pem").path }
    var keyFile: String { directory.appendingPathComponent("key.pem").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-interop-\(getpid())-\(UUID().uuidString)")
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

struct InteropFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

