public import WebSocket
import Synchronization
import Sync

/// A blocking WebSocket connection after the opening handshake: a ``ByteStream`` driven through the
/// sans-IO ``WebSocketConnection`` codec. Made by ``WebSocketClient/connect(url:headers:tls:timeout:configuration:closeTimeout:maskingKeys:)``
/// (servers use ``WebSocketServer`` and ``LoopWebSocket`` on event loops instead).
///
/// Threading (the live driver's shape): one thread calls ``receive(timeout:)`` in a loop; any thread
/// may send, ping or close meanwhile. The codec sits in a `Mutex` held only to feed it bytes or take its
/// output; a second lock orders writes, so frames reach the wire in the order the codec produced them
/// (pongs and the close echo included). No actor, no Dispatch on the per-frame path.
///
/// Close handshake timeouts live here (the codec has no clock): after this end sends a close frame it
/// waits at most ``closeTimeout`` for the peer's, then drops the TCP connection (the result is close
/// 1006); a client whose handshake completed waits at most ``closeTimeout`` for the server to close TCP
/// first (RFC 6455 §7.1.1), a server closes TCP at once.
public final class WebSocketChannel: Sendable {
    private struct ReaderState {
        var pending: [WebSocketEvent] = []
        var buffer: [UInt8]
        var finished = false
    }

    /// Bytes read from the stream per read call (64 KiB).
    static let readChunk = 64 * 1024

    /// The transport.
    public let stream: any ByteStream
    /// This end's role.
    public let role: WebSocketRole
    /// How long this end waits for the peer's half of the close handshake.
    public let closeTimeout: Duration
    /// Bound on each write (nil: no bound).
    public let writeTimeout: Duration?

    private let codec: Locked<WebSocketConnection>
    private let writeLock = Locked<Void>(())
    private let reader: Locked<ReaderState>
    private let closeDeadline = Locked<ContinuousClock.Instant?>(nil)
    private let flushRequested = Atomic<Bool>(false)
    /// Set once the transport may go as soon as queued output is written (see ``closeWhenWritten()``).
    private let closeWhenFlushed = Atomic<Bool>(false)

    /// Wraps a stream whose opening handshake is done. `initialBytes` are bytes that arrived after the
    /// handshake head (the first frames); they are parsed before anything is read from the stream.
    public init(stream: any ByteStream, role: WebSocketRole, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                maskingKeys: (any MaskingKeySource)? = nil, initialBytes: [UInt8] = [],
                closeTimeout: Duration = .seconds(5), writeTimeout: Duration? = .seconds(30)) {
        self.stream = stream
        self.role = role
        self.closeTimeout = closeTimeout
        self.writeTimeout = writeTimeout
        var connection = WebSocketConnection(role: role, configuration: configuration, maskingKeys: maskingKeys)
        let events = initialBytes.isEmpty ? [] : connection.receive(initialBytes)
        self.codec = Locked(connection)
        self.reader = Locked(ReaderState(pending: events, buffer: [UInt8](repeating: 0, count: Self.readChunk)))
    }

    /// Where the connection is (open, closing after a close frame was sent, closed).
    public var state: WebSocketConnection.State { codec.withLock { $0.state } }

    /// The peer's address.
    public var remoteAddress: SocketAddress { stream.remoteAddress }

    // MARK: Sending

    /// Sends a text message (one frame, or fragments per ``WebSocketConfiguration/outboundFragmentSize``).
    /// - Throws: ``WebSocketError/send(_:)`` once closing, ``WebSocketError/transport(_:)`` when the
    ///   write fails (after a write timeout the transport is dropped; the reader sees close 1006).
    public func send(text: String) throws(WebSocketError) {
        try perform { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.send(text: text) }
    }

    /// Sends a binary message (see ``send(text:)``).
    public func send(binary: [UInt8]) throws(WebSocketError) {
        try perform { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.send(binary: binary) }
    }

    /// Sends a ping (payload at most 125 bytes); the pong arrives as a `.pong` event from ``receive(timeout:)``.
    public func ping(_ payload: [UInt8] = []) throws(WebSocketError) {
        try perform { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.ping(payload) }
    }

    /// Sends an unsolicited pong (payload at most 125 bytes), e.g. as a one-way heartbeat.
    public func pong(_ payload: [UInt8] = []) throws(WebSocketError) {
        try perform { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.pong(payload) }
    }

