public import Net
import RelayProtocol
import Synchronization
import WebSocket
public import WireRecording
public import WireReplay

/// A recorded session's relay side served on a real socket (`relaytrace relay --replay`): the sans-IO
/// ``ReplayingRelay`` runs on one serial loop; each connection's thread posts what it reads there, and an
/// upgrade waits for the machine's answer. With a `recorder`, the replayed session is recorded as a new
/// wire trace (the same records `relay --record` writes), so `relaytrace diff` can compare the two.
public final class ReplayHost: Sendable {
    /// The URL clients connect to, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    /// The bound port.
    public let port: UInt16
    private let core: ReplayHostCore
    private let server: WebSocketServer

    /// Listens on `host:port` (0: any free port) with `tls` (nil: plain ws) and serves `session`.
    /// `onFinding` and `onFinished` are called on the loop (keep them short); `log` gets one line per
    /// connection event and per finding.
    public init(session: RecordedSession, options: ReplayingRelayOptions = ReplayingRelayOptions(), host: String = "127.0.0.1",
                port: UInt16 = 0, tls: TLSServerContext? = nil, recorder: WireRecorder? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in },
                onFinished: @escaping @Sendable () -> Void = {}) throws(NetError) {
        let core = ReplayHostCore(machine: ReplayingRelay(session: session, options: options), recorder: recorder, log: log, onFinished: onFinished)
        try core.startLoop()
        self.core = core
        server = try WebSocketServer(
            host: host, port: port, tls: tls, log: { log($0) },
            decide: { request in core.decide(request) },
            handler: { channel, request in core.serve(channel, request) })
        self.port = server.port
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let path = session.sockets.first.map { $0.target.hasPrefix("/") ? $0.target : ReplayingRelay.pathOfURL($0.target) } ?? "/ws/device-link"
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(server.port)\(path.split(separator: "?").first.map(String.init) ?? path)"
    }

    /// Everything found so far, and the counts.
    public var result: ReplayHostResult { core.result }

    /// Stops: what the recording still expected is reported (``ReplayFinding/Kind/missing``,
    /// `unopened`), every connection is closed, the loop ends.
    public func stop() {
        core.stopMachine()
        server.stop()
        core.stopLoop()
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
    enum Event: Sendable {
        case input(ReplayingRelayInput)
    }

    final class Decision: Sendable {
        let value = Mutex<WebSocketUpgradeDecision?>(nil)
        let ready = DispatchSemaphoreBox()
    }

    struct State {
        var machine: ReplayingRelay
        var channels: [ReplayConnection: WebSocketChannel] = [:]
        var decisions: [ReplayConnection: Decision] = [:]
        var byKey: [String: ReplayConnection] = [:]
        var recorded: [ReplayConnection: WireSocket] = [:]
        var last: UInt64 = 0
        var stopped = false
    }

    private let start = ContinuousClock.now
    private let state: Mutex<State>
    private let loop = Mutex<SerialLoop<Event>?>(nil)
    private let recorder: WireRecorder?
    private let log: @Sendable (String) -> Void
    private let onFinished: @Sendable () -> Void

    init(machine: ReplayingRelay, recorder: WireRecorder?, log: @escaping @Sendable (String) -> Void, onFinished: @escaping @Sendable () -> Void) {
        state = Mutex(State(machine: machine))
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

    func startLoop() throws(NetError) {
        let l = try SerialLoop<Event>(name: "relaytrace.replay") { [self] e in
            if case .input(let input) = e { perform(state.withLock { $0.machine.handle(input, at: now) }) }
        }
        loop.withLock { $0 = l }
    }

    /// The machine reports what is still missing (on the caller's thread, before the sockets close).
    func stopMachine() {
        let actions = state.withLock { s -> [ReplayingRelayAction] in
            guard !s.stopped else { return [] }
            s.stopped = true
            return s.machine.handle(.stop, at: now)
        }
        for a in actions { if case .finding(let f) = a { log("finding: \(f)") } }
    }

    func stopLoop() {
        let l = loop.withLock { l -> SerialLoop<Event>? in
            defer { l = nil }
            return l
        }
        l?.stop()
        let pending = state.withLock { s -> [Decision] in
            defer { s.decisions.removeAll() }
            return Array(s.decisions.values)
        }
        for d in pending {
            d.value.withLock { $0 = .refuse(status: 503) }
            d.ready.signal()
        }
    }

    private func post(_ input: ReplayingRelayInput) { loop.withLock { $0 }?.post(.input(input)) }

    func decide(_ request: WebSocketUpgradeRequest) -> WebSocketUpgradeDecision {
        let d = Decision()
        let id = state.withLock { s -> ReplayConnection? in
            guard !s.stopped, s.byKey[request.key] == nil else { return nil }
            s.last += 1
            let c = ReplayConnection(s.last)
            s.decisions[c] = d
            s.byKey[request.key] = c
            if let recorder {
                s.recorded[c] = recorder.openSocket(url: request.target, headers: request.headers.fields.map { ($0.name, $0.value) })
            }
            return c
        }
        guard let id, loop.withLock({ $0 }) != nil else { return .refuse(status: 503) }
        post(.upgrade(id, target: request.target, headers: request.headers.fields.map { .init($0.name, $0.value) }))
        d.ready.wait()
        return d.value.withLock { $0 } ?? .refuse(status: 503)
    }

    func serve(_ channel: WebSocketChannel, _ request: WebSocketUpgradeRequest) {
        guard let (id, socket) = state.withLock({ s -> (ReplayConnection, WireSocket?)? in
            guard let id = s.byKey.removeValue(forKey: request.key) else { return nil }
            s.channels[id] = channel
            return (id, s.recorded[id])
        }) else { return }
        while true {
            let event: WebSocketEvent
            do { event = try channel.receive() } catch {
                socket?.failed("connection lost: \(error)")
                post(.closed(id, code: nil, reason: "\(error)"))
                break
            }
            switch event {
            case .text(let t):
                socket?.sent(.text(t))
                post(.frame(id, .text(t)))
            case .binary(let b):
                socket?.sent(.binary(b))
                post(.frame(id, .binary(b)))
            case .ping(let data):
                socket?.ping(data, .outbound)
                socket?.pong(data, .inbound)
            case .pong(let data):
                socket?.pong(data, .outbound)
            case .closed(let code, let reason):
                let onWire = code == .noStatusReceived || code == .abnormalClosure ? nil : Int(code.rawValue)
                socket?.closed(code: onWire, reason: reason, byClient: true, clean: code != .abnormalClosure)
                post(.closed(id, code: onWire, reason: reason))
            case .protocolError(let e):
                socket?.closed(code: Int(e.closeCode.rawValue), reason: "failed by the relay: \(e.message)", byClient: false)
                post(.closed(id, code: Int(e.closeCode.rawValue), reason: e.message))
            }
            if case .closed = event { break }
            if case .protocolError = event { break }
        }
        state.withLock { s in
            s.channels.removeValue(forKey: id)
            s.recorded.removeValue(forKey: id)
        }
    }

    private func perform(_ actions: [ReplayingRelayAction]) {
        for a in actions {
            switch a {
            case .accept(let c), .refuse(let c, _, _):
                let (decision, socket) = state.withLock { s in (s.decisions.removeValue(forKey: c), s.recorded[c]) }
                if case .refuse(_, let status, let body) = a {
                    socket?.refused(status: status, reason: body)
                    log("\(c): refused \(status): \(body)")
                    decision?.value.withLock { $0 = .refuse(status: status, body: body) }
                } else {
                    socket?.opened(status: 101)
                    log("\(c): upgraded")
                    decision?.value.withLock { $0 = .accept() }
                }
                decision?.ready.signal()
            case .send(let c, let frame):
                let (channel, socket) = state.withLock { s in (s.channels[c], s.recorded[c]) }
                socket?.received(frame)
                switch frame {
                case .text(let t): try? channel?.send(text: t)
                case .binary(let b): try? channel?.send(binary: b)
                }
            case .close(let c, let code, let reason):
                let (channel, socket) = state.withLock { s in (s.channels[c], s.recorded[c]) }
                socket?.closed(code: code, reason: reason, byClient: false)
                log("\(c): closing \(code.map(String.init) ?? "(empty)") \(reason)")
                try? channel?.close(code: code.map { WebSocketCloseCode(UInt16(clamping: $0)) }, reason: reason)
            case .abort(let c):
                let (channel, socket) = state.withLock { s in (s.channels[c], s.recorded[c]) }
                socket?.closed(code: nil, reason: "the recorded socket ended without a close frame here", byClient: false, clean: false)
                channel?.abort()
            case .wake(let at):
                loop.withLock { $0 }?.schedule(.input(.wake), at: start + .nanoseconds(at.nanoseconds))
            case .finding(let f):
                log("finding: \(f)")
            case .finished:
                onFinished()
            }
        }
    }
}
