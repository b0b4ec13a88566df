import RelayProtocol

/// SPEC A11 (timeline interest): the machine hosts `TimelineInterestCoordinator` and translates its
/// effects into its own actions and timers.
extension RelayClientMachine {
    mutating func interestInput(_ input: InterestInput) {
        switch input {
        case .claim(let id, let session):
            applyInterest(interest.claim(id, desktopId: desktopId, baseSessionId: session, at: now))
        case .confirmVisible(let id):
            applyInterest(interest.confirmVisible(id, at: now))
        case .release(let id):
            applyInterest(interest.release(id, at: now))
        }
    }

    mutating func applyInterest(_ effects: [InterestEffect]) {
        for effect in effects {
            switch effect {
            case .send(let leaseDesktop, let lease):
                guard leaseDesktop == desktopId else { continue }
                guard case .registered(let g, _) = phase else {
                    applyInterest(interest.deliveryFailed(desktopId: desktopId, at: now, rng: &rng))
                    continue
                }
                let message = RelayMessage.event(EventMessage(eventType: EventNames.chatTimelineInterest, payload: lease.json,
                                                              eventId: nil, sourceDeviceId: nil, targetDeviceId: nil,
                                                              timestamp: nil))
                guard let text = try? message.encodedText() else { continue }
                lastInterestFrame = text
                emit(.send(g, .text(text), attempt: 1))
            case .arm(let t, let deadline):
                arm(.interest(t), at: deadline)
            case .cancel(let t):
                cancel(.interest(t))
            case .gaveUp(_, let lease):
                emit(.diagnostic(.interestGaveUp(lease)))
            case .diagnostic(let d):
                emit(.diagnostic(.interest(d)))
            }
        }
    }

    /// A9/A11: the app's lifecycle drives the interest coordinator: inactive suspends timeline interest,
    /// background ends every lease, the foreground starts a new foreground generation.
    mutating func interestFollowsApp(from old: AppState, to new: AppState) {
        let wasForeground = old != .background, isForeground = new != .background
        let wasActive = old == .active, isActive = new == .active
        if wasActive, !isActive { applyInterest(interest.suspend(at: now)) }
        if wasForeground, !isForeground { applyInterest(interest.enteredBackground(at: now)) }
        if !wasForeground, isForeground { applyInterest(interest.enteredForeground(at: now)) }
        if !wasActive, isActive { applyInterest(interest.resume(at: now)) }
    }
}
