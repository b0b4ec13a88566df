import CEpoll
import Glibc
import Synchronization
import Sync

/// Something registered with an ``EventLoop`` for readiness of one descriptor. Called on the loop only.
protocol LoopReadiness: AnyObject {
    /// The descriptor is ready: `events` is the epoll mask (`EPOLLIN`, `EPOLLOUT`, `EPOLLERR`, `EPOLLHUP`,
    /// `EPOLLRDHUP`). Error and hang-up arrive whatever the interest (epoll always reports them).
    func ready(_ events: UInt32)
    /// The loop is stopping with this registration still in place: release the descriptor (the loop
    /// forgets the registration afterwards).
    func loopStopping()
}

/// A timer on an ``EventLoop``: ``cancel()`` stops it unless it already ran.
public struct LoopTimer: Hashable, Sendable {
    /// The timer's number on its loop (never reused).
    public let id: UInt64
    private let loop: EventLoop

    init(id: UInt64, loop: EventLoop) {
        self.id = id
        self.loop = loop
    }

    /// Cancels the timer, from any thread. A timer that already ran is not affected.
    public func cancel() { loop.cancelTimer(id) }

    /// Timers are equal when they are the same timer of the same loop.
    public static func == (a: LoopTimer, b: LoopTimer) -> Bool { a.id == b.id && a.loop === b.loop }

    /// Hashes the timer's number and loop.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(ObjectIdentifier(loop))
    }
}

/// One thread that waits with `epoll(7)` for many non-blocking sockets and runs, one at a time and in
/// order, their readiness callbacks, the tasks posted to it, and its timers (monotonic clock, a heap).
///
/// Threading: ``execute(_:)``, ``schedule(at:_:)``, ``schedule(after:_:)``, ``LoopTimer/cancel()`` and
/// ``stop()`` may be called from any thread; everything registered with the loop (sockets, connections,
/// their buffers and codecs) is touched only from the loop's own thread, so none of it needs a lock.
/// Tasks posted from other threads run in the order they were posted; a task posted after ``stop()`` is
/// not run.
///
/// Why epoll (level-triggered): a socket whose reading is paused for backpressure simply drops `EPOLLIN`
/// from its interest, and reading resumes by adding it back, with no missed edge to re-create.
public final class EventLoop: @unchecked Sendable {
    // Thread-safety: `@unchecked` because the stored `var`s below the marker are confined to the loop
    // thread (every internal entry point that touches them runs on it; `preconditionInLoop()` guards the
    // ones callers could misuse). The rest is immutable, atomic or behind a `Mutex`.

    private struct Inbox {
        var tasks: [@Sendable () -> Void] = []
        var wakePending = false
        var stopped = false
    }

    /// The loop's name (its thread's), e.g. `relaytrace.loop-0`.
    public let name: String
    private let epfd: Int32
    private let wakefd: Int32
    private let inbox = Locked(Inbox())
    private let threadID = Atomic<UInt>(0)
    private let thread = Locked<NetThread?>(nil)
    private let timerIDs = Atomic<UInt64>(0)
    /// The shared read buffer of every socket on this loop (the loop reads one socket at a time).
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Bytes read from a socket per read call.
    static let readChunk = 64 * 1024

    // MARK: Loop-confined state
    private struct Registration {
        var fd: Int32
        var interest: UInt32
        var handler: any LoopReadiness
    }

    private var registrations: [UInt64: Registration] = [:]
    private var nextRegistration: UInt64 = 1
    private var timers = TimerHeap()
    private var soon: [() -> Void] = []

    /// Starts a loop thread called `name`.
    /// - Throws: ``NetError`` `.socket` when epoll, the wake descriptor or the thread cannot be made.
    public init(name: String = "relaytrace.loop") throws(NetError) {
        self.name = name
        let ep = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard ep >= 0 else { throw NetError.system(.socket, "create the event loop \(name) (epoll_create1)", errno) }
        let wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wake >= 0 else {
            let code = errno
            _ = Glibc.close(ep)
            throw NetError.system(.socket, "create the event loop \(name) (eventfd)", code)
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = 0
        guard epoll_ctl(ep, EPOLL_CTL_ADD, wake, &event) == 0 else {
            let code = errno
            _ = Glibc.close(ep)
            _ = Glibc.close(wake)
            throw NetError.system(.socket, "create the event loop \(name) (register the wake descriptor)", code)
        }
        epfd = ep
        wakefd = wake
        readBuffer = .allocate(byteCount: Self.readChunk, alignment: 16)
        do {
            let t = try NetThread(name: name) { [self] in run() }
            thread.withLock { $0 = t }
        } catch {
            _ = Glibc.close(ep)
            _ = Glibc.close(wake)
            readBuffer.deallocate()
            throw error
        }
    }

    deinit {
        _ = Glibc.close(epfd)
        _ = Glibc.close(wakefd)
        readBuffer.deallocate()
    }

    /// Whether the calling thread is this loop's thread.
    public var inLoop: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && pthread_equal(pthread_t(id), pthread_self()) != 0
    }

