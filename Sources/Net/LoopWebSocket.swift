public import WebSocket
import CEpoll
import COpenSSL
import Glibc
import Synchronization

/// How much a ``LoopWebSocket`` buffers before it pushes back, and the most it ever holds.
///
/// Reading: a connection reads 64 KiB at a time and its codec holds at most one message in assembly
/// (``WebSocketConfiguration/maxMessageSize``, 32 MiB by default). Writing: while more than
/// ``pauseReadingAbove`` bytes wait to be written (the peer is not draining), the connection stops reading
/// that peer (so a peer that sends requests without reading the answers is slowed down by TCP, not
/// buffered without end); it reads again below ``resumeReadingBelow`` and then calls
/// ``LoopWebSocket/onWritable``. A send that would leave more than ``maxBufferedOutput`` bytes waiting
/// drops the connection (its handler gets `.closed(1006)` saying why, the send throws): memory per
/// connection stays bounded even for a peer that never reads.
public struct WebSocketBufferLimits: Hashable, Sendable {
    /// Stop reading while more than this many bytes wait to be written (default 1 MiB).
    public var pauseReadingAbove: Int
    /// Read again once at most this many bytes wait (default 256 KiB).
    public var resumeReadingBelow: Int
    /// The most bytes that may wait to be written; over it the connection is dropped (default 64 MiB:
    /// two messages of the 32 MiB limit).
    public var maxBufferedOutput: Int

    /// Limits; `resumeReadingBelow` is kept at most `pauseReadingAbove`, which is kept at most
    /// `maxBufferedOutput`.
    public init(pauseReadingAbove: Int = 1 << 20, resumeReadingBelow: Int = 256 << 10,
                maxBufferedOutput: Int = 2 * WebSocketConfiguration.defaultMaxMessageSize) {
        self.maxBufferedOutput = max(1, maxBufferedOutput)
        self.pauseReadingAbove = min(max(1, pauseReadingAbove), self.maxBufferedOutput)
        self.resumeReadingBelow = min(max(0, resumeReadingBelow), self.pauseReadingAbove)
    }
}

/// What a server does with an upgrade request it has read and validated: ``LoopWebSocket/accept(headers:handler:)``
/// or ``LoopWebSocket/refuse(status:headers:body:)``.
public enum WebSocketUpgradeDecision: Hashable, Sendable {
    /// Answer `101 Switching Protocols` (with `headers` after the required ones).
    case accept(headers: HTTPHeaders = HTTPHeaders())
    /// Answer with `status` (e.g. 401 for a bad JWT, 429 with `Retry-After`), then close.
    case refuse(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: String = "")
}

/// The events of a ``LoopWebSocket``, called on its loop, one at a time, in order: messages (whole),
/// pings, pongs, `.closeReceived` (transparent mode), and last exactly one `.closed` or `.protocolError`.
public typealias LoopWebSocketHandler = @Sendable (LoopWebSocket, WebSocketEvent) -> Void

/// A WebSocket connection on an ``EventLoop`` (server side from ``WebSocketServer``, client side from
/// ``connect(url:headers:tls:on:timeout:configuration:closeTimeout:limits:maskingKeys:onUpgrade:handler:)``):
/// a non-blocking socket (TCP or TLS), the sans-IO ``WebSocketConnection`` codec, an output buffer with
/// backpressure (``WebSocketBufferLimits``), and the close handshake's timeout on loop timers.
///
/// Threading: the connection lives on ``loop``. Its handler runs there; ``send(text:)``, ``close(code:reason:)``
/// and the other operations must be called there too (from the handler, or hop with
/// `connection.loop.execute { ... }`); ``accept(headers:handler:)`` and ``refuse(status:headers:body:)``
/// may be called from any thread. Nothing on the per-frame path takes a lock.
///
/// Closing: after this end's close frame the peer has ``closeTimeout`` to answer, else the transport is
/// dropped and the handler gets `.closed(1006)`. After the handshake a server shuts its sending side and
/// waits (at most ``closeTimeout``) for the client to close TCP; a client waits for the server to do so
/// (RFC 6455 §7.1.1). In transparent mode (``WebSocketConfiguration/transparent(maxMessageSize:)``) the
/// peer's close frame arrives as `.closeReceived` and waits for ``close(code:reason:)`` for at most twice
/// ``closeTimeout``; pings and pongs are events, never answered here.
public final class LoopWebSocket: @unchecked Sendable {
    // Thread-safety: `@unchecked` because every `var` is touched only on `loop`'s thread: the public
    // operations check it (`preconditionInLoop`), `accept`/`refuse` and the start hop to it, and every
    // callback (readiness, timers) runs on it. The `let`s are immutable; `address` is behind a Mutex.

    /// The loop this connection lives on.
    public let loop: EventLoop
    /// This end's role.
    public let role: WebSocketRole
    /// Codec limits and options (transparent or not).
    public let configuration: WebSocketConfiguration
    /// Buffering limits.
    public let limits: WebSocketBufferLimits
    /// How long this end waits for the peer's half of the close handshake.
    public let closeTimeout: Duration

    private let address = Mutex<SocketAddress?>(nil)
    private let log: (@Sendable (String) -> Void)?
    /// Called once the socket is closed (the server forgets the connection).
    private let onFinished: (@Sendable (LoopWebSocket) -> Void)?

