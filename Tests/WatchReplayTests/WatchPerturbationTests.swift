import Foundation
import RelayProtocol
import Replay
import Testing
import Trace
import WatchCapture
import WatchLink
import WatchReplay
import WatchSimulation

/// A phone receiver with an inclusive acknowledgement: it names one past the next number it expects, so
/// the watch drops a command the phone has not executed (the bug the exclusive ack of SPEC C3 prevents).
struct InclusiveAckReceiver: CommandReceiving {
    var inner: PhoneReceiver

    mutating func handle(_ input: ReceiverInput) -> [ReceiverAction] {
        inner.handle(input).map { a in
            guard case .sendAck(var ack) = a else { return a }
            ack.next += 1
            return .sendAck(ack)
        }
    }
}

/// A phone receiver that executes the last command again when it comes again (it takes "below the
/// expected number" as "below or at the last executed minus one"): harmless on a perfect channel, a
/// double execution as soon as a command datagram is duplicated or resent.
struct ReexecutingReceiver: CommandReceiving {
    var inner: PhoneReceiver

    mutating func handle(_ input: ReceiverInput) -> [ReceiverAction] {
        if case .command(let c) = input, c.incarnation == inner.incarnation, let next = inner.expected, c.sequence + 1 == next {
            return [.execute(c)] + (inner.ack.map { [.sendAck($0)] } ?? [])
        }
        return inner.handle(input)
    }
}

/// Watch-channel perturbation replay of `watch-offline` and `watch-restart`: thousands of seeded fault
/// lists hold exactly-once in-order execution and monotonic snapshots; an inclusive ack is caught and
/// shrunk to a short trace.
@Suite struct WatchPerturbationTests {
    static func perturbation(_ name: String, seed: UInt64 = 1, duration: Duration? = nil) throws -> WatchPerturbation {
        let scenario = try #require(WatchScenario.named(name))
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("perturb-\(name)-\(seed)-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try WatchScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: path)
        let reader = try TraceReader(path: path)
        return try WatchPerturbation(header: reader.header, records: reader.readAll().entries.map(\.record))
    }

    /// 5,000 seeds on each: 10,000 perturbed replays of the two watch scenarios (plus 3,000 on relay traces
    /// in PerturbationTests). The first 15 minutes of each scenario: the out-of-reach stretch (6-12 min) and the relaunch
    /// (10 min 50 s) fall inside.
    @Test(arguments: ["watch-offline", "watch-restart"])
    func thousandsOfSeedsHoldExactlyOnceInOrder(name: String) throws {
        let p = try Self.perturbation(name, duration: .seconds(900))
        #expect(p.tapCount > 10)
        let base = p.run(faults: [], record: true)
        #expect(base.violation == nil, "\(base.line)")
        let executed = base.records.filter { (try? WatchRecordCodec.decodeInput($0)).flatMap { $0 } != nil && $0.kind == .frameText && $0.direction == .outbound }
        #expect(executed.count >= p.tapCount, "every tap reached the phone")
        var kinds: [FaultKind: Int] = [:]
        for seed in 1...UInt64(5_000) {
            let run = p.run(seed: seed)
            for f in run.faults { kinds[f.kind, default: 0] += 1 }
            #expect(run.violation == nil, "\(name) \(run.line)")
        }
        #expect(Set(kinds.keys) == Set(WatchPerturbation.kinds), "every kind of fault was exercised")
    }

    @Test func aRestartFaultStartsANewIncarnationAndNothingIsLost() throws {
        let p = try Self.perturbation("watch-offline")
        let run = p.run(faults: [Fault(kind: .restart, target: 5), Fault(kind: .drop, target: 9)], record: true)
        #expect(run.violation == nil, "\(run.line)")
        let launches = run.records.compactMap { r -> WatchLaunch? in
            if case .watchLaunched(let l)? = try? WatchRecordCodec.decodeInput(r) { return l }
            return nil
        }
        #expect(launches.count == 2)
        #expect(Set(launches.map(\.incarnation)).count == 2)
    }

    @Test func anInclusiveAckIsCaughtAndShrunkToAShortTrace() throws {
        let p = try Self.perturbation("watch-offline")
        p.receiverFactory = { launch in
            InclusiveAckReceiver(inner: PhoneReceiver(liveSession: launch.liveSession, checkpoint: launch.checkpoint))
        }
        let failing = try #require((1...500 as ClosedRange<UInt64>).lazy.map { p.run(seed: $0) }.first { $0.violation != nil })
        #expect(failing.violation?.invariant == "exactly-once")
        let (shrunk, taps) = p.shrink(failing)
        #expect(shrunk.violation?.invariant == "exactly-once", "\(shrunk.line)")
        #expect(shrunk.faults.count <= failing.faults.count)
        #expect(taps < p.tapCount / 2, "the script's taps were shrunk too: \(taps) of \(p.tapCount)")
        for i in shrunk.faults.indices {
            var fewer = shrunk.faults
            fewer.remove(at: i)
            #expect(p.run(faults: fewer).violation?.invariant != "exactly-once", "removing \(shrunk.faults[i]) still breaks: not minimal")
        }
        // The production receiver holds under the same faults.
        p.receiverFactory = nil
        #expect(p.run(faults: shrunk.faults).violation == nil)
        // The shrunk run, written as a trace, reads back through the watch codec.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("shrunk-watch-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + ".faults.json")
        }
        try PerturbationOutput.write(header: p.header, records: shrunk.records, run: shrunk, to: path)
        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        #expect(records == shrunk.records)
        #expect(records.allSatisfy { $0.channel == .watch })
        let tapsInTrace = records.filter { if case .watch(.tap)? = try? WatchRecordCodec.decodeInput($0) { true } else { false } }
        #expect(tapsInTrace.count == taps)
        let full = p.run(faults: failing.faults, record: true).records.count
        #expect(records.count * 3 < full, "a short trace: \(records.count) records, the unshrunk run has \(full)")
    }

    @Test func aReceiverThatReexecutesIsCaughtOnlyUnderFaultsAndShrunkToOneFault() throws {
        let p = try Self.perturbation("watch-restart")
        p.receiverFactory = { launch in
            ReexecutingReceiver(inner: PhoneReceiver(liveSession: launch.liveSession, checkpoint: launch.checkpoint))
        }
        #expect(p.run(faults: []).violation == nil, "a perfect channel never repeats a command")
        let failing = try #require((1...500 as ClosedRange<UInt64>).lazy.map { p.run(seed: $0) }.first { $0.violation != nil })
        #expect(failing.violation?.invariant == "exactly-once")
        let (shrunk, _) = p.shrink(failing)
        #expect(shrunk.violation?.invariant == "exactly-once", "\(shrunk.line)")
        #expect(shrunk.faults.count == 1, "\(shrunk.line)")
        #expect(p.run(faults: []).violation == nil)
        #expect([FaultKind.duplicate, .drop, .delay, .reorder].contains(shrunk.faults.first?.kind ?? .kill))
    }
}
