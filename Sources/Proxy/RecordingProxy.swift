public import Net
public import WebSocket
public import WireRecording
import Glibc
import RelayProtocol
import Synchronization
import Trace

/// Where a ``RecordingProxy`` forwards to and how it talks to it.
public struct ProxyUpstream: Sendable, Hashable {
    /// The relay's URL (`ws://` or `wss://`): where every client is forwarded (host and port; the
    /// client's own request target is sent as it is, so a wrong path gets the relay's own 404). Its path is
    /// the one the proxy's printed URL shows.
    public var url: WebSocketURL
    /// How a `wss` upstream is verified (on by default, against the system store or a given CA file).
    public var tls: TLSClientConfiguration

    /// An upstream.
    public init(url: WebSocketURL, tls: TLSClientConfiguration = TLSClientConfiguration()) {
        self.url = url
        self.tls = tls
    }
}

/// Which of a client's upgrade headers a proxy forwards (RFC 9110 §7.6.1 hop-by-hop fields, RFC 6455).
public enum ProxyHeaders {
    /// Fields that belong to one connection, never forwarded: the standard hop-by-hop set, the fields the
    /// upstream handshake writes itself (`Host` is the upstream's, `Upgrade`, `Connection`, the client's
    /// `Sec-WebSocket-Key` and `-Version` are written again), and `Sec-WebSocket-Extensions` (the proxy
    /// offers no extension, so frames stay uncompressed and readable on both legs).
    public static let notForwarded: Set<String> = [
        "host", "connection", "upgrade", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "transfer-encoding", "content-length", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-extensions", "sec-websocket-accept",
    ]

    /// The headers to send upstream, in the client's order: every field except ``notForwarded`` and those
    /// the client's `Connection` header names as hop-by-hop.
    public static func forwarded(_ headers: HTTPHeaders) -> HTTPHeaders {
        let named = Set(headers.tokens(for: "Connection"))
        var out = HTTPHeaders()
        for f in headers.fields {
            let lower = f.name.lowercased()
            if notForwarded.contains(lower) || named.contains(lower) { continue }
            out.add(name: f.name, value: f.value)
        }
        return out
    }
}

/// A recording WebSocket proxy between unmodified clients and any relay (`relaytrace proxy`).
///
/// Each accepted client gets its own upstream connection. The proxy terminates TLS on the listening side
/// when it has a server identity, reads and validates the client's upgrade request, opens the upstream
/// (TCP, TLS verified as configured) and sends the client's upgrade with the client's own
/// `Sec-WebSocket-Key` and every end-to-end header (``ProxyHeaders``). The upstream's answer goes back
/// to the client byte for byte: a refusal (401, 429...) with its body, or the 101 head. From then on the
/// two streams are relayed **as bytes**, frame boundaries, masks, fragments, pings, pongs and close
/// frames untouched, so neither side can tell a proxy is there (the close handshake and ping answers are
/// the real peers'). A copy of each stream goes through a sans-IO ``WebSocketConnection`` parser that
/// only observes: whole messages, pings, pongs and the first close are recorded into the
/// ``WireRecorder`` before the bytes are written on, so the trace's order is the order the proxy saw.
///
/// A client whose upstream cannot be reached gets `502 Bad Gateway` with the reason; a connection that
/// one side ends without a close frame is ended on the other side the same way (the peer sees 1006, as it
/// would have). Memory per connection is two 64 KiB buffers plus the message being reassembled for the
/// recording (at most 32 MiB; past that the proxy stops recording that direction, says so in a marker,
/// and keeps forwarding: the relay's own limit answers). One thread per direction of each connection.
public final class RecordingProxy: Sendable {
    /// The listening address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The URL clients connect to: `ws://` or `wss://` this address, with the upstream's path.
    public let url: String

    private let listener: TCPListener
    private let core: ProxyCore
    private let acceptThread = Mutex<NetThread?>(nil)

