import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// SPEC A8: requests, validation, pending calls, trace context and timeouts.
@Suite struct A8CallTests {
    private func sentRequests(_ actions: [ClientAction]) -> [(Generation, RpcRequest)] {
        actions.compactMap { a in
            guard case .send(let g, _, _) = a, case .rpcRequest(let r)? = a.sentMessage else { return nil }
            return (g, r)
        }
    }

    private func stopAndFinish(_ h: inout ClientHarness, failingCalls: [CallID] = [],
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        h.stop(failingCalls: failingCalls, sourceLocation: sourceLocation)
        h.finish(sourceLocation: sourceLocation)
    }

    @Test func unknownMethodIsRejectedBeforeAnythingIsSent() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "plans.list")))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .failure(.unknownMethod("plans.list")))])
        #expect(h.machine.pendingCalls.isEmpty)
        try stopAndFinish(&h)
    }

    @Test func keyedMutationWithoutAKeyIsRejectedBeforeAnythingIsSent() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.update", params: ["sessionId": "s"])))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .failure(.missingIdempotencyKey(method: "session.update")))])
        h.feed(.call(CallRequest(callId: CallID(2), method: "session.update", params: ["sessionId": "s"], idempotencyKey: "")))
        #expect(h.takeActions() == [.callCompleted(CallID(2), .failure(.missingIdempotencyKey(method: "session.update")))])
        h.feed(.call(CallRequest(callId: CallID(3), method: "session.update", params: ["sessionId": "s"], idempotencyKey: "K-1")))
        let sent = sentRequests(h.takeActions())
        #expect(sent.count == 1)
        #expect(sent.first?.1.idempotencyKey == "K-1")
        // A method that needs no key goes out without one.
        h.feed(.call(CallRequest(callId: CallID(4), method: "session.list")))
        #expect(sentRequests(h.takeActions()).first?.1.idempotencyKey == nil)
        try stopAndFinish(&h, failingCalls: [CallID(3), CallID(4)])
    }

    @Test func snakeCaseKeyAtAnyDepthIsRejectedWithItsPath() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        let params: JSONValue = ["sessionId": "s", "updateData": ["files": [["filePath": "a"], ["file_path": "b"]]]]
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.update", params: params, idempotencyKey: "k")))
        let actions = h.takeActions()
        #expect(actions.count == 1)
        guard case .callCompleted(CallID(1), .failure(.snakeCaseKey(let path))) = actions.first else {
            Issue.record("expected a snake_case rejection, got \(actions)")
            return
        }
        #expect(path.contains("file_path"))
        #expect(path.contains("updateData"))
        var general: CamelCaseViolation?
        do { _ = try RelayMessage.rpcRequest(RpcRequest(id: "r", method: "session.update", params: params)).encoded() } catch {
            general = error
        }
        #expect(path == general?.path)
        #expect(path == "$.payload.params.updateData.files[1].file_path")
        #expect(h.machine.pendingCalls.isEmpty)
        try stopAndFinish(&h)
    }

    @Test func everyRequestCarriesAValidTraceparent() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        var sent: [(Generation, RpcRequest)] = []
        for i in 1...5 {
            h.feed(.call(CallRequest(callId: CallID(UInt64(i)), method: "system.ping")))
            sent += sentRequests(h.takeActions())
        }
        #expect(sent.count == 5)
        var traceIds = Set<String>()
        for (_, r) in sent {
            let tp = try #require(r.traceparent)
            let reparsed = try TraceParent(parsing: tp.header)
            #expect(reparsed == tp)
            traceIds.insert(tp.traceId)
        }
        #expect(traceIds.count == 5, "each request has its own trace")
        try stopAndFinish(&h, failingCalls: [CallID(1), CallID(2), CallID(3), CallID(4), CallID(5)])
    }

    @Test func duplicateInFlightRequestIdIsRejectedAndFreedOnCompletion() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list", requestId: "R-1")))
        let first = sentRequests(h.takeActions())
        #expect(first.count == 1)
        h.feed(.call(CallRequest(callId: CallID(2), method: "session.list", requestId: "R-1")))
        #expect(h.takeActions() == [.callCompleted(CallID(2), .failure(.duplicateRequestId("R-1")))])
        #expect(h.machine.pendingCalls["R-1"]?.callId == CallID(1), "the first call is untouched")
        h.feed(.transportFrame(g, RelayFrames.response(id: "R-1", result: ["sessions": []], traceparent: first[0].1.traceparent)))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .success(["sessions": []]))])
        h.feed(.call(CallRequest(callId: CallID(3), method: "session.list", requestId: "R-1")))
        #expect(sentRequests(h.takeActions()).count == 1)
        try stopAndFinish(&h, failingCalls: [CallID(3)])
    }

    @Test func responseWithAnotherTraceIdIsRejected() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.get", params: ["sessionId": "s"], requestId: "R")))
        let sentTrace = try #require(sentRequests(h.takeActions()).first?.1.traceparent)
        let foreign = try TraceParent(traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7")
        h.feed(.transportFrame(g, RelayFrames.response(id: "R", traceparent: foreign)))
        #expect(h.takeActions() == [.diagnostic(.traceIdMismatch(requestId: "R", expected: sentTrace.traceId,
                                                                   received: "4bf92f3577b34da6a3ce929d0e0e4736"))])
        #expect(h.machine.pendingCalls["R"] != nil, "the call still waits for its real response")
        // Same trace ID, another parent (the desktop's span): accepted.
        let echoed = try TraceParent(traceId: sentTrace.traceId, parentId: "1111111111111111")
        h.feed(.transportFrame(g, RelayFrames.response(id: "R", result: ["ok": true], traceparent: echoed)))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .success(["ok": true]))])
        try stopAndFinish(&h)
    }

    @Test func remoteErrorsAndProgressAreDelivered() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "job.get", params: ["jobId": "j"], requestId: "R")))
        let tp = sentRequests(h.takeActions()).first?.1.traceparent
        h.feed(.transportFrame(g, RelayFrames.response(id: "R", result: ["partial": 1], traceparent: tp, isFinal: false)))
        #expect(h.takeActions() == [.callProgress(CallID(1), ["partial": 1])])
        h.feed(.transportFrame(g, RelayFrames.errorResponse(id: "R", code: -32010, message: "Desktop is offline", traceparent: tp)))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .failure(.remote(code: -32010, message: "Desktop is offline", data: nil)))])
        try stopAndFinish(&h)
    }

    @Test(arguments: [("system.ping", 3.0), ("files.search", 90.0), ("session.list", 60.0), ("plan.generateMarkdown", 180.0),
                      ("app.getProjectDirectory", 30.0), ("session.mergeHistoryState", 90.0)])
    func perMethodTimeoutFailsTheCallAtItsDeadline(method: String, seconds: Double) throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        let keyed = RpcCatalogue.method(named: method)?.needsIdempotencyKey == true
        h.feed(.call(CallRequest(callId: CallID(1), method: method, idempotencyKey: keyed ? "k" : nil, requestId: "R")))
        #expect(sentRequests(h.takeActions()).map(\.1.method) == [method])
        // Keep the socket alive so only the call's timeout can act.
        var t = 0.0
        while t + 4 < seconds {
            t += 4
            h.advance(to: .seconds(t))
            #expect(h.takeActions().allSatisfy { $0.sentMessage?.typeName == "heartbeat" }, "only heartbeats while the call waits")
            h.feed(.transportFrame(g, RelayFrames.pong))
        }
        h.advance(to: .seconds(seconds) - .nanoseconds(1))
        #expect(!h.takeActions().contains { if case .callCompleted = $0 { true } else { false } }, "not before \(seconds) s")
        h.advance(to: .seconds(seconds))
        let actions = h.takeActions()
        #expect(actions.contains(.callCompleted(CallID(1), .failure(.timedOut(after: .seconds(seconds))))))
        try stopAndFinish(&h)
    }

    @Test func timeoutReconnectsTheGenerationThatSentTheCall() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "system.ping", requestId: "P")))
        h.skip(.send)
        h.advance(by: .seconds(3))
        let actions = h.takeActions()
        #expect(actions.prefix(3) == [
            .callCompleted(CallID(1), .failure(.timedOut(after: .seconds(3)))),
            .connectionFailed(g, .rpcTimeout(requestId: "P")),
            .closeTransport(g, code: 1001, reason: "rpc timeout P"),
        ])
        #expect(actions.contains { if case .openTransport(g.next, _, _) = $0 { true } else { false } })
        try stopAndFinish(&h)
    }

    @Test func timeoutAfterItsGenerationWasReplacedTouchesNothingElse() throws {
        var h = ClientHarness()
        let g1 = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list", requestId: "L")))  // 60 s
        h.skip(.send)
        h.advance(by: .seconds(1))
        h.feed(.transportClosed(g1, code: 1006, reason: "reset"))
        let g2 = h.machine.lastGeneration
        h.skip(.connectionFailed, .openTransport, .phaseChanged)
        h.feed(.transportOpened(g2))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(g2, RelayFrames.registered()))
        h.skip(.storeResumeCredentials, .phaseChanged)
        #expect(h.machine.pendingCalls["L"]?.sentOn == g1)
        // Keep g2 alive until the old call's timeout at 60 s.
        var t = 1.0
        while t < 59 {
            t += 4
            h.advance(to: .seconds(min(t, 59.5)))
            #expect(h.takeActions().allSatisfy { $0.sentMessage?.typeName == "heartbeat" }, "only heartbeats while the call waits")
            h.feed(.transportFrame(g2, RelayFrames.pong))
        }
        let phase = h.machine.phase
        h.advance(to: .seconds(60))
        let actions = h.takeActions()
        #expect(actions == [.callCompleted(CallID(1), .failure(.timedOut(after: .seconds(60))))],
                "only the call fails; g2 is neither closed nor replaced")
        #expect(h.machine.phase == phase)
        #expect(h.machine.generation == g2)
        try stopAndFinish(&h)
    }

    @Test func cleanupOfAnOldCallNeverRemovesANewerOneWithTheSameId() throws {
        var calls = PendingCalls()
        let rpc = RpcRequest(id: "X", method: "session.list", params: .object([:]), idempotencyKey: nil, traceparent: nil)
        let oldOwnership = calls.nextOwnership()
        let insertedOld = calls.insert(PendingCall(callId: CallID(1), requestId: "X", ownership: oldOwnership, method: "session.list",
                                                   request: rpc, sentOn: Generation(1), startedAt: .zero, deadline: .seconds(60)))
        #expect(insertedOld)
        let removedOld = calls.remove("X", ownership: oldOwnership)
        #expect(removedOld?.callId == CallID(1))
        let newOwnership = calls.nextOwnership()
        let insertedNew = calls.insert(PendingCall(callId: CallID(2), requestId: "X", ownership: newOwnership, method: "session.list",
                                                   request: rpc, sentOn: Generation(2), startedAt: .seconds(1), deadline: .seconds(61)))
        #expect(insertedNew)
        let staleCleanup = calls.remove("X", ownership: oldOwnership)
        #expect(staleCleanup == nil, "the old owner's cleanup finds nothing of its own")
        #expect(calls["X"]?.callId == CallID(2))
    }

    @Test func aLateTimeoutOfAnOldCallDoesNotFailTheNewerCallWithTheSameId() throws {
        var h = ClientHarness()
        let g = h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "system.ping", requestId: "X")))
        let tp = sentRequests(h.takeActions()).first?.1.traceparent
        let oldOwnership = try #require(h.machine.pendingCalls["X"]?.ownership)
        h.feed(.transportFrame(g, RelayFrames.response(id: "X", traceparent: tp)))
        #expect(h.takeActions() == [.callCompleted(CallID(1), .success([:]))])
        h.feed(.call(CallRequest(callId: CallID(2), method: "system.ping", requestId: "X")))
        h.skip(.send)
        // A driver that raced and delivers the old call's timer anyway:
        h.feed(.timerFired(.rpcTimeout(requestId: "X", ownership: oldOwnership)))
        #expect(h.takeActions() == [.diagnostic(.staleTimer(.rpcTimeout(requestId: "X", ownership: oldOwnership)))])
        #expect(h.machine.pendingCalls["X"]?.callId == CallID(2))
        try stopAndFinish(&h, failingCalls: [CallID(2)])
    }

    @Test func callsMadeBeforeRegistrationWaitAndGoOutAfterIt() throws {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.openTransport, .phaseChanged)
        h.feed(.call(CallRequest(callId: CallID(1), method: "system.ping", requestId: "early")))
        #expect(sentRequests(h.takeActions()).isEmpty)
        h.feed(.transportOpened(Generation(1)))
        h.skip(.phaseChanged, .send)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        let sent = sentRequests(h.takeActions())
        #expect(sent.map(\.1.id) == ["early"])
        #expect(h.machine.pendingCalls["early"]?.sentOn == Generation(1))
        try stopAndFinish(&h, failingCalls: [CallID(1)])
    }

    @Test func stopFailsEveryPendingCall() throws {
        var h = ClientHarness()
        h.connectAndRegister()
        h.feed(.call(CallRequest(callId: CallID(1), method: "session.list")))
        h.skip(.send)
        h.feed(.stop)
        let actions = h.takeActions()
        #expect(actions.contains(.callCompleted(CallID(1), .failure(.clientStopped("stopped")))))
        #expect(h.machine.pendingCalls.isEmpty)
        h.finish()
    }
}
