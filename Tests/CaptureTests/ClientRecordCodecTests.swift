import Capture
import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing
import Trace

/// The trace vocabulary of the relay client: every input survives a round trip through its record; every
/// action lands in the kind the format says.
@Suite struct ClientRecordCodecTests {
    static let inputs: [ClientInput] = [
        TestIdentity.start(resume: TestIdentity.storedResume, ownership: 9),
        TestIdentity.start(),
        .stop,
        .transportOpened(Generation(3)),
        .transportFrame(Generation(3), .text(#"{"type":"pong"}"#)),
        .transportFrame(Generation(4), .binary([0x50, 0x54, 0x43, 0x31, 0, 1, 0x61, 0xFF])),
        .transportClosed(Generation(3), code: 1006, reason: "gone"),
        .transportClosed(Generation(3), code: nil, reason: ""),
        .transportFailed(Generation(5), .upgradeRefused(status: 401)),
        .transportFailed(Generation(5), .network("ECONNRESET")),
        .sendFailed(Generation(2), frame: .text("{}"), attempt: 3, transient: true, reason: "EAGAIN"),
        .sendFailed(Generation(2), frame: .binary([1, 2, 255]), attempt: 1, transient: false, reason: "EPIPE"),
        .timerFired(.handshake(Generation(1))), .timerFired(.heartbeat(Generation(2))), .timerFired(.watchdog(Generation(2))),
        .timerFired(.reRegister(Generation(2))), .timerFired(.sendRetry(Generation(2), slot: 7)),
        .timerFired(.rpcTimeout(requestId: "R-1", ownership: 4)), .timerFired(.reconnect(attempt: 3)),
        .timerFired(.epochDeadline(epoch: 2)), .timerFired(.probe(epoch: 2)), .timerFired(.foregroundRecovery),
        .timerFired(.auth(.poll)), .timerFired(.auth(.refresh)),
        .timerFired(.interest(.renewal(desktopId: "d"))), .timerFired(.interest(.retry(desktopId: "d"))),
        .call(CallRequest(callId: CallID(7), method: "session.update", params: ["sessionId": "s", "n": 3, "ok": true],
                          idempotencyKey: "K", requestId: "R")),
        .call(CallRequest(callId: CallID(8), method: "system.ping")),
        .networkPath(.unsatisfied), .networkPath(.satisfied(.wifi)), .networkPath(.satisfied(.cellular)),
        .appState(.background), .appState(.inactive), .appState(.active),
        .desktopMediaPlaying(true), .push(.desktopOnline(desktopId: "desk")),
        .identity(.start), .identity(.protectedDataAvailable), .identity(.appActive), .identity(.resetConfirmed),
        .identity(.identityRead(.available(deviceId: "dev", login: StoredLogin(jwt: "j", expiry: .seconds(99))))),
        .identity(.identityRead(.available(deviceId: "dev", login: nil))), .identity(.identityRead(.lockedBeforeFirstUnlock)),
        .identity(.identityRead(.jwtLocked(deviceId: "dev"))), .identity(.identityRead(.unreadable)),
        .auth(.startLogin(pkce: PKCEPair(verifier: "v", challenge: "c"), pollingId: "p")), .auth(.cancelLogin),
        .auth(.resumeSession(StoredLogin(jwt: "j", expiry: .seconds(5)))), .auth(.refreshNow), .auth(.logout),
        .auth(.httpResponse(AuthRequestID(3), status: 200, body: .token(StoredLogin(jwt: "j2", expiry: .seconds(7))))),
        .auth(.httpResponse(AuthRequestID(4), status: 200, body: .poll(.pending))),
        .auth(.httpResponse(AuthRequestID(4), status: 200, body: .poll(.completed(code: "code")))),
        .auth(.httpResponse(AuthRequestID(4), status: 500, body: .poll(.failed("no")))),
        .auth(.httpResponse(AuthRequestID(5), status: 401, body: .none)), .auth(.httpFailed(AuthRequestID(6), reason: "timeout")),
        .selectRegion(.us), .selectRegion(.eu),
        .interest(.claim(ClaimID(1), baseSessionId: "s")), .interest(.confirmVisible(ClaimID(1))), .interest(.release(ClaimID(1))),
        .snapshotProcessed,
        .offlineQueue(.loaded([])),
        .offlineQueue(.loaded([OfflineMutation(idempotencyKey: "k", method: "session.rename", params: ["name": "x"], createdAt: .seconds(8)),
                               OfflineMutation(idempotencyKey: "k2", method: "job.cancel", params: [:], createdAt: .seconds(9))])),
    ]

    @Test(arguments: inputs)
    func everyInputRoundTripsThroughItsRecord(input: ClientInput) throws {
        let record = ClientRecordCodec.record(input, at: .seconds(12.5))
        #expect(record.time == .seconds(12.5))
        #expect(record.channel == .relay)
        #expect(!ClientRecordCodec.isAction(record))
        let decoded = try ClientRecordCodec.decodeInput(record)
        #expect(decoded == input)
    }

    /// The direct reader of canonical bytes and the general JSON decoder agree on every input's record.
    @Test(arguments: inputs)
    func theFastAndGeneralInputDecodersAgree(input: ClientInput) throws {
        let record = ClientRecordCodec.record(input, at: .seconds(3))
        let general = try ClientRecordCodec.decodeInputGeneral(record)
        #expect(general == input)
        #expect(try ClientRecordCodec.decodeInput(record) == general)
    }

    /// Timer and input records written in other (valid or invalid) ways than the canonical bytes decode
    /// exactly as the general decoder decodes them, errors included.
    @Test(arguments: [
        (RecordKind.timerFired, #"{"gen":7,"timer":"heartbeat"}"#), (.timerFired, #"{"timer":"heartbeat","gen":7}"#),
        (.timerFired, #"{"gen": 7,"timer":"heartbeat"}"#), (.timerFired, #"{"gen":07,"timer":"heartbeat"}"#),
        (.timerFired, #"{"gen":-3,"timer":"watchdog"}"#), (.timerFired, #"{"gen":7,"timer":"heartbeat"} "#),
        (.timerFired, #"{"gen":7,"timer":"heartbeat","x":1}"#), (.timerFired, #"{"gen":12345678901234567890,"timer":"handshake"}"#),
        (.timerFired, #"{"gen":9223372036854775807,"timer":"reRegister"}"#), (.timerFired, #"{"gen":7,"timer":"heart\u0062eat"}"#),
        (.timerFired, #"{"gen":7,"timer":"sendRetry"}"#), (.timerFired, #"{"gen":7,"timer":"nope"}"#),
        (.timerFired, #"{"desktopId":"d\"q","timer":"interest.renewal"}"#), (.timerFired, #"{"desktopId":"dé","timer":"interest.retry"}"#),
        (.timerFired, #"{"desktopId":"d","timer":"interest.other"}"#), (.timerFired, #"{"timer":"foregroundRecovery"}x"#),
        (.input, #"{"input":"snapshotProcessed"}"#), (.input, #"{"input":"snapshotProcessed","extra":true}"#),
        (.input, #"{"input":"appState","state":"dozing"}"#), (.input, #"{"input":"networkPath","path":"carrier-pigeon"}"#),
        (.input, #"{"input":"networkPath","path":"unsatisfied"}"#), (.input, #"{"callId":0,"input":"call","method":"m","params":{}}"#),
        (.input, #"{"callId":3,"input":"call","method":"m","params":{"a":1}}"#), (.input, #"{"callId":3,"input":"call","method":"m"}"#),
        (.input, #"{"baseSessionId":"s","claimId":2,"input":"interest.claim"}"#), (.input, #"{"claimId":2,"input":"interest.release"}"#),
        (.input, #"{"claimId":2,"input":"interest.release"#), (.input, ""),
    ])
    func nonCanonicalInputRecordsDecodeAsTheGeneralDecoderDoes(kind: RecordKind, payload: String) {
        let record = TraceRecord(kind: kind, time: .zero, channel: .relay, generation: 1, direction: nil, payload: Array(payload.utf8))
        let general = Result { () throws(CodecError) in try ClientRecordCodec.decodeInputGeneral(record) }
        let fast = Result { () throws(CodecError) in try ClientRecordCodec.decodeInput(record) }
        #expect(fast == general, "\(payload)")
    }

    @Test func socketFactsUseTheTransportKindsWithGenerationAndDirection() throws {
        let opened = ClientRecordCodec.record(ClientInput.transportOpened(Generation(2)), at: .zero)
        #expect(opened.kind == .transportOpened && opened.generation == 2 && opened.direction == .inbound)
        let frameIn = ClientRecordCodec.record(ClientInput.transportFrame(Generation(2), .text("x")), at: .zero)
        #expect(frameIn.kind == .frameText && frameIn.direction == .inbound && frameIn.payload == Array("x".utf8))
        let open = ClientRecordCodec.record(ClientAction.openTransport(Generation(4), url: "wss://h/ws", headers: [HTTPHeader("A", "b")]), at: .zero)
        #expect(open.kind == .transportOpen && open.generation == 4 && open.direction == .outbound)
        let send = ClientRecordCodec.record(ClientAction.send(Generation(4), .binary([1]), attempt: 1), at: .zero)
        #expect(send.kind == .frameBinary && send.direction == .outbound && ClientRecordCodec.isAction(send))
        let close = ClientRecordCodec.record(ClientAction.closeTransport(Generation(4), code: 1001, reason: "bye"), at: .zero)
        #expect(close.kind == .transportClosed && close.direction == .outbound)
        #expect(try ClientRecordCodec.decodeInput(send) == nil, "an outbound frame is an action, not an input")
        #expect(try ClientRecordCodec.decodeInput(close) == nil)
    }

    @Test func aRetriedSendIsPrecededByItsAttemptNumber() throws {
        let records = ClientRecordCodec.records(.send(Generation(3), .text("{}"), attempt: 2), at: .seconds(1))
        #expect(records.count == 2)
        #expect(records[0].kind == .action)
        let marker = try JSONValue(parsing: records[0].payload)
        #expect(marker == ["action": "sendAttempt", "gen": 3, "attempt": 2])
        #expect(ClientRecordCodec.records(.send(Generation(3), .text("{}"), attempt: 1), at: .zero).count == 1)
    }

    @Test func actionsAreJSONNamedByTheirAction() throws {
        let actions: [ClientAction] = [
            .armTimer(.heartbeat(Generation(2)), deadline: .seconds(5)), .cancelTimer(.watchdog(Generation(2))),
            .storeResumeCredentials(key: "k", TestIdentity.storedResume, ownership: 1), .clearResumeCredentials(key: "k", ownership: 1),
            .callCompleted(CallID(1), .success(["a": 1])), .callCompleted(CallID(2), .failure(.timedOut(after: .seconds(3)))),
            .callProgress(CallID(1), ["p": 1]), .phaseChanged(.registered(Generation(2), relaySessionId: "S")),
            .connectionFailed(Generation(2), .watchdog), .desktopStatusChanged(.online),
            .epochOpened(epoch: 1, reason: .foreground, deadline: .seconds(91.5)), .diagnostic(.staleTimer(.foregroundRecovery)),
            .identity(.readIdentity), .auth(.sessionEnded(.refreshRejected(status: 401))),
            .httpRequest(AuthRequest(id: AuthRequestID(1), kind: .refresh(jwt: "j")), origin: "https://o"),
            .region(.persistRegion(.eu)), .deliverTerminalOutput(TerminalFrame(sessionId: "t", data: [1, 2])),
        ]
        var names = Set<String>()
        for a in actions {
            let r = ClientRecordCodec.record(a, at: .zero)
            #expect(r.kind == .action)
            #expect(ClientRecordCodec.isAction(r))
            let json = try JSONValue(parsing: r.payload)
            let name = try #require(json["action"]?.stringValue)
            names.insert(name)
        }
        #expect(names.count == actions.count - 1, "each action kind has its own name (two callCompleted share one)")
        let armed = try JSONValue(parsing: ClientRecordCodec.record(.armTimer(.heartbeat(Generation(2)), deadline: .seconds(5)), at: .zero).payload)
        #expect(armed == ["action": "armTimer", "timer": ["timer": "heartbeat", "gen": 2], "deadline": 5_000_000_000])
    }

    @Test func malformedInputRecordsGiveTheirPath() {
        func record(_ json: String) -> TraceRecord {
            TraceRecord(kind: .input, time: .zero, channel: .relay, generation: nil, direction: nil, payload: Array(json.utf8))
        }
        #expect(throws: CodecError.self) { try ClientRecordCodec.decodeInput(record("not json")) }
        do {
            _ = try ClientRecordCodec.decodeInput(record(#"{"input":"call","callId":"x","method":"m"}"#))
            Issue.record("a string callId must not decode")
        } catch {
            #expect(error.path == "$.callId")
        }
        do {
            _ = try ClientRecordCodec.decodeInput(record(#"{"input":"teleport"}"#))
            Issue.record("an unknown input must not decode")
        } catch {
            #expect(error.message.contains("teleport"))
        }
    }
}
