import DevRelay
import RelayProtocol
import Testing

@Suite struct FaultScriptParserTests {
    func one(_ line: String) throws -> FaultDirective {
        let s = try FaultScript.parse(line)
        #expect(s.directives.count == 1)
        return try #require(s.directives.first)
    }

    func failure(_ text: String) -> FaultScriptError? {
        do {
            _ = try FaultScript.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [("30s", 30.0), ("1m30s", 90), ("2h", 7200), ("500ms", 0.5), ("1.5s", 1.5), ("1h2m3s", 3723)])
    func timeForms(_ text: String, _ seconds: Double) throws {
        #expect(try one("at \(text) relay restart").timing == .at(.seconds(seconds)))
    }

    @Test func everyRelayDirective() throws {
        #expect(try one("at 1s relay drop to-client type=pong count=3").fault ==
            .relay(RelayFault(.drop(FrameMatch(direction: .toClient, messageType: "pong")), count: 3)))
        #expect(try one("from 40s to 60s relay drop from-client type=rpc.request method=system.ping peer=any").fault ==
            .relay(RelayFault(.drop(FrameMatch(direction: .fromClient, peer: nil, messageType: "rpc.request", method: "system.ping")), until: .seconds(60))))
        #expect(try one("at 0s relay delay to-client by=2s type=event event=chat:timeline-updated").fault ==
            .relay(RelayFault(.delay(FrameMatch(direction: .toClient, messageType: "event", eventType: "chat:timeline-updated"), by: .seconds(2)))))
        #expect(try one("on register relay invalid-resume count=2").fault == .relay(RelayFault(.invalidResume, count: 2)))
        #expect(try one("at 5s relay ownership-failed").fault == .relay(RelayFault(.deviceOwnershipFailed)))
        #expect(try one("at 5s relay close-client code=4001 reason=\"going away\"").fault ==
            .relay(RelayFault(.closeClient(code: 4001, reason: "going away", peer: .mobile))))
        let triggered = try one("on rpc.request method=system.ping relay close-client")
        #expect(triggered.timing == .on(FrameMatch(direction: .fromClient, messageType: "rpc.request", method: "system.ping")))
        #expect(triggered.fault == .relay(RelayFault(.closeClient(code: nil, reason: "fault: close-client", peer: .mobile),
                                                     trigger: FrameMatch(direction: .fromClient, messageType: "rpc.request", method: "system.ping"))))
        #expect(try one("at 10m relay restart").fault == .relay(RelayFault(.restart)))
        #expect(try one("from 0s to 5s relay refuse-upgrades status=429").fault ==
            .relay(RelayFault(.refuseUpgrades(status: 429), until: .seconds(5))))
    }

    @Test func everyDesktopAndClientDirective() throws {
        #expect(try one("at 1s desktop ignore-pings").fault == .desktop(DesktopFault(.ignore(method: "system.ping"))))
        #expect(try one("at 1s desktop ignore method=session.list count=1").fault == .desktop(DesktopFault(.ignore(method: "session.list"), count: 1)))
        #expect(try one("from 1m to 2m desktop disconnect code=1001").fault == .desktop(DesktopFault(.disconnect(code: 1001), until: .seconds(120))))
        #expect(try one("at 3m desktop reconnect").fault == .desktop(DesktopFault(.reconnect)))
        #expect(try one("at 1s client path none").fault == .client(.path(.none)))
        #expect(try one("at 1s client path cellular").fault == .client(.path(.cellular)))
        #expect(try one("at 1s client app background").fault == .client(.app(.background)))
        #expect(try one("at 1s client app foreground").fault == .client(.app(.foreground)))
        #expect(try one("at 1s client media on").fault == .client(.media(true)))
        #expect(try one("at 1s client push desktop-online").fault == .client(.pushDesktopOnline))
    }

    @Test func commentsBlankLinesAndScheduleOrder() throws {
        let s = try FaultScript.parse("""
        # a scenario
        at 2m client app background   # leave

        at 30s relay restart
        on register relay invalid-resume
        at 30s desktop ignore-pings
        """)
        #expect(s.directives.map(\.line) == [2, 4, 5, 6])
        #expect(s.schedule.map(\.line) == [5, 4, 6, 2])
        #expect(s.due(after: .seconds(10), through: .seconds(30)).map(\.line) == [4, 6])
        #expect(s.due(after: nil, through: .zero).map(\.line) == [5])
        #expect(s.schedule(for: .client).map(\.at) == [.seconds(120)])
    }

    @Test(arguments: [
        ("later 5s relay restart", 1, 1),
        ("at soon relay restart", 1, 4),
        ("at 5s router restart", 1, 7),
        ("at 5s relay explode", 1, 13),
        ("at 5s relay drop sideways", 1, 18),
        ("at 5s relay drop to-client colour=red", 1, 28),
        ("at 5s relay delay to-client", 1, 13),
        ("at 5s relay delay to-client by=0s", 1, 29),
        ("at 5s relay close-client code=99", 1, 26),
        ("from 5s to 5s relay drop to-client", 1, 12),
        ("from 5s to 9s relay restart", 1, 21),
        ("on register client path wifi", 1, 4),
        ("on heartbeat relay invalid-resume", 1, 4),
        ("at 5s client path satellite", 1, 19),
        ("at 5s relay drop to-client count=0", 1, 28),
        ("at 5s relay close-client reason=\"open", 1, 33),
        ("\n\n  at 5s desktop dance", 3, 17),
        ("at 5s relay refuse-upgrades status=404", 1, 29),
        ("at", 1, 3),
    ])
    func errorsNameLineAndColumn(_ text: String, _ line: Int, _ column: Int) {
        let e = failure(text)
        #expect(e?.line == line, "\(text): \(String(describing: e))")
        #expect(e?.column == column, "\(text): \(String(describing: e))")
        #expect(e?.description.contains("line \(line), column \(column)") == true)
    }

    /// A name that would match nothing is refused where it stands, with what was meant (it was accepted
    /// and matched no frame before).
    @Test(arguments: [
        ("at 5s relay drop from-client type=chat:timeline-interest", 30, "it is an event type: write event=chat:timeline-interest"),
        ("at 5s relay drop to-client method=session.lst", 28, "did you mean 'session.list'?"),
        ("at 5s relay delay to-client by=1s event=device-stat", 35, "did you mean 'device-status'?"),
        ("at 5s relay drop to-client type=rpc.reponse", 28, "did you mean 'rpc.response'?"),
        ("on rpc.requst relay close-client", 4, "did you mean 'rpc.request'?"),
        ("at 0s desktop ignore method=session.lsit", 22, "did you mean 'session.list'?"),
    ])
    func unknownNamesAreRefusedWithASuggestion(_ text: String, _ column: Int, _ hint: String) {
        let e = failure(text)
        #expect(e?.column == column, "\(text): \(String(describing: e))")
        #expect(e?.message.contains("would match nothing") == true, "\(String(describing: e))")
        #expect(e?.message.contains(hint) == true, "\(String(describing: e))")
    }

    @Test func knownNamesStillParse() throws {
        for line in ["at 5s relay drop from-client event=chat:timeline-interest", "at 5s relay drop to-client type=binary",
                     "at 5s relay drop to-client type=rpc.response method=files.search", "on rpc.request method=system.ping relay close-client"] {
            #expect(failure(line) == nil, "\(line)")
        }
    }
}
