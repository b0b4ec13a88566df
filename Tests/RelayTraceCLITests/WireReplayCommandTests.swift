import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Testing
import Trace

/// `relaytrace replay` on a wire trace of python clients nobody here wrote (tools/interop/heartbeat_client.py,
/// python websockets 17) recorded by `relaytrace relay --record`: one phone follows SPEC A6's 5 s heartbeat,
/// the other sends it every 6 s. Both in one trace, as a recording relay serves every client.
@Suite("relaytrace replay on a wire trace of python clients",
       .enabled(if: interopPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does) to run the wire replay tests"))
struct WireReplayCommandTests {
    static let spec = "11111111-2222-4333-8444-555555555555"
    static let slow = "66666666-7777-4888-8999-aaaaaaaaaaaa"

    @Test("a python phone with a 6 s heartbeat is reported at its first heartbeat with A6; one with 5 s agrees; several phones need --device",
          .timeLimit(.minutes(5)))
    func pythonPhonesReplayIntoTheModel() throws {
        let python = try #require(interopPython)
        let file = tempPath("rtrace")
        defer { unlink(file) }
        let binary = productsDirectory().appendingPathComponent("relaytrace").path
        let relay = try Child(binary, ["relay", "--listen", "127.0.0.1:0", "--for", "60s", "--record", file])
        defer { relay.kill() }
        let first = try #require(relay.stdout.firstLine(within: .seconds(30)), "relay: \(relay.stderr.text)")
        let url = String(first.dropFirst("listening on ".count))
        let script = packageRoot.appendingPathComponent("tools/interop/heartbeat_client.py").path
        // Both phones at once: registered, two calls, one heartbeat each (5 s or 6 s after registration),
        // closed with 1001 at 7 s.
        let phones = try [(Self.spec, "5"), (Self.slow, "6")].map { id, beat in
            try Child(python, [script, url, "--heartbeat", beat, "--duration", "7", "--device-id", id])
        }
        defer { phones.forEach { $0.kill() } }
        for p in phones {
            let status = p.waitForExit(within: .seconds(40))
            #expect(status == 0, "heartbeat_client.py: \(p.stderr.text)")
        }
        #expect(relay.terminate(within: .seconds(15)) == 0, "relay: \(relay.stderr.text)")

        // Two phones and no --device: a usage error naming both.
        let ambiguous = try relaytrace(["replay", file])
        #expect(ambiguous.status == 64)
        #expect(ambiguous.stderr.contains("2 phones") && ambiguous.stderr.contains(Self.spec) && ambiguous.stderr.contains(Self.slow), "\(ambiguous.stderr)")

        // The SPEC's heartbeat: the model does what the phone did.
        let agree = try relaytrace(["replay", file, "--device", Self.spec])
        #expect(agree.status == 0, "\(agree.stdout)\(agree.stderr)")
        #expect(agree.stdout.contains("no parting"), "\(agree.stdout)")

        // The 6 s heartbeat: exit 1, the first heartbeat's record, A6, the client's 6 s against the model's 5 s.
        let records = try readAllRecords(file)
        let gens = Set(records.filter { $0.kind == .transportOpen && String(decoding: $0.payload, as: UTF8.self).contains(Self.slow) }.compactMap(\.generation))
        let heartbeat = try #require(records.firstIndex {
            $0.kind == .frameText && $0.direction == .outbound && gens.contains($0.generation ?? 0)
                && String(decoding: $0.payload, as: UTF8.self).contains("\"heartbeat\"")
        })
        let parted = try relaytrace(["replay", file, "--device", Self.slow, "--format", "json"])
        #expect(parted.status == 1, "\(parted.stdout)\(parted.stderr)")
        let json = try JSONValue(parsing: parted.stdout)
        #expect(json["result"] == "parted" && json["mode"] == "wire" && json["source"] == "relay")
        let parting = try #require(json["partings"]?[0])
        #expect(parting["record"]?.intValue == Int64(heartbeat), "\(parted.stdout)")
        #expect(parting["kind"] == "timing" && parting["what"] == "heartbeat")
        #expect(parting["rule"]?["section"] == "A6" && parting["rule"]?["id"] == "A6.heartbeat")
        let message = parting["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("your client sent its heartbeat at ") && message.contains(" after registered; the model sends it at ")
                && message.hasSuffix("5.000 s after registered"), "\(message)")
        let client = Double(parting["clientTimeNs"]?.intValue ?? 0), model = Double(parting["modelTimeNs"]?.intValue ?? 0)
        #expect(abs((client - model) / 1e9 - 1) < 0.1, "about 1 s apart: \(message)")
        // `check` on the same trace names the same rule for the same phone, at the same heartbeat.
        let check = try relaytrace(["check", file, "--format", "json"])
        #expect(check.status == 1, "\(check.stdout)\(check.stderr)")
        let findings = try JSONValue(parsing: check.stdout)["findings"]?.arrayValue ?? []
        let heartbeatFinding = try #require(findings.first { $0["rule"] == "A6.heartbeat" }, "\(check.stdout)")
        #expect(heartbeatFinding["device"]?.stringValue?.lowercased() == Self.slow.lowercased())
        #expect(heartbeatFinding["records"]?.arrayValue?.contains(.int(Int64(heartbeat))) == true, "\(heartbeatFinding)")
        let text = try relaytrace(["replay", file, "--device", Self.slow])
        #expect(text.status == 1)
        #expect(text.stdout.contains("parting at record #\(heartbeat)") && text.stdout.contains("rule:     SPEC A6.heartbeat: heartbeat every 5 s after registration"), "\(text.stdout)")

        // The same trace against a model with the client's 6 s heartbeat (a what-if): they agree.
        let changed = try relaytrace(["replay", file, "--device", Self.slow, "--set", "heartbeatInterval=6s"])
        #expect(changed.status == 0, "\(changed.stdout)")

        // A damaged wire trace: exit 65.
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        bytes[bytes.count / 2] ^= 0xFF
        let damaged = tempPath("rtrace")
        defer { unlink(damaged) }
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let broken = try relaytrace(["replay", damaged, "--device", Self.slow])
        #expect(broken.status == 65, "\(broken.stdout)\(broken.stderr)")
    }

    @Test("wire-trace options on a machine trace, and machine-trace options on a wire trace, are usage errors")
    func optionsBelongToTheirKindOfTrace() throws {
        let machine = GoldenTraceCommandTests.root + "/Traces/handshake-timeout.rtrace"
        for extra in [["--device", "x"], ["--tolerance", "1s"], ["--all"]] {
            let r = try relaytrace(["replay", machine] + extra)
            #expect(r.status == 64 && r.stderr.contains("is for wire traces"), "\(extra): \(r.stderr)")
        }
        // A tiny wire trace written here: one phone's upgrade.
        let file = tempPath("rtrace")
        defer { unlink(file) }
        let header = TraceHeader(seed: 0, wallClockStart: "2026-12-01T10:00:00Z", simulated: false, client: .object([:]),
                                 extra: ["wire": ["source": "relay"]])
        let writer = try TraceWriter(path: file, header: header)
        let open: JSONValue = ["url": "/ws/device-link", "headers": ["X-Device-ID": "d-1", "X-Client-Type": "mobile", "X-Target-Desktop-Device-ID": "desk-1"],
                               "headerOrder": ["X-Device-ID", "X-Client-Type", "X-Target-Desktop-Device-ID"], "deviceId": "d-1"]
        writer.append(TraceRecord(kind: .transportOpen, time: .zero, generation: 1, direction: .outbound, payload: open.serialized()))
        _ = try writer.close()
        for extra in [["--step"], ["--until", "1s"], ["--what-if"], ["--break", "record=1"], ["--perturb", "1"], ["--tolerance", "soon"]] {
            let r = try relaytrace(["replay", file] + extra)
            #expect(r.status == 64, "\(extra): \(r.stderr)")
        }
        // Its upgrade lacks two of the A4 headers: exit 1, the differences listed.
        let parted = try relaytrace(["replay", file, "--tolerance", "500ms", "--all"])
        #expect(parted.status == 1, "\(parted.stdout)\(parted.stderr)")
        #expect(parted.stdout.contains("tolerance 500 ms") && parted.stdout.contains("rule:     SPEC A4.headers"), "\(parted.stdout)")
        #expect(parted.stdout.contains("$.headers.X-Token-Binding: the model \"rt:redacted:") && parted.stdout.contains("your client null"), "\(parted.stdout)")
    }
}
