/// The serial resume-token store of SPEC A7, as a value type the driver keeps behind its lock.
///
/// Tokens live under `<device ID>::<desktop ID>`. Each relay client that starts for a key **claims** it
/// and gets a new ownership generation; from then on writes and deletes from an older owner are
/// rejected, so a stale client can never overwrite a newer token.
public struct ResumeTokenStore: Sendable, Hashable {
    private var entries: [String: ResumeCredentials] = [:]
    private var owners: [String: UInt64] = [:]
    private var lastOwnership: UInt64 = 0

    /// An empty store.
    public init() {}

    /// The key for a (phone, desktop) pair: `<device ID>::<desktop ID>` (SPEC A7).
    public static func key(deviceId: String, desktopId: String) -> String {
        deviceId + ClientConstants.resumeKeySeparator + desktopId
    }

    /// Makes the caller the owner of `key`: returns a new ownership generation (greater than every one
    /// given before, for any key) and the credentials stored under the key.
    public mutating func claim(_ key: String) -> (ownership: UInt64, credentials: ResumeCredentials?) {
        lastOwnership += 1
        owners[key] = lastOwnership
        return (lastOwnership, entries[key])
    }

    /// The current owner of `key`, if claimed.
    public func owner(of key: String) -> UInt64? { owners[key] }

    /// The credentials under `key`.
    public func read(_ key: String) -> ResumeCredentials? { entries[key] }

    /// Writes `credentials` under `key` if `ownership` is the key's current owner.
    public mutating func write(_ credentials: ResumeCredentials, for key: String, ownership: UInt64) throws(ResumeTokenStoreError) {
        try checkOwner(key, ownership)
        entries[key] = credentials
    }

    /// Deletes the credentials under `key` if `ownership` is the key's current owner.
    public mutating func clear(_ key: String, ownership: UInt64) throws(ResumeTokenStoreError) {
        try checkOwner(key, ownership)
        entries[key] = nil
    }

    /// Applies a store action of the machine (``ClientAction/storeResumeCredentials(key:_:ownership:)`` or
    /// ``ClientAction/clearResumeCredentials(key:ownership:)``); other actions are ignored.
    public mutating func apply(_ action: ClientAction) throws(ResumeTokenStoreError) {
        switch action {
        case .storeResumeCredentials(let key, let creds, let ownership): try write(creds, for: key, ownership: ownership)
        case .clearResumeCredentials(let key, let ownership): try clear(key, ownership: ownership)
        default: return
        }
    }

    private func checkOwner(_ key: String, _ ownership: UInt64) throws(ResumeTokenStoreError) {
        let current = owners[key]
        guard current == ownership else {
            throw ResumeTokenStoreError(key: key, ownership: ownership, currentOwner: current)
        }
    }
}

/// A write or delete from a client that no longer owns (or never owned) the key (SPEC A7).
public struct ResumeTokenStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key written.
    public var key: String
    /// The writer's ownership generation.
    public var ownership: UInt64
    /// The key's current owner, if any.
    public var currentOwner: UInt64?
    /// What was rejected.
    public var description: String {
        "resume-token write for '\(key)' rejected: ownership \(ownership) is stale (current owner \(currentOwner.map(String.init) ?? "none"))"
    }
}
