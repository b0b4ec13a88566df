import Foundation
import Testing

/// `relaytrace replay FILE --perturb`, run as a user would.
@Suite struct PerturbCommandTests {
    @Test(arguments: ["watch-restart", "lease"])
    func everySeedHoldsOnBothChannelsAndExitsZero(scenario: String) throws {
        let trace = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: trace) }
        #expect(try relaytrace(["simulate", "--scenario", scenario, "--seed", "2", "-o", trace]).status == 0)
        let r = try relaytrace(["replay", trace, "--perturb", "1..40"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("channel \(scenario.hasPrefix("watch") ? "watch" : "relay")"))
        #expect(r.stdout.contains("40 seed(s) run, 0 broke an invariant"))
    }

    @Test func usageErrors() throws {
        let trace = tempPath("rtrace")
        defer { try? FileManager.default.removeItem(atPath: trace) }
        #expect(try relaytrace(["simulate", "--scenario", "lease", "--seed", "2", "-o", trace]).status == 0)
        for args in [["--perturb", "9..3"], ["--perturb", "x"], ["--shrink", "/tmp/out"], ["--perturb", "1", "--what-if"]] {
            let r = try relaytrace(["replay", trace] + args)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("Error:"))
        }
    }
}
