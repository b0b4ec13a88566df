public import DevRelay
public import Net
import RelayProtocol
import Synchronization
import WebSocket

/// The development relay and the simulated desktop behind a real server socket (`relaytrace relay`): any
/// client (python, the iOS app in a simulator, `relaytrace capture`) can register, resume, call and
/// receive events as against the real relay (PROTOCOL.md), with faults on cue.
///
/// Sockets are served by a ``WebSocketServer`` on a few event loops (about one per core). Everything a
/// connection does passes through ``RelayHostCore`` in one place each: the upgrade request
/// (`upgradeRequested`), every event it delivers (`connectionEvent`), every frame and close sent to it
/// (`deliver`, `close`). Those go to one serial loop (the first of the group: its own sockets need no
/// hop), which alone runs the relay and desktop machines and performs their actions; an upgrade waits
/// for the relay's decision (401 for a bad bearer, 101 otherwise). Logs one line per connection event.
public final class RelayHost: Sendable {
    /// The URL clients connect to, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    /// The bound port.
    public let port: UInt16
    private let core: RelayHostCore
    private let server: WebSocketServer

    /// Listens on `host:port` (0: an ephemeral port) with `tls` (nil: plain `ws`), starts the desktop, and
    /// applies `faults` (relay and desktop directives; client directives are logged and skipped).
    /// `wallClockOrigin` is the Unix time in milliseconds that the relay's timestamps count from;
    /// `loopThreads` loops serve the sockets.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                faults: FaultScript = FaultScript(directives: []), seed: UInt64 = 1, wallClockOrigin: Int64,
                loopThreads: Int = EventLoopGroup.defaultThreadCount,
                log: @escaping @Sendable (String) -> Void = { _ in }) throws(NetError) {
        let group = try EventLoopGroup(threads: loopThreads, name: "relaytrace.relay")
        let core = RelayHostCore(loop: group.loops[0], seed: seed, wallClockOrigin: wallClockOrigin, log: log)
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

    /// Stops accepting, closes every connection, then stops the loops (the relay's with them).
    public func stop() {
        server.stop()
        server.group.stop()
    }
}

/// The relay host's machines and their serial loop (an ``EventLoop``: tasks in order, timers).
final class RelayHostCore: Sendable {
    struct State {
        var relay: DevRelay
        var desktop: SimulatedDesktop
        var relayTimers: [RelayTimer: LoopTimer] = [:]
        var desktopTimers: [DesktopTimer: LoopTimer] = [:]
        /// Sockets waiting for the relay's decision, then open ones.
        var pending: [ConnectionID: LoopWebSocket] = [:]
        var connections: [ConnectionID: LoopWebSocket] = [:]
        var desktopConnection: ConnectionID?
        var lastConnection: UInt64 = 0
    }

    private let start = ContinuousClock.now
    /// Touched only on `loop` (the lock is never contended; it keeps the type plainly `Sendable`).
    private let state: Mutex<State>
    private let loop: EventLoop
    private let log: @Sendable (String) -> Void

    init(loop: EventLoop, seed: UInt64, wallClockOrigin: Int64, log: @escaping @Sendable (String) -> Void) {
        self.log = log
        self.loop = loop
        let desktop = SimulatedDesktop(configuration: SimulatedDesktopConfiguration(
            deviceId: "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4", userId: "user-dev", seed: seed &+ 2))
        state = Mutex(State(relay: DevRelay(configuration: DevRelayConfiguration(seed: seed &+ 1, wallClockOrigin: wallClockOrigin)),
                            desktop: desktop))
    }