    /// Listens on `host:port` and forwards every client to `upstream`.
    /// - Parameters:
    ///   - tls: the listening side's identity for `wss`; nil listens with plain `ws`.
    ///   - recorder: where the wire trace goes (nil: forward only).
    ///   - handshakeTimeout: bound on a client's TLS handshake and upgrade request, and on the upstream's
    ///     connect, TLS and upgrade answer.
    ///   - log: one line per connection event.
    /// - Throws: ``NetError`` when the address cannot be bound or the accept thread not started.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil, upstream: ProxyUpstream,
                recorder: WireRecorder?, handshakeTimeout: Duration = .seconds(10),
                log: @escaping @Sendable (String) -> Void = { _ in }) throws(NetError) {
        listener = try TCPListener(host: host, port: port)
        localAddress = listener.localAddress
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let path = upstream.url.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        url = "\(tls == nil ? "ws" : "wss")://\(shownHost):\(listener.port)\(path)"
        core = ProxyCore(tls: tls, upstream: upstream, recorder: recorder, handshakeTimeout: handshakeTimeout, log: log)
        let thread = try NetThread(name: "proxy-accept") { [listener, core] in core.acceptLoop(listener) }
        acceptThread.withLock { $0 = thread }
    }

    /// The listening port.
    public var port: UInt16 { localAddress.port }

    /// How many client connections were accepted so far.
    public var accepted: Int { core.accepted }

    /// Stops accepting, ends every connection (both legs dropped) and joins every thread. Idempotent.
    public func stop() {
        listener.close()
        acceptThread.withLock { t -> NetThread? in
            defer { t = nil }
            return t
        }?.join()
        core.stopAll()
    }

    deinit { listener.close() }
}

/// The proxy's connections and their threads.
final class ProxyCore: Sendable {
    private struct Registry {
        var next = 0
        var accepted = 0
        var threads: [Int: [NetThread]] = [:]
        var streams: [Int: [any ByteStream]] = [:]
        var finished: Set<Int> = []
        var stopped = false
    }

    let tls: TLSServerContext?
    let upstream: ProxyUpstream
    let recorder: WireRecorder?
    let handshakeTimeout: Duration
    let log: @Sendable (String) -> Void
    private let registry = Mutex(Registry())

    init(tls: TLSServerContext?, upstream: ProxyUpstream, recorder: WireRecorder?, handshakeTimeout: Duration,
         log: @escaping @Sendable (String) -> Void) {
        self.tls = tls
        self.upstream = upstream
        self.recorder = recorder
        self.handshakeTimeout = handshakeTimeout
        self.log = log
    }

    var accepted: Int { registry.withLock { $0.accepted } }

    func acceptLoop(_ listener: TCPListener) {
        while true {
            let tcp: TCPStream
            do {
                tcp = try listener.accept(timeout: nil)
            } catch {
                if error.kind == .closed { return }
                log("accept failed: \(error)")
                _ = usleep(50_000)  // EMFILE and the like: back off instead of spinning
                continue
            }
            reap()
            guard let id = registry.withLock({ r -> Int? in
                guard !r.stopped else { return nil }
                r.next += 1
                r.accepted += 1
                r.streams[r.next] = [tcp]
                return r.next
            }) else {
                tcp.close()
                return
            }
            do {
                let thread = try NetThread(name: "proxy-\(id)") { [self] in
                    serve(tcp, id: id)
                    registry.withLock { r in
                        r.streams[id] = nil
                        r.finished.insert(id)
                    }
                }
                registry.withLock { $0.threads[id, default: []].append(thread) }
            } catch {
                log("\(tcp.remoteAddress): \(error)")
                registry.withLock { _ = $0.streams.removeValue(forKey: id) }
                tcp.close()
            }
        }
    }

    func stopAll() {
        let (threads, streams) = registry.withLock { r in
            r.stopped = true
            defer { r.threads = [:]; r.streams = [:]; r.finished = [] }
            return (r.threads.values.flatMap { $0 }, r.streams.values.flatMap { $0 })
        }
        for s in streams { s.close() }
        for t in threads { t.join() }
    }

    /// Joins the threads of finished connections.
    private func reap() {
        let done = registry.withLock { r -> [NetThread] in
            var out: [NetThread] = []
            for id in r.finished { out += r.threads.removeValue(forKey: id) ?? [] }
            r.finished = []
            return out
        }
        for t in done { t.join() }
    }

    /// Registers a stream of connection `id` so ``stopAll()`` can drop it; false when stopping.
    private func track(_ stream: any ByteStream, id: Int) -> Bool {
        registry.withLock { r in
            guard !r.stopped else { return false }
            r.streams[id, default: []].append(stream)
            return true
        }
    }

