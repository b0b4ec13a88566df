#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed socket or TLS operation: what was being done, the `errno` (when a system call failed), and
/// what to do about it.
public struct NetError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a closed set of cases (switch on it; the message is for people).
    public enum Kind: Hashable, Sendable {
        /// A host name could not be resolved (`getaddrinfo`).
        case resolve
        /// The peer refused the TCP connection (`ECONNREFUSED`): nothing listens on that port.
        case connectionRefused
        /// A connect failed for another reason (unreachable network, reset, ...).
        case connect
        /// The operation did not complete before its timeout.
        case timedOut
        /// Creating, configuring, binding or listening on a socket failed.
        case socket
        /// Accepting a connection failed.
        case accept
        /// Reading failed (reset by the peer, ...).
        case read
        /// Writing failed (broken pipe, reset by the peer, ...).
        case write
        /// The stream or listener was closed by this end; nothing more can be done with it.
        case closed
        /// A TLS operation failed (handshake, record layer, configuration, key or certificate files).
        case tls
        /// The peer's certificate did not verify (untrusted issuer, expired, wrong host name, ...).
        case certificateVerification
        /// An argument cannot be used (a host with a NUL byte, port 0 for a connect, ...).
        case invalidArgument
    }

    /// What went wrong.
    public var kind: Kind
    /// What was being done, e.g. `connect to 127.0.0.1:8443`.
    public var operation: String
    /// The `errno` of the failed system call, when one failed.
    public var errno: Int32?
    /// What happened and what to do.
    public var message: String

    /// Makes an error.
    public init(_ kind: Kind, operation: String, errno: Int32? = nil, _ message: String) {
        self.kind = kind
        self.operation = operation
        self.errno = errno
        self.message = message
    }

    /// An error for a failed system call: the message is `strerror(code)` followed by `advice`.
    static func system(_ kind: Kind, _ operation: String, _ code: Int32, _ advice: String = "") -> NetError {
        var text = "\(call(code))"
        if !advice.isEmpty { text += "; " + advice }
        return NetError(kind, operation: operation, errno: code, text)
    }

    /// `strerror` text of an errno value.
    static func call(_ code: Int32) -> String {
        guard let s = strerror(code) else { return "errno \(code)" }
        return String(cString: s)
    }

    /// `<operation> failed[ (errno N)]: <message>`.
    public var description: String {
        var s = "\(operation) failed"
        if let errno { s += " (errno \(errno))" }
        return s + ": " + message
    }
}
