@testable import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// The connection state by phase (issue #19 point 5): the data that belongs to a phase lives in that
/// phase's case, so after every input the phase, the generation, the held sends, the registration
/// attempt, the reconnect ladder and a held start agree. Random sessions on virtual time check
/// ``RelayClientMachine/connectionStateProblems(lastReported:)`` after every input; the golden traces'
/// inputs are checked the same way in `GoldenTraceStateTests` (ReplayTests).
@Suite struct ConnectionStateTests {
    @Test(arguments: 1...24 as ClosedRange<UInt64>)
    func everyInputOfARandomSessionLeavesTheStateConsistent(seed: UInt64) {
        var session = RandomSession(seed: seed, linked: seed % 4 != 0, instantReconnect: seed % 6 == 0)
        for _ in 0..<600 { session.step() }
        #expect(session.problems.isEmpty, "\(session.problems.prefix(5).joined(separator: "\n"))")
        #expect(session.inputs > 300)
    }

    /// The random sessions reach what the checks are about: held sends, registration attempts, a held
    /// start, and every phase.
    @Test func theRandomSessionsReachEveryPhaseHeldSendsAndAttempts() {
        var coverage = RandomSession.Coverage()
        for seed in 1...24 as ClosedRange<UInt64> {
            var session = RandomSession(seed: seed, linked: seed % 4 != 0, instantReconnect: seed % 6 == 0)
            for _ in 0..<600 { session.step() }
            coverage.merge(session.coverage)
        }
        #expect(coverage.phases.isSuperset(of: ["idle", "connecting", "registering", "registered", "linking",
                                                  "waitingToReconnect", "suspended", "stopped"]), "\(coverage.phases.sorted())")
        #expect(coverage.inputsWithHeldSends > 50)
        #expect(coverage.heldSendsSentAgain > 10)
        #expect(coverage.heldSendsOfRetiredSockets > 10, "a socket retired while it held sends")
        #expect(coverage.inputsWithRegistrationAttempt > 50)
        #expect(coverage.heldStarts > 0)
    }

    /// The checks can fail: a state that disagrees is reported.
    @Test func theChecksReportAStateThatDisagrees() {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        var m = h.machine
        #expect(m.connectionStateProblems(lastReported: .connecting(Generation(1))).isEmpty)
        #expect(!m.connectionStateProblems(lastReported: .idle).isEmpty, "a phase other than the one reported")

        var held = m
        held.modifySocket { $0.heldSends[99] = HeldSend(frame: .text("{}"), attempt: 2) }
        #expect(held.connectionStateProblems().contains { $0.contains("held send 99") }, "a held send without its timer")

        m.state = .retired(reported: .connecting(Generation(1)), reconnectAttempt: 0)
        #expect(m.connectionStateProblems().contains { $0.contains("transient") })
        #expect(m.connectionStateProblems().contains { $0.contains("but generation none") })
    }

    /// A send held on a socket goes out again on the same socket after it registers (the held send
    /// belongs to the generation, not to the phase), and a send held on a socket that was retired never
    /// goes out: its retry timer was cancelled with the socket and the held send went with it.
    @Test func aHeldSendFollowsItsSocketAndDiesWithIt() throws {
        var h = ClientHarness(exhaustiveTimers: true)
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .armTimer, .phaseChanged)
        let g1 = h.machine.lastGeneration
        h.feed(.transportOpened(g1))
        let register = try #require(h.takeActions().compactMap { if case .send(_, let f, _) = $0 { f } else { nil } }.first)
        h.feed(.sendFailed(g1, frame: register, attempt: 1, transient: true, reason: "EAGAIN"))
        #expect(h.takeActions().contains { if case .armTimer(.sendRetry(g1, slot: 1), _) = $0 { true } else { false } })
        #expect(h.machine.state.socket?.heldSends.count == 1)
        h.feed(.transportFrame(g1, RelayFrames.registered()))
        h.skip(.cancelTimer, .armTimer, .storeResumeCredentials, .phaseChanged)
        #expect(h.machine.state.socket?.heldSends.count == 1, "registering to registered keeps the socket and what it holds")
        var copy = h.machine  // a checkpoint
        h.advance(by: .seconds(2))
        #expect(h.takeActions().contains(.send(g1, register, attempt: 2)))
        #expect(h.machine.state.socket?.heldSends.isEmpty == true)
        #expect(copy.state.socket?.heldSends.count == 1, "the checkpoint copy kept its held send")

        // Again on the checkpoint, but the socket closes first: the held send dies with it.
        let closed = copy.handle(.transportClosed(g1, code: 1006, reason: "gone"), at: copy.now)
        #expect(closed.contains(.cancelTimer(.sendRetry(g1, slot: 1))))
        #expect(copy.phase == .connecting(Generation(2)), "the first reconnect is immediate")
        #expect(copy.state.socket?.heldSends.isEmpty == true)
        let late = copy.handle(.timerFired(.sendRetry(g1, slot: 1)), at: copy.now + .seconds(2))
        #expect(!late.contains { if case .send = $0 { true } else { false } })
        #expect(copy.connectionStateProblems().isEmpty)
    }

    /// The registration attempt bound to a socket exists while it connects and registers, is completed
    /// by `registered`, and is abandoned (no longer pending in the region) when the socket is retired.
    @Test func theRegistrationAttemptLivesOnlyWhileConnectingAndRegistering() throws {
        var h = ClientHarness()
        h.feed(.selectRegion(.eu))
        h.skip(.region)
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        let g1 = h.machine.lastGeneration
        let attempt = try #require(h.machine.state.registrationAttempt)
        #expect(h.machine.region.origin(of: attempt) != nil)
        h.feed(.transportOpened(g1))
        h.skip(.phaseChanged, .send)
        #expect(h.machine.state.registrationAttempt == attempt)
        h.feed(.transportFrame(g1, RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        #expect(h.machine.state.registrationAttempt == nil)
        #expect(h.machine.region.origin(of: attempt) == nil, "completed")
        #expect(h.machine.reconnectAttempt == 0)

        h.feed(.transportClosed(g1, code: 1006, reason: "gone"))
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        let g2 = h.machine.lastGeneration
        let second = try #require(h.machine.state.registrationAttempt)
        #expect(h.machine.phase == .connecting(g2), "the first reconnect is immediate")
        #expect(h.machine.reconnectAttempt == 1)
        #expect(second != attempt)
        h.feed(.transportFailed(g2, .network("reset")))
        h.skip(.connectionFailed, .phaseChanged)
        #expect(h.machine.region.origin(of: second) == nil, "abandoned with its socket")
        #expect(h.machine.phase == .waitingToReconnect(attempt: 2))
        #expect(h.machine.reconnectAttempt == 2)
        h.finish(allowingArmedTimers: true)
    }

    /// A start that arrives before the device identity waits in the idle phase, and starts once the
    /// identity is ready; a stop in between drops it.
    @Test func aStartBeforeTheIdentityWaitsInTheIdlePhase() {
        var m = RelayClientMachine(configuration: TestIdentity.configuration())
        #expect(m.handle(TestIdentity.start(), at: .zero) == [.diagnostic(.waitingForIdentity)])
        #expect(m.state.pendingStart != nil)
        #expect(m.phase == .idle)
        _ = m.handle(.identity(.start), at: .zero)
        var stopped = m
        let ready = m.handle(.identity(.identityRead(.available(deviceId: TestIdentity.deviceId, login: nil))), at: .zero)
        #expect(ready.contains(.phaseChanged(.connecting(Generation(1)))))
        #expect(m.state.pendingStart == nil)

        _ = stopped.handle(.stop, at: .zero)
        #expect(stopped.state.pendingStart == nil)
        let readyAfterStop = stopped.handle(.identity(.identityRead(.available(deviceId: TestIdentity.deviceId, login: nil))), at: .zero)
        #expect(!readyAfterStop.contains { if case .phaseChanged = $0 { true } else { false } })
        #expect(stopped.phase == .stopped(.stopped))
    }
}

/// SplitMix64, for the random sessions' choices (the machine's own randomness is its seed's).
struct Dice {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }
    mutating func percent(_ p: Int) -> Bool { below(100) < p }
    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
}

