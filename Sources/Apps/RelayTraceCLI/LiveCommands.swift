import Capture
import DevRelay
import Dispatch
import Glibc
import LinkQR
import Synchronization
import Foundation
import Net
import RelayClient
import RelayProtocol
import Runtime
import Simulation
import Trace
import WireRecording
import Sync

/// `relaytrace relay`: the development relay, with simulated desktops, on a real socket.
enum RelayCommand {
    static let spec = CommandSpec(
        name: "relay",
        abstract: "Run the development relay (the protocol as it speaks it: docs/PROTOCOL.md) with simulated desktops on a real socket.",
        discussion: """
            Any client can connect to ws://HOST:PORT/ws/device-link (wss with --tls-cert/--tls-key): register, \
            resume, heartbeat, call any of the 65 RPC methods, receive job events and timeline snapshots, link \
            by code (docs/DEVICE_LINK.md). Whatever account (JWT sub) and target desktop a phone names, the \
            relay simulates that desktop (--desktop for a fixed set, --offline for ones that report -32010) \
            unless a real desktop (X-Client-Type: desktop) of that account and ID is connected; then it routes \
            between the two. The relay's own link desktop prints a link code and its QR (--link-qr: also as \
            a PNG). The bearer is not verified (development relay) but must be a JWT; its device_id and tbh \
            claims, when present, must match X-Device-ID and SHA-256 of X-Token-Binding. The first line \
            printed is 'listening on URL'; then one line per connection event. Runs until interrupted \
            (SIGINT/SIGTERM) or for --for.
            """,
        options: [
            OptionSpec(long: "listen", valueName: "host:port", help: "Where to listen (port 0: any free port).", defaultValue: "127.0.0.1:8787"),
            OptionSpec(long: "tls-cert", valueName: "file", help: "PEM certificate for wss (with --tls-key)."),
            OptionSpec(long: "tls-key", valueName: "file", help: "PEM private key for wss (with --tls-cert)."),
            OptionSpec(long: "faults", valueName: "file", help: "A fault script (docs/FAULTS.md) for the relay and the desktop."),
            OptionSpec(long: "seed", valueName: "n", help: "Seed of the relay's session IDs and tokens.", defaultValue: "1"),
            OptionSpec(long: "for", valueName: "time", help: "Stop after this long (e.g. 30s); default: until interrupted."),
            OptionSpec(long: "desktop", valueName: "id[,id]", help: "Simulate only these desktops (default: any desktop a phone names)."),
            OptionSpec(long: "offline", valueName: "id[,id]", help: "Never simulate these desktops: their phones get -32010 Desktop is offline."),
            OptionSpec(long: "link-account", valueName: "sub", help: "Bind the link desktop's codes to this account (default: any account may redeem them)."),
            OptionSpec(long: "link-qr", valueName: "file", help: "Also write each link code's QR as a PNG to this file."),
            OptionSpec(long: "record", valueName: "file", help: "Record every client connection as a wire trace (docs/TRACE_FORMAT.md §14)."),
            OptionSpec(long: "raw", help: "With --record: keep secrets as they are (no redaction). Only for traces that never leave your machine."),
            OptionSpec(long: "force", help: "With --record: overwrite the file if it exists."),
            OptionSpec(long: "replay", valueName: "file", help: "Serve this recording's relay side to live clients instead of the development relay (a WebSocket VCR)."),
            OptionSpec(long: "strict", help: "With --replay: end a socket at its first divergence (default: answer what can be answered, report the rest)."),
            OptionSpec(long: "speed", valueName: "x", help: "With --replay: play recorded delays this many times faster (e.g. 2, 0.5).", defaultValue: "1"),
            OptionSpec(long: "format", valueName: "format", help: "With --replay: the result as text or one JSON object.", allowed: ["text", "json"], defaultValue: "text"),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "relay"]
        if args.value("record") == nil, let f = ["raw", "force"].first(where: { args.flag($0) }) {
            return RelayTraceCommand.usageError(UsageError(message: "--\(f) goes with --record FILE", commandPath: path), ctx)
        }
        if args.value("replay") == nil {
            if args.flag("strict") { return RelayTraceCommand.usageError(UsageError(message: "--strict goes with --replay FILE", commandPath: path), ctx) }
            if let f = ["speed", "format"].first(where: { args.values[$0] != nil && args.value($0) != (["speed": "1", "format": "text"][$0]) }) {
                return RelayTraceCommand.usageError(UsageError(message: "--\(f) goes with --replay FILE", commandPath: path), ctx)
            }
        } else if let f = ["faults", "desktop", "offline", "link-account", "link-qr"].first(where: { args.value($0) != nil }) {
            return RelayTraceCommand.usageError(UsageError(message: "--\(f) is for the development relay; --replay serves a recording as it is", commandPath: path), ctx)
        }
        let listen = args.value("listen") ?? "127.0.0.1:8787"
        guard let (host, port) = parseListen(listen) else {
            return RelayTraceCommand.usageError(UsageError(message: "--listen '\(listen)' is not HOST:PORT (e.g. 127.0.0.1:8787, [::1]:0)", commandPath: path), ctx)
        }
        guard let seed = UInt64(args.value("seed") ?? "1") else {
            return RelayTraceCommand.usageError(UsageError(message: "--seed takes a whole number", commandPath: path), ctx)
        }
        let stopAfter: Duration?
        do { stopAfter = try args.positiveDuration("for", path: path) } catch { return RelayTraceCommand.usageError(error, ctx) }
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
        if let replayPath = args.value("replay") {
            return ReplayServeCommand.run(replayPath, args, listen: listen, host: host, port: port, tls: tls, stopAfter: stopAfter, ctx)
        }
        let desktops = desktopOptions(args)
        if let qr = args.value("link-qr"), !canWrite(qr) {
            ctx.stderr.line("Error: cannot write the link QR to '\(qr)'")
            return .ioError
        }
        // The recording is opened before the relay listens: a file that cannot be written stops us first.
        let recordPath = args.value("record")
        let recorder: WireRecorder?
        switch openRelayRecording(args, details: ["listen": .string(listen)], ctx) {
        case .success(let r): recorder = r
        case .failure(let code): return code.code
        }
        ctx.stdout.flush()
        let lines = LineWriter()
        let qrFile = args.value("link-qr")
        let host_: RelayHost
        do throws(NetError) {
            host_ = try RelayHost(host: host, port: port, tls: tls, faults: faults, seed: seed, wallClockOrigin: unixMillisecondsNow(),
                                  desktops: desktops, recorder: recorder, log: { line in lines.write(line) },
                                  onLinkCode: { offer in lines.write(linkCodeText(offer, qrFile: qrFile)) })
        } catch {
            ctx.stderr.line("Error: cannot listen on \(listen): \(error)")
            if let recorder, let recordPath {
                // Nothing was recorded: leave no file behind.
                _ = try? recorder.close()
                unlink(recordPath)
            }
            return .ioError
        }
        lines.release(first: "listening on \(host_.url)")
        waitForSignalOr(stopAfter)
        host_.stop()
        lines.write("relay stopped")
        var code: ExitCode = .success
        if let recorder, let recordPath {
            let sockets = recorder.sockets
            do throws(TraceError) {
                let written = try recorder.close()
                ctx.stderr.line("wrote \(recordPath): \(sockets) socket\(sockets == 1 ? "" : "s"), \(written.records) records in \(written.chunks) chunks, \(written.dropped) dropped")
                if written.dropped > 0 { code = .ioError }
            } catch {
                ctx.stderr.line("Error: \(recordPath): \(error.description)")
                code = .ioError
            }
        }
        if lines.reportFailure(ctx) { return .ioError }
        return code
    }