    var now: Moment { Moment(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    private func instant(_ m: Moment) -> ContinuousClock.Instant { start + .nanoseconds(m.nanoseconds) }

    func begin(faults: FaultScript) {
        loop.execute { [self] in desktopInput(.start) }
        for f in faults.schedule {
            let fault = f.fault
            loop.schedule(at: instant(f.at)) { [self] in apply(fault) }
        }
    }

    // MARK: Connections (called on their loops; everything hops to the relay's loop)

    /// A socket's upgrade request was read: ask the relay.
    func upgradeRequested(_ connection: LoopWebSocket) {
        guard let request = connection.request else { return }
        let path = request.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.target
        let upgrade = UpgradeRequest(path: path, headers: request.headers.fields.map { UpgradeHeader($0.name, $0.value) })
        loop.execute { [self] in
            let id = state.withLock { s -> ConnectionID in
                s.lastConnection += 1
                let id = ConnectionID(s.lastConnection)
                s.pending[id] = connection
                return id
            }
            relayInput(.upgrade(id, upgrade))
        }
    }

    /// Every event of an accepted socket, in order.
    func connectionEvent(_ id: ConnectionID, _ event: WebSocketEvent) {
        let input: RelayInput
        switch event {
        case .text(let t): input = .frame(id, .text(t))
        case .binary(let b): input = .frame(id, .binary(b))
        case .ping, .pong, .closeReceived: return  // answered by the codec (not transparent here)
        case .closed(let code, let reason): input = .closed(id, code: code.rawValue, reason: reason)
        case .protocolError(let e):
            // The relay failed the connection (it sent the close frame): say why, not just the code.
            input = .closed(id, code: e.closeCode.rawValue, reason: "failed by the relay: \(e.message)")
        }
        loop.execute { [self] in
            if case .closed = input { state.withLock { _ = $0.connections.removeValue(forKey: id) } }
            relayInput(input)
        }
    }

    /// Sends a frame the relay produced to its socket (on the socket's loop). A socket that ended
    /// meanwhile cannot take it: that is logged (its close is already on its way to the relay).
    private func deliver(_ frame: WireFrame, to id: ConnectionID, _ connection: LoopWebSocket) {
        let log = self.log
        connection.loop.execute {
            do throws(WebSocketError) {
                switch frame {
                case .text(let text): try connection.send(text: text)
                case .binary(let bytes): try connection.send(binary: bytes)
                }
            } catch {
                log("\(id) frame not sent (\(frame.byteCount) bytes): \(error)")
            }
        }
    }

    private func close(_ id: ConnectionID, _ connection: LoopWebSocket, code: UInt16?, reason: String) {
        let log = self.log
        connection.loop.execute {
            do throws(WebSocketError) {
                try connection.close(code: code.map { WebSocketCloseCode($0) }, reason: reason)
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

    private func desktopInput(_ input: DesktopInput) {
        let t = now
        desktopActions(state.withLock { $0.desktop.handle(input, at: t) })
    }

    private func apply(_ fault: Fault) {
        switch fault {
        case .relay(let f): relayInput(.fault(f))
        case .desktop(let f): desktopInput(.fault(f))
        case .client(let f): log("\(now) fault for the client skipped (no client here): \(f)")
        }
    }

    private func relayActions(_ actions: [RelayAction]) {
        for a in actions {
            switch a {
            case .acceptUpgrade(let c), .refuseUpgrade(let c, _, _):
                let (connection, isDesktop) = state.withLock { s -> (LoopWebSocket?, Bool) in
                    guard let connection = s.pending.removeValue(forKey: c) else { return (nil, s.desktopConnection == c) }
                    if case .acceptUpgrade = a { s.connections[c] = connection }
                    return (connection, false)
                }
                if isDesktop {
                    if case .refuseUpgrade(_, let status, _) = a {
                        state.withLock { $0.desktopConnection = nil }
                        desktopInput(.refused(status: status))
                    } else {
                        desktopInput(.connected)
                    }
                    continue
                }
                guard let connection else { continue }
                if case .refuseUpgrade(_, let status, let reason) = a {
                    connection.refuse(status: status, body: reason)
                } else {
                    connection.accept { [self] _, event in connectionEvent(c, event) }
                }
            case .send(let c, let frame):
                let (connection, isDesktop) = state.withLock { s in (s.connections[c], s.desktopConnection == c) }
                if isDesktop {
                    desktopInput(.frame(frame))
                } else if let connection {
                    deliver(frame, to: c, connection)
                } else {
                    log("\(c) frame not sent (\(frame.byteCount) bytes): the socket is closed")
                }
            case .close(let c, let code, let reason):
                let (connection, isDesktop) = state.withLock { s in (s.connections[c], s.desktopConnection == c) }
                if isDesktop {
                    state.withLock { $0.desktopConnection = nil }
                    desktopInput(.closed(code: code, reason: reason))
                } else if let connection {
                    close(c, connection, code: code, reason: reason)
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
            }
        }
    }

    private func desktopActions(_ actions: [DesktopAction]) {
        for a in actions {
            switch a {
            case .connect(var request):
                let id = state.withLock { s -> ConnectionID in
                    s.lastConnection += 1
                    let id = ConnectionID(s.lastConnection)
                    s.desktopConnection = id
                    return id
                }
                // The desktop serves every phone through this one in-process socket: not rate-limited.
                request.inProcess = true
                let upgrade = request
                loop.execute { [self] in relayInput(.upgrade(id, upgrade)) }
            case .send(let frame):
                if let c = state.withLock({ $0.desktopConnection }) { loop.execute { [self] in relayInput(.frame(c, frame)) } }
            case .close(let code, let reason):
                if let c = state.withLock({ s -> ConnectionID? in defer { s.desktopConnection = nil }; return s.desktopConnection }) {
                    loop.execute { [self] in relayInput(.closed(c, code: code, reason: reason)) }
                }
            case .armTimer(let timer, let deadline):
                let handle = loop.schedule(at: instant(deadline)) { [self] in
                    guard state.withLock({ $0.desktopTimers.removeValue(forKey: timer) }) != nil else { return }
                    desktopInput(.timerFired(timer))
                }
                state.withLock { $0.desktopTimers.updateValue(handle, forKey: timer) }?.cancel()
            case .cancelTimer(let timer):
                state.withLock { $0.desktopTimers.removeValue(forKey: timer) }?.cancel()
            case .log(let line):
                log("desktop: \(line)")
            }
        }
    }
}
