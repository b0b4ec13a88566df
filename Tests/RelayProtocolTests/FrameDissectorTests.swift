import RelayProtocol
import Testing

@Suite struct FrameDissectorTests {
    @Test func textAndBinaryFrames() throws {
        let request = RelayMessage.rpcRequest(RpcRequest(id: "R1", method: "session.update", idempotencyKey: "K1"))
        let text = WireFrame.text(try request.encodedText())
        #expect(text.dissect() == .message(request))
        #expect(text.dissect().summary == "rpc.request id=R1 method=session.update key=K1")

        let frame = TerminalFrame(sessionId: "t1", data: Array("hi\n".utf8))
        let binary = WireFrame.binary(try frame.encoded())
        #expect(binary.dissect() == .terminal(frame))
        #expect(binary.dissect().summary == #"PTC1 session=t1 3 bytes "hi\n""#)
    }

    @Test func malformedFramesAreNamedNotThrown() {
        let text = WireFrame.text("{oops").dissect()
        guard case .malformedText(let e) = text else {
            Issue.record("expected malformedText, got \(text)")
            return
        }
        #expect(e.byteOffset == 1)
        #expect(text.summary.hasPrefix("malformed text: invalid relay message at $, byte 1"))

        let binary = WireFrame.binary([0x50, 0x54]).dissect()
        #expect(binary == .malformedBinary(TerminalFrameError(kind: .shortHeader, offset: 2,
            message: "frame is 2 bytes; the header needs 6 (magic + u16 session-id length)")))
    }

    @Test(arguments: [
        (RelayMessage.register(RegisterPayload(deviceId: "d", deviceName: "n", relaySessionId: "S", resumeToken: "secret",
                                               lastEventId: 3, relayProtocolVersion: "1.6")),
         "register deviceId=d relaySessionId=S token=yes lastEventId=3 v=1.6"),
        (.heartbeat(HeartbeatPayload(activeSessionId: "s")), "heartbeat activeSessionId=s"),
        (.pong, "pong"),
        (.rpcResponse(RpcResponse(id: "R", error: RpcErrorBody(.desktopOffline, message: "Desktop is offline"), isFinal: true)),
         #"rpc.response id=R error=-32010 "Desktop is offline" final"#),
        (.rpcResponse(RpcResponse(id: "R", result: 1)), "rpc.response id=R ok"),
        (.event(EventMessage(eventType: "device-status", eventId: 42, sourceDeviceId: "relay")), "event device-status #42 from=relay"),
        (.eventAck(EventAck(lastEventId: 9)), "event-ack lastEventId=9"),
        (.terminalBind(TerminalBind(sessionId: "t", includeSnapshot: true)), "terminal.binary.bind sessionId=t snapshot"),
        (.terminalBound(sessionId: "t"), "terminal.binary.bound sessionId=t"),
        (.registered(Registered(sessionId: "S", resumeToken: "T", expiresAt: "E")), "registered sessionId=S expiresAt=E"),
        (.resumed(Resumed(sessionId: "S", expiresAt: "E")), "resumed sessionId=S expiresAt=E"),
        (.error(RelayErrorMessage(code: .invalidResume, message: "no")), #"error invalidResume "no""#),
        (.legacy(kind: "job_status", raw: [:]), "job_status (pre-1.6 kind)"),
        (.unknown(type: "x", raw: [:]), "x (unknown type)"),
    ])
    func summaries(message: RelayMessage, expected: String) {
        #expect(message.summary == expected)
        #expect(!message.summary.contains("secret"))
    }
}