    private enum Phase {
        /// Client: connecting to the addresses, this one now.
        case connecting
        /// The TLS handshake.
        case tlsHandshake
        /// Server: reading the upgrade request.
        case readingRequest
        /// Server: waiting for accept or refuse.
        case deciding
        /// Server: writing a refusal, then closing.
        case refusing
        /// Client: the upgrade request is sent; reading the response.
        case readingResponse
        /// Messages flow.
        case open
        /// The last event was delivered; writing what is left (the close frame), then waiting for the
        /// peer to close TCP, at most `closeTimeout`.
        case lingering
        /// The socket is closed.
        case closed
    }

    private var phase: Phase
    private var transport: (any LoopTransport)?
    private var registration: UInt64?
    private var codec: WebSocketConnection
    private var output = OutputBuffer()
    private var handler: LoopWebSocketHandler?
    private var pendingEvents: [WebSocketEvent] = []
    private var delivering = false
    private var terminalQueued = false
    /// How a connection that ended before it was accepted ended (given to a later `accept`'s handler).
    private var endedBeforeAccept: WebSocketEvent?
    private var pausedByUser = false
    private var pausedByBackpressure = false
    private var readWantsWrite = false
    private var writeWantsRead = false
    private var handshakeWantsWrite = false
    private var flushScheduled = false
    private var shutDownSending = false
    /// Lingering after a protocol error: nothing more is read (RFC 6455 §7.1.7); the socket closes once
    /// the close frame is written.
    private var failing = false
    private var closeTimer: UInt64?
    private var setupTimer: UInt64?
    /// Bytes received after the upgrade head, for the codec once open.
    private var pendingInput: [UInt8] = []
    private var serverHandshake: WebSocketServerHandshake?
    private var clientHandshake: WebSocketClientHandshake?
    private var client: ClientSetup?
    private var upgradeCallback: ((LoopWebSocket) -> Void)?

    /// Server side: the upgrade request, once read.
    public private(set) var request: WebSocketUpgradeRequest?
    /// Client side: the server's `101` response (status and headers), once the upgrade succeeded.
    public private(set) var response: WebSocketUpgradeResponse?
    /// Called on the loop when reading resumes after backpressure (the output fell below
    /// ``WebSocketBufferLimits/resumeReadingBelow``): a proxy resumes the other side here. Set on the loop.
    public var onWritable: ((LoopWebSocket) -> Void)?

    /// The client's connect plan.
    private struct ClientSetup {
        var url: WebSocketURL
        var addresses: [ResolvedAddress]
        var next: Int
        var lastError: NetError?
        var tls: TLSClientConfiguration
        var onUpgrade: @Sendable (LoopWebSocket, Result<WebSocketUpgradeResponse, WebSocketError>) -> Void
    }

    private init(loop: EventLoop, role: WebSocketRole, configuration: WebSocketConfiguration, limits: WebSocketBufferLimits,
                 closeTimeout: Duration, maskingKeys: (any MaskingKeySource)?, log: (@Sendable (String) -> Void)?,
                 onFinished: (@Sendable (LoopWebSocket) -> Void)?, phase: Phase) {
        self.loop = loop
        self.role = role
        self.configuration = configuration
        self.limits = limits
        self.closeTimeout = closeTimeout
        self.log = log
        self.onFinished = onFinished
        self.phase = phase
        self.codec = WebSocketConnection(role: role, configuration: configuration, maskingKeys: maskingKeys)
    }

    /// The peer's address (nil until a client connection has connected).
    public var remoteAddress: SocketAddress? { address.withLock { $0 } }

    private var peer: String { remoteAddress?.description ?? client?.url.description ?? "?" }

    /// Where the codec is (open, closing, closeReceived, closed). On the loop.
    public var state: WebSocketConnection.State {
        loop.preconditionInLoop("LoopWebSocket.state")
        return codec.state
    }

    /// Bytes waiting to be written. On the loop.
    public var bufferedOutputBytes: Int {
        loop.preconditionInLoop("LoopWebSocket.bufferedOutputBytes")
        return output.count
    }

    /// Whether reading is paused (by ``pauseReading()`` or by backpressure). On the loop.
    public var isReadingPaused: Bool {
        loop.preconditionInLoop("LoopWebSocket.isReadingPaused")
        return pausedByUser || pausedByBackpressure
    }

    // MARK: Server side

    /// An accepted socket of `server`, started on `loop` (call ``startServer(fd:tls:handshakeTimeout:upgrade:)`` there).
    static func server(loop: EventLoop, configuration: WebSocketConfiguration, limits: WebSocketBufferLimits,
                       closeTimeout: Duration, log: (@Sendable (String) -> Void)?,
                       onFinished: @escaping @Sendable (LoopWebSocket) -> Void) -> LoopWebSocket {
        LoopWebSocket(loop: loop, role: .server, configuration: configuration, limits: limits, closeTimeout: closeTimeout,
                      maskingKeys: nil, log: log, onFinished: onFinished, phase: .readingRequest)
    }

