import Foundation
import RelayProtocol
import Testing
import Trace

/// The directory holding the built products (the test bundle's directory).
func productsDirectory() -> URL {
    let candidates = [Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                      URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
    for c in candidates where FileManager.default.fileExists(atPath: c.appendingPathComponent("relaytrace-test-fixture").path) {
        return c
    }
    return candidates[0]
}

func monotonicNow() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

@Suite struct CrashTests {
    /// Integration test: a child writes records continuously with real time stamps and is killed with
    /// SIGKILL; everything it appended more than one second before the kill must be readable.
    /// It necessarily waits real time (about 2 s) for the child to run: the property is about what a real
    /// process leaves on disk when it dies, which a virtual clock cannot show.
    @Test func sigkilledWriterLosesAtMostTheLastSecond() throws {
        let path = tempPath("killed.rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let child = Process()
        child.executableURL = productsDirectory().appendingPathComponent("relaytrace-test-fixture")
        child.arguments = ["write-until-killed", path]
        let out = Pipe()
        child.standardOutput = out
        try child.run()
        // Wait for "ready" (the writer exists and records flow), then let it run ~2 s.
        let ready = out.fileHandleForReading.readData(ofLength: 6)
        #expect(String(decoding: ready, as: UTF8.self) == "ready\n")
        Thread.sleep(forTimeInterval: 2.0)
        let killedAt = monotonicNow()
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)

        let reader = try TraceReader(path: path)
        #expect(!reader.isComplete)
        let (entries, error) = reader.readAll()
        // A kill in the middle of a write(2) could leave a partial chunk: then a truncation error ends
        // the records, never anything else.
        if let error { #expect(error.code == .truncated) }
        // The records are the child's sequence 0..<n without a gap...
        let seqs = entries.compactMap { (try? JSONValue(parsing: $0.record.payload))?["seq"]?.intValue }
        #expect(seqs == Array(0..<Int64(entries.count)))
        #expect(entries.count > 1000)
        // ...and reach within one second of the kill: every record older than that is there.
        let last = try #require(entries.last).record.time.nanoseconds
        #expect(last >= killedAt - 1_000_000_000, "last record \(Double(killedAt - last) / 1e9) s before the kill")
    }
}
