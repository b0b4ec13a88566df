public import RelayClient
public import RelayProtocol
public import Testing

/// A fixed phone/desktop identity for tests (the device IDs of PROTOCOL.md's examples).
public enum TestIdentity {
    /// The phone's device ID, as the app stores it (upper-case; the wire form is lower-case).
    public static let deviceId = "5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11"
    /// The device name.
    public static let deviceName = "Alice's iPhone"
    /// The target desktop.
    public static let desktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
    /// The relay URL.
    public static let relayURL = "wss://api-eu.plantocode.com/ws/device-link"
    /// An app JWT (not a real one).
    public static let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl"
    /// Stored resume credentials (32 and 48 characters, as the relay makes them).
    public static let storedResume = ResumeCredentials(
        relaySessionId: "Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D",
        resumeToken: "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA")

    /// The test configuration with `seed`.
    public static func configuration(seed: UInt64 = 1) -> ClientConfiguration {
        // The URL is a constant `wss` URL, which the policy always accepts.
        do {
            return try ClientConfiguration(deviceId: deviceId, deviceName: deviceName, desktopId: desktopId,
                                           relayURL: relayURL, seed: seed)
        } catch {
            preconditionFailure("the test identity's URL must be valid: \(error)")
        }
    }

    /// Start parameters with the test JWT, optional stored resume credentials and ownership 1.
    public static func start(resume: ResumeCredentials? = nil, ownership: UInt64 = 1) -> ClientInput {
        .start(StartParameters(jwt: jwt, storedResume: resume, resumeOwnership: ownership))
    }
}

/// Frames a relay sends, for feeding into the machine.
public enum RelayFrames {
    /// A 1.6 `registered` with a new session and token.
    public static func registered(sessionId: String = "NEWSESSION0123456789abcdefABCDEF",
                                  token: String = "NEWTOKEN0123456789abcdefghijABCDEFGHIJ0123456789",
                                  expiresAt: String = "2026-12-01T12:00:00Z") -> WireFrame {
        text(.registered(Registered(sessionId: sessionId, relaySessionId: sessionId, resumeToken: token, expiresAt: expiresAt)))
    }

    /// A `resumed` (no new token).
    public static func resumed(sessionId: String = TestIdentity.storedResume.relaySessionId,
                               expiresAt: String = "2026-12-01T12:00:00Z") -> WireFrame {
        text(.resumed(Resumed(sessionId: sessionId, expiresAt: expiresAt)))
    }

    /// An `error` frame with `code`.
    public static func error(_ code: RelayErrorCode, message: String = "test") -> WireFrame {
        text(.error(RelayErrorMessage(code: code, message: message, timestamp: "2026-11-30T12:00:00Z")))
    }

    /// A final `rpc.response` with a result, echoing `traceparent`.
    public static func response(id: String, result: JSONValue = .object([:]), traceparent: TraceParent?,
                                isFinal: Bool? = true) -> WireFrame {
        text(.rpcResponse(RpcResponse(id: id, result: result, error: nil, isFinal: isFinal, traceparent: traceparent)))
    }

    /// An `rpc.response` carrying a JSON-RPC error.
    public static func errorResponse(id: String, code: Int, message: String, traceparent: TraceParent?) -> WireFrame {
        text(.rpcResponse(RpcResponse(id: id, result: nil, error: RpcErrorBody(code: code, message: message, data: nil),
                                      isFinal: true, traceparent: traceparent)))
    }

    /// A relay `event`.
    public static func event(_ eventType: String, payload: JSONValue, eventId: Int64) -> WireFrame {
        text(.event(EventMessage(eventType: eventType, payload: payload, eventId: eventId, sourceDeviceId: nil,
                                 targetDeviceId: nil, timestamp: "2026-11-30T12:00:00Z")))
    }

    /// `{"type":"pong"}`.
    public static var pong: WireFrame { text(.pong) }

