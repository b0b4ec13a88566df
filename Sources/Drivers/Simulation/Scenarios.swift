import Capture
import Foundation
public import DevRelay
public import RelayClient
public import RelayProtocol
public import Trace

/// A named, documented simulation: UI steps plus a fault script, and a default duration.
public struct Scenario: Sendable {
    /// The name (`relaytrace simulate --scenario NAME`).
    public var name: String
    /// One line: what it shows.
    public var summary: String
    /// How long it runs unless `--duration` says otherwise.
    public var defaultDuration: Duration
    /// The fault script (docs/FAULTS.md), applied once from t = 0.
    public var faults: String
    /// The UI steps of one cycle; for durations longer than `cycle` the steps repeat every `cycle`.
    public var steps: [ScenarioStep]
    /// The length of one cycle of `steps` (nil: the steps run once).
    public var cycle: Duration?
    /// Start with resume credentials the relay does not know (an earlier launch's).
    public var staleResume: Bool = false
    /// Start with a stored login that expires this long after start (nil: none).
    public var loginExpiresAfter: Duration?
    /// How long the UI takes to process a snapshot.
    public var snapshotProcessing: Duration = .milliseconds(40)
    /// The desktop's snapshot cadence while a lease is active.
    public var desktopSnapshotInterval: Duration = .seconds(3)
    /// Run with an offline queue (SPEC Part B) in a real SQLite file.
    public var offlineQueue: Bool = false
    /// When the client process is killed and restarted.
    public var clientRestarts: [Moment] = []
    /// The phone starts with no linked desktop and links one with the desktop's code (docs/DEVICE_LINK.md).
    public var link: SimulatedLink?

    /// The desktop the phone starts with: the simulation's, or none for a linking scenario.
    public var startingDesktopId: String { link == nil ? SimulationIdentity.desktopId : "" }

    /// The set-up of this scenario for `seed` and `duration`, for a client with `configuration`.
    public func setup(seed: UInt64, duration: Duration? = nil, configuration: ClientConfiguration) throws(FaultScriptError) -> SimulationSetup {
        let duration = duration ?? defaultDuration
        var steps = self.steps
        if let cycle, cycle > .zero {
            var k: Int64 = 1
            while Moment.zero + cycle * k < Moment.zero + duration {
                steps += self.steps.map { ScenarioStep(at: $0.at + cycle * k, Scenario.renumbered($0.input, cycle: k)) }
                k += 1
            }
        }
        var s = SimulationSetup(seed: seed, duration: duration, client: configuration, steps: steps,
                                faults: try FaultScript.parse(faults))
        if staleResume {
            s.storedResume = ResumeCredentials(relaySessionId: "STALEsession0123456789abcdefABCD",
                                               resumeToken: "STALEtoken0123456789abcdefghijABCDEFGHIJ01234567")
        }
        if let life = loginExpiresAfter {
            s.storedLogin = StoredLogin(jwt: Simulation.phoneJWT(userId: "user-sim", deviceId: configuration.deviceId, serial: 0),
                                        expiry: .zero + life)
        }
        s.snapshotProcessing = snapshotProcessing
        s.desktopSnapshotInterval = desktopSnapshotInterval
        s.clientRestarts = clientRestarts
        if let link {
            s.link = link
            s.offlineQueueInUse = offlineQueue
        }
        return s
    }

    /// Call and claim IDs of repeated cycles must stay unique.
    static func renumbered(_ input: ClientInput, cycle k: Int64) -> ClientInput {
        let shift = UInt64(k) * 1000
        switch input {
        case .call(var c):
            c.callId = CallID(c.callId.rawValue + shift)
            if let key = c.idempotencyKey { c.idempotencyKey = "\(key)-\(k)" }
            return .call(c)
        case .interest(.claim(let id, let s)): return .interest(.claim(ClaimID(id.rawValue + shift), baseSessionId: s))
        case .interest(.confirmVisible(let id)): return .interest(.confirmVisible(ClaimID(id.rawValue + shift)))
        case .interest(.release(let id)): return .interest(.release(ClaimID(id.rawValue + shift)))
        default: return input
        }
    }
}

extension Scenario {
    private static func call(_ id: UInt64, _ method: String, _ params: JSONValue = .object([:]), key: String? = nil, at t: Double) -> ScenarioStep {
        ScenarioStep(at: .seconds(t), .call(CallRequest(callId: CallID(id), method: method, params: params, idempotencyKey: key)))
    }

    private static func claim(_ id: UInt64, _ session: String, at t: Double) -> ScenarioStep {
        ScenarioStep(at: .seconds(t), .interest(.claim(ClaimID(id), baseSessionId: session)))
    }

    private static func release(_ id: UInt64, at t: Double) -> ScenarioStep {
        ScenarioStep(at: .seconds(t), .interest(.release(ClaimID(id))))
    }

