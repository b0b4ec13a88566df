public import DevRelay
public import Net
import RelayProtocol
import Synchronization
import WebSocket
public import WireRecording

/// The development relay behind a real server socket (`relaytrace relay`): any client (python, the iOS
/// app in a simulator, `relaytrace capture`, a real desktop) can register, resume, call, receive events
/// and link devices as against the real relay (PROTOCOL.md, docs/DEVICE_LINK.md), with faults on cue.
/// The relay machine simulates the desktops phones name (``RelayHostDesktops``) inside itself: every
/// socket here is a real client's.
///
/// Socket threads post what they read to one serial loop, which alone runs the relay machine and
/// performs its actions; an upgrade waits for the relay's decision (401 for a bad bearer, 101
/// otherwise). Logs one line per connection event; link codes go to `onLinkCode`.
public final class RelayHost: Sendable {
    /// The URL clients connect to, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    /// The bound port.
    public let port: UInt16
    private let core: RelayHostCore
    private let server: WebSocketServer

    /// Listens on `host:port` (0: an ephemeral port) with `tls` (nil: plain `ws`), starts the relay (and
    /// the desktops of `desktops.atStart`), and applies `faults` (relay and desktop directives; client
    /// directives are logged and skipped). `wallClockOrigin` is the Unix time in milliseconds that the
    /// relay's timestamps count from. `onLinkCode` gets every link code the relay issues (on its loop).
    /// With a `recorder`, every client connection the relay serves is recorded as a wire trace: one
    /// generation per socket in accept order, its upgrade, every message both ways, pings, pongs, the
    /// close (the caller closes the recorder after ``stop()``). The desktops the relay simulates are inside
    /// the relay machine and not recorded; real desktops' sockets are.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                faults: FaultScript = FaultScript(directives: []), seed: UInt64 = 1, wallClockOrigin: Int64,
                desktops: RelayHostDesktops = RelayHostDesktops(), recorder: WireRecorder? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in },
                onLinkCode: @escaping @Sendable (LinkCodeOffer) -> Void = { _ in }) throws(NetError) {
        var configuration = DevRelayConfiguration(seed: seed &+ 1, wallClockOrigin: wallClockOrigin)
        configuration.simulatedDesktops = desktops.simulation
        configuration.offlineDesktops = Set(desktops.offline.map { $0.lowercased() })
        configuration.desktopsAtStart = desktops.atStart
        let core = RelayHostCore(configuration: configuration, recorder: recorder, log: log, onLinkCode: onLinkCode)
        try core.startLoop()
        self.core = core
        server = try WebSocketServer(
            host: host, port: port, tls: tls, log: { log($0) },
            decide: { request in core.decide(request) },
            handler: { channel, request in core.serve(channel, request) })
        self.port = server.port
        let shownHost = host.contains(":") ? "[\(host)]" : host
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(server.port)\(RelayConstants.devicePath)"
        core.begin(faults: faults)
    }

    /// Stops accepting, closes every connection and stops the relay's loop.
    public func stop() {
        server.stop()
        core.stop()
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

/// The relay host's machine and its serial loop.
final class RelayHostCore: Sendable {
    enum Event: Sendable {
        case relay(RelayInput)
        case relayTimer(RelayTimer, Moment)
        case fault(Fault)
    }

    final class Decision: Sendable {
        let value = Mutex<WebSocketUpgradeDecision?>(nil)
        let ready = DispatchSemaphoreBox()
    }

    struct State {
        var relay: DevRelay
        var relayTimers: [RelayTimer: Moment] = [:]
        var channels: [ConnectionID: WebSocketChannel] = [:]
        var decisions: [ConnectionID: Decision] = [:]
        var byKey: [String: ConnectionID] = [:]
        var lastConnection: UInt64 = 0
        /// Each recorded client connection's socket in the wire trace (`relay --record`).
        var recorded: [ConnectionID: WireSocket] = [:]
    }

    private let start = ContinuousClock.now
    private let state: Mutex<State>
    private let loop = Mutex<SerialLoop<Event>?>(nil)
    private let log: @Sendable (String) -> Void
    private let recorder: WireRecorder?
    private let onLinkCode: @Sendable (LinkCodeOffer) -> Void

    init(configuration: DevRelayConfiguration, recorder: WireRecorder?, log: @escaping @Sendable (String) -> Void,
         onLinkCode: @escaping @Sendable (LinkCodeOffer) -> Void) {
        self.log = log
        self.recorder = recorder
        self.onLinkCode = onLinkCode
        state = Mutex(State(relay: DevRelay(configuration: configuration)))
    }

    var now: Moment { Moment(nanoseconds: (ContinuousClock.now - start).nanoseconds) }

    func startLoop() throws(NetError) {
        let l = try SerialLoop<Event>(name: "relaytrace.relay") { [self] e in handle(e) }
        loop.withLock { $0 = l }
    }

    func begin(faults: FaultScript) {
        post(.relay(.start))
        for f in faults.schedule {
            loop.withLock { $0 }?.schedule(.fault(f.fault), at: start + .nanoseconds(f.at.nanoseconds))
        }
    }

    func stop() {
        let l = loop.withLock { l -> SerialLoop<Event>? in
            defer { l = nil }
            return l
        }
        l?.stop()
        let pending = state.withLock { s -> [Decision] in
            defer { s.decisions.removeAll() }
            for id in s.decisions.keys { s.recorded.removeValue(forKey: id)?.refused(status: 503, reason: "the relay is stopping") }
            return Array(s.decisions.values)
        }
        for d in pending {
            d.value.withLock { $0 = .refuse(status: 503) }
            d.ready.signal()
        }
    }

    private func post(_ e: Event) { loop.withLock { $0 }?.post(e) }

    // MARK: Server side (connection threads)

    /// Asks the relay (on its loop) whether to accept this upgrade; waits for the answer.
    func decide(_ request: WebSocketUpgradeRequest) -> WebSocketUpgradeDecision {
        let d = Decision()
        let id = state.withLock { s -> ConnectionID? in
            guard s.byKey[request.key] == nil else { return nil }
            s.lastConnection += 1
            let id = ConnectionID(s.lastConnection)
            s.decisions[id] = d
            s.byKey[request.key] = id
            if let recorder {
                s.recorded[id] = recorder.openSocket(url: request.target, headers: request.headers.fields.map { ($0.name, $0.value) })
            }
            return id
        }
        guard let id, loop.withLock({ $0 }) != nil else { return .refuse(status: 503) }
        let path = request.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.target
        let headers = request.headers.fields.map { UpgradeHeader($0.name, $0.value) }
        post(.relay(.upgrade(id, UpgradeRequest(path: path, headers: headers))))
        d.ready.wait()
        return d.value.withLock { $0 } ?? .refuse(status: 503)
    }

    /// Runs on an accepted connection's thread: registers the channel and reads until it closes.
    func serve(_ channel: WebSocketChannel, _ request: WebSocketUpgradeRequest) {
        guard let (id, socket) = state.withLock({ s -> (ConnectionID, WireSocket?)? in
            guard let id = s.byKey.removeValue(forKey: request.key) else { return nil }
            s.channels[id] = channel
            return (id, s.recorded[id])
        }) else { return }
        while true {
            let event: WebSocketEvent
            do { event = try channel.receive() } catch {
                socket?.failed("connection lost: \(error)")
                post(.relay(.closed(id, code: 1006, reason: "\(error)")))
                break
            }
            switch event {
            case .text(let t):
                socket?.sent(.text(t))
                post(.relay(.frame(id, .text(t))))
            case .binary(let b):
                socket?.sent(.binary(b))
                post(.relay(.frame(id, .binary(b))))
            case .ping(let data):
                // The channel answers pings itself (its pong is already queued): record both.
                socket?.ping(data, .outbound)
                socket?.pong(data, .inbound)
                continue
            case .pong(let data):
                socket?.pong(data, .outbound)
                continue
            case .closed(let code, let reason):
                let onWire = code == .noStatusReceived || code == .abnormalClosure ? nil : Int(code.rawValue)
                socket?.closed(code: onWire, reason: reason, byClient: true, clean: code != .abnormalClosure)
                post(.relay(.closed(id, code: code.rawValue, reason: reason)))
            case .protocolError(let e):
                // The relay failed the connection (it sent the close frame): say why, not just the code.
                socket?.closed(code: Int(e.closeCode.rawValue), reason: "failed by the relay: \(e.message)", byClient: false)
                post(.relay(.closed(id, code: e.closeCode.rawValue, reason: "failed by the relay: \(e.message)")))
            }
            if case .closed = event { break }
            if case .protocolError = event { break }
        }
        state.withLock { s in
            s.channels.removeValue(forKey: id)
            s.recorded.removeValue(forKey: id)
        }
    }

    // MARK: The loop

    private func handle(_ event: Event) {
        let t = now
        switch event {
        case .relay(let input):
            relayActions(state.withLock { $0.relay.handle(input, at: t) })
        case .relayTimer(let timer, let deadline):
            let due = state.withLock { s -> Bool in
                guard s.relayTimers[timer] == deadline else { return false }
                s.relayTimers[timer] = nil
                return true
            }
            if due { relayActions(state.withLock { $0.relay.handle(.timerFired(timer), at: t) }) }
        case .fault(let fault):
            switch fault {
            case .relay(let f): relayActions(state.withLock { $0.relay.handle(.fault(f), at: t) })
            case .desktop(let f): relayActions(state.withLock { $0.relay.handle(.desktopFault(f), at: t) })
            case .client(let f): log("\(t) fault for the client skipped (no client here): \(f)")
            }
        }
    }

    private func relayActions(_ actions: [RelayAction]) {
        for a in actions {
            switch a {
            case .acceptUpgrade(let c), .refuseUpgrade(let c, _, _):
                guard let decision = state.withLock({ $0.decisions.removeValue(forKey: c) }) else { continue }
                let socket = state.withLock { $0.recorded[c] }
                if case .refuseUpgrade(_, let status, let reason) = a {
                    socket?.refused(status: status, reason: reason)
                    state.withLock { _ = $0.recorded.removeValue(forKey: c) }
                    decision.value.withLock { $0 = .refuse(status: status, body: reason) }
                } else {
                    socket?.opened(status: 101)
                    decision.value.withLock { $0 = .accept() }
                }
                decision.ready.signal()
            case .send(let c, let frame):
                let (channel, socket) = state.withLock { s in (s.channels[c], s.recorded[c]) }
                if let channel {
                    socket?.received(frame)
                    switch frame {
                    case .text(let text): try? channel.send(text: text)
                    case .binary(let bytes): try? channel.send(binary: bytes)
                    }
                }
            case .close(let c, let code, let reason):
                let channel = state.withLock { $0.channels[c] }
                state.withLock { $0.recorded[c] }?.closed(code: code.map { Int($0) }, reason: reason, byClient: false)
                try? channel?.close(code: code.map { WebSocketCloseCode($0) }, reason: reason)
            case .armTimer(let timer, let deadline):
                state.withLock { $0.relayTimers[timer] = deadline }
                loop.withLock { $0 }?.schedule(.relayTimer(timer, deadline), at: start + .nanoseconds(deadline.nanoseconds))
            case .cancelTimer(let timer):
                state.withLock { _ = $0.relayTimers.removeValue(forKey: timer) }
            case .log(let line):
                log(line)
            case .linkCodeIssued(let offer):
                onLinkCode(offer)
            }
        }
    }
}
