import RelayProtocol
import Testing

@Suite struct EventPayloadTests {
    @Test func typedPayloadsRoundTrip() throws {
        let status = DeviceStatus(deviceId: "d", status: .online)
        #expect(try DeviceStatus(json: status.json) == status)
        #expect(status.json == ["deviceId": "d", "status": "online"])
        #expect(try DeviceStatus(json: ["deviceId": "d", "status": "sleeping", "reason": "r"])
            == DeviceStatus(deviceId: "d", status: .other("sleeping"), reason: "r"))

        let interest = TimelineInterest(appSessionId: "A", sessionId: "s", active: false)
        #expect(try TimelineInterest(json: interest.json) == interest)

        let updated = TimelineUpdated(sessionId: "s", runId: "r", threadId: "t", revision: 9, blocks: [["kind": "text"]])
        #expect(try TimelineUpdated(json: updated.json) == updated)
        #expect(updated.key == TimelineKey(sessionId: "s", runId: "r", threadId: "t"))

        let gap = EventReplayGap(lastEventId: 10, oldestBufferedId: 50, latestBufferedId: 600)
        #expect(try EventReplayGap(json: gap.json) == gap)

        let unlinked = DeviceUnlinked(deviceId: "d")
        #expect(try DeviceUnlinked(json: unlinked.json) == unlinked)

        let active = ActiveSessionChanged(sessionId: "s", projectDirectory: "/p")
        #expect(try ActiveSessionChanged(json: active.json) == active)
        #expect(ActiveSessionChanged(sessionId: "s").json == ["sessionId": "s"])
    }

    @Test func typedPayloadsTravelInEvents() throws {
        let gap = EventReplayGap(lastEventId: 1, oldestBufferedId: 5, latestBufferedId: 9)
        let message = RelayMessage.event(EventMessage(gap))
        let back = try RelayMessage(decodingText: message.encodedText())
        guard case .event(let e) = back else {
            Issue.record("not an event")
            return
        }
        #expect(e.eventType == "event-replay-gap")
        #expect(try e.decodePayload(as: EventReplayGap.self) == gap)
        #expect(throws: MessageDecodeError(path: "$.payload.eventType", message: #"event is "event-replay-gap", not "device-status""#)) {
            try e.decodePayload(as: DeviceStatus.self)
        }
    }

    @Test func payloadErrorsNameTheirPath() {
        #expect(throws: MessageDecodeError(path: "$.payload.payload.revision", message: "expected an integer, found string")) {
            try TimelineUpdated(json: ["sessionId": "s", "runId": "r", "threadId": "t", "revision": "3"], path: "$.payload.payload")
        }
        #expect(throws: MessageDecodeError(path: "$.active", message: "missing required boolean")) {
            try TimelineInterest(json: ["appSessionId": "A", "sessionId": "s"])
        }
        #expect(throws: MessageDecodeError(path: "$", message: "expected an object, found array")) {
            try DeviceUnlinked(json: [])
        }
        #expect(throws: MessageDecodeError(path: "$.oldestBufferedId", message: "missing required integer")) {
            try EventReplayGap(json: ["lastEventId": 1, "latestBufferedId": 2])
        }
    }

    @Test func eventNames() {
        #expect(EventNames.all.count == Set(EventNames.all).count)
        #expect(EventNames.all.count == 31)
        #expect(EventNames.relayMade == ["device-status", "device-unlinked", "active-session-changed", "event-replay-gap"])
        for name in ["job:created", "job:metadata-updated", "jobs:list-invalidated", "session-file-browser-state-updated",
                     "PlanDeleted", "terminal.exit", "chat:timeline-updated", "chat:timeline-interest", "history-state-changed"] {
            #expect(EventNames.all.contains(name), "\(name)")
        }
        #expect(EventNames.all.filter(EventNames.isJobEvent).count == 10)
        #expect(DeviceStatus.eventType == EventNames.deviceStatus)
        #expect(TimelineUpdated.eventType == "chat:timeline-updated")
    }
}
