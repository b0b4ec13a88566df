import Capture
import Foundation
import RelayClient
import RelayProtocol
import Simulation
import Testing
import Trace

/// Reads a simulated trace back and checks each scenario's rule with the SPEC's numbers.
struct SimTrace {
    var records: [TraceRecord]
    var header: TraceHeader

    static func run(_ name: String, seed: UInt64 = 1, duration: Duration? = nil, extraFaults: String = "") throws -> SimTrace {
        var scenario = try #require(Scenario.named(name))
        scenario.faults += "\n" + extraFaults
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("sim-\(name)-\(seed)-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ScenarioRunner.simulate(scenario, seed: seed, duration: duration, path: path)
        let reader = try TraceReader(path: path)
        let (entries, error) = reader.readAll()
        #expect(error == nil)
        #expect(reader.isComplete)
        return SimTrace(records: entries.map(\.record), header: reader.header)
    }

    /// Text frames with their decoded message.
    func messages(_ dir: FrameDirection) -> [(time: Moment, gen: UInt64, message: RelayMessage)] {
        records.compactMap { r in
            guard r.kind == .frameText, r.direction == dir, let m = try? RelayMessage(decodingText: r.payloadText) else { return nil }
            return (r.time, r.generation ?? 0, m)
        }
    }

    func opens() -> [(time: Moment, gen: UInt64)] {
        records.filter { $0.kind == .transportOpen }.map { ($0.time, $0.generation ?? 0) }
    }

    func closesOut() -> [(time: Moment, gen: UInt64, reason: String)] {
        records.filter { $0.kind == .transportClosed && $0.direction == .outbound }.map {
            ($0.time, $0.generation ?? 0, (try? JSONValue(parsing: $0.payload))?["reason"]?.stringValue ?? "")
        }
    }

    func actions(_ name: String) -> [(time: Moment, json: JSONValue)] {
        records.compactMap { r in
            guard r.kind == .action, let j = try? JSONValue(parsing: r.payload), j["action"]?.stringValue == name else { return nil }
            return (r.time, j)
        }
    }
}

@Suite struct ScenarioTraceTests {
    @Test func tourShowsRegistrationRpcsAKeyedMutationLeaseRenewalsHandoverAndBackground() throws {
        let t = try SimTrace.run("tour")
        #expect(t.header.simulated)
        let out = t.messages(.outbound), inbound = t.messages(.inbound)
        #expect(out.contains { if case .register = $0.message { true } else { false } })
        #expect(inbound.contains { if case .registered = $0.message { true } else { false } })
        let requests = out.compactMap { if case .rpcRequest(let r) = $0.message { r } else { nil } }
        #expect(requests.count >= 5)
        #expect(requests.allSatisfy { $0.traceparent != nil })
        #expect(requests.contains { $0.method == "session.update" && $0.idempotencyKey == "tour-update" })
        let interest = out.filter { if case .event(let e) = $0.message { e.eventType == "chat:timeline-interest" } else { false } }
        #expect(interest.count >= 3, "the lease and at least two renewals")
        #expect(t.closesOut().contains { $0.reason == "network interface changed" })
        #expect(t.closesOut().contains { $0.reason == "app in background" })
        #expect(t.actions("epochOpened").contains { $0.json["reason"] == "foreground" })
    }

    @Test func handshakeTimeoutFailsTheSocketTenSecondsAfterRegisterAndOneNewSocketRegisters() throws {
        let t = try SimTrace.run("handshake-timeout")
        let registers = t.messages(.outbound).filter { if case .register = $0.message { true } else { false } }
        let failure = try #require(t.actions("connectionFailed").first)
        #expect(failure.json["reason"] == "handshake timeout")
        #expect(failure.time - registers[0].time == .seconds(10))
        #expect(t.opens().count == 2)
        #expect(t.messages(.inbound).filter { if case .registered = $0.message { true } else { false } }.map(\.gen) == [2])
    }

    @Test func watchdogFailsTheSocketFifteenSecondsAfterTheLastInboundFrame() throws {
        let t = try SimTrace.run("watchdog")
        let failure = try #require(t.actions("connectionFailed").first { $0.json["reason"] == "watchdog: no inbound traffic" })
        let lastInbound = try #require(t.records.last { $0.direction == .inbound && $0.generation == 1 && $0.time < failure.time })
        #expect(failure.time - lastInbound.time == .seconds(15))
        #expect(t.opens().map(\.gen) == [1, 2])
    }