    /// `--desktop`, `--offline`, `--link-account`: which desktops the relay simulates, and its link desktop
    /// (the first simulated desktop not offline, else none).
    static func desktopOptions(_ args: ParsedArguments) -> RelayHostDesktops {
        var d = RelayHostDesktops()
        let list = { (name: String) in (args.value(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty } }
        let only = list("desktop")
        d.offline = list("offline")
        if !only.isEmpty { d.simulation = .only(only) }
        let candidates = only.isEmpty ? [RelayConstants.defaultDesktopId] : only
        d.atStart = candidates.first { !d.offline.contains($0) }.map {
            [StartingDesktop(deviceId: $0, userId: args.value("link-account"), name: "relaytrace relay", offersLinkCode: true)]
        } ?? []
        return d
    }

    /// The lines shown for a link code: the code, who may use it, the QR in half blocks, and the PNG
    /// written (or why not).
    static func linkCodeText(_ offer: LinkCodeOffer, qrFile: String?) -> String {
        var text = "link code \(offer.code) for desktop \(offer.desktopDeviceId) (\(offer.desktopName)), "
            + (offer.userId.map { "account \($0)" } ?? "any account") + ", expires \(offer.expiresAtText); type it or scan \(offer.uri)"
        do throws(QRCodeError) {
            let qr = try QRCode(encoding: offer.uri)
            text += "\n" + qr.terminalText()
            if let qrFile {
                if FileManager.default.createFile(atPath: qrFile, contents: Data(qr.png())) {
                    text += "\nwrote the link QR (PNG) to \(qrFile)"
                } else {
                    text += "\ncould not write the link QR to \(qrFile)"
                }
            }
        } catch {
            text += "\n(no QR: \(error))"
        }
        return text
    }

    /// Whether `path` can be created or replaced (checked before listening, so a bad `--link-qr` is an
    /// error at once).
    static func canWrite(_ path: String) -> Bool {
        let existed = FileManager.default.fileExists(atPath: path)
        guard FileManager.default.isWritableFile(atPath: path) || !existed else { return false }
        if existed { return true }
        guard FileManager.default.createFile(atPath: path, contents: Data()) else { return false }
        try? FileManager.default.removeItem(atPath: path)
        return true
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
            printed; a ws:// URL only to a loopback host and with --plain). The link scenario starts with no \
            desktop and links the one the relay's link desktop shows (with --url: --link-code). Secrets are \
            redacted at write time unless --raw. A capture in which no socket ever opened says so and exits 74.
            """,
        options: [
            OptionSpec(long: "scenario", valueName: "name", help: "The client script (and relay faults) to run.", allowed: Scenario.all.map { $0.name }, defaultValue: "tour"),
            OptionSpec(long: "output", short: "o", valueName: "file", help: "Where to write the trace (default: capture-<scenario>.rtrace)."),
            OptionSpec(long: "url", valueName: "wss://...", help: "A relay to connect to instead of the embedded one."),
            OptionSpec(long: "duration", valueName: "time", help: "How long to capture (default 30s)."),
            OptionSpec(long: "plain", help: "Plain ws on loopback: the embedded relay serves ws instead of wss; with --url, allows a ws:// URL to a loopback host."),
            OptionSpec(long: "link-code", valueName: "code", help: "With --url and --scenario link: the link code the desktop shows (typed at the scenario's link step)."),
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
        // The output is checked before the relay starts (the writer refuses it again, atomically).
        if !args.flag("force"), isExistingFile(output) {
            ctx.stderr.line(existsMessage(output))
            return .ioError
        }
        let faults: FaultScript
        do throws(FaultScriptError) { faults = try FaultScript.parse(scenario.faults) } catch {
            ctx.stderr.line("Error: scenario \(scenario.name): \(error)")
            return .dataError
        }
        let deviceId = "5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11", desktopId = SimulationIdentity.desktopId
        let linking = scenario.link != nil
        var relay: RelayHost?
        var identity: SelfSignedIdentity?
        // The phone's database (linked_devices) for a linking scenario: a scratch file, removed at the end.
        let database = linking ? FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-capture-\(getpid())-\(seed).sqlite").path : nil
        defer {
            relay?.stop()
            identity?.remove()
            if let database { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) } }
        }
        let shownCode = Locked<LinkCodeOffer?>(nil)
        var options: LiveClientOptions
        do {
            if let url = args.value("url") {
                guard let jwt = args.value("jwt") ?? env["RELAYTRACE_JWT"] else {
                    return RelayTraceCommand.usageError(UsageError(message: "--url needs a JWT: --jwt or RELAYTRACE_JWT", commandPath: path), ctx)
                }
                if linking {
                    guard let typed = args.value("link-code") else {
                        return RelayTraceCommand.usageError(UsageError(message: "--scenario \(scenario.name) with --url needs --link-code (the code the desktop shows)", commandPath: path), ctx)
                    }
                    guard let code = DeviceLink.normalised(typed) else {
                        return RelayTraceCommand.usageError(UsageError(message: "--link-code '\(typed)' is not a link code (8 letters and digits, e.g. K7QF-3M9X)", commandPath: path), ctx)
                    }
                    shownCode.withLock { $0 = LinkCodeOffer(code: code, uri: DeviceLink.uri(code: code), desktopDeviceId: "", desktopName: "",
                                                              userId: nil, expiresAt: .zero, expiresAtText: "") }
                }
                let dev = args.value("device-id") ?? env["RELAYTRACE_DEVICE_ID"] ?? deviceId
                let desk = linking ? "" : (args.value("desktop-id") ?? env["RELAYTRACE_DESKTOP_ID"] ?? desktopId)
                let config: ClientConfiguration
                do throws(ClientConfigurationError) {
                    config = try ClientConfiguration(deviceId: dev, deviceName: "relaytrace capture", desktopId: desk, relayURL: url,
                                                     allowInsecureLoopback: args.flag("plain"), seed: seed)
                } catch {
                    let hint = url.lowercased().hasPrefix("ws://") && !args.flag("plain") ? "; add --plain for a plain ws relay on loopback" : ""
                    return RelayTraceCommand.usageError(UsageError(message: "\(error)\(hint)", commandPath: path), ctx)
                }
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
                // The phone's desktop is up from the start and shows link codes bound to the phone's account.
                var desktops = RelayHostDesktops()
                desktops.atStart = [StartingDesktop(deviceId: desktopId, userId: "user-dev", offersLinkCode: true)]
                let host = try RelayHost(host: "127.0.0.1", port: 0, tls: tls, faults: relayFaults, seed: seed,
                                         wallClockOrigin: unixMillisecondsNow(), desktops: desktops,
                                         onLinkCode: { offer in shownCode.withLock { $0 = offer } })
                relay = host
                let config = try ClientConfiguration(deviceId: deviceId, deviceName: "relaytrace capture", desktopId: linking ? "" : desktopId,
                                                     relayURL: host.url, allowInsecureLoopback: plain, seed: seed)
                options = LiveClientOptions(configuration: config, jwt: Simulation.phoneJWT(userId: "user-dev", deviceId: deviceId, serial: 0))
                if let id = identity { options.tls = TLSClientConfiguration(trustedCAFile: id.certificatePath) }
                ctx.stdout.line("embedded relay on \(host.url)\(plain ? "" : " (self-signed certificate, trusted by this client only)")")
            }
        } catch let error as ClientConfigurationError {
            return RelayTraceCommand.usageError(UsageError(message: "\(error)", commandPath: path), ctx)
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
        options.link = scenario.link
        options.databasePath = database
        options.linkCode = { shownCode.withLock { $0 } }
        var writer = TraceWriterOptions()
        if args.flag("raw") { writer.redaction = .raw }
        writer.overwrite = args.flag("force")
        let capture: ClientCapture
        do throws(TraceError) {
            capture = try ClientCapture(path: output, configuration: options.configuration, wallClockStart: rfc3339Now(), simulated: false,
                                        options: writer, extra: ["scenario": .string(scenario.name), "live": .bool(true)])
        } catch {
            ctx.stderr.line(writeFailure(error, path: output))
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
        ctx.stdout.line("  sockets opened \(c["opened", default: 0]) of \(c["opens", default: 0]) attempted, frames out \(c["framesOut", default: 0]), calls completed \(c["calls", default: 0]), events \(c["events", default: 0]), snapshots \(c["snapshots", default: 0])\(linking ? ", linked \(c["linked", default: 0])" : ""); client ended \(summary.finalPhase)")
        if c["opened", default: 0] == 0 {
            // Nothing reached a relay: not a capture of a session, whatever the trace holds.
            ctx.stderr.line("Error: no connection succeeded: \(c["opens", default: 0]) socket(s) attempted to \(options.configuration.relayURL), none opened; the trace \(output) records the failures (relaytrace frames \(output) --type transportFailed)")
            return .ioError
        }
        if linking, c["linked", default: 0] == 0 {
            ctx.stderr.line("warning: the \(scenario.name) scenario did not link a desktop\(c["linkCodeMissing", default: 0] > 0 ? " (the desktop showed no code at the link step)" : "")")
        }
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

/// Blocks until SIGINT/SIGTERM, until `limit` passes, or until `wakeUp` (when given) is signalled.
func waitForSignalOr(_ limit: Duration?, wakeUp: DispatchSemaphore? = nil) {
    let sem = wakeUp ?? DispatchSemaphore(value: 0)
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
    private let state = Locked<(held: Bool, pending: [String])>((true, []))
    private let failed = Locked<Int32?>(nil)
    /// The descriptor written to: 1 (stdout) unless told otherwise.
    let descriptor: Int32

    /// Lines to `descriptor` (stdout by default; `relay --replay --format json` logs to stderr).
    init(descriptor: Int32 = 1) { self.descriptor = descriptor }

    /// The errno of the first failed write other than EPIPE (the reader went away), if any.
    var failure: Int32? { failed.withLock { $0 == EPIPE ? nil : $0 } }

    /// Says on stderr that a write failed, if one did (`Error: writing standard output failed: REASON`);
    /// true then, and the command exits 74.
    func reportFailure(_ ctx: CLIContext) -> Bool {
        guard let e = failure else { return false }
        ctx.stderr.line("Error: writing \(descriptor == 2 ? "standard error" : "standard output") failed: \(String(cString: strerror(e)))")
        return true
    }

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
                let n = bytes.withUnsafeMutableBytes { Glibc.write(descriptor, $0.baseAddress! + done, $0.count - done) }
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

/// An exit code as an `Error`, for a `Result` whose failure is already reported.
struct ReportedExit: Error {
    /// The exit code the command returns.
    let code: ExitCode
}

/// Opens `relay --record FILE` (also with `--replay`): `--raw` records unredacted, `--force` overwrites,
/// and a recording relay waits for its writer rather than lose a frame. nil without `--record`; a
/// failure is reported on stderr (the file named) with its exit code.
func openRelayRecording(_ args: ParsedArguments, details: [String: JSONValue], _ ctx: CLIContext) -> Result<WireRecorder?, ReportedExit> {
    guard let recordPath = args.value("record") else { return .success(nil) }
    var options = TraceWriterOptions()
    if args.flag("raw") { options.redaction = .raw }
    options.overwrite = args.flag("force")
    options.blockWhenFull = true
    do throws(TraceError) {
        return .success(try WireRecorder(path: recordPath, source: .relay, details: details, wallClockStart: rfc3339Now(), options: options))
    } catch {
        ctx.stderr.line(writeFailure(error, path: recordPath))
        return .failure(ReportedExit(code: RelayTraceCommand.exitCode(for: error)))
    }
}
