import CEpoll
import COpenSSL
import Dispatch
import Glibc
import Synchronization
import Sync

/// How much a ``LoopStream`` buffers before it pushes back, and the most it ever holds.
///
/// Reading: 64 KiB at a time, handed on at once (a ``LoopWebSocket``'s codec then holds at most one message
/// in assembly: ``WebSocketConfiguration/maxMessageSize``, 32 MiB by default). Writing: while more than
/// ``pauseReadingAbove`` bytes wait to be written (the peer is not draining), the stream stops reading
/// that peer (so a peer that sends requests without reading the answers is slowed down by TCP, not
/// buffered without end; a stream with ``LoopStream/pausesOwnReading`` off, a loop WebSocket client's or
/// a proxy's, keeps reading); it reads again below ``resumeReadingBelow`` and then calls
/// ``LoopStream/onWritable``. A write that would leave more than ``maxBufferedOutput`` bytes waiting drops
/// the stream (the write says why): memory per connection stays bounded even for a peer that never reads.
public struct LoopBufferLimits: Hashable, Sendable {
    /// Stop reading while more than this many bytes wait to be written (default 1 MiB).
    public var pauseReadingAbove: Int
    /// Read again once at most this many bytes wait (default 256 KiB).
    public var resumeReadingBelow: Int
    /// The most bytes that may wait to be written; over it the stream is dropped (default 64 MiB: two
    /// messages of the 32 MiB limit).
    public var maxBufferedOutput: Int

    /// Limits; `resumeReadingBelow` is kept at most `pauseReadingAbove`, which is kept at most
    /// `maxBufferedOutput`.
    public init(pauseReadingAbove: Int = 1 << 20, resumeReadingBelow: Int = 256 << 10,
                maxBufferedOutput: Int = 2 * (32 << 20)) {
        self.maxBufferedOutput = max(1, maxBufferedOutput)
        self.pauseReadingAbove = min(max(1, pauseReadingAbove), self.maxBufferedOutput)
        self.resumeReadingBelow = min(max(0, resumeReadingBelow), self.pauseReadingAbove)
    }
}

/// How a ``LoopStream`` ended, reported once through ``LoopStream/onEnd`` (never after
/// ``LoopStream/close()`` or once lingering).
public enum LoopStreamEnd: Sendable {
    /// The peer closed its sending side (TCP FIN, TLS close_notify): nothing more will be read. Writing
    /// may still work; the owner usually closes.
    case endOfStream
    /// The stream failed (reset, TLS error, handshake failure, the server stopping) and is closed.
    case failed(NetError)
}

/// A non-blocking byte stream on an ``EventLoop``: TCP, or TLS through OpenSSL on the same socket
/// (`SSL_ERROR_WANT_READ`/`WANT_WRITE` decide what it waits for next), with an output buffer and
/// backpressure (``LoopBufferLimits``). ``LoopWebSocket`` runs the WebSocket protocol over one; a proxy
/// pumps bytes between two. Made by ``LoopStreamServer`` (accepted) or
/// ``connect(host:port:tls:on:timeout:limits:completion:)``.
///
/// Threading: the stream lives on ``loop``; its callbacks run there and its operations must be called
/// there (hop with `stream.loop.execute { ... }`). Bytes handed to ``onBytes`` point into the loop's
/// shared read buffer: use them before returning.
public final class LoopStream: @unchecked Sendable {
    // Thread-safety: `@unchecked` because every `var` is touched only on `loop`'s thread (the public
    // operations check it, the readiness and timer callbacks run there); `address` is behind a Mutex.

    /// The loop this stream lives on.
    public let loop: EventLoop
    /// Buffering limits.
    public let limits: LoopBufferLimits
    private let address = Locked<SocketAddress?>(nil)

    private enum State {
        /// Connecting (the next address, then TLS).
        case connecting
        /// The TLS handshake.
        case handshaking
        /// Bytes flow.
        case ready
        /// Writing what is left, then (optionally) waiting for the peer to close, then closing.
        case lingering
        /// The socket is closed.
        case closed
    }

