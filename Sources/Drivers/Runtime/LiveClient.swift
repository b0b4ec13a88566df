public import Capture
public import DevRelay
import OfflineQueue
public import Net
public import RelayClient
public import RelayProtocol
import Synchronization
import WebSocket

/// How a live client session runs.
public struct LiveClientOptions: Sendable {
    /// The client's identity, relay URL and seed.
    public var configuration: ClientConfiguration
    /// The app JWT sent as `Authorization: Bearer` (never printed).
    public var jwt: String
    /// How `wss` servers are verified.
    public var tls: TLSClientConfiguration = TLSClientConfiguration()
    /// The UI script: inputs at moments after the start (calls, claims, lifecycle, path changes).
    public var steps: [ScenarioStep] = []
    /// How long the UI takes to process a delivered snapshot.
    public var snapshotProcessing: Duration = .milliseconds(40)
    /// Where the session is recorded (nil: not recorded).
    public var capture: ClientCapture?
    /// The phone's SQLite file (SPEC Part B): links are written to its `linked_devices` (nil: a link's
    /// store fails).
    public var databasePath: String?
    /// When the user links the desktop: at that moment the code the desktop shows is typed (or its QR
    /// scanned); nil: no link.
    public var link: SimulatedLink?
    /// What the desktop shows at the moment of the link: the link code, or nil when it shows none yet
    /// (the embedded relay's last issued code, or `capture --link-code`).
    public var linkCode: @Sendable () -> LinkCodeOffer? = { nil }

    /// Options for `configuration` and `jwt`.
    public init(configuration: ClientConfiguration, jwt: String) {
        self.configuration = configuration
        self.jwt = jwt
    }
}

/// What a live session did.
public struct LiveClientSummary: Sendable {
    /// Inputs handled.
    public var inputs = 0
    /// Actions returned.
    public var actions = 0
    /// Counters by kind (`opens`, `framesOut`, `framesIn`, `calls`, `events`, ...).
    public var counts: [String: Int] = [:]
    /// The machine at the end.
    public var finalPhase: String = ""
}

/// Runs the relay client machine on the real monotonic clock over real WebSockets (SPEC A4-A11 live):
/// it performs the machine's actions (open, send, close with real sockets; timers on the monotonic
/// clock; the token store in memory), feeds it every input (frames from reader threads, timers, the UI
/// script), and records both through ``ClientCapture`` at the machine's boundary.
///
/// Every input goes through one serial loop thread, which is the only place the machine is touched: no
/// lock or actor on the per-frame path, and the trace's order is exactly the machine's order. Socket
/// connects and reads run on their own threads and post their results to the loop.
public final class LiveClient: Sendable {
    private enum Event: Sendable {
        case input(ClientInput)
        case timer(TimerID, Moment)
        case opened(Generation, WebSocketChannel)
        case link(scanned: Bool)
        case stop
    }

    private struct State {
        var machine: RelayClientMachine
        var timers: [TimerID: Moment] = [:]
        var channels: [Generation: WebSocketChannel] = [:]
        var tokens = ResumeTokenStore()
        var summary = LiveClientSummary()
        var stopped = false
        var store: OfflineQueueStore?
    }

    /// The options.
    public let options: LiveClientOptions
    private let start = ContinuousClock.now
    private let state: Locked<State>
    private let done = DispatchSemaphoreBox()
    private let loop = Locked<EventLoop?>(nil)

    /// A session with `options`; nothing happens until ``run(for:)``.
    public init(options: LiveClientOptions) {
        self.options = options
        var s = State(machine: RelayClientMachine(configuration: options.configuration))
        if let path = options.databasePath { s.store = try? OfflineQueueStore(path: path) }
        state = Locked(s)
    }

