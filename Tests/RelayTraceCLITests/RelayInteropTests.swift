import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Synchronization
import Testing
import Trace

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
    /// The four ways a client reaches the relay: ws or wss, directly or through `relaytrace proxy` (which
    /// must be invisible: every check passes unchanged). The relay records every connection it serves
    /// (`--record`), and so does the proxy: both recordings verify and hold every socket.
    @Test("every python check passes against the relay, directly and through the proxy", .timeLimit(.minutes(4)),
          arguments: [(false, false), (true, false), (false, true), (true, true)])
    func pythonChecks(tls: Bool, throughProxy: Bool) throws {
        let python = try #require(interopPython)
        let certificate = tls ? try ThrowAwayCertificate() : nil
        defer { certificate?.remove() }
        let offline = "0ff11e00-dead-4bad-8bad-000000000001"
        let relayRecording = tempPath("rtrace"), proxyRecording = tempPath("rtrace")
        defer {
            unlink(relayRecording)
            unlink(proxyRecording)
        }
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        var relayArguments = ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--record", relayRecording, "--offline", offline]
        if let certificate { relayArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile] }
        let relay = try Child(binary, relayArguments)
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
        var url = String(first.dropFirst("listening on ".count))

        var proxy: Child?
        defer { proxy?.kill() }
        if throughProxy {
            var proxyArguments = ["proxy", "--listen", "127.0.0.1:0", "--upstream", url, "-o", proxyRecording, "--for", "60s"]
            if let certificate {
                proxyArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile, "--ca-file", certificate.certificateFile]
            }
            let p = try Child(binary, proxyArguments)
            proxy = p
            guard let line = p.stdout.firstLine(within: startTimeout) else {
                Issue.record("relaytrace proxy printed no first line; stdout: \(p.stdout.text) stderr: \(p.stderr.text)")
                return
            }
            try #require(line.hasPrefix("proxy on \(scheme)://127.0.0.1:") && line.contains("/ws/device-link -> \(url) "), "unexpected first line \"\(line)\"")
            url = String(line.dropFirst("proxy on ".count).prefix { $0 != " " })
        }

        var checkArguments = [packageRoot.appendingPathComponent("tools/interop/relay_client_checks.py").path, url, "--offline-desktop", offline]
        if let certificate { checkArguments += ["--ca-file", certificate.certificateFile] }
        let checks = try Child(python, checkArguments)
        defer { checks.kill() }
        let status = checks.waitForExit(within: checksTimeout)
        let proxyStatus = proxy?.terminate(within: stopTimeout)
        let relayStatus = relay.terminate(within: stopTimeout)
        let report = """
            python exited \(status.map(String.init) ?? "(killed after the timeout)")
            --- python stdout
            \(checks.stdout.text)--- python stderr
            \(checks.stderr.text)--- relay stdout
            \(relay.stdout.text)--- relay stderr
            \(relay.stderr.text)--- proxy stdout
            \(proxy?.stdout.text ?? "")--- proxy stderr
            \(proxy?.stderr.text ?? "")
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

        // The relay saw the clean closes and the refusals (through the proxy too: it forwards them as they
        // are), and stopped on SIGTERM by itself.
        let log = relay.stdout.text
        for needle in ["closed by peer (1000, python bye)", "closed by peer (4001, python bye)", "(same device): closed",
                       "refused 401: missing Authorization header", "refused 401: JWT tbh claim", "refused 404",
                       "second register on one socket", "invalid resume of", "binary frame from a phone ignored",
                       "closed by peer (1009, failed by the relay: "] {
            #expect(log.contains(needle), "the relay log has no \"\(needle)\"\n\(report)")
        }
        #expect(relayStatus == 0, "relay exit status \(relayStatus.map(String.init) ?? "(killed)")\n\(report)")
        #expect(log.hasSuffix("relay stopped\n"), "the relay log does not end with 'relay stopped'\n\(report)")
        if throughProxy {
            #expect(proxyStatus == 0, "proxy exit status \(proxyStatus.map(String.init) ?? "(killed)")\n\(report)")
        }

        // Both recordings are complete wire traces holding every socket: the relay's every connection it
        // served; the proxy's every client connection (refused upgrades included), accept order.
        for (file, source) in [(relayRecording, "relay")] + (throughProxy ? [(proxyRecording, "proxy")] : []) {
            let verify = try relaytrace(["verify", file])
            #expect(verify.status == 0, "verify \(source) recording: \(verify.stdout) \(verify.stderr)")
            let info = try JSONValue(parsing: try relaytrace(["info", file, "--format", "json"]).stdout)
            #expect(info["wire"]?["source"]?.stringValue == source)
            let sockets = info["sockets"]?.arrayValue ?? []
            #expect(sockets.count >= 40, "\(source) recorded \(sockets.count) sockets")
            #expect(sockets.enumerated().allSatisfy { $0.element["gen"]?.intValue == Int64($0.offset + 1) }, "generations 1...n in order")
            #expect(sockets.filter { $0["status"]?.intValue == 401 }.count == 2, "\(source): the two 401 refusals")
            #expect(sockets.contains { $0["status"]?.intValue == 404 }, "\(source): the 404")
            #expect(sockets.contains { $0["end"]?.stringValue == "closed by the relay 1009" }, "\(source): the too-big message's 1009")
        }
    }

    /// A python client nobody here wrote (tools/interop/wire_client.py: register, heartbeat, RPCs, a text
    /// ping, a WebSocket ping, a binary frame, closes by either side over three sockets) prints every
    /// message it sent and received; the relay's recording and the proxy's must hold exactly that, frame
    /// for frame in both directions, one generation per socket, and verify.
    @Test("a python client's own transcript is what relay --record and the proxy recorded", .timeLimit(.minutes(5)),
          arguments: [false, true])
    func recordingsMatchTheClientsTranscript(tls: Bool) throws {
        let python = try #require(interopPython)
        let certificate = tls ? try ThrowAwayCertificate() : nil
        defer { certificate?.remove() }
        let relayRecording = tempPath("rtrace"), proxyRecording = tempPath("rtrace")
        defer {
            unlink(relayRecording)
            unlink(proxyRecording)
        }
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        var relayArguments = ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--record", relayRecording]
        if let certificate { relayArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile] }
        let relay = try Child(binary, relayArguments)
        defer { relay.kill() }
        let relayURL = String(try #require(relay.stdout.firstLine(within: startTimeout), "relay: \(relay.stderr.text)").dropFirst("listening on ".count))
        var proxyArguments = ["proxy", "--listen", "127.0.0.1:0", "--upstream", relayURL, "-o", proxyRecording, "--for", "60s"]
        if let certificate {
            proxyArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile, "--ca-file", certificate.certificateFile]
        }
        let proxy = try Child(binary, proxyArguments)
        defer { proxy.kill() }
        let line = try #require(proxy.stdout.firstLine(within: startTimeout), "proxy: \(proxy.stderr.text)")
        let proxyURL = String(line.dropFirst("proxy on ".count).prefix { $0 != " " })

        var clientArguments = [packageRoot.appendingPathComponent("tools/interop/wire_client.py").path, proxyURL]
        if let certificate { clientArguments += ["--ca-file", certificate.certificateFile] }
        let client = try Child(python, clientArguments)
        defer { client.kill() }
        let status = client.waitForExit(within: .seconds(60))
        #expect(proxy.terminate(within: stopTimeout) == 0, "proxy: \(proxy.stderr.text)")
        #expect(relay.terminate(within: stopTimeout) == 0, "relay: \(relay.stderr.text)")
        try #require(status == 0, "wire_client.py: \(client.stderr.text)")
        let transcript = try client.stdout.text.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
        #expect(transcript.count >= 20)

        for (file, source) in [(relayRecording, "relay"), (proxyRecording, "proxy")] {
            let verify = try relaytrace(["verify", file])
            #expect(verify.status == 0, "verify \(source): \(verify.stdout)\(verify.stderr)")
            let records = try readAllRecords(file)
            // The recording redacted the secrets (the resume token) with its own key: so does the comparison.
            let redactor = try TraceReader(path: file).header.redaction.redactor
            #expect(redactor.policy == .hashed)
            #expect(Set(records.compactMap(\.generation)) == [1, 2, 3], "\(source): one generation per socket")
            for socket in 1...3 {
                let said = transcript.filter { $0["socket"]?.intValue == Int64(socket) }
                let recorded = records.filter { $0.generation == UInt64(socket) }
                func describe(_ j: JSONValue) -> String {
                    switch j["kind"]?.stringValue {
                    case "text": "text " + String(decoding: redactor.redact(payload: Array((j["text"]?.stringValue ?? "").utf8), kind: .frameText), as: UTF8.self)
                    case "binary": "binary " + (j["hex"]?.stringValue ?? "")
                    case "ping": "ping " + (j["hex"]?.stringValue ?? "")
                    case "close": "close \(j["code"]?.intValue ?? -1) \(j["reason"]?.stringValue ?? "")"
                    default: "?"
                    }
                }
                func describe(_ r: TraceRecord) -> String? {
                    switch r.kind {
                    case .frameText: "text " + String(decoding: r.payload, as: UTF8.self)
                    case .frameBinary: "binary " + hexString(r.payload)
                    case .ping: "ping " + hexString(r.payload)
                    case .transportClosed:
                        (try? JSONValue(parsing: r.payload)).map { "close \($0["code"]?.intValue ?? -1) \($0["reason"]?.stringValue ?? "")" }
                    default: nil
                    }
                }
                // What the client sent, exactly and in order (its close included: sockets 1 and 2 close
                // themselves, socket 3 is closed by the relay).
                let out = said.filter { $0["dir"]?.stringValue == "out" }.map(describe)
                let recordedOut = recorded.filter { $0.direction == .outbound && $0.kind != .transportOpen }.compactMap(describe)
                #expect(recordedOut == out, "\(source) g\(socket) client to relay")
                // What the client read, in order: a prefix of what crossed (the relay may send an event the
                // script never reads before the close).
                let inbound = said.filter { $0["dir"]?.stringValue == "in" }.map(describe)
                let recordedIn = recorded.filter { $0.direction == .inbound && [.frameText, .frameBinary, .transportClosed].contains($0.kind) }.compactMap(describe)
                #expect(Array(recordedIn.prefix(inbound.count)) == inbound, "\(source) g\(socket) relay to client")
                // Every socket starts with its upgrade and ends with its close; the WebSocket ping of socket 1
                // got its pong.
                #expect(recorded.first?.kind == .transportOpen && recorded.dropFirst().first?.kind == .transportOpened)
                #expect(recorded.last?.kind == .transportClosed)
                if socket == 1 { #expect(recorded.contains { $0.kind == .pong && $0.direction == .inbound && $0.payload == Array("wire-1".utf8) }) }
            }
            // Every inspect command reads the wire trace.
            for args in [["info", file], ["frames", file, "--format", "jsonl"], ["frames", file, "--format", "table"], ["show", file, "3"],
                         ["stats", file, "--format", "json"], ["timeline", file], ["diff", file, file], ["lint", file]] {
                let r = try relaytrace(args)
                #expect(r.status == 0, "relaytrace \(args.joined(separator: " ")): \(r.stderr)")
            }
            for format in ["pcapng", "har", "jsonl", "chrome-trace"] {
                let out = tempPath(format)
                defer { unlink(out) }
                let r = try relaytrace(["export", file, "--format", format, "-o", out])
                #expect(r.status == 0 && ((try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0) > 0, "export \(format): \(r.stderr)")
                if format == "pcapng", let tshark = which("tshark") {
                    // Wireshark's websocket dissector sees the socket's ping and pong (opcodes 9 and 10).
                    let t = try runProcess(tshark, ["-r", out, "-Y", "websocket.opcode == 9 || websocket.opcode == 10", "-T", "fields", "-e", "websocket.opcode"])
                    #expect(t.stdout.split(separator: "\n").sorted() == ["10", "9"], "tshark: \(t.stdout)\(t.stderr)")
                }
            }
            let redacted = tempPath("rtrace")
            defer { unlink(redacted) }
            #expect(try relaytrace(["redact", file, redacted]).status == 0)
            #expect(try relaytrace(["verify", redacted]).status == 0)
            let open = try #require(records.first { $0.kind == .transportOpen })
            let headers = try JSONValue(parsing: open.payload)
            #expect(headers["clientType"]?.stringValue == "mobile" && headers["deviceId"] != nil && headers["desktopId"] != nil)
            #expect(headers["headers"]?["Authorization"]?.stringValue?.hasPrefix("Bearer rt:redacted:") == true, "\(source): the bearer is redacted")
        }
    }

    /// The steps of tools/interop/device_link_peers.py, in order.
    static let linkSteps = ["desktop-makes-code", "wrong-account", "phone-links", "code-used-once", "rpc-through-relay",
                            "events-both-ways", "relay-code"]

    @Test("a python desktop and phone link by code through the relay; the relay's own code and its PNG QR agree",
          .timeLimit(.minutes(5)))
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

/// Every record of the trace at `path`, in order.
func readAllRecords(_ path: String) throws -> [TraceRecord] {
    let reader = try TraceReader(path: path)
    var out: [TraceRecord] = []
    while let e = try reader.next() { out.append(e.record) }
    return out
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

    @Test("a live link capture over ws to relaytrace relay replays strictly", .timeLimit(.minutes(5)))
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
