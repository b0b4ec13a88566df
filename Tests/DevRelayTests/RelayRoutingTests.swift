import DevRelay
import RelayProtocol
import Testing

@Suite struct RelayRoutingTests {
    let trace = try! TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

    @Test func rpcGoesToTheTargetDesktopWithClientIdAndBackByClientId() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (p, _) = try h.phone()
        let req = RpcRequest(id: "R1", method: "session.get", params: ["sessionId": "s1"], traceparent: trace)
        let fwd = h.send(p, .rpcRequest(req)).json(to: d)
        #expect(fwd.count == 1)
        #expect(fwd.first?["payload"]?["clientId"] == .string(phoneId))
        #expect(fwd.first?["payload"]?["method"] == "session.get")
        #expect(fwd.first?["payload"]?["traceparent"] == .string(trace.header))
        let response = #"{"type":"rpc.response","payload":{"id":"R1","result":{"ok":true},"isFinal":true,"clientId":"\#(phoneId)","traceparent":"\#(trace.header)"}}"#
        let back = h.sendText(d, response).json(to: p)
        #expect(back.count == 1)
        #expect(back.first?["payload"]?["clientId"] == nil)
        #expect(back.first?["payload"]?["id"] == "R1")
        #expect(back.first?["payload"]?["traceparent"] == .string(trace.header))
    }

    @Test func responseWithoutClientIdIsAnError() throws {
        var h = RelayHarness()
        let d = h.desktop()
        _ = try h.phone()
        #expect(h.sendText(d, #"{"type":"rpc.response","payload":{"id":"R1","result":{}}}"#).errors(to: d) == [.missingClientId])
    }

    @Test func desktopOfflineIsAnsweredByTheRelayEchoingTraceparent() throws {
        var h = RelayHarness()
        let (p, _) = try h.phone()
        let m = h.send(p, .rpcRequest(RpcRequest(id: "R2", method: "system.ping", traceparent: trace))).messages(to: p)
        #expect(m == [.rpcResponse(RpcResponse(id: "R2", result: nil, error: RpcErrorBody(code: -32010, message: "Desktop is offline"),
                                                isFinal: true, traceparent: trace))])
    }

    @Test func aPhoneTargetingAnotherDesktopGetsOfflineAndLegacyPhonesUseAnyDesktop() throws {
        var h = RelayHarness()
        let other = "11111111-2222-4333-8444-555555555555"
        let d = h.desktop(device: other)
        let (p, _) = try h.phone()   // targets desktopId, which is not connected
        let a = h.send(p, .rpcRequest(RpcRequest(id: "R3", method: "system.ping")))
        #expect(a.messages(to: p).count == 1)
        #expect(a.frames(to: d).isEmpty)
        let legacy = h.open(.mobile, device: "aaaaaaaa-2222-4333-8444-555555555555")
        h.send(legacy, .register(RegisterPayload(deviceId: "aaaaaaaa-2222-4333-8444-555555555555", deviceName: "Old")), form: .legacy)
        let fwd = h.send(legacy, .rpcRequest(RpcRequest(id: "R4", method: "system.ping")), form: .legacy)
        #expect(fwd.frames(to: d).count == 1)
    }

    @Test func otherUsersAreIsolated() throws {
        var h = RelayHarness()
        _ = h.desktop(user: "bob")
        let (p, _) = try h.phone()
        let m = h.send(p, .rpcRequest(RpcRequest(id: "R5", method: "system.ping"))).messages(to: p)
        guard case .rpcResponse(let r)? = m.first else { Issue.record("no offline response"); return }
        #expect(r.error?.code == -32010)
    }

    @Test func desktopEventsGetIdsAndGoToPhones() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (p, _) = try h.phone()
        h.advance(to: .seconds(2))
        let ev = h.send(d, .event(EventMessage(eventType: "job:created", payload: ["jobId": "j1", "sessionId": "s1"]))).events(to: p)
        #expect(ev.count == 1)
        let e = try #require(ev.first)
        #expect(e.eventId == 2)   // 1 was the desktop's device-status online
        #expect(e.sourceDeviceId == desktopId)
        #expect(e.targetDeviceId == nil)
        #expect(e.timestamp == "2026-01-15T12:00:02.000Z")
        let raw = h.log.json(to: p).last
        #expect(raw?["targetDeviceId"] == .null)
    }

    @Test func phoneEventsGoToTheTargetDesktop() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (p, _) = try h.phone()
        let interest = TimelineInterest(appSessionId: "A1", sessionId: "s1", active: true)
        let ev = h.send(p, .event(EventMessage(interest))).events(to: d)
        #expect(ev.count == 1)
        #expect(ev.first?.sourceDeviceId == phoneId)
        #expect(try ev.first?.decodePayload(as: TimelineInterest.self) == interest)
    }

    @Test func deviceStatusOnlineAndDisconnected() throws {
        var h = RelayHarness()
        let (p, _) = try h.phone()
        let d = h.desktop()
        let online = h.log.events(to: p)
        #expect(try online.map { try $0.decodePayload(as: DeviceStatus.self) } == [DeviceStatus(deviceId: desktopId, status: .online)])
        let gone = h.feed(.closed(d, code: 1006, reason: "")).events(to: p)
        #expect(try gone.first?.decodePayload(as: DeviceStatus.self).status == .disconnected)
    }

    @Test func replayAboveLastEventIdWithGap() throws {
        var h = RelayHarness()
        let d = h.desktop()                      // event 1: device-status online (nobody listening)
        for i in 0..<3 { h.send(d, .event(EventMessage(eventType: "job:created", payload: ["jobId": .string("j\(i)"), "sessionId": "s"]))) }
        // events 1...4 buffered; a phone that saw up to 2 gets 3 and 4.
        let c = h.open(.mobile, device: phoneId, target: desktopId)
        let a = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", lastEventId: 2, relayProtocolVersion: "1.6")))
        #expect(a.events(to: c).map(\.eventId) == [3, 4])
        // 600 more events: the buffer keeps the last 500 (ids 105...604); a phone at 50 sees a gap first.
        for i in 0..<600 { h.send(d, .event(EventMessage(eventType: "job:stream-progress", payload: ["jobId": .string("j\(i)"), "sessionId": "s"]))) ; h.advance(by: .milliseconds(40)) }
        let c2 = h.open(.mobile, device: "bbbbbbbb-2222-4333-8444-555555555555", target: desktopId)
        let b = h.send(c2, .register(RegisterPayload(deviceId: "bbbbbbbb-2222-4333-8444-555555555555", deviceName: "P2", lastEventId: 50,
                                                       relayProtocolVersion: "1.6")))
        let events = b.events(to: c2)
        let gap = try #require(events.first).decodePayload(as: EventReplayGap.self)
        #expect(gap == EventReplayGap(lastEventId: 50, oldestBufferedId: 105, latestBufferedId: 604))
        #expect(events.count == 501)
        #expect(events.last?.eventId == 604)
    }

    @Test func replayBufferForgetsEventsAfter300Seconds() throws {
        var h = RelayHarness()
        let d = h.desktop()
        for _ in 0..<5 { h.send(d, .heartbeat(HeartbeatPayload())) ; h.advance(by: .seconds(50)) ; h.send(d, .event(EventMessage(eventType: "session-updated", payload: ["sessionId": "s"]))) }
        // Events 2...6 at 50, 100, ... 250 s; the silent desktop is dropped at 310 s (event 7,
        // device-status disconnected). At 360 s, events 1 (0 s) and 2 (50 s) are older than 300 s.
        h.advance(to: .seconds(360))
        let c = h.open(.mobile, device: phoneId, target: desktopId)
        let a = h.send(c, .register(RegisterPayload(deviceId: phoneId, deviceName: "P", lastEventId: 0, relayProtocolVersion: "1.6")))
        let ids = a.events(to: c).map { $0.eventType == EventNames.eventReplayGap ? -1 : ($0.eventId ?? 0) }
        #expect(ids == [-1, 3, 4, 5, 6, 7])
    }

    @Test func terminalBindAckAndPTC1Routing() throws {
        var h = RelayHarness()
        let d = h.desktop()
        let (p, _) = try h.phone()
        let (p2, _) = try h.phone(device: "cccccccc-2222-4333-8444-555555555555")
        let ack = h.send(p, .terminalBind(TerminalBind(sessionId: "term-1", includeSnapshot: true)))
        #expect(ack.messages(to: p) == [.terminalBound(sessionId: "term-1")])
        #expect(ack.frames(to: d).count == 1)
        let frame = try TerminalFrame(sessionId: "term-1", data: Array("ls\r\n".utf8)).encoded()
        let routed = h.feed(.frame(d, .binary(frame)))
        #expect(routed.frames(to: p) == [.binary(frame)])
        #expect(routed.frames(to: p2).isEmpty)
        let other = try TerminalFrame(sessionId: "term-2", data: [1]).encoded()
        #expect(h.feed(.frame(d, .binary(other))).frames(to: p).isEmpty)
        h.send(p, .terminalUnbind(TerminalBind(sessionId: "term-1")))
        #expect(h.feed(.frame(d, .binary(frame))).frames(to: p).isEmpty)
        // Garbage binary is dropped, never a crash.
        #expect(h.feed(.frame(d, .binary([0x50, 0x54]))).frames(to: p).isEmpty)
    }
}