/// A random session on virtual time: random inputs (mostly for the current socket, some stale), the due
/// timers fired in deadline order, and the checks after every input.
struct RandomSession {
    struct Coverage {
        var phases: Set<String> = []
        var inputsWithHeldSends = 0
        var heldSendsSentAgain = 0
        var heldSendsOfRetiredSockets = 0
        var inputsWithRegistrationAttempt = 0
        var heldStarts = 0

        mutating func merge(_ o: Coverage) {
            phases.formUnion(o.phases)
            inputsWithHeldSends += o.inputsWithHeldSends
            heldSendsSentAgain += o.heldSendsSentAgain
            heldSendsOfRetiredSockets += o.heldSendsOfRetiredSockets
            inputsWithRegistrationAttempt += o.inputsWithRegistrationAttempt
            heldStarts += o.heldStarts
        }
    }

    var machine: RelayClientMachine
    var now: Moment = .zero
    var dice: Dice
    var lastReported: ConnectionPhase = .idle
    var problems: [String] = []
    var inputs = 0
    var coverage = Coverage()
    private var calls: UInt64 = 0

    init(seed: UInt64, linked: Bool, instantReconnect: Bool) {
        dice = Dice(state: seed)
        // swiftlint-free: the configuration is the test identity's, with or without a linked desktop.
        let base = TestIdentity.configuration(seed: seed)
        let configuration = (try? ClientConfiguration(deviceId: TestIdentity.deviceId, deviceName: TestIdentity.deviceName,
                                                      desktopId: linked ? TestIdentity.desktopId : "",
                                                      relayURL: TestIdentity.relayURL, seed: seed)) ?? base
        var tuning = ClientTuning.spec
        if instantReconnect { tuning.reconnectDelays = [.zero, .seconds(1)] }
        machine = RelayClientMachine(configuration: configuration, tuning: tuning)
        let startFirst = dice.percent(50)
        if startFirst { feed(TestIdentity.start()) }
        feed(.identity(.start))
        feed(.identity(.identityRead(.available(deviceId: TestIdentity.deviceId, login: nil))))
        if !startFirst { feed(TestIdentity.start(resume: dice.percent(50) ? TestIdentity.storedResume : nil)) }
    }

