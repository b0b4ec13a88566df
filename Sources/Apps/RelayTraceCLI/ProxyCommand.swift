import Foundation
import Glibc
import Net
import Proxy
import RelayProtocol
import Runtime
import Trace
import WireRecording

/// `relaytrace proxy`: a recording WebSocket proxy between an unmodified client and any relay.
enum ProxyCommand {
    static let spec = CommandSpec(
        name: "proxy",
        abstract: "Record an unmodified client: a WebSocket proxy in front of any relay, writing a wire trace.",
        discussion: """
            Point the client at the proxy instead of the relay (the first line printed is 'proxy on URL -> \
            UPSTREAM'). Every client connection gets its own upstream connection with the client's upgrade \
            headers (hop-by-hop ones excepted); the upstream's answer, every message, ping, pong and close \
            frame then pass through as bytes, so neither side notices the proxy, and are recorded into FILE \
            as a wire trace (one generation per client socket; docs/TRACE_FORMAT.md §14). wss on the \
            listening side with --tls-cert/--tls-key, or --tls-self-signed for a certificate made on the spot \
            (its SHA-256 fingerprint and PEM path are printed so a phone or simulator can trust it); a wss \
            upstream is verified against the system store or --ca-file. An upstream that cannot be reached \
            answers the client 502. Runs until SIGINT/SIGTERM or --for; the trace is complete when it stops.
            """,
        options: [
            OptionSpec(long: "listen", valueName: "host:port", help: "Where clients connect (port 0: any free port).", defaultValue: "127.0.0.1:8788"),
            OptionSpec(long: "upstream", valueName: "url", help: "The relay: ws://HOST:PORT/ws/device-link or wss://..."),
            OptionSpec(long: "output", short: "o", valueName: "file", help: "The wire trace to write."),
            OptionSpec(long: "tls-cert", valueName: "file", help: "PEM certificate for a wss listening side (with --tls-key)."),
            OptionSpec(long: "tls-key", valueName: "file", help: "PEM private key for a wss listening side (with --tls-cert)."),
            OptionSpec(long: "tls-self-signed", help: "Listen with wss using a certificate made on the spot (P-256, a day)."),
            OptionSpec(long: "tls-dir", valueName: "dir", help: "With --tls-self-signed: keep the certificate in DIR and reuse it next time."),
            OptionSpec(long: "tls-name", valueName: "names", help: "With --tls-self-signed: more names or IPs for the certificate, comma-separated (e.g. this machine's LAN address)."),
            OptionSpec(long: "ca-file", valueName: "file", help: "Trust this CA (PEM) for a wss upstream instead of the system store."),
            OptionSpec(long: "for", valueName: "time", help: "Stop after this long (e.g. 30s); default: until interrupted."),
            OptionSpec(long: "raw", help: "Keep secrets as they are (no redaction). Only for traces that never leave your machine."),
            OptionSpec(long: "force", help: "Overwrite FILE if it exists."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "proxy"]
        func usage(_ message: String) -> ExitCode { RelayTraceCommand.usageError(UsageError(message: message, commandPath: path), ctx) }
        let listen = args.value("listen") ?? "127.0.0.1:8788"
        guard let (host, port) = RelayCommand.parseListen(listen) else {
            return usage("--listen '\(listen)' is not HOST:PORT (e.g. 127.0.0.1:8788, [::1]:0)")
        }
        guard let upstreamText = args.value("upstream") else { return usage("--upstream URL is required (the relay to forward to)") }
        let upstreamURL: WebSocketURL
        do throws(WebSocketError) { upstreamURL = try WebSocketURL(upstreamText) } catch {
            return usage("--upstream '\(upstreamText)' is not a ws:// or wss:// URL: \(error)")
        }
        guard let output = args.value("output") else { return usage("-o FILE is required (the wire trace to write)") }
        let stopAfter: Duration?
        do { stopAfter = try args.positiveDuration("for", path: path) } catch { return usage(error.message) }
        let cert = args.value("tls-cert"), key = args.value("tls-key")
        guard (cert == nil) == (key == nil) else { return usage("--tls-cert and --tls-key go together") }
        let selfSigned = args.flag("tls-self-signed")
        if selfSigned && cert != nil { return usage("--tls-self-signed makes its own certificate; drop --tls-cert/--tls-key or it") }
        if !selfSigned, let f = ["tls-dir", "tls-name"].first(where: { args.value($0) != nil }) {
            return usage("--\(f) goes with --tls-self-signed")
        }
        let names = (args.value("tls-name") ?? "").split(separator: ",").map { String($0) }
        if let bad = names.first(where: { !$0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ".:-".contains($0)) } }) {
            return usage("--tls-name '\(bad)' is not a host name or IP address")
        }
        if let ca = args.value("ca-file"), !upstreamURL.isSecure {
            return usage("--ca-file '\(ca)' is for a wss upstream; \(upstreamText) is plain ws")
        }

