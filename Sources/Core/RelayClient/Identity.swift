public import RelayProtocol

// SPEC A1 has no numbers, so this file adds nothing to `ClientConstants`.

/// The stored app login: the app JWT and its expiry (SPEC A1, A2).
///
/// The expiry is a ``Moment`` on the session clock, not a wall-clock date: the driver converts the stored
/// wall-clock expiry when it reads the keychain (`expiry = now + (storedExpiry - wallClockNow)`) and back
/// when it writes. Keeping wall-clock time out of the components keeps them replayable; a trace records
/// the converted value.
public struct StoredLogin: Sendable, Hashable, CustomStringConvertible {
    /// The app JWT (a secret: the capture layer redacts it).
    public var jwt: String
    /// When the JWT expires, on the session clock.
    public var expiry: Moment

    /// Creates a login.
    public init(jwt: String, expiry: Moment) {
        self.jwt = jwt
        self.expiry = expiry
    }

    /// `login(expires <expiry>)`; never shows the JWT.
    public var description: String { "login(expires \(expiry))" }
}

/// What reading the identity store gave (SPEC A1). The driver reads off the main thread and feeds the
/// outcome back as ``IdentityInput/identityRead(_:)``.
public enum IdentityReadOutcome: Sendable, Hashable {
    /// The device ID is readable, and so is the login item (`login` is nil when there is no stored login).
    case available(deviceId: String, login: StoredLogin?)
    /// A launch before the first unlock: not even the device ID (AfterFirstUnlockThisDeviceOnly) is readable.
    case lockedBeforeFirstUnlock
    /// The phone is locked: the device ID is readable, the JWT (WhenUnlockedThisDeviceOnly) is not.
    case jwtLocked(deviceId: String)
    /// The device ID item cannot be read at all (corrupt, or an unexpected keychain error).
    case unreadable
}

/// Everything that happens to ``IdentityGate``.
public enum IdentityInput: Sendable, Hashable {
    /// The app launched: read the identity.
    case start
    /// The identity store answered a ``IdentityEffect/readIdentity`` request.
    case identityRead(IdentityReadOutcome)
    /// The system reported that protected data became available (`protectedDataDidBecomeAvailable`).
    case protectedDataAvailable
    /// The app became active.
    case appActive
    /// The user confirmed **Reset Device Identity** after ``IdentityEffect/offerResetDeviceIdentity``.
    case resetConfirmed
}

/// Why ``IdentityGate`` ignored an input: a code, worded by `DiagnosticCatalogue` when shown.
public enum IdentityIgnored: String, Sendable, Hashable {
    /// A second `start`.
    case alreadyStarted
    /// `identityRead` with no read requested.
    case readNotRequested
    /// `resetConfirmed` while the identity is not unreadable.
    case notUnreadable

    /// The diagnostic a trace records (codes `identity.*`).
    public var record: DiagnosticRecord { DiagnosticRecord("identity." + rawValue) }
}

/// What ``IdentityGate`` wants done, in order.
public enum IdentityEffect: Sendable, Hashable {
    /// Read the identity store (off the main thread) and feed the outcome back.
    case readIdentity
    /// The device ID is known and the login state is known: network-facing work may start now, and not
    /// before. `login` nil means there is no stored login (show the login screen).
    case ready(deviceId: String, login: StoredLogin?)
    /// The device ID cannot be read: offer the user **Reset Device Identity**.
    case offerResetDeviceIdentity
    /// Delete the identity items and create a new device ID (from the driver's CSPRNG), then the gate
    /// reads again (a ``readIdentity`` follows this effect).
    case resetDeviceIdentity
    /// An input that does not apply in the gate's state was ignored (for traces).
    case ignored(IdentityIgnored)
}