    private var state: State
    private var transport: (any LoopTransport)?
    private var registration: UInt64?
    private var output = OutputBuffer()
    private var pausedByUser = false
    private var pausedByBackpressure = false
    private var overPauseMark = false
    private var readEnded = false
    private var readWantsWrite = false
    private var writeWantsRead = false
    private var handshakeWantsWrite = false
    private var flushScheduled = false
    private var shutDownSending = false
    private var lingerReads = true
    private var lingerShutdown = false
    private var lingerTimer: UInt64?
    private var plan: ConnectPlan?

    private struct ConnectPlan {
        var name: String
        var addresses: [ResolvedAddress]
        var next: Int
        var lastError: NetError?
        var tls: TLSClientConfiguration?
        var timer: UInt64?
        var completion: @Sendable (Result<LoopStream, NetError>) -> Void
    }

    /// Called once an accepted stream is ready: at once for TCP, after the TLS handshake for TLS.
    public var onReady: ((LoopStream) -> Void)?
    /// Called with the bytes read (valid only during the call).
    public var onBytes: ((LoopStream, UnsafeRawBufferPointer) -> Void)?
    /// Called once when the peer closes or the stream fails (see ``LoopStreamEnd``).
    public var onEnd: ((LoopStream, LoopStreamEnd) -> Void)?
    /// Called when the output, after going over ``LoopBufferLimits/pauseReadingAbove``, fell to
    /// ``LoopBufferLimits/resumeReadingBelow`` (reading resumes then): a proxy resumes the other side here.
    public var onWritable: ((LoopStream) -> Void)?
    /// Called when the output goes over ``LoopBufferLimits/pauseReadingAbove`` (the peer is not draining):
    /// a proxy pauses the other side here.
    public var onFull: ((LoopStream) -> Void)?
    /// Whether the stream stops reading its own peer while its output is over the pause mark (default
    /// true: a peer that sends without reading the answers is slowed down). A proxy turns it off and
    /// pauses the stream that feeds this one instead (``onFull``, ``onWritable``): pausing both ends of
    /// one socket pair would let two peers that each wait for the other to read stall for good.
    public var pausesOwnReading = true
    /// Called once the socket is closed, however that happened (the server forgets the stream).
    var onClosed: (() -> Void)?

    private init(loop: EventLoop, limits: LoopBufferLimits, state: State) {
        self.loop = loop
        self.limits = limits
        self.state = state
    }

    /// The peer's address (nil until a connect has connected).
    public var remoteAddress: SocketAddress? { address.withLock { $0 } }

    private var peer: String { remoteAddress?.description ?? plan?.name ?? "?" }

    /// Bytes waiting to be written. On the loop.
    public var bufferedOutputBytes: Int {
        loop.preconditionInLoop("LoopStream.bufferedOutputBytes")
        return output.count
    }

    /// Whether reading is paused (by ``pauseReading()`` or by backpressure). On the loop.
    public var isReadingPaused: Bool {
        loop.preconditionInLoop("LoopStream.isReadingPaused")
        return pausedByUser || pausedByBackpressure
    }

    /// Whether the socket is closed. On the loop.
    public var isClosed: Bool {
        loop.preconditionInLoop("LoopStream.isClosed")
        if case .closed = state { return true }
        return false
    }

    // MARK: Accepting

    /// An accepted socket `fd` (owned from now on) of a server, on `loop`: TLS when `tls` is given.
    /// Call ``start()`` on the loop once the callbacks are set.
    static func accepted(fd: Int32, tls: TLSServerContext?, loop: EventLoop, limits: LoopBufferLimits) -> LoopStream {
        let stream = LoopStream(loop: loop, limits: limits, state: tls == nil ? .ready : .handshaking)
        let remote = SocketAddress.of(fd, peer: true)
        stream.address.withLock { $0 = remote }
        if let tls {
            if let ssl = tls.newSSL() {
                if SSL_set_fd(ssl, fd) == 1 {
                    SSL_set_accept_state(ssl)
                    stream.transport = TLSLoopTransport(fd: fd, ssl: ssl, operation: "TLS handshake with client \(remote)")
                } else {
                    SSL_free(ssl)
                }
            }
            if stream.transport == nil { closeDescriptor(fd) }
        } else {
            stream.transport = TCPLoopTransport(fd: fd, peer: remote.description)
        }
        return stream
    }

