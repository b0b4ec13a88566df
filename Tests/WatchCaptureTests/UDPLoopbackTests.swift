import RelayProtocol
import Testing
import WatchLink
import WatchNet

/// The real transport: UDP on 127.0.0.1, carrying the watch link between a watch sender and a phone
/// receiver until every tap is acknowledged. It stops by itself (bounded rounds, bounded waits).
@Suite struct UDPLoopbackTests {
    @Test func aWorkoutCrossesLoopbackUDPExactlyOnceInOrder() throws {
        let watchSocket = try UDPSocket(), phoneSocket = try UDPSocket()
        #expect(watchSocket.port != 0 && phoneSocket.port != 0 && watchSocket.port != phoneSocket.port)
        let watchLink = WatchUDPLink(socket: watchSocket, peerPort: phoneSocket.port)
        let phoneLink = WatchUDPLink(socket: phoneSocket, peerPort: watchSocket.port)
        var rng = SeededRandom(seed: 3)
        let session = SessionID("S")
        var watch = WatchSender(clockMilliseconds: 1_718_000_000_000, storedFloor: nil, rng: &rng, reachable: true)
        var phone = PhoneReceiver(liveSession: session)
        var executed: [Int64] = []
        var now = Moment.zero
        func perform(_ actions: [WatchAction]) throws {
            for case .send(let c, _) in actions { try watchLink.send(.command(c)) }
        }
        for reps in 1...20 as ClosedRange<Int64> {
            now = now + .seconds(30)
            try perform(watch.handle(.tap(WatchCommand(session: session, payload: .completeSet(
                SetEntry(exerciseIndex: 0, setOffset: 0, weightGrams: 60_000, reps: reps))), confirm: nil), at: now))
            // Pump both ends until the watch's queue is empty (at most 50 datagram waits of 2 s each).
            var rounds = 0
            while !watch.queue.isEmpty, rounds < 50 {
                rounds += 1
                if case .success(.command(let c))? = try phoneLink.receive(timeout: .seconds(2)) {
                    for a in phone.handle(.command(c)) {
                        switch a {
                        case .execute(let e): if case .completeSet(let s) = e.command.payload { executed.append(s.reps ?? -1) }
                        case .sendAck(let ack): try phoneLink.send(.ack(ack))
                        default: break
                        }
                    }
                }
                if case .success(.ack(let ack))? = try watchLink.receive(timeout: .seconds(2)) {
                    try perform(watch.handle(.ackReceived(ack), at: now))
                }
            }
        }
        #expect(executed == Array(1...20))
        #expect(watch.queue.isEmpty)
        // Nothing more is waiting, and a zero timeout only checks.
        #expect(try phoneSocket.receive(timeout: .zero) == nil)
    }

    @Test func garbageIsReportedNotTrapped() throws {
        let a = try UDPSocket(), b = try UDPSocket()
        try a.send([0xFF, 0xFE, 0x00], to: b.port)
        let got = try #require(try WatchUDPLink(socket: b, peerPort: a.port).receive(timeout: .seconds(2)))
        guard case .failure(let error) = got else { Issue.record("garbage decoded"); return }
        #expect(error.path == "$")
    }

    @Test func errorsAreTyped() throws {
        let a = try UDPSocket()
        #expect(throws: UDPError.self) { try UDPSocket(port: a.port) }   // EADDRINUSE
        #expect(throws: UDPError.self) { try a.send([UInt8](repeating: 0, count: 70_000), to: a.port) }
        a.close()
        do {
            _ = try a.receive(timeout: .zero)
            Issue.record("a closed socket received")
        } catch {
            #expect(error.operation == .receive)
            #expect(error.description.contains("127.0.0.1"))
        }
    }
}
