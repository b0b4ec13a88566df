public import RelayProtocol

/// A relay session (PROTOCOL.md §5): what a `registered` created and a resume must match.
public struct RelaySession: Sendable, Hashable {
    /// The session ID (32 characters `[A-Za-z0-9]`).
    public let id: String
    /// The resume token (48 characters `[A-Za-z0-9]`); never rotated.
    public let resumeToken: String
    /// The user (JWT `sub`).
    public let userId: String
    /// The device, lower-cased.
    public let deviceId: String
    /// When the session expires; `heartbeat` and `rpc.request` move it to now + 24 h, a resume does not.
    public internal(set) var expiresAt: Moment
}

/// One accepted socket as the relay sees it.
public struct RelayConnection: Sendable, Hashable {
    /// The driver's ID for the socket.
    public let id: ConnectionID
    /// The user (JWT `sub`).
    public let userId: String
    /// `X-Device-ID`, lower-cased.
    public let deviceId: String
    /// `X-Client-Type`.
    public let kind: ClientKind
    /// The desktop this phone talks to: `targetDesktopDeviceId` of its `register`, else the header,
    /// lower-cased; nil: any desktop of the user (pre-1.6 phones).
    public internal(set) var targetDesktopDeviceId: String?
    /// The relay session this socket registered (nil until a successful `register`).
    public internal(set) var sessionId: String?
    /// The form the client speaks (1.6 when its `register` had `relayProtocolVersion`).
    public internal(set) var form: ProtocolForm = .v1_6
    /// When the last frame arrived (or the upgrade, before any).
    public internal(set) var lastFrameAt: Moment
    /// The `deviceName` of its `register` (empty before one).
    public internal(set) var deviceName = ""
    /// The terminal sessions this phone bound with `terminal.binary.bind`.
    public internal(set) var boundTerminals: Set<String> = []
    /// Whether the rate limit applies (every client socket; not the in-process desktop's).
    public let isRateLimited: Bool
    var tokens = RelayConstants.rateBucketCapacity
    var tokensAt: Moment
    /// Set while frames are being refused for the rate limit (the log says so once per burst).
    var overRateLimit = false

    /// Whether a `register` succeeded on this socket.
    public var isRegistered: Bool { sessionId != nil }

    init(id: ConnectionID, identity: UpgradeIdentity, at now: Moment, rateLimited: Bool) {
        self.id = id
        isRateLimited = rateLimited
        userId = identity.userId
        deviceId = identity.deviceId
        kind = identity.kind
        targetDesktopDeviceId = identity.targetDesktopDeviceId
        lastFrameAt = now
        tokensAt = now
    }
}

/// An event kept for replay (PROTOCOL.md §5).
public struct BufferedEvent: Sendable, Hashable {
    /// The per-user sequence number.
    public let eventId: Int64
    /// When the relay accepted it.
    public let at: Moment
    /// The event as sent.
    public let message: EventMessage
    /// The frame text sent (replayed byte for byte).
    let text: String
}

/// The per-user replay buffer: the last 500 events of the last 300 s, each at most 256 KiB.
struct EventBuffer: Sendable, Hashable {
    private var storage: [BufferedEvent] = []
    private var head = 0

    var events: ArraySlice<BufferedEvent> { storage[head...] }
    var isEmpty: Bool { head == storage.count }
    var oldest: BufferedEvent? { isEmpty ? nil : storage[head] }
    var latest: BufferedEvent? { isEmpty ? nil : storage.last }

    mutating func append(_ e: BufferedEvent, now: Moment) {
        storage.append(e)
        prune(now: now)
    }

    mutating func prune(now: Moment) {
        while storage.count - head > RelayConstants.replayBufferCount { head += 1 }
        while head < storage.count, now - storage[head].at > RelayConstants.replayBufferAge { head += 1 }
        if head > 1024, head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }
}
