@testable import Capture
import RelayClient
import RelayProtocol
import Testing
import Trace

/// The direct byte writers for frequent actions must give exactly the bytes of the generic
/// `JSONValue` route (a replay compares recorded payloads with these bytes).
@Suite struct DirectActionBytesTests {
    static let timers: [TimerID] = [
        .handshake(Generation(1)), .heartbeat(Generation(2)), .watchdog(Generation(3)), .reRegister(Generation(4)),
        .sendRetry(Generation(2), slot: 7), .sendRetry(Generation(2), slot: .max),
        .rpcTimeout(requestId: "R-1 \"quoted\"\n\u{1}é", ownership: 4), .reconnect(attempt: 3),
        .epochDeadline(epoch: 2), .probe(epoch: .max), .foregroundRecovery, .auth(.poll), .auth(.refresh),
        .interest(.renewal(desktopId: "d\\1")), .interest(.retry(desktopId: "")),
    ]

    static let phases: [ConnectionPhase] = [
        .idle, .connecting(Generation(1)), .registering(Generation(2)), .registered(Generation(3), relaySessionId: "rs-\t1"),
        .waitingToReconnect(attempt: 5), .suspended(.background), .suspended(.noNetworkPath),
        .stopped(.stopped), .stopped(.invalidResumeLoop), .stopped(.sessionEnded),
    ]

    static var actions: [ClientAction] {
        var a: [ClientAction] = []
        for t in timers {
            a.append(.armTimer(t, deadline: Moment(nanoseconds: 10_005_000_000)))
            a.append(.armTimer(t, deadline: Moment(nanoseconds: -1)))
            a.append(.cancelTimer(t))
        }
        a += phases.map { .phaseChanged($0) }
        a += [
            .ingress(.deliverSnapshot(TimelineUpdated(sessionId: "s", runId: "r\u{7F}", threadId: "t/é", revision: -3,
                                                      blocks: [["id": "b1"]]))),
            .ingress(.deliverControl(EventMessage(eventType: "job:created", eventId: 42))),
            .ingress(.deliverControl(EventMessage(eventType: "device-status", eventId: nil))),
            .callCompleted(CallID(7), .success(["b": 1, "a": [true, .null, 1.5], "c": ["z": "y", "x_y": "w"]])),
            .callCompleted(CallID(.max), .success(.null)),
            .callCompleted(CallID(1), .failure(.timedOut(after: .seconds(30)))),
            .callCompleted(CallID(5), .queued(idempotencyKey: "oq-1")),
            .callCompleted(CallID(2), .failure(.remote(code: -32000, message: "nope \"x\"", data: ["k": 1]))),
            .callCompleted(CallID(3), .failure(.clientStopped("stopped"))),
            .desktopStatusChanged(.unknown), .desktopStatusChanged(.online), .desktopStatusChanged(.recovering(epoch: 3)),
            .epochOpened(epoch: 9, reason: .pathLost, deadline: Moment(nanoseconds: 123)),
            .connectionFailed(Generation(4), .watchdog), .connectionFailed(Generation(4), .rpcTimeout(requestId: "q")),
        ]
        return a
    }

    @Test func directBytesEqualTheGenericEncoding() throws {
        for action in Self.actions {
            let direct = try #require(ClientRecordCodec.directActionBytes(action), "no direct writer for \(action)")
            let (json, _) = ClientRecordCodec.actionJSON(action)
            #expect(direct == json.serialized(), "\(action): \(String(decoding: direct, as: UTF8.self))")
        }
    }

    @Test func recordsCarryTheGenericGeneration() {
        for action in Self.actions {
            let record = ClientRecordCodec.record(action, at: .seconds(2))
            let (json, g) = ClientRecordCodec.actionJSON(action)
            #expect(record.kind == .action)
            #expect(record.generation == g?.rawValue)
            #expect(record.payload == json.serialized())
        }
    }

    @Test func actionsWithoutDirectWriterFallBack() {
        #expect(ClientRecordCodec.directActionBytes(.ingress(.unexpectedProcessed)) == nil)
        let record = ClientRecordCodec.record(.ingress(.unexpectedProcessed), at: .zero)
        #expect(record.payload == Array(#"{"action":"ingress.unexpectedProcessed"}"#.utf8))
    }
}
