import Foundation
import Glibc
import RelayProtocol
import Synchronization
import Testing
import Trace
import WireRecording
import WireReplay
import Sync

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let now = Locked(Moment.zero)
    func set(ms: Int64) { now.withLock { $0 = Moment(nanoseconds: ms * 1_000_000) } }
    var read: @Sendable () -> Moment { { [self] in now.withLock { $0 } } }
}

func ms(_ v: Int64) -> Moment { Moment(nanoseconds: v * 1_000_000) }

let device = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", desktop = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
let upgradeHeaders: [(name: String, value: String)] = [
    ("Authorization", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1In0.x"), ("X-Device-ID", device), ("X-Token-Binding", device),
    ("X-Client-Type", "mobile"), ("X-Target-Desktop-Device-ID", desktop),
]

func register(_ session: String? = nil, token: String? = nil, device d: String = device) -> String {
    var p = #""deviceId":"\#(d)","deviceName":"phone","relayProtocolVersion":"1.6","targetDesktopDeviceId":"\#(desktop)""#
    if let session, let token { p += #","relaySessionId":"\#(session)","resumeToken":"\#(token)""# }
    return #"{"type":"register","payload":{\#(p)}}"#
}

func rpc(_ id: String, _ method: String, params: String = "{}", trace: String = "4bf92f3577b34da6a3ce929d0e0e4736") -> String {
    #"{"type":"rpc.request","payload":{"id":"\#(id)","method":"\#(method)","params":\#(params),"traceparent":"00-\#(trace)-00f067aa0ba902b7-01"}}"#
}

func response(_ id: String, trace: String = "4bf92f3577b34da6a3ce929d0e0e4736", result: String = #"{"pong":true}"#) -> String {
    #"{"payload":{"id":"\#(id)","isFinal":true,"result":\#(result),"traceparent":"00-\#(trace)-1111111111111111-01"},"type":"rpc.response"}"#
}

/// A recorded session written with the wire recorder on a manual clock (ms since the trace start; record
/// numbers: 0 open, 1 opened, 2 register, 3 registered, 4 heartbeat, 5 pong, 6 system.ping, 7 its answer,
/// 8 event, 9 and 10 leases, 11 close, 12-13 the refused socket):
/// socket 1 registers at 10, heartbeats at 5010 (pong at once), calls system.ping at 6000 (answered
/// 50 ms later), gets an event at 8000, renews a lease at 9000 and 29000, closes at 30000; socket 2 is
/// refused 401 at 31000.
func recordedSession(redact: Bool = false) throws -> RecordedSession {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(getpid())-\(UUID().uuidString).rtrace").path
    defer { unlink(path) }
    let clock = ManualClock()
    var options = TraceWriterOptions()
    options.redaction = redact ? .hashed : .raw
    let recorder = try WireRecorder(path: path, source: .relay, wallClockStart: "2026-12-01T10:00:00Z", options: options, clock: clock.read)
    let s = recorder.openSocket(url: "/ws/device-link", headers: upgradeHeaders)
    s.opened()
    clock.set(ms: 10)
    s.sent(.text(register()))
    clock.set(ms: 12)
    s.received(.text(#"{"expiresAt":"2026-12-02T10:00:00Z","relaySessionId":"S1","resumeToken":"TOKENTOKEN","sessionId":"S1","type":"registered"}"#))
    clock.set(ms: 5010)
    s.sent(.text(#"{"type":"heartbeat","payload":{}}"#))
    s.received(.text(#"{"type":"pong"}"#))
    clock.set(ms: 6000)
    s.sent(.text(rpc("R-1", "system.ping")))
    clock.set(ms: 6050)
    s.received(.text(response("R-1")))
    clock.set(ms: 8000)
    s.received(.text(#"{"eventId":7,"payload":{"eventType":"job:created","payload":{"jobId":"j1","sessionId":"s1"}},"sourceDeviceId":"\#(desktop)","type":"event"}"#))
    clock.set(ms: 9000)
    let lease = #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A1","sessionId":"s1","active":true}}}"#
    s.sent(.text(lease))
    clock.set(ms: 29000)
    s.sent(.text(lease.replacingOccurrences(of: "A1", with: "A2")))
    clock.set(ms: 30000)
    s.closed(code: 1001, reason: "", byClient: true)
    clock.set(ms: 31000)
    recorder.openSocket(url: "/ws/device-link", headers: upgradeHeaders).refused(status: 401, reason: "missing Authorization header")
    try recorder.close()
    return try RecordedSession.load(path: path)
}

extension [ReplayingRelayAction] {
    var sent: [String] { compactMap { if case .send(_, .text(let t)) = $0 { t } else { nil } } }
    var findings: [ReplayFinding] { compactMap { if case .finding(let f) = $0 { f } else { nil } } }
    var wakes: [Moment] { compactMap { if case .wake(let t) = $0 { t } else { nil } } }
}

let c1 = ReplayConnection(1), c2 = ReplayConnection(2), c3 = ReplayConnection(3)
let liveHeaders = upgradeHeaders.map { ReplayingRelayInput.HTTPField($0.name, $0.value) }

@Suite("ReplayingRelay")
struct ReplayingRelayTests {
    @Test("the recording loads socket by socket: upgrade, entries by side, the refusal")
    func loads() throws {
        let s = try recordedSession()
        #expect(s.sockets.count == 2)
        #expect(s.sockets[0].deviceId == device && s.sockets[0].desktopId == desktop && s.sockets[0].clientType == "mobile")
        #expect(s.sockets[0].entries.map(\.side) == [.client, .relay, .client, .relay, .client, .relay, .relay, .client, .client, .client])
        #expect(s.sockets[1].refusal == RecordedSession.Refusal(status: 401, reason: "missing Authorization header"))
    }

    @Test("a client that does what the recording did gets the recorded answers, with its own IDs, at the recorded offsets")
    func faithfulClient() throws {
        var r = ReplayingRelay(session: try recordedSession())
        #expect(r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(1000)) == [.accept(c1)])
        // register at +10 ms: registered 2 ms later (recorded latency)
        var a = r.handle(.frame(c1, .text(register())), at: ms(1010))
        #expect(a.sent.isEmpty && a.wakes == [ms(1012)])
        a = r.handle(.wake, at: ms(1012))
        #expect(a.sent.count == 1 && a.sent[0].contains(#""type":"registered""#) && a.sent[0].contains("TOKENTOKEN"))
        // heartbeat: answered at once, whatever the recording says
        a = r.handle(.frame(c1, .text(#"{"type":"heartbeat","payload":{"activeSessionId":"x"}}"#)), at: ms(6000))
        #expect(a.sent == [#"{"type":"pong"}"#] && a.findings.isEmpty)
        // the call, with the live client's own id and trace ID: answered 50 ms later with them
        a = r.handle(.frame(c1, .text(rpc("LIVE-9", "system.ping", trace: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))), at: ms(7000))
        #expect(a.sent.isEmpty && a.wakes.contains(ms(7050)))
        a = r.handle(.wake, at: ms(7050))
        let answer = try JSONValue(parsing: try #require(a.sent.first))
        #expect(answer["payload"]?["id"] == "LIVE-9")
        #expect(answer["payload"]?["traceparent"] == "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-1111111111111111-01")
        // the event: 2 s after the call (recorded 8000 - 6000), and >= registration + 7988
        #expect(!a.wakes.isEmpty)
        #expect(r.handle(.wake, at: ms(8999)).sent.isEmpty)
        a = r.handle(.wake, at: ms(9000))
        #expect(a.sent.count == 1 && a.sent[0].contains("job:created"))
        // three lease renewals where two were recorded (the appSessionId differs): periodic, fine
        for t: Int64 in [10_000, 30_000, 50_000] {
            let lease = #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"Z\#(t)","sessionId":"s1","active":true}}}"#
            #expect(r.handle(.frame(c1, .text(lease)), at: ms(t)).findings.isEmpty)
        }
        #expect(r.handle(.closed(c1, code: 1001, reason: ""), at: ms(51_000)).findings.isEmpty)
        // the second socket is refused as recorded
        #expect(r.handle(.upgrade(c2, target: "/ws/device-link", headers: liveHeaders), at: ms(52_000))
                == [.refuse(c2, status: 401, body: "missing Authorization header"), .finished])
        #expect(r.findings.isEmpty && r.isFinished)
        #expect(r.matchedFrames == 5 && r.servedFrames == 3)
    }

    @Test("speed divides the recorded delays")
    func speed() throws {
        var r = ReplayingRelay(session: try recordedSession(), options: ReplayingRelayOptions(speed: 2))
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        #expect(r.handle(.frame(c1, .text(register())), at: ms(5)).wakes == [ms(6)])
        _ = r.handle(.wake, at: ms(6))
        #expect(r.handle(.frame(c1, .text(rpc("L", "system.ping"))), at: ms(3000)).wakes.contains(ms(3025)))
    }

    @Test("a different method is reported naming the record the recording expected, and answered with an explicit error")
    func differentMethod() throws {
        var r = ReplayingRelay(session: try recordedSession())
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        _ = r.handle(.frame(c1, .text(register())), at: ms(10))
        _ = r.handle(.wake, at: ms(20))
        let a = r.handle(.frame(c1, .text(rpc("L1", "session.list"))), at: ms(100))
        let f = try #require(a.findings.first)
        #expect(f.kind == .unexpected && f.generation == 1 && f.record == 6)
        #expect(f.message.contains("rpc.request session.list") && f.message.contains("record #6, rpc.request system.ping"))
        let err = try JSONValue(parsing: try #require(a.sent.first))
        #expect(err["payload"]?["id"] == "L1" && err["payload"]?["error"]?["code"]?.intValue == ReplayingRelay.noRecordedAnswer)
        // at the close, the recorded call that never came is missing
        let end = r.handle(.closed(c1, code: 1001, reason: ""), at: ms(200)).findings
        #expect(end.map(\.kind) == [.missing] && end[0].record == 6)
    }

    @Test("changed params are a mismatch with the JSON differences; volatile values never are")
    func mismatch() throws {
        var r = ReplayingRelay(session: try recordedSession())
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        // another device ID, device name and timestamps are not differences
        let other = register().replacingOccurrences(of: #""deviceName":"phone""#, with: #""deviceName":"other""#)
        #expect(r.handle(.frame(c1, .text(other)), at: ms(10)).findings.isEmpty)
        let a = r.handle(.frame(c1, .text(rpc("L", "system.ping", params: #"{"x":1}"#))), at: ms(100))
        let f = try #require(a.findings.first)
        #expect(f.kind == .mismatch && f.record == 6 && f.differences == [#"$.payload.params.x: not expected, got 1"#])
        // lenient: still answered
        #expect(r.handle(.wake, at: ms(200)).sent.contains { $0.contains(#""id":"L""#) })
    }

    @Test("strict ends the socket at the first divergence with the record number")
    func strict() throws {
        var r = ReplayingRelay(session: try recordedSession(), options: ReplayingRelayOptions(strict: true))
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        let a = r.handle(.frame(c1, .text(register(device: device).replacingOccurrences(of: "1.6", with: "1.5"))), at: ms(10))
        #expect(a.findings.first?.kind == .mismatch && a.findings.first?.record == 2)
        #expect(a.contains(.close(c1, code: 1008, reason: "relaytrace replay: diverged at record #2")))
        #expect(r.handle(.closed(c1, code: 1008, reason: ""), at: ms(20)).findings.isEmpty, "nothing more reported after a strict end")
    }

    @Test("a redacted token is served as a stable stand-in, and presenting it back matches; a stale one does not")
    func standIns() throws {
        let session = try recordedSession(redact: true)
        var r = ReplayingRelay(session: session)
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        _ = r.handle(.frame(c1, .text(register())), at: ms(10))
        let registered = try JSONValue(parsing: try #require(r.handle(.wake, at: ms(20)).sent.first))
        let token = try #require(registered["resumeToken"]?.stringValue)
        #expect(token.utf8.count == 48 && token.allSatisfy { $0.isLetter || $0.isNumber } && !token.hasPrefix("rt:"))
        // The same placeholder always gives the same stand-in.
        var again = ReplayingRelay(session: session)
        _ = again.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        _ = again.handle(.frame(c1, .text(register())), at: ms(10))
        #expect(try JSONValue(parsing: try #require(again.handle(.wake, at: ms(20)).sent.first))["resumeToken"]?.stringValue == token)
    }

    @Test("more sockets than recorded are refused 503; recorded sockets never opened are reported at the stop")
    func extraAndUnopened() throws {
        var r = ReplayingRelay(session: try recordedSession())
        _ = r.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        _ = r.handle(.closed(c1, code: 1001, reason: ""), at: ms(5))
        var stop = ReplayingRelay(session: try recordedSession())
        _ = stop.handle(.upgrade(c1, target: "/ws/device-link", headers: liveHeaders), at: ms(0))
        let f = stop.handle(.stop, at: ms(100)).findings
        #expect(f.map(\.kind) == [.missing, .unopened] && f[1].generation == 2)
        _ = r.handle(.upgrade(c2, target: "/ws/device-link", headers: liveHeaders), at: ms(10))
        let extra = r.handle(.upgrade(c3, target: "/ws/device-link", headers: liveHeaders), at: ms(20))
        #expect(extra.findings.first?.kind == .extraSocket)
        #expect(extra.contains { if case .refuse(c3, 503, _) = $0 { true } else { false } })
    }

    @Test("an upgrade to another desktop or path is reported")
    func upgradeDiffers() throws {
        var r = ReplayingRelay(session: try recordedSession())
        var h = liveHeaders
        h[4] = .init("X-Target-Desktop-Device-ID", "another-desktop")
        let a = r.handle(.upgrade(c1, target: "/ws/other", headers: h), at: ms(0))
        #expect(a.findings.first?.kind == .upgrade && a.findings.first?.differences.count == 2)
        #expect(a.contains(.accept(c1)))
    }
}

@Suite("FrameMeaning")
struct FrameMeaningTests {
    @Test("kinds name the type, method and event; volatile members and request IDs are left out")
    func meanings() {
        let a = FrameMeaning(.text(rpc("A", "session.get", params: #"{"sessionId":"s","timestamp":1}"#, trace: String(repeating: "a", count: 32))))
        let b = FrameMeaning(.text(rpc("B", "session.get", params: #"{"sessionId":"s","timestamp":2}"#, trace: String(repeating: "b", count: 32))))
        #expect(a.kind == "rpc.request session.get" && a == b)
        #expect(FrameMeaning(.text(rpc("A", "session.get", params: #"{"sessionId":"t"}"#))) != FrameMeaning(.text(rpc("A", "session.get", params: #"{"sessionId":"s"}"#))))
        #expect(FrameMeaning(.text(#"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{}}}"#)).isPeriodic)
        #expect(FrameMeaning(.binary([1, 2])).kind == "binary")
        #expect(FrameMeaning(.text("not json")).kind == "text")
        #expect(FrameMeaning(.text(register(device: "d1")), deviceIds: ["d1"]) == FrameMeaning(.text(register(device: "d2")), deviceIds: ["d2"]))
    }
}
