public import RelayProtocol

/// Turns the raw payload of a `chat:timeline-updated` event into a ``TimelineUpdated`` (SPEC A10).
///
/// ``EventIngress`` calls it only at delivery, after the lease check, so a test decoder that counts its
/// calls proves that content of a chat that was left is never decoded.
public protocol SnapshotDecoding: Sendable {
    /// Decodes the event's own payload (`$.payload.payload`); throws when it does not fit.
    mutating func decode(_ payload: JSONValue) throws(MessageDecodeError) -> TimelineUpdated
    /// Decodes the payload from its raw bytes (an inbound snapshot whose payload was never built). The
    /// default parses them and calls ``decode(_:)``.
    mutating func decode(raw payload: RawJSON) throws(MessageDecodeError) -> TimelineUpdated
}

extension SnapshotDecoding {
    /// Parses `payload` and calls ``decode(_:)``.
    public mutating func decode(raw payload: RawJSON) throws(MessageDecodeError) -> TimelineUpdated {
        try decode(payload.value)
    }
}

/// The production decoder: ``TimelineUpdated/init(json:path:)`` at path `$.payload.payload`.
public struct StandardSnapshotDecoder: SnapshotDecoding, Hashable {
    /// Creates the decoder.
    public init() {}

    /// Decodes `{sessionId, runId, threadId, revision, blocks}`.
    public mutating func decode(_ payload: JSONValue) throws(MessageDecodeError) -> TimelineUpdated {
        try TimelineUpdated(json: payload, path: "$.payload.payload")
    }

    /// ``TimelineUpdated/init(raw:path:)``: the blocks stay raw.
    public mutating func decode(raw payload: RawJSON) throws(MessageDecodeError) -> TimelineUpdated {
        try TimelineUpdated(raw: payload, path: "$.payload.payload")
    }
}

/// Why a timeline snapshot was not delivered (SPEC A10).
public enum SnapshotDropReason: Sendable, Hashable, CustomStringConvertible {
    /// A newer snapshot for the same key arrived while this one was still waiting; the newer one took its
    /// place in the queue.
    case superseded
    /// At delivery, the session had no timeline lease (the chat was left); the payload was not decoded.
    case notLeased
    /// At delivery, the decoder rejected the payload.
    case undecodable(MessageDecodeError)
    /// The queue held ``ClientConstants/maxWaitingSnapshotKeys`` keys and a new key arrived; this, the
    /// oldest waiting snapshot, made room.
    case overflow
    /// ``EventIngress/discardWaiting(at:)`` dropped it (e.g. the client stopped).
    case discarded

    /// A one-line reason.
    public var description: String {
        switch self {
        case .superseded: "superseded by a newer snapshot"
        case .notLeased: "session not leased at delivery"
        case .undecodable(let e): "undecodable: \(e)"
        case .overflow: "too many waiting snapshot keys"
        case .discarded: "discarded"
        }
    }
}

/// What ``EventIngress`` wants done; the client machine turns these into its actions.
public enum IngressEffect: Sendable, Hashable {
    /// Hand this control event (anything but `chat:timeline-updated`) to the app now.
    case deliverControl(EventMessage)
    /// Hand this snapshot to the UI; the next one follows only after ``EventIngress/snapshotProcessed(at:isLeased:)``.
    case deliverSnapshot(TimelineUpdated)
    /// A snapshot for `key` was dropped (replaced, not leased, undecodable, overflow, discarded).
    /// `eventId` is the relay's sequence number of the dropped event, when it had one.
    case droppedSnapshot(TimelineKey, eventId: Int64?, reason: SnapshotDropReason)
    /// A `chat:timeline-updated` whose envelope (`sessionId`, `runId`, `threadId`) could not be read was
    /// dropped on arrival; the error names the JSON path.
    case rejectedSnapshot(eventId: Int64?, MessageDecodeError)
    /// ``EventIngress/snapshotProcessed(at:isLeased:)`` came while no snapshot was in flight; ignored.
    case unexpectedProcessed
}

