import Foundation
import RelayProtocol
import Synchronization
import Testing
@testable import Trace
import Sync

/// What reading a trace gave: every entry, the error that ended the reading, and the problems salvage
/// skipped.
struct ReadOutcome: Equatable, CustomStringConvertible {
    var entries: [TraceEntry]
    var error: TraceError?
    var problems: [TraceError]

    var description: String {
        "\(entries.count) entries (last \(entries.last?.number.description ?? "-")), error \(error?.description ?? "none"), problems \(problems.map(\.description))"
    }
}

/// The plain route: `TraceReader.next()` to the end.
func plainRead(_ bytes: [UInt8], salvage: Bool = false) -> ReadOutcome? {
    guard let r = try? TraceReader(bytes: bytes, options: .init(salvage: salvage)) else { return nil }
    let (entries, error) = r.readAll()
    return ReadOutcome(entries: entries, error: error, problems: r.problems)
}

/// The scanner's route with `workers` threads and the plan `adjust` makes.
func scannedRead(_ bytes: [UInt8], salvage: Bool = false, workers: Int = 2, _ adjust: (inout TraceScanPlan) -> Void = { _ in }) -> ReadOutcome? {
    guard let r = try? TraceReader(bytes: bytes, options: .init(salvage: salvage)) else { return nil }
    var plan = TraceScanPlan()
    plan.workers = workers
    adjust(&plan)
    let scanner = TraceScanner(reader: r, plan: plan) { chunk, view in
        (0..<view.count).map { TraceEntry(number: chunk.firstRecord + UInt64($0), record: view.record(at: $0)) }
    }
    var entries: [TraceEntry] = []
    var failure: TraceError?
    do {
        while let (_, e) = try scanner.next() { entries += e }
    } catch {
        failure = error
    }
    return ReadOutcome(entries: entries, error: failure, problems: scanner.problems)
}

/// The golden traces of Traces/ (written before chunk summaries existed).
func goldenTraces() -> [(name: String, bytes: [UInt8])] {
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
        dir.deleteLastPathComponent()
    }
    let traces = dir.appendingPathComponent("Traces")
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: traces.path)) ?? []).filter { $0.hasSuffix(".rtrace") }.sorted()
    return names.compactMap { n in FileManager.default.contents(atPath: traces.appendingPathComponent(n).path).map { (n, [UInt8]($0)) } }
}

/// The golden traces written before chunk summaries existed (the two captured over real sockets; the
/// simulated ones were written again when diagnostics were typed, and have summaries): the files that
/// show a reader still reads the older layout.
let goldenTracesBeforeSummaries: Set<String> = ["capture-lease-ws.rtrace", "capture-tour-wss.rtrace"]

/// Seeded damage to `bytes`: bit flips, cuts, garbage and removed chunks.
func damagedVariants(_ bytes: [UInt8], seed: UInt64, count: Int) -> [(what: String, bytes: [UInt8])] {
    var rng = SeededRandom(seed: seed)
    var out: [(String, [UInt8])] = []
    let index = (try? TraceReader(bytes: bytes))?.index ?? []
    for k in 0..<count {
        var d = bytes
        let at = Int(rng.next(upperBound: UInt64(bytes.count)))
        switch k % 5 {
        case 0, 1:
            d[at] ^= UInt8(1) << UInt8(rng.next(upperBound: UInt64(8)))
            out.append(("flip at \(at)", d))
        case 2:
            out.append(("cut at \(at)", Array(d[..<at])))
        case 3:
            let garbage = (0..<Int(1 + rng.next(upperBound: UInt64(80)))).map { _ in UInt8(rng.next(upperBound: UInt64(256))) }
            d.insert(contentsOf: garbage, at: at)
            out.append(("\(garbage.count) garbage bytes at \(at)", d))
        default:
            guard index.count > 2 else { continue }
            let victim = index[Int(rng.next(upperBound: UInt64(index.count - 1)))]
            let next = index.first { $0.sequence == victim.sequence + 1 }?.offset ?? victim.endOffset
            d.removeSubrange(Int(victim.offset)..<Int(next))
            out.append(("chunk \(victim.sequence) removed", d))
        }
    }
    return out
}

@Suite struct ScannerTests {
    /// Traces of every shape the tests compare the routes on: the golden traces (no summaries), random
    /// records in small and large chunks (with summaries), and a trace whose times go back and forth.
    static let corpus: [(name: String, bytes: [UInt8])] = {
        var out = goldenTraces()
        for (seed, chunk) in [(1, 2048), (2, 8192), (3, 1 << 20)] as [(UInt64, Int)] {
            let records = randomRecords(seed: seed, count: 500, maxPayload: 400)
            if let b = try? writeTrace(records, options: testOptions(chunk: chunk)) { out.append(("random \(seed) in \(chunk)-byte chunks", b)) }
        }
        var rng = SeededRandom(seed: 9)
        let shuffled = randomRecords(seed: 4, count: 400).map { r -> TraceRecord in
            var r = r
            r.time = Moment(nanoseconds: Int64(rng.next(upperBound: UInt64(20_000_000_000))))
            return r
        }
        if let b = try? writeTrace(shuffled, options: testOptions(chunk: 2048)) { out.append(("times out of order", b)) }
        return out
    }()

