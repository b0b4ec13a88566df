import Foundation
import RelayProtocol
import Testing

/// The catalogue lines of a TSV file: (name, keyed, timeout seconds), header skipped.
private func readCatalogue(at url: URL) throws -> [(name: String, keyed: Bool, seconds: Int64)] {
    let text = try String(contentsOf: url, encoding: .utf8)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    let header = lines.removeFirst()
    #expect(header == "method\tneedsIdempotencyKey\ttimeoutSeconds")
    return try lines.map { line in
        let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        try #require(f.count == 3, "bad line \(line)")
        try #require(f[1] == "yes" || f[1] == "no", "bad keyed flag in \(line)")
        let seconds = try #require(Int64(f[2]), "bad timeout in \(line)")
        return (f[0], f[1] == "yes", seconds)
    }
}

private let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

private func compare(_ rows: [(name: String, keyed: Bool, seconds: Int64)], source: String) {
    #expect(rows.count == RpcCatalogue.all.count, "\(source): \(rows.count) lines, table has \(RpcCatalogue.all.count)")
    for (row, method) in zip(rows, RpcCatalogue.all) {
        #expect(row.name == method.name, "\(source): order differs at \(row.name)")
        #expect(row.keyed == method.needsIdempotencyKey, "\(source): keyed differs for \(row.name)")
        #expect(Duration.seconds(row.seconds) == method.timeout, "\(source): timeout differs for \(row.name)")
    }
    // And the other way round, by name.
    let byName = Dictionary(uniqueKeysWithValues: rows.map { ($0.name, $0) })
    for method in RpcCatalogue.all {
        let row = byName[method.name]
        #expect(row != nil, "\(source) lacks \(method.name)")
    }
}

@Suite struct RpcCatalogueTests {
    @Test func counts() {
        #expect(RpcCatalogue.all.count == 65)
        #expect(RpcCatalogue.methodCount == 65)
        #expect(RpcCatalogue.all.filter(\.needsIdempotencyKey).count == 22)
        #expect(RpcCatalogue.idempotencyKeyedCount == 22)
        #expect(Set(RpcCatalogue.all.map(\.name)).count == 65)
    }

    @Test func fixtureEqualsTable() throws {
        let rows = try readCatalogue(at: testsDirectory.appendingPathComponent("Fixtures/rpc-methods.tsv"))
        compare(rows, source: "Fixtures/rpc-methods.tsv")
    }

    /// <package root>/../shared/rpc-methods.tsv, present on the development machines only.
    static let sharedCatalogue = testsDirectory.deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/rpc-methods.tsv")

    @Test(.enabled(if: FileManager.default.fileExists(atPath: sharedCatalogue.path),
                   "no ../shared/rpc-methods.tsv beside the package (development machines only)"))
    func sharedCatalogueEqualsTable() throws {
        compare(try readCatalogue(at: Self.sharedCatalogue), source: Self.sharedCatalogue.path)
    }

    @Test func lookup() throws {
        let update = try #require(RpcCatalogue.method(named: "session.update"))
        #expect(update == RpcMethod(name: "session.update", needsIdempotencyKey: true, timeout: .seconds(60)))
        #expect(RpcCatalogue.method(named: "system.ping")?.timeout == .seconds(3))
        #expect(RpcCatalogue.method(named: "plan.generateMarkdown")?.timeout == .seconds(180))
        #expect(RpcCatalogue.method(named: "files.search")?.timeout == .seconds(90))
        #expect(RpcCatalogue.method(named: "terminal.write")?.needsIdempotencyKey == true)
        #expect(RpcCatalogue.method(named: "plans.list") == nil)
        #expect(RpcCatalogue.method(named: "") == nil)
        for m in RpcCatalogue.all { #expect(RpcCatalogue.method(named: m.name) == m) }
    }

    @Test func errorCodes() {
        #expect(RpcErrorCode.parseError.rawValue == -32700)
        #expect(RpcErrorCode.invalidRequest.rawValue == -32600)
        #expect(RpcErrorCode.methodNotFound.rawValue == -32601)
        #expect(RpcErrorCode.invalidParams.rawValue == -32602)
        #expect(RpcErrorCode.internalError.rawValue == -32603)
        #expect(RpcErrorCode.unauthorized.rawValue == -32000)
        #expect(RpcErrorCode.notImplemented.rawValue == -32009)
        #expect(RpcErrorCode.desktopOffline.rawValue == -32010)
        #expect((-32009 ... -32000).allSatisfy { RpcErrorCode(rawValue: $0).isDesktopError })
        #expect(!RpcErrorCode.desktopOffline.isDesktopError)
        #expect(RpcErrorCode.parseError.isJSONRPCError && RpcErrorCode.internalError.isJSONRPCError)
        #expect(!RpcErrorCode.unauthorized.isJSONRPCError && !RpcErrorCode(rawValue: -32604).isJSONRPCError)
        #expect(RpcErrorBody(.desktopOffline, message: "Desktop is offline").code == -32010)
    }
}
