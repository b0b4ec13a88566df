public import DevRelay
public import Net
import RelayProtocol
import Synchronization
import WebSocket
public import WireRecording
import Sync

/// The development relay behind a real server socket (`relaytrace relay`): any client (python, the iOS
/// app in a simulator, `relaytrace capture`, a real desktop) can register, resume, call, receive events
/// and link devices as against the real relay (PROTOCOL.md, docs/DEVICE_LINK.md), with faults on cue.
/// The relay machine simulates the desktops phones name (``RelayHostDesktops``) inside itself: every
/// socket here is a real client's.
///
/// Sockets are served by a ``WebSocketServer`` on a few event loops (about one per core). Everything a
/// connection does passes through ``RelayHostCore`` in one place each: the upgrade request
/// (`upgradeRequested`), every event it delivers (`connectionEvent`), every frame and close sent to it
/// (`deliver`, `close`); the recording hooks of `--record` sit there. Those go to one serial loop (the
/// first of the group: its own sockets need no hop), which alone runs the relay machine and performs its
/// actions; an upgrade waits for the relay's decision (401 for a bad bearer, 101 otherwise). Logs one
/// line per connection event; link codes go to `onLinkCode`.
public final class RelayHost: Sendable {
    /// The URL clients connect to, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    /// The bound port.
    public let port: UInt16
    private let core: RelayHostCore
    private let server: WebSocketServer
    private let stopped = Atomic<Bool>(false)

    /// Listens on `host:port` (0: an ephemeral port) with `tls` (nil: plain `ws`), starts the relay (and
    /// the desktops of `desktops.atStart`), and applies `faults` (relay and desktop directives; client
    /// directives are logged and skipped). `wallClockOrigin` is the Unix time in milliseconds that the
    /// relay's timestamps count from. `onLinkCode` gets every link code the relay issues (on its loop).
    /// With a `recorder`, every client connection the relay serves is recorded as a wire trace: one
    /// generation per socket in upgrade order, its upgrade, every message both ways, pings, pongs, the
    /// close (the caller closes the recorder after ``stop()``). The desktops the relay simulates are inside
    /// the relay machine and not recorded; real desktops' sockets are. `loopThreads` loops serve the sockets.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                faults: FaultScript = FaultScript(directives: []), seed: UInt64 = 1, wallClockOrigin: Int64,
                desktops: RelayHostDesktops = RelayHostDesktops(), recorder: WireRecorder? = nil,
                loopThreads: Int = EventLoopGroup.defaultThreadCount,
                log: @escaping @Sendable (String) -> Void = { _ in },
                onLinkCode: @escaping @Sendable (LinkCodeOffer) -> Void = { _ in }) throws(NetError) {
        var configuration = DevRelayConfiguration(seed: seed &+ 1, wallClockOrigin: wallClockOrigin)
        configuration.simulatedDesktops = desktops.simulation
        configuration.offlineDesktops = Set(desktops.offline.map { $0.lowercased() })
        configuration.desktopsAtStart = desktops.atStart
        let group = try EventLoopGroup(threads: loopThreads, name: "relaytrace.relay")
        let core = RelayHostCore(loop: group.loops[0], configuration: configuration, recorder: recorder, log: log,
                                 onLinkCode: onLinkCode)
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
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(server.port)\(RelayConstants.devicePath)"
        core.begin(faults: faults)
    }

    /// How many client sockets are open or being set up.
    public var connectionCount: Int { server.connectionCount }

    /// Stops accepting, closes every connection (a recorded socket still waiting for its decision is
    /// recorded as refused, 503), then stops the loops (the relay's with them). Idempotent.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        server.stop()
        core.stopping()
        server.group.stop()
    }
}

/// Which desktops a ``RelayHost``'s relay simulates (docs/DEVICE_LINK.md).
public struct RelayHostDesktops: Sendable {
    /// For which targets a desktop is simulated (default: any desktop, any account).
    public var simulation: DesktopSimulation = .any
    /// Desktop IDs never simulated (their phones get `-32010`).
    public var offline: [String] = []
    /// Desktops up from the start; by default the link desktop: ``RelayConstants/defaultDesktopId``,
    /// open to any account, offering link codes.
    public var atStart: [StartingDesktop] = [
        StartingDesktop(deviceId: RelayConstants.defaultDesktopId, userId: nil, offersLinkCode: true),
    ]

    /// The defaults.
    public init() {}
}