    @Test func theCorpusHasBothKindsOfFiles() throws {
        #expect(Self.corpus.count >= 18)
        for (name, bytes) in Self.corpus {
            let r = try TraceReader(bytes: bytes)
            let summaries = r.trailer.map { $0.flags & TraceTrailer.flagChunkSummaries != 0 } ?? false
            #expect(summaries == !goldenTracesBeforeSummaries.contains(name), "\(name): traces written before summaries have none, the others do")
        }
    }

    @Test(arguments: [1, 2, 3])
    func onIntactTracesTheScannerGivesThePlainReadersRecords(workers: Int) throws {
        for (name, bytes) in Self.corpus {
            let plain = try #require(plainRead(bytes))
            #expect(plain.error == nil, "\(name)")
            #expect(scannedRead(bytes, workers: workers) == plain, "\(name)")
        }
    }

    @Test func onDamagedTracesTheScannerGivesThePlainReadersRecordsErrorAndProblems() throws {
        var compared = 0
        for (i, (name, bytes)) in Self.corpus.enumerated() {
            for (what, damaged) in damagedVariants(bytes, seed: UInt64(100 + i), count: 25) {
                for salvage in [false, true] {
                    guard let plain = plainRead(damaged, salvage: salvage) else { continue }
                    let scanned = scannedRead(damaged, salvage: salvage, workers: 1 + (compared % 3))
                    #expect(scanned == plain, "\(name), \(what), salvage \(salvage): plain \(plain), scanned \(String(describing: scanned))")
                    compared += 1
                }
            }
        }
        #expect(compared > 500)
    }

    @Test func underEverySingleBitFlipTheScannerAgreesWithThePlainReader() throws {
        let (full, _) = try FormatTests.smallTrace()
        for bit in stride(from: 0, to: full.count * 8, by: 3) {
            var damaged = full
            damaged[bit / 8] ^= 1 << (bit % 8)
            for salvage in [false, true] {
                guard let plain = plainRead(damaged, salvage: salvage) else { continue }
                #expect(scannedRead(damaged, salvage: salvage, workers: 2) == plain, "bit \(bit), salvage \(salvage)")
            }
        }
    }

    /// The records a plain read gives in the window.
    static func inWindow(_ o: ReadOutcome, _ since: Moment?, _ until: Moment?) -> [TraceEntry] {
        o.entries.filter { e in (since.map { e.record.time >= $0 } ?? true) && (until.map { e.record.time <= $0 } ?? true) }
    }

    @Test func aWindowReadsOnlyTheChunksItMeetsAndGivesTheirRecords() throws {
        var rng = SeededRandom(seed: 5)
        for (name, bytes) in Self.corpus {
            let plain = try #require(plainRead(bytes))
            let reader = try TraceReader(bytes: bytes)
            let chunks = try reader.chunks()
            guard let last = plain.entries.last?.record.time.nanoseconds, last > 0 else { continue }
            for k in 0..<12 {
                let a = Int64(rng.next(upperBound: UInt64(last)))
                let b = a + Int64(rng.next(upperBound: UInt64(last / 4 + 1)))
                let since: Moment? = k % 3 == 1 ? nil : Moment(nanoseconds: a)
                let until: Moment? = k % 3 == 2 ? nil : Moment(nanoseconds: b)
                let r = try TraceReader(bytes: bytes)
                var plan = TraceScanPlan()
                plan.since = since
                plan.until = until
                let scanner = TraceScanner(reader: r, plan: plan) { chunk, view in
                    (0..<view.count).map { TraceEntry(number: chunk.firstRecord + UInt64($0), record: view.record(at: $0)) }
                }
                var got: [TraceEntry] = []
                while let (_, e) = try scanner.next() { got += e }
                let window = got.filter { e in (since.map { e.record.time >= $0 } ?? true) && (until.map { e.record.time <= $0 } ?? true) }
                #expect(window == Self.inWindow(plain, since, until), "\(name) \(String(describing: since))...\(String(describing: until))")
                let meeting = chunks.filter { c in (since.map { c.maxTime >= $0 } ?? true) && (until.map { c.minTime <= $0 } ?? true) }.count
                #expect(scanner.chunksDecoded == meeting, "\(name): decoded \(scanner.chunksDecoded) chunks, \(meeting) meet the window")
            }
        }
    }

