#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Trace

/// `-` as a trace path: stdin is copied to an unlinked temporary file (under `$TMPDIR`, default /tmp),
/// bounded by the disk rather than memory, and read from there (the reader needs random access for the
/// trailer and index). The file disappears when the process ends.
enum StdinSpool {
    static func spool() throws(TraceError) -> String {
        let dir = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(dir)/relaytrace-stdin-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            let e = errno
            throw TraceError(.io, "cannot create a temporary file in \(dir) to hold stdin: \(String(cString: strerror(e)))")
        }
        let path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                unlink(path)
                throw TraceError(.io, "reading stdin failed: \(String(cString: strerror(e)))")
            }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + done, n - done) }
                if w < 0 {
                    if errno == EINTR { continue }
                    let e = errno
                    unlink(path)
                    throw TraceError(.io, "writing the stdin copy to \(path) failed: \(String(cString: strerror(e)))")
                }
                done += w
            }
        }
        return path
    }
}