    /// Starts an accepted stream (on its loop): registers it and runs the TLS handshake; then
    /// ``onReady``, or ``onEnd`` with the failure.
    func start() {
        loop.preconditionInLoop()
        guard let transport else {
            return fail(NetError(.tls, operation: "TLS handshake with client \(peer)", "SSL_new or SSL_set_fd failed: \(openSSLErrors())"))
        }
        do {
            registration = try loop.register(transport.fd, interest: EPOLLIN.rawValue, self)
        } catch {
            return fail(error)
        }
        if case .handshaking = state { return handshake() }
        onReady?(self)
    }

    // MARK: Connecting

    /// Opens a stream to `host:port` on `loop`: resolves the name (on a helper thread, so the loop never
    /// blocks; a numeric address at once), connects without blocking to each address in turn, and runs a
    /// TLS handshake verified as `tls` says (nil: plain TCP; SNI and the certificate's name are
    /// `tls.serverName ?? host`). `completion` runs on the loop with the ready stream (set its callbacks
    /// there) or the error (`.timedOut` after `timeout`).
    public static func connect(host: String, port: UInt16, tls: TLSClientConfiguration?, on loop: EventLoop,
                               timeout: Duration = .seconds(10), limits: LoopBufferLimits = LoopBufferLimits(),
                               completion: @escaping @Sendable (Result<LoopStream, NetError>) -> Void) {
        let stream = LoopStream(loop: loop, limits: limits, state: .connecting)
        let name = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let operation = "connect to \(name)"
        let resolved: @Sendable (Result<[ResolvedAddress], NetError>) -> Void = { result in
            loop.execute {
                stream.plan = ConnectPlan(name: name, addresses: [], next: 0, lastError: nil, tls: tls, timer: nil, completion: completion)
                switch result {
                case .failure(let error): stream.connectFailed(error)
                case .success(let addresses): stream.begin(addresses, host: host, timeout: timeout)
                }
            }
        }
        guard port != 0 else {
            return resolved(.failure(NetError(.invalidArgument, operation: operation, "port 0 cannot be connected to; give the server's port")))
        }
        let resolve: @Sendable () -> Void = {
            resolved(Result { () throws(NetError) in try ResolvedAddress.resolve(host: host, port: port, passive: false, operation: operation) })
        }
        if isNumericAddress(host) { return resolve() }
        do {
            try NetThread.detached(name: "relaytrace.resolve", resolve)
        } catch {
            resolved(.failure(error))
        }
    }

    private func begin(_ addresses: [ResolvedAddress], host: String, timeout: Duration) {
        plan?.addresses = addresses
        plan?.timer = loop.scheduleOnLoop(at: .now.advanced(by: timeout)) { [self] in
            plan?.timer = nil
            connectFailed(NetError(.timedOut, operation: "connect to \(plan?.name ?? host)",
                                   "no connection\(plan?.tls == nil ? "" : " and TLS handshake") within \(timeout); the server is slow or gone"))
        }
        hostName = host
        connectNext()
    }

    private var hostName = ""

    private func connectNext() {
        guard var p = plan, case .connecting = state else { return }
        while p.next < p.addresses.count {
            let address = p.addresses[p.next]
            p.next += 1
            plan = p
            let operation = "connect to \(p.name) (\(address.address))"
            do throws(NetError) {
                let (fd, pending) = try TCP.beginConnect(address, operation: operation)
                transport = TCPLoopTransport(fd: fd, peer: address.address.description)
                do {
                    registration = try loop.register(fd, interest: EPOLLOUT.rawValue, self)
                } catch {
                    releaseSocket()
                    throw error
                }
                if !pending { connected() }
                return
            } catch {
                p.lastError = error
                plan = p
            }
        }
        connectFailed(p.lastError ?? NetError(.connect, operation: "connect to \(p.name)", "no address to connect to"))
    }

