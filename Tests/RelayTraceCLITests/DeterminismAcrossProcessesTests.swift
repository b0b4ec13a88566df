import Foundation
import Testing

/// House rule 1 across processes: `relaytrace simulate` writes the same bytes for the same scenario and
/// seed in processes with different hash seeds. One process compares runs under one hash seed, so an
/// iteration over a `Set` or `Dictionary` that leaks into the output passes there; here each run is a
/// child process, one with `SWIFT_DETERMINISTIC_HASHING=1` (the fixed seed) and two with it unset (the
/// runtime draws a fresh random seed per process).
@Suite struct DeterminismAcrossProcessesTests {
    /// Runs `relaytrace simulate` in a child process with `SWIFT_DETERMINISTIC_HASHING` set to `hashing`
    /// (nil: unset) and returns the trace's bytes.
    private func simulate(_ scenario: String, seed: Int, hashing: String?) throws -> [UInt8] {
        let path = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_DETERMINISTIC_HASHING"] = hashing
        let p = Process()
        p.executableURL = productsDirectory().appendingPathComponent("relaytrace")
        p.arguments = ["simulate", "--scenario", scenario, "--seed", String(seed), "--duration", "2m", "-o", path]
        p.environment = environment
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0, "relaytrace simulate --scenario \(scenario) exited \(p.terminationStatus)")
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test(arguments: ["tour", "handover", "handshake-timeout", "watch-offline"])
    func simulateWritesTheSameBytesUnderDifferentHashSeeds(scenario: String) throws {
        let fixed = try simulate(scenario, seed: 42, hashing: "1")
        let random1 = try simulate(scenario, seed: 42, hashing: nil)
        let random2 = try simulate(scenario, seed: 42, hashing: nil)
        #expect(fixed.count > 1000, "a trace with records in it")
        #expect(random1 == fixed, "a random hash seed changed the trace of \(scenario)")
        #expect(random2 == fixed, "a random hash seed changed the trace of \(scenario)")
    }

    /// The comparison can see a difference: another seed writes other bytes.
    @Test func anotherSeedWritesOtherBytes() throws {
        #expect(try simulate("tour", seed: 42, hashing: "1") != simulate("tour", seed: 43, hashing: "1"))
    }
}
