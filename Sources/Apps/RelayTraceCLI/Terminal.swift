#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Inspect
import RelayProtocol
import Trace

/// Terminal facts: colours only on a TTY and never with `NO_COLOR`; progress only on a TTY.
enum Terminal {
    /// Whether `fd` is a terminal.
    static func isTTY(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Whether `NO_COLOR` is set to a non-empty value (no-color.org).
    static var noColor: Bool {
        guard let v = getenv("NO_COLOR") else { return false }
        return v.pointee != 0
    }

    /// Whether to colour stdout for `--color auto|always|never`.
    static func useColor(_ mode: String?) -> Bool {
        if noColor { return false }
        switch mode {
        case "always": return true
        case "never": return false
        default: return isTTY(1)
        }
    }

    /// `text` in ANSI colour `code` when `on`.
    static func paint(_ text: String, _ code: String, _ on: Bool) -> String { on ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
}

/// A progress line on stderr (`\r`-rewritten), shown only when stderr is a terminal, at most a few
/// times a second, and erased at the end.
final class Progress {
    private let enabled: Bool
    private let label: String
    private let total: UInt64?
    private var last = timespec()
    private var shown = false
    private var tick = 0

    init(_ label: String, totalBytes: UInt64?) {
        enabled = Terminal.isTTY(2)
        self.label = label
        self.total = totalBytes
        clock_gettime(CLOCK_MONOTONIC, &last)
    }

    /// Reports `records` read and `bytes` of the source consumed.
    func update(records: UInt64, bytes: UInt64) {
        guard enabled else { return }
        tick += 1
        guard tick & 1023 == 0 else { return }
        report(records: records, bytes: bytes)
    }

    /// As `update`, for callers that report only every few thousand records (no call counting: the
    /// clock decides).
    func report(records: UInt64, bytes: UInt64) {
        guard enabled else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1_000_000
        guard ms >= 200 else { return }
        last = now
        var line = "\r\(label): \(records) records"
        if let total, total > 0 { line += ", \(min(100, bytes * 100 / total))%" }
        writeStderr(line + "   ")
        shown = true
    }

    /// Erases the line.
    func done() {
        if shown { writeStderr("\r\u{1B}[K") }
        shown = false
    }
}

/// Reads a trace to the end (or the records from `since` to `until`) with `body`, with a progress line
/// on a terminal; returns the error that stopped the reading (after every good record), if any. The
/// records are made on the scan's worker threads (``InspectedRecords``), or one by one by the reader when
/// `RELAYTRACE_SCAN_WORKERS` is 0.
func readAll(_ reader: TraceReader, label: String, since: Moment? = nil, until: Moment? = nil, _ body: (InspectedRecord) -> Bool) -> TraceError? {
    let progress = Progress(label, totalBytes: reader.source.size)
    defer { progress.done() }
    var n: UInt64 = 0
    let each = { (rec: InspectedRecord) -> Bool in
        n += 1
        progress.update(records: n, bytes: reader.statistics.bytesRead)
        return body(rec)
    }
    let workers = RelayTraceCommand.scanWorkers
    if workers == 0 { return InspectedRecords.plain(reader, since: since, until: until, each) }
    return InspectedRecords.read(reader, since: since, until: until, workers: workers, each)
}

extension RelayTraceCommand {
    /// Threads for reading traces: `RELAYTRACE_SCAN_WORKERS` (0 selects the plain, single-threaded
    /// route the fast one is tested against), else one per processor.
    static var scanWorkers: Int {
        if let v = getenv("RELAYTRACE_SCAN_WORKERS"), let n = Int(String(cString: v)), n >= 0 { return min(n, 64) }
        return TraceScanPlan.defaultWorkers
    }

    /// The records `frames` prints for `filter`, rendered, in order (``FrameListing``).
    static func listFrames(
        _ reader: TraceReader, _ filter: FrameFilter, render: @escaping @Sendable (InspectedRecord) -> [UInt8],
        _ body: (UInt64, [UInt8]) -> Bool
    ) -> (error: TraceError?, problems: [TraceError]) {
        let workers = scanWorkers
        if workers == 0 {
            let error = FrameListing.plain(reader, filter, render: render, body)
            return (error, reader.problems)
        }
        return FrameListing.fast(reader, filter, workers: workers, render: render, body)
    }
}

/// Writes `text` straight to fd 2 (the progress line bypasses the buffered stderr `Output`).
private func writeStderr(_ text: String) {
    var t = text
    t.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
