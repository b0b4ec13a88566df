public import WebSocket
import Glibc

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
/// the sans-IO ``WebSocketConnection`` codec over a ``LoopStream`` (non-blocking TCP or TLS, an output
/// buffer with backpressure, ``LoopBufferLimits``), with the close handshake's timeout on loop timers.
///
/// Threading: the connection lives on ``loop``. Its handler runs there; ``send(text:)``, ``close(code:reason:)``
/// and the other operations must be called there too (from the handler, or hop with
/// `connection.loop.execute { ... }`); ``accept(headers:handler:)`` and ``refuse(status:headers:body:)``
/// may be called from any thread. Nothing on the per-frame path takes a lock.
///
/// Closing: after this end's close frame the peer has ``closeTimeout`` to answer, else the transport is
/// dropped and the handler gets `.closed(1006)`. After the handshake a server shuts its sending side and
/// waits (at most ``closeTimeout``) for the client to close TCP; a client waits for the server to do so
/// (RFC 6455 §7.1.1); after a protocol error nothing more is read (§7.1.7) and the socket closes once the
/// close frame is written. In transparent mode (``WebSocketConfiguration/transparent(maxMessageSize:)``) the
/// peer's close frame arrives as `.closeReceived` and waits for ``close(code:reason:)`` for at most twice
/// ``closeTimeout``; pings and pongs are events, never answered here.
public final class LoopWebSocket: @unchecked Sendable {
    // Thread-safety: `@unchecked` because every `var` is touched only on `loop`'s thread: the public
    // operations check it (`preconditionInLoop`), `accept`/`refuse` hop to it, and every callback (the
    // stream's, timers) runs on it. The `let`s are immutable.

    /// The loop this connection lives on.
    public let loop: EventLoop
    /// This end's role.
    public let role: WebSocketRole
    /// Codec limits and options (transparent or not).
    public let configuration: WebSocketConfiguration
    /// How long this end waits for the peer's half of the close handshake.
    public let closeTimeout: Duration

    private let log: (@Sendable (String) -> Void)?

    private enum Phase {
        /// Connecting (client) or the TLS handshake (server): the stream is not ready yet.
        case setup
        /// Server: reading the upgrade request.
        case readingRequest
        /// Server: waiting for accept or refuse.
        case deciding
        /// Server: the refusal is written, then the socket closes.
        case refusing
        /// Client: the upgrade request is sent; reading the response.
        case readingResponse
        /// Messages flow.
        case open
        /// The last event was delivered; the stream writes what is left and closes.
        case over
    }

    private var phase: Phase = .setup
    private var stream: LoopStream?
    private var codec: WebSocketConnection
    private var handler: LoopWebSocketHandler?
    private var pendingEvents: [WebSocketEvent] = []
    private var delivering = false
    private var terminalQueued = false
    /// How a connection that ended before it was accepted ended (given to a later `accept`'s handler).
    private var endedBeforeAccept: WebSocketEvent?
    private var closeTimer: UInt64?
    private var setupTimer: UInt64?
    /// Bytes received after the upgrade head, for the codec once open.
    private var pendingInput: [UInt8] = []
    private var serverHandshake: WebSocketServerHandshake?
    private var clientHandshake: WebSocketClientHandshake?
    private var url: WebSocketURL?
    private var onUpgrade: (@Sendable (LoopWebSocket, Result<WebSocketUpgradeResponse, WebSocketError>) -> Void)?
    private var upgradeCallback: ((LoopWebSocket) -> Void)?
    private var peerAddress: SocketAddress?

    /// Server side: the upgrade request, once read.
    public private(set) var request: WebSocketUpgradeRequest?
    /// Client side: the server's `101` response (status and headers), once the upgrade succeeded.
    public private(set) var response: WebSocketUpgradeResponse?
    /// Called on the loop when reading resumes after backpressure (the output fell below
    /// ``LoopBufferLimits/resumeReadingBelow``): a proxy resumes the other side here. Set on the loop.
    public var onWritable: ((LoopWebSocket) -> Void)?

    private init(loop: EventLoop, role: WebSocketRole, configuration: WebSocketConfiguration, closeTimeout: Duration,
                 maskingKeys: (any MaskingKeySource)?, log: (@Sendable (String) -> Void)?) {
        self.loop = loop
        self.role = role
        self.configuration = configuration
        self.closeTimeout = closeTimeout
        self.log = log
        self.codec = WebSocketConnection(role: role, configuration: configuration, maskingKeys: maskingKeys)
    }