    private func connectFinished() {
        guard let transport, let p = plan else { return }
        do throws(NetError) {
            try TCP.completeConnect(transport.fd, operation: "connect to \(p.name)")
        } catch {
            releaseSocket()
            plan?.lastError = error
            return connectNext()
        }
        connected()
    }

    private func connected() {
        guard let tcp = transport, let p = plan else { return }
        let remote = SocketAddress.of(tcp.fd, peer: true)
        address.withLock { $0 = remote }
        guard let tls = p.tls else { return connectSucceeded() }
        let name = tls.serverName ?? hostName
        let operation = "TLS handshake with \(name) at \(remote)"
        do throws(NetError) {
            let ssl = try makeClientSSL(descriptor: tcp.fd, name: name, configuration: tls, operation: operation)
            transport = TLSLoopTransport(fd: tcp.fd, ssl: ssl, operation: operation)
            (tcp as? TCPLoopTransport)?.disown()
        } catch {
            return connectFailed(error)
        }
        state = .handshaking
        handshake()
    }

    private func connectSucceeded() {
        guard let p = plan else { return }
        if let t = p.timer { loop.cancelOnLoop(t) }
        plan = nil
        state = .ready
        updateInterest()
        p.completion(.success(self))
        // Decrypted bytes that came with the handshake are inside OpenSSL, where epoll cannot see them.
        if transport?.hasBufferedInput == true { loop.soon { [self] in readable() } }
    }

    private func connectFailed(_ error: NetError) {
        guard let p = plan else { return }
        if let t = p.timer { loop.cancelOnLoop(t) }
        plan = nil
        releaseSocket()
        state = .closed
        p.completion(.failure(error))
    }

    private func handshake() {
        guard let transport else { return }
        switch transport.handshake() {
        case .bytes:
            handshakeWantsWrite = false
            if plan != nil { return connectSucceeded() }
            state = .ready
            updateInterest()
            onReady?(self)
            if transport.hasBufferedInput { readable() }
        case .wantRead:
            handshakeWantsWrite = false
            updateInterest()
        case .wantWrite:
            handshakeWantsWrite = true
            updateInterest()
        case .failed(let error):
            if plan != nil { return connectFailed(error) }
            fail(error)
        case .end:
            let error = tlsHandshakeEnded("TLS handshake with \(peer)")
            if plan != nil { return connectFailed(error) }
            fail(error)
        }
    }

    // MARK: Operations (on the loop)

