import RelayProtocol

extension RelayClientMachine {
    /// What in the machine disagrees with its connection state, between two inputs (empty when nothing
    /// does): for the tests, which check it after every input of random sessions and of the golden traces.
    /// It checks what the types do not already guarantee: the transient case never outlives an input;
    /// the phase reported last is the phase; each held send has its retry timer armed for the current
    /// socket and each such timer its held send; a registration attempt is still pending in the region;
    /// a waiting phase has its reconnect timer; a link socket is the current socket.
    func connectionStateProblems(lastReported: ConnectionPhase? = nil) -> [String] {
        var problems: [String] = []
        if state.isTransient { problems.append("the transient state \(state.phase) outlived an input") }
        if phase.generation != generation { problems.append("phase \(phase) but generation \(generation.map { "\($0)" } ?? "none")") }
        if let lastReported, lastReported != phase { problems.append("phase \(phase) but \(lastReported) was reported last") }
        if let socket = state.socket {
            for slot in socket.heldSends.keys where armed[.sendRetry(socket.generation, slot: slot)] == nil {
                problems.append("held send \(slot) of \(socket.generation) has no retry timer")
            }
            if socket.lastInbound > now { problems.append("last inbound \(socket.lastInbound) after now \(now)") }
        }
        for id in armed.keys {
            guard case .sendRetry(let g, let slot) = id, g == generation else { continue }
            if state.socket?.heldSends[slot] == nil { problems.append("retry timer \(id) holds no send") }
        }
        if let attempt = state.registrationAttempt, region.origin(of: attempt) == nil {
            problems.append("registration attempt \(attempt) is no longer pending in the region")
        }
        if case .waitingToReconnect(let attempt) = state, armed[.reconnect(attempt: attempt)] == nil {
            problems.append("waiting for reconnect \(attempt) without its timer")
        }
        if let g = linkAttempt?.generation, phase != .linking(g) {
            problems.append("link socket \(g) in phase \(phase)")
        }
        return problems
    }
}