    /// On the loop: takes `fd`, runs TLS (when `tls`), reads the upgrade request and calls `upgrade`.
    func startServer(fd: Int32, tls: TLSServerContext?, handshakeTimeout: Duration, upgrade: @escaping (LoopWebSocket) -> Void) {
        loop.preconditionInLoop()
        let remote = SocketAddress.of(fd, peer: true)
        address.withLock { $0 = remote }
        upgradeCallback = upgrade
        serverHandshake = WebSocketServerHandshake()
        if let tls {
            guard let ssl = tls.newSSL() else {
                closeDescriptor(fd)
                return finishedBeforeOpen("\(remote): TLS: SSL_new failed: \(openSSLErrors())")
            }
            guard SSL_set_fd(ssl, fd) == 1 else {
                SSL_free(ssl)
                closeDescriptor(fd)
                return finishedBeforeOpen("\(remote): TLS: SSL_set_fd failed: \(openSSLErrors())")
            }
            SSL_set_accept_state(ssl)
            transport = TLSLoopTransport(fd: fd, ssl: ssl, operation: "TLS handshake with client \(remote)")
            phase = .tlsHandshake
        } else {
            transport = TCPLoopTransport(fd: fd, peer: remote.description)
            phase = .readingRequest
        }
        do {
            registration = try loop.register(fd, interest: EPOLLIN.rawValue, self)
        } catch {
            transport?.close()
            transport = nil
            return finishedBeforeOpen("\(remote): \(error)")
        }
        setupTimer = loop.scheduleOnLoop(at: .now.advanced(by: handshakeTimeout)) { [self] in
            setupTimer = nil
            setupTimedOut(handshakeTimeout)
        }
        if phase == .tlsHandshake { driveTLSHandshake() }
    }

    /// Answers the upgrade request with `101 Switching Protocols` (plus `headers`) and starts delivering
    /// events to `handler`. From any thread; once per connection (a second decision is ignored). When the
    /// connection ended while the decision was pending, `handler` gets its `.closed` event at once.
    public func accept(headers: HTTPHeaders = HTTPHeaders(), handler: @escaping LoopWebSocketHandler) {
        onLoop { [self] in acceptOnLoop(headers, handler) }
    }

    /// Refuses the upgrade request with `status` (`headers` and a plain-text `body`), then closes. From any
    /// thread; once per connection.
    public func refuse(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: String = "") {
        onLoop { [self] in refuseOnLoop(status, headers, body) }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.inLoop { body() } else { loop.execute(body) }
    }

    private func acceptOnLoop(_ headers: HTTPHeaders, _ handler: @escaping LoopWebSocketHandler) {
        guard case .deciding = phase, let request else {
            if let ended = endedBeforeAccept {
                endedBeforeAccept = nil
                self.handler = handler
                emit([ended])
            }
            return
        }
        let bytes: [UInt8]
        do throws(WebSocketHandshakeError) {
            bytes = try WebSocketHandshake.acceptResponse(for: request, extraHeaders: headers)
        } catch {
            log?("\(peer): cannot accept (\(error)); refusing 500")
            return refuseOnLoop(500, HTTPHeaders(), "server error: \(error.message)")
        }
        log?("\(peer): accepted \(request.target)")
        cancelSetupTimer()
        self.handler = handler
        phase = .open
        queueOutput(bytes)
        let leftover = pendingInput
        pendingInput = []
        if !leftover.isEmpty { consume(leftover) }
        updateInterest()
    }

    private func refuseOnLoop(_ status: Int, _ headers: HTTPHeaders, _ body: String) {
        guard case .deciding = phase else {
            // Ended while the decision was pending: nothing to answer.
            endedBeforeAccept = nil
            return
        }
        let bytes = (try? WebSocketHandshake.refusalResponse(status: status, headers: headers, body: body))
            ?? WebSocketHandshakeError(.invalidArgument, body, httpStatus: 500).refusalResponse()
        log?("\(peer): refused \(status) \(request?.target ?? "")")
        sendRefusal(bytes)
    }

    private func sendRefusal(_ bytes: [UInt8]) {
        cancelSetupTimer()
        phase = .refusing
        queueOutput(bytes)
        // The refusal goes out, then the socket lingers as after a close (bounded by closeTimeout).
        armCloseTimer(closeTimeout) { [self] in dropTransport() }
        updateInterest()
    }

    // MARK: Client side