    @Test func invalidResumeReRegistersWithoutATokenTwoHundredMillisecondsLaterOnTheSameSocket() throws {
        let t = try SimTrace.run("invalid-resume")
        let refusal = try #require(t.messages(.inbound).first { if case .error(let e) = $0.message { e.code == .invalidResume } else { false } })
        let registers = t.messages(.outbound).compactMap { m -> (Moment, UInt64, RegisterPayload)? in
            if case .register(let p) = m.message { (m.time, m.gen, p) } else { nil }
        }
        #expect(registers.count == 2)
        #expect(registers[0].2.resumeToken != nil)
        #expect(registers[1].2.resumeToken == nil && registers[1].2.relaySessionId == nil)
        #expect(registers[1].0 - refusal.time == .milliseconds(200))
        #expect(registers[1].1 == refusal.gen)
    }

    @Test func invalidResumeLoopEndsTheClientAfterThreeRefusalsInsideThirtySeconds() throws {
        let t = try SimTrace.run("invalid-resume-loop")
        let refusals = t.messages(.inbound).filter { if case .error(let e) = $0.message { e.code == .invalidResume } else { false } }
        #expect(refusals.count == 3)
        #expect(refusals[2].time - refusals[0].time < .seconds(30))
        let stopped = try #require(t.actions("phaseChanged").first { $0.json["phase"] == "stopped" })
        #expect(stopped.json["reason"] == "invalidResumeLoop")
        #expect(t.opens().count == 1, "no socket after the loop ended")
    }

    @Test func rpcTimeoutFailsThePingAtThreeSecondsAndReplacesItsGeneration() throws {
        let t = try SimTrace.run("rpc-timeout")
        let ping = try #require(t.messages(.outbound).first { if case .rpcRequest(let r) = $0.message { r.method == "system.ping" } else { false } })
        let completed = try #require(t.actions("callCompleted").first)
        #expect(completed.json["failure"]?["kind"] == "timedOut")
        #expect(completed.time - ping.time == .seconds(3))
        #expect(t.actions("connectionFailed").first?.json["reason"]?.stringValue?.hasPrefix("rpc timeout") == true)
        #expect(t.opens().map(\.gen) == [1, 2])
    }

