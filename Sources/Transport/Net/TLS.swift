import COpenSSL
import Glibc
import Synchronization
import Sync

/// How a TLS client checks the server (`wss`). Verification is on by default.
public struct TLSClientConfiguration: Hashable, Sendable {
    /// Whether to verify the server's certificate chain and its name (default true). Turn it off only
    /// for a throw-away test server: without verification TLS protects against nobody.
    public var verifyPeer: Bool
    /// A PEM file of trusted CA certificates; nil trusts the system store (`/etc/ssl/certs`).
    public var trustedCAFile: String?
    /// The name sent in SNI and checked against the certificate; nil uses the host connected to (a
    /// numeric address is checked against the certificate's IP entries and sends no SNI).
    public var serverName: String?

    /// A configuration; the default verifies against the system store and the connected host's name.
    public init(verifyPeer: Bool = true, trustedCAFile: String? = nil, serverName: String? = nil) {
        self.verifyPeer = verifyPeer
        self.trustedCAFile = trustedCAFile
        self.serverName = serverName
    }
}

/// OpenSSL signals a write to a closed socket with SIGPIPE (its socket BIO uses write(2)); TLS streams
/// ignore the signal process-wide once, so a vanished peer is an EPIPE error instead of process death.
private let ignoreSIGPIPE: Void = {
    _ = signal(SIGPIPE, SIG_IGN)
}()

/// The error queue of OpenSSL on this thread, as one line (emptied).
func openSSLErrors() -> String {
    var lines: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        lines.append(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }
    return lines.isEmpty ? "no OpenSSL error detail" : lines.joined(separator: "; ")
}

/// Whether `host` is a numeric IPv4 or IPv6 address.
func isNumericAddress(_ host: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
}

// OpenSSL macros that Swift cannot import (they expand to SSL_ctrl / SSL_CTX_ctrl calls).
private let ctrlSetTLSExtHostname: Int32 = 55      // SSL_CTRL_SET_TLSEXT_HOSTNAME
private let ctrlMode: Int32 = 33                   // SSL_CTRL_MODE
private let ctrlSetMinProtoVersion: Int32 = 123    // SSL_CTRL_SET_MIN_PROTO_VERSION
private let tls12Version = 0x0303                  // TLS1_2_VERSION
private let optionIgnoreUnexpectedEOF: UInt64 = 1 << 7  // SSL_OP_IGNORE_UNEXPECTED_EOF
private let fileTypePEM: Int32 = 1                 // SSL_FILETYPE_PEM

/// A new `SSL_CTX` with the settings every side shares: TLS 1.2 at least; writes may be retried from a
/// moved buffer; a TCP close without close_notify reads as end of stream (the WebSocket close handshake,
/// not TLS, tells a complete conversation from a cut one: a cut one ends with close code 1006).
private func makeContext(server: Bool, operation: String) throws(NetError) -> OpaquePointer {
    _ = ignoreSIGPIPE
    ERR_clear_error()
    guard let method = server ? TLS_server_method() : TLS_client_method(), let ctx = SSL_CTX_new(method) else {
        throw NetError(.tls, operation: operation, "SSL_CTX_new failed: \(openSSLErrors())")
    }
    _ = SSL_CTX_ctrl(ctx, ctrlSetMinProtoVersion, tls12Version, nil)
    _ = SSL_CTX_ctrl(ctx, ctrlMode, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
    _ = SSL_CTX_set_options(ctx, optionIgnoreUnexpectedEOF)
    return ctx
}

/// A server's TLS identity (certificate chain and private key), loaded once and shared by every
/// accepted connection.
public final class TLSServerContext: Sendable {
    /// The `SSL_CTX`; OpenSSL allows `SSL_new` from many threads, the mutex makes that explicit.
    private let context: Locked<OpaquePointer>

    /// Loads a PEM certificate chain (server certificate first) and its PEM private key.
    /// - Throws: ``NetError`` `.tls` naming the file that could not be loaded or a key that does not
    ///   match the certificate.
    public init(certificateFile: String, privateKeyFile: String) throws(NetError) {
        let operation = "load the TLS server identity"
        let ctx = try makeContext(server: true, operation: operation)
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
            SSL_CTX_free(ctx)
            throw NetError(.tls, operation: operation,
                           "cannot load certificate chain \(certificateFile): \(openSSLErrors()); give a PEM file, server certificate first")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, privateKeyFile, fileTypePEM) == 1 else {
            SSL_CTX_free(ctx)
            throw NetError(.tls, operation: operation,
                           "cannot load private key \(privateKeyFile): \(openSSLErrors()); give an unencrypted PEM key")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            SSL_CTX_free(ctx)
            throw NetError(.tls, operation: operation,
                           "private key \(privateKeyFile) does not match certificate \(certificateFile): \(openSSLErrors())")
        }
        context = Locked(ctx)
    }

    deinit {
        context.withLock { SSL_CTX_free($0) }
    }

    /// A new server-side `SSL` for one accepted connection.
    func newSSL() -> OpaquePointer? {
        context.withLock { SSL_new($0) }
    }
}

