import Foundation
import Testing

/// The layers of docs/ARCHITECTURE.md ("Layers"), bottom first: a target lives in `Sources/LAYER/NAME`
/// and depends only on targets of lower layers, or, in a layer with an inner order, on targets listed
/// before it there, or, in a layer with a foundation, on that foundation only. Read from Package.swift's text (running `swift package` inside `swift test` would
/// wait for the build directory's lock).
@Suite struct PackageLayoutTests {
    /// Layer name, and for the layers whose targets build on each other, that order (else empty: no
    /// target of the layer may depend on another of it, except on the layer's foundation).
    static let layers: [(name: String, order: [String])] = [
        ("System", []),
        ("Core", ["Sync", "RelayProtocol", "RelayClient", "WatchLink", "Trace", "DevRelay", "OfflineQueue", "LinkQR"]),
        ("Transport", ["WebSocket", "Net", "WatchNet"]),
        ("Recording", []),
        ("Analysis", ["Inspect", "SpecCheck"]),
        ("Replaying", []),  // foundation: ReplayCore
        ("Drivers", []),
        ("Testing", []),
        ("Apps", ["Viewer", "RelayTraceCLI", "relaytrace", "FuzzTargets", "relaytrace-fuzz", "relaytrace-bench", "relaytrace-wirebench", "relaytrace-test-fixture", "offlinequeue-test-fixture"]),
    ]

    /// The layers whose targets are peers on one shared target: each may depend on it, on nothing else
    /// of the layer.
    static let foundations: [String: String] = ["Replaying": "ReplayCore"]

    struct Target {
        var name: String
        var layer: String
        var dependencies: [String]
    }

    /// Every non-test target of Package.swift with its declared path's layer and its dependencies.
    static func targets() throws -> [Target] {
        let text = try String(contentsOfFile: packageRoot.appendingPathComponent("Package.swift").path, encoding: .utf8)
        let declaration = try Regex(#"\.(?:target|executableTarget|systemLibrary)\(\s*name: "([^"]+)"(?:, dependencies: \[([^\]]*)\])?, path: "Sources/([^/"]+)/([^"]+)""#)
        var out: [Target] = []
        for m in text.matches(of: declaration) {
            let name = String(m.output[1].substring ?? "")
            let deps = (m.output[2].substring.map(String.init) ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }.filter { !$0.isEmpty }
            #expect(String(m.output[4].substring ?? "") == name, "target \(name) lives in a folder of another name")
            out.append(Target(name: name, layer: String(m.output[3].substring ?? ""), dependencies: deps))
        }
        return out
    }

    @Test func everyTargetLivesInALayerFolderAndTheFoldersHoldNothingElse() throws {
        let targets = try Self.targets()
        let sources = packageRoot.appendingPathComponent("Sources").path
        let folders = try FileManager.default.contentsOfDirectory(atPath: sources).sorted()
        #expect(folders == Self.layers.map(\.name).sorted())
        var onDisk: [String] = []
        for layer in folders {
            onDisk += try FileManager.default.contentsOfDirectory(atPath: sources + "/" + layer).map { layer + "/" + $0 }
        }
        #expect(onDisk.sorted() == targets.map { $0.layer + "/" + $0.name }.sorted())
        #expect(targets.count >= 39)
    }

    @Test func dependenciesGoDownTheLayersNeverSideways() throws {
        let targets = try Self.targets()
        let layerOf = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0.layer) })
        let rank = Dictionary(uniqueKeysWithValues: Self.layers.enumerated().map { ($1.name, $0) })
        var sideways: [String] = []
        for t in targets {
            let own = try #require(rank[t.layer], "\(t.name) is in an unknown layer \(t.layer)")
            for d in t.dependencies {
                let theirs = try #require(layerOf[d].flatMap { rank[$0] }, "\(t.name) depends on \(d), which is not a target here")
                if theirs < own { continue }
                let order = Self.layers[own].order
                if theirs == own, let i = order.firstIndex(of: d), let j = order.firstIndex(of: t.name), i < j { continue }
                if theirs == own, Self.foundations[t.layer] == d, d != t.name { continue }
                sideways.append("\(t.name) (\(t.layer)) -> \(d) (\(layerOf[d] ?? "?"))")
            }
        }
        #expect(sideways.isEmpty, "dependencies that do not go down: \(sideways)")
        // The foundation itself depends on lower layers only.
        for (layer, base) in Self.foundations {
            let t = try #require(targets.first { $0.name == base && $0.layer == layer }, "\(base) is not in \(layer)")
            let below = rank[layer] ?? 0
            #expect(t.dependencies.allSatisfy { (layerOf[$0].flatMap { rank[$0] } ?? .max) < below }, "\(base): \(t.dependencies)")
        }
        // Issue 19: the replay core builds on the trace format and the protocol only.
        #expect(Set(targets.first { $0.name == "ReplayCore" }?.dependencies ?? []) == ["Trace", "RelayProtocol"])
    }
}
