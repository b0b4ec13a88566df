#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import WatchLink

#if canImport(Glibc)
private func closeDescriptor(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#else
private func closeDescriptor(_ fd: Int32) -> Int32 { Darwin.close(fd) }
#endif

/// A UDP socket bound to 127.0.0.1: the watch link's real, unreliable datagram transport (no ordering,
/// no delivery guarantee: exactly what WCSession gives, which WatchLink is built for).
///
/// Blocking I/O with an explicit timeout (`poll(2)`); no threads of its own. One owner at a time (not
/// `Sendable`): a driver loop sends and receives on the same thread. Closed on deinit or ``close()``.
public final class UDPSocket {
    /// The largest datagram sent or received: 65,507 bytes (the IPv4 UDP payload limit).
    public static let maxDatagramBytes = 65_507

    private var fd: Int32
    /// The local port (bound at init; 0 asks the kernel for a free one).
    public let port: UInt16

    /// Binds a UDP socket to 127.0.0.1:`port` (0: any free port).
    public init(port: UInt16 = 0) throws(UDPError) {
        #if canImport(Glibc)
        let s = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #else
        let s = socket(AF_INET, SOCK_DGRAM, 0)
        #endif
        guard s >= 0 else { throw UDPError(operation: .socket, errno: errno, port: port) }
        var addr = UDPSocket.loopback(port: port)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let e = errno
            _ = closeDescriptor(s)
            throw UDPError(operation: .bind, errno: e, port: port)
        }
        var actual = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) }
        }
        guard named == 0 else {
            let e = errno
            _ = closeDescriptor(s)
            throw UDPError(operation: .bind, errno: e, port: port)
        }
        fd = s
        self.port = UInt16(bigEndian: actual.sin_port)
    }

    deinit { close() }

    /// Closes the socket (idempotent).
    public func close() {
        if fd >= 0 {
            _ = closeDescriptor(fd)
            fd = -1
        }
    }

    /// Sends `bytes` as one datagram to 127.0.0.1:`port`.
    public func send(_ bytes: [UInt8], to port: UInt16) throws(UDPError) {
        guard fd >= 0 else { throw UDPError(operation: .send, errno: EBADF, port: port) }
        guard bytes.count <= UDPSocket.maxDatagramBytes else {
            throw UDPError(operation: .send, errno: EMSGSIZE, port: port, detail: "\(bytes.count) bytes > \(UDPSocket.maxDatagramBytes)")
        }
        var addr = UDPSocket.loopback(port: port)
        let sent = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == bytes.count else { throw UDPError(operation: .send, errno: sent < 0 ? errno : EMSGSIZE, port: port) }
    }

    /// Waits at most `timeout` for a datagram; nil when none arrived in time (a zero timeout only checks).
    public func receive(timeout: Duration) throws(UDPError) -> UDPDatagram? {
        guard fd >= 0 else { throw UDPError(operation: .receive, errno: EBADF, port: port) }
        let ms = max(0, min(Int64(Int32.max), timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let r = poll(&p, 1, Int32(ms))
            if r < 0 {
                if errno == EINTR { continue }
                throw UDPError(operation: .receive, errno: errno, port: port)
            }
            if r == 0 { return nil }
            break
        }
        var buffer = [UInt8](repeating: 0, count: UDPSocket.maxDatagramBytes)
        var from = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = buffer.withUnsafeMutableBytes { b in
            withUnsafeMutablePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &len) }
            }
        }
        guard n >= 0 else { throw UDPError(operation: .receive, errno: errno, port: port) }
        buffer.removeSubrange(n...)
        return UDPDatagram(bytes: buffer, fromPort: UInt16(bigEndian: from.sin_port))
    }

    static func loopback(port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        return a
    }
}

/// One received datagram.
public struct UDPDatagram: Sendable, Hashable {
    /// Its bytes.
    public var bytes: [UInt8]
    /// The sender's port on 127.0.0.1.
    public var fromPort: UInt16
}

/// A failed socket operation: which, on which port, the `errno`, and what to do.
public struct UDPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation.
    public enum Operation: String, Sendable, Hashable {
        /// `socket(2)`.
        case socket
        /// `bind(2)` / `getsockname(2)`.
        case bind
        /// `sendto(2)`.
        case send
        /// `poll(2)` / `recvfrom(2)`.
        case receive
    }

    /// What failed.
    public var operation: Operation
    /// The `errno` value.
    public var errno: Int32
    /// The port concerned (the local port for socket/bind/receive, the peer's for send).
    public var port: UInt16
    /// Extra detail, if any.
    public var detail: String?

    /// An error.
    public init(operation: Operation, errno: Int32, port: UInt16, detail: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.port = port
        self.detail = detail
    }

    /// What, where, and what to do.
    public var description: String {
        let reason = String(cString: strerror(errno))
        let hint: String = switch operation {
        case .socket: "check the process's file-descriptor limit"
        case .bind: "pick another port or pass 0 for a free one"
        case .send: "the datagram was not sent; the watch link resends by its own rules"
        case .receive: "the socket is unusable; close it and bind a new one"
        }
        return "UDP \(operation.rawValue) on 127.0.0.1:\(port) failed: \(reason) (errno \(errno))"
            + (detail.map { ", \($0)" } ?? "") + "; \(hint)"
    }
}

/// The watch link over a ``UDPSocket``: datagrams encoded with ``WatchWire``.
public final class WatchUDPLink {
    /// The socket.
    public let socket: UDPSocket
    /// The peer's port on 127.0.0.1.
    public var peerPort: UInt16

    /// A link on `socket` to `peerPort`.
    public init(socket: UDPSocket, peerPort: UInt16) {
        self.socket = socket
        self.peerPort = peerPort
    }

    /// Sends `datagram` to the peer.
    public func send(_ datagram: WatchDatagram) throws(UDPError) {
        try socket.send(WatchWire.encode(datagram), to: peerPort)
    }

    /// Waits at most `timeout` for a datagram and decodes it: nil on timeout, `.failure` when the bytes
    /// are not a watch datagram (the caller logs and drops it: the link tolerates garbage).
    public func receive(timeout: Duration) throws(UDPError) -> Result<WatchDatagram, WatchWireError>? {
        guard let d = try socket.receive(timeout: timeout) else { return nil }
        do throws(WatchWireError) {
            return .success(try WatchWire.decode(d.bytes))
        } catch {
            return .failure(error)
        }
    }
}
