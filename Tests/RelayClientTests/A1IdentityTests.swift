import RelayClient
import RelayProtocol
import Testing

/// SPEC A1: the identity store's outcomes and the gate that keeps the network waiting for the device ID.
@Suite struct A1IdentityTests {
    private let deviceId = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"
    private let login = StoredLogin(jwt: "eyJ.header.sig", expiry: .seconds(3600))

    private func started() -> IdentityGate {
        var gate = IdentityGate()
        #expect(gate.handle(.start) == [.readIdentity])
        return gate
    }

    @Test func availableWithLoginIsReadyAtOnce() {
        var gate = started()
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: login)))
                == [.ready(deviceId: deviceId, login: login)])
        #expect(gate.isReady)
        #expect(gate.deviceId == deviceId)
    }

    @Test func availableWithoutLoginIsReadyWithNoLogin() {
        var gate = started()
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: nil)))
                == [.ready(deviceId: deviceId, login: nil)])
        #expect(gate.state == .ready(deviceId: deviceId, login: nil))
    }

    @Test func lockedBeforeFirstUnlockWaitsForProtectedData() {
        var gate = started()
        #expect(gate.handle(.identityRead(.lockedBeforeFirstUnlock)).isEmpty)
        #expect(gate.state == .waitingForFirstUnlock)
        #expect(gate.deviceId == nil)
        // App-active is not the trigger here; protected data is.
        #expect(gate.handle(.appActive).isEmpty)
        #expect(gate.readsRequested == 1)
        #expect(gate.handle(.protectedDataAvailable) == [.readIdentity])
        #expect(gate.readsRequested == 2)
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: login)))
                == [.ready(deviceId: deviceId, login: login)])
    }

    @Test func lockedBeforeFirstUnlockStaysWaitingWhileStillLocked() {
        var gate = started()
        _ = gate.handle(.identityRead(.lockedBeforeFirstUnlock))
        #expect(gate.handle(.protectedDataAvailable) == [.readIdentity])
        // Still locked (a spurious notification): back to waiting, no ready.
        #expect(gate.handle(.identityRead(.lockedBeforeFirstUnlock)).isEmpty)
        #expect(gate.state == .waitingForFirstUnlock)
        #expect(gate.handle(.protectedDataAvailable) == [.readIdentity])
    }

    @Test func jwtLockedKeepsTheLoginAndRechecksOnProtectedData() {
        var gate = started()
        let effects = gate.handle(.identityRead(.jwtLocked(deviceId: deviceId)))
        // No ready (that would say "no login", i.e. log out), nothing deleted, no reset offered.
        #expect(effects.isEmpty)
        #expect(gate.state == .jwtLocked(deviceId: deviceId))
        #expect(gate.deviceId == deviceId)
        #expect(!gate.isReady)
        #expect(gate.handle(.protectedDataAvailable) == [.readIdentity])
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: login)))
                == [.ready(deviceId: deviceId, login: login)], "the stored login survives the locked launch")
    }

    @Test func jwtLockedRechecksOnAppActive() {
        var gate = started()
        _ = gate.handle(.identityRead(.jwtLocked(deviceId: deviceId)))
        #expect(gate.handle(.appActive) == [.readIdentity])
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: login)))
                == [.ready(deviceId: deviceId, login: login)])
    }

    @Test func jwtLockedAgainKeepsWaitingForTheNextTrigger() {
        var gate = started()
        _ = gate.handle(.identityRead(.jwtLocked(deviceId: deviceId)))
        #expect(gate.handle(.appActive) == [.readIdentity])
        #expect(gate.handle(.identityRead(.jwtLocked(deviceId: deviceId))).isEmpty)
        #expect(gate.state == .jwtLocked(deviceId: deviceId))
        #expect(gate.handle(.protectedDataAvailable) == [.readIdentity])
        #expect(gate.readsRequested == 3)
    }

    @Test func aTriggerRacingAReadIsNotLost() {
        var gate = started()
        _ = gate.handle(.identityRead(.jwtLocked(deviceId: deviceId)))
        #expect(gate.handle(.appActive) == [.readIdentity])
        // Protected data becomes available while that read is in flight, and the read still saw it locked.
        #expect(gate.handle(.protectedDataAvailable).isEmpty, "one read at a time")
        #expect(gate.handle(.identityRead(.jwtLocked(deviceId: deviceId))) == [.readIdentity])
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: login)))
                == [.ready(deviceId: deviceId, login: login)])

        var first = started()
        #expect(first.handle(.protectedDataAvailable).isEmpty)
        #expect(first.handle(.identityRead(.lockedBeforeFirstUnlock)) == [.readIdentity])
        // App-active during a read does not re-read a before-first-unlock outcome.
        var other = started()
        #expect(other.handle(.appActive).isEmpty)
        #expect(other.handle(.identityRead(.lockedBeforeFirstUnlock)).isEmpty)
    }

    @Test func unreadableOffersResetDeviceIdentity() {
        var gate = started()
        #expect(gate.handle(.identityRead(.unreadable)) == [.offerResetDeviceIdentity])
        #expect(gate.state == .unreadable)
        #expect(gate.handle(.appActive).isEmpty)
        #expect(gate.handle(.protectedDataAvailable).isEmpty)
        #expect(gate.handle(.resetConfirmed) == [.resetDeviceIdentity, .readIdentity])
        let fresh = "0d7c9f43-8a2e-4b61-b0c5-6e1f2a3b4c5d"
        #expect(gate.handle(.identityRead(.available(deviceId: fresh, login: nil)))
                == [.ready(deviceId: fresh, login: nil)])
    }

    @Test func aBlankDeviceIdIsTreatedAsUnreadable() {
        var gate = started()
        #expect(gate.handle(.identityRead(.available(deviceId: "  ", login: login))) == [.offerResetDeviceIdentity])
        var locked = started()
        #expect(locked.handle(.identityRead(.jwtLocked(deviceId: ""))) == [.offerResetDeviceIdentity])
    }

    @Test func inputsThatDoNotApplyAreIgnoredVisibly() {
        var gate = IdentityGate()
        #expect(gate.handle(.identityRead(.available(deviceId: deviceId, login: nil)))
                == [.ignored(.readNotRequested)], "an unrequested read cannot make the gate ready")
        #expect(!gate.isReady)
        #expect(gate.handle(.resetConfirmed) == [.ignored(.notUnreadable)])
        _ = gate.handle(.start)
        #expect(gate.handle(.start) == [.ignored(.alreadyStarted)])
        _ = gate.handle(.identityRead(.available(deviceId: deviceId, login: nil)))
        #expect(gate.handle(.appActive).isEmpty)
        #expect(gate.handle(.protectedDataAvailable).isEmpty)
        #expect(gate.state == .ready(deviceId: deviceId, login: nil))
    }

    /// Every sequence of up to five inputs: `ready` (the only effect that lets network work start) comes
    /// only as the answer to a read that returned a readable device ID, and names exactly that identity.
    @Test func noNetworkEffectBeforeTheDeviceIdIsKnown() {
        let inputs: [IdentityInput] = [
            .start, .protectedDataAvailable, .appActive, .resetConfirmed,
            .identityRead(.lockedBeforeFirstUnlock), .identityRead(.jwtLocked(deviceId: deviceId)),
            .identityRead(.unreadable), .identityRead(.available(deviceId: deviceId, login: login)),
        ]
        var sequences: [[IdentityInput]] = [[]]
        var checked = 0
        var readySequences = 0
        var violations: [String] = []
        for _ in 0..<5 {
            sequences = sequences.flatMap { s in inputs.map { s + [$0] } }
            for sequence in sequences {
                var gate = IdentityGate()
                var readyEmitted = false
                for input in sequence {
                    for effect in gate.handle(input) {
                        guard case .ready(let id, let readyLogin) = effect else { continue }
                        if input != .identityRead(.available(deviceId: id, login: readyLogin)) {
                            violations.append("ready(\(id)) caused by \(input) in \(sequence)")
                        }
                        if readyEmitted { violations.append("ready twice in \(sequence)") }
                        readyEmitted = true
                    }
                }
                if gate.isReady != readyEmitted || (readyEmitted && gate.deviceId == nil) {
                    violations.append("state disagrees with the effects after \(sequence)")
                }
                if readyEmitted { readySequences += 1 }
                checked += 1
            }
        }
        #expect(violations.isEmpty, "\(violations.count) violations; first: \(violations.first ?? "")")
        #expect(checked == 8 + 64 + 512 + 4096 + 32768)
        #expect(readySequences > 0, "the enumeration reaches ready")
    }
}
