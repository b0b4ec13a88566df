import RelayClient
import RelayProtocol
import Testing

/// A decoder that counts its calls, so tests can prove what was (not) decoded.
private struct CountingDecoder: SnapshotDecoding {
    var calls = 0
    var decodedRevisions: [Int64] = []

    mutating func decode(_ payload: JSONValue) throws(MessageDecodeError) -> TimelineUpdated {
        calls += 1
        let s = try TimelineUpdated(json: payload, path: "$.payload.payload")
        decodedRevisions.append(s.revision)
        return s
    }
}

/// A decoder that counts raw and built decodes separately (inbound snapshots arrive raw).
private struct RawCountingDecoder: SnapshotDecoding {
    var calls = 0
    var rawCalls = 0

    mutating func decode(_ payload: JSONValue) throws(MessageDecodeError) -> TimelineUpdated {
        calls += 1
        return try TimelineUpdated(json: payload, path: "$.payload.payload")
    }

    mutating func decode(raw payload: RawJSON) throws(MessageDecodeError) -> TimelineUpdated {
        rawCalls += 1
        return try TimelineUpdated(raw: payload, path: "$.payload.payload")
    }
}

/// A snapshot event as the client machine decodes it from the wire: its payload stays raw.
private func inboundSnapshot(_ session: String, revision: Int64, eventId: Int64) throws -> EventMessage {
    let text = try RelayMessage.event(snapshot(session, revision: revision, eventId: eventId)).encodedText()
    guard case .event(let e) = try RelayMessage(decodingInbound: text) else { throw MessageDecodeError(path: "$", message: "not an event") }
    return e
}

private func snapshot(_ session: String, run: String = "run-1", thread: String = "main", revision: Int64,
                      eventId: Int64? = nil) -> EventMessage {
    let s = TimelineUpdated(sessionId: session, runId: run, threadId: thread, revision: revision,
                            blocks: .array([.object(["text": .string("block r\(revision)")])]))
    return EventMessage(eventType: EventNames.chatTimelineUpdated, payload: s.json, eventId: eventId)
}

private func decoded(_ event: EventMessage) throws -> TimelineUpdated {
    try event.decodePayload(as: TimelineUpdated.self)
}

private func control(_ name: String, eventId: Int64) -> EventMessage {
    EventMessage(eventType: name, payload: .object(["sessionId": "sess-A", "jobId": .string("job-\(eventId)")]), eventId: eventId)
}

private func key(_ session: String, run: String = "run-1", thread: String = "main") -> TimelineKey {
    TimelineKey(sessionId: session, runId: run, threadId: thread)
}

/// SPEC A10: event ingress.
@Suite struct A10IngressTests {
    private let everything: (String) -> Bool = { _ in true }

    @Test func controlEventsAreDeliveredAtOnceInArrivalOrderEvenBehindWaitingSnapshots() throws {
        var ingress = EventIngress(decoder: CountingDecoder())
        let first = snapshot("sess-A", revision: 1, eventId: 1)
        #expect(ingress.accept(first, at: .seconds(1), isLeased: everything) == [.deliverSnapshot(try decoded(first))])
        // A second snapshot waits behind the one in flight.
        #expect(ingress.accept(snapshot("sess-B", revision: 1, eventId: 2), at: .seconds(2), isLeased: everything) == [])
        #expect(ingress.waitingCount == 1)
        // Control events do not wait: each comes back at once, in arrival order.
        var delivered: [EventMessage] = []
        let controls = [control(EventNames.jobCreated, eventId: 3), control(EventNames.jobStatusChanged, eventId: 4),
                        control(EventNames.deviceStatus, eventId: 5), control(EventNames.jobFinalized, eventId: 6)]
        for (i, c) in controls.enumerated() {
            let effects = ingress.accept(c, at: .seconds(3 + Double(i)), isLeased: everything)
            #expect(effects == [.deliverControl(c)])
            for case .deliverControl(let e) in effects { delivered.append(e) }
        }
        #expect(delivered.map(\.eventId) == [3, 4, 5, 6])
        // The snapshots are still where they were: one in flight, one waiting, nothing decoded for them.
        #expect(ingress.inFlight == key("sess-A"))
        #expect(ingress.waitingKeys == [key("sess-B")])
        #expect(ingress.decoder.calls == 1)
    }

