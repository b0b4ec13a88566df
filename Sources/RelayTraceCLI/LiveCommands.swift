import Capture
import DevRelay
import Dispatch
import Glibc
import Synchronization
import Foundation
import Net
import RelayClient
import RelayProtocol
import Runtime
import Simulation
import Trace

/// `relaytrace relay`: the development relay and simulated desktop on a real socket.
enum RelayCommand {
    static let spec = CommandSpec(
        name: "relay",
        abstract: "Run the development relay (PROTOCOL.md) with a simulated desktop on a real socket.",
        discussion: """
            Any client can connect to ws://HOST:PORT/ws/device-link (wss with --tls-cert/--tls-key): register, \
            resume, heartbeat, call any of the 65 RPC methods (the simulated desktop answers), receive job \
            events and timeline snapshots. The bearer is not verified (development relay) but must be a JWT; \
            its device_id and tbh claims, when present, must match X-Device-ID and SHA-256 of X-Token-Binding. \
            The first line printed is 'listening on URL'; then one line per connection event. Runs until \
            interrupted (SIGINT/SIGTERM) or for --for.
            """,
        options: [
            OptionSpec(long: "listen", valueName: "host:port", help: "Where to listen (port 0: any free port).", defaultValue: "127.0.0.1:8787"),
            OptionSpec(long: "tls-cert", valueName: "file", help: "PEM certificate for wss (with --tls-key)."),
            OptionSpec(long: "tls-key", valueName: "file", help: "PEM private key for wss (with --tls-cert)."),
            OptionSpec(long: "faults", valueName: "file", help: "A fault script (docs/FAULTS.md) for the relay and the desktop."),
            OptionSpec(long: "seed", valueName: "n", help: "Seed of the relay's session IDs and tokens.", defaultValue: "1"),
            OptionSpec(long: "for", valueName: "time", help: "Stop after this long (e.g. 30s); default: until interrupted."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "relay"]
        let listen = args.value("listen") ?? "127.0.0.1:8787"
        guard let (host, port) = parseListen(listen) else {
            return RelayTraceCommand.usageError(UsageError(message: "--listen '\(listen)' is not HOST:PORT (e.g. 127.0.0.1:8787, [::1]:0)", commandPath: path), ctx)
        }
        guard let seed = UInt64(args.value("seed") ?? "1") else {
            return RelayTraceCommand.usageError(UsageError(message: "--seed takes a whole number", commandPath: path), ctx)
        }
        var stopAfter: Duration?
        if let f = args.value("for") {
            guard let ns = FaultScript.parseDuration(f), ns > 0 else {
                return RelayTraceCommand.usageError(UsageError(message: "--for '\(f)' is not a time", commandPath: path), ctx)
            }
            stopAfter = .nanoseconds(ns)
        }
        let cert = args.value("tls-cert"), key = args.value("tls-key")
        guard (cert == nil) == (key == nil) else {
            return RelayTraceCommand.usageError(UsageError(message: "--tls-cert and --tls-key go together", commandPath: path), ctx)
        }
        var faults = FaultScript(directives: [])
        if let file = args.value("faults") {
            switch loadFaults(file, ctx) {
            case .success(let f): faults = f
            case .failure(let code): return code
            }
        }
        var tls: TLSServerContext?
        if let cert, let key {
            do throws(NetError) { tls = try TLSServerContext(certificateFile: cert, privateKeyFile: key) } catch {
                ctx.stderr.line("Error: \(error)")
                return FileManager.default.fileExists(atPath: cert) && FileManager.default.fileExists(atPath: key) ? .dataError : .noInput
            }
        }
        ctx.stdout.flush()
        let lines = LineWriter()
        let host_: RelayHost
        do throws(NetError) {
            host_ = try RelayHost(host: host, port: port, tls: tls, faults: faults, seed: seed, wallClockOrigin: unixMillisecondsNow(),
                                  log: { line in lines.write(line) })
        } catch {
            ctx.stderr.line("Error: cannot listen on \(listen): \(error)")
            return .ioError
        }
        lines.release(first: "listening on \(host_.url)")
        waitForSignalOr(stopAfter)
        host_.stop()
        lines.write("relay stopped")
        if let e = lines.failure {
            ctx.stderr.line("Error: writing standard output failed: \(String(cString: strerror(e)))")
            return .ioError
        }
        return .success
    }

    static func parseListen(_ s: String) -> (String, UInt16)? {
        if s.hasPrefix("["), let close = s.firstIndex(of: "]") {
            let host = String(s[s.index(after: s.startIndex)..<close])
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), let p = UInt16(rest.dropFirst()) else { return nil }
            return (host, p)
        }
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, let p = UInt16(parts[1]) else { return nil }
        return (String(parts[0]), p)
    }
}

