import Foundation
import Simulation
import Glibc
import RelayClient
import RelayProtocol
import Replay
import Synchronization
import Testing
import Trace
import WireRecording
import WireReplay
import Sync

/// A clock the test sets by hand (seconds since the trace start).
private final class SetClock: Sendable {
    private let now = Locked(Moment.zero)
    func set(_ seconds: Double) { now.withLock { $0 = Moment(nanoseconds: Int64((seconds * 1e9).rounded())) } }
    var read: @Sendable () -> Moment { { [self] in now.withLock { $0 } } }
}

/// A synthetic wire trace as `relay --record` would write it, on a clock the test sets: every record is
/// written with ``WireRecorder`` at the time the test says.
private final class Wire {
    static let device = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"
    static let desktop = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
    static let trace = "4bf92f3577b34da6a3ce929d0e0e4736"

    let path = FileManager.default.temporaryDirectory.appendingPathComponent("wire-replay-\(getpid())-\(UUID().uuidString).rtrace").path
    let clock = SetClock()
    let recorder: WireRecorder
    private var ids = 0

    init() throws {
        recorder = try WireRecorder(path: path, source: .relay, details: ["listen": "127.0.0.1:0"], wallClockStart: "2026-12-01T10:00:00Z",
                                    clock: clock.read)
    }

    deinit { unlink(path) }

    /// Sets the clock to `t` seconds.
    @discardableResult
    func at(_ t: Double) -> Wire {
        clock.set(t)
        return self
    }