    /// Feeds one input at `now` and checks the machine after it.
    mutating func feed(_ input: ClientInput) {
        let before = machine.generation
        let heldBefore = machine.state.socket?.heldSends.count ?? 0
        let actions = machine.handle(input, at: now)
        inputs += 1
        for action in actions {
            switch action {
            case .phaseChanged(let p):
                lastReported = p
            case .send(let g, _, let attempt):
                // A send goes out on a socket that was current when the input came, or that it opened.
                if g != before, g != machine.generation { problems.append("\(input) at \(now) sent on \(g), not current") }
                if attempt > 1 { coverage.heldSendsSentAgain += 1 }
            default:
                break
            }
        }
        if heldBefore > 0, machine.generation != before { coverage.heldSendsOfRetiredSockets += 1 }
        problems += machine.connectionStateProblems(lastReported: lastReported).map { "after \(input) at \(now): \($0)" }
        let phase = "\(machine.phase)"
        coverage.phases.insert(String(phase.prefix { $0 != "(" }))
        if machine.state.socket?.heldSends.isEmpty == false { coverage.inputsWithHeldSends += 1 }
        if machine.state.registrationAttempt != nil { coverage.inputsWithRegistrationAttempt += 1 }
        if machine.state.pendingStart != nil { coverage.heldStarts += 1 }
    }