    /// Opens a client connection on `loop`: resolves the host (names on a helper thread, so the loop never
    /// blocks), connects without blocking (each address in turn), runs TLS for `wss` with verification as
    /// `tls` says (``TLSClientConfiguration``: on by default), sends the upgrade request with `headers`,
    /// and validates the response. Then `onUpgrade` runs on the loop with the `101` response (its status
    /// and headers are also ``response``) or the failure (a refusal is ``WebSocketError/handshake(_:)``
    /// of kind `.refused` with the status and headers), and on success `handler` gets every event.
    ///
    /// - Parameters:
    ///   - timeout: bound on connect, TLS and the upgrade together (a loop timer).
    ///   - configuration: codec limits; ``WebSocketConfiguration/transparent(maxMessageSize:)`` for a proxy.
    /// - Returns: the connection (not open yet).
    /// - Throws: ``WebSocketError/invalidURL(_:)`` or a `.handshake` error for headers that cannot be
    ///   sent, before anything is started.
    @discardableResult
    public static func connect(url: String, headers: HTTPHeaders = HTTPHeaders(),
                               tls: TLSClientConfiguration = TLSClientConfiguration(),
                               on loop: EventLoop, timeout: Duration = .seconds(10),
                               configuration: WebSocketConfiguration = WebSocketConfiguration(),
                               closeTimeout: Duration = .seconds(5), limits: WebSocketBufferLimits = WebSocketBufferLimits(),
                               maskingKeys: (any MaskingKeySource)? = nil,
                               onUpgrade: @escaping @Sendable (LoopWebSocket, Result<WebSocketUpgradeResponse, WebSocketError>) -> Void,
                               handler: @escaping LoopWebSocketHandler) throws(WebSocketError) -> LoopWebSocket {
        let parsed = try WebSocketURL(url)
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let handshake: WebSocketClientHandshake
        do throws(WebSocketHandshakeError) {
            handshake = try WebSocketClientHandshake(host: parsed.hostHeader, path: parsed.target, nonce: nonce, extraHeaders: headers)
        } catch {
            throw .handshake(error)
        }
        let connection = LoopWebSocket(loop: loop, role: .client, configuration: configuration, limits: limits,
                                       closeTimeout: closeTimeout, maskingKeys: maskingKeys, log: nil, onFinished: nil,
                                       phase: .connecting)
        let setup = ClientSetup(url: parsed, addresses: [], next: 0, lastError: nil, tls: tls, onUpgrade: onUpgrade)
        let operation = "connect to \(parsed.host.contains(":") ? "[\(parsed.host)]" : parsed.host):\(parsed.port)"
        let resolved: @Sendable (Result<[ResolvedAddress], NetError>) -> Void = { result in
            loop.execute { connection.startClient(setup, handshake, handler, timeout, result) }
        }
        if isNumericAddress(parsed.host) {
            resolved(Result { () throws(NetError) in
                try ResolvedAddress.resolve(host: parsed.host, port: parsed.port, passive: false, operation: operation)
            })
        } else {
            do {
                try NetThread.detached(name: "relaytrace.resolve") {
                    resolved(Result { () throws(NetError) in
                        try ResolvedAddress.resolve(host: parsed.host, port: parsed.port, passive: false, operation: operation)
                    })
                }
            } catch {
                resolved(.failure(error))
            }
        }
        return connection
    }

    private func startClient(_ setup: ClientSetup, _ handshake: WebSocketClientHandshake, _ handler: @escaping LoopWebSocketHandler,
                             _ timeout: Duration, _ resolved: Result<[ResolvedAddress], NetError>) {
        client = setup
        clientHandshake = handshake
        self.handler = handler
        switch resolved {
        case .failure(let error):
            return failUpgrade(.transport(error))
        case .success(let addresses):
            client?.addresses = addresses
        }
        setupTimer = loop.scheduleOnLoop(at: .now.advanced(by: timeout)) { [self] in
            setupTimer = nil
            setupTimedOut(timeout)
        }
        connectNext()
    }

    /// Starts connecting to the next address, or fails with the last error.
    private func connectNext() {
        guard var setup = client, case .connecting = phase else { return }
        while setup.next < setup.addresses.count {
            let address = setup.addresses[setup.next]
            setup.next += 1
            client = setup
            let operation = "connect to \(setup.url.hostHeader) (\(address.address))"
            do throws(NetError) {
                let (fd, pending) = try TCP.beginConnect(address, operation: operation)
                transport = TCPLoopTransport(fd: fd, peer: address.address.description)
                do {
                    registration = try loop.register(fd, interest: EPOLLOUT.rawValue, self)
                } catch {
                    transport?.close()
                    transport = nil
                    throw error
                }
                if !pending { connected() }
                return
            } catch {
                setup.lastError = error
                client = setup
            }
        }
        failUpgrade(.transport(setup.lastError ?? NetError(.connect, operation: "connect to \(setup.url.hostHeader)", "no address to connect to")))
    }

    /// The socket became writable while connecting: done, or on to the next address.
    private func connectFinished() {
        guard let transport, let setup = client else { return }
        let fd = transport.fd
        do throws(NetError) {
            try TCP.completeConnect(fd, operation: "connect to \(setup.url.hostHeader)")
        } catch {
            releaseSocket()
            client?.lastError = error
            return connectNext()
        }
        connected()
    }

    private func connected() {
        guard let transport, let setup = client else { return }
        let fd = transport.fd
        let remote = SocketAddress.of(fd, peer: true)
        address.withLock { $0 = remote }
        if setup.url.isSecure {
            let name = setup.tls.serverName ?? setup.url.host
            let operation = "TLS handshake with \(name) at \(remote)"
            do throws(NetError) {
                let ssl = try makeClientSSL(descriptor: fd, name: name, configuration: setup.tls, operation: operation)
                self.transport = TLSLoopTransport(fd: fd, ssl: ssl, operation: operation)
                (transport as? TCPLoopTransport)?.disown()
            } catch {
                return failUpgrade(.transport(error))
            }
            phase = .tlsHandshake
            updateInterest()
            driveTLSHandshake()
        } else {
            sendUpgradeRequest()
        }
    }

    private func sendUpgradeRequest() {
        guard let clientHandshake else { return }
        phase = .readingResponse
        queueOutput(clientHandshake.requestBytes)
        updateInterest()
    }