    @Test func threeSnapshotsForOneKeyWhileOneIsInFlightDeliverOnlyTheNewest() throws {
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("sess-A", revision: 1, eventId: 10), at: .seconds(1), isLeased: everything)
        #expect(ingress.accept(snapshot("sess-A", revision: 2, eventId: 11), at: .seconds(2), isLeased: everything) == [])
        #expect(ingress.accept(snapshot("sess-A", revision: 3, eventId: 12), at: .seconds(3), isLeased: everything)
                == [.droppedSnapshot(key("sess-A"), eventId: 11, reason: .superseded)])
        let newest = snapshot("sess-A", revision: 4, eventId: 13)
        #expect(ingress.accept(newest, at: .seconds(4), isLeased: everything)
                == [.droppedSnapshot(key("sess-A"), eventId: 12, reason: .superseded)])
        #expect(ingress.waitingCount == 1)
        #expect(ingress.snapshotProcessed(at: .seconds(5), isLeased: everything) == [.deliverSnapshot(try decoded(newest))])
        #expect(ingress.snapshotProcessed(at: .seconds(6), isLeased: everything) == [])
        // Only revisions 1 and 4 were ever decoded.
        #expect(ingress.decoder.decodedRevisions == [1, 4])
    }

    @Test func snapshotsGoOutOneAtATime() throws {
        var ingress = EventIngress(decoder: CountingDecoder())
        let a = snapshot("sess-A", revision: 1), b = snapshot("sess-B", revision: 1), c = snapshot("sess-C", revision: 1)
        #expect(ingress.accept(a, at: .seconds(1), isLeased: everything) == [.deliverSnapshot(try decoded(a))])
        #expect(ingress.accept(b, at: .seconds(1), isLeased: everything) == [])
        #expect(ingress.accept(c, at: .seconds(1), isLeased: everything) == [])
        #expect(ingress.decoder.calls == 1, "nothing is decoded before its turn")
        #expect(ingress.snapshotProcessed(at: .seconds(2), isLeased: everything) == [.deliverSnapshot(try decoded(b))])
        #expect(ingress.snapshotProcessed(at: .seconds(3), isLeased: everything) == [.deliverSnapshot(try decoded(c))])
        #expect(ingress.snapshotProcessed(at: .seconds(4), isLeased: everything) == [])
        #expect(ingress.inFlight == nil)
        // A processed signal with nothing in flight is reported, and the next snapshot goes out at once.
        #expect(ingress.snapshotProcessed(at: .seconds(5), isLeased: everything) == [.unexpectedProcessed])
        let d = snapshot("sess-D", revision: 1)
        #expect(ingress.accept(d, at: .seconds(6), isLeased: everything) == [.deliverSnapshot(try decoded(d))])
    }

    @Test func differentKeysAreNotCoalesced() throws {
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("sess-A", revision: 1), at: .zero, isLeased: everything)
        // Same session, differing only in run, only in thread, and a different session.
        let events = [snapshot("sess-A", run: "run-2", revision: 2), snapshot("sess-A", thread: "sub-1", revision: 3),
                      snapshot("sess-B", revision: 4)]
        for e in events { #expect(ingress.accept(e, at: .seconds(1), isLeased: everything) == []) }
        #expect(ingress.waitingKeys == [key("sess-A", run: "run-2"), key("sess-A", thread: "sub-1"), key("sess-B")])
        for e in events {
            #expect(ingress.snapshotProcessed(at: .seconds(2), isLeased: everything) == [.deliverSnapshot(try decoded(e))])
        }
    }

    @Test func aReplacedSnapshotKeepsItsKeysPlaceInTheQueue() throws {
        // A busy key cannot be pushed back forever by other keys: replacing keeps the key's position.
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("sess-X", revision: 1), at: .zero, isLeased: everything)
        _ = ingress.accept(snapshot("sess-A", revision: 1), at: .seconds(1), isLeased: everything)
        _ = ingress.accept(snapshot("sess-B", revision: 1), at: .seconds(2), isLeased: everything)
        let a2 = snapshot("sess-A", revision: 2)
        _ = ingress.accept(a2, at: .seconds(3), isLeased: everything)
        #expect(ingress.waitingKeys == [key("sess-A"), key("sess-B")])
        #expect(ingress.snapshotProcessed(at: .seconds(4), isLeased: everything) == [.deliverSnapshot(try decoded(a2))])
    }

    @Test func leaseEndingBetweenArrivalAndDeliveryDropsTheSnapshotWithoutDecodingIt() throws {
        // The real coordinator decides the lease: the user leaves chat sess-B while its snapshot waits.
        let desktop = "desk-1"
        var interest = TimelineInterestCoordinator(appSessionId: "APP-1")
        _ = interest.registered(desktopId: desktop, at: .zero)
        _ = interest.claim(ClaimID(1), desktopId: desktop, baseSessionId: "sess-A", at: .zero)
        var ingress = EventIngress(decoder: CountingDecoder())
        let a = snapshot("sess-A", revision: 1, eventId: 1)
        #expect(ingress.accept(a, at: .seconds(1), isLeased: { interest.isLeased(desktopId: desktop, sessionId: $0) })
                == [.deliverSnapshot(try decoded(a))])
        _ = interest.claim(ClaimID(2), desktopId: desktop, baseSessionId: "sess-B", at: .seconds(2))
        // Arrives while sess-B is leased, waits behind sess-A's snapshot.
        #expect(ingress.accept(snapshot("sess-B", revision: 7, eventId: 2), at: .seconds(3),
                               isLeased: { interest.isLeased(desktopId: desktop, sessionId: $0) }) == [])
        // The user leaves sess-B (back to sess-A) before delivery.
        _ = interest.release(ClaimID(2), at: .seconds(4))
        #expect(!interest.isLeased(desktopId: desktop, sessionId: "sess-B"))
        let effects = ingress.snapshotProcessed(at: .seconds(5), isLeased: { interest.isLeased(desktopId: desktop, sessionId: $0) })
        #expect(effects == [.droppedSnapshot(key("sess-B"), eventId: 2, reason: .notLeased)])
        #expect(ingress.decoder.calls == 1, "the snapshot of the chat that was left is never decoded")
        #expect(ingress.decoder.decodedRevisions == [1])
    }

    @Test func rawInboundSnapshotsOfALeftChatAreNeverDecoded() throws {
        let leased: Set<String> = ["sess-A"]
        var ingress = EventIngress(decoder: RawCountingDecoder())
        let a = try inboundSnapshot("sess-A", revision: 1, eventId: 1)
        let b = try inboundSnapshot("sess-B", revision: 1, eventId: 2)
        #expect(a.rawPayload != nil && b.rawPayload != nil)
        #expect(ingress.accept(a, at: .zero, isLeased: { leased.contains($0) }) == [.deliverSnapshot(try decoded(a))])
        #expect(ingress.accept(b, at: .seconds(1), isLeased: { leased.contains($0) }) == [])
        #expect(ingress.snapshotProcessed(at: .seconds(2), isLeased: { leased.contains($0) })
                == [.droppedSnapshot(key("sess-B"), eventId: 2, reason: .notLeased)])
        #expect(ingress.decoder.rawCalls == 1, "only the leased snapshot is decoded, from its raw bytes")
        #expect(ingress.decoder.calls == 0)
    }

    @Test func leaseStartingBetweenArrivalAndDeliveryDeliversTheSnapshot() throws {
        var leased: Set<String> = ["sess-A"]
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("sess-A", revision: 1), at: .zero, isLeased: { leased.contains($0) })
        let b = snapshot("sess-B", revision: 1)
        // Not leased at arrival: it still queues (the lease is not checked on arrival).
        #expect(ingress.accept(b, at: .seconds(1), isLeased: { leased.contains($0) }) == [])
        leased.insert("sess-B")
        #expect(ingress.snapshotProcessed(at: .seconds(2), isLeased: { leased.contains($0) }) == [.deliverSnapshot(try decoded(b))])
        #expect(ingress.decoder.calls == 2)
    }

    @Test func unleasedSnapshotsAreSkippedAndTheNextLeasedOneGoesOut() throws {
        let leased: Set<String> = ["sess-A", "sess-C"]
        var ingress = EventIngress(decoder: CountingDecoder())
        // Nothing in flight and not leased: dropped at once, never decoded.
        #expect(ingress.accept(snapshot("sess-B", revision: 1, eventId: 1), at: .zero, isLeased: { leased.contains($0) })
                == [.droppedSnapshot(key("sess-B"), eventId: 1, reason: .notLeased)])
        #expect(ingress.decoder.calls == 0)
        _ = ingress.accept(snapshot("sess-A", revision: 1, eventId: 2), at: .zero, isLeased: { leased.contains($0) })
        _ = ingress.accept(snapshot("sess-B", revision: 2, eventId: 3), at: .zero, isLeased: { leased.contains($0) })
        let c = snapshot("sess-C", revision: 1, eventId: 4)
        _ = ingress.accept(c, at: .zero, isLeased: { leased.contains($0) })
        #expect(ingress.snapshotProcessed(at: .seconds(1), isLeased: { leased.contains($0) })
                == [.droppedSnapshot(key("sess-B"), eventId: 3, reason: .notLeased), .deliverSnapshot(try decoded(c))])
        #expect(ingress.decoder.decodedRevisions == [1, 1])
    }

    @Test func anUndecodableSnapshotIsDroppedWithItsPathAndTheNextGoesOut() throws {
        var ingress = EventIngress(decoder: CountingDecoder())
        let bad = EventMessage(eventType: EventNames.chatTimelineUpdated,
                               payload: ["sessionId": "sess-A", "runId": "run-1", "threadId": "main", "revision": "seven"],
                               eventId: 5)
        let good = snapshot("sess-B", revision: 1)
        _ = ingress.accept(snapshot("sess-Z", revision: 1), at: .zero, isLeased: everything)
        _ = ingress.accept(bad, at: .zero, isLeased: everything)
        _ = ingress.accept(good, at: .zero, isLeased: everything)
        let effects = ingress.snapshotProcessed(at: .seconds(1), isLeased: everything)
        #expect(effects.count == 2)
        guard case .droppedSnapshot(let k, 5, .undecodable(let error))? = effects.first else {
            Issue.record("expected an undecodable drop first, got \(effects)")
            return
        }
        #expect(k == key("sess-A"))
        #expect(error.path == "$.payload.payload.revision")
        #expect(effects.last == .deliverSnapshot(try decoded(good)))
    }

    @Test func aSnapshotWithoutItsKeyIsRejectedOnArrivalWithoutDecoding() {
        var ingress = EventIngress(decoder: CountingDecoder())
        let noRun = EventMessage(eventType: EventNames.chatTimelineUpdated,
                                 payload: ["sessionId": "sess-A", "threadId": "main", "revision": 1], eventId: 8)
        let effects = ingress.accept(noRun, at: .zero, isLeased: everything)
        #expect(effects == [.rejectedSnapshot(eventId: 8, MessageDecodeError(
            path: "$.payload.payload.runId", message: "missing required string (snapshot key)"))])
        let notObject = EventMessage(eventType: EventNames.chatTimelineUpdated, payload: .array([]), eventId: 9)
        guard case .rejectedSnapshot(9, let e)? = ingress.accept(notObject, at: .zero, isLeased: everything).first else {
            Issue.record("a non-object payload must be rejected")
            return
        }
        #expect(e.path == "$.payload.payload")
        let numericThread = EventMessage(eventType: EventNames.chatTimelineUpdated,
                                         payload: ["sessionId": "s", "runId": "r", "threadId": 3], eventId: 10)
        guard case .rejectedSnapshot(10, let e2)? = ingress.accept(numericThread, at: .zero, isLeased: everything).first else {
            Issue.record("a numeric threadId must be rejected")
            return
        }
        #expect(e2.path == "$.payload.payload.threadId")
        #expect(ingress.decoder.calls == 0)
        #expect(ingress.waitingCount == 0 && ingress.inFlight == nil)
    }

    @Test func waitingKeysAreBoundedAndTheOldestMakesRoom() {
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("in-flight", revision: 1), at: .zero, isLeased: everything)
        for i in 0..<256 {
            #expect(ingress.accept(snapshot("sess-\(i)", revision: 1), at: .zero, isLeased: everything) == [])
        }
        #expect(ingress.waitingCount == 256)
        #expect(ingress.accept(snapshot("sess-256", revision: 1, eventId: 99), at: .zero, isLeased: everything)
                == [.droppedSnapshot(key("sess-0"), eventId: nil, reason: .overflow)])
        #expect(ingress.waitingCount == 256)
        #expect(ingress.waitingKeys.first == key("sess-1"))
        #expect(ingress.waitingKeys.last == key("sess-256"))
        // Draining keeps order across the queue's internal compaction.
        var order: [String] = []
        while case .deliverSnapshot(let s)? = ingress.snapshotProcessed(at: .seconds(1), isLeased: everything).first {
            order.append(s.sessionId)
        }
        #expect(order == (1...256).map { "sess-\($0)" })
    }

    @Test func discardWaitingDropsEverythingInQueueOrder() {
        var ingress = EventIngress(decoder: CountingDecoder())
        _ = ingress.accept(snapshot("sess-A", revision: 1), at: .zero, isLeased: everything)
        _ = ingress.accept(snapshot("sess-B", revision: 1, eventId: 2), at: .zero, isLeased: everything)
        _ = ingress.accept(snapshot("sess-C", revision: 1, eventId: 3), at: .zero, isLeased: everything)
        #expect(ingress.discardWaiting(at: .seconds(1)) == [
            .droppedSnapshot(key("sess-B"), eventId: 2, reason: .discarded),
            .droppedSnapshot(key("sess-C"), eventId: 3, reason: .discarded),
        ])
        #expect(ingress.inFlight == nil && ingress.waitingCount == 0 && ingress.decoder.calls == 1)
    }

    @Test func theStandardDecoderDeliversTheTypedSnapshot() throws {
        var ingress = EventIngress()
        let event = snapshot("sess-A", run: "run-9", thread: "sub-2", revision: 42, eventId: 1)
        let effects = ingress.accept(event, at: .zero, isLeased: everything)
        #expect(effects == [.deliverSnapshot(TimelineUpdated(
            sessionId: "sess-A", runId: "run-9", threadId: "sub-2", revision: 42,
            blocks: .array([.object(["text": .string("block r42")])])))])
        // The buffer variant appends after what the caller already holds.
        var buffer: [IngressEffect] = [.unexpectedProcessed]
        let c = control(EventNames.sessionUpdated, eventId: 2)
        ingress.accept(c, at: .seconds(1), isLeased: everything, into: &buffer)
        ingress.accept(snapshot("sess-B", revision: 1, eventId: 3), at: .seconds(1), isLeased: everything, into: &buffer)
        #expect(buffer == [.unexpectedProcessed, .deliverControl(c)])
        #expect(ingress.waitingKeys == [key("sess-B")])
    }
}
