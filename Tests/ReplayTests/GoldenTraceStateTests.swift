@testable import RelayClient
import RelayProtocol
import Replay
import ReplayTesting
import Testing

/// The connection state by phase (issue #19 point 5) across the golden traces: after every recorded input
/// the machine's phase, generation, held sends, registration attempt and reconnect ladder agree
/// (``RelayClientMachine/connectionStateProblems(lastReported:)``), and the phase is the one last reported.
/// A copy of the machine handles each input the replayer fed (the replay itself stays strict), so the
/// test sees the actions.
@Suite struct GoldenTraceStateTests {
    @Test(arguments: GoldenTraceTests.names)
    func everyInputOfAGoldenTraceLeavesTheStateConsistent(name: String) throws {
        let replay = try TraceReplay(named: name)
        var machine = replay.replayer.machine
        var lastReported: ConnectionPhase = .idle
        var problems: [String] = []
        var inputs = 0, heldSends = 0
        while let event = replay.replayer.step() {
            switch event {
            case .skipped:
                // A restart marker builds a new machine.
                if replay.replayer.machine.lastGeneration != machine.lastGeneration {
                    machine = replay.replayer.machine
                    lastReported = machine.phase
                }
            case .fed(let record, let input, _):
                inputs += 1
                for action in machine.handle(input, at: replay.replayer.records[record].time) {
                    if case .phaseChanged(let p) = action { lastReported = p }
                }
                if machine.state.socket?.heldSends.isEmpty == false { heldSends += 1 }
                if machine.phase != replay.replayer.machine.phase { problems.append("record #\(record): the copy is \(machine.phase)") }
                problems += machine.connectionStateProblems(lastReported: lastReported).map { "record #\(record): \($0)" }
            default:
                continue
            }
        }
        #expect(replay.replayer.divergence == nil)
        #expect(replay.replayer.isAtEnd)
        #expect(inputs > 0)
        #expect(problems.isEmpty, "\(problems.prefix(5).joined(separator: "\n"))")
    }
}
