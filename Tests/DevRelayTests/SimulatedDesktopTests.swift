import DevRelay
import RelayProtocol
import Testing

/// A desktop on virtual time, with its timers, fed frames as the relay would forward them.
struct DesktopHarness {
    var desktop: SimulatedDesktop
    var now = Moment.zero
    var timers: [DesktopTimer: Moment] = [:]

    init(seed: UInt64 = 5, configure: (inout SimulatedDesktopConfiguration) -> Void = { _ in }) {
        var c = SimulatedDesktopConfiguration(deviceId: desktopId.uppercased(), userId: userA, seed: seed)
        configure(&c)
        desktop = SimulatedDesktop(configuration: c)
    }

    @discardableResult
    mutating func feed(_ input: DesktopInput) -> [DesktopAction] {
        let actions = desktop.handle(input, at: now)
        for a in actions {
            if case .armTimer(let t, let d) = a { timers[t] = d }
            if case .cancelTimer(let t) = a { timers[t] = nil }
        }
        return actions
    }

    @discardableResult
    mutating func advance(to target: Moment) -> [DesktopAction] {
        var all: [DesktopAction] = []
        while let next = timers.filter({ $0.value <= target }).min(by: { ($0.value, $0.key.description) < ($1.value, $1.key.description) }) {
            timers[next.key] = nil
            now = max(now, next.value)
            all += feed(.timerFired(next.key))
        }
        now = max(now, target)
        return all
    }

    @discardableResult
    mutating func advance(by d: Duration) -> [DesktopAction] { advance(to: now + d) }

