import Dispatch
import Foundation
import Glibc
import RelayProtocol
import Testing
import Trace

/// `relaytrace relay --replay`: a recording's relay side served to live clients (python websockets,
/// this project's own live client), matched by meaning.
@Suite("relay --replay: a WebSocket VCR",
       .enabled(if: interopPython != nil, "no .venv/bin/python: run tools/interop/setup-venv.sh (tools/test.sh does)"))
struct RelayReplayTests {
    let binary = productsDirectory().appendingPathComponent("relaytrace").path
    let client = packageRoot.appendingPathComponent("tools/interop/wire_client.py").path
    let device = "11111111-2222-3333-4444-555555555555"

    /// Starts `relaytrace relay ARGS` and returns it with the URL of its first line.
    func relay(_ arguments: [String]) throws -> (Child, String) {
        let child = try Child(binary, ["relay", "--listen", "127.0.0.1:0"] + arguments)
        // In JSON mode the first line goes to stderr (stdout holds only the result).
        let collector = arguments.contains("json") ? child.stderr : child.stdout
        let first = try #require(collector.firstLine(within: .seconds(30)), "relay: \(child.stdout.text)\(child.stderr.text)")
        try #require(first.hasPrefix("listening on "), "unexpected first line \(first)")
        return (child, String(first.dropFirst("listening on ".count).prefix { $0 != " " }))
    }

    /// Runs the python wire client against `url`; its transcript lines.
    func runClient(_ url: String, variant: String? = nil) throws -> (status: Int32?, transcript: [JSONValue], stderr: String) {
        let python = try #require(interopPython)
        var args = [client, url, "--device-id", device, "--timeout", "5"]
        if let variant { args += ["--variant", variant] }
        let c = try Child(python, args)
        defer { c.kill() }
        let status = c.waitForExit(within: .seconds(60))
        return (status, try c.stdout.text.split(separator: "\n").map { try JSONValue(parsing: String($0)) }, c.stderr.text)
    }

    /// A recording of the python client through `relay --record` (raw: its tokens as they were, so a
    /// replay can be compared byte for byte with the first run).
    func recordPythonClient(raw: Bool) throws -> (path: String, transcript: [JSONValue]) {
        let path = tempPath("rtrace")
        let (r, url) = try relay(["--record", path, "--for", "60s"] + (raw ? ["--raw"] : []))
        defer { r.kill() }
        let run = try runClient(url)
        try #require(run.status == 0, "wire_client: \(run.stderr)")
        #expect(r.terminate(within: .seconds(15)) == 0)
        return (path, run.transcript)
    }

    /// The transcript with what differs by nature between two runs taken out: the client's request IDs
    /// and trace context (in its requests, and the trace IDs the answers echo).
    func normalised(_ t: [JSONValue]) -> [String] {
        t.map { line in
            let prefix = "\(line["socket"]?.intValue ?? 0) \(line["dir"]?.stringValue ?? "") "
            guard let text = line["text"]?.stringValue, var j = try? JSONValue(parsing: text) else { return prefix + line.jsonText }
            if case .object(var o) = j, case .object(var p)? = o["payload"] {
                if p["id"] != nil { p["id"] = "<id>" }
                // The client's traceparent is its own (random trace and span); an answer echoes its trace ID.
                if let tp = p["traceparent"]?.stringValue {
                    p["traceparent"] = .string(line["dir"] == "out" ? "<traceparent>" : String(tp.prefix(3)) + "<trace>" + String(tp.dropFirst(35)))
                }
                o["payload"] = .object(p)
                j = .object(o)
            }
            return prefix + j.jsonText
        }
    }

