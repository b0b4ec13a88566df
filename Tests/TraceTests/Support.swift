import Dispatch
import Foundation
import RelayProtocol
import Synchronization
@testable import Trace

/// A sink that keeps the bytes in memory; can fail (ENOSPC) after a byte budget, once or for good, and
/// can hold writes at a gate (to keep the writer thread busy while a test fills its queue).
final class MemorySink: TraceSink, @unchecked Sendable {
    // Guarded by `lock`: written by the writer thread, read by the test after `close()`.
    private let lock = NSLock()
    private var _bytes: [UInt8] = []
    var failAfterBytes: Int?
    var failOnce = false
    private var failed = false
    let gate: DispatchSemaphore?
    let enteredWrite = DispatchSemaphore(value: 0)
    private var writes = 0
    var syncs = 0

    init(gated: Bool = false) { gate = gated ? DispatchSemaphore(value: 0) : nil }

    var bytes: [UInt8] { lock.withLock { _bytes } }

    func write(_ b: UnsafeRawBufferPointer) throws(TraceError) {
        let n = lock.withLock { () -> Int in
            writes += 1
            return writes
        }
        if n > 1, let gate {  // the header (write 1) passes; later writes wait at the gate
            enteredWrite.signal()
            gate.wait()
            gate.signal()
        }
        try lock.withLock { () throws(TraceError) in
            if let limit = failAfterBytes, !(failOnce && failed), _bytes.count + b.count > limit {
                failed = true
                // Like a full disk: part of the data lands, then ENOSPC.
                _bytes.append(contentsOf: b.prefix(max(0, limit - _bytes.count)))
                throw TraceError(.io, "write failed: No space left on device", errno: 28)
            }
            _bytes.append(contentsOf: b)
        }
    }

    func sync() throws(TraceError) { lock.withLock { syncs += 1 } }
    func truncate(to size: UInt64) throws(TraceError) {
        lock.withLock { if Int(size) < _bytes.count { _bytes.removeLast(_bytes.count - Int(size)) } }
    }
    func close() throws(TraceError) {}
}

extension NSLock {
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A header for tests.
func testHeader(seed: UInt64 = 42) -> TraceHeader {
    TraceHeader(
        seed: seed, wallClockStart: "2026-01-01T00:00:00Z", simulated: true,
        client: ["deviceId": "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11", "deviceName": "Test phone"])
}

/// Options for deterministic tests: raw (payloads kept), fixed key, flushes only by capture time or size.
func testOptions(chunk: Int = 1 << 20, interval: Duration = .seconds(3600), raw: Bool = true) -> TraceWriterOptions {
    var o = TraceWriterOptions()
    o.chunkTargetSize = chunk
    o.flushInterval = interval
    o.redaction = raw ? .raw : .hashed
    o.redactionKey = Array(repeating: 7, count: 32)
    return o
}

/// `count` random records with non-decreasing times (a fixed seed gives the same records).
func randomRecords(seed: UInt64, count: Int, maxPayload: Int = 300, step: Int64 = 50_000_000) -> [TraceRecord] {
    var rng = SeededRandom(seed: seed)
    var t: Int64 = 0
    var out = [TraceRecord]()
    for i in 0..<count {
        t += Int64(rng.next(upperBound: UInt64(step)))
        let kind = RecordKind.known.filter { $0 != .header }[Int(rng.next(upperBound: UInt64(12)))]
        let n = Int(rng.next(upperBound: UInt64(maxPayload)))
        let payload: [UInt8]
        switch rng.next(upperBound: UInt64(3)) {
        case 0: payload = rng.bytes(n)
        case 1: payload = Array("{\"type\":\"event\",\"eventId\":\(i),\"note\":\"\(rng.alphanumeric(n))\"}".utf8)
        default: payload = Array(repeating: UInt8(i & 0xFF), count: n)
        }
        out.append(
            TraceRecord(
                kind: rng.next(upperBound: UInt64(20)) == 0 ? .unknown(UInt16(100 + rng.next(upperBound: UInt64(900)))) : kind,
                time: Moment(nanoseconds: t),
                channel: rng.next(upperBound: UInt64(10)) == 0 ? .watch : .relay,
                generation: rng.next(upperBound: UInt64(2)) == 0 ? rng.next(upperBound: UInt64(5)) : nil,
                direction: [nil, FrameDirection.inbound, .outbound][Int(rng.next(upperBound: UInt64(3)))],
                payload: payload))
    }
    return out
}

/// Writes `records` through a writer into memory and returns the file's bytes.
func writeTrace(_ records: [TraceRecord], options: TraceWriterOptions = testOptions()) throws -> [UInt8] {
    let sink = MemorySink()
    let w = try TraceWriter(sink: sink, header: testHeader(), options: options)
    for r in records { #expect(w.append(r)) }
    try w.close()
    return sink.bytes
}

/// A unique path in the temporary directory (the caller removes it).
func tempPath(_ name: String) -> String {
    let dir = FileManager.default.temporaryDirectory.path
    return "\(dir)/relaytrace-test-\(getpid())-\(UUID().uuidString)-\(name)"
}

import Testing
