import RelayProtocol
import Testing

private func decode(_ text: String) -> Result<RelayMessage, MessageDecodeError> {
    do throws(MessageDecodeError) { return .success(try RelayMessage(decodingText: text)) } catch { return .failure(error) }
}

private let tp = try! TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

/// One message of every kind, with the 1.6 fields filled in as a 1.6 peer would.
private let everyMessage: [RelayMessage] = [
    .register(RegisterPayload(deviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", deviceName: "Alice's iPhone",
                              relaySessionId: "Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D", resumeToken: "tok", lastEventId: 1287,
                              relayProtocolVersion: "1.6", targetDesktopDeviceId: "desk")),
    .register(RegisterPayload(deviceId: "d", deviceName: "n", relayProtocolVersion: "1.6")),
    .heartbeat(HeartbeatPayload(activeSessionId: "sess-1")),
    .heartbeat(HeartbeatPayload()),
    .ping,
    .pong,
    .rpcRequest(RpcRequest(id: "R1", method: "session.update", params: ["sessionId": "s", "updateData": ["name": "x"]],
                           idempotencyKey: "K1", traceparent: tp)),
    .rpcRequest(RpcRequest(id: "R2", method: "system.ping", params: .null)),
    .rpcResponse(RpcResponse(id: "R1", result: ["ok": true], isFinal: true, traceparent: tp)),
    .rpcResponse(RpcResponse(id: "R2", result: .null)),
    .rpcResponse(RpcResponse(id: "R3", error: RpcErrorBody(.desktopOffline, message: "Desktop is offline", data: ["retry": 1]),
                             isFinal: true)),
    .event(EventMessage(eventType: "chat:timeline-interest", payload: ["appSessionId": "A", "sessionId": "s", "active": true])),
    .event(EventMessage(eventType: "device-status", payload: ["deviceId": "d", "status": "online"], eventId: 42,
                        sourceDeviceId: "relay", targetDeviceId: nil, timestamp: "2026-01-01T00:00:00Z")),
    .event(EventMessage(eventType: "job:created", payload: ["jobId": "j", "sessionId": "s"], eventId: 43,
                        sourceDeviceId: "desk", targetDeviceId: "phone", timestamp: "2026-01-01T00:00:01Z")),
    .event(EventMessage(eventType: "jobs:list-invalidated", payload: .null)),
    .eventAck(EventAck(lastEventId: 43)),
    .terminalBind(TerminalBind(sessionId: "t1", includeSnapshot: true, forceSnapshot: false)),
    .terminalUnbind(TerminalBind(sessionId: "t1")),
    .terminalBound(sessionId: "t1"),
    .registered(Registered(sessionId: "S32", relaySessionId: "S32", resumeToken: "T48", expiresAt: "2026-01-02T00:00:00Z")),
    .resumed(Resumed(sessionId: "S32", expiresAt: "2026-01-02T00:00:00Z")),
    .error(RelayErrorMessage(code: .invalidResume, message: "bad token", timestamp: "2026-01-01T00:00:00Z")),
    .error(RelayErrorMessage(code: .other("brandNewCode"), message: "m")),
    .legacy(kind: "terminal_output", raw: ["type": "terminal_output", "payload": ["data": "x"]]),
    .unknown(type: "future.thing", raw: ["type": "future.thing", "x": 1]),
]

/// What a message becomes after a trip through the legacy form: the 1.6-only fields are gone.
private func legacyProjection(_ m: RelayMessage) -> RelayMessage {
    switch m {
    case .register(var p):
        p.relayProtocolVersion = nil
        p.targetDesktopDeviceId = nil
        return .register(p)
    case .rpcRequest(var r):
        r.traceparent = nil
        return .rpcRequest(r)
    case .rpcResponse(var r):
        r.traceparent = nil
        return .rpcResponse(r)
    case .registered(var r):
        r.relaySessionId = nil
        return .registered(r)
    default:
        return m
    }
}

