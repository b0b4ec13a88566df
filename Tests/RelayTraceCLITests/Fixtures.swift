import Foundation
import RelayProtocol
import Trace

/// Choices for `writeRelayTrace`.
struct RelayTraceVariant {
    /// Shift every time by this many seconds (diff ignores times).
    var shift = 0.0
    /// Suffix for RPC ids and event ids (volatile: diff ignores them).
    var idSuffix = ""
    /// The method of the first RPC.
    var firstMethod = "session.list"
    /// Redaction policy.
    var raw = false
}

/// A realistic relay trace: three generations. g1: open with a bearer JWT, register/registered (resume
/// token), RPCs with traceparent (one answered in 120 ms, one with an error), device-status, a PTC1
/// frame, heartbeats every 5 s, timeline-interest lease renewed at 4.5, 24.5 and 54.5 s (the last one
/// late), an armed and a non-armed timer, a recovery epoch, closed by the relay (1006 watchdog).
/// g2: resumed, system.ping RPC (50 ms), closed by the client (1001). g3 opens before g2 closes and
/// never completes registration. One watch-channel marker.
func writeRelayTrace(_ v: RelayTraceVariant = RelayTraceVariant()) throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/relaytrace-inspect-\(getpid())-\(UUID().uuidString).rtrace"
    var o = TraceWriterOptions()
    o.flushInterval = .seconds(1)
    if v.raw { o.redaction = .raw }
    let header = TraceHeader(seed: 7, wallClockStart: "2026-01-15T10:00:00Z", simulated: true, client: ["deviceName": "Alice's iPhone", "deviceId": "5b0e6c8a"])
    let w = try TraceWriter(path: path, header: header, options: o)
    func t(_ s: Double) -> Moment { .seconds(s + v.shift) }
    func out(_ s: Double, _ g: UInt64, _ text: String) { w.append(.frame(.text(text), time: t(s), generation: g, direction: .outbound)) }
    func inn(_ s: Double, _ g: UInt64, _ text: String) { w.append(.frame(.text(text), time: t(s), generation: g, direction: .inbound)) }
    func rec(_ kind: RecordKind, _ s: Double, _ g: UInt64?, _ json: String, dir: FrameDirection? = nil) {
        w.append(TraceRecord(kind: kind, time: t(s), generation: g, direction: dir, payload: Array(json.utf8)))
    }
    let jwt = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTEiLCJ0YmgiOiJ4In0.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
    let token = "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA"
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    let s = v.idSuffix
    rec(.transportOpen, 0.01, 1, #"{"url":"wss://relay.example/ws/device-link","headers":[{"name":"Authorization","value":"Bearer \#(jwt)"},{"name":"X-Device-ID","value":"5b0e6c8a"}]}"#, dir: .outbound)
    rec(.action, 0.02, nil, #"{"action":"armTimer","timer":{"timer":"heartbeat","gen":1},"deadline":5000000000}"#)
    rec(.transportOpened, 0.2, 1, "", dir: .inbound)
    out(0.3, 1, #"{"type":"register","payload":{"deviceId":"5b0e6c8a","deviceName":"Alice's iPhone","relayProtocolVersion":"1.6","targetDesktopDeviceId":"9a7e"}}"#)
    inn(0.5, 1, #"{"type":"registered","sessionId":"Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D","resumeToken":"\#(token)","expiresAt":"2026-01-16T10:00:00Z"}"#)
    out(2.0, 1, #"{"type":"rpc.request","payload":{"id":"R1\#(s)","method":"\#(v.firstMethod)","params":{},"traceparent":"\#(tp)"}}"#)
    inn(2.12, 1, #"{"type":"rpc.response","payload":{"id":"R1\#(s)","result":{"sessions":[]},"isFinal":true,"traceparent":"\#(tp)"}}"#)
    out(3.0, 1, #"{"type":"rpc.request","payload":{"id":"R2\#(s)","method":"session.update","params":{"sessionId":"sess-8d1c"},"idempotencyKey":"K2\#(s)"}}"#)
    inn(3.5, 1, #"{"type":"rpc.response","payload":{"id":"R2\#(s)","error":{"code":-32010,"message":"Desktop is offline"},"isFinal":true}}"#)
    inn(4.0, 1, #"{"type":"event","payload":{"eventType":"device-status","payload":{"deviceId":"9a7e","status":"online"}},"eventId":4\#(s.isEmpty ? "2" : "3"),"sourceDeviceId":"relay"}"#)
    out(4.5, 1, #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A1B2","sessionId":"sess-8d1c","active":true}}}"#)
    rec(.timerFired, 5.0, 1, #"{"timer":"heartbeat","gen":1}"#)
    for k in 1...5 {
        out(Double(k) * 5, 1, #"{"type":"heartbeat","payload":{"activeSessionId":"sess-8d1c"}}"#)
        inn(Double(k) * 5 + 0.05, 1, #"{"type":"pong"}"#)
    }
    w.append(.frame(.binary(Array("PTC1".utf8) + [0, 2] + Array("t1hello world".utf8)), time: t(6), generation: 1, direction: .inbound))
    rec(.timerFired, 8.0, nil, #"{"timer":"probe","epoch":1}"#)
    rec(.action, 9.0, nil, #"{"action":"epochOpened","epoch":1,"reason":"foreground","deadline":99000000000}"#)
    out(24.5, 1, #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A1B2","sessionId":"sess-8d1c","active":true}}}"#)
    rec(.transportClosed, 30.0, 1, #"{"code":1006,"reason":"watchdog"}"#, dir: .inbound)
    rec(.transportOpen, 31.0, 2, #"{"url":"wss://relay.example/ws/device-link","headers":[]}"#, dir: .outbound)
    rec(.transportOpened, 31.2, 2, "", dir: .inbound)
    out(31.3, 2, #"{"type":"register","payload":{"deviceId":"5b0e6c8a","deviceName":"Alice's iPhone","relaySessionId":"Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D","resumeToken":"\#(token)","lastEventId":42}}"#)
    inn(31.4, 2, #"{"type":"resumed","sessionId":"Qm3x8c2LrT0aZk9VbN1yWq7uEo4iPs6D","expiresAt":"2026-01-16T10:00:00Z"}"#)
    out(32.0, 2, #"{"type":"rpc.request","payload":{"id":"R3\#(s)","method":"system.ping","params":{}}}"#)
    inn(32.05, 2, #"{"type":"rpc.response","payload":{"id":"R3\#(s)","result":{},"isFinal":true}}"#)
    out(54.5, 2, #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A1B2","sessionId":"sess-8d1c","active":true}}}"#)
    w.append(TraceRecord(kind: .marker, time: t(55), channel: .watch, payload: Array("watch marker".utf8)))
    rec(.transportOpen, 59.0, 3, #"{"url":"wss://relay.example/ws/device-link","headers":[]}"#, dir: .outbound)
    rec(.transportOpened, 59.5, 3, "", dir: .inbound)
    rec(.transportClosed, 60.0, 2, #"{"code":1001,"reason":"background"}"#, dir: .outbound)
    out(60.5, 3, #"{"type":"register","payload":{"deviceId":"5b0e6c8a","deviceName":"Alice's iPhone"}}"#)
    try w.close()
    return path
}

/// Records in `writeRelayTrace`: 10 (g1 setup) + 2 timers + 10 heartbeat/pong + 1 PTC1 + probe + epoch
/// + renewal + close, then 7 of g2, marker, 2 of g3, g2 close, g3 register.
let relayTraceRecordCount = 39