    /// Queues `bytes` for writing (they go out in this loop iteration, after the current callback).
    /// - Returns: nil, or the error when the output went over ``LoopBufferLimits/maxBufferedOutput``:
    ///   the stream was then dropped (closed; ``onEnd`` is not called), or when it is not open.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> NetError? {
        loop.preconditionInLoop("LoopStream.write")
        guard !bytes.isEmpty else { return nil }
        switch state {
        case .ready, .handshaking, .connecting: break
        case .lingering, .closed:
            return NetError(.closed, operation: "write to \(peer)", "the stream is closing or closed")
        }
        output.append(bytes)
        if output.count > limits.maxBufferedOutput {
            let error = NetError(.write, operation: "write to \(peer)",
                                 "\(output.count) bytes wait to be written, over the limit of \(limits.maxBufferedOutput): the peer is not reading; connection dropped")
            close()
            return error
        }
        if output.count > limits.pauseReadingAbove && !overPauseMark {
            overPauseMark = true
            if pausesOwnReading {
                pausedByBackpressure = true
                updateInterest()
            }
            onFull?(self)
        }
        scheduleFlush()
        return nil
    }

    /// Queues a copy of `bytes` (see ``write(_:)-([UInt8])``).
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> NetError? {
        write(Array(bytes))
    }

    /// Stops reading this peer (TCP then slows it down) until ``resumeReading()``. On the loop.
    public func pauseReading() {
        loop.preconditionInLoop("LoopStream.pauseReading")
        pausedByUser = true
        updateInterest()
    }

    /// Reads again after ``pauseReading()`` (backpressure from the output buffer still applies).
    public func resumeReading() {
        loop.preconditionInLoop("LoopStream.resumeReading")
        guard pausedByUser else { return }
        pausedByUser = false
        updateInterest()
        // What OpenSSL decrypted while reading was paused is not seen by epoll.
        if transport?.hasBufferedInput == true { loop.soon { [self] in readable() } }
    }

    /// Ends the stream gracefully: what is queued is written; then, with `shutdownSending`, this side's
    /// sending is shut (TLS close_notify, TCP FIN); with `readUntilEnd` the stream reads and discards
    /// until the peer closes, else it closes at once. At most `timeout` in all. No callback follows.
    public func finish(shutdownSending: Bool, readUntilEnd: Bool, timeout: Duration) {
        loop.preconditionInLoop("LoopStream.finish")
        switch state {
        case .closed, .lingering: return
        case .connecting, .handshaking: return close()
        case .ready: break
        }
        state = .lingering
        lingerShutdown = shutdownSending
        lingerReads = readUntilEnd && !readEnded
        pausedByUser = false
        pausedByBackpressure = false
        onBytes = nil
        onEnd = nil
        onWritable = nil
        onFull = nil
        onReady = nil
        lingerTimer = loop.scheduleOnLoop(at: .now.advanced(by: timeout)) { [self] in
            lingerTimer = nil
            close()
        }
        if output.isEmpty { flushedWhileLingering() }
        updateInterest()
    }

    /// Closes the socket now (what is unwritten is lost). No callback follows. Idempotent.
    public func close() {
        if let t = lingerTimer { loop.cancelOnLoop(t) }
        lingerTimer = nil
        if let p = plan {
            if let t = p.timer { loop.cancelOnLoop(t) }
            plan = nil
        }
        releaseSocket()
        output = OutputBuffer()
        onBytes = nil
        onEnd = nil
        onWritable = nil
        onFull = nil
        onReady = nil
        if case .closed = state { return }
        state = .closed
        let closed = onClosed
        onClosed = nil
        closed?()
    }

    /// The server is stopping: the owner hears of it as a failure.
    func serverStopping() {
        if case .closed = state { return }
        if case .lingering = state { return close() }
        fail(NetError(.closed, operation: "serve \(peer)", "the server stopped"))
    }

    // MARK: Inside

    private func fail(_ error: NetError) {
        let end = onEnd
        close()
        end?(self, .failed(error))
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.soon { [self] in flush() }
    }

    /// At most this many bytes per write call (a constant: TLS retries must not shrink).
    static let writeChunk = 256 * 1024

    private func flush() {
        flushScheduled = false
        guard let transport else { return }
        switch state {
        case .ready, .lingering: break
        case .connecting, .handshaking, .closed: return
        }
        writing: while !output.isEmpty && !writeWantsRead {
            switch output.withPrefix(Self.writeChunk, { transport.write($0) }) {
            case .bytes(let n) where n > 0:
                output.consume(n)
            case .bytes, .wantWrite, .end:
                break writing
            case .wantRead:
                writeWantsRead = true
            case .failed(let error):
                if case .lingering = state { return close() }
                // The peer is gone (reset, broken pipe); what it sent before (a close frame, say) is
                // still handed on first.
                drainBeforeFailing()
                guard case .ready = state else { return }
                return fail(error)
            }
        }
        if output.isEmpty, case .lingering = state { return flushedWhileLingering() }
        if overPauseMark && output.count <= limits.resumeReadingBelow {
            overPauseMark = false
            let wasPaused = pausedByBackpressure
            pausedByBackpressure = false
            updateInterest()
            // What OpenSSL decrypted before reading paused is not seen by epoll.
            if wasPaused && transport.hasBufferedInput { loop.soon { [self] in readable() } }
            onWritable?(self)
        } else {
            updateInterest()
        }
    }

    private func flushedWhileLingering() {
        if lingerShutdown && !shutDownSending {
            shutDownSending = true
            transport?.shutdownWrite()
        }
        if !lingerReads { return close() }
        updateInterest()
    }

    private var wantsToRead: Bool {
        switch state {
        case .connecting, .closed: false
        case .handshaking: !handshakeWantsWrite
        case .lingering: lingerReads
        case .ready: !pausedByUser && !pausedByBackpressure && !readEnded
        }
    }

    private func updateInterest() {
        guard let registration, transport != nil else { return }
        var mask: UInt32 = 0
        if (wantsToRead && !readWantsWrite) || writeWantsRead { mask |= EPOLLIN.rawValue }
        switch state {
        case .connecting:
            mask |= EPOLLOUT.rawValue
        case .handshaking:
            if handshakeWantsWrite { mask |= EPOLLOUT.rawValue }
        case .ready, .lingering, .closed:
            if (!output.isEmpty && !writeWantsRead) || readWantsWrite { mask |= EPOLLOUT.rawValue }
        }
        loop.setInterest(registration, mask)
    }

    private func readable() {
        guard let transport else { return }
        var rounds = 0
        while wantsToRead && !readWantsWrite && self.transport === transport {
            rounds += 1
            switch transport.read(loop.readBuffer) {
            case .bytes(let n):
                if n == 0 { return }
                if case .ready = state { onBytes?(self, UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<n])) }
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
                if case .lingering = state { return close() }
                readEnded = true
                updateInterest()
                let end = onEnd
                onEnd = nil
                end?(self, .endOfStream)
                return
            case .failed(let error):
                if case .lingering = state { return close() }
                return fail(error)
            }
        }
    }

    /// Reads what is left in the socket (and in OpenSSL) before a failure is reported.
    private func drainBeforeFailing() {
        guard let transport, !readEnded else { return }
        for _ in 0..<64 {
            guard case .ready = state, self.transport === transport else { return }
            guard case .bytes(let n) = transport.read(loop.readBuffer), n > 0 else { return }
            onBytes?(self, UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<n]))
        }
    }

    private func releaseSocket() {
        if let registration { loop.deregister(registration) }
        registration = nil
        transport?.close()
        transport = nil
        readWantsWrite = false
        writeWantsRead = false
    }

    private func socketError() -> NetError? {
        guard let fd = transport?.fd else { return nil }
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length) == 0, soError != 0 else { return nil }
        return NetError.system(.read, "read from \(peer)", soError, "the connection failed")
    }
}