    /// Every scenario of `relaytrace simulate`, in the order `--help` lists them.
    public static let all: [Scenario] = relayScenarios + [offlineQueueScenario, linkScenario]

    static let relayScenarios: [Scenario] = [
        Scenario(
            name: "tour",
            summary: "registration, RPCs incl. a keyed mutation, a chat with lease renewals, a Wi-Fi -> cellular handover, background and foreground",
            defaultDuration: .seconds(180),
            faults: "",
            steps: [
                ScenarioStep(at: .seconds(50), .networkPath(.satisfied(.cellular))),
                ScenarioStep(at: .seconds(94), .appState(.inactive)), ScenarioStep(at: .seconds(95), .appState(.background)),
                ScenarioStep(at: .seconds(130), .appState(.inactive)), ScenarioStep(at: .seconds(130.2), .appState(.active)),
                ScenarioStep(at: .seconds(175), .networkPath(.satisfied(.wifi))),
                call(1, "session.list", at: 2), call(2, "session.update", ["sessionId": "sess-tour", "updateData": ["name": "Tour"]], key: "tour-update", at: 3),
                call(3, "actions.createImplementationPlan", ["sessionId": "sess-tour", "taskDescription": "demo"], key: "tour-plan", at: 4),
                claim(1, "sess-tour", at: 5), call(4, "system.ping", at: 8), call(5, "job.list", ["sessionId": "sess-tour"], at: 60),
                release(1, at: 70), claim(2, "sess-tour", at: 135), call(6, "session.get", ["sessionId": "sess-tour"], at: 140),
                release(2, at: 170),
            ],
            cycle: .seconds(180)),
        Scenario(
            name: "handshake-timeout",
            summary: "the relay swallows the first register: the handshake times out at 10 s and one new socket registers",
            defaultDuration: .seconds(30),
            faults: "at 0s relay drop from-client type=register count=1\n",
            steps: []),
        Scenario(
            name: "watchdog",
            summary: "the relay goes silent towards the phone: the watchdog fails the socket 15 s after the last inbound frame",
            defaultDuration: .seconds(60),
            faults: "from 16s to 30s relay drop to-client\n",
            steps: []),
        Scenario(
            name: "invalid-resume",
            summary: "stale resume credentials: invalidResume, then a token-less register 0.2 s later on the same socket",
            defaultDuration: .seconds(20),
            faults: "",
            steps: [],
            staleResume: true),
        Scenario(
            name: "invalid-resume-loop",
            summary: "the relay refuses three registers in a row: invalidResumeLoop ends the client inside the rolling 30 s",
            defaultDuration: .seconds(20),
            faults: "on register relay invalid-resume count=3\n",
            steps: [],
            staleResume: true),
        Scenario(
            name: "rpc-timeout",
            summary: "the desktop never answers system.ping: the call fails at 3 s and its generation is replaced",
            defaultDuration: .seconds(20),
            faults: "at 0s desktop ignore-pings\n",
            steps: [call(1, "system.ping", at: 2)]),
        Scenario(
            name: "rpc-timeout-replaced",
            summary: "session.list goes unanswered; the socket is replaced at 20 s; the 60 s timeout fails the call and touches nothing else",
            defaultDuration: .seconds(80),
            faults: "at 0s desktop ignore method=session.list\nat 20s relay close-client code=1006\n",
            steps: [call(1, "session.list", at: 2)]),
        Scenario(
            name: "handover",
            summary: "Wi-Fi -> cellular: the old socket is closed and its calls failed before exactly one replacement opens",
            defaultDuration: .seconds(60),
            faults: "at 0s desktop ignore method=files.search\nat 30s client path cellular\n",
            steps: [call(1, "files.search", ["query": "main"], at: 28)]),
        Scenario(
            name: "background",
            summary: "background disconnects the relay; back in the foreground recovery starts 1.5 s later",
            defaultDuration: .seconds(120),
            faults: "at 30s client app background\nat 90s client app foreground\n",
            steps: []),
        Scenario(
            name: "lease",
            summary: "a chat's timeline lease: renewed every 20 s and re-issued after each registered",
            defaultDuration: .seconds(120),
            faults: "at 50s relay close-client code=1006\n",
            steps: [claim(1, "sess-lease", at: 5), release(1, at: 100)]),
        Scenario(
            name: "ingress-coalesce",
            summary: "snapshots arrive faster than the UI processes them: waiting ones are replaced by newer ones, one delivered at a time",
            defaultDuration: .seconds(30),
            faults: "",
            steps: [claim(1, "sess-busy", at: 2), ScenarioStep(at: .seconds(4), .call(CallRequest(callId: CallID(1), method: "job.list")))],
            snapshotProcessing: .milliseconds(1500),
            desktopSnapshotInterval: .milliseconds(250)),
        Scenario(
            name: "token-refresh",
            summary: "the stored JWT expires at 330 s: the refresh runs at 30 s (300 s early) and the next socket uses the new JWT",
            defaultDuration: .seconds(60),
            faults: "at 45s relay close-client code=1006\n",
            steps: [],
            loginExpiresAfter: .seconds(330)),
    ]

