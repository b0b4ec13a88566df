public import RelayProtocol

/// One RPC call the machine is waiting on.
public struct PendingCall: Sendable, Hashable {
    /// The caller's handle.
    public var callId: CallID
    /// The request ID on the wire.
    public var requestId: String
    /// The ownership token: unique per call, so cleaning up an old call cannot remove a newer one with
    /// the same request ID (SPEC A8).
    public var ownership: UInt64
    /// The method.
    public var method: String
    /// The request as it is (or will be) sent.
    public var request: RpcRequest
    /// The generation that carried the request; nil while it waits for registration.
    public var sentOn: Generation?
    /// When the call was made.
    public var startedAt: Moment
    /// When it times out.
    public var deadline: Moment
    /// Who made the call: the app, or the machine itself (a recovery probe).
    public var purpose: CallPurpose

    /// Creates a pending call.
    public init(callId: CallID, requestId: String, ownership: UInt64, method: String, request: RpcRequest,
                sentOn: Generation?, startedAt: Moment, deadline: Moment, purpose: CallPurpose = .app) {
        self.purpose = purpose
        self.callId = callId
        self.requestId = requestId
        self.ownership = ownership
        self.method = method
        self.request = request
        self.sentOn = sentOn
        self.startedAt = startedAt
        self.deadline = deadline
    }
}

/// Who made a call.
public enum CallPurpose: Sendable, Hashable {
    /// The app (UI layer); its outcome is reported with ``ClientAction/callCompleted(_:_:)``.
    case app
    /// A9: a `system.ping` probe of recovery epoch `epoch`; its outcome feeds the epoch.
    case probe(epoch: UInt64)
    /// SPEC Part B: the queued offline mutation under this key, draining.
    case offline(idempotencyKey: String)
}

/// Pending calls keyed by request ID plus ownership token (SPEC A8).
public struct PendingCalls: Sendable, Hashable {
    private var byRequestId: [String: PendingCall] = [:]
    private var lastOwnership: UInt64 = 0

    /// No calls.
    public init() {}

    /// The number of pending calls.
    public var count: Int { byRequestId.count }
    /// Whether no call is pending.
    public var isEmpty: Bool { byRequestId.isEmpty }

    /// The call in flight under `requestId`.
    public subscript(requestId: String) -> PendingCall? { byRequestId[requestId] }

    /// Every pending call, oldest first (by ownership token, which only grows).
    public var all: [PendingCall] { byRequestId.values.sorted { $0.ownership < $1.ownership } }

    /// A fresh ownership token.
    public mutating func nextOwnership() -> UInt64 {
        lastOwnership += 1
        return lastOwnership
    }

    /// Adds `call`; returns false (and adds nothing) when a call with the same request ID is in flight.
    public mutating func insert(_ call: PendingCall) -> Bool {
        guard byRequestId[call.requestId] == nil else { return false }
        byRequestId[call.requestId] = call
        return true
    }

    /// Removes the call under `requestId` only if it still has `ownership`; returns it.
    @discardableResult
    public mutating func remove(_ requestId: String, ownership: UInt64) -> PendingCall? {
        guard let call = byRequestId[requestId], call.ownership == ownership else { return nil }
        byRequestId[requestId] = nil
        return call
    }

    /// Marks the call under `requestId` (with `ownership`) as sent on `generation`.
    public mutating func markSent(_ requestId: String, ownership: UInt64, on generation: Generation) {
        guard var call = byRequestId[requestId], call.ownership == ownership else { return }
        call.sentOn = generation
        byRequestId[requestId] = call
    }
}