@Suite struct RelayMessageRoundTripTests {
    @Test(arguments: everyMessage)
    func roundTripsInThe16Form(message: RelayMessage) throws {
        let text = try message.encodedText(form: .v1_6)
        #expect(try RelayMessage(decodingText: text) == message, "\(text)")
        #expect(try RelayMessage(decodingUTF8: Array(text.utf8)) == message)
        #expect(try message.encodedBytes() == Array(text.utf8))
    }

    @Test(arguments: everyMessage)
    func roundTripsInTheLegacyForm(message: RelayMessage) throws {
        let text = try message.encodedText(form: .legacy)
        #expect(try RelayMessage(decodingText: text) == legacyProjection(message), "\(text)")
        let json = try JSONValue(parsing: text)
        for key in ["relayProtocolVersion", "targetDesktopDeviceId", "relaySessionId", "traceparent"] {
            #expect(json[key] == nil && json["payload"]?[key] == nil, "\(key) in legacy \(text)")
        }
    }

    /// A heartbeat's text (written directly) is the general route's canonical JSON in both forms.
    @Test(arguments: [nil, "", "s-1", "with \"quotes\" and \\", "tab\tnew\nline\u{01}", "été 🚀", "a_b"])
    func heartbeatTextIsTheGeneralEncoding(sessionId: String?) throws {
        let message = RelayMessage.heartbeat(HeartbeatPayload(activeSessionId: sessionId))
        for form in [ProtocolForm.v1_6, .legacy] {
            #expect(try message.encodedText(form: form) == String(decoding: try message.encodedBytes(form: form), as: UTF8.self))
        }
    }

