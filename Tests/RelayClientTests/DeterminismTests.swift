import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// House rule 1: the same seed and inputs give byte-identical actions. These runs share one process and
/// one hash seed; `DeterminismAcrossProcessesTests` (RelayTraceCLITests) runs the simulation in child
/// processes with different hash seeds and compares the trace bytes.
@Suite struct DeterminismTests {
    /// A session that exercises every source of randomness: request IDs, trace IDs and reconnect jitter.
    /// Returns every action, in order, as text.
    private func run(seed: UInt64) -> [String] {
        var h = ClientHarness(seed: seed, exhaustiveTimers: true)
        var actions: [ClientAction] = []
        func step(_ drive: (inout ClientHarness) -> Void) {
            drive(&h)
            actions += h.takeActions()
        }
        step { $0.feed(TestIdentity.start(resume: TestIdentity.storedResume)) }
        let g = h.machine.lastGeneration
        step { $0.feed(.transportOpened(g)) }
        step { $0.feed(.transportFrame(g, RelayFrames.resumed())) }
        for i in 1...20 {
            step { $0.feed(.call(CallRequest(callId: CallID(UInt64(i)), method: i.isMultiple(of: 2) ? "session.list" : "system.ping"))) }
            step { $0.advance(by: .milliseconds(700)) }
        }
        for _ in 0..<5 {  // handshake timeouts walk the jittered reconnect ladder
            step { $0.advanceToNextTimer() }
        }
        step { $0.advance(by: .seconds(40)) }
        step { $0.feed(.stop) }
        h.finish()
        return actions.map { "\($0)" }
    }

    @Test func sameSeedAndInputsGiveIdenticalActions() {
        let a = run(seed: 42)
        let b = run(seed: 42)
        #expect(a.count > 50)
        #expect(a == b)
    }

    @Test func anotherSeedGivesOtherIdsAndJitter() {
        #expect(run(seed: 42) != run(seed: 43))
    }
}

/// The timer table's hand-written `TimerID` hash. `==` is synthesised, so a dictionary keyed by `TimerID`
/// gives right answers whatever the hash does; what a wrong hash breaks is its reason to exist: equal
/// timers built apart must hash equally, and distinct timers must not collide except where the hash
/// leaves a payload out on purpose (a send retry's generation, an rpc timeout's request ID).
@Suite struct TimerIDHashTests {
    private static let all: [TimerID] = [
        .handshake(Generation(1)), .handshake(Generation(2)), .heartbeat(Generation(1)), .watchdog(Generation(1)),
        .reRegister(Generation(1)), .sendRetry(Generation(1), slot: 1), .sendRetry(Generation(2), slot: 1),
        .rpcTimeout(requestId: "a", ownership: 1), .rpcTimeout(requestId: "b", ownership: 1),
        .rpcTimeout(requestId: "a", ownership: 2), .reconnect(attempt: 1), .reconnect(attempt: 2),
        .epochDeadline(epoch: 1), .auth(.poll), .auth(.refresh), .interest(.renewal(desktopId: "d")),
        .interest(.retry(desktopId: "d")), .interest(.renewal(desktopId: "e")), .probe(epoch: 1), .foregroundRecovery,
    ]

    /// The pairs the hash is documented to let collide.
    private static let allowedCollisions: Set<Set<TimerID>> = [
        [.sendRetry(Generation(1), slot: 1), .sendRetry(Generation(2), slot: 1)],
        [.rpcTimeout(requestId: "a", ownership: 1), .rpcTimeout(requestId: "b", ownership: 1)],
    ]

    /// The same timers, built from fresh values (a request ID and desktop ID assembled at run time).
    private static func rebuilt() -> [TimerID] {
        let a = String(["a"].joined()), b = String("xb".dropFirst()), d = "d" + "", e = String(UnicodeScalar(101))
        return [
            .handshake(Generation(1)), .handshake(Generation(2)), .heartbeat(Generation(1)), .watchdog(Generation(1)),
            .reRegister(Generation(1)), .sendRetry(Generation(1), slot: 1), .sendRetry(Generation(2), slot: 1),
            .rpcTimeout(requestId: a, ownership: 1), .rpcTimeout(requestId: b, ownership: 1),
            .rpcTimeout(requestId: a, ownership: 2), .reconnect(attempt: 1), .reconnect(attempt: 2),
            .epochDeadline(epoch: 1), .auth(.poll), .auth(.refresh), .interest(.renewal(desktopId: d)),
            .interest(.retry(desktopId: d)), .interest(.renewal(desktopId: e)), .probe(epoch: 1), .foregroundRecovery,
        ]
    }

    @Test func equalTimersBuiltApartHashEquallyAndFindEachOther() {
        let table = Dictionary(uniqueKeysWithValues: Self.all.enumerated().map { ($1, $0) })
        for (i, (id, twin)) in zip(Self.all, Self.rebuilt()).enumerated() {
            #expect(id == twin)
            #expect(id.hashValue == twin.hashValue, "\(id)")
            #expect(table[twin] == i, "\(twin) finds its entry")
        }
    }

    @Test func distinctTimersDoNotCollideExceptWhereTheHashLeavesAPayloadOut() {
        for (i, x) in Self.all.enumerated() {
            for y in Self.all[(i + 1)...] {
                #expect(x != y)
                if Self.allowedCollisions.contains([x, y]) { continue }
                #expect(x.hashValue != y.hashValue, "\(x) and \(y) collide")
            }
        }
        // The documented collisions are only collisions: the table keeps those timers apart.
        var table: [TimerID: Int] = [:]
        for (i, id) in Self.all.enumerated() { table[id] = i }
        #expect(table.count == Self.all.count)
        for pair in Self.allowedCollisions {
            let ids = Array(pair)
            #expect(table[ids[0]] != table[ids[1]])
        }
    }
}
