import RelayProtocol

/// SPEC A1 (identity): the machine hosts `IdentityGate` and translates its effects into its own actions
/// and timers.
extension RelayClientMachine {

    mutating func applyIdentity(_ effects: [IdentityEffect]) {
        for effect in effects {
            switch effect {
            case .ready(let deviceId, let login):
                guard deviceId.lowercased() == configuration.wireDeviceId else {
                    emit(.diagnostic(.identityMismatch(configured: configuration.wireDeviceId, read: deviceId.lowercased())))
                    continue
                }
                emit(.identity(effect))
                if let login {
                    jwt = login.jwt
                    applyAuth(auth.handle(.resumeSession(login), at: now))
                }
                if let pending = state.pendingStart {
                    handleStart(pending)
                }
            case .ignored(let what):
                emit(.diagnostic(.identity(what)))
            case .readIdentity, .offerResetDeviceIdentity, .resetDeviceIdentity:
                emit(.identity(effect))
            }
        }
    }
}
