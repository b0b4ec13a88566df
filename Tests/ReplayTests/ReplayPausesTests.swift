import RelayProtocol
import Replay
import Testing
import Trace

/// The replay core's pause logic, which both replayers' `run(until:)` use.
@Suite struct ReplayPausesTests {
    /// Records at 0, 1, 1, 2 s; the third a heartbeat timer firing.
    let records = ReplayRecords([
        TraceRecord(kind: .marker, time: .seconds(0), payload: []),
        TraceRecord(kind: .marker, time: .seconds(1), payload: []),
        TraceRecord(kind: .timerFired, time: .seconds(1), payload: Array(#"{"timer":"heartbeat"}"#.utf8)),
        TraceRecord(kind: .marker, time: .seconds(2), payload: []),
    ])

    func holds(_ c: ReplayCondition<Int>, _ index: Int, state: Int = 0) -> Bool {
        if let byPosition = c.holdsByPosition(in: records, before: index) { return byPosition }
        if case .state(let p, _) = c { return p(state) }
        return false
    }

    @Test func positionConditionsHoldOnlyWhereTheyPoint() {
        let time: ReplayCondition<Int> = .time(.seconds(1))
        #expect((0..<4).filter { holds(time, $0) } == [1], "the first record at or after the time only")
        #expect((0..<4).filter { holds(.record(3), $0) } == [3])
        #expect((0..<4).filter { holds(.timer("heartbeat"), $0) } == [2])
        #expect((0..<4).filter { holds(.timer("watchdog"), $0) }.isEmpty)
        let channelled = ReplayCondition<Int>.timer("heartbeat").holdsByPosition(in: records, before: 2, timerChannel: .watch)
        #expect(channelled == false, "a relay record is not the watch channel's timer")
        #expect(ReplayCondition<Int>.method("m").holdsByPosition(in: records, before: 0) == nil)
        #expect(ReplayCondition<Int>.state({ _ in true }, "s").holdsByPosition(in: records, before: 0) == nil)
    }

    @Test func aPauseIsPassedWhenRunAgainButAnotherConditionThereStillStops() {
        var pauses = ReplayPauses()
        let a: ReplayCondition<Int> = .record(2), b: ReplayCondition<Int> = .timer("heartbeat")
        #expect(pauses.pause(before: 1, [a], holds: { holds($0, 1) }) == nil)
        #expect(pauses.pause(before: 2, [a], holds: { holds($0, 2) }) == .paused(at: 2, reason: "record 2"))
        #expect(pauses.pause(before: 2, [a], holds: { holds($0, 2) }) == nil, "running again from the pause passes it")
        #expect(pauses.pause(before: 2, [a, b], holds: { holds($0, 2) }) == .paused(at: 2, reason: "timer heartbeat"),
                "a condition that had not held there before stops")
        #expect(pauses.pause(before: 2, [a, b], holds: { holds($0, 2) }) == nil)
        pauses.forget()
        #expect(pauses.pause(before: 2, [b], holds: { holds($0, 2) }) == .paused(at: 2, reason: "timer heartbeat"),
                "after a seek the pause is forgotten")
        let state: ReplayCondition<Int> = .state({ $0 > 5 }, "over five")
        #expect(pauses.pause(before: 3, [state], holds: { holds($0, 3, state: 4) }) == nil)
        #expect(pauses.pause(before: 3, [state], holds: { holds($0, 3, state: 6) }) == .paused(at: 3, reason: "state: over five"))
    }

    @Test func refusalNamesTheFirstRefusedConditionAndRetargetingKeepsAllButState() {
        let cs: [ReplayCondition<Int>] = [.time(.seconds(1)), .method("session.list"), .eventType("e")]
        let stop = ReplayPauses.refusal(cs) { if case .method = $0 { "no RPCs here" } else { nil } }
        #expect(stop == .refused(condition: "method session.list", reason: "no RPCs here"))
        #expect(ReplayPauses.refusal(cs) { _ in nil } == nil)
        #expect(cs.compactMap { $0.retargeted(to: String.self)?.description } == cs.map(\.description))
        #expect(ReplayCondition<Int>.state({ _ in true }, "s").retargeted(to: String.self) == nil)
    }
}
