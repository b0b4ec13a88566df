import Foundation
import RelayClient
import RelayProtocol
import Replay
import Synchronization
import Testing
import Trace
import Sync

/// Relay-channel perturbation replay: seeded faults on the inbound frames of `lease` and `tour`, the
/// invariants (one live generation, no lease renewed after expiry), and shrinking.
@Suite struct RelayPerturbationTests {
    private func perturbation(_ name: String, duration: Duration? = nil) throws -> RelayPerturbation {
        let path = try simulatedTrace(name, duration: duration)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try TraceReader(path: path)
        return try RelayPerturbation(header: reader.header, records: reader.readAll().entries.map(\.record))
    }

    /// `lease` for 70 s (the lease, its renewals, the relay's close at 50 s and the re-issue), `tour` whole.
    @Test(arguments: [("lease", 2_500, 70), ("tour", 500, 0)])
    func everySeedHoldsBothInvariants(name: String, seeds: Int, seconds: Int64) throws {
        let p = try perturbation(name, duration: seconds > 0 ? .seconds(seconds) : nil)
        #expect(p.run(faults: []).violation == nil)
        #expect(p.baselineDeliveries > 10)
        var faults = 0, kills = 0
        for seed in 1...UInt64(seeds) {
            let run = p.run(seed: seed)
            faults += run.faults.count
            kills += run.faults.filter { $0.kind == .kill }.count
            #expect(run.violation == nil, "\(name) \(run.line)")
        }
        #expect(faults >= seeds && kills > 0)
    }

    @Test func killingTheSocketMakesTheClientReconnectOnANewGeneration() throws {
        let p = try perturbation("lease")
        let firstClose = { (r: PerturbedRun) in r.records.firstIndex { $0.kind == .transportClosed } }
        let base = p.run(faults: [], record: true)
        let killed = p.run(faults: [Fault(kind: .kill, target: 3)], record: true)
        #expect(killed.violation == nil)
        let kill = try #require(firstClose(killed))
        #expect(killed.records[kill].time < base.records[try #require(firstClose(base))].time, "the socket died at frame 3, before the relay's own close")
        #expect(killed.records[kill...].contains { $0.kind == .transportOpen }, "a new generation opened after the kill")
    }

    @Test func aDriverThatNeverClosesASocketIsCaughtAndShrunkToOneFault() throws {
        let p = try perturbation("lease")
        // The broken driver: the client's closeTransport never reaches the socket.
        p.actionTransform = { a in
            if case .closeTransport = a { return [] }
            return [a]
        }
        #expect(p.run(faults: []).violation == nil, "the unperturbed lease never closes a socket itself")
        let failing = try #require((1...300 as ClosedRange<UInt64>).lazy.map { p.run(seed: $0) }.first { $0.violation != nil })
        #expect(failing.violation?.invariant == "one-live-generation")
        let shrunk = p.shrink(failing)
        #expect(shrunk.violation?.invariant == "one-live-generation")
        #expect(!shrunk.faults.isEmpty && shrunk.faults.count <= failing.faults.count)
        // The recorded inputs were shrunk too: the shrunk run was fed fewer of them.
        let recordedInputs = p.records.filter { $0.kind == .input }.count
        let note = try #require(shrunk.scriptNote)
        let kept = try #require(Int(note.prefix { $0.isNumber }))
        #expect(note == "\(kept) of \(recordedInputs) recorded inputs kept")
        #expect(kept < recordedInputs, "\(note)")
        let keptInputs = try #require(shrunk.keptInputs)
        #expect(keptInputs.count == kept && keptInputs.allSatisfy { p.records[$0].kind == .input })
        #expect(shrunk.records.filter { $0.kind == .input }.count == kept, "the shrunk run was fed exactly the kept inputs")
        #expect(p.run(faults: shrunk.faults, keepingInputs: keptInputs).violation?.invariant == "one-live-generation", "the shrunk faults and script reproduce it")
        for i in keptInputs.indices {
            var fewer = keptInputs
            fewer.remove(at: i)
            #expect(p.run(faults: shrunk.faults, keepingInputs: fewer).violation == nil, "input #\(keptInputs[i]) is not needed: not minimal")
        }
        for i in shrunk.faults.indices {
            var fewer = shrunk.faults
            fewer.remove(at: i)
            #expect(p.run(faults: fewer, keepingInputs: shrunk.keptInputs).violation == nil, "removing \(shrunk.faults[i]) still breaks: not minimal")
        }
        // Written out as a trace (the run's own records) plus the fault list.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("shrunk-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + ".faults.json")
        }
        try PerturbationOutput.write(header: p.header, records: shrunk.records, run: shrunk, to: path)
        let reader = try TraceReader(path: path)
        let back = reader.readAll()
        #expect(back.error == nil)
        #expect(back.entries.map(\.record) == shrunk.records)
        #expect(reader.header.extra["perturbation"]?["violation"]?["invariant"]?.stringValue == "one-live-generation")
        let json = try JSONValue(parsing: Array(try #require(FileManager.default.contents(atPath: path + ".faults.json"))))
        #expect(try Fault.decode(json) == shrunk.faults)
    }

    @Test func aLeaseRenewedLateIsALapse() throws {
        let p = try perturbation("lease")
        // A broken coordinator: the second active:true lease frame is never sent.
        let seen = Locked(0)
        p.actionTransform = { a in
            if case .send(_, .text(let t), _) = a, t.contains(EventNames.chatTimelineInterest), t.contains("\"active\":true") {
                let n = seen.withLock { n in
                    n += 1
                    return n
                }
                if n == 2 { return [] }
            }
            return [a]
        }
        let run = p.run(faults: [])
        #expect(run.violation?.invariant == "lease-renewed-after-expiry", "\(run.line)")
    }
}

@Suite struct PerturbationBasicsTests {
    @Test func ddminFindsTheOneMinimalCause() {
        var calls = 0
        let result = DeltaDebugging.minimize(Array(0..<40)) { xs in
            calls += 1
            return xs.contains(3) && xs.contains(29)
        }
        #expect(result == [3, 29])
        #expect(calls < 200)
        #expect(DeltaDebugging.minimize([5, 6]) { _ in true } == [])
        #expect(DeltaDebugging.minimize([1, 2, 3]) { $0.count >= 2 }.count == 2)
    }

    @Test func faultsComeFromTheSeedAndRoundTripThroughJSON() throws {
        let a = Fault.derive(seed: 42, deliveries: 100, kinds: FaultKind.allCases)
        #expect(a == Fault.derive(seed: 42, deliveries: 100, kinds: FaultKind.allCases))
        #expect(a != Fault.derive(seed: 43, deliveries: 100, kinds: FaultKind.allCases))
        #expect(!a.isEmpty && a.count <= 6 && a.allSatisfy { $0.target < 100 })
        #expect(try Fault.decode(Fault.json(a)) == a)
        #expect(throws: PerturbationError.self) { try Fault.decode(.array([.object(["kind": "melt", "target": 1])])) }
        #expect(throws: PerturbationError.self) { try Fault.decode(.array([.object(["kind": "drop", "target": -1])])) }
        #expect(Fault.derive(seed: 1, deliveries: 0, kinds: FaultKind.allCases).isEmpty)
    }

    @Test func seedRangesParse() throws {
        #expect(try SeedRange(parsing: "7").seeds == 7...7)
        #expect(try SeedRange(parsing: "1..500").seeds == 1...500)
        for bad in ["", "x", "5..2", "1...3", "1..", "-3"] {
            #expect(throws: PerturbationError.self) { try SeedRange(parsing: bad) }
        }
    }
}
