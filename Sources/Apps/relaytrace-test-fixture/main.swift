// A child process for TraceTests' crash test: it writes records with real monotonic time stamps until it
// is killed. Not installed; not part of the product.
//
//   relaytrace-test-fixture write-until-killed PATH
//
// Record times are CLOCK_MONOTONIC nanoseconds (system-wide on Linux), so the parent can compare them
// with the moment it sent SIGKILL. Payload: {"seq":N}. Prints "ready" once 100 records are queued.
#if canImport(Glibc)
import Glibc
#endif
import RelayProtocol
import Trace

func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

func say(_ fd: Int32, _ text: String) {
    var t = text
    t.withUTF8 { b in _ = write(fd, b.baseAddress, b.count) }
}

let args = CommandLine.arguments
guard args.count == 3, args[1] == "write-until-killed" else {
    say(2, "usage: relaytrace-test-fixture write-until-killed PATH\n")
    exit(64)
}
do {
    let header = TraceHeader(seed: 1, wallClockStart: "1970-01-01T00:00:00Z", simulated: true)
    let writer = try TraceWriter(path: args[2], header: header)
    let start = monotonicNanoseconds()
    var seq = 0
    while monotonicNanoseconds() - start < 30_000_000_000 {  // a safety stop if nobody kills us
        writer.append(TraceRecord(kind: .input, time: Moment(nanoseconds: monotonicNanoseconds()), payload: Array("{\"seq\":\(seq)}".utf8)))
        seq += 1
        if seq == 100 {
            say(1, "ready\n")
        }
        usleep(200)
    }
    try writer.close()
} catch {
    say(2, "relaytrace-test-fixture: \(error)\n")
    exit(74)
}