    @Test("a python client replayed against its own recording gets every answer again, its own IDs in them; exit 0",
          .timeLimit(.minutes(5)), arguments: [true, false])
    func faithfulReplay(raw: Bool) throws {
        let (recording, first) = try recordPythonClient(raw: raw)
        let replayed = tempPath("rtrace")
        defer {
            unlink(recording)
            unlink(replayed)
        }
        let (r, url) = try relay(["--replay", recording, "--record", replayed, "--format", "json", "--for", "60s"])
        defer { r.kill() }
        let second = try runClient(url)
        #expect(second.status == 0, "wire_client: \(second.stderr)")
        let status = r.waitForExit(within: .seconds(30))
        #expect(status == 0, "relay --replay: \(r.stdout.text)\(r.stderr.text)")
        let result = try JSONValue(parsing: r.stdout.text)
        #expect(result["result"] == "matched" && result["finished"] == true && result["findings"]?.arrayValue?.isEmpty == true)
        #expect(result["sockets"]?["served"] == 3 && result["sockets"]?["recorded"] == 3)
        if raw {
            // The same conversation, but for the client's own IDs: what it sent in the same order; what it
            // received the same messages per socket. (An event the relay sent on its own may land on
            // either side of a heartbeat's pong: that order was a race in the recording too.)
            let a = normalised(first), b = normalised(second.transcript)
            let out = { (t: [String]) in t.filter { $0.contains(" out ") } }
            let inbound = { (t: [String]) in t.filter { !$0.contains(" out ") }.sorted() }
            #expect(out(a) == out(b), "the client's frames differ:\n\(out(a))\n\(out(b))")
            #expect(inbound(a) == inbound(b), "the answers differ:\n\(inbound(a))\n\(inbound(b))")
        } else {
            // Redacted tokens come back as stand-ins: the same shape, and the resume on socket 2 still matched.
            #expect(normalised(second.transcript).count == normalised(first).count)
        }
        // Every answer carries the second run's own request id.
        let requests = second.transcript.compactMap { l -> String? in
            guard l["dir"] == "out", let t = l["text"]?.stringValue, let j = try? JSONValue(parsing: t), j["type"] == "rpc.request" else { return nil }
            return j["payload"]?["id"]?.stringValue
        }
        let answers = second.transcript.compactMap { l -> String? in
            guard l["dir"] == "in", let t = l["text"]?.stringValue, let j = try? JSONValue(parsing: t), j["type"] == "rpc.response" else { return nil }
            return j["payload"]?["id"]?.stringValue
        }
        #expect(requests.count == 3 && answers == requests)
        // The replayed session was recorded too: a complete wire trace with the same sockets.
        #expect(try relaytrace(["verify", replayed]).status == 0)
        let info = try JSONValue(parsing: try relaytrace(["info", replayed, "--format", "json"]).stdout)
        #expect(info["wire"]?["replayOf"]?.stringValue == recording && info["sockets"]?.arrayValue?.count == 3)
    }

    @Test("a changed client (another method, a stale resume token) makes the replay exit 1 naming the record",
          .timeLimit(.minutes(5)), arguments: ["different-method", "stale-token"])
    func changedClient(variant: String) throws {
        let (recording, _) = try recordPythonClient(raw: true)
        defer { unlink(recording) }
        let (r, url) = try relay(["--replay", recording, "--format", "json", "--for", "60s"])
        defer { r.kill() }
        _ = try runClient(url, variant: variant)
        #expect(r.waitForExit(within: .seconds(30)) == 1, "\(r.stdout.text)\(r.stderr.text)")
        let result = try JSONValue(parsing: r.stdout.text)
        #expect(result["result"] == "diverged")
        let findings = result["findings"]?.arrayValue ?? []
        let records = try readAllRecords(recording)
        let first = try #require(findings.first)
        let record = try #require(first["record"]?.intValue.map { Int($0) })
        let named = try JSONValue(parsing: records[record].payload)
        if variant == "different-method" {
            // The client called session.get where it had called session.list: the report names that record.
            #expect(first["kind"] == "unexpected" && first["generation"] == 1)
            #expect(named["payload"]?["method"] == "session.list")
        } else {
            // The resume on socket 2 presents another token than the one the relay gave.
            #expect(first["kind"] == "mismatch" && first["generation"] == 2 && named["type"] == "register")
            #expect(first["differences"]?.arrayValue?.contains { $0.stringValue?.hasPrefix("$.payload.resumeToken") == true } == true)
        }
        // The text form says the same.
        // Strict: the socket ends at the divergence; the python script then gives up, so the replay ends at --for.
        let (t, turl) = try relay(["--replay", recording, "--strict", "--for", "8s"])
        defer { t.kill() }
        _ = try runClient(turl, variant: variant)
        #expect(t.waitForExit(within: .seconds(30)) == 1)
        #expect(t.stdout.text.contains("record #\(record)"), "\(t.stdout.text)")
    }