    // MARK: One connection

    private func serve(_ tcp: TCPStream, id: Int) {
        let peer = tcp.remoteAddress.description
        let deadline = ContinuousClock.now + handshakeTimeout
        func left() -> Duration { max(.milliseconds(1), deadline - ContinuousClock.now) }

        let client: any ByteStream
        if let tls {
            do {
                let secure = try TLSStream.accept(over: tcp, context: tls, timeout: left())
                guard track(secure, id: id) else { secure.close(); return }
                client = secure
            } catch {
                log("\(peer): TLS handshake failed: \(error)")
                recorder?.connectionFailed("TLS handshake failed: \(error)", peer: peer)
                tcp.close()
                return
            }
        } else {
            client = tcp
        }

        // The client's upgrade request.
        var handshake = WebSocketServerHandshake()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var request: WebSocketUpgradeRequest?
        var early: [UInt8] = []
        while request == nil {
            let n: Int
            do { n = try read(client, into: &buffer, timeout: left()) } catch {
                log("\(peer): upgrade request not read: \(error)")
                recorder?.connectionFailed("upgrade request not read: \(error)", peer: peer)
                client.close()
                return
            }
            guard n > 0 else {
                log("\(peer): closed before sending a complete upgrade request")
                recorder?.connectionFailed("closed before sending a complete upgrade request", peer: peer)
                client.close()
                return
            }
            do throws(WebSocketHandshakeError) {
                if case .complete(let r, let consumed) = try handshake.receive(Array(buffer[0..<n])) {
                    request = r
                    early = Array(buffer[consumed..<n])
                }
            } catch {
                let status = error.httpStatus ?? 400
                log("\(peer): refused \(status): \(error)")
                recorder?.connectionFailed("malformed upgrade request: \(error.message)", peer: peer, status: status)
                try? write(client, error.refusalResponse(), timeout: left())
                client.close()
                return
            }
        }
        guard let request else { return }
        let socket = recorder?.openSocket(url: request.target, headers: request.headers.fields.map { ($0.name, $0.value) },
                                          peer: peer)
        let tag = socket.map { "g\($0.generation) " } ?? ""

        // The upstream connection and its answer.
        func badGateway(_ why: String) {
            log("\(tag)\(peer): upstream \(upstream.url) failed: \(why)")
            socket?.refused(status: 502, reason: "relaytrace proxy: upstream \(upstream.url): \(why)")
            if let bytes = try? WebSocketHandshake.refusalResponse(status: 502, body: "relaytrace proxy: the upstream \(upstream.url) failed: \(why)\n") {
                try? write(client, bytes, timeout: left())
            }
            client.close()
        }
        let target = request.target
        var upstreamHandshake: WebSocketClientHandshake
        do throws(WebSocketHandshakeError) {
            upstreamHandshake = try WebSocketClientHandshake(host: upstream.url.hostHeader, path: target, key: request.key,
                                                             extraHeaders: ProxyHeaders.forwarded(request.headers))
        } catch {
            badGateway(error.message)
            return
        }
        let relay: any ByteStream
        do throws(NetError) {
            let t = try TCP.connect(host: upstream.url.host, port: upstream.url.port, timeout: left())
            relay = upstream.url.isSecure ? try TLSStream.connect(over: t, host: upstream.url.host, configuration: upstream.tls, timeout: left()) : t
        } catch {
            badGateway("\(error)")
            return
        }
        guard track(relay, id: id) else { relay.close(); client.close(); return }
        do throws(NetError) {
            try write(relay, upstreamHandshake.requestBytes, timeout: left())
            if !early.isEmpty { try write(relay, early, timeout: left()) }
        } catch {
            relay.close()
            badGateway("\(error)")
            return
        }
        var head: [UInt8] = []
        var afterHead: [UInt8] = []
        var response: WebSocketUpgradeResponse?
        while response == nil {
            let n: Int
            do { n = try read(relay, into: &buffer, timeout: left()) } catch {
                relay.close()
                badGateway("no upgrade answer: \(error)")
                return
            }
            guard n > 0 else {
                relay.close()
                badGateway("closed the connection before answering the upgrade")
                return
            }
            let chunk = Array(buffer[0..<n])
            head += chunk
            do throws(WebSocketHandshakeError) {
                if case .complete(let r, let consumed) = try upstreamHandshake.receive(chunk) {
                    response = r
                    let headEnd = head.count - chunk.count + consumed
                    afterHead = Array(head[headEnd...])
                    head.removeSubrange(headEnd...)
                }
            } catch {
                if error.kind == .refused, let status = error.httpStatus {
                    // The relay's own refusal goes back as it is, body included.
                    let body = readRefusalBody(relay, received: head, buffer: &buffer, timeout: left())
                    log("\(tag)\(peer): upstream refused \(status)")
                    socket?.refused(status: status, reason: body.text.isEmpty ? error.message : body.text)
                    try? write(client, body.bytes, timeout: left())
                    relay.close()
                    client.close()
                } else {
                    relay.close()
                    badGateway(error.message)
                }
                return
            }
        }
        guard let response else { return }
        do throws(NetError) { try write(client, head, timeout: left()) } catch {
            log("\(tag)\(peer): the client went away before the upgrade answer: \(error)")
            socket?.failed("the client went away before the upgrade answer: \(error)")
            relay.close()
            client.close()
            return
        }
        socket?.opened(status: response.status, headers: response.headers.fields.map { ($0.name, $0.value) })
        log("\(tag)\(peer): \(request.target) -> \(upstream.url.hostHeader)\(target): upgraded")

        // Two pumps, bytes as they are; each observes its stream for the recording.
        let session = ProxiedSocket(socket: socket, recorder: recorder, client: client, relay: relay, tag: tag, peer: peer, log: log)
        let reverse: NetThread
        let fromRelay = afterHead
        do {
            reverse = try NetThread(name: "proxy-\(id)-in") { session.pump(from: relay, to: client, direction: .inbound, initial: fromRelay) }
        } catch {
            socket?.failed("could not start a thread: \(error)")
            relay.close()
            client.close()
            return
        }
        // This thread pumps the client's stream; it joins the other pump (stop() closes both streams, so
        // both end), and stop() joins this thread.
        session.pump(from: client, to: relay, direction: .outbound, initial: [])
        reverse.join()
    }