/// `relaytrace capture`: the main job.
enum CaptureCommand {
    static let spec = CommandSpec(
        name: "capture",
        abstract: "Capture a real session of the relay client over real sockets into a trace.",
        discussion: """
            With no --url, starts the development relay in-process on a loopback port (wss with a \
            self-signed certificate made on the spot and trusted by the client; --plain for ws), runs the \
            scenario's client script in real time over real sockets through the capture layer, writes the \
            trace, and prints a summary plus the next commands. With --url, connects to that relay (the JWT \
            and device ID from --jwt/--device-id or RELAYTRACE_JWT/RELAYTRACE_DEVICE_ID; the JWT is never \
            printed). Secrets are redacted at write time unless --raw.
            """,
        options: [
            OptionSpec(long: "scenario", valueName: "name", help: "The client script (and relay faults) to run.", allowed: Scenario.all.map { $0.name }, defaultValue: "tour"),
            OptionSpec(long: "output", short: "o", valueName: "file", help: "Where to write the trace (default: capture-<scenario>.rtrace)."),
            OptionSpec(long: "url", valueName: "wss://...", help: "A relay to connect to instead of the embedded one."),
            OptionSpec(long: "duration", valueName: "time", help: "How long to capture (default 30s)."),
            OptionSpec(long: "plain", help: "Embedded relay only: plain ws on loopback instead of wss."),
            OptionSpec(long: "jwt", valueName: "token", help: "With --url: the app JWT (or RELAYTRACE_JWT)."),
            OptionSpec(long: "device-id", valueName: "id", help: "With --url: the phone's device ID (or RELAYTRACE_DEVICE_ID)."),
            OptionSpec(long: "desktop-id", valueName: "id", help: "With --url: the target desktop's device ID (or RELAYTRACE_DESKTOP_ID)."),
            OptionSpec(long: "ca-file", valueName: "file", help: "With --url: trust this CA (PEM) instead of the system store."),
            OptionSpec(long: "seed", valueName: "n", help: "The client's seed (request IDs, trace IDs, jitter).", defaultValue: "1"),
            OptionSpec(long: "raw", help: "Record secrets as they are (no redaction). Only for traces that never leave your machine."),
            OptionSpec(long: "force", help: "Overwrite the output file if it exists (otherwise an existing trace is never touched)."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "capture"]
        let name = args.value("scenario") ?? "tour"
        guard let scenario = Scenario.named(name) else {
            return RelayTraceCommand.usageError(UsageError(message: "Unknown scenario '\(name)'", commandPath: path), ctx)
        }
        guard let seed = UInt64(args.value("seed") ?? "1") else {
            return RelayTraceCommand.usageError(UsageError(message: "--seed takes a whole number", commandPath: path), ctx)
        }
        var duration: Duration = .seconds(30)
        if let d = args.value("duration") {
            guard let ns = FaultScript.parseDuration(d), ns > 0 else {
                return RelayTraceCommand.usageError(UsageError(message: "--duration '\(d)' is not a time; write e.g. 30s, 2m", commandPath: path), ctx)
            }
            duration = .nanoseconds(ns)
        }
        let env = ProcessInfo.processInfo.environment
        let output = args.value("output") ?? "capture-\(scenario.name).rtrace"
        let faults: FaultScript
        do throws(FaultScriptError) { faults = try FaultScript.parse(scenario.faults) } catch {
            ctx.stderr.line("Error: scenario \(scenario.name): \(error)")
            return .dataError
        }
        let deviceId = "5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11", desktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
        var relay: RelayHost?
        var identity: SelfSignedIdentity?
        defer {
            relay?.stop()
            identity?.remove()
        }
        var options: LiveClientOptions
        do {
            if let url = args.value("url") {
                guard let jwt = args.value("jwt") ?? env["RELAYTRACE_JWT"] else {
                    return RelayTraceCommand.usageError(UsageError(message: "--url needs a JWT: --jwt or RELAYTRACE_JWT", commandPath: path), ctx)
                }
                let dev = args.value("device-id") ?? env["RELAYTRACE_DEVICE_ID"] ?? deviceId
                let desk = args.value("desktop-id") ?? env["RELAYTRACE_DESKTOP_ID"] ?? desktopId
                let config = try ClientConfiguration(deviceId: dev, deviceName: "relaytrace capture", desktopId: desk, relayURL: url, seed: seed)
                options = LiveClientOptions(configuration: config, jwt: jwt)
                if let ca = args.value("ca-file") { options.tls = TLSClientConfiguration(trustedCAFile: ca) }
            } else {
                let plain = args.flag("plain")
                var tls: TLSServerContext?
                if !plain {
                    let id = try SelfSignedIdentity.generate()
                    identity = id
                    tls = try TLSServerContext(certificateFile: id.certificatePath, privateKeyFile: id.privateKeyPath)
                }
                let relayFaults = FaultScript(directives: faults.directives.filter { $0.fault.target != .client })
                let host = try RelayHost(host: "127.0.0.1", port: 0, tls: tls, faults: relayFaults, seed: seed,
                                         wallClockOrigin: unixMillisecondsNow())
                relay = host
                let config = try ClientConfiguration(deviceId: deviceId, deviceName: "relaytrace capture", desktopId: desktopId,
                                                     relayURL: host.url, allowInsecureLoopback: plain, seed: seed)
                options = LiveClientOptions(configuration: config, jwt: Simulation.phoneJWT(userId: "user-dev", deviceId: deviceId, serial: 0))
                if let id = identity { options.tls = TLSClientConfiguration(trustedCAFile: id.certificatePath) }
                ctx.stdout.line("embedded relay on \(host.url)\(plain ? "" : " (self-signed certificate, trusted by this client only)")")
            }
        } catch {
            ctx.stderr.line("Error: \(error)")
            return .ioError
        }
        // The scenario's UI steps plus its client-side faults, as the client's script.
        var steps = scenario.steps
        for f in faults.schedule {
            if case .client(let cf) = f.fault {
                for input in cf.clientInputs(desktopId: options.configuration.desktopId, appState: .active) {
                    steps.append(ScenarioStep(at: f.at, input))
                }
            }
        }
        steps.sort { $0.at < $1.at }
        options.steps = steps
        var writer = TraceWriterOptions()
        if args.flag("raw") { writer.redaction = .raw }
        writer.overwrite = args.flag("force")
        let capture: ClientCapture
        do throws(TraceError) {
            capture = try ClientCapture(path: output, configuration: options.configuration, wallClockStart: rfc3339Now(), simulated: false,
                                        options: writer, extra: ["scenario": .string(scenario.name), "live": .bool(true)])
        } catch {
            ctx.stderr.line("Error: \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        }
        options.capture = capture
        ctx.stdout.line("capturing \(scenario.name) for \(Int(duration.seconds)) s over real sockets -> \(output)")
        ctx.stdout.flush()
        let summary: LiveClientSummary
        do throws(NetError) { summary = try LiveClient(options: options).run(for: duration) } catch {
            ctx.stderr.line("Error: \(error)")
            return .ioError
        }
        let written: TraceWriterSummary
        do throws(TraceError) { written = try capture.close() } catch {
            ctx.stderr.line("Error: \(error.description)")
            return .ioError
        }
        let c = summary.counts
        ctx.stdout.line("captured \(written.records) records in \(written.chunks) chunks (\(written.bytes) bytes), \(written.dropped) dropped")
        ctx.stdout.line("  sockets opened \(c["opens", default: 0]), frames out \(c["framesOut", default: 0]), calls completed \(c["calls", default: 0]), events \(c["events", default: 0]), snapshots \(c["snapshots", default: 0]); client ended \(summary.finalPhase)")
        ctx.stdout.line("next:")
        ctx.stdout.line("  relaytrace info \(output)")
        ctx.stdout.line("  relaytrace frames \(output) --format table")
        ctx.stdout.line("  relaytrace replay \(output)")
        ctx.stdout.line("  relaytrace timeline \(output)")
        return .success
    }
}

/// Loads and parses a fault script file (66 when unreadable, 65 when it does not parse).
func loadFaults(_ file: String, _ ctx: CLIContext) -> Result<FaultScript, ExitCode> {
    guard let text = readTextFile(file) else {
        ctx.stderr.line("Error: cannot read the fault script '\(file)'")
        return .failure(.noInput)
    }
    do throws(FaultScriptError) {
        return .success(try FaultScript.parse(text))
    } catch {
        ctx.stderr.line("Error: \(file): \(error)")
        return .failure(.dataError)
    }
}

/// Now as Unix epoch milliseconds (the relay's timestamps count from it).
func unixMillisecondsNow() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

/// Now in RFC 3339 with milliseconds, UTC (the trace header's wall-clock start).
func rfc3339Now() -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.string(from: Date())
}

/// Blocks until SIGINT/SIGTERM, or until `limit` passes.
func waitForSignalOr(_ limit: Duration?) {
    let sem = DispatchSemaphore(value: 0)
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    let queue = DispatchQueue(label: "relaytrace.signals")
    let sources = [SIGINT, SIGTERM].map { sig -> any DispatchSourceSignal in
        let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
        s.setEventHandler { sem.signal() }
        s.resume()
        return s
    }
    if let limit {
        _ = sem.wait(timeout: .now() + .nanoseconds(Int(limit.nanoseconds)))
    } else {
        sem.wait()
    }
    for s in sources { s.cancel() }
}

/// Lines to stdout from any thread, each written whole; lines written before ``release(first:)`` wait, so
/// that line comes first. A failed write is kept (`failure`; a closed pipe does not count) and later lines
/// are dropped.
final class LineWriter: Sendable {
    private let state = Mutex<(held: Bool, pending: [String])>((true, []))
    private let failed = Mutex<Int32?>(nil)

    /// The errno of the first failed write other than EPIPE (the reader went away), if any.
    var failure: Int32? { failed.withLock { $0 == EPIPE ? nil : $0 } }

    func write(_ line: String) {
        let now = state.withLock { s -> Bool in
            if s.held { s.pending.append(line); return false }
            return true
        }
        if now { emit(line) }
    }

    func release(first: String) {
        state.withLock { s in
            emit(first)
            for l in s.pending { emit(l) }
            s.pending = []
            s.held = false
        }
    }

    private func emit(_ line: String) {
        failed.withLock { failure in
            guard failure == nil else { return }
            var bytes = Array((line + "\n").utf8)
            var done = 0
            while done < bytes.count {
                let n = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress! + done, $0.count - done) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 {
                    failure = n < 0 ? errno : EIO
                    return
                }
                done += n
            }
        }
    }
}
