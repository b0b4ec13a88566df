public import WebSocket
import CEpoll
import Dispatch
import Glibc
import Synchronization

/// A WebSocket server on event loops: one listening socket, and every connection served by one loop of
/// an ``EventLoopGroup`` (about one thread per core, never a thread per connection).
///
/// For each accepted socket, on its loop: the TLS handshake (when configured, non-blocking), the upgrade
/// request read and validated (a malformed one is refused with the codec's status: 400, 426), then
/// `upgrade` is called with the connection (its ``LoopWebSocket/request`` set), which answers with
/// ``LoopWebSocket/accept(headers:handler:)`` or ``LoopWebSocket/refuse(status:headers:body:)``, at once
/// or later from any thread. ``handshakeTimeout`` bounds TLS, the request and the decision (no decision in
/// time: 503). Accepted connections deliver their events to the handler given to `accept`.
///
/// ``stop()`` stops accepting, drops every connection (handlers get `.closed(1006, "the server stopped")`)
/// and stops the loops it made itself; a server that is not stopped keeps serving (call it).
public final class WebSocketServer: Sendable {
    /// The listening socket's address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The bound port.
    public var port: UInt16 { localAddress.port }
    /// The loops serving the connections.
    public let group: EventLoopGroup

    private let ownsGroup: Bool
    private let acceptor: Acceptor
    private let connections = LockedBox<[ObjectIdentifier: LoopWebSocket]>([:])
    private let stopped = Atomic<Bool>(false)

    /// Binds `host:port` (0: an ephemeral port, see ``port``) and starts accepting.
    /// - Parameters:
    ///   - tls: the server identity for `wss`; nil serves plain `ws`.
    ///   - configuration: codec limits and options of every connection (transparent for a proxy).
    ///   - limits: output buffering and backpressure of every connection.
    ///   - handshakeTimeout: bound on the TLS handshake, reading the upgrade request and the decision.
    ///   - closeTimeout: each connection's close-handshake timeout.
    ///   - group: the loops to serve on; nil starts ``EventLoopGroup/defaultThreadCount`` loops, stopped by
    ///     ``stop()``.
    ///   - log: called (on a loop) with one line per connection event: accepted, refused, failed
    ///     handshake, dropped, ended; and accept failures.
    ///   - upgrade: called on the connection's loop once its upgrade request is read: accept or refuse it.
    /// - Throws: ``NetError`` when the address cannot be bound or the loops cannot start.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                configuration: WebSocketConfiguration = WebSocketConfiguration(),
                limits: WebSocketBufferLimits = WebSocketBufferLimits(),
                handshakeTimeout: Duration = .seconds(10), closeTimeout: Duration = .seconds(5),
                group: EventLoopGroup? = nil, log: (@Sendable (String) -> Void)? = nil,
                upgrade: @escaping @Sendable (LoopWebSocket) -> Void) throws(NetError) {
        let listener = try TCPListener(host: host, port: port, backlog: 1024)
        localAddress = listener.localAddress
        if let group {
            self.group = group
            ownsGroup = false
        } else {
            self.group = try EventLoopGroup(name: "relaytrace.ws")
            ownsGroup = true
        }
        acceptor = Acceptor(listener: listener, loop: self.group.loops[0], log: log)
        let settings = Acceptor.Settings(tls: tls, configuration: configuration, limits: limits,
                                         handshakeTimeout: handshakeTimeout, closeTimeout: closeTimeout)
        let registry = connections
        let group = self.group
        acceptor.onAccept = { fd in
            let loop = group.next()
            let connection = LoopWebSocket.server(
                loop: loop, configuration: settings.configuration, limits: settings.limits, closeTimeout: settings.closeTimeout,
                log: log, onFinished: { c in registry.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(c)) } })
            registry.withLock { $0[ObjectIdentifier(connection)] = connection }
            let start: @Sendable () -> Void = {
                connection.startServer(fd: fd, tls: settings.tls, handshakeTimeout: settings.handshakeTimeout, upgrade: upgrade)
            }
            if loop.inLoop { start() } else { loop.execute(start) }
        }
        let acceptor = self.acceptor
        let started = DispatchSemaphore(value: 0)
        let failure = LockedBox<NetError?>(nil)
        acceptor.loop.execute {
            do throws(NetError) { try acceptor.start() } catch { failure.withLock { $0 = error } }
            started.signal()
        }
        started.wait()
        if let error = failure.withLock({ $0 }) {
            if ownsGroup { self.group.stop() }
            throw error
        }
    }

    /// A server that decides every upgrade with `decide` (synchronously, on the connection's loop) and
    /// gives accepted connections' events to `handler`.
    public convenience init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                            configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            limits: WebSocketBufferLimits = WebSocketBufferLimits(),
                            handshakeTimeout: Duration = .seconds(10), closeTimeout: Duration = .seconds(5),
                            group: EventLoopGroup? = nil, log: (@Sendable (String) -> Void)? = nil,
                            decide: @escaping @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { _ in .accept() },
                            handler: @escaping LoopWebSocketHandler) throws(NetError) {
        try self.init(host: host, port: port, tls: tls, configuration: configuration, limits: limits,
                      handshakeTimeout: handshakeTimeout, closeTimeout: closeTimeout, group: group, log: log) { connection in
            guard let request = connection.request else { return }
            switch decide(request) {
            case .accept(let headers): connection.accept(headers: headers, handler: handler)
            case .refuse(let status, let headers, let body): connection.refuse(status: status, headers: headers, body: body)
            }
        }
    }

    /// How many connections are open or being set up.
    public var connectionCount: Int { connections.withLock { $0.count } }

    /// Stops accepting, drops every connection (handlers get `.closed(1006)`), and stops the loops when the
    /// server made them. Waits for all of it; never call it from one of the server's loops. Idempotent.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        precondition(!group.loops.contains { $0.inLoop }, "WebSocketServer.stop() must not run on one of its event loops")
        let done = DispatchSemaphore(value: 0)
        let acceptor = self.acceptor
        acceptor.loop.execute {
            acceptor.stop()
            done.signal()
        }
        done.wait()
        let registry = connections
        for loop in group.loops {
            loop.execute {
                let mine = registry.withLock { all in all.values.filter { $0.loop === loop } }
                for connection in mine { connection.serverStopping() }
                done.signal()
            }
        }
        for _ in group.loops { done.wait() }
        if ownsGroup { group.stop() }
    }
}

