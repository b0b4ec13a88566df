import COpenSSL
import Glibc

/// What one non-blocking read, write or handshake step on a loop transport did.
enum LoopIO {
    /// Bytes moved (a handshake step that finished the handshake gives 0).
    case bytes(Int)
    /// Nothing more until the socket is readable (TLS: also after a write that needs the peer's data).
    case wantRead
    /// Nothing more until the socket is writable (TLS: also after a read that must send first).
    case wantWrite
    /// Reading: the peer closed its side (TCP EOF, TLS close_notify).
    case end
    /// The transport failed; it cannot be used any more.
    case failed(NetError)
}

/// A non-blocking byte transport owned by one event loop: plain TCP, or TLS through OpenSSL on the same
/// socket (`SSL_ERROR_WANT_READ`/`WANT_WRITE` become ``LoopIO/wantRead``/``LoopIO/wantWrite``). Used on
/// its loop only.
protocol LoopTransport: AnyObject {
    /// The socket.
    var fd: Int32 { get }
    /// Advances the TLS handshake (plain TCP: done at once).
    func handshake() -> LoopIO
    /// Reads at most `buffer.count` bytes.
    func read(_ buffer: UnsafeMutableRawBufferPointer) -> LoopIO
    /// Writes a prefix of `bytes`. After `.wantRead`/`.wantWrite` the next call must pass at least as
    /// many bytes, starting with the same ones (OpenSSL's retry rule; the loop's output buffer only grows
    /// at its end, so it does).
    func write(_ bytes: UnsafeRawBufferPointer) -> LoopIO
    /// Whether decrypted bytes wait inside the transport (epoll does not see them).
    var hasBufferedInput: Bool { get }
    /// Ends this side's sending: TLS close_notify (best effort), then TCP `SHUT_WR`.
    func shutdownWrite()
    /// Releases the socket (idempotent).
    func close()
}

/// Plain TCP on a non-blocking socket.
final class TCPLoopTransport: LoopTransport {
    let fd: Int32
    private let peer: String
    private var closed = false

    init(fd: Int32, peer: String) {
        self.fd = fd
        self.peer = peer
    }

    deinit { close() }

    func handshake() -> LoopIO { .bytes(0) }

    func read(_ buffer: UnsafeMutableRawBufferPointer) -> LoopIO {
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n > 0 { return .bytes(n) }
            if n == 0 { return .end }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wantRead
            default: return .failed(NetError.system(.read, "read from \(peer)", code, "the connection failed"))
            }
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> LoopIO {
        guard bytes.count > 0 else { return .bytes(0) }
        while true {
            let n = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return .bytes(n) }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wantWrite
            default: return .failed(NetError.system(.write, "write to \(peer)", code, "the connection failed"))
            }
        }
    }

    var hasBufferedInput: Bool { false }

    func shutdownWrite() {
        if !closed { _ = shutdown(fd, Int32(SHUT_WR)) }
    }

    func close() {
        guard !closed else { return }
        closed = true
        closeDescriptor(fd)
    }

    /// Gives the socket to another transport (TLS over it): this one no longer closes it.
    func disown() { closed = true }
}

/// TLS through OpenSSL on a non-blocking socket (server or client side, by how the `SSL` was made).
final class TLSLoopTransport: LoopTransport {
    let fd: Int32
    private let ssl: OpaquePointer
    private let operation: String
    private var closed = false
    /// After a fatal error OpenSSL forbids `SSL_shutdown`.
    private var broken = false

    /// Takes ownership of `ssl`, already bound to `fd` and in accept or connect state.
    init(fd: Int32, ssl: OpaquePointer, operation: String) {
        self.fd = fd
        self.ssl = ssl
        self.operation = operation
        enablePartialWrites(ssl)
    }

    deinit {
        close()
        SSL_free(ssl)
    }

    func handshake() -> LoopIO {
        switch sslStep(ssl, { SSL_do_handshake($0) == 1 ? 0 : nil }) {
        case .done: return .bytes(0)
        case .wantRead: return .wantRead
        case .wantWrite: return .wantWrite
        case .endOfStream:
            broken = true
            return .failed(tlsHandshakeEnded(operation))
        case .failed(let code, let errnoValue, let detail, let verifyResult):
            broken = true
            return .failed(tlsHandshakeFailure(code, errnoValue, detail, verifyResult: verifyResult, operation))
        }
    }

    func read(_ buffer: UnsafeMutableRawBufferPointer) -> LoopIO {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .bytes(0) }
        let step = sslStep(ssl) { ssl in
            var n = 0
            return SSL_read_ex(ssl, base, buffer.count, &n) == 1 ? n : nil
        }
        switch step {
        case .done(let n): return .bytes(n)
        case .wantRead: return .wantRead
        case .wantWrite: return .wantWrite
        case .endOfStream: return .end
        case .failed(let code, let errnoValue, let detail, _):
            broken = true
            return .failed(tlsFailure(code, errnoValue, detail, "TLS read on \(operation)"))
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> LoopIO {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .bytes(0) }
        let step = sslStep(ssl) { ssl in
            var n = 0
            return SSL_write_ex(ssl, base, bytes.count, &n) == 1 ? n : nil
        }
        switch step {
        case .done(let n): return .bytes(n)
        case .wantRead: return .wantRead
        case .wantWrite: return .wantWrite
        case .endOfStream:
            broken = true
            return .failed(NetError(.write, operation: "TLS write on \(operation)", "the peer closed the TLS session"))
        case .failed(let code, let errnoValue, let detail, _):
            broken = true
            return .failed(tlsFailure(code, errnoValue, detail, "TLS write on \(operation)"))
        }
    }

    var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 }

    func shutdownWrite() {
        guard !closed else { return }
        if !broken { _ = sslStep(ssl) { SSL_shutdown($0) >= 0 ? 0 : nil } }
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    func close() {
        guard !closed else { return }
        closed = true
        closeDescriptor(fd)
    }
}
