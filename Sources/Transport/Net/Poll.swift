#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point on the monotonic clock by which a blocking operation must finish; `nil` timeout = never.
struct Deadline: Sendable {
    let instant: ContinuousClock.Instant?

    init(_ timeout: Duration?) {
        instant = timeout.map { ContinuousClock.now.advanced(by: max(.zero, $0)) }
    }

    /// The earlier of two deadlines.
    func min(_ other: Deadline) -> Deadline {
        switch (instant, other.instant) {
        case (nil, _): other
        case (_, nil): self
        case (let a?, let b?): a <= b ? self : other
        }
    }

    private init(instant: ContinuousClock.Instant?) { self.instant = instant }

    /// Milliseconds left for `poll(2)`: -1 for no deadline, 0 once passed, rounded up otherwise.
    var pollMilliseconds: Int32 {
        guard let instant else { return -1 }
        let left = instant - ContinuousClock.now
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    var hasPassed: Bool {
        guard let instant else { return false }
        return ContinuousClock.now >= instant
    }
}

/// What `waitUntilReady` saw.
enum Readiness {
    /// The descriptor is ready for the requested events (or has an error/hang-up to report).
    case ready
    /// The wake descriptor became readable (someone asked the waiter to stop).
    case woken
}

/// Waits with `poll(2)` until `fd` is ready for `events` (POLLIN / POLLOUT), restarting on EINTR with the
/// remaining time. Error and hang-up conditions count as ready: the next read/write reports them.
/// - Throws: `.timedOut` when the deadline passes first; `.socket` when poll itself fails.
func waitUntilReady(_ fd: Int32, _ events: Int16, _ deadline: Deadline, _ operation: @autoclosure () -> String,
                    wake: Int32? = nil) throws(NetError) -> Readiness {
    var fds = [pollfd(fd: fd, events: events, revents: 0)]
    if let wake { fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0)) }
    while true {
        let timeout = deadline.pollMilliseconds
        let n = fds.withUnsafeMutableBufferPointer { buf in
            poll(buf.baseAddress, nfds_t(buf.count), timeout)
        }
        if n < 0 {
            let code = errno
            if code == EINTR { continue }
            throw NetError.system(.socket, "poll while waiting to \(operation())", code)
        }
        if n == 0 {
            if deadline.hasPassed || timeout == 0 {
                throw NetError(.timedOut, operation: operation(),
                               "no progress before the timeout; the peer is slow or gone (raise the timeout if it is expected)")
            }
            continue
        }
        if fds.count > 1 && fds[1].revents != 0 { return .woken }
        if fds[0].revents != 0 { return .ready }
    }
}
