import Foundation
import RelayProtocol
import Testing
import Trace
import WatchCapture
import WatchLink
import WatchSimulation

/// A watch scenario's trace, read back: the facts are checked on the records, not on the simulation's
/// own counters.
struct WatchTrace {
    var header: TraceHeader
    var records: [TraceRecord]
    var bytes: [UInt8]

    static func run(_ name: String, seed: UInt64 = 1) throws -> WatchTrace {
        let scenario = try #require(WatchScenario.named(name))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("watch-\(name)-\(seed)-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try WatchScenarioRunner.simulate(scenario, seed: seed, path: path)
        let reader = try TraceReader(path: path)
        let (entries, error) = reader.readAll()
        #expect(error == nil)
        #expect(reader.isComplete)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        return WatchTrace(header: reader.header, records: entries.map(\.record), bytes: Array(bytes))
    }

    /// Action records named `name`, with their JSON.
    func actions(_ name: String) -> [(time: Moment, json: JSONValue)] {
        records.compactMap { r in
            guard r.kind == .action, let j = try? JSONValue(parsing: r.payload), j["watch"]?.stringValue == name else { return nil }
            return (r.time, j)
        }
    }

    /// Every decoded input, in order, with its time.
    func inputs() throws -> [(time: Moment, input: WatchChannelInput)] {
        try records.compactMap { r in try WatchRecordCodec.decodeInput(r).map { (r.time, $0) } }
    }

    /// The executed commands, in execution order: (time, seq, incarnation, setId).
    func executed() throws -> [(time: Moment, seq: UInt64, incarnation: IncarnationToken, setId: String?)] {
        try actions("execute").map { a in
            let e = try WatchWire.envelope(from: a.json["envelope"] ?? .null)
            var setId: String?
            if case .completeSet(let s) = e.command.payload { setId = s.setId }
            return (a.time, e.sequence, e.incarnation, setId)
        }
    }

    /// The set IDs tapped, in tap order.
    func tappedSetIds() throws -> [String] {
        try inputs().compactMap { i in
            if case .watch(.tap(let c, _)) = i.input, case .completeSet(let s) = c.payload { return s.setId }
            return nil
        }
    }
}

@Suite struct WatchScenarioTests {
    @Test func watchOfflineQueuesConfirmsDrainsInOrderExecutesOnceAndTheSnapshotCarriesTheAckBack() throws {
        let t = try WatchTrace.run("watch-offline")
        #expect(t.header.simulated)
        #expect(t.header.extra["scenario"] == "watch-offline")
        #expect(t.records.allSatisfy { $0.channel == .watch })
        let inputs = try t.inputs()
        let offAt = try #require(inputs.first { $0.input == .watch(.reachability(false)) }).time
        let backAt = try #require(inputs.first { $0.input == .watch(.reachability(true)) }).time
        #expect(offAt == .seconds(360) && backAt == .seconds(720))

        // Taps made while away: each confirmed at the tap, given its number at the tap (the floor persisted).
        var offline: [(seq: UInt64, setId: String?)] = []
        for (i, r) in t.records.enumerated() {
            guard r.time > offAt, r.time < backAt, case .watch(.tap(let c, _))? = try WatchRecordCodec.decodeInput(r) else { continue }
            let following = t.records[(i + 1)...].prefix { $0.kind == .action && $0.time == r.time }
                .compactMap { try? JSONValue(parsing: $0.payload) }
            let persisted = try #require(following.first { $0["watch"] == "persist" }?["value"]?.stringValue.flatMap { UInt64($0) })
            if case .completeSet(let s) = c.payload {
                #expect(following.contains { $0["watch"] == "confirm" }, "an offline set tap is confirmed at once")
                offline.append((persisted, s.setId))
            } else {
                offline.append((persisted, nil))
            }
        }
        #expect(offline.count >= 4, "the stretch covers several taps")
        // Nothing crosses while away: no delivery and no send inside the stretch.
        #expect(!t.records.contains { $0.kind == .frameText && $0.time > offAt && $0.time < backAt })
        #expect(!t.actions("send").contains { $0.time > offAt && $0.time < backAt })

        // Every tap executed exactly once, in tap order, under consecutive numbers.
        let executed = try t.executed()
        #expect(executed.compactMap(\.setId) == (try t.tappedSetIds()))
        #expect(zip(executed, executed.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 })
        // The queued ones drained after the return, in order, under the numbers they got at the tap.
        let drained = executed.filter { e in offline.contains { $0.seq == e.seq } }
        #expect(drained.map(\.seq) == offline.map(\.seq))
        #expect(drained.allSatisfy { $0.time >= backAt })
        #expect(drained.map(\.setId) == offline.map(\.setId))

        // The next snapshot delivered to the watch carries the ack past them, and the watch takes it.
        let lastDrained = try #require(drained.last)
        var carried = false
        for (i, r) in t.records.enumerated() where r.time >= lastDrained.time && r.kind == .frameText && r.direction == .inbound {
            guard case .snapshotReceived(let s)? = try WatchRecordCodec.decodeInput(r), let ack = s.ack, ack.next > lastDrained.seq else { continue }
            #expect(ack.next == lastDrained.seq + 1 || ack.next > lastDrained.seq)
            let next = t.records[(i + 1)...].prefix { $0.time == r.time }.compactMap { try? WatchRecordCodec.decodeInput($0) }
            #expect(next.contains(.ackFromSnapshot(ack)))
            carried = true
            break
        }
        #expect(carried)
        // Exactly one resynchronisation: the first command ever (no restart here).
        #expect(t.actions("resynchronised").count == 1)
    }

