import Foundation
import Glibc
import Net
import Proxy
import RelayClient
import RelayProtocol
import Replay
import Runtime
import Simulation
import Testing
import Trace
import WireRecording

/// The model's own client, live over real sockets, recorded by the transparent proxy in front of the
/// development relay (a wire trace: no inputs, no actions), then replayed into the model: the model must
/// do what the live client (the same machine on the real clock) did.
@Suite struct WireReplayLiveTests {
    @Test("a wire trace of the model's own client, recorded through the proxy, replays into the model with no parting", .timeLimit(.minutes(3)))
    func theModelsOwnClientThroughTheProxyAgreesWithTheModel() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("wire-live-\(getpid())-\(UUID().uuidString).rtrace").path
        defer { unlink(path) }
        let relay = try RelayHost(seed: 1, wallClockOrigin: 1_768_478_400_000)
        defer { relay.stop() }
        var options = TraceWriterOptions()
        options.blockWhenFull = true
        let recorder = try WireRecorder(path: path, source: .proxy, details: ["upstream": .string(relay.url)], wallClockStart: "2026-12-01T10:00:00Z", options: options)
        let proxy = try RecordingProxy(upstream: ProxyUpstream(url: try WebSocketURL(relay.url)), recorder: recorder)
        let deviceId = LiveTests.deviceId, desktopId = LiveTests.desktopId
        let config = try ClientConfiguration(deviceId: deviceId, deviceName: "live through the proxy", desktopId: desktopId, relayURL: proxy.url,
                                             allowInsecureLoopback: true, seed: 7)
        var live = LiveClientOptions(configuration: config, jwt: Simulation.phoneJWT(userId: "user-dev", deviceId: deviceId, serial: 0))
        // The tour's first seconds: calls (one a keyed mutation), a chat's lease, a ping.
        live.steps = try #require(Scenario.named("tour")).steps.filter { $0.at < .seconds(9) }
        _ = try LiveClient(options: live).run(for: .seconds(11))
        proxy.stop()
        try recorder.close()

        let reader = try TraceReader(path: path)
        let records = reader.readAll().entries.map(\.record)
        #expect(reader.header.wireSource == "proxy")
        let replayer = try WireReplayer(header: reader.header, records: records)
        let report = replayer.run()
        #expect(report.partings.isEmpty, "\(report.text(all: true))")
        #expect(report.agrees)
        let inferred = Dictionary(grouping: report.inferences, by: \.input).mapValues(\.count)
        #expect(inferred["start"] == 1 && inferred["claim"] == 1 && inferred["stop"] == 1, "\(report.inferences)")
        #expect(inferred["call", default: 0] >= 4, "the tour's calls: \(report.inferences)")
        // Registration, two heartbeats, the calls, the lease, the close: all compared and matched.
        #expect(report.matched >= 10, "\(report.text(all: true))")
    }
}
