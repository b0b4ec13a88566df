#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Buffered output to a file descriptor, with every write checked. The first failed write marks the
/// output broken (`failure` holds its errno) and later writes are dropped; commands that stream can
/// stop early on `isBroken`. Whether a failure is an error is decided in one place, `finish(_:)`
/// (called for stdout and stderr by ``RelayTraceCommand/run(_:)`` and for files by `finishOutput`): a
/// closed pipe (EPIPE: `| head` went away) ends quietly, any other failure (ENOSPC, EIO, EFBIG...)
/// is reported with the output's name and makes the command exit 74.
final class Output {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// The buffer is written out when it holds this many bytes. It starts at one byte and doubles with
    /// every write-out up to 64 KiB: the first record of a listing reaches the terminal (or `| head`)
    /// as soon as it is made, a reader that went away is noticed within a few kilobytes, and a long
    /// listing still goes out in 64 KiB writes (17 more write calls per output, whatever its size).
    private var limit = 1
    private static let maxLimit = 64 * 1024
    /// What the output is, for messages: `standard output`, `standard error` or the file's path.
    let name: String
    /// True after a write failed.
    private(set) var isBroken = false
    /// The errno of the failed write (0 while none failed).
    private(set) var failure: Int32 = 0

    private let owned: Bool

    init(fd: Int32, name: String, owned: Bool = false) {
        self.fd = fd
        self.name = name
        self.owned = owned
        buffer.reserveCapacity(Self.maxLimit + 4096)
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
        limit = min(limit * 2, Self.maxLimit)
        var done = 0
        buffer.withUnsafeBytes { b in
            while done < b.count {
                let r = sysWrite(fd, b.baseAddress! + done, b.count - done)
                if r < 0 {
                    if errno == EINTR { continue }
                    broke(errno)
                    return
                }
                if r == 0 {
                    broke(EIO)  // write(2) made no progress: treat as an I/O error, do not spin
                    return
                }
                done += r
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func broke(_ e: Int32) {
        failure = e
        isBroken = true
    }

    /// True when the output broke because its reader went away (EPIPE): not an error.
    var readerWentAway: Bool { failure == EPIPE }

    /// Flushes (and closes an output the command opened), then decides: nil when every byte was written
    /// or the reader went away; otherwise prints `Error: writing NAME failed: REASON` on `stderr` (when
    /// it can) and returns `.ioError`. A file the command created is removed when writing it failed
    /// (its output can be made again; a partial file would pass for a whole one); only a regular file
    /// is ever removed (`-o /dev/full` stays).
    func finish(reportingTo stderr: Output) -> ExitCode? {
        flush()
        var removed = false
        if owned {
            if isBroken, !readerWentAway, isRegularFile { removed = unlink(name) == 0 }
            if sysClose(fd) != 0, !isBroken { broke(errno) }
        }
        guard isBroken, !readerWentAway else { return nil }
        if stderr !== self {
            stderr.line("Error: writing \(name) failed: \(String(cString: strerror(failure)))" + (removed ? "; the incomplete file was removed" : ""))
            stderr.flush()
        }
        return .ioError
    }

    private var isRegularFile: Bool {
        var st = stat()
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }
}

private func sysClose(_ fd: Int32) -> Int32 { close(fd) }

private func sysWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

/// What a command gets: its outputs.
struct CLIContext {
    var stdout: Output
    var stderr: Output

    /// The process's stdout and stderr.
    static func standard() -> CLIContext {
        CLIContext(stdout: Output(fd: 1, name: "standard output"), stderr: Output(fd: 2, name: "standard error"))
    }

    /// The exit status of a command that returned `code`: its outputs are flushed and checked, and a
    /// failed write (other than a closed pipe) turns the status into 74. A command never needs to
    /// check stdout or stderr itself; it may stop early when `stdout.isBroken`.
    func finish(_ code: ExitCode) -> ExitCode {
        let out = stdout.finish(reportingTo: stderr)
        let err = stderr.finish(reportingTo: stderr)
        return out ?? err ?? code
    }
}
