import Foundation
import Testing

/// The layers of docs/ARCHITECTURE.md ("Layers (folders of `Sources/`)"), read from that table, bottom
/// first: a target lives in `Sources/LAYER/NAME` and depends only on targets of lower layers, or, in a
/// layer whose table row says "those listed before it", on targets listed before it there, or, in a layer
/// with a foundation ("`X` only"), on that foundation only. The table and Package.swift must name the same
/// targets in the same folders, so the page cannot drift from the code. Package.swift is read as text
/// (running `swift package` inside `swift test` would wait for the build directory's lock).
@Suite struct PackageLayoutTests {
    /// What a target may depend on inside its own layer.
    enum Inner: Equatable {
        /// Nothing of its layer.
        case nothing
        /// The targets listed before it in the layer's row.
        case listedBefore
        /// This one target of the layer (whose own dependencies lie below the layer).
        case foundation(String)
    }

    /// One row of the layers table.
    struct Layer {
        var name: String
        var targets: [String]
        var inner: Inner
    }

    /// The text of the package's file at `path` (relative to the package root).
    static func packageText(_ path: String) throws -> String {
        try String(contentsOfFile: packageRoot.appendingPathComponent(path).path, encoding: .utf8)
    }

    /// The layers table of docs/ARCHITECTURE.md, bottom first.
    static func layers() throws -> [Layer] {
        let text = try Self.packageText("docs/ARCHITECTURE.md")
        let heading = "### Layers (folders of `Sources/`)"
        let start = try #require(text.range(of: heading), "docs/ARCHITECTURE.md has no section \(heading)")
        let section = text[start.upperBound...].split(separator: "\n#", maxSplits: 1).first ?? ""
        let names = try Regex(#"`([^`]+)`"#)
        var out: [Layer] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            try #require(cells.count == 5, "a layers row has three cells: \(line)")
            let layer = try #require(cells[1].firstMatch(of: names).map { String($0.output[1].substring ?? "") })
            let targets = cells[2].matches(of: names).map { String($0.output[1].substring ?? "") }
            let inner: Inner
            if cells[3].contains("listed before") {
                inner = .listedBefore
            } else if cells[3].contains(" only"), let base = cells[3].firstMatch(of: names) {
                inner = .foundation(String(base.output[1].substring ?? ""))
            } else {
                try #require(cells[3] == "nothing" || cells[3] == "—", "an unknown rule in the layers row of \(layer): \(cells[3])")
                inner = .nothing
            }
            out.append(Layer(name: layer, targets: targets, inner: inner))
        }
        try #require(out.count >= 9, "the layers table has \(out.count) rows")
        return out
    }

    struct Target {
        var name: String
        var layer: String
        var dependencies: [String]
    }

    /// Every non-test target of Package.swift with its declared path's layer and its dependencies.
    static func targets() throws -> [Target] {
        let text = try Self.packageText("Package.swift")
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
        let layers = try Self.layers()
        let sources = packageRoot.appendingPathComponent("Sources").path
        let folders = try FileManager.default.contentsOfDirectory(atPath: sources).sorted()
        #expect(folders == layers.map(\.name).sorted())
        var onDisk: [String] = []
        for layer in folders {
            onDisk += try FileManager.default.contentsOfDirectory(atPath: sources + "/" + layer).map { layer + "/" + $0 }
        }
        #expect(onDisk.sorted() == targets.map { $0.layer + "/" + $0.name }.sorted())
        #expect(targets.count >= 39)
        // docs/ARCHITECTURE.md names each target in the layer whose folder holds it, once.
        for layer in layers {
            #expect(Set(layer.targets).count == layer.targets.count, "\(layer.name) names a target twice")
            #expect(Set(layer.targets) == Set(targets.filter { $0.layer == layer.name }.map(\.name)),
                    "the layers table's row \(layer.name) is not what Sources/\(layer.name) holds")
        }
    }

    /// The rooms table of docs/ARCHITECTURE.md says what each target holds: every target has a row, and
    /// every name in its first column is a target.
    @Test func theRoomsTableNamesEveryTarget() throws {
        let text = try Self.packageText("docs/ARCHITECTURE.md")
        let start = try #require(text.range(of: "## Rooms (targets)"))
        let end = try #require(text.range(of: "### Layers", range: start.upperBound..<text.endIndex))
        let names = try Regex(#"`([^`]+)`"#)
        var rooms: Set<String> = []
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let first = line.split(separator: "|", omittingEmptySubsequences: false)[1]
            rooms.formUnion(first.matches(of: names).map { String($0.output[1].substring ?? "") })
        }
        let targets = Set(try Self.targets().map(\.name))
        #expect(targets.subtracting(rooms).isEmpty, "targets without a row in the rooms table: \(targets.subtracting(rooms).sorted())")
        #expect(rooms.subtracting(targets).isEmpty, "rooms that are no target: \(rooms.subtracting(targets).sorted())")
    }

    @Test func dependenciesGoDownTheLayersNeverSideways() throws {
        let targets = try Self.targets()
        let layers = try Self.layers()
        let layerOf = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0.layer) })
        let rank = Dictionary(uniqueKeysWithValues: layers.enumerated().map { ($1.name, $0) })
        var sideways: [String] = []
        for t in targets {
            let own = try #require(rank[t.layer], "\(t.name) is in an unknown layer \(t.layer)")
            for d in t.dependencies {
                let theirs = try #require(layerOf[d].flatMap { rank[$0] }, "\(t.name) depends on \(d), which is not a target here")
                if theirs < own { continue }
                let layer = layers[own]
                if theirs == own, layer.inner == .listedBefore, let i = layer.targets.firstIndex(of: d),
                   let j = layer.targets.firstIndex(of: t.name), i < j { continue }
                if theirs == own, layer.inner == .foundation(d), d != t.name { continue }
                sideways.append("\(t.name) (\(t.layer)) -> \(d) (\(layerOf[d] ?? "?"))")
            }
        }
        #expect(sideways.isEmpty, "dependencies that do not go down: \(sideways)")
        // A foundation itself depends on lower layers only.
        for (own, layer) in layers.enumerated() {
            guard case .foundation(let base) = layer.inner else { continue }
            let t = try #require(targets.first { $0.name == base && $0.layer == layer.name }, "\(base) is not in \(layer.name)")
            #expect(t.dependencies.allSatisfy { (layerOf[$0].flatMap { rank[$0] } ?? .max) < own }, "\(base): \(t.dependencies)")
        }
        // Issue 19: the replay core builds on the trace format and the protocol only.
        #expect(Set(targets.first { $0.name == "ReplayCore" }?.dependencies ?? []) == ["Trace", "RelayProtocol"])
        #expect(layers.first { $0.name == "Replaying" }?.inner == .foundation("ReplayCore"))
    }
}
