import Foundation
import RelayProtocol
import Replay
import Testing
import Trace

/// Bad input never crashes a replay: records whose payloads were damaged *inside* valid chunks (so no
/// checksum catches them: a buggy writer, a hand-edited trace) make a strict or what-if replay stop with a
/// divergence or finish, nothing else.
@Suite struct FuzzReplayTests {
    /// `records` with one to four payload bytes changed, inserted or removed at random places.
    static func mutate(_ records: [TraceRecord], _ rng: inout SeededRandom) -> (records: [TraceRecord], touched: Int) {
        var out = records
        let candidates = out.indices.filter { !out[$0].payload.isEmpty }
        let victim = candidates[Int(rng.next(upperBound: UInt64(candidates.count)))]
        var p = out[victim].payload
        for _ in 0...Int(rng.next(upperBound: UInt64(4))) {
            let i = Int(rng.next(upperBound: UInt64(p.count)))
            switch rng.next(upperBound: UInt64(3)) {
            case 0: p[i] = UInt8(truncatingIfNeeded: rng.next())
            case 1: p.insert(UInt8(truncatingIfNeeded: rng.next()), at: i)
            default: if p.count > 1 { p.remove(at: i) }
            }
        }
        out[victim].payload = p
        return (out, victim)
    }

    @Test(arguments: ["lease", "invalid-resume", "offline-queue"])
    func damagedPayloadsStopAStrictReplayAtOrBeforeTheDamageAndNeverCrash(name: String) throws {
        let path = try simulatedTrace(name)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        var rng = SeededRandom(seed: 0xF022)
        var diverged = 0
        for _ in 0..<300 {
            let (damaged, victim) = Self.mutate(records, &rng)
            let replayer = try Replayer(header: reader.header, records: damaged)
            switch replayer.run() {
            case .finished:
                continue  // the change did not matter (e.g. whitespace, a byte of a marker)
            case .diverged(let d):
                diverged += 1
                #expect(d.record >= victim, "the records before #\(victim) are the recorded ones: no divergence before it (#\(d.record))")
                #expect(!d.description.isEmpty)
            case .paused, .damaged, .refused:
                Issue.record("an in-memory strict replay only finishes or diverges")
            }
            // What-if replay of the same records runs to its end whatever they say.
            _ = try? WhatIfReplayer(header: reader.header, records: damaged).run()
        }
        #expect(diverged > 200, "most damage shows: \(diverged) of 300")
    }
}
