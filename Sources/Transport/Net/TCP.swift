import Glibc
import Synchronization
import Sync

/// A numeric socket address: `127.0.0.1:8080` or `[::1]:8080`.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// The numeric host (`127.0.0.1`, `::1`), without brackets.
    public var host: String
    /// The port.
    public var port: UInt16
    /// Whether the address is IPv6.
    public var isIPv6: Bool

    /// An address.
    public init(host: String, port: UInt16, isIPv6: Bool) {
        self.host = host
        self.port = port
        self.isIPv6 = isIPv6
    }

    /// `host:port`, with the host in brackets for IPv6.
    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The numeric form of a `sockaddr` (via `getnameinfo`), or nil when it is not IPv4/IPv6.
    init?(_ address: UnsafePointer<sockaddr>, _ length: socklen_t) {
        let family = Int32(address.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6 else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: 32)
        let rc = getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                             NI_NUMERICHOST | NI_NUMERICSERV)
        guard rc == 0 else { return nil }
        let hostText = host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let serviceText = service.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        guard let port = UInt16(serviceText) else { return nil }
        self.init(host: hostText, port: port, isIPv6: family == AF_INET6)
    }

    /// The local or remote address of a connected socket.
    static func of(_ fd: Int32, peer: Bool) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                peer ? getpeername(fd, sa, &length) : getsockname(fd, sa, &length)
            }
        }
        guard rc == 0 else { return SocketAddress(host: "?", port: 0, isIPv6: false) }
        return withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length) }
        } ?? SocketAddress(host: "?", port: 0, isIPv6: false)
    }
}

/// Resolved addresses of `host:port` (`getaddrinfo`, TCP), in the resolver's order.
struct ResolvedAddress {
    var family: Int32
    var bytes: [UInt8]
    var length: socklen_t

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    var address: SocketAddress {
        withSockaddr { SocketAddress($0, $1) } ?? SocketAddress(host: "?", port: 0, isIPv6: family == AF_INET6)
    }

    static func resolve(host: String, port: UInt16, passive: Bool, operation: String) throws(NetError) -> [ResolvedAddress] {
        guard !host.isEmpty, !host.utf8.contains(0) else {
            throw NetError(.invalidArgument, operation: operation, "host \"\(host)\" is empty or has a NUL byte; give a name or a numeric address")
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        var rc: Int32
        repeat {
            rc = getaddrinfo(host, String(port), &hints, &list)
        } while rc == EAI_SYSTEM && errno == EINTR
        guard rc == 0 else {
            let reason = gai_strerror(rc).map { String(cString: $0) } ?? "error \(rc)"
            throw NetError(.resolve, operation: operation, errno: rc == EAI_SYSTEM ? errno : nil,
                           "cannot resolve \"\(host)\": \(reason); check the host name (or use a numeric address)")
        }
        defer { freeaddrinfo(list) }
        var result: [ResolvedAddress] = []
        var node = list
        while let info = node {
            let entry = info.pointee
            if let addr = entry.ai_addr, entry.ai_family == AF_INET || entry.ai_family == AF_INET6 {
                let bytes = Array(UnsafeRawBufferPointer(start: addr, count: Int(entry.ai_addrlen)))
                result.append(ResolvedAddress(family: entry.ai_family, bytes: bytes, length: entry.ai_addrlen))
            }
            node = entry.ai_next
        }
        guard !result.isEmpty else {
            throw NetError(.resolve, operation: operation, "\"\(host)\" has no IPv4 or IPv6 address")
        }
        return result
    }
}

/// Sets an integer socket option; a failure is a `.socket` error naming the option.
func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ label: String, _ operation: String) throws(NetError) {
    var v = value
    if setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) != 0 {
        throw NetError.system(.socket, "\(operation) (setting \(label))", errno)
    }
}

/// Sets `O_NONBLOCK` and `FD_CLOEXEC` on a descriptor.
func makeNonBlockingAndCloseOnExec(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL)
    if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    let fdFlags = fcntl(fd, F_GETFD)
    if fdFlags >= 0 { _ = fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) }
}

/// Closes a descriptor, ignoring EINTR (on Linux the descriptor is released even then).
func closeDescriptor(_ fd: Int32) {
    _ = Glibc.close(fd)
}

/// Namespace for opening TCP connections.
public enum TCP {
    /// Opens a TCP connection to `host:port`: resolves with `getaddrinfo` (IPv4 and IPv6), tries each
    /// address in order with a non-blocking connect bounded by what is left of `timeout`, and sets
    /// `TCP_NODELAY`. The socket stays non-blocking (every later wait is a `poll(2)` with a timeout).
    /// - Throws: ``NetError`` `.resolve`, `.connectionRefused` (nothing listens there), `.timedOut`,
    ///   `.connect` or `.socket`; when every address fails, the last address's error.
    public static func connect(host: String, port: UInt16, timeout: Duration) throws(NetError) -> TCPStream {
        let operation = "connect to \(host.contains(":") ? "[\(host)]" : host):\(port)"
        guard port != 0 else {
            throw NetError(.invalidArgument, operation: operation, "port 0 cannot be connected to; give the server's port")
        }
        let deadline = Deadline(timeout)
        let addresses = try ResolvedAddress.resolve(host: host, port: port, passive: false, operation: operation)
        var lastError: NetError?
        for address in addresses {
            do {
                return try connect(address, deadline: deadline, operation: "\(operation) (\(address.address))")
            } catch {
                lastError = error
                if error.kind == .timedOut { break }
            }
        }
        throw lastError ?? NetError(.connect, operation: operation, "no address to connect to")
    }

