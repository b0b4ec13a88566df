import RelayProtocol
public import Trace
import WatchCapture

/// A named watch-channel simulation of `relaytrace simulate --scenario NAME`.
public struct WatchScenario: Sendable {
    /// The name.
    public var name: String
    /// One line: what it shows.
    public var summary: String
    /// How long it runs unless `--duration` says otherwise.
    public var defaultDuration: Duration
    /// Stretches when the phone is out of reach (offsets from the start).
    public var outOfReach: [(from: Duration, to: Duration)] = []
    /// Watch app relaunches: when, and how far the watch's wall clock was set back.
    public var watchRestarts: [(at: Duration, clockSetBack: Duration)] = []

    /// The set-up of this scenario for `seed` and `duration` (default: the scenario's).
    public func setup(seed: UInt64, duration: Duration? = nil) -> WatchSimulationSetup {
        var s = WatchSimulationSetup(seed: seed, duration: duration ?? defaultDuration)
        s.outOfReach = outOfReach
        s.watchRestarts = watchRestarts
        return s
    }

    /// Both watch scenarios, in the order `--help` lists them.
    public static let all: [WatchScenario] = [
        WatchScenario(
            name: "watch-offline",
            summary: "a workout with the phone out of reach from 6 to 12 min: taps confirmed at once, queued, drained in order, executed once, ack back in a snapshot",
            defaultDuration: .seconds(1_800),
            outOfReach: [(from: .seconds(360), to: .seconds(720))]),
        WatchScenario(
            name: "watch-restart",
            summary: "the watch app relaunched mid-workout with its clock 1 h behind: new token, floor-seeded numbers, the phone resynchronises",
            defaultDuration: .seconds(1_800),
            watchRestarts: [(at: .seconds(650), clockSetBack: .seconds(3_600))]),
    ]

    /// The scenario called `name`.
    public static func named(_ name: String) -> WatchScenario? { all.first { $0.name == name } }
}

/// Runs a watch scenario into a trace file.
public enum WatchScenarioRunner {
    /// Simulates `scenario` with `seed` for `duration` (default: the scenario's) and writes the trace to
    /// `path` (header `simulated`, deterministic bytes); returns the result and the writer's summary.
    public static func simulate(_ scenario: WatchScenario, seed: UInt64, duration: Duration? = nil, path: String,
                                overwrite: Bool = true) throws(TraceError) -> (WatchSimulationResult, TraceWriterSummary) {
        let setup = scenario.setup(seed: seed, duration: duration)
        let capture = try WatchChannelCapture(
            path: path, seed: seed, identity: ["watch": "Simulated Apple Watch", "phone": "Simulated iPhone"],
            wallClockStart: TraceWriterOptions.simulatedWallClockStart, simulated: true,
            options: TraceWriterOptions.simulated(seed: seed, overwrite: overwrite),
            extra: ["scenario": .string(scenario.name), "duration": .int(setup.duration.nanoseconds)])
        var sim = WatchSimulation(setup: setup, capture: capture)
        let result = sim.run()
        let summary = try capture.close()
        return (result, summary)
    }
}
