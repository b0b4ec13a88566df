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
    "rpc", "rpc-fragmented", "rpc-before-register", "binary-ignored", "event-replay", "ws-ping", "too-big", "close-1000", "close-4001", "replaced-by-same-device", "double-register",
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

        var checkArguments = [packageRoot.appendingPathComponent("tools/interop/relay_client_checks.py").path, url]
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
    @Test("a python client's own transcript is what relay --record and the proxy recorded", .timeLimit(.minutes(2)),
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
            let open = try #require(records.first { $0.kind == .transportOpen })
            let headers = try JSONValue(parsing: open.payload)
            #expect(headers["clientType"]?.stringValue == "mobile" && headers["deviceId"] != nil && headers["desktopId"] != nil)
            #expect(headers["headers"]?["Authorization"]?.stringValue?.hasPrefix("Bearer rt:redacted:") == true, "\(source): the bearer is redacted")
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