    private func failUpgrade(_ error: WebSocketError) {
        guard let setup = client else { return }
        cancelSetupTimer()
        handler = nil
        terminalQueued = true
        dropTransport()
        client = nil
        setup.onUpgrade(self, .failure(error))
    }

    // MARK: Shared setup

    private func finishedBeforeOpen(_ line: String) {
        log?(line)
        phase = .closed
        onFinished?(self)
    }

    private func setupTimedOut(_ timeout: Duration) {
        if let setup = client {
            return failUpgrade(.transport(NetError(.timedOut, operation: "WebSocket connect to \(setup.url)",
                                                   "no upgrade within \(timeout); the server is slow or gone")))
        }
        switch phase {
        case .tlsHandshake, .readingRequest:
            log?("\(peer): upgrade request not read within \(timeout); connection dropped")
            dropTransport()
        case .deciding:
            log?("\(peer): no upgrade decision within \(timeout); refusing 503")
            sendRefusal(WebSocketHandshakeError(.invalidArgument, "no decision in time", httpStatus: 503).refusalResponse())
        default:
            break
        }
    }

    private func cancelSetupTimer() {
        if let t = setupTimer { loop.cancelOnLoop(t) }
        setupTimer = nil
    }

    private func driveTLSHandshake() {
        guard let transport else { return }
        switch transport.handshake() {
        case .bytes:
            handshakeWantsWrite = false
            if role == .server {
                phase = .readingRequest
                updateInterest()
                // The client's request may already sit decrypted inside OpenSSL or in the socket.
                readable()
            } else {
                sendUpgradeRequest()
            }
        case .wantRead:
            handshakeWantsWrite = false
            updateInterest()
        case .wantWrite:
            handshakeWantsWrite = true
            updateInterest()
        case .failed(let error):
            tlsHandshakeFailed(error)
        case .end:
            tlsHandshakeFailed(tlsHandshakeEnded("TLS handshake with \(peer)"))
        }
    }

    private func tlsHandshakeFailed(_ error: NetError) {
        if role == .client { return failUpgrade(.transport(error)) }
        log?("\(peer): \(error)")
        dropTransport()
    }

    // MARK: Operations (on the loop)

    /// Sends a text message (one frame, or fragments per ``WebSocketConfiguration/outboundFragmentSize``).
    /// On the loop.
    /// - Throws: ``WebSocketError/send(_:)`` when the codec refuses (closing or closed);
    ///   ``WebSocketError/closed(_:)`` before the upgrade or after the last event;
    ///   ``WebSocketError/transport(_:)`` when the output went over ``WebSocketBufferLimits/maxBufferedOutput``
    ///   (the connection was dropped).
    public func send(text: String) throws(WebSocketError) {
        try perform("a text message") { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.send(text: text) }
    }

    /// Sends a binary message (see ``send(text:)``).
    public func send(binary: [UInt8]) throws(WebSocketError) {
        try perform("a binary message") { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.send(binary: binary) }
    }

    /// Sends a ping (at most 125 bytes of payload). On the loop.
    public func ping(_ payload: [UInt8] = []) throws(WebSocketError) {
        try perform("a ping") { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.ping(payload) }
    }

    /// Sends a pong (at most 125 bytes): unsolicited, or in transparent mode the answer to a ping. On the loop.
    public func pong(_ payload: [UInt8] = []) throws(WebSocketError) {
        try perform("a pong") { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.pong(payload) }
    }

    /// Sends this end's close frame (nil `code`: an empty body). While open it starts the close handshake
    /// (the peer has ``closeTimeout`` to answer); in `.closeReceived` (transparent mode) it answers the
    /// peer's close frame and ends the connection (the handler's `.closed` carries the peer's code). A
    /// connection already closing or closed sends nothing. On the loop.
    /// - Throws: ``WebSocketError/send(_:)`` for a code that may not be sent or a reason over 123 bytes.
    public func close(code: WebSocketCloseCode? = .normalClosure, reason: String = "") throws(WebSocketError) {
        loop.preconditionInLoop("LoopWebSocket.close")
        guard case .open = phase, codec.state == .open || codec.state == .closeReceived else { return }
        let answering = codec.state == .closeReceived
        do throws(WebSocketSendError) {
            try codec.close(code: code, reason: reason)
        } catch {
            throw .send(error)
        }
        takeCodecOutput()
        if answering {
            let event = WebSocketEvent.closed(code: codec.receivedCloseCode ?? .noStatusReceived, reason: codec.receivedCloseReason ?? "")
            endGracefully(with: event)
        } else {
            armCloseTimer(closeTimeout) { [self] in
                guard case .open = phase else { return }
                endAbruptly(transportClosedEvent("no close frame from the peer within \(closeTimeout)"))
            }
        }
    }

    /// Drops the transport at once, without a close handshake; the handler gets `.closed(1006, reason)`.
    /// On the loop.
    public func abort(reason: String = "aborted by this end") {
        loop.preconditionInLoop("LoopWebSocket.abort")
        if client != nil { return failUpgrade(.transport(NetError(.closed, operation: "WebSocket connect to \(peer)", reason))) }
        switch phase {
        case .open: endAbruptly(transportClosedEvent(reason))
        case .closed: return
        default: dropTransport()
        }
    }