    /// A socket whose upgrade carries the A4 headers (with `overrides`), answered 101.
    func open(at t: Double, device: String = Wire.device, clientType: String = "mobile", overrides: [String: String] = [:]) -> WireSocket {
        at(t)
        var headers: [(String, String)] = [("Host", "127.0.0.1:8787"), ("Upgrade", "websocket"), ("Connection", "Upgrade")]
        let a4 = [("Authorization", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyLWRldiJ9.dev"), ("X-Device-ID", device), ("X-Token-Binding", device),
                  ("X-Client-Type", clientType), ("X-Target-Desktop-Device-ID", Wire.desktop)]
        for (name, value) in a4 { headers.append((name, overrides[name] ?? value)) }
        let s = recorder.openSocket(url: "/ws/device-link", headers: headers, peer: "127.0.0.1:50000")
        at(t + 0.005)
        s.opened()
        return s
    }

    func sent(_ s: WireSocket, at t: Double, _ json: String) { at(t); s.sent(.text(json)) }
    func received(_ s: WireSocket, at t: Double, _ json: String) { at(t); s.received(.text(json)) }

    static func register(device: String = Wire.device, version: String = "1.6", session: String? = nil, token: String? = nil) -> String {
        var p: [String: JSONValue] = ["deviceId": .string(device), "deviceName": "synthetic phone", "relayProtocolVersion": .string(version),
                                      "targetDesktopDeviceId": .string(Wire.desktop)]
        if let session { p["relaySessionId"] = .string(session) }
        if let token { p["resumeToken"] = .string(token) }
        return JSONValue.object(["type": "register", "payload": .object(p)]).jsonText
    }

    static func registered(_ session: String = "sess-relay-1", token: String = "token-relay-1") -> String {
        #"{"type":"registered","sessionId":"\#(session)","relaySessionId":"\#(session)","resumeToken":"\#(token)","expiresAt":"2026-12-02T10:00:00.000Z"}"#
    }

    static let heartbeat = #"{"type":"heartbeat","payload":{}}"#
    static let pong = #"{"type":"pong"}"#

    /// Registers `s` at `t` (register, and the relay's registered 1 ms later).
    func register(_ s: WireSocket, at t: Double, session: String? = nil, token: String? = nil) {
        sent(s, at: t, Wire.register(session: session, token: token))
        if session != nil {
            received(s, at: t + 0.001, #"{"type":"resumed","sessionId":"\#(session!)","expiresAt":"2026-12-02T10:00:00.000Z"}"#)
        } else {
            received(s, at: t + 0.001, Wire.registered())
        }
    }

    /// A heartbeat at `t`, answered `pong` 1 ms later.
    func heartbeat(_ s: WireSocket, at t: Double) {
        sent(s, at: t, Wire.heartbeat)
        received(s, at: t + 0.001, Wire.pong)
    }

    /// An `rpc.request` at `t` answered after 50 ms.
    func call(_ s: WireSocket, at t: Double, _ method: String, params: String = "{}", key: String? = nil, answered: Bool = true) {
        ids += 1
        let id = "00000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(ids).count))\(ids)"
        let keyPart = key.map { #","idempotencyKey":"\#($0)""# } ?? ""
        sent(s, at: t, #"{"type":"rpc.request","payload":{"id":"\#(id)","method":"\#(method)","params":\#(params)\#(keyPart),"traceparent":"00-\#(Wire.trace)-00f067aa0ba902b7-01"}}"#)
        if answered {
            received(s, at: t + 0.05, #"{"type":"rpc.response","payload":{"id":"\#(id)","isFinal":true,"result":{"ok":true},"traceparent":"00-\#(Wire.trace)-b7ad6b7169203331-01"}}"#)
        }
    }

    static func lease(_ session: String, active: Bool) -> String {
        #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"APP-SESSION-OF-THE-CLIENT","sessionId":"\#(session)","active":\#(active)}}}"#
    }

    func close(_ s: WireSocket, at t: Double, code: Int? = 1001, byClient: Bool = true, clean: Bool = true) {
        at(t)
        s.closed(code: code, reason: byClient ? "bye" : "relay", byClient: byClient, clean: clean)
    }

    /// Closes the trace and reads it back.
    func records() throws -> (TraceHeader, [TraceRecord]) {
        try recorder.close()
        let reader = try TraceReader(path: path)
        return (reader.header, reader.readAll().entries.map(\.record))
    }

    /// Closes the trace and replays it into the model.
    func replay(_ options: WireReplayOptions = WireReplayOptions()) throws -> WireReplayReport {
        let (header, records) = try records()
        return try WireReplayer(header: header, records: records, options: options).run()
    }

    /// The trace record number of the first record for which `match` holds.
    func number(_ records: [TraceRecord], where match: (TraceRecord) -> Bool) -> Int? {
        records.firstIndex(where: match)
    }
}

private func text(_ r: TraceRecord) -> String { String(decoding: r.payload, as: UTF8.self) }

@Suite("Wire replay into the model")
struct WireReplayTests {
    // MARK: What must not be reported

    @Test("a conforming phone agrees: timer jitter inside the tolerance never adds up, inferred inputs are not partings")
    func aConformingPhoneAgreesDespiteJitter() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        // Each heartbeat 100 ms after the previous one's 5 s (400 ms off the 5 s grid by the fourth), one
        // 180 ms early (latency jitter makes an interval look short).
        for t in [5.121, 10.221, 15.041, 20.141] { w.heartbeat(s, at: t) }
        w.call(s, at: 7, "session.list", params: #"{"projectDirectory":"/p"}"#)
        w.call(s, at: 8, "session.update", params: #"{"sessionId":"s1","updateData":{"name":"x"}}"#, key: "k-1")
        w.close(s, at: 22)
        let report = try w.replay()
        #expect(report.partings.isEmpty, "\(report.text(all: true))")
        #expect(report.agrees)
        // open, register, four heartbeats, two calls, the close.
        #expect(report.matched == 9, "\(report.text(all: true))")
        #expect(report.inferences.map(\.input) == ["start", "call", "call", "stop"])
        #expect(report.inferences[0].detail.contains("no stored resume token"))
        #expect(report.inferences[3].detail.contains("the wire does not show"))
    }

    @Test("a tolerance shorter than the jitter turns the same phone into a timing parting")
    func aTighterToleranceCatchesTheJitter() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.heartbeat(s, at: 5.121)
        w.close(s, at: 7)
        let report = try w.replay(WireReplayOptions(tolerance: .milliseconds(50)))
        #expect(report.partings.map(\.kind) == [.timing], "\(report.text(all: true))")
        #expect(report.partings.first?.rule?.id == "A6.heartbeat")
    }

    @Test("a socket the client closes by itself and a new one it opens are inferred (stop, start), and a reconnect after the relay closed is not judged for its pacing")
    func closesReopensAndReconnectsAreInferences() throws {
        let w = try Wire()
        let a = w.open(at: 0)
        w.register(a, at: 0.020)
        w.heartbeat(a, at: 5.021)
        w.close(a, at: 8)  // the app went to the background, say
        let b = w.open(at: 9)
        w.register(b, at: 9.020, session: "sess-relay-1", token: "token-relay-1")
        w.close(b, at: 12, code: 1006, byClient: false, clean: false)  // the relay's side died
        // The client waits 1.3 s (the model's own ladder would reconnect at once): pacing is not SPEC 1.6.
        let c = w.open(at: 13.3)
        w.register(c, at: 13.320, session: "sess-relay-1", token: "token-relay-1")
        w.close(c, at: 16)
        let report = try w.replay()
        #expect(report.partings.isEmpty, "\(report.text(all: true))")
        #expect(report.inferences.map(\.input) == ["start", "stop", "start", "stop"], "\(report.inferences)")
        #expect(report.sockets == 3)
    }

    // MARK: Timing

    @Test("a 6 s heartbeat is reported at its record with A6: the client's interval against the model's")
    func aSixSecondHeartbeatIsReportedWithA6() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.heartbeat(s, at: 6.021)
        w.heartbeat(s, at: 12.022)
        w.close(s, at: 13)
        let report = try w.replay()
        let (_, records) = try w.records()
        #expect(!report.agrees)
        let first = try #require(report.shown(all: false).first)
        let heartbeat = try #require(w.number(records) { $0.kind == .frameText && $0.direction == .outbound && text($0).contains("heartbeat") })
        #expect(first.record == heartbeat)
        #expect(first.kind == .timing && first.what == "heartbeat")
        #expect(first.rule?.id == "A6.heartbeat" && first.rule?.section == "A6", "the rule ID of relaytrace check")
        #expect(first.clientTime == Moment(nanoseconds: 6_021_000_000) && first.modelTime == Moment(nanoseconds: 5_021_000_000))
        #expect(first.message == "your client sent its heartbeat at 6.021 s, 6.000 s after registered; the model sends it at 5.021 s, 5.000 s after registered")
        #expect(first.dependsOn == nil)
        // With --all the second is about its own interval: the model's timer followed the client's first heartbeat.
        #expect(report.partings.count == 2)
        #expect(report.partings.last?.message.contains("6.001 s after the previous heartbeat; the model sends it at 11.021 s, 5.000 s after the previous heartbeat") == true,
                "\(report.partings.last?.message ?? "")")
        #expect(report.text(all: false).contains("parting at record #\(heartbeat)"))
        #expect(report.json(all: false)["result"] == "parted")
    }

    @Test("a client that keeps a silent socket open past the watchdog: its close is reported against the model's at 15 s (A6)")
    func theWatchdogCloseIsComparedWithTheClients() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        // The relay answers nothing after registered: no pongs.
        for t in [5.021, 10.021, 15.021] { w.sent(s, at: t, Wire.heartbeat) }
        w.close(s, at: 20)
        let report = try w.replay()
        let close = try #require(report.partings.first { $0.what == "close" }, "\(report.text(all: true))")
        #expect(close.kind == .timing)
        #expect(close.rule?.id == "A6.watchdog" && close.rule?.summary.contains("silent for 15 s") == true)
        #expect(close.modelTime == Moment(nanoseconds: 15_021_000_000))
        #expect(close.message.contains("15.000 s after the last inbound message"), "\(close.message)")
        #expect(close.message.contains("1 more message on it after that"), "the heartbeat after the model's close is folded in: \(close.message)")
        #expect(report.partings.count == 1, "\(report.text(all: true))")
    }

    // MARK: Content

    @Test("content partings: the upgrade headers (A4), the register (A6/A7) and the close code (PROTOCOL §1), each with its JSON differences")
    func contentPartingsShowTheirDifferences() throws {
        let w = try Wire()
        let s = w.open(at: 0, overrides: ["X-Token-Binding": "some-other-binding"])
        w.sent(s, at: 0.020, Wire.register(version: "1.5"))
        w.received(s, at: 0.021, Wire.registered())
        w.heartbeat(s, at: 5.021)
        w.close(s, at: 6, code: 1000)
        let report = try w.replay()
        #expect(report.partings.map(\.what) == ["open", "register", "close"], "\(report.text(all: true))")
        #expect(report.partings.allSatisfy { $0.kind == .different && $0.dependsOn == nil })
        let open = report.partings[0], register = report.partings[1], close = report.partings[2]
        #expect(open.rule?.id == "A4.headers")
        #expect(open.differences.count == 1 && open.differences[0].hasPrefix("$.headers.X-Token-Binding: the model \"rt:redacted:"), "\(open.differences)")
        #expect(register.rule?.id == "A6.register")
        #expect(register.differences == [#"$.payload.relayProtocolVersion: the model "1.6", your client "1.5""#])
        #expect(close.rule?.section == "D" && close.rule?.id == nil, "no check rule judges the close code")
        #expect(close.message == "your client closed socket 1 with 1000; the model closes it with 1001")
    }

    @Test("a socket that names no desktop is one the model never opens (it waits for a link code): an extra open (A4)")
    func aSocketWithoutADesktopIsAnExtraOpen() throws {
        let w = try Wire()
        let s = w.open(at: 0, overrides: ["X-Target-Desktop-Device-ID": ""])
        w.close(s, at: 1)
        let report = try w.replay()
        let (_, records) = try w.records()
        let open = try #require(report.partings.first, "\(report.text(all: true))")
        #expect(report.partings.count == 1, "\(report.text(all: true))")
        #expect(open.kind == .extra && open.what == "open" && open.rule?.id == "A4.headers")
        #expect(open.record == records.firstIndex { $0.kind == .transportOpen })
        #expect(open.message.contains("the model opens none (no desktop") && open.message.hasSuffix("; your client sent or closed 1 more on it"), "\(open.message)")
        #expect(!report.agrees)
    }

    @Test("an invalidResume followed by a register that still carries the token is reported (A7)")
    func aReRegisterWithTheStaleTokenIsReported() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.sent(s, at: 0.020, Wire.register(session: "stale-session", token: "stale-token"))
        w.received(s, at: 0.030, #"{"type":"error","code":"invalidResume","message":"unknown session"}"#)
        w.sent(s, at: 0.232, Wire.register(session: "stale-session", token: "stale-token"))
        w.received(s, at: 0.240, #"{"type":"error","code":"invalidResume","message":"unknown session"}"#)
        w.close(s, at: 1)
        let report = try w.replay()
        let first = try #require(report.shown(all: false).first, "\(report.text(all: true))")
        #expect(first.what == "register" && first.kind == .different)
        #expect(first.rule?.id == "A7.reRegister", "the re-register came from the A7 timer: \(String(describing: first.rule))")
        #expect(first.differences.contains { $0.hasPrefix("$.payload.resumeToken: the model nothing, your client \"rt:redacted:") }, "\(first.differences)")
        #expect(report.inferences.first?.detail.contains("the resume credentials its register carries") == true)
    }

    // MARK: Missing and extra

    @Test("a client that sends no heartbeat: the model's is missing at 5 s after registered (A6)")
    func aMissingHeartbeatIsReported() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.call(s, at: 3, "session.list")
        w.close(s, at: 12)
        let report = try w.replay()
        let first = try #require(report.shown(all: false).first, "\(report.text(all: true))")
        #expect(first.kind == .missing && first.what == "heartbeat" && first.rule?.id == "A6.heartbeat")
        #expect(first.clientTime == nil && first.modelTime == Moment(nanoseconds: 5_021_000_000))
        #expect(first.message.hasPrefix("the model sends its heartbeat at 5.021 s, 5.000 s after registered; your client sent none"))
        #expect(report.partings.filter { $0.what == "heartbeat" }.count == 2, "at 5 s and 10 s; none is due before the close at 12 s")
    }

    @Test("requests the model refuses before sending (an unknown method, a mutation without a key, a snake_case key) are the client's extras (A8)")
    func refusedRequestsAreExtras() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.call(s, at: 1, "foo.bar")
        w.call(s, at: 2, "session.update", params: #"{"sessionId":"s1","updateData":{"name":"x"}}"#)
        w.call(s, at: 3, "session.list", params: #"{"project_directory":"/p"}"#)
        w.close(s, at: 4)
        let report = try w.replay()
        #expect(report.partings.map(\.kind) == [.extra, .extra, .extra], "\(report.text(all: true))")
        #expect(report.partings.map { $0.rule?.id } == ["A8.method", "A8.idempotencyKey", "A8.camelCase"])
        #expect(report.partings[0].message.hasSuffix("the model does not: unknown method foo.bar"))
        #expect(report.partings[1].message.hasSuffix("session.update needs an idempotency key"))
        #expect(report.partings[2].message.hasSuffix("snake_case key at $.payload.params.project_directory"), "\(report.partings[2].message)")
        #expect(report.inferences.filter { $0.input == "call" }.count == 3)
    }

    @Test("a client that keeps using its old socket after opening a new one parts (A5)")
    func twoLiveSocketsAreReported() throws {
        let w = try Wire()
        let a = w.open(at: 0)
        w.register(a, at: 0.020)
        w.heartbeat(a, at: 5.021)
        let b = w.open(at: 6)
        w.register(b, at: 6.020, session: "sess-relay-1", token: "token-relay-1")
        w.heartbeat(a, at: 10.021)
        w.close(b, at: 10.5)
        let report = try w.replay()
        let (_, records) = try w.records()
        let parting = try #require(report.partings.first, "\(report.text(all: true))")
        #expect(report.partings.count == 1, "\(report.text(all: true))")
        #expect(parting.rule?.id == "A5.oneLive" && parting.kind == .extra && parting.socket == 1)
        #expect(parting.record == records.lastIndex { $0.generation == 1 && $0.direction == .outbound && text($0).contains("heartbeat") })
        #expect(report.inferences.map(\.input) == ["start", "stop", "start", "stop"])
    }

    @Test("a missing lease renewal depends on an inference (the chat still open) and does not fail the replay")
    func aReportThatRestsOnAnInferenceSaysSo() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.sent(s, at: 2, Wire.lease("sess-chat", active: true))
        for k in 1...4 { w.heartbeat(s, at: 0.020 + Double(k) * 5) }
        w.close(s, at: 24)
        let report = try w.replay()
        let renewal = try #require(report.partings.first, "\(report.text(all: true))")
        #expect(report.partings.count == 1)
        #expect(renewal.kind == .missing && renewal.what == "event chat:timeline-interest" && renewal.rule?.id == "A11.renewal")
        #expect(renewal.modelTime == Moment(nanoseconds: 22_000_000_000))
        #expect(renewal.dependsOn?.contains("the chat on sess-chat stays open") == true)
        #expect(report.agrees, "a parting that rests on an inference does not fail the replay")
        #expect(report.json(all: true)["result"] == "agreed")
        #expect(report.inferences.map(\.input) == ["start", "claim", "stop"])
        #expect(report.text(all: false).contains("depends on an inference: the chat on sess-chat stays open"))
    }

    @Test("a lease the client releases is inferred as the view going away; the model's release matches it")
    func aReleasedLeaseIsInferred() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.sent(s, at: 1, Wire.lease("sess-chat", active: true))
        w.heartbeat(s, at: 5.021)
        w.sent(s, at: 6, Wire.lease("sess-chat", active: false))
        w.close(s, at: 7)
        let report = try w.replay()
        #expect(report.partings.isEmpty, "\(report.text(all: true))")
        #expect(report.inferences.map(\.input) == ["start", "claim", "release", "stop"])
    }

    @Test("what the model never sends (binary frames, text pings) is listed, not judged")
    func unexplainableMessagesAreListed() throws {
        let w = try Wire()
        let s = w.open(at: 0)
        w.register(s, at: 0.020)
        w.at(1)
        s.sent(.binary([1, 2, 3]))
        w.sent(s, at: 2, #"{"type":"ping"}"#)
        w.received(s, at: 2.001, Wire.pong)
        w.close(s, at: 3)
        let report = try w.replay()
        #expect(report.partings.isEmpty, "\(report.text(all: true))")
        #expect(report.notJudged.count == 2 && report.notJudged[0].hasSuffix("binary") && report.notJudged[1].hasSuffix("ping"), "\(report.notJudged)")
    }

    // MARK: Phones

    @Test("a trace of several clients replays one phone at a time; a choice is needed among several, desktops are never phones")
    func onePhoneAtATime() throws {
        let w = try Wire()
        let other = "0f1e2d3c-4b5a-4968-8776-655443322110"
        let desktop = w.open(at: 0, device: Wire.desktop, clientType: "desktop")
        let a = w.open(at: 0.1)
        w.register(a, at: 0.120)
        let b = w.open(at: 0.2, device: other)
        w.sent(b, at: 0.220, Wire.register(device: other))
        w.received(b, at: 0.221, Wire.registered("sess-b", token: "token-b"))
        w.heartbeat(a, at: 5.121)
        w.sent(b, at: 6.3, Wire.heartbeat)
        w.close(a, at: 7)
        w.close(b, at: 7)
        w.close(desktop, at: 7)
        let (header, records) = try w.records()
        #expect(WireReplayer.phones(in: records).map(\.deviceId) == [Wire.device, other])
        do {
            _ = try WireReplayer(header: header, records: records)
            Issue.record("two phones and no choice must be refused")
        } catch {
            #expect(error.isUsage && error.phones.count == 2 && error.message.contains(other))
        }
        let first = try WireReplayer(header: header, records: records, options: WireReplayOptions(device: Wire.device.uppercased())).run()
        #expect(first.partings.isEmpty && first.sockets == 1, "\(first.text(all: true))")
        let second = try WireReplayer(header: header, records: records, options: WireReplayOptions(device: other)).run()
        #expect(second.partings.map(\.what) == ["heartbeat"], "the other phone's 6 s heartbeat: \(second.text(all: true))")
        do {
            _ = try WireReplayer(header: header, records: records, options: WireReplayOptions(device: "nobody"))
            Issue.record("an unknown device must be refused")
        } catch {
            #expect(error.isUsage)
        }
        let desktopOnly = records.filter { $0.generation == 1 }
        do {
            _ = try WireReplayer(header: header, records: desktopOnly)
            Issue.record("a trace without a phone must be refused")
        } catch {
            #expect(!error.isUsage && error.phones.isEmpty)
        }
    }

    // MARK: Matching by meaning

    @Test("client frames mean the same to the model when only varying values differ (request, trace and app session IDs), their presence counts, and app state is left out")
    func framesAreMatchedByMeaning() {
        func meaning(_ text: String) -> FrameMeaning { FrameMeaning(.text(text), comparison: .model) }
        let traced = #"{"type":"rpc.request","payload":{"id":"A","method":"session.list","params":{},"traceparent":"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01"}}"#
        let untraced = #"{"type":"rpc.request","payload":{"id":"C","method":"session.list","params":{}}}"#
        let a = meaning(traced)
        let b = meaning(#"{"payload":{"method":"session.list","traceparent":"00-cccccccccccccccccccccccccccccccc-dddddddddddddddd-01","id":"B","params":{}},"type":"rpc.request"}"#)
        let noTrace = meaning(untraced)
        let otherParams = meaning(#"{"type":"rpc.request","payload":{"id":"D","method":"session.list","params":{"x":1},"traceparent":"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01"}}"#)
        #expect(a.kind == "rpc.request session.list" && a.type == "rpc.request" && a.content.canonicallyEquals(b.content))
        #expect(!a.content.canonicallyEquals(noTrace.content), "a missing traceparent is not a varying value (A8)")
        #expect(FrameMeaning(.text(traced)) == FrameMeaning(.text(untraced)), "the live comparison (relay --replay) leaves it out")
        #expect(!a.content.canonicallyEquals(otherParams.content))
        let beat = meaning(#"{"type":"heartbeat","payload":{"activeSessionId":"s1"}}"#)
        #expect(beat.content.canonicallyEquals(meaning(#"{"type":"heartbeat","payload":{}}"#).content))
        let lease = meaning(Wire.lease("s", active: true))
        #expect(lease.kind == "event chat:timeline-interest")
        #expect(lease.content.canonicallyEquals(meaning(Wire.lease("s", active: true).replacing("APP-SESSION-OF-THE-CLIENT", with: "other")).content))
        #expect(!lease.content.canonicallyEquals(meaning(Wire.lease("s", active: false)).content))
        #expect(!meaning(Wire.register(device: "d1")).content.canonicallyEquals(meaning(Wire.register(device: "d2")).content), "the model uses the recorded device ID")
        #expect(meaning("not json").kind == "text" && !meaning("not json").isMessage)
    }
}

/// A machine trace's socket records as a wire trace an in-app recorder would have written: what crossed
/// the wire, without the client's inputs, actions and timers.
func wireTrace(fromMachineTrace path: String) throws -> (TraceHeader, [TraceRecord]) {
    let reader = try TraceReader(path: path)
    let socket: Set<RecordKind> = [.transportOpen, .transportOpened, .frameText, .frameBinary, .transportClosed, .transportFailed]
    let records = reader.readAll().entries.map(\.record).filter { socket.contains($0.kind) && $0.generation != nil }
    var header = reader.header
    header.extra["wire"] = ["source": "recorder", "from": "simulation"]
    return (header, records)
}

@Suite("Wire replay of simulated sessions")
struct SimulatedWireReplayTests {
    /// The model's own client in every scenario (calls, leases, handover, background and foreground, invalid
    /// resumes, timeouts, a token refresh, a restart), seen only as its wire: every open, message and close
    /// of the client matched, with the inputs inferred from its traffic.
    @Test(arguments: Scenario.all.map(\.name).filter { !$0.hasPrefix("watch") })
    func everySimulatedSessionSeenOnTheWireAgreesWithTheModel(name: String) throws {
        let path = try simulatedTrace(name)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (header, records) = try wireTrace(fromMachineTrace: path)
        let report = try WireReplayer(header: header, records: records).run()
        #expect(report.partings.isEmpty, "\(name): \(report.text(all: true))")
        // Link sockets (the link scenario: link.redeem first) are left out, and listed.
        var firstSent: [UInt64: String] = [:]
        for r in records where r.kind == .frameText && r.direction == .outbound {
            if let g = r.generation, firstSent[g] == nil { firstSent[g] = text(r) }
        }
        let linkSockets = Set(firstSent.filter { $0.value.contains(#""type":"link.redeem""#) }.keys)
        #expect(linkSockets.isEmpty == (name != "link"), "\(name): link sockets \(linkSockets)")
        let clientActs = records.filter {
            $0.direction == .outbound && [.transportOpen, .frameText, .transportClosed].contains($0.kind) && !linkSockets.contains($0.generation ?? 0)
        }.count
        #expect(report.matched == clientActs, "\(name): every open, message and close matched: \(report.matched) of \(clientActs)")
        #expect(report.notJudged.count == linkSockets.count && report.notJudged.allSatisfy { $0.contains("a link socket (link.redeem)") }, "\(report.notJudged)")
        if name == "tour" {
            // A model with another heartbeat parts from the same session at its first heartbeat.
            var tuning = ClientTuning.spec
            tuning.heartbeatInterval = .seconds(6)
            let changed = try WireReplayer(header: header, records: records, options: WireReplayOptions(tuning: tuning)).run()
            let first = try #require(changed.shown(all: false).first)
            #expect(first.what == "heartbeat" && first.kind == .timing && first.rule?.id == "A6.heartbeat", "\(changed.text(all: false))")
        }
    }
}