    /// The refusal's head and as much of its body as `Content-Length` announces (at most 64 KiB, within
    /// the timeout), as received, and the body as text.
    private func readRefusalBody(_ stream: any ByteStream, received: [UInt8], buffer: inout [UInt8], timeout: Duration) -> (bytes: [UInt8], text: String) {
        var all = received
        guard let end = headEnd(all) else { return (all, "") }
        let headText = String(decoding: all[..<end], as: UTF8.self).lowercased()
        var length = 0
        for line in headText.split(separator: "\r\n") where line.hasPrefix("content-length:") {
            length = Int(String(line.dropFirst("content-length:".count)).trimmedWhitespace) ?? 0
        }
        length = min(max(0, length), 65_536)
        let deadline = ContinuousClock.now + timeout
        while all.count - end < length, ContinuousClock.now < deadline {
            guard let n = try? read(stream, into: &buffer, timeout: max(.milliseconds(1), deadline - ContinuousClock.now)), n > 0 else { break }
            all += buffer[0..<n]
        }
        let body = all[end..<min(all.count, end + length)]
        return (Array(all[..<(end + body.count)]), String(decoding: body, as: UTF8.self).trimmedWhitespace)
    }

    private func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }
}

/// One proxied connection after the upgrade: both streams, the recording socket, and who ended first.
final class ProxiedSocket: Sendable {
    let socket: WireSocket?
    let recorder: WireRecorder?
    let client: any ByteStream
    let relay: any ByteStream
    let tag: String
    let peer: String
    let log: @Sendable (String) -> Void
    /// Set by the first pump that ends; the other then ends quietly.
    private let ended = Atomic<Bool>(false)

    init(socket: WireSocket?, recorder: WireRecorder?, client: any ByteStream, relay: any ByteStream, tag: String, peer: String,
         log: @escaping @Sendable (String) -> Void) {
        self.socket = socket
        self.recorder = recorder
        self.client = client
        self.relay = relay
        self.tag = tag
        self.peer = peer
        self.log = log
    }