    /// Starts, connects and registers.
    mutating func ready() {
        feed(.start)
        feed(.connected)
        feed(.frame(.text(#"{"type":"registered","sessionId":"S","relaySessionId":"S","resumeToken":"T","expiresAt":"x"}"#)))
    }

    static func request(_ id: String, _ method: String, key: String? = nil, params: JSONValue = [:], trace: TraceParent? = nil) -> DesktopInput {
        var payload: [String: JSONValue] = ["id": .string(id), "method": .string(method), "params": params, "clientId": .string(phoneId)]
        if let key { payload["idempotencyKey"] = .string(key) }
        if let trace { payload["traceparent"] = .string(trace.header) }
        return .frame(.text(JSONValue.object(["type": "rpc.request", "payload": .object(payload)]).jsonText))
    }

    static func interest(_ session: String, active: Bool) -> DesktopInput {
        let e = EventMessage(eventType: EventNames.chatTimelineInterest,
                             payload: TimelineInterest(appSessionId: "A1", sessionId: session, active: active).json,
                             sourceDeviceId: phoneId, targetDeviceId: desktopId)
        return .frame(.text((try? RelayMessage.event(e).encodedText()) ?? ""))
    }
}

extension [DesktopAction] {
    var sentJSON: [JSONValue] {
        compactMap { if case .send(.text(let t)) = $0 { try? JSONValue(parsing: t) } else { nil } }
    }
    var responses: [JSONValue] { sentJSON.filter { $0["type"] == "rpc.response" }.compactMap { $0["payload"] } }
    var events: [EventMessage] {
        compactMap { if case .send(.text(let t)) = $0, case .event(let e)? = try? RelayMessage(decodingText: t) { e } else { nil } }
    }
}

@Suite struct SimulatedDesktopTests {
    let trace = try! TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

    @Test func connectsAsADesktopTheRelayAccepts() throws {
        var h = DesktopHarness()
        let actions = h.feed(.start)
        guard case .connect(let request)? = actions.first else { Issue.record("no connect"); return }
        let identity = try UpgradeCheck.check(request).get()
        #expect(identity.kind == .desktop && identity.deviceId == desktopId && identity.userId == userA)
        let reg = h.feed(.connected).sentJSON
        #expect(reg.first?["type"] == "register")
        #expect(reg.first?["payload"]?["deviceId"] == .string(desktopId))
        h.feed(.frame(.text(#"{"type":"registered","sessionId":"S","resumeToken":"T","expiresAt":"x"}"#)))
        #expect(h.desktop.phase == .ready)
        #expect(h.advance(by: .seconds(20)).sentJSON.first?["type"] == "heartbeat")
    }

    @Test func pingIsAnsweredAtOnceWithClientIdAndAChildTraceparent() throws {
        var h = DesktopHarness()
        h.ready()
        let r = try #require(h.feed(DesktopHarness.request("P1", "system.ping", trace: trace)).responses.first)
        #expect(r["id"] == "P1")
        #expect(r["clientId"] == .string(phoneId))
        let tp = try TraceParent(parsing: try #require(r["traceparent"]?.stringValue))
        #expect(tp.traceId == trace.traceId)
        #expect(tp.parentId != trace.parentId)
    }

    @Test func otherMethodsAnswerAfterADelayIn20To200ms() throws {
        var h = DesktopHarness()
        h.ready()
        #expect(h.feed(DesktopHarness.request("Q1", "session.list")).responses.isEmpty)
        let deadline = try #require(h.timers.first { if case .respond = $0.key { true } else { false } }?.value)
        #expect(deadline >= .seconds(0.02) && deadline <= .seconds(0.2))
        #expect(h.advance(by: .milliseconds(200)).responses.first?["result"]?["sessions"]?.arrayValue?.count == 2)
    }

    @Test func everyCatalogueMethodGetsAResult() {
        var h = DesktopHarness()
        h.ready()
        for (i, m) in RpcCatalogue.all.enumerated() {
            h.feed(DesktopHarness.request("M\(i)", m.name, key: m.needsIdempotencyKey ? "K\(i)" : nil))
        }
        let answers = h.advance(by: .seconds(1)).responses
        let all = answers.filter { $0["result"] != nil }
        #expect(all.count >= RpcCatalogue.methodCount - 1)   // system.ping was answered at once
        #expect(answers.allSatisfy { $0["error"] == nil })
        #expect(h.desktop.answeredCount == RpcCatalogue.methodCount)
    }

    @Test func unknownMethodIsMethodNotFound() {
        var h = DesktopHarness()
        h.ready()
        h.feed(DesktopHarness.request("U1", "nope.nothing"))
        #expect(h.advance(by: .seconds(1)).responses.first?["error"]?["code"] == .int(-32601))
    }

    @Test func idempotencyKeyGivesTheSameResultUnderTheNewIdAndOneJob() throws {
        var h = DesktopHarness()
        h.ready()
        h.feed(DesktopHarness.request("A", "actions.createImplementationPlan", key: "K1", params: ["sessionId": "s1"]))
        let first = h.advance(by: .milliseconds(200))
        h.feed(DesktopHarness.request("B", "actions.createImplementationPlan", key: "K1", params: ["sessionId": "s1"]))
        let rest = h.advance(by: .seconds(10))
        let a = try #require(first.responses.first), b = try #require(rest.responses.first)
        #expect(a["id"] == "A" && b["id"] == "B")
        #expect(a["result"] == b["result"])
        #expect(a["result"]?["jobId"]?.stringValue?.hasPrefix("job-") == true)
        let types = (first + rest).events.map(\.eventType)
        #expect(types == ["job:created", "job:status-changed", "job:stream-progress", "job:stream-progress", "job:stream-progress", "job:finalized"])
        #expect((first + rest).events.allSatisfy { $0.payload["jobId"] == a["result"]?["jobId"] && $0.payload["sessionId"] == "s1" })
    }

    @Test func timelineSnapshotsFlowWhileTheLeaseIsActive() {
        var h = DesktopHarness()
        h.ready()
        var snaps = h.feed(DesktopHarness.interest("s1", active: true)).events
        snaps += h.advance(to: .seconds(10)).events
        let revs = snaps.compactMap { (try? $0.decodePayload(as: TimelineUpdated.self))?.revision }
        #expect(revs == [1, 2, 3, 4])                       // at 0, 3, 6, 9 s
        h.feed(DesktopHarness.interest("s1", active: false))
        #expect(h.advance(to: .seconds(30)).events.isEmpty)
        #expect(h.desktop.leases.isEmpty)
    }

    @Test func leaseRenewalKeepsItAliveAndItExpiresWithout() {
        var h = DesktopHarness()
        h.ready()
        h.feed(DesktopHarness.interest("s1", active: true))
        h.advance(to: .seconds(20))
        h.feed(DesktopHarness.interest("s1", active: true))   // renewed: now expires at 65 s
        #expect(h.advance(to: .seconds(64)).events.count > 0)
        #expect(h.desktop.leases["s1"] != nil)
        let after = h.advance(to: .seconds(70)).events
        #expect(after.isEmpty)
        #expect(h.desktop.leases["s1"] == nil)
        let snap = h.feed(DesktopHarness.interest("s1", active: true)).events
        #expect((try? snap.first?.decodePayload(as: TimelineUpdated.self))?.revision == 1)
    }

    @Test func ignorePingsFaultAndWindow() throws {
        var h = DesktopHarness()
        h.ready()
        let faults = try FaultScript.parse("from 0s to 10s desktop ignore-pings").schedule.compactMap { if case .desktop(let f) = $0.fault { f } else { nil } }
        for f in faults { h.feed(.fault(f)) }
        #expect(h.feed(DesktopHarness.request("P1", "system.ping")).responses.isEmpty)
        h.advance(to: .seconds(10))
        #expect(h.feed(DesktopHarness.request("P2", "system.ping")).responses.count == 1)
    }

    @Test func disconnectWindowClosesThenReconnects() {
        var h = DesktopHarness()
        h.ready()
        let a = h.feed(.fault(DesktopFault(.disconnect(code: nil), until: .seconds(30))))
        #expect(a.contains { if case .close(1000, _) = $0 { true } else { false } })
        #expect(h.desktop.phase == .offline)
        #expect(h.advance(to: .seconds(29)).isEmpty)
        #expect(h.advance(to: .seconds(30)).contains { if case .connect = $0 { true } else { false } })
    }

    @Test func unexpectedCloseReconnectsAfterTheDelay() {
        var h = DesktopHarness()
        h.ready()
        h.feed(.closed(code: 1012, reason: "restart"))
        #expect(h.desktop.phase == .waiting)
        #expect(h.advance(by: .seconds(1)).contains { if case .connect = $0 { true } else { false } })
    }
}

/// The relay and the desktop wired together as the lead's runner would: the test plays the phone.
@Suite struct RelayDesktopWiringTests {
    struct World {
        var relay = RelayHarness()
        var desk = DesktopHarness()
        var deskConn = ConnectionID(100)
        var toPhone: [WireFrame] = []
        var phone = ConnectionID(0)

        /// Performs desktop actions against the relay and relay actions against the desktop until quiet.
        mutating func pump(_ desktopActions: [DesktopAction], _ relayActions: [RelayAction] = []) {
            var dq = desktopActions, rq = relayActions
            while !dq.isEmpty || !rq.isEmpty {
                for a in dq {
                    switch a {
                    case .connect(let req):
                        deskConn = ConnectionID(deskConn.rawValue + 1)
                        rq += relay.feed(.upgrade(deskConn, req))
                    case .send(let f): rq += relay.feed(.frame(deskConn, f))
                    case .close(let code, let reason): rq += relay.feed(.closed(deskConn, code: code, reason: reason))
                    default: break
                    }
                }
                dq = []
                for a in rq {
                    switch a {
                    case .acceptUpgrade(let c) where c == deskConn: dq += desk.feed(.connected)
                    case .send(let c, let f) where c == deskConn: dq += desk.feed(.frame(f))
                    case .send(let c, let f) where c == phone: toPhone.append(f)
                    case .close(let c, let code, let reason) where c == deskConn: dq += desk.feed(.closed(code: code, reason: reason))
                    default: break
                    }
                }
                rq = []
            }
        }

        mutating func advance(by d: Duration) {
            let target = relay.now + d
            desk.now = relay.now
            pump(desk.advance(to: target), relay.advance(to: target))
        }
    }

    @Test func aPhoneCallReachesTheSimulatedDesktopAndComesBack() throws {
        var w = World()
        w.pump(w.desk.feed(.start))
        #expect(w.desk.desktop.phase == .ready)
        let (p, _) = try w.relay.phone()
        w.phone = p
        let trace = try TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        w.pump([], w.relay.send(p, .rpcRequest(RpcRequest(id: "C1", method: "system.ping", traceparent: trace))))
        let reply = w.toPhone.compactMap { if case .text(let t) = $0 { try? RelayMessage(decodingText: t) } else { nil } }
        guard case .rpcResponse(let r)? = reply.last else { Issue.record("no response: \(reply)"); return }
        #expect(r.id == "C1" && r.traceparent?.traceId == trace.traceId && r.error == nil)
        // A lease from the phone brings snapshots back to the phone.
        w.toPhone = []
        w.pump([], w.relay.send(p, .event(EventMessage(TimelineInterest(appSessionId: "A", sessionId: "s9", active: true)))))
        w.advance(by: .seconds(4))
        let snaps = w.toPhone.compactMap { f -> TimelineUpdated? in
            guard case .text(let t) = f, case .event(let e)? = try? RelayMessage(decodingText: t) else { return nil }
            return try? e.decodePayload(as: TimelineUpdated.self)
        }
        #expect(snaps.map(\.revision) == [1, 2])
        #expect(snaps.allSatisfy { $0.sessionId == "s9" })
    }
}