/// SPEC A1 as a sans-IO value type: start-up waits for the identity store, and nothing network-facing
/// starts before ``IdentityEffect/ready(deviceId:login:)``, which is only ever emitted with a device ID.
///
/// - `available`: ready at once.
/// - `lockedBeforeFirstUnlock`: wait (loading screen) for `protectedDataAvailable`, then read again.
///   `appActive` does not re-read here: the SPEC names protected data as the trigger, and the app cannot
///   be active before the first unlock anyway.
/// - `jwtLocked`: the device ID is known but the login is not readable. The stored login is kept: the
///   gate emits no `ready` (which would say "no login", i.e. log out), deletes nothing, and reads again
///   on `protectedDataAvailable` or `appActive`.
/// - `unreadable`: offer Reset Device Identity; `resetConfirmed` resets and reads again.
///
/// A re-check trigger that arrives while a read is in flight is remembered: if that read comes back
/// locked in a way the trigger would have re-checked, the gate reads again at once, so a trigger racing
/// the read is never lost. The gate has no clock: nothing it does depends on time.
public struct IdentityGate: Sendable, Hashable {
    /// Where the gate stands.
    public enum State: Sendable, Hashable {
        /// Not started.
        case notStarted
        /// A read is in flight.
        case reading
        /// Launched before the first unlock; waiting for protected data.
        case waitingForFirstUnlock
        /// The device ID is known, the login is locked; waiting for protected data or app-active.
        case jwtLocked(deviceId: String)
        /// The device ID cannot be read; Reset Device Identity is offered.
        case unreadable
        /// Ready: the device ID and the login state are known.
        case ready(deviceId: String, login: StoredLogin?)
    }

    /// Where the gate stands.
    public private(set) var state: State = .notStarted
    /// How many reads were requested so far.
    public private(set) var readsRequested = 0
    private var protectedDataWhileReading = false
    private var appActiveWhileReading = false

    /// A gate that has not started.
    public init() {}

    /// The device ID while the gate is ready or waiting with the login locked; nil otherwise.
    public var deviceId: String? {
        switch state {
        case .jwtLocked(let id), .ready(let id, _): id
        case .notStarted, .reading, .waitingForFirstUnlock, .unreadable: nil
        }
    }

    /// Whether network-facing work may run (only after ``IdentityEffect/ready(deviceId:login:)``).
    public var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Handles one input and returns the effects, in order.
    public mutating func handle(_ input: IdentityInput) -> [IdentityEffect] {
        switch (input, state) {
        case (.start, .notStarted):
            return read()
        case (.start, _):
            return [.ignored(.alreadyStarted)]

        case (.identityRead(let outcome), .reading):
            return received(outcome)
        case (.identityRead, _):
            return [.ignored(.readNotRequested)]

        case (.protectedDataAvailable, .waitingForFirstUnlock), (.protectedDataAvailable, .jwtLocked),
             (.appActive, .jwtLocked):
            return read()
        case (.protectedDataAvailable, .reading):
            protectedDataWhileReading = true
            return []
        case (.appActive, .reading):
            appActiveWhileReading = true
            return []
        case (.protectedDataAvailable, _), (.appActive, _):
            return []

        case (.resetConfirmed, .unreadable):
            return [.resetDeviceIdentity] + read()
        case (.resetConfirmed, _):
            return [.ignored(.notUnreadable)]
        }
    }

    private mutating func read() -> [IdentityEffect] {
        state = .reading
        readsRequested += 1
        protectedDataWhileReading = false
        appActiveWhileReading = false
        return [.readIdentity]
    }

    private mutating func received(_ outcome: IdentityReadOutcome) -> [IdentityEffect] {
        let protectedData = protectedDataWhileReading
        let appActive = appActiveWhileReading
        switch outcome {
        case .available(let deviceId, let login):
            guard isUsable(deviceId) else { return unreadable() }
            state = .ready(deviceId: deviceId, login: login)
            return [.ready(deviceId: deviceId, login: login)]
        case .lockedBeforeFirstUnlock:
            if protectedData { return read() }
            state = .waitingForFirstUnlock
            return []
        case .jwtLocked(let deviceId):
            guard isUsable(deviceId) else { return unreadable() }
            if protectedData || appActive { return read() }
            state = .jwtLocked(deviceId: deviceId)
            return []
        case .unreadable:
            return unreadable()
        }
    }

    private mutating func unreadable() -> [IdentityEffect] {
        state = .unreadable
        return [.offerResetDeviceIdentity]
    }

    /// An empty (or all-blank) device ID is no identity: it is treated as unreadable.
    private func isUsable(_ deviceId: String) -> Bool {
        deviceId.contains { !$0.isWhitespace }
    }
}