        // The listening identity.
        var tls: TLSServerContext?
        var temporary: SelfSignedIdentity?
        defer { temporary?.remove() }
        do {
            if let cert, let key {
                tls = try TLSServerContext(certificateFile: cert, privateKeyFile: key)
            } else if selfSigned {
                let identity: SelfSignedIdentity
                if let dir = args.value("tls-dir") {
                    let (id, new) = try SelfSignedIdentity.loadOrGenerate(in: dir, names: names)
                    identity = id
                    ctx.stderr.line(new ? "made a certificate in \(dir) (kept for the next run)" : "using the certificate kept in \(dir)")
                } else {
                    identity = try SelfSignedIdentity.generate(names: names)
                    temporary = identity
                }
                tls = try TLSServerContext(certificateFile: identity.certificatePath, privateKeyFile: identity.privateKeyPath)
                let fingerprint = try SelfSignedIdentity.sha256Fingerprint(certificatePath: identity.certificatePath)
                ctx.stderr.line("certificate: \(identity.certificatePath)\(temporary == nil ? "" : " (removed when the proxy stops; --tls-dir keeps it)")")
                ctx.stderr.line("  SHA-256 \(fingerprint)")
                ctx.stderr.line("  trust it on the client: iOS simulator `xcrun simctl keychain booted add-root-cert \(identity.certificatePath)`; a device: install the PEM as a profile and enable full trust")
            }
        } catch {
            ctx.stderr.line("Error: the listening certificate: \(error)")
            if let cert, !FileManager.default.fileExists(atPath: cert) { return .noInput }
            if let key, !FileManager.default.fileExists(atPath: key) { return .noInput }
            return .dataError
        }
        var upstreamTLS = TLSClientConfiguration()
        if let ca = args.value("ca-file") {
            guard FileManager.default.isReadableFile(atPath: ca) else {
                ctx.stderr.line("Error: cannot read the CA file '\(ca)'")
                return .noInput
            }
            upstreamTLS = TLSClientConfiguration(trustedCAFile: ca)
        }

        // The recording, opened before listening: a file that cannot be written stops us first.
        var options = TraceWriterOptions()
        if args.flag("raw") { options.redaction = .raw }
        options.overwrite = args.flag("force")
        options.blockWhenFull = true  // a recording proxy waits for its writer rather than lose a frame
        let recorder: WireRecorder
        do throws(TraceError) {
            recorder = try WireRecorder(path: output, source: .proxy,
                                        details: ["listen": .string(listen), "upstream": .string(upstreamURL.description)],
                                        wallClockStart: rfc3339Now(), options: options)
        } catch {
            ctx.stderr.line(writeFailure(error, path: output))
            return RelayTraceCommand.exitCode(for: error)
        }
        let lines = LineWriter()
        let proxy: RecordingProxy
        do throws(NetError) {
            proxy = try RecordingProxy(host: host, port: port, tls: tls, upstream: ProxyUpstream(url: upstreamURL, tls: upstreamTLS),
                                       recorder: recorder, log: { lines.write($0) })
        } catch {
            ctx.stderr.line("Error: cannot listen on \(listen): \(error)")
            _ = try? recorder.close()
            unlink(output)  // nothing was recorded: leave no file behind
            return .ioError
        }
        lines.release(first: "proxy on \(proxy.url) -> \(upstreamURL) (recording to \(output))")
        waitForSignalOr(stopAfter)
        proxy.stop()
        lines.write("proxy stopped")
        let sockets = recorder.sockets
        do throws(TraceError) {
            let written = try recorder.close()
            ctx.stderr.line("wrote \(output): \(sockets) socket\(sockets == 1 ? "" : "s"), \(written.records) records in \(written.chunks) chunks, \(written.dropped) dropped")
            if lines.reportFailure(ctx) { return .ioError }
            return written.dropped > 0 ? .ioError : .success
        } catch {
            ctx.stderr.line("Error: \(output): \(error.description)")
            return .ioError
        }
    }
}
