public import Net
import RelayProtocol
import Synchronization
import WebSocket
public import WireRecording
public import WireReplay
import Sync

/// A recorded session's relay side served on a real socket (`relaytrace relay --replay`): the sans-IO
/// ``ReplayingRelay`` runs on one serial loop (the first of a small ``EventLoopGroup``); the sockets are
/// served by a ``WebSocketServer`` on that group, each on one loop, and hop to the machine's loop with
/// what they read; an upgrade waits for the machine's answer. With a `recorder`, the replayed session is
/// recorded as a new wire trace (the same records `relay --record` writes), so `relaytrace diff` can
/// compare the two.
public final class ReplayHost: Sendable {
    /// The URL clients connect to, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    /// The bound port.
    public let port: UInt16
    private let core: ReplayHostCore
    private let server: WebSocketServer
    private let stopped = Atomic<Bool>(false)

    /// Listens on `host:port` (0: any free port) with `tls` (nil: plain ws) and serves `session`.
    /// `onFinished` is called on the machine's loop (keep it short); `log` gets one line per
    /// connection event and per finding. `loopThreads` loops serve the sockets.
    public init(session: RecordedSession, options: ReplayingRelayOptions = ReplayingRelayOptions(), host: String = "127.0.0.1",
                port: UInt16 = 0, tls: TLSServerContext? = nil, recorder: WireRecorder? = nil,
                loopThreads: Int = min(2, EventLoopGroup.defaultThreadCount),
                log: @escaping @Sendable (String) -> Void = { _ in },
                onFinished: @escaping @Sendable () -> Void = {}) throws(NetError) {
        let group = try EventLoopGroup(threads: loopThreads, name: "relaytrace.replay")
        let core = ReplayHostCore(loop: group.loops[0], machine: ReplayingRelay(session: session, options: options), recorder: recorder,
                                  log: log, onFinished: onFinished)
        self.core = core
        do {
            server = try WebSocketServer(host: host, port: port, tls: tls, group: group, log: { log($0) },
                                         upgrade: { connection in core.upgradeRequested(connection) })
        } catch {
            group.stop()
            throw error
        }
        self.port = server.port
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let path = session.sockets.first.map { $0.target.hasPrefix("/") ? $0.target : ReplayingRelay.pathOfURL($0.target) } ?? "/ws/device-link"
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(server.port)\(path.split(separator: "?").first.map(String.init) ?? path)"
    }

    /// Everything found so far, and the counts.
    public var result: ReplayHostResult { core.result }

    /// Stops: what the recording still expected is reported (``ReplayFinding/Kind/missing``,
    /// `unopened`), every connection is closed (a recorded socket still waiting for its decision is
    /// recorded as refused, 503), the loops end. Idempotent; never call it from the host's loops.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.stopMachine()
        server.stop()
        core.stopping()
        server.group.stop()
    }
}

/// The outcome of a replay served by ``ReplayHost``.
public struct ReplayHostResult: Sendable {
    /// Every departure from the recording, in the order found.
    public var findings: [ReplayFinding]
    /// Recorded sockets, and how many live sockets took one.
    public var recordedSockets: Int
    /// Live sockets that took a recorded socket.
    public var servedSockets: Int
    /// Client frames matched to recorded ones.
    public var matchedFrames: Int
    /// Relay frames sent from the recording.
    public var servedFrames: Int
    /// Whether every recorded socket was served and ended.
    public var finished: Bool
}

final class ReplayHostCore: Sendable {
    struct State {
        var machine: ReplayingRelay
        /// The client sockets, waiting for the machine's decision or open, with their recordings.
        var sockets = ServedSockets<ReplayConnection>()
        var last: UInt64 = 0
        var stopped = false
    }

    private let start = ContinuousClock.now
    /// Touched on `loop`, and read by ``result`` from any thread.
    private let state: Locked<State>
    private let loop: EventLoop
    private let recorder: WireRecorder?
    private let log: @Sendable (String) -> Void
    private let onFinished: @Sendable () -> Void

    init(loop: EventLoop, machine: ReplayingRelay, recorder: WireRecorder?, log: @escaping @Sendable (String) -> Void,
         onFinished: @escaping @Sendable () -> Void) {
        self.loop = loop
        state = Locked(State(machine: machine))
        self.recorder = recorder
        self.log = log
        self.onFinished = onFinished
    }