/// SPEC A10 event ingress, as a sans-IO value type.
///
/// - Control events (every event type except `chat:timeline-updated`) are delivered at once, in arrival
///   order: they never queue, so they never wait behind a snapshot.
/// - Snapshots queue per (session, run, thread) ``TimelineKey``. A newer snapshot (by arrival) for a key
///   that still has one waiting replaces it **in place**: the key keeps its position in the queue, so a
///   key that updates constantly cannot be pushed back forever by other keys (no starvation); the
///   replaced one is reported as ``SnapshotDropReason/superseded``. Between keys, the queue is
///   first-in-first-out by the arrival of each key's first waiting snapshot.
/// - One snapshot is in flight at a time: the next is delivered only after ``snapshotProcessed(at:isLeased:)``.
/// - Only the envelope keys are read on arrival. The lease is checked at delivery (`isLeased(sessionId)`),
///   **before** the decoder runs; a snapshot for a session without a lease is dropped and never decoded.
///   Arrival order, not `revision`, decides "newer": the revision sits inside the payload, which is not
///   read before the lease check.
public struct EventIngress<D: SnapshotDecoding>: Sendable {
    /// The snapshot decoder (read back by tests to count calls).
    public private(set) var decoder: D
    /// The key of the snapshot the UI is processing, if any.
    public private(set) var inFlight: TimelineKey?
    /// The time of the last input handled.
    public private(set) var now: Moment = .zero

    private struct Waiting: Sendable {
        /// The event; its payload may be raw (``EventMessage/rawPayload``), decoded only at delivery.
        var event: EventMessage
        var eventId: Int64? { event.eventId }
    }

    /// Keys in delivery order; `order[head...]` is live (the prefix is consumed and compacted lazily).
    private var order: [TimelineKey] = []
    private var head = 0
    private var waiting: [TimelineKey: Waiting] = [:]

    /// Creates an empty ingress with `decoder`.
    public init(decoder: D) {
        self.decoder = decoder
    }

    /// The keys with a waiting snapshot, in delivery order.
    public var waitingKeys: [TimelineKey] { Array(order[head...]) }

    /// How many snapshots are waiting.
    public var waitingCount: Int { waiting.count }

    /// Accepts one relay event at `time`. Control events come back at once as ``IngressEffect/deliverControl(_:)``;
    /// a snapshot is queued (replacing a waiting one for its key) and, when none is in flight, the next
    /// snapshot is delivered after the lease check.
    public mutating func accept(_ event: EventMessage, at time: Moment,
                                isLeased: (_ sessionId: String) -> Bool) -> [IngressEffect] {
        var effects: [IngressEffect] = []
        accept(event, at: time, isLeased: isLeased, into: &effects)
        return effects
    }

    /// ``accept(_:at:isLeased:)`` appending to the caller's buffer (no allocation when it has room), for
    /// the per-event path of the machine and the replayer.
    public mutating func accept(_ event: EventMessage, at time: Moment, isLeased: (_ sessionId: String) -> Bool,
                                into effects: inout [IngressEffect]) {
        advance(to: time)
        guard event.eventType == EventNames.chatTimelineUpdated else { return effects.append(.deliverControl(event)) }
        let key: TimelineKey
        do throws(MessageDecodeError) {
            key = try Self.envelopeKey(event)
        } catch {
            return effects.append(.rejectedSnapshot(eventId: event.eventId, error))
        }
        let entry = Waiting(event: event)
        if let old = waiting.updateValue(entry, forKey: key) {
            effects.append(.droppedSnapshot(key, eventId: old.eventId, reason: .superseded))
        } else {
            if waiting.count > ClientConstants.maxWaitingSnapshotKeys, let oldest = popFront() {
                let dropped = waiting.removeValue(forKey: oldest)
                effects.append(.droppedSnapshot(oldest, eventId: dropped?.eventId, reason: .overflow))
            }
            order.append(key)
        }
        if inFlight == nil { deliverNext(into: &effects, isLeased: isLeased) }
    }

