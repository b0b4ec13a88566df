#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

private func sysClose(_ fd: Int32) -> Int32 { close(fd) }
private func sysWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

/// Where a `TraceWriter` puts its bytes. The writer calls it from its background thread only; it hands
/// the sink over at creation and never touches it from the caller's thread again.
public protocol TraceSink: AnyObject {
    /// Appends all of `bytes` (retrying short writes); throws `.io` when that fails.
    func write(_ bytes: UnsafeRawBufferPointer) throws(TraceError)
    /// Makes what was written durable (`fdatasync`).
    func sync() throws(TraceError)
    /// Cuts the output back to `size` bytes (to remove a partly written chunk after a failure).
    func truncate(to size: UInt64) throws(TraceError)
    /// Closes the output.
    func close() throws(TraceError)
    /// Removes what was written, if the sink can (a file it created); called after a failure when the
    /// output is not worth keeping. The default does nothing.
    func discard()
}

extension TraceSink {
    /// Does nothing: most sinks cannot take back what they were given.
    public func discard() {}
}

/// A trace file written with `write(2)`.
public final class FileSink: TraceSink {
    private var fd: Int32
    /// The path.
    public let path: String
    /// The file's identity when it was created (device, inode), so `discard()` removes that file only.
    private let identity: (dev: UInt64, ino: UInt64)?

    /// Creates `path` (mode 0600: a trace is private data). Fails with `.io` (errno EEXIST) when the file
    /// exists, unless `overwrite`.
    public init(path: String, overwrite: Bool = false) throws(TraceError) {
        self.path = path
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL)
        let fd = open(path, flags, 0o600)
        guard fd >= 0 else {
            let e = errno
            throw TraceError(.io, "cannot create \(path): \(String(cString: strerror(e)))", errno: e)
        }
        self.fd = fd
        var st = stat()
        identity = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
    }

    deinit { if fd >= 0 { _ = sysClose(fd) } }

    /// `write(2)` until every byte is written (EINTR and short writes retried).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TraceError) {
        guard var p = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let r = sysWrite(fd, p, left)
            if r < 0 {
                let e = errno
                if e == EINTR { continue }
                throw TraceError(.io, "write to \(path) failed: \(String(cString: strerror(e)))", errno: e)
            }
            p += r
            left -= r
        }
    }

    /// `fdatasync(2)`.
    public func sync() throws(TraceError) {
        if fdatasync(fd) != 0 {
            let e = errno
            throw TraceError(.io, "fdatasync of \(path) failed: \(String(cString: strerror(e)))", errno: e)
        }
    }

    /// `ftruncate(2)` and move the write position to the new end.
    public func truncate(to size: UInt64) throws(TraceError) {
        if ftruncate(fd, off_t(size)) != 0 || lseek(fd, off_t(size), SEEK_SET) < 0 {
            let e = errno
            throw TraceError(.io, "ftruncate of \(path) failed: \(String(cString: strerror(e)))", errno: e)
        }
    }

    /// Closes the file and removes it from its path, if the path still names the regular file this
    /// sink created (never a device such as `/dev/full`, never a file put there since).
    public func discard() {
        if fd >= 0 { try? close() }
        guard let identity else { return }
        var st = stat()
        guard lstat(path, &st) == 0, UInt64(st.st_dev) == identity.dev, UInt64(st.st_ino) == identity.ino else { return }
        unlink(path)
    }

    /// `close(2)`.
    public func close() throws(TraceError) {
        guard fd >= 0 else { return }
        let r = sysClose(fd)
        fd = -1
        if r != 0 {
            let e = errno
            throw TraceError(.io, "close of \(path) failed: \(String(cString: strerror(e)))", errno: e)
        }
    }
}