    var now: Moment { Moment(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    var result: ReplayHostResult {
        state.withLock { s in
            ReplayHostResult(findings: s.machine.findings, recordedSockets: s.machine.recordedSockets, servedSockets: s.machine.servedSockets,
                             matchedFrames: s.machine.matchedFrames, servedFrames: s.machine.servedFrames, finished: s.machine.isFinished)
        }
    }

    /// Runs `body` on the machine's loop and waits for it (never called from the host's loops).
    private func onLoopAndWait(_ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphoreBox()
        loop.execute {
            body()
            done.signal()
        }
        done.wait()
    }

    /// The machine reports what is still missing (before the sockets close); nothing is decided after.
    func stopMachine() {
        onLoopAndWait { [self] in
            let actions = state.withLock { s -> [ReplayingRelayAction] in
                guard !s.stopped else { return [] }
                s.stopped = true
                return s.machine.handle(.stop, at: now)
            }
            for a in actions { if case .finding(let f) = a { log("finding: \(f)") } }
        }
    }

    /// After the server stopped (every socket is gone): recorded sockets that never got their decision.
    func stopping() {
        onLoopAndWait { [self] in
            state.withLock { $0.sockets.refuseUndecided(reason: "the replay is stopping", order: { $0.id < $1.id }) }
        }
    }

    // MARK: Connections (called on their loops; the machine's part hops to its loop)

    /// A socket's upgrade request was read: record it and ask the machine (503 once stopped).
    func upgradeRequested(_ connection: LoopWebSocket) {
        guard let request = connection.request else { return }
        loop.execute { [self] in
            let id = state.withLock { s -> ReplayConnection? in
                guard !s.stopped else { return nil }
                s.last += 1
                let c = ReplayConnection(s.last)
                s.sockets.admit(c, connection, recording: recorder?.openSocket(url: request.target,
                                                                               headers: request.headers.fields.map { ($0.name, $0.value) }))
                return c
            }
            guard let id else { return connection.refuse(status: 503, body: "the replay is stopping") }
            handle(.upgrade(id, target: request.target, headers: request.headers.fields.map { .init($0.name, $0.value) }))
        }
    }

    /// Every event of an accepted socket, in order (on the socket's loop): recorded, then to the machine.
    private func connectionEvent(_ id: ReplayConnection, _ event: WebSocketEvent, _ socket: WireSocket?) {
        let input: ReplayingRelayInput
        switch record(event, on: socket) {
        case nil: return
        case .frame(let frame)?: input = .frame(id, frame)
        case .ended(let onWire, _, let reason, _)?:
            input = .closed(id, code: onWire, reason: reason)
        }
        loop.execute { [self] in
            if case .closed = input { state.withLock { $0.sockets.ended(id) } }
            handle(input)
        }
    }

    // MARK: The machine's loop

    private func handle(_ input: ReplayingRelayInput) {
        let t = now
        perform(state.withLock { $0.machine.handle(input, at: t) })
    }

    private func perform(_ actions: [ReplayingRelayAction]) {
        let log = self.log
        for a in actions {
            switch a {
            case .accept(let c), .refuse(let c, _, _):
                var refusal: (status: Int, body: String)?
                if case .refuse(_, let status, let body) = a { refusal = (status, body) }
                guard let decided = state.withLock({ $0.sockets.decide(c, accept: refusal == nil) }) else { continue }
                log(refusal.map { "\(c): refused \($0.status): \($0.body)" } ?? "\(c): upgraded")
                performUpgradeDecision(decided, refusal: refusal) { [self] event, socket in connectionEvent(c, event, socket) }
            case .send(let c, let frame):
                guard let (connection, socket) = open(c) else { continue }
                deliverOnLoop(frame, connection, socket, naming: "\(c)", log: log)
            case .close(let c, let code, let reason):
                guard let (connection, socket) = open(c) else { continue }
                log("\(c): closing \(code.map(String.init) ?? "(empty)") \(reason)")
                connection.loop.execute {
                    do throws(WebSocketError) {
                        // An empty close frame carries no reason on the wire (RFC 6455 §5.5.1).
                        try connection.close(code: code.map { WebSocketCloseCode(UInt16(clamping: $0)) }, reason: code == nil ? "" : reason)
                        socket?.closed(code: code, reason: reason, byClient: false)
                    } catch {
                        log("\(c) close not sent: \(error)")
                    }
                }
            case .abort(let c):
                guard let (connection, socket) = open(c) else { continue }
                connection.loop.execute {
                    socket?.closed(code: nil, reason: "the recorded socket ended without a close frame here", byClient: false, clean: false)
                    connection.abort(reason: "the recorded socket ended without a close frame")
                }
            case .wake(let at):
                // Early or late wakes do nothing harmful; after the loops stop none fires.
                _ = loop.schedule(at: start + .nanoseconds(at.nanoseconds)) { [self] in handle(.wake) }
            case .finding(let f):
                log("finding: \(f)")
            case .finished:
                onFinished()
            }
        }
    }

    /// An accepted socket that has not ended, with its recording.
    private func open(_ c: ReplayConnection) -> (LoopWebSocket, WireSocket?)? {
        state.withLock { $0.sockets.openSocket(c) }
    }
}