    /// Stops reading this peer (TCP then slows it down) until ``resumeReading()``. On the loop.
    public func pauseReading() {
        loop.preconditionInLoop("LoopWebSocket.pauseReading")
        pausedByUser = true
        updateInterest()
    }

    /// Reads again after ``pauseReading()`` (backpressure from the output buffer still applies). On the loop.
    public func resumeReading() {
        loop.preconditionInLoop("LoopWebSocket.resumeReading")
        guard pausedByUser else { return }
        pausedByUser = false
        updateInterest()
    }

    private func perform(_ what: String, _ operation: (inout WebSocketConnection) throws(WebSocketSendError) -> Void) throws(WebSocketError) {
        loop.preconditionInLoop("LoopWebSocket.send")
        guard case .open = phase else {
            throw .closed("cannot send \(what): the connection is \(phaseDescription)")
        }
        do throws(WebSocketSendError) {
            try operation(&codec)
        } catch {
            throw .send(error)
        }
        if let failure = takeCodecOutput() { throw .transport(failure) }
    }

    private var phaseDescription: String {
        switch phase {
        case .connecting, .tlsHandshake, .readingRequest, .readingResponse: "not upgraded yet"
        case .deciding: "waiting for the upgrade decision"
        case .refusing: "refused"
        case .open: "open"
        case .lingering, .closed: "over (its last event was delivered)"
        }
    }

    // MARK: Output

    /// Moves the codec's bytes into the output buffer; a non-nil result means the buffer went over its
    /// limit and the connection was dropped.
    @discardableResult
    private func takeCodecOutput() -> NetError? {
        guard codec.hasOutbound else { return nil }
        return queueOutput(codec.takeOutbound())
    }

    @discardableResult
    private func queueOutput(_ bytes: [UInt8]) -> NetError? {
        guard !bytes.isEmpty, transport != nil else { return nil }
        output.append(bytes)
        if output.count > limits.maxBufferedOutput {
            let error = NetError(.write, operation: "write to \(peer)",
                                 "\(output.count) bytes wait to be written, over the limit of \(limits.maxBufferedOutput): the peer is not reading; connection dropped")
            log?("\(peer): \(error.message)")
            endAbruptly(transportClosedEvent(error.message))
            return error
        }
        if output.count > limits.pauseReadingAbove && !pausedByBackpressure {
            pausedByBackpressure = true
            updateInterest()
        }
        if !flushScheduled {
            flushScheduled = true
            loop.soon { [self] in flush() }
        }
        return nil
    }

    /// Writes what the socket takes.
    private func flush() {
        flushScheduled = false
        guard let transport else { return }
        if case .connecting = phase { return }
        if case .tlsHandshake = phase { return }
        writing: while !output.isEmpty && !writeWantsRead {
            switch output.withPrefix(Self.writeChunk, { transport.write($0) }) {
            case .bytes(let n) where n > 0:
                output.consume(n)
            case .bytes, .wantWrite, .end:
                break writing
            case .wantRead:
                writeWantsRead = true
            case .failed(let error):
                return transportFailed(error)
            }
        }
        if output.isEmpty {
            if case .lingering = phase { lingerWritten() }
            if case .refusing = phase { shutDownSendingSide() }
        }
        if pausedByBackpressure && output.count <= limits.resumeReadingBelow {
            pausedByBackpressure = false
            updateInterest()
            if case .open = phase { onWritable?(self) }
        } else {
            updateInterest()
        }
    }

    /// At most this many bytes per write call (a constant: TLS retries must not shrink).
    static let writeChunk = 256 * 1024

    private func shutDownSendingSide() {
        guard !shutDownSending else { return }
        shutDownSending = true
        transport?.shutdownWrite()
    }

    // MARK: Readiness

    private var wantsToRead: Bool {
        switch phase {
        case .connecting, .deciding, .closed: false
        case .tlsHandshake: !handshakeWantsWrite
        case .lingering: !failing
        case .readingRequest, .readingResponse, .refusing: true
        case .open: !pausedByUser && !pausedByBackpressure
        }
    }

    private func updateInterest() {
        guard let registration, transport != nil else { return }
        var mask: UInt32 = 0
        let read = wantsToRead
        if (read && !readWantsWrite) || writeWantsRead { mask |= EPOLLIN.rawValue }
        switch phase {
        case .connecting:
            mask |= EPOLLOUT.rawValue
        case .tlsHandshake:
            if handshakeWantsWrite { mask |= EPOLLOUT.rawValue }
        default:
            if (!output.isEmpty && !writeWantsRead) || readWantsWrite { mask |= EPOLLOUT.rawValue }
        }
        loop.setInterest(registration, mask)
    }