    /// The peer's address (nil until a client connection has connected). On the loop.
    public var remoteAddress: SocketAddress? {
        loop.preconditionInLoop("LoopWebSocket.remoteAddress")
        return peerAddress
    }

    private var peer: String { peerAddress?.description ?? url?.description ?? "?" }

    /// Where the codec is (open, closing, closeReceived, closed). On the loop.
    public var state: WebSocketConnection.State {
        loop.preconditionInLoop("LoopWebSocket.state")
        return codec.state
    }

    /// Bytes waiting to be written. On the loop.
    public var bufferedOutputBytes: Int {
        loop.preconditionInLoop("LoopWebSocket.bufferedOutputBytes")
        return stream?.bufferedOutputBytes ?? 0
    }

    /// Whether reading is paused (by ``pauseReading()`` or by backpressure). On the loop.
    public var isReadingPaused: Bool {
        loop.preconditionInLoop("LoopWebSocket.isReadingPaused")
        return stream?.isReadingPaused ?? false
    }

    // MARK: Server side

    /// A server connection over an accepted `stream` (on its loop, before the stream starts): reads the
    /// upgrade request within `handshakeTimeout` (TLS included) and calls `upgrade`.
    static func serve(_ stream: LoopStream, configuration: WebSocketConfiguration, closeTimeout: Duration, handshakeTimeout: Duration,
                      log: (@Sendable (String) -> Void)?, upgrade: @escaping (LoopWebSocket) -> Void) {
        let ws = LoopWebSocket(loop: stream.loop, role: .server, configuration: configuration, closeTimeout: closeTimeout,
                               maskingKeys: nil, log: log)
        ws.stream = stream
        ws.peerAddress = stream.remoteAddress
        ws.upgradeCallback = upgrade
        ws.serverHandshake = WebSocketServerHandshake()
        ws.attach(stream)
        stream.onReady = { [ws] _ in
            ws.phase = .readingRequest
        }
        ws.setupTimer = stream.loop.scheduleOnLoop(at: .now.advanced(by: handshakeTimeout)) { [ws] in
            ws.setupTimer = nil
            ws.setupTimedOut(handshakeTimeout)
        }
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
        guard case .deciding = phase, let request, let stream else {
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
        queue(bytes)
        stream.resumeReading()
        let leftover = pendingInput
        pendingInput = []
        if !leftover.isEmpty { leftover.withUnsafeBytes { consume($0) } }
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

    /// The refusal goes out, then the socket closes as after a close handshake (bounded by closeTimeout).
    private func sendRefusal(_ bytes: [UInt8]) {
        cancelSetupTimer()
        phase = .refusing
        queue(bytes)
        stream?.finish(shutdownSending: true, readUntilEnd: true, timeout: closeTimeout)
    }

    // MARK: Client side

    /// Opens a client connection on `loop`: resolves the host (names on a helper thread, so the loop never
    /// blocks), connects without blocking (each address in turn), runs TLS for `wss` with verification as
    /// `tls` says (``TLSClientConfiguration``: on by default), sends the upgrade request with `headers`,
    /// and validates the response. The client never stops reading because its own output waits (its
    /// sends are bounded by ``LoopBufferLimits/maxBufferedOutput``; ``onWritable`` still says when the
    /// output drained below the resume mark): only a server pushes back on a peer that does not read.
    /// Then `onUpgrade` runs on the loop with the `101` response (its status
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
                               closeTimeout: Duration = .seconds(5), limits: LoopBufferLimits = LoopBufferLimits(),
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
        let ws = LoopWebSocket(loop: loop, role: .client, configuration: configuration, closeTimeout: closeTimeout,
                               maskingKeys: maskingKeys, log: nil)
        let deadline = ContinuousClock.now.advanced(by: timeout)
        loop.execute {
            ws.url = parsed
            ws.clientHandshake = handshake
            ws.onUpgrade = onUpgrade
            ws.handler = handler
            ws.setupTimer = loop.scheduleOnLoop(at: deadline) { [ws] in
                ws.setupTimer = nil
                ws.setupTimedOut(timeout)
            }
        }
        LoopStream.connect(host: parsed.host, port: parsed.port, tls: parsed.isSecure ? tls : nil, on: loop,
                           timeout: timeout, limits: limits) { result in
            switch result {
            case .failure(let error):
                ws.failUpgrade(.transport(error))
            case .success(let stream):
                guard ws.onUpgrade != nil else { return stream.close() }  // timed out meanwhile
                // A client keeps reading whatever it has queued: had it stopped reading while its own
                // sends wait, a server that stops reading while its answers wait would stall both.
                stream.pausesOwnReading = false
                ws.stream = stream
                ws.peerAddress = stream.remoteAddress
                ws.attach(stream)
                ws.phase = .readingResponse
                ws.queue(handshake.requestBytes)
            }
        }
        return ws
    }

    private func failUpgrade(_ error: WebSocketError) {
        guard let onUpgrade else { return }
        self.onUpgrade = nil
        cancelSetupTimer()
        handler = nil
        terminalQueued = true
        phase = .over
        stream?.close()
        stream = nil
        onUpgrade(self, .failure(error))
    }

    // MARK: Shared

    /// The stream's callbacks hold this connection (the stream drops them when it closes or finishes).
    private func attach(_ stream: LoopStream) {
        stream.onBytes = { [self] _, bytes in consume(bytes) }
        stream.onEnd = { [self] _, end in streamEnded(end) }
        stream.onWritable = { [self] _ in
            if case .open = phase { onWritable?(self) }
        }
    }

    private func setupTimedOut(_ timeout: Duration) {
        if role == .client {
            return failUpgrade(.transport(NetError(.timedOut, operation: "WebSocket connect to \(url?.description ?? peer)",
                                                   "no upgrade within \(timeout); the server is slow or gone")))
        }
        switch phase {
        case .setup, .readingRequest:
            log?("\(peer): upgrade request not read within \(timeout); connection dropped")
            dropStream()
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

    // MARK: Operations (on the loop)

    /// Sends a text message (one frame, or fragments per ``WebSocketConfiguration/outboundFragmentSize``).
    /// On the loop.
    /// - Throws: ``WebSocketError/send(_:)`` when the codec refuses (closing or closed);
    ///   ``WebSocketError/closed(_:)`` before the upgrade or after the last event;
    ///   ``WebSocketError/transport(_:)`` when the output went over ``LoopBufferLimits/maxBufferedOutput``
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
        if takeCodecOutput() != nil { return }
        if answering {
            let event = WebSocketEvent.closed(code: codec.receivedCloseCode ?? .noStatusReceived, reason: codec.receivedCloseReason ?? "")
            endGracefully([event])
        } else {
            armCloseTimer(closeTimeout) { [self] in
                log?("\(peer): no close frame from the peer within \(closeTimeout); connection dropped")
                endAbruptly(transportClosedEvent("no close frame from the peer within \(closeTimeout)"))
            }
        }
    }

    /// Drops the transport at once, without a close handshake; the handler gets `.closed(1006, reason)`.
    /// On the loop.
    public func abort(reason: String = "aborted by this end") {
        loop.preconditionInLoop("LoopWebSocket.abort")
        if role == .client && onUpgrade != nil {
            return failUpgrade(.transport(NetError(.closed, operation: "WebSocket connect to \(peer)", reason)))
        }
        switch phase {
        case .open: endAbruptly(transportClosedEvent(reason))
        case .over: return
        default: dropStream()
        }
    }

    /// Stops reading this peer (TCP then slows it down) until ``resumeReading()``. On the loop.
    public func pauseReading() {
        loop.preconditionInLoop("LoopWebSocket.pauseReading")
        stream?.pauseReading()
    }

    /// Reads again after ``pauseReading()`` (backpressure from the output buffer still applies). On the loop.
    public func resumeReading() {
        loop.preconditionInLoop("LoopWebSocket.resumeReading")
        stream?.resumeReading()
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
        case .setup, .readingRequest, .readingResponse: "not upgraded yet"
        case .deciding: "waiting for the upgrade decision"
        case .refusing: "refused"
        case .open: "open"
        case .over: "over (its last event was delivered)"
        }
    }

    // MARK: Output

    /// Moves the codec's bytes to the stream; a non-nil result means the output went over its limit and
    /// the connection was dropped (the handler got its last event saying why).
    @discardableResult
    private func takeCodecOutput() -> NetError? {
        guard codec.hasOutbound else { return nil }
        return queue(codec.takeOutbound())
    }

    @discardableResult
    private func queue(_ bytes: [UInt8]) -> NetError? {
        guard let stream, let error = stream.write(bytes) else { return nil }
        self.stream = nil
        log?("\(peer): \(error.message)")
        endAbruptly(transportClosedEvent(error.message))
        return error
    }

    // MARK: Input

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
        case .setup, .refusing, .over:
            return
        }
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
            stream?.pauseReading()
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
        guard var handshake = clientHandshake, let onUpgrade else { return }
        do throws(WebSocketHandshakeError) {
            let progress = try handshake.receive(bytes)
            clientHandshake = handshake
            guard case .complete(let response, let consumed) = progress else { return }
            clientHandshake = nil
            cancelSetupTimer()
            self.response = response
            self.onUpgrade = nil
            phase = .open
            let leftover = Array(bytes[consumed...])
            onUpgrade(self, .success(response))
            if !leftover.isEmpty, case .open = phase { leftover.withUnsafeBytes { consume($0) } }
        } catch {
            clientHandshake = nil
            failUpgrade(.handshake(error))
        }
    }

    /// Delivers codec events; a last event ends the connection gracefully.
    private func deliver(_ events: [WebSocketEvent]) {
        guard !events.isEmpty else { return }
        if let last = events.last, Self.isTerminal(last) {
            // The codec is closed: the close echo or error frame is queued; then the socket closes.
            return endGracefully(events)
        }
        if codec.state == .closeReceived {
            armCloseTimer(closeTimeout * 2) { [self] in
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
            guard case .open = phase else { return }
            body()
        }
    }

    private func cancelCloseTimer() {
        if let t = closeTimer { loop.cancelOnLoop(t) }
        closeTimer = nil
    }

    /// The close handshake is complete (or the codec failed the connection): deliver the last event(s),
    /// then the stream writes the close frame and closes the socket (a server half-closes first and waits
    /// for the client's FIN; after a protocol error nothing more is read, RFC 6455 §7.1.7).
    private func endGracefully(_ events: [WebSocketEvent]) {
        cancelCloseTimer()
        phase = .over
        var failing = false
        if case .protocolError? = events.last { failing = true }
        stream?.finish(shutdownSending: role == .server || failing, readUntilEnd: !failing, timeout: closeTimeout)
        stream = nil
        logEnded()
        emit(events)
    }

    /// The transport is gone or given up: close it now and deliver `event` as the last event.
    private func endAbruptly(_ event: WebSocketEvent) {
        dropStream()
        logEnded()
        emit([event])
    }

    private func logEnded() {
        if role == .server && request != nil { log?("\(peer): ended") }
    }

    /// The codec's last event for a transport that ended (1006 with `reason`, or the peer's close code
    /// when its close frame had arrived in transparent mode).
    private func transportClosedEvent(_ reason: String) -> WebSocketEvent {
        guard let event = codec.transportClosed().first else { return .closed(code: .abnormalClosure, reason: String(reason.prefix(200))) }
        if case .closed(let code, let r) = event, code == .abnormalClosure, r.isEmpty {
            return .closed(code: code, reason: String(reason.prefix(200)))
        }
        return event
    }

    private func streamEnded(_ end: LoopStreamEnd) {
        let reason: String
        switch end {
        case .endOfStream: reason = "the peer closed the connection without a close frame"
        case .failed(let error): reason = error.description
        }
        if role == .client && onUpgrade != nil {
            if case .failed(let error) = end { return failUpgrade(.transport(error)) }
            return failUpgrade(.transport(NetError(.read, operation: "WebSocket handshake with \(peer)",
                                                   "the server closed the connection before answering the upgrade; is it a WebSocket endpoint?")))
        }
        switch phase {
        case .open:
            endAbruptly(transportClosedEvent(reason))
        case .deciding:
            // Reading is off while deciding; an end seen now is kept for the decision.
            log?("\(peer): \(reason) (before the upgrade was answered)")
            dropStream()
            endedBeforeAccept = .closed(code: .abnormalClosure, reason: String(reason.prefix(200)))
        case .setup, .readingRequest:
            if case .endOfStream = end {
                log?("\(peer): closed before sending a complete upgrade request")
            } else {
                log?("\(peer): upgrade request not read: \(reason)")
            }
            dropStream()
        case .readingResponse, .refusing, .over:
            dropStream()
        }
    }

    /// Closes the socket now (whatever is unwritten is lost).
    private func dropStream() {
        cancelCloseTimer()
        cancelSetupTimer()
        stream?.close()
        stream = nil
        pendingInput = []
        phase = .over
    }
}
