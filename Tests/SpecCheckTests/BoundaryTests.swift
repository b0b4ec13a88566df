import Inspect
import RelayProtocol
import SpecCheck
import Testing
import Trace

/// A few records fed straight to the checker (no file): each SPEC number is pinned on both sides of its
/// tolerance, so changing a number or a tolerance turns a test red.
private struct MiniTrace {
    var wire = false
    var records: [TraceRecord] = []

    mutating func open(_ t: Double, _ g: UInt64 = 1, target: Bool = true) {
        let desktop = target ? #","X-Target-Desktop-Device-ID":"k""# : ""
        let h = #"{"url":"wss://r.example/ws/device-link","headers":{"Authorization":"Bearer x","X-Device-ID":"d","X-Token-Binding":"d","X-Client-Type":"mobile"\#(desktop)}}"#
        records.append(TraceRecord(kind: .transportOpen, time: .seconds(t), generation: g, direction: .outbound, payload: Array(h.utf8)))
    }

    mutating func send(_ t: Double, _ json: String, _ g: UInt64 = 1) {
        records.append(.frame(.text(json), time: .seconds(t), generation: g, direction: .outbound))
    }

    mutating func receive(_ t: Double, _ json: String, _ g: UInt64 = 1) {
        records.append(.frame(.text(json), time: .seconds(t), generation: g, direction: .inbound))
    }

