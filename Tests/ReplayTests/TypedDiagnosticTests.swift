import Capture
import RelayClient
import RelayProtocol
import Replay
import ReplayTesting
import Testing
import Trace

/// A diagnostic is recorded as a code and fields; its English is rendered from the one catalogue when
/// shown, in the words the untyped records held, so traces recorded before still replay strictly.
@Suite struct TypedDiagnosticTests {
    static let g1 = Generation(1), g2 = Generation(2)

    /// Every case of `ClientDiagnostic` (and of the components' reasons it carries), with the sentence it
    /// said when diagnostics were recorded as text.
    static let cases: [(ClientDiagnostic, String)] = [
        (.staleGeneration(g2, current: g1, input: "frame"), "stale frame on g2 (current g1)"),
        (.staleGeneration(g2, current: nil, input: "opened"), "stale opened on g2 (current none)"),
        (.staleTimer(.heartbeat(g1)), "stale timer heartbeat(g1)"),
        (.undecodableFrame(g1, "unexpected end at 3"), "undecodable frame on g1: unexpected end at 3"),
        (.droppedSnakeCaseMessage(g1, path: "$.relay_session_id"), "dropped message on g1: snake_case key at $.relay_session_id"),
        (.unmatchedResponse(requestId: "R9"), "response for no pending call R9"),
        (.traceIdMismatch(requestId: "R", expected: "aa", received: "bb"), "response R rejected: trace ID bb, request had aa"),
        (.responseOnOtherGeneration(requestId: "R", sentOn: g1, receivedOn: g2), "response R on g2, request went on g1"),
        (.unexpectedMessage(g1, type: "registered", phase: "registered(g1)"), "unexpected registered on g1 in registered(g1)"),
        (.relayError(g2, code: "rateLimited", message: "slow down"), "relay error on g2: rateLimited slow down"),
        (.timeWentBackwards(from: .seconds(2), to: .seconds(1.5)), "time went backwards from 2.000s to 1.500s"),
        (.ignoredInput("stop", phase: "stopped(invalidResumeLoop)"), "ignored stop in stopped(invalidResumeLoop)"),
        (.waitingForIdentity, "start held until the device identity is known"),
        (.identityMismatch(configured: "a", read: "b"), "identity store has device b, client is configured for a"),
        (.identity(.alreadyStarted), "identity: start: already started"),
        (.identity(.readNotRequested), "identity: identityRead: no read was requested"),
        (.identity(.notUnreadable), "identity: resetConfirmed: the identity is not unreadable"),
        (.auth(.noLoginInProgress), "auth: cancelLogin: no login in progress"),
        (.auth(.sessionActive), "auth: resumeSession: a session is already active"),
        (.auth(.noSession(input: "logout")), "auth: logout: no session"),
        (.auth(.staleTimer(.refresh)), "auth: timer refresh: not armed for this time (stale)"),
        (.auth(.loginInProgress), "auth: startLogin: a login is already in progress"),
        (.auth(.alreadyLoggedIn), "auth: startLogin: already logged in; log out first"),
        (.auth(.staleResponse(AuthRequestID(rawValue: 3))), "auth: response for auth#3: no such request pending (stale)"),
        (.auth(.staleFailure(AuthRequestID(rawValue: 4))), "auth: failure of auth#4: no such request pending (stale)"),
        (.interest(.staleTimer(.renewal(desktopId: "d"))), "interest: stale timer interestRenewal(d)"),
        (.interest(.unknownClaim(ClaimID(9), input: "release")), "interest: release for unknown claim#9"),
        (.interest(.ignored("enteredForeground", reason: .alreadyInForeground)), "interest: ignored enteredForeground: already in the foreground"),
        (.interest(.ignored("deliveryFailed(d)", reason: .desktopNotRegistered)), "interest: ignored deliveryFailed(d): desktop not registered"),
        (.interest(.ignored("deliveryFailed(d)", reason: .nothingToDeliver)), "interest: ignored deliveryFailed(d): no interest to deliver"),
        (.interest(.ignored("deliveryFailed(d)", reason: .retryScheduled)), "interest: ignored deliveryFailed(d): a retry is already scheduled"),
        (.interest(.ignored("deliveryFailed(d)", reason: .gaveUp)), "interest: ignored deliveryFailed(d): gave up until the next renewal or registration"),
        (.staleRegistration(g2, attempt: AttemptID(5)), "stale origin: registration on g2 (attempt#5)"),
        (.staleReply(request: AuthRequestID(rawValue: 2), attempt: AttemptID(1)), "stale origin: reply to auth#2 (attempt#1)"),
        (.interestGaveUp(TimelineInterest(appSessionId: "app", sessionId: "chat", active: true)), "interest delivery for chat given up after 4 retries"),
    ]

