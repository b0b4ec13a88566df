import Foundation
import Simulation
import SpecCheck
import Testing
import Trace
import WatchSimulation

/// The project's own client passes: every golden trace in Traces/ and every simulated scenario, with
/// the rule each trace is about actually judged (not merely "not applicable").
@Suite struct ProjectTraceTests {
    static let root: String = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
            dir.deleteLastPathComponent()
        }
        return dir.path
    }()

    /// The rules each golden trace exercises: they must be judged, and hold.
    static let exercised: [String: [CheckRule]] = [
        "tour": [.heartbeat, .watchdog, .oneLiveGeneration, .idempotencyKey, .traceparent, .responseTraceId, .leaseRenewal, .leaseReissue, .resumeCredentials],
        "handshake-timeout": [.handshake, .oneLiveGeneration],
        "watchdog": [.watchdog, .heartbeat],
        "invalid-resume": [.reRegister],
        "invalid-resume-loop": [.reRegister, .invalidResumeLoop],
        "rpc-timeout": [.timeout, .traceparent],
        "rpc-timeout-replaced": [.traceparent, .oneLiveGeneration],
        "handover": [.oneLiveGeneration],
        "background": [.oneLiveGeneration, .resumeCredentials],
        "lease": [.leaseMessage, .leaseRenewal, .leaseReissue],
        "ingress-coalesce": [.leaseMessage],
        "token-refresh": [.upgradeHeaders, .resumeCredentials],
        "offline-queue": [.idempotencyKey, .oneLiveGeneration],
        "capture-tour-wss": [.heartbeat, .traceparent, .leaseMessage],
        "capture-lease-ws": [.url, .leaseRenewal],
        "link": [.upgradeHeaders, .registerFirst, .clientMessage, .register],
    ]

    static let goldenTraces: [String] = {
        let dir = root + "/Traces"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".rtrace") }
            .map { String($0.dropLast(".rtrace".count)) }.sorted()
    }()

    @Test func everyGoldenTraceNamesWhatItExercises() {
        #expect(ProjectTraceTests.goldenTraces.count >= 15)
        #expect(Set(ProjectTraceTests.goldenTraces) == Set(ProjectTraceTests.exercised.keys))
    }

    @Test(arguments: goldenTraces)
    func goldenTracePasses(name: String) throws {
        let report = try check(ProjectTraceTests.root + "/Traces/\(name).rtrace")
        #expect(report.findings.isEmpty, "\(name):\n\(report.text)")
        #expect(report.kind == .machine && report.phoneDevices == 1)
        for rule in ProjectTraceTests.exercised[name] ?? [] {
            let tally = report.rules.first { $0.rule == rule }
            #expect(tally?.status == .held, "\(name): \(rule) is \(tally?.status.rawValue ?? "?")\n\(report.text)")
        }
    }

    @Test(arguments: Scenario.all.map(\.name))
    func simulatedScenarioPasses(name: String) throws {
        let scenario = try #require(Scenario.named(name))
        let path = temporaryTrace("scenario-\(name)")
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ScenarioRunner.simulate(scenario, seed: 3, path: path)
        let report = try check(path)
        #expect(report.findings.isEmpty, "\(name):\n\(report.text)")
        #expect(report.phoneSockets >= 1 && report.rules.contains { $0.rule == .heartbeat && $0.status != .broken })
    }

    @Test(arguments: WatchScenario.all.map(\.name))
    func watchScenariosHaveNoRelayRuleToApply(name: String) throws {
        let scenario = try #require(WatchScenario.named(name))
        let path = temporaryTrace("watch-\(name)")
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try WatchScenarioRunner.simulate(scenario, seed: 3, path: path)
        let report = try check(path)
        #expect(report.findings.isEmpty && !report.clientBrokeARule)
        #expect(report.rules.allSatisfy { $0.status == .notApplicable })
        #expect(report.notes.contains { $0.contains("watch-channel trace") }, "\(report.notes)")
        #expect(report.phoneSockets == 0)
    }

    @Test func aDayOfTheTourPasses() throws {
        let path = temporaryTrace("day")
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ScenarioRunner.simulate(try #require(Scenario.named("tour")), seed: 1, duration: .seconds(6 * 3600), path: path)
        let report = try check(path)
        #expect(report.findings.isEmpty, "\(report.text)")
        let heartbeats = try #require(report.rules.first { $0.rule == .heartbeat })
        #expect(heartbeats.checked > 3000)
    }
}
