public import WebSocket
import Glibc
import Synchronization

/// What a ``WebSocketServer`` does with an upgrade request.
public enum WebSocketUpgradeDecision: Hashable, Sendable {
    /// Answer `101 Switching Protocols` (with `headers` after the required ones) and run the handler.
    case accept(headers: HTTPHeaders = HTTPHeaders())
    /// Answer with `status` (e.g. 401 for a bad JWT, 429 with `Retry-After`), then close.
    case refuse(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: String = "")
}

/// A blocking WebSocket server: an accept thread, and one thread per connection that runs the TLS
/// handshake (when configured), reads and validates the upgrade request, asks `decide`, and on accept
/// hands the ``WebSocketChannel`` to `handler`. When the handler returns, an open channel is closed
/// (1000) and the transport dropped.
///
/// A malformed upgrade request is refused with the codec's status (400, 426). ``stop()`` ends accepting,
/// drops every connection's transport and joins every thread.
public final class WebSocketServer: Sendable {
    private struct Registry {
        var nextID = 0
        var threads: [Int: NetThread] = [:]
        var finished: Set<Int> = []
        var streams: [Int: any ByteStream] = [:]
        var stopped = false
    }

    /// The listening socket's address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The bound port.
    public var port: UInt16 { localAddress.port }

    private let listener: TCPListener
    private let tls: TLSServerContext?
    private let configuration: WebSocketConfiguration
    private let handshakeTimeout: Duration
    private let closeTimeout: Duration
    private let decide: @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision
    private let handler: @Sendable (WebSocketChannel, WebSocketUpgradeRequest) -> Void
    private let log: (@Sendable (String) -> Void)?
    private let registry = Mutex(Registry())
    private let acceptThread = Mutex<NetThread?>(nil)