    /// Copies `from` to `to` until `from` ends. `direction` is the client's view: `.outbound` for the
    /// client's stream (client to relay, masked frames), `.inbound` for the relay's.
    ///
    /// When `from` ends (end of stream or an error), both connections are closed: the other side sees its
    /// connection end as this one did. When writing to `to` fails, `to` is gone: the pump keeps reading
    /// and discarding `from` until the other pump, which reads `to`'s last bytes (a close frame, say) and
    /// forwards them, closes both. Closing `from` with unread bytes would reset it and could destroy what
    /// the other pump is still delivering to it.
    func pump(from: any ByteStream, to: any ByteStream, direction: FrameDirection, initial: [UInt8]) {
        let who = direction == .outbound ? "the client" : "the relay"
        let other = direction == .outbound ? "the relay" : "the client"
        // The observer parses as the receiving end would: the relay (server role) reads the client's
        // frames, the client (client role) reads the relay's. It answers nothing: its output is discarded.
        var observer = WebSocketConnection(role: direction == .outbound ? .server : .client,
                                           configuration: WebSocketConfiguration(automaticPong: false))
        var observing = socket != nil
        var sinkGone = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        func observe(_ bytes: UnsafeRawBufferPointer) {
            guard observing, let socket else { return }
            for event in observer.receive(bytes) {
                switch event {
                case .text(let t): socket.message(.text(t), direction)
                case .binary(let b): socket.message(.binary(b), direction)
                case .ping(let d): socket.ping(d, direction)
                case .pong(let d): socket.pong(d, direction)
                case .closed(let code, let reason):
                    socket.closed(code: code == .noStatusReceived ? nil : Int(code.rawValue), reason: reason,
                                  byClient: direction == .outbound)
                    observing = false
                case .protocolError(let e):
                    recorder?.marker("g\(socket.generation): the proxy stopped recording \(who)'s frames: \(e.message); the bytes are still forwarded")
                    observing = false
                }
            }
            _ = observer.takeOutbound()
        }
        func forward(_ bytes: UnsafeRawBufferPointer) {
            guard !sinkGone else { return }
            // Record first, then forward: the trace's order is the order the proxy saw.
            observe(bytes)
            let written = Result { () throws(NetError) in try to.write(bytes, timeout: nil) }
            if case .failure(let error) = written {
                sinkGone = true
                log("\(tag)\(peer): writing to \(other) failed: \(error)")
            }
        }
        initial.withUnsafeBytes { forward($0) }
        while true {
            let n: Int
            do { n = try read(from, into: &buffer, timeout: nil) } catch {
                end(error: "\(who)'s connection failed: \(error)", who: who)
                return
            }
            if n == 0 {
                end(error: nil, who: who)
                return
            }
            buffer.withUnsafeBytes { forward(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// `who`'s stream ended: both connections are closed, so the other side sees its connection end the
    /// same way (after a close handshake, the TCP close; without one, 1006). The first end is recorded
    /// when no close frame was; the second pump to end (its stream closed by the first) ends quietly.
    private func end(error: String?, who: String) {
        guard ended.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        if let socket, !socket.isFinished {
            if let error {
                socket.failed(error)
            } else {
                socket.closed(code: nil, reason: "\(who) ended the connection without a close frame", byClient: who == "the client",
                              clean: false)
            }
        }
        log("\(tag)\(peer): ended by \(who)\(error.map { ": \($0)" } ?? "")")
        client.close()
        relay.close()
    }
}

/// Reads into `buffer` (its whole capacity); 0 at end of stream.
func read(_ stream: any ByteStream, into buffer: inout [UInt8], timeout: Duration?) throws(NetError) -> Int {
    let outcome = buffer.withUnsafeMutableBytes { raw in
        Result { () throws(NetError) in try stream.read(into: raw, timeout: timeout) }
    }
    return try outcome.get()
}

/// Writes all of `bytes`.
func write(_ stream: any ByteStream, _ bytes: [UInt8], timeout: Duration?) throws(NetError) {
    try stream.write(bytes, timeout: timeout)
}

extension String {
    /// Without leading and trailing spaces, tabs, CR and LF.
    var trimmedWhitespace: String {
        let u = Array(utf8)
        func ws(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
        guard let first = u.firstIndex(where: { !ws($0) }), let last = u.lastIndex(where: { !ws($0) }) else { return "" }
        return String(decoding: u[first...last], as: UTF8.self)
    }
}
