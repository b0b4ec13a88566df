import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC Part B in the machine: keyed mutations made while no relay is registered go to the offline queue.
@Suite struct OfflineQueueTests {
    private func mutation(_ id: UInt64, key: String) -> ClientInput {
        .call(CallRequest(callId: CallID(id), method: "session.rename", params: ["sessionId": "s", "name": .string(key)], idempotencyKey: key))
    }

    private func requests(_ actions: [ClientAction]) -> [RpcRequest] {
        actions.compactMap { a in if case .rpcRequest(let r)? = a.sentMessage { r } else { nil } }
    }

    private func sentKeys(_ actions: [ClientAction]) -> [String] {
        actions.compactMap { a in if case .rpcRequest(let r)? = a.sentMessage { r.idempotencyKey } else { nil } }
    }

    @Test func withoutALoadedQueueCallsWaitInMemoryAsBefore() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(mutation(1, key: "k1"))
        #expect(!h.takeActions().contains { if case .offlineQueue = $0 { true } else { false } })
        #expect(h.machine.pendingCalls.count == 1)
        h.stop(failingCalls: [CallID(1)])
        h.finish()
    }

    @Test func offlineMutationsAreQueuedConfirmedAndDrainedInOrderOneAtATime() throws {
        var h = ClientHarness()
        h.feed(.offlineQueue(.loaded([])))
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(mutation(1, key: "k1"))
        let first = h.takeActions()
        #expect(first.count == 2)
        guard case .offlineQueue(.enqueue(let m)) = first.first else { Issue.record("enqueue first"); return }
        #expect(m.idempotencyKey == "k1" && m.method == "session.rename")
        #expect(first.last == .callCompleted(CallID(1), .queued(idempotencyKey: "k1")))
        h.feed(mutation(2, key: "k2"))
        #expect(h.takeActions().last == .callCompleted(CallID(2), .queued(idempotencyKey: "k2")))
        // A non-keyed call is not a mutation: it waits in memory as before.
        h.feed(.call(CallRequest(callId: CallID(3), method: "session.list")))
        #expect(h.machine.offlineQueue.map(\.idempotencyKey) == ["k1", "k2"])

        let g = h.machine.lastGeneration
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.registered()))
        let afterRegistration = h.takeActions()
        #expect(sentKeys(afterRegistration) == ["k1"], "one at a time, in order")
        #expect(afterRegistration.contains(.offlineQueue(.markSent(idempotencyKey: "k1"))))
        let r1 = try #require(requests(afterRegistration).first { $0.idempotencyKey == "k1" })
        h.feed(.transportFrame(g, RelayFrames.response(id: r1.id, result: ["success": true, "serverTimestamp": 1700], traceparent: r1.traceparent)))
        let afterFirst = h.takeActions()
        #expect(afterFirst.contains(.offlineQueue(.markAnswered(idempotencyKey: "k1", result: ["success": true, "serverTimestamp": 1700], serverTimestamp: 1700))))
        #expect(afterFirst.contains(.offlineMutationFinished(idempotencyKey: "k1", .success(["success": true, "serverTimestamp": 1700]))))
        #expect(sentKeys(afterFirst) == ["k2"])
        h.stop(failingCalls: [CallID(3)])
        h.finish()
    }

    @Test func aMutationInFlightWhenItsSocketDiesIsSentAgainUnderTheSameKey() throws {
        var h = ClientHarness()
        h.feed(.offlineQueue(.loaded([OfflineMutation(idempotencyKey: "k9", method: "job.cancel", params: ["jobId": "j"], createdAt: .zero)])))
        let g1 = h.connectAndRegister()
        #expect(h.machine.offlineDraining == "k9")
        h.feed(.transportClosed(g1, code: 1006, reason: "reset"))
        let g2 = h.machine.lastGeneration
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        h.feed(.transportOpened(g2))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g2, RelayFrames.registered()))
        let resent = h.takeActions()
        #expect(sentKeys(resent) == ["k9"])
        #expect(resent.contains { if case .send(g2, _, _) = $0, $0.sentMessage != nil { true } else { false } })
        #expect(h.machine.offlineQueue.map(\.idempotencyKey) == ["k9"], "still queued until answered")
        h.stop()
        h.finish()
    }

    @Test func aRefusedMutationIsReportedAndTheQueueMovesOn() throws {
        var h = ClientHarness()
        h.feed(.offlineQueue(.loaded([OfflineMutation(idempotencyKey: "bad", method: "job.cancel", params: ["jobId": "j"], createdAt: .zero),
                                      OfflineMutation(idempotencyKey: "good", method: "job.cancel", params: ["jobId": "k"], createdAt: .zero)])))
        h.feed(TestIdentity.start())
        let g = h.machine.lastGeneration
        h.skip(.openTransport, .phaseChanged)
        h.feed(.transportOpened(g))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g, RelayFrames.registered()))
        let r = try #require(requests(h.takeActions()).first)
        h.feed(.transportFrame(g, RelayFrames.errorResponse(id: r.id, code: -32003, message: "job not found", traceparent: r.traceparent)))
        let actions = h.takeActions()
        #expect(actions.contains(.offlineQueue(.markFailed(idempotencyKey: "bad", reason: "-32003 job not found"))))
        #expect(actions.contains { if case .offlineMutationFinished("bad", .failure(.remote)) = $0 { true } else { false } })
        #expect(sentKeys(actions) == ["good"])
        h.stop()
        h.finish()
    }
}
