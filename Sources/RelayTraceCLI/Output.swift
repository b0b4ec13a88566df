#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Buffered output to a file descriptor. A write error (EPIPE when `| head` closes the pipe) marks the
/// output broken: later writes are dropped, and commands stop early and exit cleanly.
final class Output {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let limit = 64 * 1024
    /// True after a write failed (reader went away).
    private(set) var isBroken = false
    /// The errno of the failed write.
    private(set) var failure: Int32 = 0

    private let owned: Bool

    init(fd: Int32, owned: Bool = false) {
        self.fd = fd
        self.owned = owned
        buffer.reserveCapacity(limit + 4096)
    }

    /// Appends `text` (no newline added).
    func write(_ text: String) {
        guard !isBroken else { return }
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= limit { flush() }
    }

    /// Appends `bytes`.
    func write(bytes: [UInt8]) {
        guard !isBroken else { return }
        buffer.append(contentsOf: bytes)
        if buffer.count >= limit { flush() }
    }

    /// Appends `text` and a newline.
    func line(_ text: String) { write(text + "\n") }

    /// Writes out the buffer.
    func flush() {
        guard !isBroken, !buffer.isEmpty else {
            buffer.removeAll(keepingCapacity: true)
            return
        }
        var done = 0
        buffer.withUnsafeBytes { b in
            while done < b.count {
                let r = sysWrite(fd, b.baseAddress! + done, b.count - done)
                if r < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    isBroken = true
                    return
                }
                done += r
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

extension Output {
    /// Closes the descriptor of an output opened by a command (not stdout/stderr).
    func close() {
        if owned { _ = sysClose(fd) }
    }
}

private func sysClose(_ fd: Int32) -> Int32 { Glibc.close(fd) }

private func sysWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

/// What a command gets: its outputs.
struct CLIContext {
    var stdout: Output
    var stderr: Output
}