    func preconditionInLoop(_ what: @autoclosure () -> String = "this call") {
        precondition(inLoop, "\(what()) must run on event loop \(name); hop with loop.execute { }")
    }

    // MARK: Posting (any thread)

    /// Runs `task` on the loop, after what was posted before it. From the loop's own thread it runs in
    /// this iteration, after the current callback.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        if inLoop {
            soon.append(task)
            return
        }
        let wake = inbox.withLock { box -> Bool? in
            guard !box.stopped else { return nil }
            box.tasks.append(task)
            defer { box.wakePending = true }
            return !box.wakePending
        }
        if wake == true { signalWake() }
    }

    /// Runs `task` on the loop once the monotonic clock reaches `deadline` (at once when it has passed).
    @discardableResult
    public func schedule(at deadline: ContinuousClock.Instant, _ task: @escaping @Sendable () -> Void) -> LoopTimer {
        let id = timerIDs.wrappingAdd(1, ordering: .relaxed).newValue
        if inLoop {
            timers.insert(id: id, at: deadline, task)
        } else {
            execute { [self] in timers.insert(id: id, at: deadline, task) }
        }
        return LoopTimer(id: id, loop: self)
    }

    /// Runs `task` on the loop after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ task: @escaping @Sendable () -> Void) -> LoopTimer {
        schedule(at: ContinuousClock.now.advanced(by: delay), task)
    }

    func cancelTimer(_ id: UInt64) {
        if inLoop {
            timers.cancel(id)
        } else {
            execute { [self] in timers.cancel(id) }
        }
    }

    /// Stops the loop after the callback running now: tasks still queued are dropped, sockets still
    /// registered are released (``LoopReadiness/loopStopping()``), timers are dropped. Waits for the
    /// thread unless called from it. Idempotent.
    public func stop() {
        let first = inbox.withLock { box -> Bool in
            defer { box.stopped = true }
            return !box.stopped
        }
        if first { signalWake() }
        if inLoop { return }
        let t = thread.withLock { t -> NetThread? in
            defer { t = nil }
            return t
        }
        t?.join()
    }

    private func signalWake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakefd, &one, 8)
    }

    // MARK: Loop-only API (Net's sockets and connections)

    /// Runs `body` in this iteration, after the current callback (loop thread only; no `Sendable` needed).
    func soon(_ body: @escaping () -> Void) {
        soon.append(body)
    }

    /// A loop-only timer (no `Sendable` needed); returns its number for ``cancelOnLoop(_:)``.
    func scheduleOnLoop(at deadline: ContinuousClock.Instant, _ body: @escaping () -> Void) -> UInt64 {
        let id = timerIDs.wrappingAdd(1, ordering: .relaxed).newValue
        timers.insert(id: id, at: deadline, body)
        return id
    }

    /// Cancels a loop-only timer (loop thread only).
    func cancelOnLoop(_ id: UInt64) { timers.cancel(id) }

    /// Registers `fd` with `interest` (an epoll mask); returns the registration's number.
    func register(_ fd: Int32, interest: UInt32, _ handler: any LoopReadiness) throws(NetError) -> UInt64 {
        let id = nextRegistration
        nextRegistration += 1
        var event = epoll_event()
        event.events = interest | EPOLLRDHUP.rawValue
        event.data.u64 = id
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0 else {
            throw NetError.system(.socket, "register a socket with event loop \(name)", errno)
        }
        registrations[id] = Registration(fd: fd, interest: interest, handler: handler)
        return id
    }

    /// Changes what a registration waits for (no system call when unchanged).
    func setInterest(_ id: UInt64, _ interest: UInt32) {
        guard var r = registrations[id], r.interest != interest else { return }
        var event = epoll_event()
        event.events = interest | EPOLLRDHUP.rawValue
        event.data.u64 = id
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, r.fd, &event)
        r.interest = interest
        registrations[id] = r
    }

    /// Forgets a registration (before its descriptor is closed).
    func deregister(_ id: UInt64) {
        guard let r = registrations.removeValue(forKey: id) else { return }
        var event = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, r.fd, &event)
    }

    /// How many descriptors are registered (for tests and logs).
    var registrationCount: Int { registrations.count }

    // MARK: The loop

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while true {
            runSoon()
            let timeout: Int32
            if !soon.isEmpty {
                timeout = 0
            } else if let next = timers.nextDeadline {
                timeout = Self.milliseconds(until: next)
            } else {
                timeout = -1
            }
            let n = epoll_wait(epfd, events, Int32(capacity), timeout)
            if n < 0 && errno != EINTR { break }
            for i in 0..<max(0, Int(n)) {
                let event = events[i]
                let id = event.data.u64
                if id == 0 {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakefd, &value, 8)
                    continue
                }
                // A registration removed by an earlier callback of this batch is gone: skip its event. (The
                // handler is taken out first: a callback may register or deregister sockets.)
                let handler = registrations[id]?.handler
                handler?.ready(event.events)
            }
            let (tasks, stopped) = inbox.withLock { box -> ([@Sendable () -> Void], Bool) in
                defer {
                    box.tasks = []
                    box.wakePending = false
                }
                return (box.tasks, box.stopped)
            }
            if stopped { break }
            for task in tasks { task() }
            let now = ContinuousClock.now
            while let body = timers.popDue(now: now) { body() }
        }
        // Stopping: release every socket still registered, drop timers and tasks.
        let remaining = registrations
        registrations = [:]
        for (_, r) in remaining.sorted(by: { $0.key < $1.key }) {
            var event = epoll_event()
            _ = epoll_ctl(epfd, EPOLL_CTL_DEL, r.fd, &event)
            r.handler.loopStopping()
        }
        runSoon()
        soon = []
        timers = TimerHeap()
        inbox.withLock { $0.tasks = [] }
    }

    private func runSoon() {
        // Only what is queued now: a task that queues another yields to I/O first.
        guard !soon.isEmpty else { return }
        let batch = soon
        soon = []
        for body in batch { body() }
    }

    /// Milliseconds for `epoll_wait` until `deadline`, rounded up; 0 once it has passed.
    static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }
}

