import Foundation
import FuzzTargets
import Testing

/// The repository's seed corpora (`fuzz/corpus/TARGET`) and the inputs the fuzzer found
/// (`fuzz/regressions/TARGET`), each run through its target: every one returns (a crash fails the run).
@Suite struct FuzzCorpusTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz")

    static func inputs(_ kind: String, _ target: String) -> [URL] {
        let dir = root.appendingPathComponent(kind).appendingPathComponent(target)
        return ((try? FileManager.default.contentsOfDirectory(at: dir, includingPropertiesForKeys: nil)) ?? [])
            .filter { !$0.lastPathComponent.hasPrefix(".") }.sorted { $0.path < $1.path }
    }

    @Test func everyTargetHasSeeds() {
        for t in FuzzTargets.all {
            #expect(!Self.inputs("corpus", t.name).isEmpty, "fuzz/corpus/\(t.name) is empty")
        }
        let dirs = (try? FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("corpus").path)) ?? []
        #expect(Set(dirs.filter { !$0.hasPrefix(".") }) == Set(FuzzTargets.all.map(\.name)), "one seed directory per target")
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func seedsAndRegressionsRun(target name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        for url in Self.inputs("corpus", name) + Self.inputs("regressions", name) {
            target.run([UInt8](try Data(contentsOf: url)))
        }
    }
}