    @Test func damageOutsideAWindowIsNotReadAndDamageInsideIsReportedAsThePlainReaderDoes() throws {
        let records = randomRecords(seed: 21, count: 600, maxPayload: 300)
        let bytes = try writeTrace(records, options: testOptions(chunk: 4096))
        let index = try #require(try TraceReader(bytes: bytes).index)
        #expect(index.count > 20)
        let inside = index[index.count / 2]
        let since = inside.minTime
        let until = index[index.count / 2 + 3].maxTime
        func window(_ b: [UInt8]) -> ReadOutcome? {
            guard let o = scannedRead(b, { $0.since = since; $0.until = until }) else { return nil }
            return ReadOutcome(entries: Self.inWindow(o, since, until), error: o.error, problems: o.problems)
        }
        let intact = try #require(window(bytes))
        #expect(intact.error == nil && !intact.entries.isEmpty)
        // A flipped bit in an early chunk's zstd frame: the window never reads it.
        var early = bytes
        early[Int(index[2].frameOffset) + 10] ^= 4
        #expect(plainRead(early)?.error?.code == .checksumMismatch)
        #expect(window(early) == intact)
        // In the window's chunk: the records of the window before it, then the plain reader's error.
        var hit = bytes
        hit[Int(inside.frameOffset) + 10] ^= 4
        let plain = try #require(plainRead(hit))
        #expect(window(hit) == ReadOutcome(entries: Self.inWindow(plain, since, until), error: plain.error, problems: []))
        #expect(window(hit)?.error?.offset == inside.offset)
        // An incomplete file cut before the window: the walk goes on from its last chunk and meets the cut.
        let cut = Array(bytes[..<(Int(inside.offset) - 30)])
        let plainCut = try #require(plainRead(cut))
        #expect(plainCut.error?.code == .truncated)
        #expect(window(cut) == ReadOutcome(entries: [], error: plainCut.error, problems: []))
    }

    @Test func chunksAWantsPredicateRefusesAreSkippedButStillChecked() throws {
        for (i, (name, bytes)) in Self.corpus.enumerated() {
            // Refuse every chunk whose sequence number is odd, or whose summary has no text frame.
            let wants: @Sendable (TraceChunkInfo, TraceChunkSummary?) -> Bool = { c, s in
                c.sequence % 2 == 0 && (s.map { $0.hasKind { $0 == RecordKind.frameText.rawValue } } ?? true)
            }
            func expected(_ o: ReadOutcome, _ b: [UInt8]) throws -> [TraceEntry] {
                let r = try TraceReader(bytes: b)
                var refused = Set<UInt32>()
                var summaries: [UInt32: TraceChunkSummary] = [:]
                var w = WalkState(cursor: r.dataOffset)
                while let step = try? r.walkFrame(&w), !w.finished {
                    if case .summary(let sum, let c) = step.event { summaries[c.sequence] = sum }
                }
                for c in (try? r.chunks()) ?? [] where !wants(c, summaries[c.sequence]) { refused.insert(c.sequence) }
                let chunks = (try? r.chunks()) ?? []
                return o.entries.filter { e in
                    guard let c = chunks.first(where: { $0.records.contains(e.number) }) else { return true }
                    return !refused.contains(c.sequence)
                }
            }
            let plain = try #require(plainRead(bytes))
            let skipping = try #require(scannedRead(bytes, { $0.wants = wants }))
            #expect(skipping == ReadOutcome(entries: try expected(plain, bytes), error: nil, problems: []), "\(name)")
            // Bit flips anywhere (in refused chunks too): the same error as the plain reader.
            var rng = SeededRandom(seed: UInt64(40 + i))
            for _ in 0..<20 {
                var d = bytes
                let at = Int(rng.next(upperBound: UInt64(bytes.count)))
                d[at] ^= 1 << UInt8(rng.next(upperBound: UInt64(8)))
                guard let p = plainRead(d), let s = scannedRead(d, { $0.wants = wants }) else { continue }
                #expect(s.error == p.error, "\(name), flip at \(at)")
                #expect(Set(s.entries.map(\.number)).isSubset(of: Set(p.entries.map(\.number))), "\(name), flip at \(at)")
            }
        }
    }

    @Test func memoryInFlightIsBoundedByThePlan() throws {
        // 1 MiB of records in 4 KiB chunks, consumed slowly: no more than the bound is ever decoded ahead.
        let records = randomRecords(seed: 8, count: 3000, maxPayload: 600)
        let bytes = try writeTrace(records, options: testOptions(chunk: 4096))
        let reader = try TraceReader(bytes: bytes)
        var plan = TraceScanPlan()
        plan.workers = 3
        plan.maxBytesInFlight = 16 << 10
        let decoded = Counter()
        let scanner = TraceScanner(reader: reader, plan: plan) { chunk, _ in
            decoded.add(1)
            return chunk.sequence
        }
        var consumed = 0
        var maxAhead = 0
        while let (chunk, seq) = try scanner.next() {
            #expect(chunk.sequence == seq)
            consumed += 1
            usleep(200)
            maxAhead = max(maxAhead, decoded.value - consumed)
        }
        #expect(consumed == (try reader.chunks()).count)
        // 16 KiB of 4 KiB chunks: at most 4 (+1 always allowed) ahead of the one handed out.
        #expect(maxAhead <= 5, "decoded \(maxAhead) chunks ahead")
    }
}

/// A counter shared with worker threads.
final class Counter: Sendable {
    private let n = Locked(0)
    func add(_ k: Int) { n.withLock { $0 += k } }
    var value: Int { n.withLock { $0 } }
}
