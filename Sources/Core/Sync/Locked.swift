public import Synchronization

/// A value behind a lock: `Synchronization.Mutex`, in a class so that closures and threads can share it,
/// and visible to ThreadSanitizer.
///
/// On Linux the standard library's `Mutex` locks with futex calls inside the (uninstrumented) Swift
/// runtime, so ThreadSanitizer sees neither its acquire nor its release and reports every access the lock
/// protects as a race (docs/BENCHMARKS.md, "Sanitizers"). Built with `-DRELAYTRACE_TSAN`
/// (`tools/sanitize.sh thread` does), `withLock` tells ThreadSanitizer about both edges with its
/// `__tsan_acquire`/`__tsan_release` annotations on this object's address; otherwise it is exactly
/// `Mutex.withLock`. Every lock in the project is a `Locked`.
///
/// An object that is mostly its lock (a cache made on first use, one per record) can subclass it, so the
/// lock lives inline in that object rather than in a second allocation; a subclass adds only immutable,
/// `Sendable` stored properties (which is what makes the unchecked `Sendable` hold).
open class Locked<Value: ~Copyable>: @unchecked Sendable {
    @usableFromInline let mutex: Mutex<Value>

    /// A lock holding `value`.
    public init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with the value while holding the lock (blocking until it is free). Inlinable, as
    /// `Mutex.withLock` is: the trace writer takes it once per record.
    @inlinable
    public final func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            #if RELAYTRACE_TSAN
            let address = UnsafeMutableRawPointer(Unmanaged.passUnretained(self).toOpaque())
            tsanAcquire(address)
            defer { tsanRelease(address) }
            #endif
            return try body(&value)
        }
    }

    /// Runs `body` with the value if the lock is free now; nil (without running it) if it is held.
    @inlinable
    public final func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        try mutex.withLockIfAvailable { (value: inout sending Value) throws(E) -> sending Result in
            #if RELAYTRACE_TSAN
            let address = UnsafeMutableRawPointer(Unmanaged.passUnretained(self).toOpaque())
            tsanAcquire(address)
            defer { tsanRelease(address) }
            #endif
            return try body(&value)
        }
    }
}

#if RELAYTRACE_TSAN
// ThreadSanitizer's annotation interface (compiler-rt, tsan_interface.h), present in a binary built with
// -sanitize=thread.
@usableFromInline @_silgen_name("__tsan_acquire") func tsanAcquire(_ address: UnsafeMutableRawPointer)
@usableFromInline @_silgen_name("__tsan_release") func tsanRelease(_ address: UnsafeMutableRawPointer)
#endif
