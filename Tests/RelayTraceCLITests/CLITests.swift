import Dispatch
import Foundation
import RelayProtocol
import Synchronization
import Testing
import Trace
import Sync

/// Runs the built `relaytrace` binary (next to the test bundle) with `args`.
func relaytrace(_ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProcess(productsDirectory().appendingPathComponent("relaytrace").path, args)
}

func productsDirectory() -> URL {
    let candidates = [Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                      URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
    for c in candidates where FileManager.default.fileExists(atPath: c.appendingPathComponent("relaytrace").path) {
        return c
    }
    return candidates[0]
}

final class DataBox: Sendable {
    let data = Locked<Data>(Data())
}

func runProcess(_ path: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let box = DataBox()
    let done = DispatchSemaphore(value: 0)
    let errHandle = err.fileHandleForReading
    Thread {
        let d = errHandle.readDataToEndOfFile()
        box.data.withLock { $0 = d }
        done.signal()
    }.start()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    done.wait()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: box.data.withLock { $0 }, as: UTF8.self))
}

/// A trace with frames of every shape; returns its path (the caller removes it).
func writeSampleTrace(close: Bool = true, extraRecords: Int = 0) throws -> String {
    let dir = FileManager.default.temporaryDirectory.path
    let path = "\(dir)/relaytrace-cli-\(getpid())-\(UUID().uuidString).rtrace"
    var o = TraceWriterOptions()
    o.flushInterval = .seconds(1)
    let header = TraceHeader(seed: 1234, wallClockStart: "2026-01-02T03:04:05Z", simulated: true, client: ["deviceName": "Phone"])
    let w = try TraceWriter(path: path, header: header, options: o)
    w.append(TraceRecord(kind: .transportOpen, time: .seconds(0.01), generation: 1,
                         payload: Array(#"{"url":"wss://relay.example/ws/device-link","headers":{"Authorization":"Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln"}}"#.utf8)))
    w.append(TraceRecord(kind: .transportOpened, time: .seconds(0.2), generation: 1))
    w.append(.frame(.text(#"{"type":"register","payload":{"deviceId":"d-1","deviceName":"Phone","resumeToken":"tok123"}}"#), time: .seconds(0.3), generation: 1, direction: .outbound))
    w.append(.frame(.text(#"{"type":"registered","sessionId":"S1","resumeToken":"tok123","expiresAt":"2026-01-03T00:00:00Z"}"#), time: .seconds(0.5), generation: 1, direction: .inbound))
    w.append(.frame(.text(#"{"type":"rpc.request","payload":{"id":"R1","method":"session.update","params":{"sessionId":"s"}}}"#), time: .seconds(1.25), generation: 1, direction: .outbound))
    w.append(.frame(.text(#"{"type":"event","payload":{"eventType":"device-status","payload":{"deviceId":"x","status":"online"}},"eventId":42}"#), time: .seconds(2.5), generation: 1, direction: .inbound))
    w.append(.frame(.binary(Array("PTC1".utf8) + [0, 2] + Array("t1hello".utf8)), time: .seconds(2.6), generation: 1, direction: .inbound))
    w.append(TraceRecord(kind: .transportClosed, time: .seconds(3), generation: 1, payload: Array(#"{"code":1001,"reason":"bye"}"#.utf8)))
    w.append(TraceRecord(kind: .marker, time: .seconds(3.1), payload: Array("user marker".utf8)))
    w.append(.frame(.text("not json"), time: .seconds(3.2), generation: 2, direction: .inbound))
    for i in 0..<extraRecords {
        w.append(.frame(.text(#"{"type":"heartbeat","payload":{"activeSessionId":"s-\#(i)"}}"#), time: .seconds(4 + Double(i) * 0.001), generation: 2, direction: .outbound))
    }
    if close { try w.close() } else { try leaveAsKilled(w, path) }
    return path
}

/// Leaves the trace at `path` as a killed recorder would: the header and the chunks flushed so far, no
/// index or trailer (the file is kept as it is now and the writer abandoned).
func leaveAsKilled(_ w: TraceWriter, _ path: String) throws {
    w.flush()
    let copy = path + ".crashed"
    try FileManager.default.copyItem(atPath: path, toPath: copy)
    try w.close()
    try FileManager.default.removeItem(atPath: path)
    try FileManager.default.moveItem(atPath: copy, toPath: path)
}

@Suite struct HelpAndUsageTests {
    @Test(arguments: [["--help"], ["-h"], ["help"]])
    func rootHelp(args: [String]) throws {
        let r = try relaytrace(args)
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty)
        for section in ["OVERVIEW:", "USAGE: relaytrace <subcommand>", "OPTIONS:", "SUBCOMMANDS:", "  info", "  verify", "  frames", "--version"] {
            #expect(r.stdout.contains(section), "missing \(section)")
        }
    }

    @Test(arguments: [["info", "--help"], ["help", "info"], ["info", "x", "-h"]])
    func subcommandHelp(args: [String]) throws {
        let r = try relaytrace(args)
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("OVERVIEW: "))
        #expect(r.stdout.contains("USAGE: relaytrace info <file> [--format <format>]"))
        #expect(r.stdout.contains("ARGUMENTS:\n  <file>"))
        #expect(r.stdout.contains("--format <format>"))
        #expect(r.stdout.contains("(default: text)"))
    }

    @Test func version() throws {
        let r = try relaytrace(["--version"])
        #expect(r.status == 0)
        #expect(r.stdout == TraceHeader.currentToolVersion + "\n")
    }

    @Test(arguments: [
        ([], "Missing expected subcommand"),
        (["bogus"], "Unknown subcommand 'bogus'"),
        (["--bogus"], "Unknown option '--bogus'"),
        (["info"], "Missing expected argument '<file>'"),
        (["info", "a", "b"], "Unexpected argument 'b'"),
        (["info", "a", "--format", "xml"], "The value 'xml' is invalid for '--format <format>'. Please provide one of 'text' and 'json'."),
        (["info", "a", "--format"], "Missing value for '--format <format>'"),
        (["verify", "a", "--nope"], "Unknown option '--nope'"),
        (["help", "nope"], "Unknown subcommand 'nope'"),
    ] as [([String], String)])
    func usageErrors(args: [String], message: String) throws {
        let r = try relaytrace(args)
        #expect(r.status == 64)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("Error: \(message)\n"), "\(r.stderr)")
        #expect(r.stderr.contains("\nUsage: relaytrace"))
        #expect(r.stderr.contains("See 'relaytrace"))
    }
}

@Suite struct TraceCommandTests {
    @Test(arguments: ["info", "verify", "frames"])
    func missingFileIs66(command: String) throws {
        let r = try relaytrace([command, "/nonexistent/trace.rtrace"])
        #expect(r.status == 66)
        #expect(r.stderr.contains("No such file or directory"))
        // A directory: not a trace for info and frames; verify takes its *.rtrace files, and it holds none.
        let dir = tempPath("d")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let d = try relaytrace([command, dir])
        #expect(d.status == 66)
        if command == "verify" { #expect(d.stderr == "Error: the directory \(dir) holds no .rtrace file\n") }
    }

    @Test func infoText() throws {
        let path = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let chunks = try #require(try TraceReader(path: path).index).count
        let r = try relaytrace(["info", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("format:      version 1, complete"))
        #expect(r.stdout.contains("records:     10\n"))
        #expect(r.stdout.contains("seed:        1234"))
        #expect(r.stdout.contains("generations: 1, 2\n"))
        #expect(r.stdout.contains("chunks:      \(chunks)\n"))
        #expect(r.stdout.contains("duration 3.190s"))
        #expect(r.stdout.contains("redaction:   hmac-sha256"))
        #expect(r.stdout.contains("dropped:     0"))
    }

    @Test func infoJSON() throws {
        let path = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let chunks = try #require(try TraceReader(path: path).index).count
        let r = try relaytrace(["info", path, "--format=json"])
        #expect(r.status == 0)
        let j = try JSONValue(parsing: r.stdout)
        #expect(j["records"] == 10)
        #expect(j["complete"] == true)
        #expect(j["chunks"] == .int(Int64(chunks)))
        #expect(j["generations"] == [1, 2])
        #expect(j["seed"] == "1234")
        #expect(j["simulated"] == true)
        #expect(j["formatVersion"] == 1)
        #expect(j["clientProtocolVersion"] == "1.6")
        #expect(j["redaction"]?["policy"] == "hmac-sha256")
        #expect(j["redaction"]?["key"] == nil)  // info does not print the key
        #expect(j["kinds"]?["frameText"] == 5)
        #expect(j["duration"]?.doubleValue.map { abs($0 - 3.19) < 1e-9 } == true)
    }

    @Test func verifyCompleteIncompleteAndCorrupt() throws {
        let path = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let chunks = try #require(try TraceReader(path: path).index).count
        #expect(chunks >= 3)  // capture-time flushes at 1 s: [0.01, 0.5], [1.25], [2.5, 3.2]
        let ok = try relaytrace(["verify", path])
        #expect(ok.status == 0)
        #expect(ok.stdout.hasPrefix("OK: 10 records in \(chunks) chunks"))

        let crashed = try writeSampleTrace(close: false)
        defer { try? FileManager.default.removeItem(atPath: crashed) }
        let inc = try relaytrace(["verify", crashed])
        #expect(inc.status == 65)
        #expect(inc.stderr.contains("incomplete"))
        #expect(try relaytrace(["verify", crashed, "--allow-incomplete"]).status == 0)
        let info = try relaytrace(["info", crashed])
        #expect(info.status == 0)
        #expect(info.stdout.contains("INCOMPLETE"))

        // Damage the second chunk: verify names its offset, frames prints the good records then fails.
        let reader = try TraceReader(path: path)
        let chunk = try #require(reader.index?[1])
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[Int(chunk.frameOffset) + 5] ^= 0x10
        let bad = path + ".bad"
        try Data(bytes).write(to: URL(fileURLWithPath: bad))
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let v = try relaytrace(["verify", bad])
        #expect(v.status == 65)
        #expect(v.stderr.contains("byte offset \(chunk.offset)"))
        let f = try relaytrace(["frames", bad])
        #expect(f.status == 65)
        #expect(f.stdout.split(separator: "\n").count == Int(chunk.firstRecord))
        #expect(f.stderr.contains("byte offset \(chunk.offset)"))
        #expect(try relaytrace(["info", bad]).status == 65)
        // --salvage reads past the damage.
        let s = try relaytrace(["frames", bad, "--salvage"])
        #expect(s.status == 0)
        #expect(s.stdout.split(separator: "\n").count == 10 - Int(chunk.recordCount))
        #expect(s.stderr.contains("skipped"))
        // Not a trace at all.
        let text = path + ".txt"
        try Data("hello".utf8).write(to: URL(fileURLWithPath: text))
        defer { try? FileManager.default.removeItem(atPath: text) }
        let n = try relaytrace(["info", text])
        #expect(n.status == 65)
        #expect(n.stderr.contains("notATrace"))
    }

    @Test func framesJSONL() throws {
        let path = try writeSampleTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try relaytrace(["frames", path, "--format", "jsonl"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == (try relaytrace(["frames", path])).stdout)  // jsonl is the default
        let lines = try r.stdout.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
        #expect(lines.count == 10)
        for (i, l) in lines.enumerated() {
            #expect(l["index"] == .int(Int64(i)))
            for k in ["t", "kind", "channel", "gen", "dir"] { #expect(l[k] != nil, "line \(i) lacks \(k)") }
        }
        #expect(lines[0]["kind"] == "transportOpen")
        #expect(lines[0]["gen"] == 1)
        #expect(lines[0]["dir"] == .null)
        // Redacted at write time: the JWT is gone, the Bearer prefix stays.
        #expect(lines[0]["json"]?["headers"]?["Authorization"]?.stringValue?.hasPrefix("Bearer rt:redacted:") == true)
        #expect(lines[2]["type"] == "register")
        #expect(lines[2]["dir"] == "out")
        #expect(lines[2]["t"]?.doubleValue == 0.3)
        #expect(lines[2]["json"]?["payload"]?["resumeToken"] == lines[3]["json"]?["resumeToken"])
        #expect(lines[4]["method"] == "session.update")
        #expect(lines[4]["id"] == "R1")
        #expect(lines[5]["eventType"] == "device-status")
        #expect(lines[5]["eventId"] == 42)
        #expect(lines[5]["dir"] == "in")
        #expect(lines[6]["kind"] == "frameBinary")
        #expect(lines[6]["bytes"] == 13)
        #expect(lines[6]["session"] == "t1")
        #expect(lines[7]["json"]?["code"] == 1001)
        #expect(lines[8]["text"] == "user marker")
        #expect(lines[9]["type"] == .null)
        #expect(lines[9]["text"] == "not json")
        #expect(lines[9]["gen"] == 2)

        let t = try relaytrace(["frames", path, "--format", "table"])
        #expect(t.status == 0)
        #expect(t.stdout.split(separator: "\n").count == 11)  // the header row and 10 records
        #expect(t.stdout.contains("PTC1 session=t1"))
    }

    @Test func framesIntoAClosedPipeExitsCleanly() throws {
        let path = try writeSampleTrace(extraRecords: 20_000)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bin = productsDirectory().appendingPathComponent("relaytrace").path
        let r = try runProcess("/bin/bash", ["-c", "set -o pipefail; '\(bin)' frames '\(path)' | head -2"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").count == 2)
        #expect(r.stderr.isEmpty)
    }
}