    /// An rpc.request's text (written directly when `params` has no `_` key) is the general route's canonical
    /// JSON in both forms, for every combination of optionals, odd strings and nested params; a `params` with a
    /// `_` key is still rejected with the general route's violation.
    @Test func rpcRequestTextIsTheGeneralEncoding() throws {
        let tp = try TraceParent(parsing: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        let paramsCases: [JSONValue] = [
            .null, .object([:]), .object(["sessionId": .string("s-1"), "limit": .int(5)]), .array([.int(1), .string("x")]),
            .object(["nested": .object(["deep": .array([.object(["k": .double(1.5)]), .bool(true), .null])]), "é": .string("🚀")]),
            .string("scalar params"), .int(-3),
        ]
        for id in ["1", "14452A08-5697-4892-A7A3-66C27B1C2E64", "with \"quote\" \\ and\n\u{01}"] {
            for method in ["session.list", "odd\tmethod"] {
                for params in paramsCases {
                    for key in [nil, "idem-1", "k\"ey"] as [String?] {
                        for traceparent in [nil, tp] as [TraceParent?] {
                            let message = RelayMessage.rpcRequest(RpcRequest(id: id, method: method, params: params,
                                                                             idempotencyKey: key, traceparent: traceparent))
                            for form in [ProtocolForm.v1_6, .legacy] {
                                #expect(try message.encodedText(form: form) == (try message.encoded(form: form)).jsonText)
                            }
                        }
                    }
                }
            }
        }
        let snake = RelayMessage.rpcRequest(RpcRequest(id: "1", method: "m", params: .object(["ok": .object(["bad_key": .int(1)])])))
        #expect(throws: CamelCaseViolation.self) { try snake.encodedText() }
        var direct: CamelCaseViolation?
        var general: CamelCaseViolation?
        do { _ = try snake.encodedText() } catch { direct = error }
        do { _ = try snake.encoded() } catch { general = error }
        #expect(direct != nil && direct == general)
    }

    /// Client -> relay events are written directly; the text equals the general route's in both forms for
    /// every kind of payload and odd event names, relay-form events still take the general route, and a
    /// payload with a `_` key is still rejected with the general route's violation.
    @Test func clientEventTextIsTheGeneralEncoding() throws {
        let payloads: [JSONValue] = [
            .null, .object([:]), .object(["sessionId": .string("s-1"), "active": .bool(true), "ttlMs": .int(60_000)]),
            .array([.int(1), .string("x")]), .string("scalar"), .int(-3), .double(2.5), .bool(false),
            .object(["nested": .object(["deep": .array([.object(["k": .double(1.5)]), .bool(true), .null])]), "é": .string("🚀"),
                     "zz": .string("with \"quote\" \\ and\n\u{01}"), "aa": .null]),
        ]
        for eventType in [EventNames.chatTimelineInterest, "device-status", "odd \"name\"\t"] {
            for payload in payloads {
                let events = [
                    EventMessage(eventType: eventType, payload: payload),
                    EventMessage(eventType: eventType, payload: payload, eventId: 7),
                    EventMessage(eventType: eventType, payload: payload, sourceDeviceId: "d", timestamp: "t"),
                    EventMessage(eventType: eventType, payload: payload, targetDeviceId: "x"),
                ]
                for event in events {
                    let message = RelayMessage.event(event)
                    for form in [ProtocolForm.v1_6, .legacy] {
                        #expect(try message.encodedText(form: form) == (try message.encoded(form: form)).jsonText)
                    }
                }
            }
        }
        #expect(try RelayMessage.event(EventMessage(eventType: "e", payload: .null)).encodedText() == #"{"payload":{"eventType":"e"},"type":"event"}"#)
        let snake = RelayMessage.event(EventMessage(eventType: "e", payload: .object(["ok": .array([.object(["bad_key": .int(1)])])])))
        var direct: CamelCaseViolation?
        var general: CamelCaseViolation?
        do { _ = try snake.encodedText() } catch { direct = error }
        do { _ = try snake.encoded() } catch { general = error }
        #expect(direct != nil && direct == general)
    }

    /// The exact pong bytes take a shortcut in inbound decoding; it and every other spelling decode as the
    /// general route does.
    @Test(arguments: [#"{"type":"pong"}"#, #"{ "type":"pong"}"#, #"{"type":"pong","x":1}"#, #"{"type":"pong"} "#,
                      #"{"type":"pong"}}"#, #"{"type":"pong","a_b":1}"#, #"{"type":"ping"}"#])
    func pongShortcutMatchesTheGeneralRoute(text: String) throws {
        let inbound = Result { () throws(InboundFrameError) -> RelayMessage in try RelayMessage(decodingInbound: text) }
        let general = Result { () throws(InboundFrameError) -> RelayMessage in
            let (json, underscore): (JSONValue, Bool)
            do throws(JSONParseError) { (json, underscore) = try JSONValue.parsingNotingUnderscoreKeys(text) } catch { throw .syntax(error) }
            if underscore { do throws(CamelCaseViolation) { try CamelCaseGuard.check(json) } catch { throw .snakeCase(error) } }
            do throws(MessageDecodeError) { return try RelayMessage(decoding: json) } catch { throw .message(error) }
        }
        #expect(inbound == general)
    }

    @Test func everyKnownTypeIsCovered() {
        let names = Set(everyMessage.map(\.typeName))
        #expect(names.isSuperset(of: ["register", "heartbeat", "ping", "pong", "rpc.request", "rpc.response", "event",
                                      "event-ack", "terminal.binary.bind", "terminal.binary.unbind",
                                      "terminal.binary.bound", "registered", "resumed", "error"]))
    }
}

@Suite struct RelayMessageWireShapeTests {
    @Test func register16() throws {
        let m = RelayMessage.register(RegisterPayload(deviceId: "d", deviceName: "n", relaySessionId: "S", resumeToken: "T",
                                                      lastEventId: 7, targetDesktopDeviceId: "D"))
        #expect(try m.encodedText() == #"{"payload":{"deviceId":"d","deviceName":"n","lastEventId":7,"relayProtocolVersion":"1.6","relaySessionId":"S","resumeToken":"T","targetDesktopDeviceId":"D"},"type":"register"}"#)
        #expect(try m.encodedText(form: .legacy) == #"{"payload":{"deviceId":"d","deviceName":"n","lastEventId":7,"resumeToken":"T","sessionId":"S"},"type":"register"}"#)
    }