    /// Binds `host:port` (0: an ephemeral port, see ``port``) and starts accepting.
    /// - Parameters:
    ///   - tls: the server identity for `wss`; nil serves plain `ws`.
    ///   - configuration: codec limits for every connection.
    ///   - handshakeTimeout: bound on the TLS handshake plus reading the upgrade request.
    ///   - closeTimeout: each channel's close-handshake timeout.
    ///   - log: called with one line per connection event (accepted, refused, failed handshake, ended).
    ///   - decide: accept or refuse each valid upgrade request (e.g. check `Authorization`).
    ///   - handler: runs on the connection's own thread with the open channel.
    /// - Throws: ``NetError`` when the address cannot be bound or the accept thread cannot start.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                configuration: WebSocketConfiguration = WebSocketConfiguration(),
                handshakeTimeout: Duration = .seconds(10), closeTimeout: Duration = .seconds(5),
                log: (@Sendable (String) -> Void)? = nil,
                decide: @escaping @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { _ in .accept() },
                handler: @escaping @Sendable (WebSocketChannel, WebSocketUpgradeRequest) -> Void) throws(NetError) {
        listener = try TCPListener(host: host, port: port)
        localAddress = listener.localAddress
        self.tls = tls
        self.configuration = configuration
        self.handshakeTimeout = handshakeTimeout
        self.closeTimeout = closeTimeout
        self.log = log
        self.decide = decide
        self.handler = handler
        let thread = try NetThread(name: "ws-accept") { [self] in acceptLoop() }
        acceptThread.withLock { $0 = thread }
    }

    /// Stops accepting, drops every open connection's transport (their handlers' `receive` returns
    /// close 1006), and waits for the accept thread and every connection thread. Idempotent.
    public func stop() {
        listener.close()
        let accept = acceptThread.withLock { thread -> NetThread? in
            defer { thread = nil }
            return thread
        }
        accept?.join()
        let (threads, streams) = registry.withLock { r in
            r.stopped = true
            defer { r.threads = [:]; r.streams = [:]; r.finished = [] }
            return (Array(r.threads.values), Array(r.streams.values))
        }
        for stream in streams { stream.close() }
        for thread in threads { thread.join() }
    }

    deinit {
        listener.close()
    }

    private func acceptLoop() {
        while true {
            let tcp: TCPStream
            do {
                tcp = try listener.accept(timeout: nil)
            } catch {
                if error.kind == .closed { return }
                log?("accept failed: \(error)")
                // EMFILE and the like: the listener stays readable; back off instead of spinning.
                _ = usleep(50_000)
                continue
            }
            reapFinished()
            let id = registry.withLock { r -> Int? in
                guard !r.stopped else { return nil }
                r.nextID += 1
                r.streams[r.nextID] = tcp
                return r.nextID
            }
            guard let id else {
                tcp.close()
                return
            }
            do {
                let thread = try NetThread(name: "ws-conn-\(id)") { [self] in
                    serve(tcp, id: id)
                    registry.withLock { r in
                        r.streams[id] = nil
                        r.finished.insert(id)
                    }
                }
                // stop() joins this accept thread before it collects connection threads, so none is missed.
                registry.withLock { r in r.threads[id] = thread }
            } catch {
                log?("\(tcp.remoteAddress): \(error)")
                registry.withLock { r in r.streams[id] = nil }
                tcp.close()
            }
        }
    }

    /// Joins connection threads that have finished (their join returns at once).
    private func reapFinished() {
        let done = registry.withLock { r -> [NetThread] in
            var out: [NetThread] = []
            for id in r.finished {
                if let thread = r.threads.removeValue(forKey: id) {
                    out.append(thread)
                    r.finished.remove(id)
                }
            }
            return out
        }
        for thread in done { thread.join() }
    }

    private func serve(_ tcp: TCPStream, id: Int) {
        let peer = tcp.remoteAddress
        let deadline = Deadline(handshakeTimeout)
        func left() -> Duration { deadline.instant.map { $0 - ContinuousClock.now } ?? handshakeTimeout }
        let stream: any ByteStream
        if let tls {
            do {
                let secure = try TLSStream.accept(over: tcp, context: tls, timeout: left())
                registry.withLock { r in r.streams[id] = secure }
                stream = secure
            } catch {
                log?("\(peer): \(error)")
                return
            }
        } else {
            stream = tcp
        }

        var handshake = WebSocketServerHandshake()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var request: WebSocketUpgradeRequest?
        var leftover: [UInt8] = []
        while request == nil {
            let count: Int
            do throws(NetError) {
                let remaining = left()
                let outcome = buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(NetError) in try stream.read(into: raw, timeout: remaining) }
                }
                count = try outcome.get()
            } catch {
                log?("\(peer): upgrade request not read: \(error)")
                stream.close()
                return
            }
            guard count > 0 else {
                log?("\(peer): closed before sending a complete upgrade request")
                stream.close()
                return
            }
            do throws(WebSocketHandshakeError) {
                if case .complete(let r, let consumed) = try handshake.receive(Array(buffer[0..<count])) {
                    request = r
                    leftover = Array(buffer[consumed..<count])
                }
            } catch {
                log?("\(peer): refused \(error.httpStatus ?? 400): \(error)")
                try? stream.write(error.refusalResponse(), timeout: left())
                stream.close()
                return
            }
        }
        guard let request else { return }

        let response: [UInt8]
        switch decide(request) {
        case .accept(let headers):
            do throws(WebSocketHandshakeError) {
                response = try WebSocketHandshake.acceptResponse(for: request, extraHeaders: headers)
            } catch {
                log?("\(peer): cannot accept (\(error)); refusing 500")
                try? stream.write(WebSocketHandshakeError(.invalidArgument, "server error", httpStatus: 500).refusalResponse(), timeout: left())
                stream.close()
                return
            }
        case .refuse(let status, let headers, let body):
            let bytes = (try? WebSocketHandshake.refusalResponse(status: status, headers: headers, body: body))
                ?? WebSocketHandshakeError(.invalidArgument, body, httpStatus: 500).refusalResponse()
            log?("\(peer): refused \(status) \(request.target)")
            try? stream.write(bytes, timeout: left())
            stream.close()
            return
        }
        do {
            try stream.write(response, timeout: left())
        } catch {
            log?("\(peer): \(error)")
            stream.close()
            return
        }
        log?("\(peer): accepted \(request.target)")
        let channel = WebSocketChannel(stream: stream, role: .server, configuration: configuration,
                                       initialBytes: leftover, closeTimeout: closeTimeout)
        handler(channel, request)
        if channel.state == .open { _ = try? channel.closeAndWait(code: .normalClosure) }
        // After a completed close handshake the echo may still wait for a writer's flush: let it out.
        if channel.state == .closed { channel.closeWhenWritten() } else { channel.abort() }
        log?("\(peer): ended")
    }
}
