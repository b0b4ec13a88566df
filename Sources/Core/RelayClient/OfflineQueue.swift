public import RelayProtocol

/// A keyed mutation the app made while no relay was registered (SPEC Part B, offline action queue).
public struct OfflineMutation: Sendable, Hashable {
    /// The idempotency key: the mutation is sent, and resent, under it.
    public var idempotencyKey: String
    /// The RPC method (one that needs a key).
    public var method: String
    /// The parameters.
    public var params: JSONValue
    /// When it was made.
    public var createdAt: Moment

    /// Creates a mutation.
    public init(idempotencyKey: String, method: String, params: JSONValue, createdAt: Moment) {
        self.idempotencyKey = idempotencyKey
        self.method = method
        self.params = params
        self.createdAt = createdAt
    }
}

/// What the driver tells the machine about the offline queue (its store is SQLite; reads are inputs).
public enum OfflineQueueInput: Sendable, Hashable {
    /// The store's pending mutations (queued or sent but not answered), in queue order, read at start-up.
    /// From then on keyed mutations made while no relay is registered are queued instead of held in memory.
    case loaded([OfflineMutation])
}

/// What the machine asks of the offline queue's store (writes are actions).
public enum OfflineQueueEffect: Sendable, Hashable {
    /// Store this new mutation at the end of the queue.
    case enqueue(OfflineMutation)
    /// The mutation went out (again) under its key.
    case markSent(idempotencyKey: String)
    /// The desktop answered; `serverTimestamp` (when the result carries one) resolves conflicts in the store.
    case markAnswered(idempotencyKey: String, result: JSONValue, serverTimestamp: Int64?)
    /// The desktop refused it for good; reported to the app as a failed offline mutation.
    case markFailed(idempotencyKey: String, reason: String)
}

extension RelayClientMachine {
    /// SPEC Part B: queue a keyed mutation made while no relay is registered. Returns false when the queue
    /// is not in use (the driver never loaded it) or the call is not a keyed mutation.
    mutating func queueOffline(_ request: CallRequest, method: RpcMethod) -> Bool {
        guard offlineQueueInUse, method.needsIdempotencyKey, let key = request.idempotencyKey, !key.isEmpty else { return false }
        if case .registered = phase, offlineQueue.isEmpty { return false }
        let mutation = OfflineMutation(idempotencyKey: key, method: method.name, params: request.params, createdAt: now)
        offlineQueue.append(mutation)
        emit(.offlineQueue(.enqueue(mutation)))
        emit(.callCompleted(request.callId, .queued(idempotencyKey: key)))
        drainOfflineQueue()
        return true
    }

    /// Sends the queue's head (one at a time, so the queue drains in order) when registered. A head still
    /// in flight on an earlier socket is sent again, under the same key, on this one.
    mutating func drainOfflineQueue() {
        if let key = offlineDraining, case .registered(let g, _) = phase,
           let stale = pendingCalls.all.first(where: { $0.purpose == .offline(idempotencyKey: key) && $0.sentOn != g }) {
            pendingCalls.remove(stale.requestId, ownership: stale.ownership)
            cancel(.rpcTimeout(requestId: stale.requestId, ownership: stale.ownership))
            offlineDraining = nil
        }
        guard offlineDraining == nil, case .registered = phase, let next = offlineQueue.first,
              let method = RpcCatalogue.method(named: next.method) else { return }
        let failure = issue(method: method, params: next.params, idempotencyKey: next.idempotencyKey, requestId: nil,
                            callId: CallID(0), purpose: .offline(idempotencyKey: next.idempotencyKey))
        if let failure {
            offlineQueue.removeFirst()
            emit(.offlineQueue(.markFailed(idempotencyKey: next.idempotencyKey, reason: failure.description)))
            emit(.offlineMutationFinished(idempotencyKey: next.idempotencyKey, .failure(failure)))
            return drainOfflineQueue()
        }
        offlineDraining = next.idempotencyKey
        emit(.offlineQueue(.markSent(idempotencyKey: next.idempotencyKey)))
    }

    /// The queued mutation under `key` was answered or failed.
    mutating func offlineCompleted(key: String, _ outcome: CallOutcome) {
        guard offlineDraining == key else { return }
        offlineDraining = nil
        switch outcome {
        case .success(let result):
            offlineQueue.removeAll { $0.idempotencyKey == key }
            emit(.offlineQueue(.markAnswered(idempotencyKey: key, result: result, serverTimestamp: result["serverTimestamp"]?.intValue)))
            emit(.offlineMutationFinished(idempotencyKey: key, outcome))
            drainOfflineQueue()
        case .failure(.remote(let code, let message, _)):
            offlineQueue.removeAll { $0.idempotencyKey == key }
            emit(.offlineQueue(.markFailed(idempotencyKey: key, reason: "\(code) \(message)")))
            emit(.offlineMutationFinished(idempotencyKey: key, outcome))
            drainOfflineQueue()
        case .failure, .queued:
            // Timed out, or its socket went away: it stays at the head of the queue and goes out again,
            // under the same key, after the next registration.
            return
        }
    }
}