    /// The text frame of `message` in the 1.6 form.
    public static func text(_ message: RelayMessage) -> WireFrame {
        do {
            return .text(try message.encodedText())
        } catch {
            preconditionFailure("test frames use camelCase keys only: \(error)")
        }
    }
}

extension ClientAction {
    /// The relay message of a text `send`, decoded (nil for other actions or undecodable text).
    public var sentMessage: RelayMessage? {
        guard case .send(_, .text(let text), _) = self else { return nil }
        return try? RelayMessage(decodingText: text)
    }

    /// The generation of a `send`, `openTransport` or `closeTransport`.
    public var transportGeneration: Generation? {
        switch self {
        case .send(let g, _, _), .openTransport(let g, _, _), .closeTransport(let g, _, _): g
        default: nil
        }
    }
}

extension ClientHarness {
    /// Starts the client and completes the upgrade and registration of the next generation; returns the
    /// generation. The actions of the handshake are taken on the way (that is what the name says it
    /// skips); the harness records an issue at the caller's line unless the machine ends up registered on
    /// that generation. Like `feed`, it refuses while actions are unread when it is called.
    @discardableResult
    public mutating func connectAndRegister(resume: ResumeCredentials? = nil,
                                            reply: WireFrame = RelayFrames.registered(),
                                            sourceLocation: SourceLocation = #_sourceLocation) -> Generation {
        if case .idle = machine.phase {
            feed(TestIdentity.start(resume: resume), sourceLocation: sourceLocation)
            _ = takeActions()
        }
        let g = machine.lastGeneration
        feed(.transportOpened(g), sourceLocation: sourceLocation)
        _ = takeActions()
        feed(.transportFrame(g, reply), sourceLocation: sourceLocation)
        _ = takeActions()
        if case .registered(g, _) = machine.phase { return g }
        Issue.record("connectAndRegister: the machine is \(machine.phase), not registered on \(g)",
                     sourceLocation: sourceLocation)
        return g
    }

    /// Takes the unread text `send` actions and returns the relay messages they carry, with their
    /// generations. Other actions stay unread.
    public mutating func takeSentMessages() -> [(generation: Generation, message: RelayMessage)] {
        takeActions { $0.sentMessage != nil }.compactMap { a in
            guard case .send(let g, _, _) = a, let m = a.sentMessage else { return nil }
            return (g, m)
        }
    }

    /// Feeds ``ClientInput/stop`` and checks what every stop does: the current socket (if any) is closed
    /// with 1001, exactly the calls `failingCalls` (in order) fail with "client stopped", and the phase
    /// becomes `stopped(.stopped)`. Those actions are taken; anything else the stop emits (dropped
    /// snapshots, an abandoned link) stays unread for the test to assert on.
    public mutating func stop(failingCalls: [CallID] = [], sourceLocation: SourceLocation = #_sourceLocation) {
        let g = machine.generation
        feed(.stop, sourceLocation: sourceLocation)
        let failed = takeActions { if case .callCompleted = $0 { true } else { false } }
        let expectedFailures = failingCalls.map { ClientAction.callCompleted($0, .failure(.clientStopped("stopped"))) }
        if failed != expectedFailures {
            Issue.record("stop completed \(failed), expected \(expectedFailures)", sourceLocation: sourceLocation)
        }
        let closes = takeActions { if case .closeTransport = $0 { true } else { false } }
        let expected: [ClientAction] = g.map { [.closeTransport($0, code: 1001, reason: "stopped")] } ?? []
        if closes != expected {
            Issue.record("stop closed \(closes), expected \(expected)", sourceLocation: sourceLocation)
        }
        if takeActions(where: { $0 == .phaseChanged(.stopped(.stopped)) }).isEmpty {
            Issue.record("stop did not report the phase stopped(stopped); the phase is \(machine.phase)",
                         sourceLocation: sourceLocation)
        }
    }
}