    /// The project's own live client runs the tour against the development relay (recorded), then against
    /// the replay of that recording: the replay matches every frame, and the second capture replays
    /// strictly as any capture does.
    @Test("capture --url against relay --replay of a recorded tour: no divergence", .timeLimit(.minutes(5)))
    func ownClientReplaysATour() throws {
        let recording = tempPath("rtrace"), capture1 = tempPath("rtrace"), capture2 = tempPath("rtrace")
        defer { for p in [recording, capture1, capture2] { unlink(p) } }
        let jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyLWRldiJ9.dev"
        let (dev, devURL) = try relay(["--record", recording, "--for", "60s"])
        defer { dev.kill() }
        let c1 = try relaytrace(["capture", "--url", devURL, "--plain", "--jwt", jwt, "--scenario", "tour", "--duration", "8s", "-o", capture1])
        #expect(c1.status == 0, "\(c1.stderr)")
        #expect(dev.terminate(within: .seconds(15)) == 0)
        let (rep, repURL) = try relay(["--replay", recording, "--format", "json", "--for", "60s"])
        defer { rep.kill() }
        let c2 = try relaytrace(["capture", "--url", repURL, "--plain", "--jwt", jwt, "--scenario", "tour", "--duration", "8s", "-o", capture2])
        #expect(c2.status == 0, "\(c2.stderr)")
        #expect(rep.waitForExit(within: .seconds(30)) == 0, "\(rep.stdout.text)\(rep.stderr.text)")
        let result = try JSONValue(parsing: rep.stdout.text)
        #expect(result["result"] == "matched" && (result["matchedFrames"]?.intValue ?? 0) >= 5 && (result["servedFrames"]?.intValue ?? 0) >= 5)
        let strict = try relaytrace(["replay", capture2])
        #expect(strict.status == 0, "\(strict.stdout)\(strict.stderr)")
    }

    /// docs/examples/replay_fixture.py, the documented pattern for python test suites, runs as it says.
    @Test("the python example in docs replays a recording to a client and passes its exit code on", .timeLimit(.minutes(5)))
    func pythonExample() throws {
        let python = try #require(interopPython)
        let (recording, _) = try recordPythonClient(raw: false)
        defer { unlink(recording) }
        let example = packageRoot.appendingPathComponent("docs/examples/replay_fixture.py").path
        for (variant, expected) in [(nil, Int32(0)), ("different-method", 1)] as [(String?, Int32)] {
            var args = [example, recording, "--", python, client, "{url}", "--device-id", device, "--timeout", "5"]
            if let variant { args += ["--variant", variant] }
            let c = try Child(python, args, environment: ["RELAYTRACE": binary])
            defer { c.kill() }
            let status = c.waitForExit(within: .seconds(90))
            #expect(status == expected, "\(c.stdout.text)\(c.stderr.text)")
            #expect(c.stdout.text.contains(expected == 0 ? "\nmatched: 0 finding(s)" : "\ndiverged: "), "\(c.stdout.text)")
        }
    }

    @Test("usage: replay options need --replay, and development-relay options do not go with it",
          arguments: [(["--strict"], "--strict goes with --replay"), (["--speed", "2"], "--speed goes with --replay"),
                      (["--replay", "x.rtrace", "--faults", "f"], "--faults is for the development relay"),
                      (["--replay", "x.rtrace", "--speed", "0"], "--speed '0' is not a positive number")])
    func usage(args: [String], message: String) throws {
        let r = try relaytrace(["relay", "--listen", "127.0.0.1:0"] + args)
        #expect(r.status == 64 && r.stderr.contains(message), "\(r.stderr)")
    }

    @Test("a missing recording is 66, a machine trace without relay sockets is 65")
    func badInputs() throws {
        #expect(try relaytrace(["relay", "--replay", "/nonexistent.rtrace"]).status == 66)
        let watch = tempPath("rtrace")
        defer { unlink(watch) }
        #expect(try relaytrace(["simulate", "--scenario", "watch-offline", "-o", watch]).status == 0)
        let r = try relaytrace(["relay", "--replay", watch])
        #expect(r.status == 65 && r.stderr.contains("no relay socket"), "\(r.stderr)")
    }
}