    @Test func watchRestartResynchronisesOnTheNewTokenFromTheFloorWithoutAGap() throws {
        let t = try WatchTrace.run("watch-restart")
        let launches = try t.inputs().compactMap { i -> (Moment, WatchLaunch)? in
            if case .watchLaunched(let l) = i.input { return (i.time, l) }
            return nil
        }
        try #require(launches.count == 2)
        let (restartAt, second) = launches[1]
        let first = launches[0].1
        #expect(restartAt == .seconds(650))
        #expect(second.incarnation != first.incarnation)
        // The clock went back an hour; the stored floor is the last number the first launch spent.
        #expect(second.clockMilliseconds == first.clockMilliseconds + 650_000 - 3_600_000)
        let lastPersistBefore = try #require(t.actions("persist").last { $0.time <= restartAt && $0.json["side"] == "watch" })
        #expect(second.storedFloor.map { String($0) } == lastPersistBefore.json["value"]?.stringValue)
        let floor = try #require(second.storedFloor)

        // The phone resynchronises: from the old token to the new, baseline = floor + 1 (the floor beat the
        // clock), nothing of the old incarnation buffered, and the gap to the old numbers is exactly one.
        let resyncs = t.actions("resynchronised")
        try #require(resyncs.count == 2)
        let resync = resyncs[1].json
        #expect(resync["from"]?.stringValue == first.incarnation.description)
        #expect(resync["to"]?.stringValue == second.incarnation.description)
        #expect(resync["baseline"]?.stringValue == String(floor + 1))
        let executed = try t.executed()
        let old = executed.filter { $0.incarnation == first.incarnation }, new = executed.filter { $0.incarnation == second.incarnation }
        #expect(!old.isEmpty && !new.isEmpty)
        let lastOld = try #require(old.last), firstNew = try #require(new.first)
        #expect(firstNew.seq == lastOld.seq + 1)
        #expect(zip(new, new.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 })
        // No command of the new launch was ever parked against the old incarnation's expected number.
        #expect(!t.actions("buffered").contains { a in
            guard let s = a.json["seq"]?.stringValue.flatMap({ UInt64($0) }) else { return false }
            return s > floor && a.json["expected"]?.stringValue.flatMap({ UInt64($0) }).map { $0 <= floor } == true
        })

        // Every tap executed exactly once, in order, unless it died queued with the first app.
        let marker = try #require(t.records.first { $0.kind == .marker })
        let died = Int(marker.payloadText.split(separator: ";")[1].split(separator: " ")[0]) ?? -1
        let tapped = try t.tappedSetIds(), done = executed.compactMap(\.setId)
        #expect(Set(done).count == done.count)
        #expect(done.count >= tapped.count - died)
        #expect(done == tapped.filter { done.contains($0) })
    }

    @Test func sameSeedSameBytesAndSeedsDiffer() throws {
        let a = try WatchTrace.run("watch-restart", seed: 5), b = try WatchTrace.run("watch-restart", seed: 5)
        #expect(a.bytes == b.bytes)
        let c = try WatchTrace.run("watch-restart", seed: 6)
        #expect(a.bytes != c.bytes)
    }

    @Test(arguments: ["watch-offline", "watch-restart"])
    func exactlyOnceInOrderOverManySeeds(_ name: String) throws {
        let scenario = try #require(WatchScenario.named(name))
        for seed in 1...40 as ClosedRange<UInt64> {
            var setup = scenario.setup(seed: seed)
            setup.channel.lossPercent = 20
            setup.channel.duplicatePercent = 10
            var sim = WatchSimulation(setup: setup, capture: nil)
            let r = sim.run()
            #expect(Set(r.executedSetIds).count == r.executedSetIds.count, "seed \(seed): executed twice")
            #expect(r.executedSetIds == r.tappedSetIds.filter { r.executedSetIds.contains($0) }, "seed \(seed): out of order")
            let lost = r.tappedSetIds.filter { !r.executedSetIds.contains($0) }
            #expect(lost.allSatisfy { r.abandonedSetIds.contains($0) }, "seed \(seed): lost though not queued when the app died: \(lost)")
            #expect(r.counts["confirmed"] == r.tappedSetIds.count)
        }
    }
}
