import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Testing

/// A python `websockets` client (tools/interop/rule_client.py, not the project's model) recorded through
/// `relaytrace relay --record`: well behaved it passes `check`; written to break rules, `check` names each
/// broken rule (heartbeat interval, missing traceparent, snake_case key, missing idempotency key, resume
/// token kept after invalidResume, unknown method) and nothing else.
// Enabled only when the venv exists (tools/test.sh makes it before the tests).
@Suite("relaytrace check on a python client recorded by relay --record",
       .enabled(if: interopPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does)"))
struct CheckInteropTests {
    /// The machine is shared: real clocks on a loaded host jitter more than the default 250 ms allows.
    static let tolerance = "750ms"

    /// Runs the python client in `mode` against a recording relay; returns the `check --format json`
    /// result and its exit status.
    func recordAndCheck(mode: String, tls: Bool) throws -> (status: Int32, report: JSONValue, text: String) {
        let python = try #require(interopPython)
        let certificate = tls ? try ThrowAwayCertificate() : nil
        defer { certificate?.remove() }
        let recording = tempPath("rtrace")
        defer { unlink(recording) }
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        var relayArguments = ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--record", recording]
        if let certificate { relayArguments += ["--tls-cert", certificate.certificateFile, "--tls-key", certificate.keyFile] }
        let relay = try Child(binary, relayArguments)
        defer { relay.kill() }
        let first = try #require(relay.stdout.firstLine(within: .seconds(30)), "relay: \(relay.stderr.text)")
        let url = String(first.dropFirst("listening on ".count))
        var clientArguments = [packageRoot.appendingPathComponent("tools/interop/rule_client.py").path, url, "--mode", mode]
        if let certificate { clientArguments += ["--ca-file", certificate.certificateFile] }
        let client = try Child(python, clientArguments)
        defer { client.kill() }
        let status = client.waitForExit(within: .seconds(60))
        #expect(relay.terminate(within: .seconds(15)) == 0, "relay: \(relay.stderr.text)")
        try #require(status == 0, "rule_client.py --mode \(mode): \(client.stdout.text)\(client.stderr.text)")
        let json = try relaytrace(["check", recording, "--format", "json", "--tolerance", Self.tolerance])
        let text = try relaytrace(["check", recording, "--tolerance", Self.tolerance])
        #expect(json.status == text.status)
        return (json.status, try JSONValue(parsing: json.stdout), text.stdout)
    }

    @Test("a well-behaved python client passes", .timeLimit(.minutes(5)), arguments: [false, true])
    func wellBehavedClientPasses(tls: Bool) throws {
        let (status, report, text) = try recordAndCheck(mode: "well", tls: tls)
        #expect(status == 0, "\(text)")
        #expect(report["trace"]?["kind"] == "wire" && report["trace"]?["phoneDevices"] == 2 && report["trace"]?["phoneSockets"] == 3, "\(text)")
        #expect(report["findings"]?.arrayValue?.isEmpty == true, "\(text)")
        // What it did was judged, not skipped for lack of evidence.
        let rules = report["rules"]?.arrayValue ?? []
        for rule in ["A4.headers", "A6.register", "A6.heartbeat", "A7.reRegister", "A7.resume", "A8.traceparent", "A8.idempotencyKey", "A8.timeout"] {
            #expect(rules.first { $0["rule"]?.stringValue == rule }?["status"] == "held", "\(rule)\n\(text)")
        }
    }

    @Test("check names each rule a python client broke", .timeLimit(.minutes(5)))
    func brokenClientIsCaughtOnEachRule() throws {
        let (status, report, text) = try recordAndCheck(mode: "broken", tls: false)
        #expect(status == 1, "\(text)")
        let findings = report["findings"]?.arrayValue ?? []
        let rules = Set(findings.compactMap { $0["rule"]?.stringValue })
        #expect(rules == ["A6.heartbeat", "A8.traceparent", "A8.camelCase", "A8.idempotencyKey", "A7.reRegister", "A8.method"], "\(text)")
        // Each finding names its records, its device and what was measured.
        for f in findings {
            #expect(f["records"]?.arrayValue?.isEmpty == false && f["device"]?.stringValue != nil && f["gen"]?.intValue != nil, "\(f)")
        }
        let heartbeat = try #require(findings.first { $0["rule"] == "A6.heartbeat" })
        #expect((heartbeat["measuredSeconds"]?.doubleValue ?? 0) > 6.5, "\(heartbeat)")
        let kept = try #require(findings.first { $0["rule"] == "A7.reRegister" })
        #expect(kept["measured"]?.stringValue?.contains("resume token") == true, "\(kept)")
        let snake = try #require(findings.first { $0["rule"] == "A8.camelCase" })
        #expect(snake["measured"]?.stringValue?.contains("session_id") == true, "\(snake)")
        // One phone per mistake: six devices, each socket its own generation.
        #expect(report["trace"]?["phoneDevices"] == 6 && report["trace"]?["phoneSockets"] == 6, "\(text)")
    }
}
