import Foundation
import Testing

/// `relaytrace` with `RELAYTRACE_SCAN_WORKERS` set (0: the plain single-threaded reader).
func relaytrace(_ args: [String], workers: Int) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProcess("/usr/bin/env", ["RELAYTRACE_SCAN_WORKERS=\(workers)", productsDirectory().appendingPathComponent("relaytrace").path] + args)
}

/// Every command that reads a whole trace prints the same on the fast route (worker threads, skipping,
/// byte-level rejection) as on the plain reader: stdout, stderr and exit status.
@Suite struct ScanRouteCommandTests {
    static func commands(_ path: String) -> [[String]] {
        var out: [[String]] = [
            ["frames", path, "--format", "jsonl"], ["frames", path, "--format", "table", "--color", "never"],
            ["frames", path, "--format", "json", "--type", "rpc.request,rpc.response"], ["frames", path, "--format", "raw", "--dir", "in"],
            ["frames", path, "--type", "heartbeat"], ["frames", path, "--grep", "hello"], ["frames", path, "--grep", "session.list"],
            ["frames", path, "--method", "session.list,system.ping"], ["frames", path, "--event", "device-status"],
            ["frames", path, "--since", "3", "--until", "30"], ["frames", path, "--since", "2.05", "--type", "rpc.response"],
            ["frames", path, "--gen", "2", "--salvage"],
            ["stats", path, "--format", "json"], ["stats", path], ["stats", path, "--since", "10", "--until", "40"],
            ["timeline", path], ["timeline", path, "--since", "5"], ["lint", path],
        ]
        for format in ["jsonl", "chrome-trace", "har", "pcapng"] {
            out.append(["export", path, "--format", format, "-o", "-"])
        }
        out.append(["export", path, "--format", "jsonl", "-o", "-", "--until", "20"])
        return out
    }

    static func compare(_ path: String, _ label: String) throws {
        for args in commands(path) {
            let plain = try relaytrace(args, workers: 0)
            for workers in [1, 2] {
                let fast = try relaytrace(args, workers: workers)
                #expect(fast.status == plain.status, "\(label): \(args.dropFirst(2).joined(separator: " ")) (\(workers) workers): status \(fast.status), plain \(plain.status)")
                #expect(fast.stdout == plain.stdout, "\(label): \(args.dropFirst(2).joined(separator: " ")) (\(workers) workers): stdout differs")
                #expect(fast.stderr == plain.stderr, "\(label): \(args.dropFirst(2).joined(separator: " ")) (\(workers) workers): \(fast.stderr) / \(plain.stderr)")
            }
        }
    }

    @Test func aRealisticTraceDamagedOrNotPrintsTheSameOnBothRoutes() throws {
        let path = try writeRelayTrace()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.compare(path, "relay trace")
        // Damaged in its middle (a flipped byte in the second chunk's frame), and cut short.
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        bytes[bytes.count / 2] ^= 0x20
        let damaged = path + ".damaged"
        defer { try? FileManager.default.removeItem(atPath: damaged) }
        try #require(FileManager.default.createFile(atPath: damaged, contents: Data(bytes)))
        try Self.compare(damaged, "damaged relay trace")
        let cut = path + ".cut"
        defer { try? FileManager.default.removeItem(atPath: cut) }
        try #require(FileManager.default.createFile(atPath: cut, contents: Data(bytes.prefix(bytes.count * 2 / 3))))
        try Self.compare(cut, "cut relay trace")
    }

    @Test(arguments: ["tour.rtrace", "lease.rtrace", "capture-tour-wss.rtrace"])
    func goldenTracesPrintTheSameOnBothRoutes(name: String) throws {
        try Self.compare(GoldenTraceCommandTests.root + "/Traces/" + name, name)
    }
}