/// The loop's timers: a binary min-heap of (deadline, id) with the bodies in a table; a cancelled timer
/// leaves the table at once and the heap when it surfaces (or when the heap is rebuilt because stale
/// entries outnumber live ones).
struct TimerHeap {
    private struct Entry {
        var deadline: ContinuousClock.Instant
        var id: UInt64
        static func < (a: Entry, b: Entry) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }
    }

    private var heap: [Entry] = []
    private var bodies: [UInt64: (deadline: ContinuousClock.Instant, body: () -> Void)] = [:]

    /// How many timers are armed.
    var count: Int { bodies.count }

    /// The earliest live deadline.
    var nextDeadline: ContinuousClock.Instant? {
        mutating get {
            while let top = heap.first, bodies[top.id] == nil { popTop() }
            return heap.first?.deadline
        }
    }

    mutating func insert(id: UInt64, at deadline: ContinuousClock.Instant, _ body: @escaping () -> Void) {
        bodies[id] = (deadline, body)
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
    }

    mutating func cancel(_ id: UInt64) {
        guard bodies.removeValue(forKey: id) != nil else { return }
        if heap.count > 64 && heap.count > 2 * bodies.count { rebuild() }
    }

    /// The body of the earliest timer due at `now`, removed; nil when none is due. The caller runs it
    /// (outside this mutation: a body may arm or cancel timers).
    mutating func popDue(now: ContinuousClock.Instant) -> (() -> Void)? {
        while let top = heap.first, top.deadline <= now {
            popTop()
            if let entry = bodies.removeValue(forKey: top.id) { return entry.body }
        }
        return nil
    }

    private mutating func rebuild() {
        heap = bodies.map { Entry(deadline: $0.value.deadline, id: $0.key) }
        heap.sort { $0 < $1 }  // a sorted array is a heap
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child] < heap[parent] else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count && heap[left + 1] < heap[left] { smallest = left + 1 }
            guard heap[smallest] < heap[parent] else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}

/// A few event loops (about one per core) that share the work of a server: each connection lives on one
/// loop for its whole life; ``next()`` hands loops out in turn.
public final class EventLoopGroup: Sendable {
    /// The loops.
    public let loops: [EventLoop]
    private let cursor = Atomic<Int>(0)

    /// One loop per online core (at least one).
    public static var defaultThreadCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// Starts `threads` loops named `name-0`, `name-1`, ...
    /// - Throws: ``NetError`` when a loop cannot start (the ones started are stopped).
    public init(threads: Int = EventLoopGroup.defaultThreadCount, name: String = "relaytrace.loop") throws(NetError) {
        var loops: [EventLoop] = []
        for i in 0..<max(1, threads) {
            do {
                loops.append(try EventLoop(name: "\(name)-\(i)"))
            } catch {
                for l in loops { l.stop() }
                throw error
            }
        }
        self.loops = loops
    }

    /// The next loop in turn.
    public func next() -> EventLoop {
        let i = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[(i % loops.count + loops.count) % loops.count]
    }

    /// Stops every loop and waits for their threads (see ``EventLoop/stop()``).
    public func stop() {
        for l in loops { l.stop() }
    }
}