/// A value behind a mutex, in a class so closures can share it.
final class LockedBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout sending Value) -> sending R) -> R { mutex.withLock(body) }
}

/// The listening socket on one loop: accepts until `EAGAIN` and hands each socket on; on `EMFILE` and the
/// like it logs and pauses accepting for 100 ms instead of spinning.
private final class Acceptor: LoopReadiness, @unchecked Sendable {
    // Thread-safety: `@unchecked` because `registration`, `paused` and `onAccept` are touched only on
    // `loop` (start, stop and readiness run there; `onAccept` is set before `start` is posted).
    struct Settings: Sendable {
        var tls: TLSServerContext?
        var configuration: WebSocketConfiguration
        var limits: WebSocketBufferLimits
        var handshakeTimeout: Duration
        var closeTimeout: Duration
    }

    let listener: TCPListener
    let loop: EventLoop
    let log: (@Sendable (String) -> Void)?
    var onAccept: (@Sendable (Int32) -> Void)?
    private var registration: UInt64?
    private var stopped = false

    init(listener: TCPListener, loop: EventLoop, log: (@Sendable (String) -> Void)?) {
        self.listener = listener
        self.loop = loop
        self.log = log
    }

    func start() throws(NetError) {
        registration = try loop.register(listener.descriptor, interest: EPOLLIN.rawValue, self)
    }

    func stop() {
        stopped = true
        if let registration { loop.deregister(registration) }
        registration = nil
        listener.close()
    }

    func ready(_ events: UInt32) {
        for _ in 0..<256 {
            switch listener.acceptNow() {
            case .accepted(let fd):
                onAccept?(fd)
            case .wouldBlock:
                return
            case .failed(let error):
                log?("accept failed: \(error); accepting again in 100 ms")
                guard let registration else { return }
                loop.setInterest(registration, 0)
                _ = loop.scheduleOnLoop(at: .now.advanced(by: .milliseconds(100))) { [self] in
                    if !stopped, let r = self.registration { loop.setInterest(r, EPOLLIN.rawValue) }
                }
                return
            }
        }
    }

    func loopStopping() {
        registration = nil
        listener.close()
    }
}
