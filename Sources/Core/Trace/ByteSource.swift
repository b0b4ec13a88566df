#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a `TraceReader` gets its bytes: random access by offset. A source whose `size` is nil is a
/// stream (e.g. stdin): the reader then only scans forward and reports no index.
public protocol TraceByteSource: AnyObject {
    /// The total size in bytes, or nil when unknown (a pipe).
    var size: UInt64? { get }
    /// Up to `count` bytes starting at `offset`; fewer only at the end of the data.
    func read(at offset: UInt64, count: Int) throws(TraceError) -> [UInt8]
}

/// A trace held in memory.
public final class MemoryByteSource: TraceByteSource {
    /// The bytes.
    public let bytes: [UInt8]
    /// Wraps `bytes`.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    /// `bytes.count`.
    public var size: UInt64? { UInt64(bytes.count) }
    /// A slice of `bytes` (clamped to the end).
    public func read(at offset: UInt64, count: Int) throws(TraceError) -> [UInt8] {
        guard offset < UInt64(bytes.count), count > 0 else { return [] }
        let start = Int(offset)
        return Array(bytes[start..<min(bytes.count, start + min(count, bytes.count - start))])
    }
}

/// A trace file read with `pread(2)`.
public final class FileByteSource: TraceByteSource {
    private let fd: Int32
    /// The file's size when it was opened (a growing file is read up to this size).
    public let size: UInt64?
    /// The path it was opened from.
    public let path: String

    /// Opens `path` read-only. Throws `.io` with the system's reason (ENOENT etc. in `errno`).
    public init(path: String) throws(TraceError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            throw TraceError(.io, "cannot open \(path): \(String(cString: strerror(e)))", errno: e)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw TraceError(.io, "cannot stat \(path): \(String(cString: strerror(e)))", errno: e)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw TraceError(.io, "\(path) is a directory, not a trace file", errno: EISDIR)
        }
        self.fd = fd
        self.size = (st.st_mode & S_IFMT) == S_IFREG ? UInt64(st.st_size) : nil
    }

    deinit { close(fd) }

    /// Up to `count` bytes at `offset`, via `pread(2)` (retried on EINTR and short reads).
    public func read(at offset: UInt64, count: Int) throws(TraceError) -> [UInt8] {
        guard count > 0 else { return [] }
        var failure: Int32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: count) { buf, initialized in
            var done = 0
            while done < count {
                let r = pread(fd, buf.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if r < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if r == 0 { break }
                done += r
            }
            initialized = done
        }
        if failure != 0 {
            throw TraceError(.io, offset: offset, "read from \(path) failed: \(String(cString: strerror(failure)))", errno: failure)
        }
        return out
    }
}

extension TraceError {
    /// An error carrying the system `errno` that caused it (kept in the message and `systemErrno`).
    init(_ code: Code, offset: UInt64? = nil, _ message: String, errno: Int32?) {
        self.init(code, offset: offset, message)
        self.systemErrno = errno
    }
}
