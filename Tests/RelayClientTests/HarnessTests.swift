import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// The harness itself: virtual time, timer order, strict reading, issues at the test's line.
@Suite struct HarnessTests {
    /// The text of an issue's comments.
    private static func text(_ issue: Issue) -> String { issue.comments.map(\.rawValue).joined(separator: "\n") }

    @Test func finishReportsLeftoversWithTheirCausesAtTheTestLine() throws {
        var h = ClientHarness()
        let startLine = #line + 1
        h.feed(TestIdentity.start())
        let left = try #require(h.leftovers())
        #expect(left.unreadActions.map(\.action.kind) == [.openTransport, .phaseChanged])
        for entry in left.unreadActions {
            #expect(entry.cause.input == TestIdentity.start())
            #expect(entry.cause.call == "feed")
            #expect(entry.cause.sourceLocation.line == startLine)
        }
        #expect(left.armedTimers.map(\.id) == [.handshake(Generation(1))])
        #expect(left.description.contains("handshake(g1) due at 10.000s"))
        #expect(left.description.contains("HarnessTests.swift:\(startLine)"), "each leftover names its input's line")
        #expect(left.description.contains("To fix"))

        let finishLine = #line + 2
        withKnownIssue("finish reports the unread actions and the armed timer") {
            h.finish()
        } matching: { issue in
            issue.sourceLocation?.line == finishLine && Self.text(issue).contains("openTransport")
                && Self.text(issue).contains("handshake(g1)")
        }
        h.skip(.openTransport, .phaseChanged)
        #expect(h.leftovers()?.armedTimers.map(\.id) == [.handshake(Generation(1))])
        #expect(h.leftovers(allowingArmedTimers: true) == nil)
        h.stop()
        h.finish()
    }

    @Test func feedAndAdvanceRefuseWhileActionsAreUnreadAndNameTheInputThatCausedThem() {
        var h = ClientHarness()
        let startLine = #line + 1
        h.feed(TestIdentity.start())
        let feedLine = #line + 2
        withKnownIssue("feed refuses: start's actions are unread") {
            h.feed(.transportOpened(Generation(1)))
        } matching: { issue in
            let text = Self.text(issue)
            return issue.sourceLocation?.line == feedLine && text.contains("feed(transportOpened(g1)) refused")
                && text.contains("start(") && text.contains("HarnessTests.swift:\(startLine)")
                && text.contains("skip(.openTransport, .phaseChanged)")
        }
        // A refusal fails once: the unread actions are dropped and the input is still handled.
        #expect(h.takeSentMessages().map(\.message.typeName) == ["register"])

        h.skip(.phaseChanged)
        #expect(!h.hasUnreadActions)
        h.feed(.transportFrame(Generation(1), RelayFrames.registered()))
        let advanceLine = #line + 2
        withKnownIssue("advance refuses: the registration's actions are unread") {
            h.advance(by: .seconds(5))
        } matching: { issue in
            issue.sourceLocation?.line == advanceLine && Self.text(issue).contains("advance(by: 5.0 seconds) refused")
                && Self.text(issue).contains("transportFrame(g1")
        }
        // The heartbeat fired inside the refused advance; its cause names the advance and its line.
        let heartbeat = h.unreadActions.first { $0.action.sentMessage?.typeName == "heartbeat" }
        #expect(heartbeat?.cause.input == .timerFired(.heartbeat(Generation(1))))
        #expect(heartbeat?.cause.call == "advance(by: 5.0 seconds)")
        #expect(heartbeat?.cause.sourceLocation.line == advanceLine)
        #expect(h.takeSentMessages().map(\.message.typeName) == ["heartbeat"])
        h.stop()
        h.finish()
    }

    @Test func skipIsByNameLeavesOtherKindsUnreadAndFailsWhenItSkipsNothing() {
        var h = ClientHarness()
        h.feed(TestIdentity.start())
        h.skip(.phaseChanged)
        #expect(h.unreadActions.map(\.action.kind) == [.openTransport], "only the named kind was skipped")
        let skipLine = #line + 2
        withKnownIssue("a skip of an action that did not happen is a stale test") {
            h.skip(.send)
        } matching: { issue in
            issue.sourceLocation?.line == skipLine && Self.text(issue).contains("skip(.send) skipped nothing")
        }
        h.skip(.openTransport)
        #expect(!h.hasUnreadActions)
        h.stop()
        h.finish()
    }

    @Test func timersFireAtTheirDeadlinesInDeadlineThenArmingOrder() {
        var h = ClientHarness(exhaustiveTimers: true)
        let g = h.connectAndRegister()
        // Heartbeat (5 s) and watchdog (15 s) are armed; a ping call adds a 3 s timeout.
        h.feed(.call(CallRequest(callId: CallID(1), method: "system.ping", requestId: "P")))
        #expect(h.takeActions().map(\.kind) == [.armTimer, .send])
        #expect(h.armedTimers.map(\.id) == [.rpcTimeout(requestId: "P", ownership: 1), .heartbeat(g), .watchdog(g)])
        #expect(h.advanceToNextTimer() == .rpcTimeout(requestId: "P", ownership: 1))
        #expect(h.now == .seconds(3))
        // A ping that times out fails the call and then the connection (it is the liveness probe).
        let fired = h.takeActions()
        #expect(fired.prefix(3) == [.callCompleted(CallID(1), .failure(.timedOut(after: .seconds(3)))),
                                    .connectionFailed(g, .rpcTimeout(requestId: "P")),
                                    .closeTransport(g, code: 1001, reason: "rpc timeout P")])
        #expect(fired.contains(.armTimer(.handshake(g.next), deadline: .seconds(13))), "g2 opens at once")
        h.feed(.stop)
        #expect(h.takeActions() == [.closeTransport(g.next, code: 1001, reason: "stopped"),
                                    .cancelTimer(.handshake(g.next)), .phaseChanged(.stopped(.stopped))])
        #expect(h.armedTimers.isEmpty)
        h.finish()
    }
}