/// The relay host's machine and its serial loop (an ``EventLoop``: tasks in order, timers).
final class RelayHostCore: Sendable {
    struct State {
        var relay: DevRelay
        var relayTimers: [RelayTimer: LoopTimer] = [:]
        /// The client sockets, waiting for the relay's decision or open, with their recordings (`relay --record`).
        var sockets = ServedSockets<ConnectionID>()
        var lastConnection: UInt64 = 0
    }

    private let start = ContinuousClock.now
    /// Touched only on `loop` (the lock is never contended; it keeps the type plainly `Sendable`).
    private let state: Locked<State>
    private let loop: EventLoop
    private let log: @Sendable (String) -> Void
    private let recorder: WireRecorder?
    private let onLinkCode: @Sendable (LinkCodeOffer) -> Void

    init(loop: EventLoop, configuration: DevRelayConfiguration, recorder: WireRecorder?, log: @escaping @Sendable (String) -> Void,
         onLinkCode: @escaping @Sendable (LinkCodeOffer) -> Void) {
        self.loop = loop
        self.log = log
        self.recorder = recorder
        self.onLinkCode = onLinkCode
        state = Locked(State(relay: DevRelay(configuration: configuration)))
    }

    var now: Moment { Moment(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    private func instant(_ m: Moment) -> ContinuousClock.Instant { start + .nanoseconds(m.nanoseconds) }

    func begin(faults: FaultScript) {
        loop.execute { [self] in relayInput(.start) }
        for f in faults.schedule {
            let fault = f.fault
            loop.schedule(at: instant(f.at)) { [self] in apply(fault) }
        }
    }

    /// After the server stopped (every socket is gone): recorded sockets that never got their decision.
    func stopping() {
        let done = DispatchSemaphoreBox()
        loop.execute { [self] in
            state.withLock { $0.sockets.refuseUndecided(reason: "the relay is stopping", order: <) }
            done.signal()
        }
        done.wait()
    }

    // MARK: Connections (called on their loops; everything hops to the relay's loop)

    /// A socket's upgrade request was read: record it and ask the relay.
    func upgradeRequested(_ connection: LoopWebSocket) {
        guard let request = connection.request else { return }
        let socket = recorder?.openSocket(url: request.target, headers: request.headers.fields.map { ($0.name, $0.value) })
        let path = request.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.target
        let upgrade = UpgradeRequest(path: path, headers: request.headers.fields.map { UpgradeHeader($0.name, $0.value) })
        loop.execute { [self] in
            let id = state.withLock { s -> ConnectionID in
                s.lastConnection += 1
                let id = ConnectionID(s.lastConnection)
                s.sockets.admit(id, connection, recording: socket)
                return id
            }
            relayInput(.upgrade(id, upgrade))
        }
    }

    /// Every event of an accepted socket, in order (on the socket's loop): recorded, then to the relay.
    func connectionEvent(_ id: ConnectionID, _ event: WebSocketEvent, _ socket: WireSocket?) {
        let input: RelayInput
        switch record(event, on: socket) {
        case nil: return
        case .frame(let frame)?: input = .frame(id, frame)
        case .ended(_, let code, let reason, let failedByRelay)?:
            // The relay failed the connection (it sent the close frame): say why, not just the code.
            input = .closed(id, code: code, reason: failedByRelay ? "failed by the relay: \(reason)" : reason)
        }
        loop.execute { [self] in
            if case .closed = input { state.withLock { $0.sockets.ended(id) } }
            relayInput(input)
        }
    }

    /// Sends a frame the relay produced to its socket (see `deliverOnLoop`).
    private func deliver(_ frame: WireFrame, to id: ConnectionID, _ connection: LoopWebSocket, _ socket: WireSocket?) {
        deliverOnLoop(frame, connection, socket, naming: "\(id)", log: log)
    }

    /// Closes a socket as the relay asked. An empty close frame (no code) carries no reason on the wire
    /// (RFC 6455 §5.5.1): the relay's reason for it is in the log and in the recording.
    private func close(_ id: ConnectionID, _ connection: LoopWebSocket, _ socket: WireSocket?, code: UInt16?, reason: String) {
        let log = self.log
        connection.loop.execute {
            do throws(WebSocketError) {
                try connection.close(code: code.map { WebSocketCloseCode($0) }, reason: code == nil ? "" : reason)
                socket?.closed(code: code.map { Int($0) }, reason: reason, byClient: false)
            } catch {
                log("\(id) close not sent: \(error)")
            }
        }
    }

    // MARK: The relay's loop

    private func relayInput(_ input: RelayInput) {
        let t = now
        relayActions(state.withLock { $0.relay.handle(input, at: t) })
    }

    private func apply(_ fault: Fault) {
        switch fault {
        case .relay(let f): relayInput(.fault(f))
        case .desktop(let f): relayInput(.desktopFault(f))
        case .client(let f): log("\(now) fault for the client skipped (no client here): \(f)")
        }
    }

    private func relayActions(_ actions: [RelayAction]) {
        for a in actions {
            switch a {
            case .acceptUpgrade(let c), .refuseUpgrade(let c, _, _):
                var refusal: (status: Int, body: String)?
                if case .refuseUpgrade(_, let status, let reason) = a { refusal = (status, reason) }
                guard let decided = state.withLock({ $0.sockets.decide(c, accept: refusal == nil) }) else { continue }
                performUpgradeDecision(decided, refusal: refusal) { [self] event, socket in connectionEvent(c, event, socket) }
            case .send(let c, let frame):
                if let (connection, socket) = state.withLock({ $0.sockets.openSocket(c) }) {
                    deliver(frame, to: c, connection, socket)
                } else {
                    log("\(c) frame not sent (\(frame.byteCount) bytes): the socket is closed")
                }
            case .close(let c, let code, let reason):
                if let (connection, socket) = state.withLock({ $0.sockets.openSocket(c) }) {
                    close(c, connection, socket, code: code, reason: reason)
                }
            case .armTimer(let timer, let deadline):
                let handle = loop.schedule(at: instant(deadline)) { [self] in
                    guard state.withLock({ $0.relayTimers.removeValue(forKey: timer) }) != nil else { return }
                    relayInput(.timerFired(timer))
                }
                state.withLock { $0.relayTimers.updateValue(handle, forKey: timer) }?.cancel()
            case .cancelTimer(let timer):
                state.withLock { $0.relayTimers.removeValue(forKey: timer) }?.cancel()
            case .log(let line):
                log(line)
            case .linkCodeIssued(let offer):
                onLinkCode(offer)
            }
        }
    }
}

/// A served socket's event as the relay side sees it, once recorded by ``record(_:on:)``.
enum ServedEvent {
    /// A message from the client.
    case frame(WireFrame)
    /// The socket ended: the close code as it was on the wire (nil: an empty close frame or none), the
    /// code the codec reported, why, and whether this end failed it (a protocol error).
    case ended(onWire: Int?, code: UInt16, reason: String, failedByRelay: Bool)
}

/// Records a served socket's event into its wire trace the way `relay --record` and `relay --replay
/// --record` both do (a ping with the pong the codec already queued for it), and says what it means
/// for the relay (nil: nothing, a ping or pong).
func record(_ event: WebSocketEvent, on socket: WireSocket?) -> ServedEvent? {
    switch event {
    case .text(let t):
        socket?.sent(.text(t))
        return .frame(.text(t))
    case .binary(let b):
        socket?.sent(.binary(b))
        return .frame(.binary(b))
    case .ping(let data):
        // The codec answers pings itself (its pong is already queued): record both.
        socket?.ping(data, .outbound)
        socket?.pong(data, .inbound)
        return nil
    case .pong(let data):
        socket?.pong(data, .outbound)
        return nil
    case .closeReceived:
        return nil  // transparent mode only; not used by a relay
    case .closed(let code, let reason):
        let onWire = code == .noStatusReceived || code == .abnormalClosure ? nil : Int(code.rawValue)
        socket?.closed(code: onWire, reason: reason, byClient: true, clean: code != .abnormalClosure)
        return .ended(onWire: onWire, code: code.rawValue, reason: reason, failedByRelay: false)
    case .protocolError(let e):
        socket?.closed(code: Int(e.closeCode.rawValue), reason: "failed by the relay: \(e.message)", byClient: false)
        return .ended(onWire: Int(e.closeCode.rawValue), code: e.closeCode.rawValue, reason: e.message, failedByRelay: true)
    }
}

/// Sends a frame a relay machine (the development relay's or a replayed recording's) produced to its
/// socket, on the socket's loop, recorded as it goes out. A socket that ended meanwhile cannot take it:
/// that is logged under `id` (its close is on its way to the machine).
func deliverOnLoop(_ frame: WireFrame, _ connection: LoopWebSocket, _ socket: WireSocket?, naming id: String,
                   log: @escaping @Sendable (String) -> Void) {
    connection.loop.execute {
        do throws(WebSocketError) {
            switch frame {
            case .text(let text): try connection.send(text: text)
            case .binary(let bytes): try connection.send(binary: bytes)
            }
            socket?.received(frame)
        } catch {
            log("\(id) frame not sent (\(frame.byteCount) bytes): \(error)")
        }
    }
}
