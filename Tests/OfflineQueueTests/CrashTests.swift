import Foundation
import OfflineQueue
import Testing

/// The directory holding the built products.
func fixtureURL() -> URL {
    let candidates = [Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL,
                      URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
    for c in candidates where FileManager.default.fileExists(atPath: c.appendingPathComponent("offlinequeue-test-fixture").path) {
        return c.appendingPathComponent("offlinequeue-test-fixture")
    }
    return candidates[0].appendingPathComponent("offlinequeue-test-fixture")
}

@Suite struct OfflineQueueCrashTests {
    /// Integration test: a child queues batches of 4 mutations (one transaction each) as fast as it can
    /// and is killed with SIGKILL after it reported 60 commits; the database must hold every batch it
    /// reported, whole, in order, and nothing partial. No sleeping: the parent waits for the child's
    /// own progress lines.
    @Test func aProcessKilledMidWriteLosesNothingCommittedAndNothingHalfWritten() throws {
        let path = tempDatabase("killed")
        defer { removeDatabase(path) }
        let child = Process()
        child.executableURL = fixtureURL()
        child.arguments = ["enqueue-until-killed", path]
        let out = Pipe()
        child.standardOutput = out
        try child.run()
        var text = ""
        var lastReported = -1
        while lastReported < 60 {
            let data = out.fileHandleForReading.availableData
            if data.isEmpty { break }   // the child died on its own
            text += String(decoding: data, as: UTF8.self)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            let complete = text.hasSuffix("\n") ? lines : lines.dropLast()
            if let last = complete.last, let n = Int(last.split(separator: " ").last ?? "") { lastReported = n }
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(lastReported >= 60)

        let store = try OfflineQueueStore(path: path)
        #expect(try store.integrityCheck() == "ok")
        let rows = try store.all()
        // Whole batches only (a transaction interrupted by the kill vanished entirely)...
        #expect(rows.count % 4 == 0)
        // ...every reported batch is there, in queue order, nothing else in between.
        let batches = rows.count / 4
        #expect(batches >= lastReported + 1)
        #expect(rows.map(\.mutation.idempotencyKey) == (0..<batches).flatMap { b in (0..<4).map { "m-\(b)-\($0)" } })
        #expect(zip(rows, rows.dropFirst()).allSatisfy { $0.id < $1.id })
        // And the store keeps working on the recovered file.
        try store.enqueue(mutation("after-the-crash"))
        #expect(try store.pending().last?.mutation.idempotencyKey == "after-the-crash")
    }
}