    /// Advances the clock by up to 3 s, firing the timers due on the way, then feeds one random input.
    mutating func step() {
        let target = now + .milliseconds(dice.below(3_000))
        while let next = machine.armedTimers.min(by: { $0.deadline < $1.deadline }), next.deadline <= target {
            now = max(now, next.deadline)
            feed(.timerFired(next.id))
        }
        now = target
        if let input = randomInput() { feed(input) }
    }

    private mutating func randomInput() -> ClientInput? {
        let last = machine.lastGeneration
        let current = machine.generation ?? last
        let g = dice.percent(85) ? current : Generation(UInt64(dice.below(Int(last.rawValue) + 1)))
        switch dice.below(100) {
        case 0..<8:
            return .transportOpened(g)
        case 8..<30:
            return .transportFrame(g, randomFrame())
        case 30..<35:
            return .transportClosed(g, code: 1006, reason: "gone")
        case 35..<39:
            return .transportFailed(g, dice.percent(30) ? .upgradeRefused(status: 401) : .network("reset"))
        case 39..<52:
            let frame: WireFrame = dice.percent(50) ? RelayFrames.text(.heartbeat(HeartbeatPayload(activeSessionId: nil))) : .text("{\"type\":\"pong\"}")
            return .sendFailed(g, frame: frame, attempt: 1 + dice.below(3), transient: dice.percent(85), reason: "EAGAIN")
        case 52..<60:
            calls += 1
            return .call(CallRequest(callId: CallID(calls), method: dice.pick(["system.ping", "session.list"])))
        case 60..<64:
            return .networkPath(dice.pick([.unsatisfied, .satisfied(.wifi), .satisfied(.cellular)]))
        case 64..<68:
            return .appState(dice.pick([.active, .inactive, .background]))
        case 68..<70:
            return .desktopMediaPlaying(dice.percent(50))
        case 70..<72:
            return .push(.desktopOnline(desktopId: machine.desktopId))
        case 72..<78:
            return .link(dice.pick([.enterCode("K7QF-3M9X"), .stored(ownership: 7, storedResume: nil), .storeFailed("disk full")]))
        case 78..<81:
            return .selectRegion(dice.pick([.eu, .us]))
        case 81..<85:
            return TestIdentity.start(resume: dice.percent(50) ? TestIdentity.storedResume : nil)
        case 85..<87:
            return .stop
        case 87..<90:
            // A stale timer: one that is not armed (a driver race).
            return .timerFired(dice.pick([.sendRetry(g, slot: UInt64(dice.below(5))), .heartbeat(g), .handshake(g), .reconnect(attempt: 1)]))
        default:
            return nil  // time passes
        }
    }

    private mutating func randomFrame() -> WireFrame {
        switch dice.below(12) {
        case 0, 1: return RelayFrames.registered()
        case 2: return RelayFrames.resumed()
        case 3: return RelayFrames.error(.invalidResume)
        case 4: return RelayFrames.error(.deviceOwnershipFailed)
        case 5: return RelayFrames.text(.ping)
        case 6: return RelayFrames.pong
        case 7:
            return RelayFrames.event("device-status", payload: ["deviceId": .string(machine.desktopId),
                                                                "status": .string(dice.pick(["online", "disconnected"]))],
                                     eventId: Int64(inputs))
        case 8:
            let link = LinkAccepted(desktopDeviceId: "0C5D7E1A-AAAA-4BBB-8CCC-123456789ABC", desktopName: "Studio Mac",
                                    mobileDeviceId: "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", mobileName: "P",
                                    linkedAt: "2026-01-15T12:00:05.250Z")
            return RelayFrames.text(.link(.accepted(link)))
        case 9: return RelayFrames.error(DeviceLink.Refusal.invalid, message: "invalid")
        default:
            guard let call = dice.percent(80) ? machine.pendingCalls.all.last : nil else { return RelayFrames.pong }
            return dice.percent(80)
                ? RelayFrames.response(id: call.requestId, traceparent: call.request.traceparent)
                : RelayFrames.errorResponse(id: call.requestId, code: -32000, message: "no", traceparent: call.request.traceparent)
        }
    }
}
