import Dispatch
import Net
import Synchronization

/// One thread that handles events one at a time, in the order they are posted, plus events scheduled for
/// a moment of the real monotonic clock. Every machine a driver runs is touched only from here, so the
/// machine needs no lock of its own on the per-frame path and the trace's order is the machine's order.
final class SerialLoop<Event: Sendable>: Sendable {
    private struct State {
        var queue: [Event] = []
        var head = 0
        var timers: [(at: ContinuousClock.Instant, seq: UInt64, event: Event)] = []
        var seq: UInt64 = 0
        var stopped = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let thread = Mutex<NetThread?>(nil)

    /// Starts the loop thread; `handle` runs on it for every event.
    init(name: String, handle: @escaping @Sendable (Event) -> Void) throws(NetError) {
        let t = try NetThread(name: name) { [self] in run(handle) }
        thread.withLock { $0 = t }
    }

    /// Queues `event` to be handled after everything posted before it.
    func post(_ event: Event) {
        state.withLock { s in
            guard !s.stopped else { return }
            s.queue.append(event)
        }
        wake.signal()
    }

    /// Queues `event` to be handled once the monotonic clock reaches `at`.
    func schedule(_ event: Event, at: ContinuousClock.Instant) {
        state.withLock { s in
            guard !s.stopped else { return }
            s.seq += 1
            s.timers.append((at, s.seq, event))
        }
        wake.signal()
    }

    /// Stops the loop after the event being handled, drops what is queued, and waits for the thread
    /// (unless called from the loop itself).
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
        let t = thread.withLock { t -> NetThread? in
            defer { t = nil }
            return t
        }
        if !isLoopThread { t?.join() }
    }

    private let loopThreadID = Mutex<pthread_t?>(nil)
    private var isLoopThread: Bool {
        guard let id = loopThreadID.withLock({ $0 }) else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    private func run(_ handle: @Sendable (Event) -> Void) {
        loopThreadID.withLock { $0 = pthread_self() }
        while true {
            let next = state.withLock { s -> (event: Event?, wait: Duration?, stop: Bool) in
                if s.stopped { return (nil, nil, true) }
                let now = ContinuousClock.now
                if let i = s.timers.indices.min(by: { (s.timers[$0].at, s.timers[$0].seq) < (s.timers[$1].at, s.timers[$1].seq) }),
                   s.timers[i].at <= now {
                    return (s.timers.remove(at: i).event, nil, false)
                }
                if s.head < s.queue.count {
                    let e = s.queue[s.head]
                    s.head += 1
                    if s.head == s.queue.count || s.head > 4096 {
                        s.queue.removeFirst(s.head)
                        s.head = 0
                    }
                    return (e, nil, false)
                }
                let wait = s.timers.map(\.at).min().map { $0 - now }
                return (nil, wait, false)
            }
            if next.stop { return }
            if let e = next.event {
                handle(e)
                continue
            }
            if let wait = next.wait {
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(max(wait.nanoseconds, 100_000))))
            } else {
                wake.wait()
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
