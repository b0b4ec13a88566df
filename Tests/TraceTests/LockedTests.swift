import Dispatch
import Foundation
import Sync
import Testing

@Suite struct LockedTests {
    @Test func incrementsFromManyThreadsAreNeverLost() {
        let counter = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }

    @Test func withLockIfAvailableDoesNotRunWhileAnotherThreadHoldsTheLock() {
        let lock = Locked([Int]())
        let tried = Locked<Int??>(nil)
        let done = DispatchSemaphore(value: 0)
        lock.withLock { value in
            value.append(1)
            // Another thread tries while this one holds the lock (and waits for it inside).
            Thread.detachNewThread {
                let got = lock.withLockIfAvailable { $0.count }
                tried.withLock { $0 = .some(got) }
                done.signal()
            }
            done.wait()
        }
        #expect(tried.withLock { $0 } == .some(nil))
        #expect(lock.withLockIfAvailable { $0.count } == 1)
    }

    @Test func aThrowingBodyLeavesTheLockFree() {
        struct Boom: Error {}
        let lock = Locked(1)
        #expect(throws: Boom.self) { try lock.withLock { (_: inout Int) throws(Boom) in throw Boom() } }
        #expect(lock.withLockIfAvailable { $0 } == 1)
    }
}
