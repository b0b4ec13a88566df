import Capture
import DevRelay
import Foundation
import Net
import RelayClient
import RelayProtocol
import Replay
import Runtime
import Simulation
import Synchronization
import Testing
import Trace
import WebSocket
import Sync

/// Real sockets on loopback: the embedded relay (ws and wss with a certificate made on the spot), the live
/// client driver, the capture layer, then the trace read back and replayed. Each test runs for a few
/// seconds of real time and stops by itself.
@Suite struct LiveTests {
    struct Captured {
        var records: [TraceRecord]
        var header: TraceHeader
        var summary: LiveClientSummary
        var path: String
    }

    static let deviceId = "5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11"
    static let desktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"

    /// Captures `scenario` for `seconds` against an embedded relay.
    static func capture(_ scenario: String, seconds: Double, tls: Bool) throws -> Captured {
        let s = try #require(Scenario.named(scenario))
        var identity: SelfSignedIdentity?
        var serverTLS: TLSServerContext?
        if tls {
            let id = try SelfSignedIdentity.generate()
            identity = id
            serverTLS = try TLSServerContext(certificateFile: id.certificatePath, privateKeyFile: id.privateKeyPath)
        }
        defer { identity?.remove() }
        // The phone's desktop is up from the start and shows link codes bound to the phone's account.
        var desktops = RelayHostDesktops()
        desktops.atStart = [StartingDesktop(deviceId: desktopId, userId: "user-dev", offersLinkCode: true)]
        let shown = Locked<LinkCodeOffer?>(nil)
        let relay = try RelayHost(tls: serverTLS, seed: 1, wallClockOrigin: 1_768_478_400_000, desktops: desktops,
                                  onLinkCode: { offer in shown.withLock { $0 = offer } })
        defer { relay.stop() }
        let config = try ClientConfiguration(deviceId: deviceId, deviceName: "test", desktopId: s.startingDesktopId, relayURL: relay.url,
                                             allowInsecureLoopback: !tls, seed: 1)
        var options = LiveClientOptions(configuration: config, jwt: Simulation.phoneJWT(userId: "user-dev", deviceId: deviceId, serial: 0))
        if let identity { options.tls = TLSClientConfiguration(trustedCAFile: identity.certificatePath) }
        options.steps = s.steps
        options.link = s.link
        options.linkCode = { shown.withLock { $0 } }
        let database = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID().uuidString).sqlite").path
        options.databasePath = database
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) } }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID().uuidString).rtrace").path
        let capture = try ClientCapture(path: path, configuration: config, wallClockStart: "2026-11-30T12:00:00.000Z", simulated: false)
        options.capture = capture
        let summary = try LiveClient(options: options).run(for: .nanoseconds(Int64(seconds * 1e9)))
        _ = try capture.close()
        let reader = try TraceReader(path: path)
        let (entries, error) = reader.readAll()
        #expect(error == nil)
        #expect(reader.isComplete)
        return Captured(records: entries.map(\.record), header: reader.header, summary: summary, path: path)
    }

    static func messages(_ records: [TraceRecord], _ dir: Trace.FrameDirection) -> [(Moment, RelayMessage)] {
        records.compactMap { r in
            guard r.kind == .frameText, r.direction == dir, let m = try? RelayMessage(decodingText: r.payloadText) else { return nil }
            return (r.time, m)
        }
    }

    @Test func aWssCaptureShowsRegistrationHeartbeatsEveryFiveSecondsAndTracedRpcsAndReplaysStrictly() throws {
        let c = try LiveTests.capture("tour", seconds: 11.5, tls: true)
        defer { try? FileManager.default.removeItem(atPath: c.path) }
        #expect(!c.header.simulated)
        let inbound = LiveTests.messages(c.records, .inbound), outbound = LiveTests.messages(c.records, .outbound)
        #expect(inbound.contains { if case .registered = $0.1 { true } else { false } })
        let beats = outbound.filter { if case .heartbeat = $0.1 { true } else { false } }.map(\.0)
        #expect(beats.count == 2)
        if beats.count == 2 {
            let gap = (beats[1] - beats[0]).seconds
            #expect(gap >= 5.0 && gap < 5.2, "heartbeats 5 s apart on the real clock: \(gap)")
        }
        let requests = outbound.compactMap { if case .rpcRequest(let r) = $0.1 { r } else { nil } }
        #expect(requests.count >= 4)
        #expect(requests.allSatisfy { $0.traceparent != nil })
        #expect(inbound.contains { if case .event(let e) = $0.1 { e.eventType == "job:created" } else { false } })
        let headers = try #require(c.records.first { $0.kind == .transportOpen }.flatMap { try? JSONValue(parsing: $0.payload) })
        #expect(headers["headers"]?["Authorization"]?.stringValue?.hasPrefix("Bearer rt:redacted:") == true, "the JWT never reaches the file")
        let replayer = try Replayer(path: c.path)
        #expect(replayer.run() == .finished, "\(replayer.divergence?.description ?? "")")
    }

    @Test func aLiveLinkCaptureLinksByTheRelaysQRThenRegistersAndReplaysStrictly() throws {
        let c = try LiveTests.capture("link", seconds: 9, tls: false)
        defer { try? FileManager.default.removeItem(atPath: c.path) }
        #expect(c.summary.counts["linked"] == 1, "\(c.summary.counts)")
        #expect(c.summary.counts["linkFailed"] == 2, "the malformed and the unknown code")
        let outbound = LiveTests.messages(c.records, .outbound), inbound = LiveTests.messages(c.records, .inbound)
        let redeems = outbound.compactMap { if case .link(.redeem(let r)) = $0.1 { r.code } else { nil } }
        #expect(redeems.count == 2 && redeems[0] == "ABCD-EFGH")
        #expect(inbound.contains { if case .link(.accepted(let a)) = $0.1 { a.desktopDeviceId == LiveTests.desktopId } else { false } })
        let registers = outbound.compactMap { if case .register(let p) = $0.1 { p.targetDesktopDeviceId } else { nil } }
        #expect(registers == [LiveTests.desktopId])
        #expect(c.records.contains { r in r.kind == .action && r.payloadText.contains(#""action":"link.store""#) })
        let replayer = try Replayer(path: c.path)
        #expect(replayer.run() == .finished, "\(replayer.divergence?.description ?? "")")
        #expect(replayer.machine.desktopId == LiveTests.desktopId)
    }

    @Test func aPlainWsCaptureOnLoopbackReplaysStrictly() throws {
        let c = try LiveTests.capture("lease", seconds: 7, tls: false)
        defer { try? FileManager.default.removeItem(atPath: c.path) }
        let outbound = LiveTests.messages(c.records, .outbound)
        #expect(outbound.contains { if case .event(let e) = $0.1 { e.eventType == "chat:timeline-interest" } else { false } })
        #expect(c.summary.counts["snapshots", default: 0] >= 1, "the desktop's snapshots arrived while the lease was active")
        let replayer = try Replayer(path: c.path)
        #expect(replayer.run() == .finished, "\(replayer.divergence?.description ?? "")")
    }

    @Test func aLiveCaptureAndTheSimulationShowTheSameMessageTypes() throws {
        let c = try LiveTests.capture("tour", seconds: 9.5, tls: false)
        defer { try? FileManager.default.removeItem(atPath: c.path) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sim-\(UUID().uuidString).rtrace").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ScenarioRunner.simulate(try #require(Scenario.named("tour")), seed: 1, duration: .seconds(9.5), path: path)
        let sim = try TraceReader(path: path).readAll().entries.map(\.record)
        func types(_ records: [TraceRecord]) -> [String] {
            records.compactMap { r in
                guard r.kind == .frameText, let m = try? RelayMessage(decodingText: r.payloadText) else { return nil }
                if case .event(let e) = m { return "\(r.direction == .inbound ? "<" : ">") event \(e.eventType)" }
                return "\(r.direction == .inbound ? "<" : ">") \(m.typeName)"
            }
        }
        let live = types(c.records), simulated = types(sim)
        #expect(live.count > 15)
        // Times differ (real network vs 15 ms simulated latency), so compare the sequences per direction.
        #expect(live.filter { $0.hasPrefix(">") } == simulated.filter { $0.hasPrefix(">") })
        #expect(live.filter { $0.hasPrefix("<") }.sorted() == simulated.filter { $0.hasPrefix("<") }.sorted())
    }

    @Test func theRelayRefusesAnUpgradeWithoutABearerWith401() throws {
        let relay = try RelayHost(seed: 1, wallClockOrigin: 0)
        defer { relay.stop() }
        do {
            let channel = try WebSocketClient.connect(url: relay.url, headers: HTTPHeaders([("X-Device-ID", "d")]), timeout: .seconds(5))
            channel.abort()
            Issue.record("an upgrade without a bearer must be refused")
        } catch {
            #expect(error.httpStatus == 401)
        }
    }
}
