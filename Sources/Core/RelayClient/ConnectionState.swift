import RelayProtocol

/// The socket the machine holds now, and what belongs to it alone: it lives inside the
/// ``ConnectionState`` case of the phase it is in, and goes when that socket is retired or replaced.
struct CurrentSocket: Sendable {
    /// Its transport generation.
    let generation: Generation
    /// The time of the last inbound message on it (its opening counts as one).
    var lastInbound: Moment
    /// Its sends that failed transiently, each waiting for its `sendRetry(generation, slot)` timer, by slot.
    /// A held send lives here and nowhere else, so it cannot outlive its socket.
    var heldSends: [UInt64: HeldSend] = [:]

    init(generation: Generation, openedAt time: Moment) {
        self.generation = generation
        lastInbound = time
    }
}

/// A send that failed transiently and goes out again when its retry timer fires (SPEC A6).
struct HeldSend: Sendable, Hashable {
    var frame: WireFrame
    var attempt: Int
}

/// The machine's connection state, in the swift-nio-http2 style: each case carries the data that belongs
/// to that phase only, so a generation, a registration attempt or a held send cannot disagree with it.
/// ``RelayClientMachine/phase``, ``RelayClientMachine/generation``, ``RelayClientMachine/lastInbound``
/// and ``RelayClientMachine/reconnectAttempt`` are read from it.
///
/// `reconnectAttempt` is the position on the reconnect ladder: it survives the phases between two
/// registrations (a failed attempt connects, registers, fails, waits for the next), and a registration,
/// which ends the ladder, carries none (it is 0 there).
enum ConnectionState: Sendable {
    /// Not started; a `start` that arrived before the device identity waits here.
    case idle(pendingStart: StartParameters?)
    /// The socket is being opened. `registration` is the A3 attempt the socket is bound to (nil when no
    /// region is chosen: then nothing is bound).
    case connecting(CurrentSocket, registration: AttemptID?, reconnectAttempt: Int)
    /// The socket is open; `register` is sent (or re-sent after `invalidResume`). The attempt the socket
    /// was bound to at its opening is completed by `registered`/`resumed`, and then is nil.
    case registering(CurrentSocket, registration: AttemptID?, reconnectAttempt: Int)
    /// Registered (or resumed) with the relay.
    case registered(CurrentSocket, relaySessionId: String)
    /// A socket open (or opening) to link a desktop with a code (docs/DEVICE_LINK.md).
    case linking(CurrentSocket, reconnectAttempt: Int)
    /// Waiting for the reconnect timer of attempt `attempt`.
    case waitingToReconnect(attempt: Int)
    /// A9: no socket on purpose.
    case suspended(SuspendReason, reconnectAttempt: Int)
    /// Stopped; a `start` that arrived before the device identity waits here.
    case stopped(ClientStopReason, pendingStart: StartParameters?, reconnectAttempt: Int)
    /// Inside one input only: the current socket was retired (``RelayClientMachine/retire(_:)``) and
    /// the next phase is not entered yet; every retire is followed by a transition before the input
    /// ends. It keeps the phase last reported, so that transition reports its own, and the ladder
    /// position the next phase starts from.
    case retired(reported: ConnectionPhase, reconnectAttempt: Int)

    /// The public phase.
    var phase: ConnectionPhase {
        switch self {
        case .idle: .idle
        case .connecting(let s, _, _): .connecting(s.generation)
        case .registering(let s, _, _): .registering(s.generation)
        case .registered(let s, let id): .registered(s.generation, relaySessionId: id)
        case .linking(let s, _): .linking(s.generation)
        case .waitingToReconnect(let attempt): .waitingToReconnect(attempt: attempt)
        case .suspended(let reason, _): .suspended(reason)
        case .stopped(let reason, _, _): .stopped(reason)
        case .retired(let reported, _): reported
        }
    }

    /// The current socket, if any.
    var socket: CurrentSocket? {
        switch self {
        case .connecting(let s, _, _), .registering(let s, _, _), .registered(let s, _), .linking(let s, _): s
        case .idle, .waitingToReconnect, .suspended, .stopped, .retired: nil
        }
    }

    /// The generation of the current socket, if any (without copying the socket out).
    var generation: Generation? {
        switch self {
        case .connecting(let s, _, _), .registering(let s, _, _), .registered(let s, _), .linking(let s, _): s.generation
        case .idle, .waitingToReconnect, .suspended, .stopped, .retired: nil
        }
    }

    /// The last inbound time on the current socket, if any (without copying the socket and its held sends
    /// out).
    var lastInbound: Moment? {
        switch self {
        case .connecting(let s, _, _), .registering(let s, _, _), .registered(let s, _), .linking(let s, _): s.lastInbound
        case .idle, .waitingToReconnect, .suspended, .stopped, .retired: nil
        }
    }

    /// The reconnect ladder's position (0 when registered or never started).
    var reconnectAttempt: Int {
        switch self {
        case .idle, .registered: 0
        case .connecting(_, _, let n), .registering(_, _, let n), .linking(_, let n), .waitingToReconnect(let n),
             .suspended(_, let n), .stopped(_, _, let n), .retired(_, let n): n
        }
    }

    /// The A3 registration attempt the current socket is bound to, while connecting or registering.
    var registrationAttempt: AttemptID? {
        switch self {
        case .connecting(_, let a, _), .registering(_, let a, _): a
        default: nil
        }
    }

    /// The `start` waiting for the device identity, while idle or stopped.
    var pendingStart: StartParameters? {
        switch self {
        case .idle(let p), .stopped(_, let p, _): p
        default: nil
        }
    }

    /// Whether this is the transient ``retired(reported:reconnectAttempt:)`` (never between inputs).
    var isTransient: Bool {
        if case .retired = self { true } else { false }
    }
}

extension RelayClientMachine {
    /// Enters `next`, reporting the phase when it differs from the one before.
    mutating func enter(_ next: ConnectionState) {
        let before = state.phase
        state = next
        let after = state.phase
        if after != before { emit(.phaseChanged(after)) }
    }

    /// Modifies the current socket in place (nothing when there is none). The case is taken out of
    /// `state` first (a placeholder stands in), so its held sends are uniquely referenced and mutate
    /// without a copy, then put back.
    @inline(__always)
    mutating func modifySocket(_ body: (inout CurrentSocket) -> Void) {
        switch state {
        case .connecting(var s, let a, let n):
            state = .idle(pendingStart: nil)
            body(&s)
            state = .connecting(s, registration: a, reconnectAttempt: n)
        case .registering(var s, let a, let n):
            state = .idle(pendingStart: nil)
            body(&s)
            state = .registering(s, registration: a, reconnectAttempt: n)
        case .registered(var s, let id):
            state = .idle(pendingStart: nil)
            body(&s)
            state = .registered(s, relaySessionId: id)
        case .linking(var s, let n):
            state = .idle(pendingStart: nil)
            body(&s)
            state = .linking(s, reconnectAttempt: n)
        case .idle, .waitingToReconnect, .suspended, .stopped, .retired:
            return
        }
    }
}