    private func readable() {
        guard let transport else { return }
        var rounds = 0
        while wantsToRead && !readWantsWrite && self.transport != nil {
            rounds += 1
            let result = transport.read(loop.readBuffer)
            switch result {
            case .bytes(let n):
                if n == 0 { return }
                consume(UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<n]))
                guard transport.hasBufferedInput else { return }
                if rounds >= 4 {
                    // Decrypted bytes wait inside OpenSSL, where epoll cannot see them: come back soon.
                    loop.soon { [self] in readable() }
                    return
                }
            case .wantRead:
                return
            case .wantWrite:
                readWantsWrite = true
                updateInterest()
                return
            case .end:
                return transportEnded()
            case .failed(let error):
                return transportFailed(error)
            }
        }
    }

    /// The codec's last event for a transport that ended (1006 with `reason`, or the peer's close code
    /// when its close frame had arrived in transparent mode).
    private func transportClosedEvent(_ reason: String) -> WebSocketEvent {
        guard let event = codec.transportClosed().first else { return .closed(code: .abnormalClosure, reason: reason) }
        if case .closed(let code, let r) = event, code == .abnormalClosure, r.isEmpty {
            return .closed(code: code, reason: String(reason.prefix(200)))
        }
        return event
    }

    /// Bytes read, by phase.
    private func consume(_ bytes: UnsafeRawBufferPointer) {
        switch phase {
        case .readingRequest:
            readRequest(bytes)
        case .readingResponse:
            readResponse(bytes)
        case .open:
            let events = codec.receive(bytes)
            takeCodecOutput()
            deliver(events)
        case .deciding:
            pendingInput += Array(bytes)
        case .lingering, .refusing, .connecting, .tlsHandshake, .closed:
            return
        }
    }

    private func consume(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { consume($0) }
    }

    private func readRequest(_ bytes: UnsafeRawBufferPointer) {
        guard var handshake = serverHandshake else { return }
        do throws(WebSocketHandshakeError) {
            let progress = try handshake.receive(bytes)
            serverHandshake = handshake
            guard case .complete(let request, let consumed) = progress else { return }
            serverHandshake = nil
            self.request = request
            pendingInput = Array(bytes[consumed...])
            phase = .deciding
            updateInterest()
            let upgrade = upgradeCallback
            upgradeCallback = nil
            upgrade?(self)
        } catch {
            serverHandshake = nil
            log?("\(peer): refused \(error.httpStatus ?? 400): \(error)")
            sendRefusal(error.refusalResponse())
        }
    }

    private func readResponse(_ bytes: UnsafeRawBufferPointer) {
        guard var handshake = clientHandshake, let setup = client else { return }
        do throws(WebSocketHandshakeError) {
            let progress = try handshake.receive(bytes)
            clientHandshake = handshake
            guard case .complete(let response, let consumed) = progress else { return }
            clientHandshake = nil
            cancelSetupTimer()
            self.response = response
            client = nil
            phase = .open
            updateInterest()
            let leftover = Array(bytes[consumed...])
            setup.onUpgrade(self, .success(response))
            if !leftover.isEmpty, case .open = phase { consume(leftover) }
        } catch {
            clientHandshake = nil
            failUpgrade(.handshake(error))
        }
    }

    /// Delivers codec events; a last event ends the connection gracefully.
    private func deliver(_ events: [WebSocketEvent]) {
        guard !events.isEmpty else { return }
        if let last = events.last, Self.isTerminal(last) {
            // The codec is closed: the close echo or error frame is queued; linger, then close TCP.
            if case .protocolError = last { failing = true }
            enterLingering()
        } else if codec.state == .closeReceived {
            armCloseTimer(closeTimeout * 2) { [self] in
                guard case .open = phase else { return }
                log?("\(peer): close frame not answered within \(closeTimeout * 2); connection dropped")
                endAbruptly(transportClosedEvent("close frame not answered"))
            }
        }
        emit(events)
    }

    private static func isTerminal(_ event: WebSocketEvent) -> Bool {
        switch event {
        case .closed, .protocolError: true
        default: false
        }
    }

    /// Hands events to the handler in order, never re-entering it: events raised while it runs wait
    /// their turn. The handler is released after the last event.
    private func emit(_ events: [WebSocketEvent]) {
        for e in events {
            if terminalQueued { break }
            if Self.isTerminal(e) { terminalQueued = true }
            pendingEvents.append(e)
        }
        guard !delivering else { return }
        delivering = true
        var i = 0
        while i < pendingEvents.count {
            let e = pendingEvents[i]
            i += 1
            if Self.isTerminal(e) {
                let h = handler
                handler = nil
                onWritable = nil
                h?(self, e)
            } else {
                handler?(self, e)
            }
        }
        pendingEvents = []
        delivering = false
    }

    // MARK: Ending

    private func armCloseTimer(_ after: Duration, _ body: @escaping () -> Void) {
        guard closeTimer == nil else { return }
        closeTimer = loop.scheduleOnLoop(at: .now.advanced(by: after)) { [self] in
            closeTimer = nil
            body()
        }
    }

    private func cancelCloseTimer() {
        if let t = closeTimer { loop.cancelOnLoop(t) }
        closeTimer = nil
    }

    /// The last event after a complete handshake: deliver it, then linger.
    private func endGracefully(with event: WebSocketEvent) {
        enterLingering()
        emit([event])
    }

    private func enterLingering() {
        cancelCloseTimer()
        phase = .lingering
        pausedByUser = false
        pausedByBackpressure = false
        armCloseTimer(closeTimeout) { [self] in dropTransport() }
        if output.isEmpty { lingerWritten() }
        updateInterest()
    }

    /// Lingering and everything is written: a server ends its sending side (the client closes TCP when
    /// it sees that); after a protocol error the socket closes at once, since the peer's further bytes
    /// are not to be processed (RFC 6455 §7.1.7; a peer still sending gets a reset, as from any server
    /// that closes).
    private func lingerWritten() {
        if failing {
            shutDownSendingSide()
            return dropTransport()
        }
        if role == .server { shutDownSendingSide() }
    }

    /// The transport is gone or given up: close it now and deliver `event` as the last event.
    private func endAbruptly(_ event: WebSocketEvent) {
        dropTransport()
        emit([event])
    }

    private func transportEnded() {
        if client != nil {
            return failUpgrade(.transport(NetError(.read, operation: "WebSocket handshake with \(peer)",
                                                   "the server closed the connection before answering the upgrade; is it a WebSocket endpoint?")))
        }
        switch phase {
        case .open:
            endAbruptly(transportClosedEvent("the peer closed the connection without a close frame"))
        case .readingRequest:
            log?("\(peer): closed before sending a complete upgrade request")
            dropTransport()
        case .deciding:
            // Reading is off while deciding; an end seen now is kept for the decision.
            noteEndedBeforeAccept("the peer closed the connection before the upgrade was answered")
        default:
            dropTransport()
        }
    }

    private func transportFailed(_ error: NetError) {
        if client != nil { return failUpgrade(.transport(error)) }
        switch phase {
        case .open:
            endAbruptly(transportClosedEvent(error.description))
        case .deciding:
            noteEndedBeforeAccept(error.description)
        case .readingRequest, .tlsHandshake:
            log?("\(peer): upgrade request not read: \(error)")
            dropTransport()
        default:
            dropTransport()
        }
    }

    /// While the decision is pending the socket died: close it, and keep the end for `accept`'s handler.
    private func noteEndedBeforeAccept(_ reason: String) {
        log?("\(peer): \(reason) (before the upgrade was answered)")
        dropTransport()
        endedBeforeAccept = .closed(code: .abnormalClosure, reason: String(reason.prefix(200)))
    }

    /// Closes the socket now (whatever is unwritten is lost) and forgets the connection.
    private func dropTransport() {
        cancelCloseTimer()
        cancelSetupTimer()
        releaseSocket()
        output = OutputBuffer()
        pendingInput = []
        if case .closed = phase { return }
        phase = .closed
        if role == .server && terminalQueued { log?("\(peer): ended") }
        onFinished?(self)
    }

    private func releaseSocket() {
        if let registration { loop.deregister(registration) }
        registration = nil
        transport?.close()
        transport = nil
        readWantsWrite = false
        writeWantsRead = false
    }
}