    /// The current moment on the session clock.
    public var now: Moment { Moment(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    /// Runs the session for `duration` of real time (the UI script included), then stops the client
    /// (sockets closed with 1001) and returns what happened. Blocks the calling thread.
    public func run(for duration: Duration) throws(NetError) -> LiveClientSummary {
        let loop = try EventLoop(name: "relaytrace.client")
        self.loop.withLock { $0 = loop }
        let config = options.configuration
        let claim = state.withLock { s in s.tokens.claim(config.resumeKey) }
        post(.input(.networkPath(.satisfied(.wifi))))
        post(.input(.identity(.start)))
        post(.input(.start(StartParameters(jwt: options.jwt, storedResume: claim.credentials, resumeOwnership: claim.ownership))))
        for step in options.steps where step.at < Moment.zero + duration {
            schedule(.input(step.input), at: start + .nanoseconds(step.at.nanoseconds))
        }
        if let link = options.link, link.at < Moment.zero + duration {
            schedule(.link(scanned: link.scanned), at: start + .nanoseconds(link.at.nanoseconds))
        }
        schedule(.stop, at: start + duration)
        done.wait()
        loop.stop()
        return state.withLock { $0.summary }
    }

    // MARK: The loop

    private func post(_ e: Event) { loop.withLock { $0 }?.execute { [self] in handle(e) } }

    private func schedule(_ e: Event, at instant: ContinuousClock.Instant) {
        loop.withLock { $0 }?.schedule(at: instant) { [self] in handle(e) }
    }

    private func handle(_ event: Event) {
        switch event {
        case .input(let input):
            feed(input)
        case .timer(let id, let deadline):
            let due = state.withLock { $0.timers[id] == deadline }
            guard due else { return }
            state.withLock { _ = $0.timers.removeValue(forKey: id) }
            feed(.timerFired(id))
        case .opened(let g, let channel):
            let current = state.withLock { s -> Bool in
                guard s.machine.generation == g, !s.stopped else { return false }
                s.channels[g] = channel
                return true
            }
            guard current else {
                try? channel.close(code: .goingAway, reason: "replaced")
                return
            }
            startReader(g, channel)
            count("opened")
            feed(.transportOpened(g))
        case .link(let scanned):
            guard let code = options.linkCode() else {
                count("linkCodeMissing")
                return
            }
            feed(.link(scanned ? .scanCode(code.uri) : .enterCode(code.code)))
        case .stop:
            feed(.stop)
            let channels = state.withLock { s -> [WebSocketChannel] in
                s.stopped = true
                s.summary.finalPhase = s.machine.phase.description
                defer { s.channels.removeAll() }
                return Array(s.channels.values)
            }
            for c in channels { _ = try? c.closeAndWait(code: .goingAway, reason: "stopped") }
            done.signal()
        }
    }

    /// Feeds one input at the current moment, records it and the actions, performs the actions.
    private func feed(_ input: ClientInput) {
        let t = now
        let actions = state.withLock { s -> [ClientAction] in
            s.summary.inputs += 1
            options.capture?.record(input, at: t)
            let out = s.machine.handle(input, at: t)
            options.capture?.record(actions: out, at: t)
            s.summary.actions += out.count
            return out
        }
        for a in actions { perform(a, at: t) }
    }

    private func count(_ key: String) { state.withLock { $0.summary.counts[key, default: 0] += 1 } }

    private func perform(_ action: ClientAction, at t: Moment) {
        switch action {
        case .openTransport(let g, let url, let headers):
            count("opens")
            connect(g, url: url, headers: headers)
        case .send(let g, let frame, let attempt):
            count("framesOut")
            guard let channel = state.withLock({ $0.channels[g] }) else { return }
            do {
                switch frame {
                case .text(let text): try channel.send(text: text)
                case .binary(let bytes): try channel.send(binary: bytes)
                }
            } catch {
                post(.input(.sendFailed(g, frame: frame, attempt: attempt, transient: error.isTimeout, reason: "\(error)")))
            }
        case .closeTransport(let g, let code, let reason):
            let channel = state.withLock { $0.channels.removeValue(forKey: g) }
            try? channel?.close(code: WebSocketCloseCode(code), reason: reason)
        case .armTimer(let id, let deadline):
            state.withLock { $0.timers[id] = deadline }
            schedule(.timer(id, deadline), at: start + .nanoseconds(deadline.nanoseconds))
        case .cancelTimer(let id):
            state.withLock { _ = $0.timers.removeValue(forKey: id) }
        case .storeResumeCredentials, .clearResumeCredentials:
            state.withLock { s in try? s.tokens.apply(action) }
        case .identity(.readIdentity):
            post(.input(.identity(.identityRead(.available(deviceId: options.configuration.deviceId, login: nil)))))
        case .httpRequest(let request, _):
            post(.input(.auth(.httpFailed(request.id, reason: "no auth server in a local capture"))))
        case .ingress(.deliverSnapshot):
            count("snapshots")
            schedule(.input(.snapshotProcessed), at: .now + options.snapshotProcessing)
        case .ingress(.deliverControl):
            count("events")
        case .callCompleted:
            count("calls")
        case .link(.store(let desktop)):
            storeLink(desktop)
        case .link(.finished(let outcome)):
            if case .linked = outcome { count("linked") } else { count("linkFailed") }
        default:
            return
        }
    }

    /// Writes the linked desktop to `linked_devices` and claims the new pair's resume key.
    private func storeLink(_ desktop: LinkedDesktop) {
        let answer = state.withLock { s -> LinkInput in
            guard let store = s.store else { return .storeFailed("no database (LiveClientOptions.databasePath)") }
            do {
                try store.recordLink(LinkedDevice(deviceId: desktop.deviceId, name: desktop.name, linkedAt: desktop.linkedAt,
                                                  serverTimestamp: desktop.linkedAt),
                                     mobileDeviceId: s.machine.configuration.wireDeviceId, code: s.machine.linkAttempt?.code ?? "")
            } catch {
                return .storeFailed("\(error)")
            }
            let claim = s.tokens.claim(ResumeTokenStore.key(deviceId: s.machine.configuration.wireDeviceId, desktopId: desktop.deviceId))
            return .stored(ownership: claim.ownership, storedResume: claim.credentials)
        }
        post(.input(.link(answer)))
    }

    private func connect(_ g: Generation, url: String, headers: [HTTPHeader]) {
        let tls = options.tls
        let h = HTTPHeaders(headers.map { ($0.name, $0.value) })
        do {
            try NetThread.detached(name: "relaytrace.connect") { [self] in
                do throws(WebSocketError) {
                    let channel = try WebSocketClient.connect(url: url, headers: h, tls: tls, timeout: .seconds(10))
                    post(.opened(g, channel))
                } catch {
                    let failure: TransportFailure = error.httpStatus.map { .upgradeRefused(status: $0) } ?? .network("\(error)")
                    post(.input(.transportFailed(g, failure)))
                }
            }
        } catch {
            post(.input(.transportFailed(g, .network("cannot start a thread: \(error)"))))
        }
    }

    private func startReader(_ g: Generation, _ channel: WebSocketChannel) {
        do {
            try NetThread.detached(name: "relaytrace.read") { [self] in
                while true {
                    let event: WebSocketEvent
                    do { event = try channel.receive() } catch {
                        post(.input(.transportFailed(g, .network("\(error)"))))
                        return
                    }
                    switch event {
                    case .text(let t):
                        post(.input(.transportFrame(g, .text(t))))
                    case .binary(let b):
                        post(.input(.transportFrame(g, .binary(b))))
                    case .ping, .pong, .closeReceived:
                        continue
                    case .closed(let code, let reason):
                        post(.input(.transportClosed(g, code: code.rawValue, reason: reason)))
                        return
                    case .protocolError(let e):
                        post(.input(.transportFailed(g, .network("protocol error: \(e)"))))
                        return
                    }
                }
            }
        } catch {
            post(.input(.transportFailed(g, .network("cannot start a reader thread: \(error)"))))
        }
    }
}

/// A one-shot semaphore usable from Sendable code.
final class DispatchSemaphoreBox: Sendable {
    private let sem = DispatchSemaphore(value: 0)
    func wait() { sem.wait() }
    func signal() { sem.signal() }
}

import Dispatch
import Sync
