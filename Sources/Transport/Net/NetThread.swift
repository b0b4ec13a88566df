import Glibc

/// A joinable POSIX thread running a closure: each event loop runs on one; the blocking client and the
/// live driver run one per socket (no Dispatch, no actors on the per-frame path).
public final class NetThread: Sendable {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    private let handle: pthread_t

    /// Starts a thread running `body`.
    /// - Throws: ``NetError`` `.socket` with the errno of `pthread_create` (e.g. `EAGAIN`: too many
    ///   threads).
    public init(name: String = "net", _ body: @escaping @Sendable () -> Void) throws(NetError) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            box.body()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            throw NetError.system(.socket, "start thread \(name)", rc, "too many threads; close connections")
        }
        handle = thread
    }

    /// Starts a thread running `body` that nobody joins (its resources go when it ends): for short
    /// helpers such as a name lookup for the event loop, which must not block on it.
    /// - Throws: ``NetError`` `.socket` when the thread cannot start.
    public static func detached(name: String = "net", _ body: @escaping @Sendable () -> Void) throws(NetError) {
        let thread = try NetThread(name: name, body)
        _ = pthread_detach(thread.handle)
    }

    /// Waits for the thread to finish. Call it once, and never from the thread itself.
    public func join() {
        _ = pthread_join(handle, nil)
    }
}