    private static func connect(_ address: ResolvedAddress, deadline: Deadline, operation: String) throws(NetError) -> TCPStream {
        let (fd, pending) = try beginConnect(address, operation: operation)
        do throws(NetError) {
            if pending { _ = try waitUntilReady(fd, Int16(POLLOUT), deadline, operation) }
            try completeConnect(fd, operation: operation)
            return TCPStream(descriptor: fd)
        } catch {
            closeDescriptor(fd)
            throw error
        }
    }

    /// Starts a non-blocking connect to `address`: a new non-blocking, close-on-exec socket and
    /// `connect(2)`. Returns the descriptor and whether the connect is still in progress (then wait until
    /// the socket is writable and call ``completeConnect(_:operation:)``).
    static func beginConnect(_ address: ResolvedAddress, operation: String) throws(NetError) -> (fd: Int32, pending: Bool) {
        let type = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let fd = socket(address.family, type, Int32(IPPROTO_TCP))
        guard fd >= 0 else { throw NetError.system(.socket, "\(operation) (creating the socket)", errno) }
        let rc = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if rc == 0 { return (fd, false) }
        let code = errno
        guard code == EINPROGRESS || code == EINTR else {
            closeDescriptor(fd)
            throw connectError(code, operation)
        }
        return (fd, true)
    }

    /// Finishes a connect once its socket is writable: its outcome (`SO_ERROR`), then `TCP_NODELAY`.
    /// The caller closes `fd` when this throws.
    static func completeConnect(_ fd: Int32, operation: String) throws(NetError) {
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length) == 0 else {
            throw NetError.system(.connect, operation, errno)
        }
        if soError != 0 { throw connectError(soError, operation) }
        try setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY", operation)
    }

    private static func connectError(_ code: Int32, _ operation: String) -> NetError {
        if code == ECONNREFUSED {
            return NetError.system(.connectionRefused, operation, code, "nothing listens on that port; start the server or check the port")
        }
        if code == ETIMEDOUT {
            return NetError.system(.timedOut, operation, code, "the host did not answer")
        }
        return NetError.system(.connect, operation, code, "check the address and that the network is reachable")
    }
}

/// A connected TCP socket (non-blocking underneath; every wait is a `poll(2)` with the caller's timeout).
public final class TCPStream: ByteStream {
    /// The socket descriptor (owned: closed when the stream is deinitialised).
    public let descriptor: Int32
    /// This end's address.
    public let localAddress: SocketAddress
    /// The peer's address.
    public let remoteAddress: SocketAddress

    private let isClosed = Atomic<Bool>(false)
    private let writeLock = Locked<Void>(())

    init(descriptor: Int32) {
        self.descriptor = descriptor
        self.localAddress = SocketAddress.of(descriptor, peer: false)
        self.remoteAddress = SocketAddress.of(descriptor, peer: true)
    }

    deinit { closeDescriptor(descriptor) }

    /// Whether ``close()`` was called.
    public var closed: Bool { isClosed.load(ordering: .acquiring) }