    /// Runs a codec operation and writes what it produced, under the write lock (so frames leave in the
    /// codec's order).
    private func perform(_ operation: (inout WebSocketConnection) throws(WebSocketSendError) -> Void) throws(WebSocketError) {
        try writeLock.withLock { _ throws(WebSocketError) in
            let bytes: [UInt8]
            do throws(WebSocketSendError) {
                bytes = try codec.withLock { (c: inout WebSocketConnection) throws(WebSocketSendError) -> [UInt8] in
                    try operation(&c)
                    return c.takeOutbound()
                }
            } catch {
                throw .send(error)
            }
            try writeLocked(bytes)
        }
        // A reader may have queued a pong while this write held the lock: it left the writing to us.
        if flushRequested.load(ordering: .sequentiallyConsistent) { flush() }
    }

    /// Writes queued codec output (pongs, the close echo), without ever waiting for the write lock: the
    /// reader calls it, and a reader waiting behind a writer that is blocked because the peer waits for
    /// us to read would deadlock. When a writer holds the lock, it flushes after it releases it (it
    /// checks `flushRequested` after unlocking; this sets it before trying the lock). Once
    /// ``closeWhenWritten()`` was called, whoever flushes closes the transport after writing.
    private func flush() {
        flushRequested.store(true, ordering: .sequentiallyConsistent)
        while flushRequested.load(ordering: .sequentiallyConsistent) {
            let acquired: Void? = writeLock.withLockIfAvailable { _ in
                flushRequested.store(false, ordering: .sequentiallyConsistent)
                let bytes = codec.withLock { $0.takeOutbound() }
                try? writeLocked(bytes)
                if closeWhenFlushed.load(ordering: .sequentiallyConsistent) { stream.close() }
            }
            if acquired == nil { return }
        }
    }

    /// Closes the transport once the codec's queued output (the close echo above all) is on the wire:
    /// at once when the write lock is free, else by the writer holding it, in the flush it does after
    /// releasing it. Closing the stream right away instead lost the close echo whenever a send was still
    /// holding the lock when the peer's close frame arrived (python websockets then saw no close frame).
    func closeWhenWritten() {
        closeWhenFlushed.store(true, ordering: .sequentiallyConsistent)
        flush()
    }

    private func writeLocked(_ bytes: [UInt8]) throws(WebSocketError) {
        guard !bytes.isEmpty else { return }
        do {
            try stream.write(bytes, timeout: writeTimeout)
        } catch {
            // A peer that is not reading: drop the connection (the reader sees 1006). A peer that reset
            // the connection (e.g. it failed ours with 1009 mid-message) may have sent a close frame
            // first: leave the socket to the reader, which reads it, or the reset, next.
            if error.kind == .timedOut { stream.close() }
            throw .transport(error)
        }
    }

    // MARK: Closing

    /// Starts the close handshake with `code` and `reason` (nil code: an empty close body) and returns at
    /// once: the receiving thread gets the `.closed` event with the peer's code, or with 1006 when the
    /// peer did not answer within ``closeTimeout`` (then the transport is dropped). Closing a connection
    /// that is already closing or closed sends nothing.
    /// - Throws: ``WebSocketError/send(_:)`` for a code that may not be sent or a reason over 123 bytes;
    ///   ``WebSocketError/transport(_:)`` when writing the close frame fails.
    public func close(code: WebSocketCloseCode? = .normalClosure, reason: String = "") throws(WebSocketError) {
        guard codec.withLock({ $0.state == .open }) else { return }
        do throws(WebSocketError) {
            try perform { (c: inout WebSocketConnection) throws(WebSocketSendError) in try c.close(code: code, reason: reason) }
        } catch {
            // Lost a race with the peer's close frame: the handshake is under way already.
            if case .send(let e) = error, e.kind == .notOpen {} else { throw error }
        }
        closeDeadline.withLock { deadline in
            if deadline == nil { deadline = ContinuousClock.now.advanced(by: closeTimeout) }
        }
    }