/// The outcome of one non-blocking OpenSSL call (``sslStep(_:_:)``).
enum SSLStep: Sendable {
    case done(Int)
    case wantRead
    case wantWrite
    case endOfStream
    case failed(code: Int32, errno: Int32, detail: String, verifyResult: Int)
}

/// One OpenSSL call on `ssl`, with the error queue cleared before and read after. `body` returns a byte
/// count on success, nil on failure (then `SSL_get_error` says why). The blocking stream calls it under
/// its lock; the event loop on its own thread.
func sslStep(_ ssl: OpaquePointer, _ body: (OpaquePointer) -> Int?) -> SSLStep {
    ERR_clear_error()
    errno = 0
    // The return value for SSL_get_error: any value <= 0 means failure.
    if let n = body(ssl) { return .done(n) }
    let code = SSL_get_error(ssl, 0)
    switch code {
    case SSL_ERROR_WANT_READ: return .wantRead
    case SSL_ERROR_WANT_WRITE: return .wantWrite
    case SSL_ERROR_ZERO_RETURN: return .endOfStream
    case SSL_ERROR_SYSCALL where errno == 0 && ERR_peek_error() == 0: return .endOfStream
    default:
        let savedErrno = errno
        return .failed(code: code, errno: savedErrno, detail: openSSLErrors(), verifyResult: SSL_get_verify_result(ssl))
    }
}

/// The error of a failed OpenSSL call (not a handshake's certificate check, see ``tlsHandshakeFailure``).
func tlsFailure(_ code: Int32, _ errnoValue: Int32, _ detail: String, _ operation: String) -> NetError {
    if code == SSL_ERROR_SYSCALL && errnoValue != 0 {
        return NetError.system(.tls, operation, errnoValue, "the connection failed; reconnect")
    }
    return NetError(.tls, operation: operation, "OpenSSL error \(code): \(detail)")
}

/// The error of a failed handshake step: a certificate that did not verify, else ``tlsFailure``.
func tlsHandshakeFailure(_ code: Int32, _ errnoValue: Int32, _ detail: String, verifyResult: Int, _ operation: String) -> NetError {
    if verifyResult != Int(X509_V_OK) {
        let reason = X509_verify_cert_error_string(verifyResult).map { String(cString: $0) } ?? "error \(verifyResult)"
        return NetError(.certificateVerification, operation: operation,
                        "the server's certificate did not verify: \(reason); trust its CA (trustedCAFile) or connect with the name it was issued for")
    }
    return tlsFailure(code, errnoValue, detail, operation)
}

/// The peer closed the TCP connection in the middle of a TLS handshake.
func tlsHandshakeEnded(_ operation: String) -> NetError {
    NetError(.tls, operation: operation, "the peer closed the connection during the handshake (does it speak TLS? does it trust us?)")
}

/// A configured client `SSL` on `descriptor`: SNI and host-name verification with `name`, chain
/// verification against `configuration.trustedCAFile` or the system store (unless `verifyPeer` is
/// false), in connect state. Its own `SSL_CTX` reference keeps the context alive.
func makeClientSSL(descriptor: Int32, name: String, configuration: TLSClientConfiguration,
                   operation: String) throws(NetError) -> sending OpaquePointer {
    let ctx = try makeContext(server: false, operation: operation)
    defer { SSL_CTX_free(ctx) }
    if configuration.verifyPeer {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let file = configuration.trustedCAFile {
            guard SSL_CTX_load_verify_file(ctx, file) == 1 else {
                throw NetError(.tls, operation: operation,
                               "cannot load trusted CA file \(file): \(openSSLErrors()); give a PEM file of CA certificates")
            }
        } else if SSL_CTX_set_default_verify_paths(ctx) != 1 {
            throw NetError(.tls, operation: operation,
                           "cannot load the system trust store: \(openSSLErrors()); install ca-certificates or pass trustedCAFile")
        }
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
    }
    guard let ssl = SSL_new(ctx) else {
        throw NetError(.tls, operation: operation, "SSL_new failed: \(openSSLErrors())")
    }
    var configured = SSL_set_fd(ssl, descriptor) == 1
    if isNumericAddress(name) {
        if configuration.verifyPeer && configured {
            configured = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1
        }
    } else if configured {
        let sniSet = name.withCString { cName in
            SSL_ctrl(ssl, ctrlSetTLSExtHostname, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: cName))
        }
        configured = sniSet == 1 && (!configuration.verifyPeer || SSL_set1_host(ssl, name) == 1)
    }
    guard configured else {
        SSL_free(ssl)
        throw NetError(.tls, operation: operation, "cannot configure the connection for \(name): \(openSSLErrors())")
    }
    SSL_set_connect_state(ssl)
    return ssl
}