    @Test func rpcTimeoutOnAReplacedGenerationTouchesNothingElse() throws {
        let t = try SimTrace.run("rpc-timeout-replaced")
        let completed = try #require(t.actions("callCompleted").first)
        #expect(completed.json["failure"]?["kind"] == "timedOut")
        #expect(completed.time == .seconds(62))
        #expect(t.opens().map(\.gen) == [1, 2], "the replacement came from the relay's close at 20 s, not from the timeout")
        let stop = try #require(t.records.first { r in r.kind == .input && (try? JSONValue(parsing: r.payload))?["input"] == "stop" })
        #expect(!t.records.contains { r in
            r.time >= .seconds(62) && r.time < stop.time
                && (r.kind == .transportOpen || (r.kind == .transportClosed && r.direction == .outbound))
        })
    }

    /// The reproduction (docs/FAULTS.md `ignore-pings`): after the handover's fresh epoch the
    /// desktop never answers a ping; each probe's 3 s timeout replaces the socket (A8) and the next probe
    /// still waits out the backoff (A9), so the gaps grow 3 s + 1, 2, 4, 8, 16 s instead of staying 3.06 s.
    @Test func handoverWithADesktopThatIgnoresPingsBacksOffItsProbes() throws {
        let t = try SimTrace.run("handover", duration: .seconds(150), extraFaults: "from 29s to 10m desktop ignore-pings")
        let pings = t.messages(.outbound).filter { if case .rpcRequest(let r) = $0.message { r.method == "system.ping" } else { false } }
        let gaps = zip(pings.dropFirst(), pings).map { Double(($0.time - $1.time).nanoseconds / 1_000_000) / 1000 }
        #expect(pings.first?.time == .seconds(30.06))
        #expect(gaps == [4, 5, 7, 11, 19, 19, 19], "\(gaps)")
        #expect(Set(pings.map(\.gen)).count == pings.count, "each unanswered probe replaced its socket")
        #expect(t.opens().count == 10, "the first socket, the handover's, then one per timed-out probe")
    }

    @Test func handoverClosesTheOldSocketFailsItsCallsThenOpensExactlyOneNew() throws {
        let t = try SimTrace.run("handover")
        let close = try #require(t.records.firstIndex { $0.kind == .transportClosed && $0.direction == .outbound && $0.generation == 1 })
        let failed = try #require(t.records.firstIndex { r in
            r.kind == .action && (try? JSONValue(parsing: r.payload))?["failure"]?["kind"] == "connectionClosed"
        })
        let open2 = try #require(t.records.firstIndex { $0.kind == .transportOpen && $0.generation == 2 })
        #expect(close < failed && failed < open2)
        #expect(t.records[open2].time == .seconds(30))
        #expect(t.opens().count == 2, "exactly one replacement")
    }

    @Test func backgroundDisconnectsAndRecoveryStartsOneAndAHalfSecondsAfterTheForeground() throws {
        let t = try SimTrace.run("background")
        #expect(t.closesOut().first { $0.reason == "app in background" }?.time == .seconds(30))
        #expect(t.opens().map(\.time) == [.seconds(0.005), .seconds(91.5)])
        #expect(t.actions("epochOpened").first?.json["reason"] == "foreground")
    }

    @Test func leaseIsRenewedEveryTwentySecondsAndReissuedAfterEachRegistered() throws {
        let t = try SimTrace.run("lease")
        let interest = t.messages(.outbound).compactMap { m -> (Moment, UInt64, TimelineInterest)? in
            guard case .event(let e) = m.message, e.eventType == "chat:timeline-interest", let l = try? TimelineInterest(json: e.payload) else { return nil }
            return (m.time, m.gen, l)
        }
        let active = interest.filter { $0.2.active }
        let g1 = active.filter { $0.1 == 1 }.map(\.0)
        #expect(g1.count >= 3)
        for (a, b) in zip(g1, g1.dropFirst()) { #expect(b - a == .seconds(20)) }
        let registered2 = try #require(t.messages(.inbound).first { m in
            switch m.message {
            case .registered, .resumed: m.gen == 2
            default: false
            }
        })
        #expect(active.first { $0.1 == 2 }?.0 == registered2.time, "re-issued at the new registration")
        #expect(interest.last?.2.active == false, "released at the end")
    }

    @Test func ingressCoalescesWaitingSnapshotsAndDeliversOneAtATime() throws {
        let t = try SimTrace.run("ingress-coalesce")
        #expect(t.actions("ingress.droppedSnapshot").contains { $0.json["reason"]?.stringValue == "superseded" })
        // Between two deliveries there is always a snapshotProcessed input.
        var inFlight = false
        for r in t.records {
            if r.kind == .action, (try? JSONValue(parsing: r.payload))?["action"] == "ingress.deliverSnapshot" {
                #expect(!inFlight, "a second snapshot before the first was processed at \(r.time)")
                inFlight = true
            }
            if r.kind == .input, (try? JSONValue(parsing: r.payload))?["input"] == "snapshotProcessed" { inFlight = false }
        }
    }

    @Test func tokenRefreshRunsThreeHundredSecondsBeforeExpiryAndTheNextSocketUsesTheNewJwt() throws {
        let t = try SimTrace.run("token-refresh")
        let request = try #require(t.actions("httpRequest").first)
        #expect(request.time == .seconds(30))
        #expect(request.json["kind"] == "refresh")
        let auth = t.records.filter { $0.kind == .transportOpen }.compactMap { (try? JSONValue(parsing: $0.payload))?["headers"]?["Authorization"]?.stringValue }
        #expect(auth.count == 2)
        #expect(auth[0] != auth[1], "the socket after the refresh carries the new JWT")
        #expect(auth.allSatisfy { $0.hasPrefix("Bearer rt:redacted:") }, "JWTs never reach the file")
    }

    @Test func sameSeedWritesTheSameBytes() throws {
        let scenario = try #require(Scenario.named("tour"))
        let dir = FileManager.default.temporaryDirectory
        let a = dir.appendingPathComponent("same-a-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        let b = dir.appendingPathComponent("same-b-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer {
            try? FileManager.default.removeItem(atPath: a)
            try? FileManager.default.removeItem(atPath: b)
        }
        _ = try ScenarioRunner.simulate(scenario, seed: 7, duration: .seconds(400), path: a)
        _ = try ScenarioRunner.simulate(scenario, seed: 7, duration: .seconds(400), path: b)
        let da = try Data(contentsOf: URL(fileURLWithPath: a)), db = try Data(contentsOf: URL(fileURLWithPath: b))
        #expect(da.count > 10_000)
        #expect(da == db)
    }

    @Test func capturingNeverChangesWhatTheClientDoes() throws {
        let scenario = try #require(Scenario.named("tour"))
        let config = SimulationIdentity.configuration(seed: 3)
        let setup = try scenario.setup(seed: 3, duration: .seconds(360), configuration: config)
        var bare = Simulation(setup: setup, capture: nil, keepActions: true)
        let without = bare.run()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cap-\(UInt64.random(in: 0...UInt64.max)).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let capture = try ClientCapture(path: path, configuration: config, wallClockStart: SimulationIdentity.wallClockStart,
                                        simulated: true, options: SimulationIdentity.writerOptions(seed: 3, overwrite: true))
        var captured = Simulation(setup: setup, capture: capture, keepActions: true)
        let with = captured.run()
        _ = try capture.close()
        #expect(without.actions.count > 300)
        #expect(without.actions.map { "\($0.time) \($0.action)" } == with.actions.map { "\($0.time) \($0.action)" })
    }
}