extension LoopWebSocket: LoopReadiness {
    func ready(_ events: UInt32) {
        let failed = events & EPOLLERR.rawValue != 0
        let hangUp = events & EPOLLHUP.rawValue != 0
        switch phase {
        case .connecting:
            return connectFinished()
        case .tlsHandshake:
            // An error or hang-up too: the handshake step reports what went wrong.
            return driveTLSHandshake()
        case .closed:
            return
        default:
            break
        }
        if failed || (hangUp && !wantsToRead) {
            // An error (or a hang-up while reading is paused): nothing more can be read or written.
            return transportFailed(socketError() ?? NetError(.read, operation: "read from \(peer)", "the connection was reset"))
        }
        if events & EPOLLOUT.rawValue != 0 {
            if readWantsWrite {
                readWantsWrite = false
                readable()
            }
            flush()
        }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue) != 0 {
            if writeWantsRead {
                writeWantsRead = false
                flush()
            }
            readable()
        }
    }

    func loopStopping() {
        registration = nil
        if client != nil {
            return failUpgrade(.transport(NetError(.closed, operation: "WebSocket connect to \(peer)", "the event loop stopped")))
        }
        switch phase {
        case .open: endAbruptly(transportClosedEvent("the event loop stopped"))
        default: dropTransport()
        }
    }

    private func socketError() -> NetError? {
        guard let fd = transport?.fd else { return nil }
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length) == 0, soError != 0 else { return nil }
        return NetError.system(.read, "read from \(peer)", soError, "the connection failed")
    }

    /// Server: the server is stopping; drop the connection (the handler gets `.closed(1006)`).
    func serverStopping() {
        switch phase {
        case .open:
            endAbruptly(transportClosedEvent("the server stopped"))
        case .closed:
            return
        default:
            dropTransport()
        }
    }
}

/// Bytes waiting to be written: appended at the end, consumed from the front; memory is given back
/// once it drains.
struct OutputBuffer {
    private var bytes: [UInt8] = []
    private var head = 0

    var count: Int { bytes.count - head }
    var isEmpty: Bool { head == bytes.count }

    mutating func append(_ more: [UInt8]) {
        if isEmpty {
            bytes = more
            head = 0
        } else {
            bytes += more
        }
    }

    mutating func consume(_ n: Int) {
        head += n
        if head >= bytes.count {
            bytes = []
            head = 0
        } else if head > 1 << 20 && head * 2 > bytes.count {
            bytes.removeFirst(head)
            head = 0
        }
    }

    func withPrefix<R>(_ maxCount: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            body(UnsafeRawBufferPointer(rebasing: raw[head..<min(bytes.count, head + maxCount)]))
        }
    }
}