    @Test func everyDiagnosticHasACodeTheCatalogueWordsAsBefore() {
        var codes: Set<String> = []
        for (d, sentence) in Self.cases {
            let r = d.record
            #expect(DiagnosticCatalogue.templates[r.code] != nil, "\(r.code) has no template")
            #expect(d.description == sentence, "\(r.code)")
            #expect(r.fields.keys.allSatisfy { !["code", "action", "watch", "side", "text"].contains($0) }, "\(r.code): \(r.fields.keys)")
            codes.insert(r.code)
        }
        #expect(codes.count == Self.cases.count - 1, "one code per case (staleGeneration is listed twice)")
    }

    @Test func aDiagnosticIsRecordedAsItsCodeAndFieldsNotItsEnglish() throws {
        let d = ClientDiagnostic.staleGeneration(Self.g2, current: Self.g1, input: "frame")
        let record = ClientRecordCodec.record(.diagnostic(d), at: .seconds(3))
        #expect(record.kind == .action && record.generation == nil)
        #expect(record.payloadText == #"{"action":"diagnostic","code":"staleGeneration","current":1,"gen":2,"input":"frame"}"#)
        let back = try #require(DiagnosticRecord(json: try JSONValue(parsing: record.payload), ignoring: ["action"]))
        #expect(back == d.record)
        #expect(!record.payloadText.contains("stale frame"), "no English in the trace")
    }

    @Test func anUnknownCodeShowsItsCodeAndFields() {
        let d = DiagnosticRecord("fromANewerWriter", ["gen": 3, "why": "x"])
        #expect(d.text == #"fromANewerWriter {"gen":3,"why":"x"}"#)
        #expect(DiagnosticRecord("bare").text == "bare")
    }

    /// A trace recorded with `text` diagnostics replays against typed ones when the sentence is the same,
    /// and diverges when it is not (or when it is not a diagnostic at all).
    @Test func aLegacyTextDiagnosticMatchesTheTypedOneThatSaysTheSame() throws {
        func rec(_ text: String) -> TraceRecord {
            TraceRecord(kind: .action, time: .zero, payload: Array(text.utf8))
        }
        let actual = ClientRecordCodec.record(.diagnostic(.ignoredInput("stop", phase: "idle")), at: .zero)
        #expect(RecordMatching.matches(recorded: rec(#"{"action":"diagnostic","text":"ignored stop in idle"}"#), actual: actual))
        #expect(!RecordMatching.matches(recorded: rec(#"{"action":"diagnostic","text":"ignored start in idle"}"#), actual: actual))
        #expect(!RecordMatching.matches(recorded: rec(#"{"action":"callProgress","text":"ignored stop in idle"}"#), actual: actual))
        #expect(!RecordMatching.matches(recorded: rec(#"{"action":"diagnostic","text":"ignored stop in idle","x":1}"#), actual: actual))
        let typed = rec(#"{"action":"diagnostic","code":"ignoredInput","input":"stop","phase":"registered(g1)"}"#)
        #expect(!RecordMatching.matches(recorded: typed, actual: actual), "a typed record matches only field for field")
    }

    /// The two traces captured over real sockets were recorded with `text` diagnostics and are kept so: they
    /// replay strictly through the legacy match, which is then known to be taken.
    @Test(arguments: ["capture-tour-wss", "capture-lease-ws"])
    func aTraceCapturedBeforeDiagnosticsWereTypedStillReplaysStrictly(name: String) throws {
        let replay = try TraceReplay(named: name)
        let legacy = replay.replayer.records.filter { $0.kind == .action && $0.payloadText.hasPrefix(#"{"action":"diagnostic","text":"#) }
        #expect(!legacy.isEmpty, "\(name) holds untyped diagnostics")
        replay.expectNoDivergence()
        #expect(replay.replayer.isAtEnd)
    }
}
