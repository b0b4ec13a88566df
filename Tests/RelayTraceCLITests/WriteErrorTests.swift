import Foundation
import Testing

/// Runs the built `relaytrace` with stdout going to `stdoutPath` (e.g. /dev/full); returns the status and stderr.
func relaytrace(_ args: [String], stdoutTo stdoutPath: String) throws -> (status: Int32, stderr: String) {
    let p = Process()
    p.executableURL = productsDirectory().appendingPathComponent("relaytrace")
    p.arguments = args
    let out = try #require(FileHandle(forWritingAtPath: stdoutPath))
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    try out.close()
    return (p.terminationStatus, String(decoding: e, as: UTF8.self))
}

/// Runs `sh -c script` with `args` as $1...; returns status, stdout and stderr.
func shell(_ script: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProcess("/bin/sh", ["-c", script, "sh"] + args)
}

/// Write errors are errors (CLI.md, "Exit codes"): every command's stdout is checked, a failed write exits
/// 74 with a message, a closed pipe ends quietly with 0, and a full disk leaves no file behind.
@Suite struct WriteErrorTests {
    static let golden = GoldenTraceCommandTests.root + "/Traces/handover.rtrace"

    static let commands: [[String]] = [
        ["frames", golden, "--format", "jsonl"], ["frames", golden, "--format", "table"], ["export", golden, "--format", "jsonl", "-o", "-"],
        ["export", golden, "--format", "har", "-o", "-"], ["stats", golden], ["stats", golden, "--format", "json"], ["info", golden],
        ["lint", golden], ["timeline", golden], ["replay", golden], ["replay", golden, "--format", "json"], ["show", golden, "0"],
        ["verify", golden], ["diff", golden, golden], ["check", golden], ["check", golden, "--format", "json"],
        ["--version"], ["help"], ["frames", "--help"],
    ]

    @Test(arguments: commands)
    func stdoutOnAFullDeviceExits74WithAMessage(args: [String]) throws {
        let r = try relaytrace(args, stdoutTo: "/dev/full")
        #expect(r.status == 74, "relaytrace \(args.joined(separator: " ")) > /dev/full: \(r.stderr)")
        #expect(r.stderr.contains("Error: writing standard output failed: No space left on device"), "\(r.stderr)")
    }

    @Test func theSameCommandsSucceedOnAWorkingStdout() throws {
        for args in Self.commands {
            let r = try relaytrace(args, stdoutTo: "/dev/null")
            #expect(r.status == 0, "relaytrace \(args.joined(separator: " ")): \(r.stderr)")
        }
    }

    /// The relay's log lines go through its own writer (from many threads); a failed write there is a
    /// failure too, and the recording is still closed whole.
    @Test func aRelayLoggingToAFullDeviceExits74AndKeepsItsRecording() throws {
        let recording = FileManager.default.temporaryDirectory.appendingPathComponent("rt-relay-full-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let r = try relaytrace(["relay", "--listen", "127.0.0.1:0", "--for", "0.2s", "--record", recording], stdoutTo: "/dev/full")
        #expect(r.status == 74, "\(r.stderr)")
        #expect(r.stderr.contains("Error: writing standard output failed: No space left on device"), "\(r.stderr)")
        #expect(r.stderr.contains("wrote \(recording): 0 sockets"), "\(r.stderr)")
        #expect(try relaytrace(["verify", recording]).status == 0)
        let ok = try relaytrace(["relay", "--listen", "127.0.0.1:0", "--for", "0.2s"], stdoutTo: "/dev/null")
        #expect(ok.status == 0, "\(ok.stderr)")
    }

    @Test func aFullStderrIsAnErrorToo() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("rt-stderr-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        // `export -o FILE` reports on stderr; with stderr full there is nowhere to say it, but the status says it.
        let r = try shell("\"$1\" export \"$2\" --format jsonl -o \"$3\" 2>/dev/full", [productsDirectory().appendingPathComponent("relaytrace").path, Self.golden, out])
        #expect(r.status == 74)
    }

    @Test func aClosedPipeEndsQuietlyWithZero() throws {
        let trace = try writeSampleTrace(extraRecords: 20_000)  // ~2 MB of jsonl: far more than a pipe buffer
        defer { try? FileManager.default.removeItem(atPath: trace) }
        let bin = productsDirectory().appendingPathComponent("relaytrace").path
        for format in ["jsonl", "table", "json", "raw"] {
            // `head -n 1` reads one line and closes the pipe; PIPESTATUS is bash's, so the status is saved by hand.
            let r = try shell("{ \"$1\" frames \"$2\" --format \"$3\" 2>\"$4\"; echo $? > \"$4.status\"; } | head -n 1 > /dev/null; cat \"$4.status\"; cat \"$4\"",
                              [bin, trace, format, trace + ".err"])
            let lines = r.stdout.split(separator: "\n")
            #expect(lines.first == "0", "frames --format \(format) | head: status \(lines.first ?? "?")")
            #expect(lines.count == 1, "frames --format \(format) | head printed on stderr: \(lines.dropFirst().joined(separator: "\n"))")
        }
        try? FileManager.default.removeItem(atPath: trace + ".err")
        try? FileManager.default.removeItem(atPath: trace + ".err.status")
    }

    @Test func anOutputFileOnAFullDeviceExits74AndTheDeviceStays() throws {
        let r = try relaytrace(["export", Self.golden, "--format", "pcapng", "-o", "/dev/full"])
        #expect(r.status == 74)
        #expect(r.stderr.contains("Error: writing /dev/full failed: No space left on device"), "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: "/dev/full"))
        let html = try relaytrace(["timeline", Self.golden, "--html", "/dev/full"])
        #expect(html.status == 74)
        #expect(html.stderr.contains("Error: writing /dev/full failed"))
    }

    /// A file-size limit (`ulimit -f`, in KiB) stands in for a full disk without mounting anything: writes
    /// past it fail with EFBIG. 0: the header cannot be written; 4: the header fits, the first chunk not.
    /// Not under tools/sanitize.sh: the sanitizers' runtimes fault (SIGBUS) in a process with a file-size
    /// limit, before the command runs.
    @Test(.disabled(if: ProcessInfo.processInfo.environment["RELAYTRACE_SANITIZER"] != nil, "a sanitizer's runtime faults under a file-size limit"),
          arguments: [0, 4])
    func aSimulationThatCannotWriteItsTraceExits74AndLeavesNoFile(limitKiB: Int) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rt-fsize-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bin = productsDirectory().appendingPathComponent("relaytrace").path
        for scenario in ["tour", "watch-offline"] {
            let out = "\(dir)/\(scenario).rtrace"
            let r = try shell("ulimit -f \(limitKiB) && exec \"$1\" simulate --scenario \"$2\" -o \"$3\"", [bin, scenario, out])
            #expect(r.status == 74, "simulate \(scenario) under ulimit -f \(limitKiB): \(r.stderr)")
            #expect(r.stderr.contains("File too large"), "\(r.stderr)")
            #expect(r.stderr.contains("no file was left at \(out)"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "simulate left \(out) behind")
        }
        let again = try relaytrace(["simulate", "--scenario", "tour", "-o", "\(dir)/tour.rtrace"])
        #expect(again.status == 0, "the next try needs no --force: \(again.stderr)")
    }