/// Lets `SSL_write` return after writing part of the buffer (whole records): the event loop writes
/// what the socket takes and keeps the rest.
func enablePartialWrites(_ ssl: OpaquePointer) {
    _ = SSL_ctrl(ssl, ctrlMode, Int(SSL_MODE_ENABLE_PARTIAL_WRITE), nil)
}

/// TLS over a ``TCPStream`` through the system OpenSSL, on the non-blocking socket: `WANT_READ` waits
/// for the socket to be readable, `WANT_WRITE` for it to be writable (either can follow a read or a
/// write), always within the caller's timeout.
///
/// Threading: the `SSL` object lives in a `Mutex`, held only for each non-blocking OpenSSL call, never
/// while waiting; so one thread can block reading while another writes (writers are serialised).
public final class TLSStream: ByteStream {
    private let tcp: TCPStream
    private let ssl: Locked<OpaquePointer>
    private let writeLock = Locked<Void>(())
    private let isClosed = Atomic<Bool>(false)

    /// The peer's address.
    public var remoteAddress: SocketAddress { tcp.remoteAddress }

    private init(tcp: TCPStream, ssl: sending OpaquePointer) {
        self.tcp = tcp
        self.ssl = Locked(ssl)
    }

    deinit {
        ssl.withLock { SSL_free($0) }
    }

    /// Runs the client handshake over `tcp`: SNI and host-name verification with
    /// `configuration.serverName ?? host`, chain verification against `configuration.trustedCAFile` or
    /// the system store (unless `verifyPeer` is false).
    /// - Throws: ``NetError`` `.certificateVerification` (with OpenSSL's reason, e.g. "unable to get local
    ///   issuer certificate" or "hostname mismatch"), `.tls`, `.timedOut`; `tcp` is closed on failure.
    public static func connect(over tcp: TCPStream, host: String, configuration: TLSClientConfiguration = TLSClientConfiguration(),
                               timeout: Duration) throws(NetError) -> TLSStream {
        let name = configuration.serverName ?? host
        let operation = "TLS handshake with \(name) at \(tcp.remoteAddress)"
        let deadline = Deadline(timeout)
        let handle: OpaquePointer
        do throws(NetError) {
            handle = try makeClientSSL(descriptor: tcp.descriptor, name: name, configuration: configuration, operation: operation)
        } catch {
            tcp.close()
            throw error
        }
        let stream = TLSStream(tcp: tcp, ssl: handle)
        try stream.handshake(deadline: deadline, operation: operation)
        return stream
    }

    /// Runs the server handshake over an accepted `tcp` with `context`'s identity.
    /// - Throws: ``NetError`` `.tls` (e.g. the client does not trust the certificate and aborted),
    ///   `.timedOut`; `tcp` is closed on failure.
    public static func accept(over tcp: TCPStream, context: TLSServerContext, timeout: Duration) throws(NetError) -> TLSStream {
        let operation = "TLS handshake with client \(tcp.remoteAddress)"
        let deadline = Deadline(timeout)
        guard let handle = context.newSSL() else {
            tcp.close()
            throw NetError(.tls, operation: operation, "SSL_new failed: \(openSSLErrors())")
        }
        let stream = TLSStream(tcp: tcp, ssl: handle)
        let configured: Bool = stream.ssl.withLock { ssl in
            guard SSL_set_fd(ssl, tcp.descriptor) == 1 else { return false }
            SSL_set_accept_state(ssl)
            return true
        }
        guard configured else {
            tcp.close()
            throw NetError(.tls, operation: operation, "SSL_set_fd failed: \(openSSLErrors())")
        }
        try stream.handshake(deadline: deadline, operation: operation)
        return stream
    }

