import RelayClient
import RelayProtocol
import Replay
import ReplayTesting
import Testing
import Trace

/// Every golden trace in Traces/ replays strictly, and stepping to its key moment shows the SPEC's number.
@Suite struct GoldenTraceTests {
    static let names = ["tour", "handshake-timeout", "watchdog", "invalid-resume", "invalid-resume-loop", "rpc-timeout",
                        "rpc-timeout-replaced", "handover", "background", "lease", "ingress-coalesce", "token-refresh",
                        "offline-queue", "link", "capture-tour-wss", "capture-lease-ws"]

    @Test func theCapturedTracesCameOverRealSockets() throws {
        for name in ["capture-tour-wss", "capture-lease-ws"] {
            let replay = try TraceReplay(named: name)
            #expect(!replay.replayer.header.simulated)
            let url = replay.replayer.header.client["relayURL"]?.stringValue ?? ""
            #expect(url.hasPrefix(name.hasSuffix("wss") ? "wss://127.0.0.1:" : "ws://127.0.0.1:"))
        }
    }

    @Test(arguments: names)
    func everyGoldenTraceReplaysStrictly(name: String) throws {
        let replay = try TraceReplay(named: name)
        replay.expectNoDivergence()
        #expect(replay.replayer.isAtEnd)
    }

    /// The time of the record at `index`, and the replayer there.
    private func time(_ r: Replayer, _ index: Int) -> Moment { r.records[index].time }

    @Test func theLinkTraceStoresTheDesktopBeforeConnectingToIt() throws {
        let replay = try TraceReplay(named: "link")
        #expect(replay.replayer.machine.desktopId.isEmpty, "no desktop linked at launch")
        _ = try replay.pause(before: .messageType("link.accepted"))
        #expect(replay.replayer.machine.desktopId.isEmpty)
        if case .linking = replay.replayer.machine.phase {} else { Issue.record("linking, not \(replay.replayer.machine.phase)") }
        _ = try replay.pause(before: .messageType("register"))
        #expect(replay.replayer.machine.desktopId == "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")
        #expect(replay.replayer.machine.resumeKey == "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11::9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")
        replay.expectNoDivergence()
    }

    @Test func invalidResumeReRegistersTwoHundredMillisecondsLater() throws {
        let replay = try TraceReplay(named: "invalid-resume")
        let refusal = try replay.pause(before: .messageType("error"))
        let fire = try replay.pause(before: .timer("reRegister"))
        #expect(time(replay.replayer, fire) - time(replay.replayer, refusal) == .milliseconds(200))
        #expect(replay.replayer.machine.resumeCredentials == nil)
        replay.expectNoDivergence()
    }

    @Test func handshakeTimesOutAtTenSeconds() throws {
        let replay = try TraceReplay(named: "handshake-timeout")
        let register = try replay.pause(before: .messageType("register"))
        let fire = try replay.pause(before: .timer("handshake"))
        #expect(time(replay.replayer, fire) - time(replay.replayer, register) == .seconds(10))
        #expect(replay.replayer.machine.generation == Generation(1))
        replay.replayer.step()
        #expect(replay.replayer.machine.lastGeneration == Generation(2), "the timeout opened the next generation")
        replay.expectNoDivergence()
    }

    @Test func watchdogFiresFifteenSecondsAfterTheLastInboundFrame() throws {
        let replay = try TraceReplay(named: "watchdog")
        replay.replayer.breakpoints = [.state({ m in m.lastGeneration == Generation(2) }, "second generation")]
        let at = try replay.pause(before: .record(Int.max))
        let lastInbound = try #require(replay.replayer.records[..<at].last { $0.direction == .inbound && $0.generation == 1 })
        let failure = try #require(replay.replayer.records.first { $0.kind == .action && $0.payloadText.contains("watchdog: no inbound") })
        #expect(failure.time <= replay.replayer.records[at].time)
        #expect(failure.time - lastInbound.time == .seconds(15))
        replay.replayer.breakpoints = []
        replay.expectNoDivergence()
    }

    @Test func leaseRenewalsAreTwentySecondsApart() throws {
        let replay = try TraceReplay(named: "lease")
        var renewals: [Moment] = []
        while true {
            guard case .paused(let at, _) = replay.replayer.run(until: [.timer("interest.renewal")]) else { break }
            renewals.append(replay.replayer.records[at].time)
            replay.replayer.step()
        }
        #expect(replay.replayer.divergence == nil)
        #expect(renewals.count >= 2)
        // The first renewal is 20 s after the claim; the relay drop at 50 s re-issues, then every 20 s again.
        #expect(renewals.first == .seconds(25))
    }

    @Test func foregroundRecoveryStartsOneAndAHalfSecondsAfterTheForeground() throws {
        let replay = try TraceReplay(named: "background")
        replay.replayer.breakpoints = [.state({ m in m.appState == .active && m.lastGeneration == Generation(1) && m.phase == .suspended(.background) }, "back in the foreground")]
        let foreground = try replay.pause(before: .record(Int.max))
        replay.replayer.breakpoints = []
        let fire = try replay.pause(before: .timer("foregroundRecovery"))
        #expect(time(replay.replayer, fire) - time(replay.replayer, foreground - 1) == .milliseconds(1500))
        replay.expectNoDivergence()
    }
}