    /// The UI finished the snapshot in flight at `time`: the next waiting one is checked against the lease
    /// and delivered (snapshots whose session is not leased, or that do not decode, are dropped on the way).
    public mutating func snapshotProcessed(at time: Moment, isLeased: (_ sessionId: String) -> Bool) -> [IngressEffect] {
        advance(to: time)
        guard inFlight != nil else { return [.unexpectedProcessed] }
        inFlight = nil
        var effects: [IngressEffect] = []
        deliverNext(into: &effects, isLeased: isLeased)
        return effects
    }

    /// Drops every waiting snapshot (``SnapshotDropReason/discarded``), in queue order, and forgets the one
    /// in flight (e.g. when the client stops). Nothing is decoded.
    public mutating func discardWaiting(at time: Moment) -> [IngressEffect] {
        advance(to: time)
        var effects: [IngressEffect] = []
        while let key = popFront() {
            let w = waiting.removeValue(forKey: key)
            effects.append(.droppedSnapshot(key, eventId: w?.eventId, reason: .discarded))
        }
        inFlight = nil
        return effects
    }

    /// Reads only `sessionId`, `runId` and `threadId` of a snapshot's payload; a raw payload is scanned
    /// for them without building the rest.
    static func envelopeKey(_ event: EventMessage) throws(MessageDecodeError) -> TimelineKey {
        if let raw = event.rawPayload, let m = raw.members() {
            return try envelopeKey { m.last(named: $0)?.value }
        }
        return try envelopeKey(event.payload)
    }

    /// Reads only `sessionId`, `runId` and `threadId` of a snapshot payload.
    static func envelopeKey(_ payload: JSONValue) throws(MessageDecodeError) -> TimelineKey {
        let base = "$.payload.payload"
        guard case .object(let o) = payload else {
            throw MessageDecodeError(path: base, message: "expected an object, found \(payload.typeDescription); "
                                     + "a chat:timeline-updated payload is {sessionId, runId, threadId, revision, blocks}")
        }
        return try envelopeKey { o[$0] }
    }

    /// The key from a member lookup of an object payload (same errors for both forms).
    private static func envelopeKey(_ lookup: (String) -> JSONValue?) throws(MessageDecodeError) -> TimelineKey {
        let base = "$.payload.payload"
        func member(_ name: String) throws(MessageDecodeError) -> String {
            guard let v = lookup(name), !v.isNull else {
                throw MessageDecodeError(path: "\(base).\(name)", message: "missing required string (snapshot key)")
            }
            guard case .string(let s) = v else {
                throw MessageDecodeError(path: "\(base).\(name)", message: "expected a string, found \(v.typeDescription)")
            }
            return s
        }
        return TimelineKey(sessionId: try member("sessionId"), runId: try member("runId"), threadId: try member("threadId"))
    }

    private mutating func advance(to time: Moment) {
        if time > now { now = time }
    }

    private mutating func popFront() -> TimelineKey? {
        guard head < order.count else { return nil }
        let key = order[head]
        head += 1
        if head == order.count {
            order.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= order.count {
            order.removeFirst(head)
            head = 0
        }
        return key
    }

    private mutating func deliverNext(into effects: inout [IngressEffect], isLeased: (String) -> Bool) {
        while inFlight == nil, let key = popFront() {
            guard let w = waiting.removeValue(forKey: key) else { continue }
            guard isLeased(key.sessionId) else {
                effects.append(.droppedSnapshot(key, eventId: w.eventId, reason: .notLeased))
                continue
            }
            do throws(MessageDecodeError) {
                let snapshot: TimelineUpdated
                if let raw = w.event.rawPayload {
                    snapshot = try decoder.decode(raw: raw)
                } else {
                    snapshot = try decoder.decode(w.event.payload)
                }
                inFlight = key
                effects.append(.deliverSnapshot(snapshot))
            } catch {
                effects.append(.droppedSnapshot(key, eventId: w.eventId, reason: .undecodable(error)))
            }
        }
    }
}

extension EventIngress where D == StandardSnapshotDecoder {
    /// Creates an empty ingress with the standard decoder.
    public init() {
        self.init(decoder: StandardSnapshotDecoder())
    }
}