    @Test func absentOptionalsAreOmittedNotNull() throws {
        let m = RelayMessage.register(RegisterPayload(deviceId: "d", deviceName: "n"))
        #expect(try m.encodedText() == #"{"payload":{"deviceId":"d","deviceName":"n","relayProtocolVersion":"1.6"},"type":"register"}"#)
        #expect(try m.encodedText(form: .legacy) == #"{"payload":{"deviceId":"d","deviceName":"n"},"type":"register"}"#)
        #expect(try RelayMessage.heartbeat(HeartbeatPayload()).encodedText() == #"{"payload":{},"type":"heartbeat"}"#)
        #expect(try RelayMessage.rpcRequest(RpcRequest(id: "1", method: "system.ping", params: .null)).encodedText()
            == #"{"payload":{"id":"1","method":"system.ping"},"type":"rpc.request"}"#)
    }

    @Test func topLevelMessages() throws {
        #expect(try RelayMessage.pong.encodedText() == #"{"type":"pong"}"#)
        #expect(try RelayMessage.ping.encodedText() == #"{"type":"ping"}"#)
        let reg = RelayMessage.registered(Registered(sessionId: "S", resumeToken: "T", expiresAt: "E"))
        #expect(try reg.encodedText() == #"{"expiresAt":"E","relaySessionId":"S","resumeToken":"T","sessionId":"S","type":"registered"}"#)
        #expect(try reg.encodedText(form: .legacy) == #"{"expiresAt":"E","resumeToken":"T","sessionId":"S","type":"registered"}"#)
        #expect(try RelayMessage.resumed(Resumed(sessionId: "S", expiresAt: "E")).encodedText()
            == #"{"expiresAt":"E","sessionId":"S","type":"resumed"}"#)
        #expect(try RelayMessage.error(RelayErrorMessage(code: .authRequired, message: "m", timestamp: "t")).encodedText()
            == #"{"code":"authRequired","message":"m","timestamp":"t","type":"error"}"#)
    }

    @Test func payloadMessages() throws {
        #expect(try RelayMessage.rpcResponse(RpcResponse(id: "1", result: ["a": 1], isFinal: true, traceparent: tp)).encodedText()
            == #"{"payload":{"id":"1","isFinal":true,"result":{"a":1},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"type":"rpc.response"}"#)
        #expect(try RelayMessage.rpcResponse(RpcResponse(id: "1", error: RpcErrorBody(code: -32601, message: "no"))).encodedText(form: .legacy)
            == #"{"payload":{"error":{"code":-32601,"message":"no"},"id":"1"},"type":"rpc.response"}"#)
        #expect(try RelayMessage.eventAck(EventAck(lastEventId: 9)).encodedText() == #"{"payload":{"lastEventId":9},"type":"event-ack"}"#)
        #expect(try RelayMessage.terminalBind(TerminalBind(sessionId: "t", includeSnapshot: true)).encodedText()
            == #"{"payload":{"includeSnapshot":true,"sessionId":"t"},"type":"terminal.binary.bind"}"#)
        #expect(try RelayMessage.terminalUnbind(TerminalBind(sessionId: "t")).encodedText()
            == #"{"payload":{"sessionId":"t"},"type":"terminal.binary.unbind"}"#)
        #expect(try RelayMessage.terminalBound(sessionId: "t").encodedText() == #"{"payload":{"sessionId":"t"},"type":"terminal.binary.bound"}"#)
    }

    @Test func eventsInBothDirections() throws {
        let outgoing = RelayMessage.event(EventMessage(TimelineInterest(appSessionId: "A1B2", sessionId: "sess-8d1c", active: true)))
        #expect(try outgoing.encodedText()
            == #"{"payload":{"eventType":"chat:timeline-interest","payload":{"active":true,"appSessionId":"A1B2","sessionId":"sess-8d1c"}},"type":"event"}"#)
        let incoming = RelayMessage.event(EventMessage(eventType: "device-status", payload: ["deviceId": "d", "status": "online"],
                                                       eventId: 5, sourceDeviceId: "src", timestamp: "ts"))
        #expect(try incoming.encodedText()
            == #"{"eventId":5,"payload":{"eventType":"device-status","payload":{"deviceId":"d","status":"online"}},"sourceDeviceId":"src","targetDeviceId":null,"timestamp":"ts","type":"event"}"#)
    }
}

