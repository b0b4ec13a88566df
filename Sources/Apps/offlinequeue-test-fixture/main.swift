// A child process for OfflineQueueTests' crash test: it queues mutations in batches of 4 (one
// transaction each) until it is killed, printing "committed N" after batch N returned. Not installed.
//
//   offlinequeue-test-fixture enqueue-until-killed PATH
#if canImport(Glibc)
import Glibc
#endif
import OfflineQueue

func say(_ fd: Int32, _ text: String) {
    var t = text
    t.withUTF8 { b in _ = write(fd, b.baseAddress, b.count) }
}

let args = CommandLine.arguments
guard args.count == 3, args[1] == "enqueue-until-killed" else {
    say(2, "usage: offlinequeue-test-fixture enqueue-until-killed PATH\n")
    exit(64)
}
do {
    let store = try OfflineQueueStore(path: args[2])
    let padding = String(repeating: "x", count: 2_000)   // pages to write: the kill lands inside writes
    var batch = 0
    while batch < 100_000 {   // a safety stop if nobody kills us
        let mutations = (0..<4).map { j in
            NewMutation(method: "session.update", paramsJSON: #"{"sessionId":"s","n":\#(batch * 4 + j),"pad":"\#(padding)"}"#,
                        idempotencyKey: "m-\(batch)-\(j)", createdAt: 1_768_478_400_000 + Int64(batch))
        }
        try store.enqueue(mutations)
        say(1, "committed \(batch)\n")
        batch += 1
    }
} catch {
    say(2, "offlinequeue-test-fixture: \(error)\n")
    exit(74)
}
