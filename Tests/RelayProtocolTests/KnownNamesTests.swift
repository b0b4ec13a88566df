import RelayProtocol
import Testing

@Suite struct KnownNamesTests {
    @Test(arguments: [
        ("rpc.reqest", "rpc.request"), ("Heartbeat", "heartbeat"), ("registred", "registered"),
        ("device-stat", "device-status"), ("session.lst", "session.list"),
    ])
    func aSlipOfTheKeyboardFindsTheName(_ typed: String, _ meant: String) {
        let all = KnownNames.messageTypes + KnownNames.eventTypes + KnownNames.methods
        #expect(KnownNames.suggestion(for: typed, among: all) == meant)
        #expect(KnownNames.didYouMean(typed, among: all) == "; did you mean '\(meant)'?")
    }

    @Test func somethingElseEntirelyHasNoSuggestion() {
        #expect(KnownNames.suggestion(for: "bogus", among: KnownNames.messageTypes) == nil)
        #expect(KnownNames.didYouMean("zzzzzzzz", among: KnownNames.methods) == "")
    }

    @Test func editDistance() {
        #expect(KnownNames.editDistance("kitten", "sitting") == 3)
        #expect(KnownNames.editDistance("", "abc") == 3)
        #expect(KnownNames.editDistance("same", "same") == 0)
    }

    @Test func theVocabulariesHoldTheProtocolsNames() {
        for t in ["register", "heartbeat", "pong", "rpc.request", "rpc.response", "event", "registered", "resumed", "error"] {
            #expect(KnownNames.messageTypes.contains(t), "\(t)")
        }
        #expect(KnownNames.eventTypes.contains("chat:timeline-interest"))
        #expect(KnownNames.eventTypes.contains("device-status"))
        #expect(KnownNames.methods.contains("files.search"))
        #expect(!KnownNames.messageTypes.contains("chat:timeline-interest"))
    }
}