@Suite struct RelayMessageDecodingTests {
    @Test func protocolExamplesDecode() throws {
        let register = try RelayMessage(decodingText: #"{"type":"register","payload":{"deviceId":"5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11","deviceName":"Alice's iPhone","relayProtocolVersion":"1.6","targetDesktopDeviceId":"9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4","relaySessionId":"Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D","resumeToken":"h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA","lastEventId":1287}}"#)
        #expect(register == .register(RegisterPayload(
            deviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", deviceName: "Alice's iPhone",
            relaySessionId: "Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D", resumeToken: "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA",
            lastEventId: 1287, relayProtocolVersion: "1.6", targetDesktopDeviceId: "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")))
        if case .register(let p) = register { #expect(p.isResume) }

        let request = try RelayMessage(decodingText: #"{"type":"rpc.request","payload":{"id":"0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44","method":"session.update","params":{"sessionId":"sess-8d1c","updateData":{"name":"Refactor"}},"idempotencyKey":"0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#)
        #expect(request == .rpcRequest(RpcRequest(
            id: "0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44", method: "session.update",
            params: ["sessionId": "sess-8d1c", "updateData": ["name": "Refactor"]],
            idempotencyKey: "0F6C2B7E-6A3B-4C1E-9E55-0B7E1D2A9C44", traceparent: tp)))

        let event = try RelayMessage(decodingText: #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A1B2","sessionId":"sess-8d1c","active":true}}}"#)
        guard case .event(let e) = event else {
            Issue.record("not an event: \(event)")
            return
        }
        #expect(!e.isRelayForm)
        #expect(try e.decodePayload(as: TimelineInterest.self) == TimelineInterest(appSessionId: "A1B2", sessionId: "sess-8d1c", active: true))
    }

    @Test func preSixteenRegisterDecodes() throws {
        let m = try RelayMessage(decodingText: #"{"type":"register","payload":{"deviceId":"d","deviceName":"n","sessionId":"S","resumeToken":"T","lastEventId":5}}"#)
        #expect(m == .register(RegisterPayload(deviceId: "d", deviceName: "n", relaySessionId: "S", resumeToken: "T", lastEventId: 5)))
        // With both names, the 1.6 name wins.
        let both = try RelayMessage(decodingText: #"{"type":"register","payload":{"deviceId":"d","deviceName":"n","sessionId":"old","relaySessionId":"new"}}"#)
        #expect(both == .register(RegisterPayload(deviceId: "d", deviceName: "n", relaySessionId: "new")))
    }

    @Test func relayEventWithNullTarget() throws {
        let m = try RelayMessage(decodingText: #"{"type":"event","payload":{"eventType":"device-status","payload":{"deviceId":"d","status":"disconnected","reason":"timeout"}},"eventId":12,"sourceDeviceId":"relay","targetDeviceId":null,"timestamp":"2026-01-01T00:00:00Z"}"#)
        guard case .event(let e) = m else {
            Issue.record("not an event: \(m)")
            return
        }
        #expect(e.eventId == 12 && e.sourceDeviceId == "relay" && e.targetDeviceId == nil && e.timestamp == "2026-01-01T00:00:00Z")
        #expect(try e.decodePayload() == DeviceStatus(deviceId: "d", status: .disconnected, reason: "timeout"))
    }

    @Test func alternativePlacementsAreAccepted() throws {
        #expect(try RelayMessage(decodingText: #"{"type":"rpc.response","id":"1","result":5,"isFinal":true}"#)
            == .rpcResponse(RpcResponse(id: "1", result: 5, isFinal: true)))
        #expect(try RelayMessage(decodingText: #"{"type":"terminal.binary.bound","sessionId":"t"}"#) == .terminalBound(sessionId: "t"))
        #expect(try RelayMessage(decodingText: #"{"type":"registered","payload":{"sessionId":"S","resumeToken":"T","expiresAt":"E"}}"#)
            == .registered(Registered(sessionId: "S", resumeToken: "T", expiresAt: "E")))
        #expect(try RelayMessage(decodingText: #"{"type":"heartbeat"}"#) == .heartbeat(HeartbeatPayload()))
    }

    @Test func unknownExtraFieldsAreIgnoredAndNullOptionalsAreAbsent() throws {
        #expect(try RelayMessage(decodingText: #"{"type":"resumed","sessionId":"S","expiresAt":"E","extra":[1],"payload":7}"#)
            == .resumed(Resumed(sessionId: "S", expiresAt: "E")))
        #expect(try RelayMessage(decodingText: #"{"type":"rpc.response","payload":{"id":"1","result":null,"error":null,"traceparent":null}}"#)
            == .rpcResponse(RpcResponse(id: "1", result: .null)))
    }

    @Test func unknownTypesKeepTheirRawJSON() throws {
        let raw = #"{"type":"relay.future","payload":{"snake_case":true}}"#
        let m = try RelayMessage(decodingText: raw)
        #expect(m == .unknown(type: "relay.future", raw: try JSONValue(parsing: raw)))
        #expect(m.typeName == "relay.future")
        #expect(RelayMessage.unknown(type: nil, raw: [:]).typeName == "?")
    }

    @Test(arguments: ["terminal_output", "job_status", "session_sync", "rpc_command"])
    func olderKindsAreNamed(kind: String) throws {
        let raw = #"{"type":"\#(kind)","data":{"session_id":"x"}}"#
        let m = try RelayMessage(decodingText: raw)
        #expect(m == .legacy(kind: kind, raw: try JSONValue(parsing: raw)))
        #expect(m.typeName == kind)
    }

    @Test(arguments: [
        (#"[1]"#, "$", "expected an object, found array"),
        (#"{"payload":{}}"#, "$.type", #"missing message type; every message is an object with a string "type""#),
        (#"{"type":3}"#, "$.type", "expected a string, found integer"),
        (#"{"type":"register","payload":{"deviceId":42,"deviceName":"n"}}"#, "$.payload.deviceId", "expected a string, found integer"),
        (#"{"type":"register","payload":{"deviceName":"n"}}"#, "$.payload.deviceId", "missing required string"),
        (#"{"type":"register"}"#, "$.payload", "missing required object"),
        (#"{"type":"register","payload":"x"}"#, "$.payload", "expected an object, found string"),
        (#"{"type":"register","payload":{"deviceId":"d","deviceName":"n","lastEventId":"5"}}"#, "$.payload.lastEventId", "expected an integer, found string"),
        (#"{"type":"register","payload":{"deviceId":"d","deviceName":"n","lastEventId":1.5}}"#, "$.payload.lastEventId", "expected an integer, found number"),
        (#"{"type":"rpc.request","payload":{"id":"1","method":"m","idempotencyKey":false}}"#, "$.payload.idempotencyKey", "expected a string, found boolean"),
        (#"{"type":"rpc.response","payload":{"id":"1","error":{"code":"x","message":"m"}}}"#, "$.payload.error.code", "expected an integer, found string"),
        (#"{"type":"rpc.response","payload":{"id":"1","error":"boom"}}"#, "$.payload.error", "expected an object, found string"),
        (#"{"type":"rpc.response","payload":{"id":"1","isFinal":"yes"}}"#, "$.payload.isFinal", "expected a boolean, found string"),
        (#"{"type":"rpc.response"}"#, "$.payload", "missing required object"),
        (#"{"type":"event","payload":{"payload":{}}}"#, "$.payload.eventType", "missing required string"),
        (#"{"type":"event","payload":{"eventType":"x"},"eventId":"7"}"#, "$.eventId", "expected an integer, found string"),
        (#"{"type":"event-ack","payload":{}}"#, "$.payload.lastEventId", "missing required integer"),
        (#"{"type":"terminal.binary.bind","payload":{"sessionId":"t","includeSnapshot":1}}"#, "$.payload.includeSnapshot", "expected a boolean, found integer"),
        (#"{"type":"registered","sessionId":"S","expiresAt":"E"}"#, "$.resumeToken", "missing required string"),
        (#"{"type":"error","code":1,"message":"m"}"#, "$.code", "expected a string, found integer"),
        (#"{"type":"resumed"}"#, "$.sessionId", "missing required string"),
    ])
    func strictAboutKnownFields(text: String, path: String, message: String) {
        #expect(decode(text) == .failure(MessageDecodeError(path: path, message: message)))
    }

    @Test func badTraceparentNamesItsPath() {
        guard case .failure(let e) = decode(#"{"type":"rpc.request","payload":{"id":"1","method":"m","traceparent":"00-XYZ"}}"#) else {
            Issue.record("accepted a bad traceparent")
            return
        }
        #expect(e.path == "$.payload.traceparent")
        #expect(e.message.contains("length is 6 bytes"))
    }

    @Test func invalidJSONCarriesItsOffset() {
        let result = decode(#"{"type":"ping",}"#)
        #expect(result == .failure(MessageDecodeError(path: "$", message: "not valid JSON: trailing comma before '}'", byteOffset: 15)))
        if case .failure(let e) = result {
            #expect(e.description == "invalid relay message at $, byte 15: not valid JSON: trailing comma before '}'")
        }
    }

    @Test func errorCodesRoundTrip() throws {
        for code in RelayErrorCode.known {
            #expect(RelayErrorCode(rawValue: code.rawValue) == code)
            guard case .other = code else { continue }
            Issue.record("\(code) is listed as known but decodes as .other")
        }
        #expect(RelayErrorCode.known.count == 16)
        #expect(RelayErrorCode(rawValue: "somethingNew") == .other("somethingNew"))
        #expect(RelayErrorCode.other("x").rawValue == "x")
        // Equality is by wire string.
        #expect(RelayErrorCode.other("invalidResume") == .invalidResume)
        #expect(Set([RelayErrorCode.other("invalidResume"), .invalidResume]).count == 1)
        let m = try RelayMessage(decodingText: #"{"type":"error","code":"deviceOwnershipFailed","message":"not yours"}"#)
        #expect(m == .error(RelayErrorMessage(code: .deviceOwnershipFailed, message: "not yours")))
    }
}

@Suite struct RelayMessageGuardTests {
    @Test func snakeCaseKeysAreRefusedOnEncode() {
        let m = RelayMessage.rpcRequest(RpcRequest(id: "1", method: "session.update",
                                                   params: ["sessionId": "s", "updateData": ["file_path": "/x"]]))
        #expect(throws: CamelCaseViolation(key: "file_path", path: "$.payload.params.updateData.file_path")) {
            try m.encoded()
        }
        #expect(throws: CamelCaseViolation(key: "file_path", path: "$.payload.params.updateData.file_path")) {
            try m.encodedText(form: .legacy)
        }
    }

    @Test func rawMessagesAreGuardedToo() throws {
        #expect(throws: CamelCaseViolation(key: "session_id", path: "$.payload.session_id")) {
            try RelayMessage.legacy(kind: "session_sync", raw: ["type": "session_sync", "payload": ["session_id": "x"]]).encoded()
        }
        let raw: JSONValue = ["type": "x.y", "a": 1]
        #expect(try RelayMessage.unknown(type: "x.y", raw: raw).encoded() == raw)
    }

    @Test func snakeCaseValuesAreFine() throws {
        let m = RelayMessage.event(EventMessage(eventType: "job_status", payload: ["status": "in_progress"]))
        #expect(try m.encoded()["payload"]?["payload"]?["status"] == "in_progress")
    }
}