    mutating func close(_ t: Double, _ g: UInt64 = 1) {
        records.append(TraceRecord(kind: .transportClosed, time: .seconds(t), generation: g, direction: .outbound, payload: Array(#"{"code":1001,"reason":"x"}"#.utf8)))
    }

    mutating func register(_ t: Double, token: Bool = false, _ g: UInt64 = 1) {
        let creds = token ? #","relaySessionId":"s","resumeToken":"tok""# : ""
        send(t, #"{"type":"register","payload":{"deviceId":"d","deviceName":"n","relayProtocolVersion":"1.6","targetDesktopDeviceId":"k"\#(creds)}}"#, g)
    }

    mutating func registered(_ t: Double, _ g: UInt64 = 1) {
        receive(t, #"{"type":"registered","sessionId":"s","resumeToken":"tok"}"#, g)
    }

    mutating func invalidResume(_ t: Double) { receive(t, #"{"type":"error","code":"invalidResume","message":"m"}"#) }

    mutating func heartbeat(_ t: Double) { send(t, #"{"type":"heartbeat","payload":{}}"#) }

    mutating func lease(_ t: Double, _ g: UInt64 = 1) {
        send(t, #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"a","sessionId":"s","active":true}}}"#, g)
    }

    /// The rules with findings, and the tally of `rule`.
    func check(_ rule: CheckRule, options: CheckOptions = CheckOptions()) -> (broken: Set<CheckRule>, tally: RuleTally) {
        var header = TraceHeader(seed: 1, wallClockStart: "2026-01-15T10:00:00Z")
        if wire { header.extra["wire"] = ["source": "proxy"] }
        let checker = TraceChecker(header: header, options: options)
        for (i, r) in records.enumerated() { checker.add(InspectedRecord(number: UInt64(i), record: r)) }
        let report = checker.finish()
        return (Set(report.findings.map(\.rule)), report.rules.first { $0.rule == rule }!)
    }

    /// Registered at 0.1 s on socket 1.
    static func registered() -> MiniTrace {
        var m = MiniTrace()
        m.open(0)
        m.register(0.05)
        m.registered(0.1)
        return m
    }
}

@Suite struct BoundaryTests {
    @Test(arguments: [(4.96, true), (4.94, false), (5.24, true), (5.26, false)])
    func firstHeartbeatAfterRegistration(at delay: Double, holds: Bool) {
        var m = MiniTrace.registered()
        m.heartbeat(0.1 + delay)
        m.close(0.1 + delay)
        #expect(m.check(.heartbeat).broken == (holds ? [] : [.heartbeat]))
        #expect(m.check(.heartbeat).tally.checked == 1)
    }

    @Test(arguments: [(4.76, true), (4.74, false), (5.24, true), (5.26, false)])
    func heartbeatInterval(_ interval: Double, holds: Bool) {
        var m = MiniTrace.registered()
        m.heartbeat(5.1)
        m.heartbeat(5.1 + interval)
        m.close(5.1 + interval)
        #expect(m.check(.heartbeat).broken == (holds ? [] : [.heartbeat]))
    }

    @Test(arguments: [(5.24, true), (5.26, false)])
    func aMissingHeartbeatBeforeTheClose(_ gap: Double, holds: Bool) {
        var m = MiniTrace.registered()
        m.heartbeat(5.1)
        m.close(5.1 + gap)
        #expect(m.check(.heartbeat).broken == (holds ? [] : [.heartbeat]))
    }

    @Test(arguments: [(15.24, true), (15.26, false)], [false, true])
    func watchdog(_ c: (silence: Double, holds: Bool), wire: Bool) {
        let (silence, holds) = c
        var m = MiniTrace.registered()
        m.wire = wire
        var t = 5.1
        while t < 0.1 + silence {
            m.heartbeat(t)
            t += 5
        }
        m.close(0.1 + silence)
        let (broken, tally) = m.check(.watchdog, options: CheckOptions(skip: [.heartbeat]))
        #expect(broken == (holds ? [] : [.watchdog]))
        #expect(tally.checked == 1)
    }

    @Test(arguments: [(10.24, true), (10.26, false)], [false, true])
    func handshake(_ c: (delay: Double, holds: Bool), wire: Bool) {
        let (delay, holds) = c
        var m = MiniTrace()
        m.wire = wire
        m.open(0)
        m.register(0)
        m.registered(delay)
        m.heartbeat(delay + 5)  // the client still on the socket after its registration
        #expect(m.check(.handshake).broken == (holds ? [] : [.handshake]))
    }

    @Test(arguments: [(0.16, true), (0.14, false), (0.44, true), (0.46, false)])
    func reRegisterDelay(_ delay: Double, holds: Bool) {
        var m = MiniTrace()
        m.open(0)
        m.register(0, token: true)
        m.invalidResume(0.1)
        m.register(0.1 + delay)
        #expect(m.check(.reRegister).broken == (holds ? [] : [.reRegister]))
        #expect(m.check(.reRegister).tally.checked == 1)
    }

    /// The loop window is rolling: an earlier refusal counts while it is less than 30 s old.
    @Test(arguments: [([0, 14, 29.9], true), ([0, 15, 30.1], false), ([0, 25, 35, 50], true), ([0, 25, 35, 56], false)])
    func theLoopEndsAtTheThirdRefusalWithin30s(_ refusals: [Double], ends: Bool) {
        var m = MiniTrace()
        m.open(0)
        m.register(0)
        for t in refusals {
            m.invalidResume(t + 0.01)
            m.register(t + 0.21)  // the client goes on regardless
        }
        // (The refusals are spaced far apart, so the handshake timeout is broken too: not this test's rule.)
        let (broken, tally) = m.check(.invalidResumeLoop, options: CheckOptions(skip: [.handshake]))
        #expect(broken == (ends ? [.invalidResumeLoop] : []))
        #expect(tally.checked == (ends ? 1 : 0))
    }

    @Test(arguments: [(20.24, true), (20.26, false)])
    func leaseRenewal(_ interval: Double, holds: Bool) {
        var m = MiniTrace.registered()
        m.lease(1)
        m.lease(1 + interval)
        m.close(1 + interval)
        #expect(m.check(.leaseRenewal, options: CheckOptions(skip: [.heartbeat, .watchdog])).broken == (holds ? [] : [.leaseRenewal]))
    }

    @Test(arguments: [(0.24, true), (0.26, false)])
    func leaseReissue(_ delay: Double, holds: Bool) {
        var m = MiniTrace.registered()
        m.lease(1)
        m.close(2)
        m.open(3, 2)
        m.register(3.05, token: true, 2)
        m.receive(3.1, #"{"type":"resumed","sessionId":"s"}"#, 2)
        m.lease(3.1 + delay, 2)
        #expect(m.check(.leaseReissue).broken == (holds ? [] : [.leaseReissue]))
        #expect(m.check(.leaseReissue).tally.checked == 1)
    }

    @Test(arguments: [("system.ping", 3.0), ("session.list", 60.0), ("plan.generateMarkdown", 180.0)], [(0.24, true), (0.26, false)])
    func requestTimeout(_ call: (method: String, timeout: Double), _ over: (by: Double, holds: Bool)) {
        var m = MiniTrace.registered()
        m.send(1, #"{"type":"rpc.request","payload":{"id":"r","method":"\#(call.method)","params":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#)
        m.close(1 + call.timeout + over.by)
        let (broken, tally) = m.check(.timeout, options: CheckOptions(skip: [.heartbeat, .watchdog]))
        #expect(broken == (over.holds ? [] : [.timeout]))
        #expect(tally.checked == 1)
    }

    /// A link socket (docs/DEVICE_LINK.md) names no desktop and sends `link.redeem` unregistered; any
    /// other socket without `X-Target-Desktop-Device-ID` breaks A4.
    @Test(arguments: [true, false])
    func aLinkSocketNamesNoDesktop(redeems: Bool) {
        var m = MiniTrace()
        m.open(0, target: false)
        if redeems {
            m.send(0.05, #"{"type":"link.redeem","payload":{"code":"K7QF-3M9X","deviceId":"d","deviceName":"n"}}"#)
        } else {
            m.register(0.05)
        }
        m.close(0.1)
        let (broken, tally) = m.check(.upgradeHeaders)
        #expect(broken == (redeems ? [] : [.upgradeHeaders]))
        #expect(tally.checked == 1)
    }

    /// A socket closed 2 s after registering has no heartbeat, renewal or timeout to judge.
    @Test func aShortSocketJudgesNoWait() {
        var m = MiniTrace.registered()
        m.lease(0.5)
        m.send(1, #"{"type":"rpc.request","payload":{"id":"r","method":"session.list","params":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#)
        m.close(2.1)
        for rule in [CheckRule.heartbeat, .watchdog, .leaseRenewal, .timeout] {
            #expect(m.check(rule).tally.status == .notApplicable, "\(rule)")
        }
        #expect(m.check(.heartbeat).broken.isEmpty)
    }

    /// The relay closing a silent socket, or answering a request late after the client left, is not the
    /// client's finding (a wire trace only knows what the client sent).
    @Test func whatTheRelayDidIsNotTheClients() {
        var m = MiniTrace.registered()
        m.wire = true
        m.heartbeat(5.1)
        // The client went quiet at 5.1 (it gave up, its close lost); the relay closes at 60 s.
        m.records.append(TraceRecord(kind: .transportClosed, time: .seconds(60), generation: 1, direction: .inbound, payload: Array(#"{"reason":"idle"}"#.utf8)))
        #expect(m.check(.watchdog).broken.isEmpty)
        #expect(m.check(.heartbeat).broken.isEmpty)
    }
}