    static let canMountTmpfs: Bool = {
        (try? shell("command -v unshare >/dev/null && unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs \"$1\"' sh /tmp", []))?.status == 0
    }()

    /// The real thing: a 4 KiB tmpfs in a private mount namespace (`unshare -rm`: no root needed where
    /// user namespaces are allowed). Empty, the header fits and the first chunk does not; filled, not
    /// even the header fits. Either way: 74, a message, and only the filler file left.
    @Test(.enabled(if: canMountTmpfs, "needs unshare -rm and tmpfs mounts in a user namespace"))
    func aFullTmpfsGives74EverywhereAndLeavesNoFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rt-tmpfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bin = productsDirectory().appendingPathComponent("relaytrace").path
        let script = """
            mount -t tmpfs -o size=4k tmpfs "$1" || exit 99
            B="$2"; D="$1"; G="$3"
            s1=$("$B" simulate --scenario tour -o "$D/empty.rtrace" 2>&1 >/dev/null; echo "status $?")
            head -c 4096 /dev/zero > "$D/fill" 2>/dev/null
            s2=$("$B" simulate --scenario tour -o "$D/full.rtrace" 2>&1 >/dev/null; echo "status $?")
            s3=$("$B" capture --plain --duration 1s -o "$D/capture.rtrace" 2>&1 >/dev/null; echo "status $?")
            s4=$("$B" export "$G" --format jsonl -o "$D/x.jsonl" 2>&1 >/dev/null; echo "status $?")
            s5=$("$B" redact "$G" "$D/r.rtrace" 2>&1 >/dev/null; echo "status $?")
            s6=$("$B" frames "$G" 2>&1 > "$D/frames.jsonl"; echo "status $?")
            printf '%s\\n---\\n%s\\n---\\n%s\\n---\\n%s\\n---\\n%s\\n---\\n%s\\n---\\n' "$s1" "$s2" "$s3" "$s4" "$s5" "$s6"
            ls -A "$D"
            """
        let r = try runProcess("/usr/bin/unshare", ["-rm", "sh", "-c", script, "sh", dir, bin, Self.golden])
        #expect(r.status == 0, "\(r.stderr)")
        let parts = r.stdout.components(separatedBy: "\n---\n")
        #expect(parts.count == 7, "\(r.stdout)")
        guard parts.count == 7 else { return }
        for (i, what) in ["simulate onto an empty 4 KiB tmpfs", "simulate onto a full tmpfs", "capture onto a full tmpfs", "export onto a full tmpfs", "redact onto a full tmpfs", "frames > a file on a full tmpfs"].enumerated() {
            #expect(parts[i].hasSuffix("status 74"), "\(what): \(parts[i])")
            #expect(parts[i].contains("No space left on device"), "\(what) names the reason: \(parts[i])")
        }
        // frames.jsonl was made by the shell's redirection, not by relaytrace: it stays (empty).
        #expect(parts[6].split(separator: "\n").sorted() == ["fill", "frames.jsonl"], "left behind: \(parts[6])")
    }
}