    /// ``close(code:reason:)``, then receives until the handshake ends, discarding messages that still
    /// arrive, for at most ``closeTimeout``: for a connection that no other thread receives on. Returns
    /// the last event (`.closed` with the peer's code, 1006 when it did not answer in time, or
    /// `.protocolError`), or nil when another thread already took it.
    @discardableResult
    public func closeAndWait(code: WebSocketCloseCode? = .normalClosure, reason: String = "") throws(WebSocketError) -> WebSocketEvent? {
        try close(code: code, reason: reason)
        return reader.withLock { state -> WebSocketEvent? in
            while true {
                let event: WebSocketEvent
                do {
                    event = try next(&state, timeout: nil)
                } catch {
                    return nil
                }
                switch event {
                case .closed, .protocolError: return event
                default: continue
                }
            }
        }
    }

    /// Drops the transport at once, without a close handshake (a receiving thread gets close 1006).
    public func abort() {
        stream.close()
    }

    // MARK: Receiving

    /// Waits for the next event: a message, a ping (already answered), a pong, and last `.closed`
    /// (the peer's code; 1006 when the transport ended without a close handshake, with the transport
    /// error as the reason) or `.protocolError` (the peer broke RFC 6455; the close frame with its code
    /// was sent).
    /// - Parameter timeout: how long to wait; nil waits without limit. A timeout loses nothing.
    /// - Throws: ``WebSocketError/transport(_:)`` with `.timedOut` when nothing came in time;
    ///   ``WebSocketError/closed(_:)`` after the last event was returned.
    public func receive(timeout: Duration? = nil) throws(WebSocketError) -> WebSocketEvent {
        try reader.withLock { state throws(WebSocketError) in try next(&state, timeout: timeout) }
    }

    private func next(_ state: inout ReaderState, timeout: Duration?) throws(WebSocketError) -> WebSocketEvent {
        let callerDeadline = Deadline(timeout)
        while true {
            if !state.pending.isEmpty {
                let event = state.pending.removeFirst()
                if state.pending.isEmpty && codec.withLock({ $0.state == .closed }) {
                    finish(&state)
                }
                return event
            }
            if state.finished {
                throw .closed("the connection is closed and its last event was returned; open a new connection")
            }
            // Replies queued by the codec (pongs, close echo) for bytes parsed earlier.
            flush()
            let closeBy = closeDeadline.withLock { $0 }
            var deadline = callerDeadline
            if let closeBy { deadline = deadline.min(Deadline(closeBy - ContinuousClock.now)) }
            let count: Int
            do {
                count = try readChunk(into: &state.buffer, deadline)
            } catch {
                if error.kind == .timedOut && !(closeBy.map { ContinuousClock.now >= $0 } ?? false) {
                    throw .transport(error)
                }
                // The close handshake timed out, or the transport failed: the connection is over (1006).
                stream.close()
                let reason = error.kind == .timedOut
                    ? "no close frame from the peer within \(closeTimeout)" : error.description
                state.pending = codec.withLock { $0.transportClosed() }.map { event in
                    if case .closed(let code, _) = event { return .closed(code: code, reason: String(reason.prefix(200))) }
                    return event
                }
                if state.pending.isEmpty { finish(&state) }
                continue
            }
            if count == 0 {
                stream.close()
                state.pending = codec.withLock { $0.transportClosed() }
                if state.pending.isEmpty { finish(&state) }
                continue
            }
            let (events, closed) = state.buffer.withUnsafeBytes { raw in
                codec.withLock { c in (c.receive(UnsafeRawBufferPointer(rebasing: raw[0..<count])), c.state == .closed) }
            }
            state.pending = events
            flush()
            if closed { closeTransport(&state) }
        }
    }

    /// After both close frames (or a protocol error): a server drops TCP at once; a client gives the
    /// server ``closeTimeout`` to do it first (RFC 6455 §7.1.1), reading and discarding until EOF.
    private func closeTransport(_ state: inout ReaderState) {
        if role == .client {
            let deadline = Deadline(closeTimeout)
            while !deadline.hasPassed {
                let n = try? readChunk(into: &state.buffer, deadline)
                guard let n, n > 0 else { break }
            }
        }
        closeWhenWritten()
    }

    private func readChunk(into buffer: inout [UInt8], _ deadline: Deadline) throws(NetError) -> Int {
        let timeout = deadline.instant.map { $0 - ContinuousClock.now }
        let outcome = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(NetError) in try stream.read(into: raw, timeout: timeout) }
        }
        return try outcome.get()
    }

    private func finish(_ state: inout ReaderState) {
        state.finished = true
        state.buffer = []
    }
}
