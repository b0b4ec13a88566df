import Foundation
@testable import RelayTraceCLI
import Testing

/// The bytes waiting in the pipe behind `fd` (non-blocking: what has been written so far, nothing more).
private func drain(_ fd: Int32) -> String {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out += chunk[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

/// `Output`'s write-out schedule: the first write goes out at once, then the threshold doubles up to
/// 64 KiB, so the first record of a listing reaches `| head` or a terminal as soon as it is made.
@Suite struct OutputFlushTests {
    @Test func theFirstWriteGoesOutAtOnceAndTheThresholdDoubles() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        // Room for the 70 kB write-outs below without a reader (F_SETPIPE_SZ, Linux's fcntl 1031).
        #expect(fcntl(fds[1], 1031, 1 << 20) >= 1 << 20)
        let out = Output(fd: fds[1], name: "pipe", owned: true)
        out.write("x")
        #expect(drain(fds[0]) == "x")  // threshold 1: written at once
        out.write("a")
        #expect(drain(fds[0]) == "")  // threshold 2: one byte waits
        out.write("b")
        #expect(drain(fds[0]) == "ab")
        out.write("cde")
        #expect(drain(fds[0]) == "")  // threshold 4: three bytes wait
        out.write("f")
        #expect(drain(fds[0]) == "cdef")
        // Later writes are batched: after enough write-outs the threshold is 64 KiB.
        for _ in 0..<16 { out.write(String(repeating: "z", count: 70_000)); _ = drain(fds[0]) }
        out.write(String(repeating: "y", count: 60_000))
        #expect(drain(fds[0]) == "")
        out.write(String(repeating: "y", count: 6_000))
        #expect(drain(fds[0]) == String(repeating: "y", count: 66_000))
        out.write("end")
        out.flush()
        #expect(drain(fds[0]) == "end")
        #expect(out.finish(reportingTo: out) == nil)
    }
}
