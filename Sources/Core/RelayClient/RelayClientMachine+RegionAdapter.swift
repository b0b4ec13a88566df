import RelayProtocol

/// SPEC A3 (region): the machine hosts `RegionBinding` and translates its effects into its own actions and
/// timers.
extension RelayClientMachine {
    mutating func selectRegion(_ r: Region) {
        var moved = false
        for effect in region.select(r) {
            switch effect {
            case .persistRegion:
                emit(.region(effect))
            case .retireAttempts(let ids, _):
                for id in ids where id != state.registrationAttempt {
                    if let request = httpAttempts.first(where: { $0.value == id })?.key {
                        httpAttempts[request] = nil
                        region.abandon(id)
                        applyAuth(auth.handle(.httpFailed(request, reason: "region changed"), at: now))
                    }
                }
            case .publishRegion:
                emit(.region(effect))
                moved = true
            }
        }
        // The relay of the previous origin is closed and one socket opens on the new origin.
        guard moved, isRunning else { return }
        switch phase {
        case .connecting, .registering, .registered, .waitingToReconnect:
            closeOnPurpose("region changed")
            openNextGeneration(reconnectAttempt: 0)
        default:
            return  // suspended or stopped: the next socket uses the new origin
        }
    }
}