    /// Reads (see ``ByteStream/read(into:timeout:)``).
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(NetError) -> Int {
        let deadline = Deadline(timeout)
        while true {
            if closed { throw closedError("read") }
            let n = recv(descriptor, buffer.baseAddress, buffer.count, 0)
            if n > 0 { return n }
            if n == 0 {
                if closed { throw closedError("read") }
                return 0
            }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                _ = try waitUntilReady(descriptor, Int16(POLLIN), deadline, "read from \(remoteAddress)")
            default:
                if closed { throw closedError("read") }
                throw NetError.system(.read, "read from \(remoteAddress)", code, "the connection failed; reconnect")
            }
        }
    }

    /// Writes all bytes (see ``ByteStream/write(_:timeout:)``); writers are serialised.
    public func write(_ bytes: UnsafeRawBufferPointer, timeout: Duration?) throws(NetError) {
        let deadline = Deadline(timeout)
        try writeLock.withLock { _ throws(NetError) in
            var offset = 0
            while offset < bytes.count {
                if closed { throw closedError("write") }
                let n = send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if n >= 0 {
                    offset += n
                    continue
                }
                let code = errno
                switch code {
                case EINTR:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    _ = try waitUntilReady(descriptor, Int16(POLLOUT), deadline, "write to \(remoteAddress)")
                default:
                    if closed { throw closedError("write") }
                    throw NetError.system(.write, "write to \(remoteAddress)", code, "the connection failed; reconnect")
                }
            }
        }
    }

    /// Shuts down both directions (wakes blocked readers and writers). Idempotent.
    public func close() {
        if isClosed.exchange(true, ordering: .acquiringAndReleasing) { return }
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Shuts down the sending direction only (the peer reads end of stream); reading goes on.
    public func shutdownWrite() {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    private func closedError(_ what: String) -> NetError {
        NetError(.closed, operation: "\(what) on \(remoteAddress)", "the stream was closed by this end; open a new connection")
    }
}

/// A listening TCP socket (`SO_REUSEADDR`; IPv6 sockets are IPv6-only). Port 0 binds an ephemeral port,
/// reported by ``port``.
public final class TCPListener: Sendable {
    /// The listening descriptor (owned).
    public let descriptor: Int32
    /// The bound address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let isClosed = Atomic<Bool>(false)

    /// The bound port.
    public var port: UInt16 { localAddress.port }

    /// Binds and listens on `host:port` (the first address `getaddrinfo` gives for `host`).
    /// - Throws: ``NetError`` `.resolve`, or `.socket` with errno (e.g. `EADDRINUSE`).
    public init(host: String, port: UInt16 = 0, backlog: Int32 = 128) throws(NetError) {
        let operation = "listen on \(host.contains(":") ? "[\(host)]" : host):\(port)"
        let addresses = try ResolvedAddress.resolve(host: host, port: port, passive: true, operation: operation)
        let address = addresses[0]
        let type = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let fd = socket(address.family, type, Int32(IPPROTO_TCP))
        guard fd >= 0 else { throw NetError.system(.socket, "\(operation) (creating the socket)", errno) }
        var pipeFDs: [Int32] = [-1, -1]
        do throws(NetError) {
            try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR", operation)
            if address.family == AF_INET6 {
                try setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1, "IPV6_V6ONLY", operation)
            }
            if address.withSockaddr({ bind(fd, $0, $1) }) != 0 {
                let code = errno
                throw NetError.system(.socket, "\(operation) (bind)", code,
                                      code == EADDRINUSE ? "the port is taken; pick another or pass 0 for an ephemeral one" : "")
            }
            if listen(fd, backlog) != 0 { throw NetError.system(.socket, "\(operation) (listen)", errno) }
            if pipe(&pipeFDs) != 0 {
                throw NetError.system(.socket, "\(operation) (creating the wake pipe)", errno)
            }
            for end in pipeFDs { makeNonBlockingAndCloseOnExec(end) }
        } catch {
            closeDescriptor(fd)
            throw error
        }
        descriptor = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        localAddress = SocketAddress.of(fd, peer: false)
    }

    deinit {
        closeDescriptor(descriptor)
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
    }

    /// Waits for and accepts one connection (non-blocking, `TCP_NODELAY`).
    /// - Throws: ``NetError`` `.timedOut`, `.closed` once ``close()`` was called (also when it is called
    ///   while waiting), `.accept` with errno (e.g. `EMFILE`).
    public func accept(timeout: Duration?) throws(NetError) -> TCPStream {
        let operation = "accept on \(localAddress)"
        let deadline = Deadline(timeout)
        while true {
            if isClosed.load(ordering: .acquiring) {
                throw NetError(.closed, operation: operation, "the listener was closed")
            }
            switch acceptNow() {
            case .accepted(let fd):
                return TCPStream(descriptor: fd)
            case .failed(let error):
                throw error
            case .wouldBlock:
                if try waitUntilReady(descriptor, Int16(POLLIN), deadline, operation, wake: wakeRead) == .woken {
                    throw NetError(.closed, operation: operation, "the listener was closed")
                }
            }
        }
    }

    /// What one non-blocking ``acceptNow()`` did.
    enum AcceptOutcome {
        /// A connection: its descriptor, non-blocking, close-on-exec, `TCP_NODELAY` (owned by the caller).
        case accepted(Int32)
        /// No connection is waiting.
        case wouldBlock
        /// Accepting failed (e.g. `EMFILE`: too many open files).
        case failed(NetError)
    }

    /// Accepts one waiting connection without blocking (the event loop's acceptor calls it until
    /// `.wouldBlock`).
    func acceptNow() -> AcceptOutcome {
        let operation = "accept on \(localAddress)"
        while true {
            // accept4 is not visible through Swift's Glibc module: the flags follow at once (a descriptor
            // inherited by a process spawned in between would only hold the connection open longer).
            let fd = Glibc.accept(descriptor, nil, nil)
            if fd >= 0 {
                makeNonBlockingAndCloseOnExec(fd)
                do throws(NetError) {
                    try setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY", operation)
                } catch {
                    closeDescriptor(fd)
                    return .failed(error)
                }
                return .accepted(fd)
            }
            let code = errno
            switch code {
            case EINTR, ECONNABORTED, EPROTO:
                continue
            case EAGAIN, EWOULDBLOCK:
                return .wouldBlock
            default:
                return .failed(NetError.system(.accept, operation, code,
                                               code == EMFILE || code == ENFILE ? "too many open files; close connections or raise the limit" : ""))
            }
        }
    }

    /// Stops listening: a thread blocked in ``accept(timeout:)`` returns `.closed`. Idempotent.
    public func close() {
        if isClosed.exchange(true, ordering: .acquiringAndReleasing) { return }
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
    }
}