    private func handshake(deadline: Deadline, operation: String) throws(NetError) {
        do throws(NetError) {
            while true {
                let step = call { ssl in SSL_do_handshake(ssl) == 1 ? 1 : nil }
                switch step {
                case .done: return
                case .wantRead: _ = try waitUntilReady(tcp.descriptor, Int16(POLLIN), deadline, operation)
                case .wantWrite: _ = try waitUntilReady(tcp.descriptor, Int16(POLLOUT), deadline, operation)
                case .endOfStream:
                    throw tlsHandshakeEnded(operation)
                case .failed(let code, let errnoValue, let detail, let verifyResult):
                    throw verifyResult != Int(X509_V_OK)
                        ? tlsHandshakeFailure(code, errnoValue, detail, verifyResult: verifyResult, operation)
                        : failure(code, errnoValue, detail, operation)
                }
            }
        } catch {
            tcp.close()
            throw error
        }
    }

    /// One OpenSSL call under the lock (``sslStep(_:_:)``).
    private func call(_ body: (OpaquePointer) -> Int?) -> SSLStep {
        ssl.withLock { (ssl: inout OpaquePointer) -> SSLStep in
            let handle = ssl
            return sslStep(handle, body)
        }
    }

    private func failure(_ code: Int32, _ errnoValue: Int32, _ detail: String, _ operation: String) -> NetError {
        if isClosed.load(ordering: .acquiring) {
            return NetError(.closed, operation: operation, "the stream was closed by this end; open a new connection")
        }
        return tlsFailure(code, errnoValue, detail, operation)
    }

    /// Reads decrypted bytes (see ``ByteStream/read(into:timeout:)``).
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(NetError) -> Int {
        let operation = "TLS read from \(tcp.remoteAddress)"
        guard buffer.count > 0, let base = buffer.baseAddress else { return 0 }
        let deadline = Deadline(timeout)
        while true {
            if isClosed.load(ordering: .acquiring) {
                throw NetError(.closed, operation: operation, "the stream was closed by this end; open a new connection")
            }
            let step = call { ssl in
                var n = 0
                return SSL_read_ex(ssl, base, buffer.count, &n) == 1 ? n : nil
            }
            switch step {
            case .done(let n): return n
            case .endOfStream: return 0
            case .wantRead: _ = try waitUntilReady(tcp.descriptor, Int16(POLLIN), deadline, operation)
            case .wantWrite: _ = try waitUntilReady(tcp.descriptor, Int16(POLLOUT), deadline, operation)
            case .failed(let code, let errnoValue, let detail, _): throw failure(code, errnoValue, detail, operation)
            }
        }
    }

    /// Encrypts and writes all bytes (see ``ByteStream/write(_:timeout:)``); writers are serialised.
    public func write(_ bytes: UnsafeRawBufferPointer, timeout: Duration?) throws(NetError) {
        let operation = "TLS write to \(tcp.remoteAddress)"
        guard bytes.count > 0, let base = bytes.baseAddress else { return }
        let deadline = Deadline(timeout)
        try writeLock.withLock { _ throws(NetError) in
            var offset = 0
            while offset < bytes.count {
                if isClosed.load(ordering: .acquiring) {
                    throw NetError(.closed, operation: operation, "the stream was closed by this end; open a new connection")
                }
                let step = call { ssl in
                    var n = 0
                    return SSL_write_ex(ssl, base + offset, bytes.count - offset, &n) == 1 ? n : nil
                }
                switch step {
                case .done(let n): offset += n
                case .wantRead: _ = try waitUntilReady(tcp.descriptor, Int16(POLLIN), deadline, operation)
                case .wantWrite: _ = try waitUntilReady(tcp.descriptor, Int16(POLLOUT), deadline, operation)
                case .endOfStream:
                    throw NetError(.write, operation: operation, "the peer closed the TLS session; reconnect")
                case .failed(let code, let errnoValue, let detail, _):
                    throw failure(code, errnoValue, detail, operation)
                }
            }
        }
    }

    /// Sends close_notify when no write is in progress (without waiting for the peer's), then shuts the
    /// TCP connection down. Idempotent; wakes blocked readers and writers.
    public func close() {
        if isClosed.exchange(true, ordering: .acquiringAndReleasing) { return }
        _ = writeLock.withLockIfAvailable { _ in
            _ = call { ssl in SSL_shutdown(ssl) >= 0 ? 0 : nil }
        }
        tcp.close()
    }
}
