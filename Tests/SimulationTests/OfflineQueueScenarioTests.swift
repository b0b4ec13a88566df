import Capture
import Foundation
import OfflineQueue
import RelayClient
import RelayProtocol
import Replay
import Simulation
import Testing
import Trace

/// SPEC Part B through the whole system: mutations made with no network path are queued in a real SQLite
/// file, drained in order after registration under their own keys, and a client restart mid-drain loses
/// nothing and executes nothing twice.
@Suite struct OfflineQueueScenarioTests {
    @Test func queuedMutationsDrainInOrderUnderTheirKeysAndSurviveARestartMidDrain() throws {
        let scenario = try #require(Scenario.named("offline-queue"))
        let config = SimulationIdentity.configuration(seed: 1)
        var setup = try scenario.setup(seed: 1, configuration: config)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("oq-\(UUID().uuidString).sqlite").path
        defer { for s in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + s) } }
        setup.offlineQueuePath = file
        var sim = Simulation(setup: setup, capture: nil, keepActions: true)
        let result = sim.run()
        #expect(result.counts["restarts"] == 1)

        // Queued while offline, in the order they were made.
        let queued = result.actions.compactMap { t, a -> (Moment, String)? in
            if case .offlineQueue(.enqueue(let m)) = a { (t, m.idempotencyKey) } else { nil }
        }
        #expect(queued.map(\.1) == ["oq-rename", "oq-update", "oq-cancel"])
        #expect(queued.allSatisfy { $0.0 < .seconds(25) })
        // Sent after the path came back, in queue order, each under its own key; the head twice (the first
        // client died before its answer came).
        let sent = result.actions.compactMap { _, a -> String? in
            if case .offlineQueue(.markSent(let key)) = a { key } else { nil }
        }
        #expect(sent == ["oq-rename", "oq-rename", "oq-update", "oq-cancel"])
        let finished = result.actions.compactMap { _, a -> String? in
            if case .offlineMutationFinished(let key, .success) = a { key } else { nil }
        }
        #expect(finished == ["oq-rename", "oq-update", "oq-cancel"])

        // The desktop executed each mutation once; the resend after the restart got the stored result.
        let desktop = try #require(sim.relay.simulatedDesktops.first?.desktop)
        #expect(sim.relay.simulatedDesktops.count == 1)
        #expect(Set(desktop.idempotentResults.keys) == ["oq-rename", "oq-update", "oq-cancel"])
        #expect(desktop.idempotentReplays == 1)

        // The SQLite file is real and survived: every row answered, in order.
        let store = try OfflineQueueStore(path: file)
        defer { store.close() }
        let rows = try store.all()
        #expect(rows.map(\.mutation.idempotencyKey) == ["oq-rename", "oq-update", "oq-cancel"])
        #expect(rows.allSatisfy { $0.state == .answered })
        #expect(try store.pending().isEmpty)
    }

    @Test func theOfflineQueueTraceReplaysStrictlyAcrossTheRestart() throws {
        let scenario = try #require(Scenario.named("offline-queue"))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("oq-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ScenarioRunner.simulate(scenario, seed: 1, path: path)
        let replayer = try Replayer(path: path)
        #expect(replayer.records.contains { $0.kind == .marker && $0.payloadText.hasPrefix("client restart seed=") })
        #expect(replayer.run() == .finished, "\(replayer.divergence?.description ?? "")")
    }
}