extension LoopStream: LoopReadiness {
    func ready(_ events: UInt32) {
        switch state {
        case .connecting: return connectFinished()
        case .handshaking: return handshake()  // an error or hang-up too: the step reports it
        case .closed: return
        case .ready, .lingering: break
        }
        let failed = events & EPOLLERR.rawValue != 0
        let hangUp = events & EPOLLHUP.rawValue != 0
        if failed || (hangUp && !wantsToRead) {
            // An error, or a hang-up while not reading (paused, or the end already seen): nothing more
            // can be written. What the peer sent before (a close frame, say) is still handed on, even
            // while paused: the connection is over, so it is the last of it.
            if case .lingering = state { return close() }
            let error = socketError()
            drainBeforeFailing()
            guard case .ready = state else { return }
            return fail(error ?? NetError(.read, operation: "read from \(peer)", "the connection was reset"))
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
        if plan != nil { return connectFailed(NetError(.closed, operation: "connect to \(peer)", "the event loop stopped")) }
        if case .lingering = state { return close() }
        fail(NetError(.closed, operation: "serve \(peer)", "the event loop stopped"))
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

/// A listening socket whose accepted connections become ``LoopStream``s on the loops of a group (each
/// stream on one loop for its whole life; the acceptor on the first). ``WebSocketServer`` is one over
/// this; a proxy uses it directly.
///
/// For each accepted socket, on its loop, `onStream` is called with the stream before it starts (set its
/// callbacks there: ``LoopStream/onReady`` follows once TCP is accepted, after the TLS handshake for TLS).
/// On `EMFILE` and the like the acceptor logs and pauses for 100 ms instead of spinning. ``stop()`` stops
/// accepting, fails every stream still open (``LoopStream/onEnd`` with "the server stopped") and stops the
/// loops it made itself.
public final class LoopStreamServer: Sendable {
    /// The listening socket's address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The bound port.
    public var port: UInt16 { localAddress.port }
    /// The loops serving the streams.
    public let group: EventLoopGroup

    private let ownsGroup: Bool
    private let acceptor: Acceptor
    private let streams = Locked<[ObjectIdentifier: LoopStream]>([:])
    private let stopped = Atomic<Bool>(false)

    /// Binds `host:port` (0: an ephemeral port) and starts accepting.
    /// - Parameters:
    ///   - tls: the server identity (TLS on every stream); nil: plain TCP.
    ///   - limits: output buffering and backpressure of every stream.
    ///   - group: the loops to serve on; nil starts ``EventLoopGroup/defaultThreadCount`` loops, stopped by
    ///     ``stop()``.
    ///   - log: called with accept failures.
    ///   - onStream: called on the stream's loop for each accepted socket, before it starts.
    /// - Throws: ``NetError`` when the address cannot be bound or the loops cannot start.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                limits: LoopBufferLimits = LoopBufferLimits(), group: EventLoopGroup? = nil,
                log: (@Sendable (String) -> Void)? = nil, onStream: @escaping @Sendable (LoopStream) -> Void) throws(NetError) {
        let listener = try TCPListener(host: host, port: port, backlog: 1024)
        localAddress = listener.localAddress
        if let group {
            self.group = group
            ownsGroup = false
        } else {
            self.group = try EventLoopGroup(name: "relaytrace.server")
            ownsGroup = true
        }
        acceptor = Acceptor(listener: listener, loop: self.group.loops[0], log: log)
        let registry = streams
        let group = self.group
        acceptor.onAccept = { fd in
            let loop = group.next()
            let begin: @Sendable () -> Void = {
                let stream = LoopStream.accepted(fd: fd, tls: tls, loop: loop, limits: limits)
                let id = ObjectIdentifier(stream)
                registry.withLock { $0[id] = stream }
                stream.onClosed = { registry.withLock { _ = $0.removeValue(forKey: id) } }
                onStream(stream)
                stream.start()
            }
            if loop.inLoop { begin() } else { loop.execute(begin) }
        }
        let acceptor = self.acceptor
        let started = DispatchSemaphore(value: 0)
        let failure = Locked<NetError?>(nil)
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

    /// How many accepted streams are open.
    public var connectionCount: Int { streams.withLock { $0.count } }

    /// Stops accepting, fails every open stream, and stops the loops when the server made them. Waits
    /// for all of it; never call it from one of the server's loops. Idempotent.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        precondition(!group.loops.contains { $0.inLoop }, "LoopStreamServer.stop() must not run on one of its event loops")
        let done = DispatchSemaphore(value: 0)
        let acceptor = self.acceptor
        acceptor.loop.execute {
            acceptor.stop()
            done.signal()
        }
        done.wait()
        let registry = streams
        for loop in group.loops {
            loop.execute {
                let mine = registry.withLock { all in all.values.filter { $0.loop === loop } }
                for stream in mine { stream.serverStopping() }
                done.signal()
            }
        }
        for _ in group.loops { done.wait() }
        if ownsGroup { group.stop() }
    }
}

/// The listening socket on one loop: accepts until `EAGAIN` and hands each socket on; on `EMFILE` and the
/// like it logs and pauses accepting for 100 ms instead of spinning.
private final class Acceptor: LoopReadiness, @unchecked Sendable {
    // Thread-safety: `@unchecked` because `registration`, `stopped` and `onAccept` are touched only on
    // `loop` (start, stop and readiness run there; `onAccept` is set before `start` is posted).
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