    /// SPEC Part B: keyed mutations made while the phone has no path are queued in SQLite, drained in
    /// order after registration under their keys, and a client restart mid-drain loses nothing.
    public static let offlineQueueScenario: Scenario = {
        var s = Scenario(
            name: "offline-queue",
            summary: "mutations made offline are queued in SQLite and drained in order after registration under their keys; a client restart mid-drain loses nothing",
            defaultDuration: .seconds(40),
            faults: "at 5s client path none\nat 25s client path wifi\n",
            steps: [
                call(1, "session.rename", ["sessionId": "sess-oq", "name": "Offline 1"], key: "oq-rename", at: 8),
                call(2, "session.update", ["sessionId": "sess-oq", "updateData": ["notes": "written offline"]], key: "oq-update", at: 10),
                call(3, "job.cancel", ["jobId": "job-oq"], key: "oq-cancel", at: 12),
            ])
        s.offlineQueue = true
        s.clientRestarts = [.seconds(25.11)]
        return s
    }()

    /// Seed 003's device link: the phone starts with no linked desktop; a malformed code is refused
    /// without a socket, an unknown one by the relay, then the desktop's QR links it: the desktop is stored
    /// in `linked_devices` (SQLite) and the phone registers with it, calls it and holds a lease.
    public static let linkScenario: Scenario = {
        var s = Scenario(
            name: "link",
            summary: "an unlinked phone links the desktop: a malformed code, an unknown one (linkCodeInvalid), then its QR; stored in linked_devices, then registered, an RPC and a lease",
            defaultDuration: .seconds(30),
            faults: "",
            steps: [
                ScenarioStep(at: .seconds(1), .link(.enterCode("hello"))),
                ScenarioStep(at: .seconds(2), .link(.enterCode("abcd efgh"))),
                call(1, "session.list", at: 8), claim(1, "sess-link", at: 10), call(2, "system.ping", at: 12), release(1, at: 25),
            ])
        s.link = SimulatedLink(at: .seconds(4), scanned: true)
        return s
    }()

    /// The scenario called `name`.
    public static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }
}

/// The phone of a simulation.
public enum SimulationIdentity {
    /// The simulated phone's configuration (a `wss` URL on the development relay's name; no socket is
    /// opened in a simulation).
    public static func configuration(seed: UInt64, desktopId: String = desktopId) -> ClientConfiguration {
        do {
            return try ClientConfiguration(deviceId: "5B0E6C8A-1F5D-4D8E-9A53-2A1C9B6F0E11", deviceName: "Simulated iPhone",
                                           desktopId: desktopId,
                                           relayURL: "wss://relay.simulated.invalid/ws/device-link", seed: seed)
        } catch {
            preconditionFailure("the simulation identity's URL is a constant wss URL: \(error)")
        }
    }

    /// The simulated phone's desktop (the one a linking scenario links).
    public static let desktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"

    /// The wall-clock start written into simulated traces (``TraceWriterOptions/simulatedWallClockStart``).
    public static let wallClockStart = TraceWriterOptions.simulatedWallClockStart

    /// Writer options for simulated traces (``TraceWriterOptions/simulated(seed:overwrite:)``).
    public static func writerOptions(seed: UInt64, overwrite: Bool) -> TraceWriterOptions {
        TraceWriterOptions.simulated(seed: seed, overwrite: overwrite)
    }
}

/// Runs a scenario into a trace file.
public enum ScenarioRunner {
    /// Simulates `scenario` with `seed` for `duration` (default: the scenario's) and writes the trace to
    /// `path`; returns the result and the writer's summary.
    public static func simulate(_ scenario: Scenario, seed: UInt64, duration: Duration? = nil, path: String,
                                overwrite: Bool = true) throws -> (SimulationResult, TraceWriterSummary) {
        let config = SimulationIdentity.configuration(seed: seed, desktopId: scenario.startingDesktopId)
        var setup = try scenario.setup(seed: seed, duration: duration, configuration: config)
        var queueFile: String?
        if scenario.offlineQueue || scenario.link != nil {
            queueFile = path + ".offline-queue.sqlite"
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: queueFile! + suffix) }
            setup.offlineQueuePath = queueFile
        }
        defer {
            if let queueFile { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: queueFile + suffix) } }
        }
        let capture = try ClientCapture(
            path: path, configuration: config, wallClockStart: SimulationIdentity.wallClockStart, simulated: true,
            options: SimulationIdentity.writerOptions(seed: seed, overwrite: overwrite),
            extra: ["scenario": .string(scenario.name), "duration": .int(setup.duration.nanoseconds)])
        var sim = Simulation(setup: setup, capture: capture)
        let result = sim.run()
        let summary = try capture.close()
        return (result, summary)
    }
}
