import Foundation
import Inspect
import RelayProtocol
import SpecCheck
import Trace

/// Which trace convention a synthetic trace follows.
enum Convention: String, CaseIterable, Sendable {
    /// As `capture`/`simulate` write it: the client's frames plus inputs and actions; one device.
    case machine
    /// As a recording relay writes it: header member `wire`, the full upgrade, ping/pong records, a
    /// desktop's socket beside the phone's.
    case wire
}

/// One deliberate mistake of the synthetic client (or a relay fault it reacts to correctly), and the
/// rule that must catch it.
enum Mistake: String, CaseIterable, Sendable {
    case none
    // The relay misbehaves; the client does the right thing: no finding.
    case relaySilentClientObeys, pingUnansweredClientObeys, loopEndsClientStops
    // The peer breaks A8 (a response with another trace ID): a peer finding, exit 0.
    case peerTraceIdMismatch
    // The client breaks one rule each.
    case plainWsURL, wrongTokenBinding, extraHeader, twoLiveGenerations
    case wrongProtocolVersion, heartbeatBeforeRegister, registerTwice, handshakeIgnored
    case heartbeatEvery6s, heartbeatEvery4s, watchdogIgnored
    case tokenKeptAfterInvalidResume, reRegisterTooEarly, reRegisterTooLate, registerAfterLoop, refusedTokenResumed
    case unknownMethod, missingIdempotencyKey, missingTraceparent, snakeCaseKey, duplicateRequestId, timeoutIgnored
    case leaseWithoutAppSession, leaseNotRenewed, leaseReissuedLate
    case binaryFrame, unknownMessageType

    /// The rule that must report it (nil: none may).
    var rule: CheckRule? {
        switch self {
        case .none, .relaySilentClientObeys, .pingUnansweredClientObeys, .loopEndsClientStops: nil
        case .peerTraceIdMismatch: .responseTraceId
        case .plainWsURL: .url
        case .wrongTokenBinding, .extraHeader: .upgradeHeaders
        case .twoLiveGenerations: .oneLiveGeneration
        case .wrongProtocolVersion: .register
        case .heartbeatBeforeRegister: .registerFirst
        case .registerTwice: .registerOnce
        case .handshakeIgnored: .handshake
        case .heartbeatEvery6s, .heartbeatEvery4s: .heartbeat
        case .watchdogIgnored: .watchdog
        case .tokenKeptAfterInvalidResume, .reRegisterTooEarly, .reRegisterTooLate: .reRegister
        case .registerAfterLoop: .invalidResumeLoop
        case .refusedTokenResumed: .resumeCredentials
        case .unknownMethod: .knownMethod
        case .missingIdempotencyKey: .idempotencyKey
        case .missingTraceparent: .traceparent
        case .snakeCaseKey: .camelCase
        case .duplicateRequestId: .requestId
        case .timeoutIgnored: .timeout
        case .leaseWithoutAppSession: .leaseMessage
        case .leaseNotRenewed: .leaseRenewal
        case .leaseReissuedLate: .leaseReissue
        case .binaryFrame, .unknownMessageType: .clientMessage
        }
    }
}

/// A synthetic phone session of about a minute, written with `TraceWriter` in either convention, with
/// at most one mistake: a socket that meets a stale resume (invalidResume, token-less re-register),
/// registers, heartbeats, calls a keyed `session.update` and a `system.ping`, holds a lease with
/// renewals, and closes at 45 s; a second socket resumes with the issued credentials, re-issues the
/// lease and heartbeats until 60 s. The wire convention adds the HTTP upgrade headers, relay pings
/// answered by the client, and a desktop's socket (which breaks every phone rule and must not be judged).
struct SyntheticClient {
    static let device = "5b0e6c8a-1f5d-4d8e-9a53-2a1c9b6f0e11"
    static let desktop = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
    static let jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyLWRldiJ9.c2ln"
    static let staleSession = "STALEsession0123456789abcdefABCD"
    static let staleToken = "STALEtokenSTALEtokenSTALEtokenSTALEtokenSTALEtok"
    static let session1 = "vEXyke5wKv7P54Ax9v7f753j1NqkJPHg"
    static let token1 = "h7GfK2mQ9xTzR4bL1vYpW8nC3sJdE6aU0oIiX5kVqHtMwBzA"
    static let trace1 = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let trace2 = "0af7651916cd43dd8448eb211c80319c"

    let convention: Convention
    let mistake: Mistake

    /// Records and the names of the interesting ones (name -> record number).
    private(set) var records: [TraceRecord] = []
    private(set) var marks: [String: UInt64] = [:]
    private var pending: [(t: Double, seq: Int, name: String?, record: TraceRecord)] = []

    init(_ convention: Convention, _ mistake: Mistake = .none) {
        self.convention = convention
        self.mistake = mistake
        script()
        let sorted = pending.sorted { ($0.t, $0.seq) < ($1.t, $1.seq) }
        records = sorted.map(\.record)
        for (i, p) in sorted.enumerated() { if let name = p.name { marks[name] = UInt64(i) } }
    }

    var wire: Bool { convention == .wire }

    var header: TraceHeader {
        TraceHeader(seed: 7, wallClockStart: "2026-01-15T10:00:00Z", simulated: true,
                    client: wire ? .object([:]) : ["deviceId": .string(Self.device), "desktopId": .string(Self.desktop), "deviceName": "Test iPhone"],
                    extra: wire ? ["wire": ["source": "relay"]] : [:])
    }

    /// Writes the trace (hashed redaction with a fixed key) and returns its path.
    func write(to path: String) throws -> String {
        var options = TraceWriterOptions()
        options.redaction = .hashed
        options.redactionKey = Array(repeating: 7, count: 32)
        options.overwrite = true
        options.blockWhenFull = true
        options.wallClockFlush = false
        let writer = try TraceWriter(path: path, header: header, options: options)
        for r in records { _ = writer.append(r) }
        _ = try writer.close()
        return path
    }

    // MARK: - Building

    private mutating func add(_ t: Double, _ r: TraceRecord, _ name: String? = nil) {
        var r = r
        r.time = .seconds(t)
        pending.append((t, pending.count, name, r))
    }

    private mutating func text(_ t: Double, _ g: UInt64, _ dir: FrameDirection, _ json: JSONValue, _ name: String? = nil) {
        add(t, .frame(.text(json.jsonText), time: .zero, generation: g, direction: dir), name)
    }

    private mutating func control(_ t: Double, _ g: UInt64, _ dir: FrameDirection, ping: Bool) {
        guard wire else { return }
        add(t, TraceRecord(kind: ping ? .ping : .pong, time: .zero, generation: g, direction: dir, payload: Array("k".utf8)))
    }

    private mutating func open(_ t: Double, _ g: UInt64, phone: Bool = true, _ name: String? = nil) {
        var headers: [(String, String)] = [
            ("Authorization", "Bearer " + Self.jwt),
            ("X-Device-ID", phone ? Self.device : Self.desktop),
            ("X-Token-Binding", mistake == .wrongTokenBinding && phone ? "binding-" + Self.device : (phone ? Self.device : Self.desktop)),
            ("X-Client-Type", phone ? "mobile" : "desktop"),
        ]
        if phone { headers.append(("X-Target-Desktop-Device-ID", Self.desktop)) }
        if mistake == .extraHeader && phone { headers.append(("X-Debug-Build", "1")) }
        if wire {
            headers = [("Host", "relay.example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                       ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")] + headers
        }
        let url = mistake == .plainWsURL && phone ? "ws://relay.example.com/ws/device-link" : "wss://relay.example.com/ws/device-link"
        var o: [String: JSONValue] = [
            "url": .string(url),
            "headers": .object(Dictionary(uniqueKeysWithValues: headers.map { ($0.0, .string($0.1)) })),
            "headerOrder": .array(headers.map { .string($0.0) }),
        ]
        if wire {
            o["peer"] = "127.0.0.1:50000"
            o["deviceId"] = .string(phone ? Self.device : Self.desktop)
            if phone { o["desktopId"] = .string(Self.desktop) }
            o["clientType"] = .string(phone ? "mobile" : "desktop")
        }
        add(t, TraceRecord(kind: .transportOpen, time: .zero, generation: g, direction: .outbound, payload: Array(JSONValue.object(o).jsonText.utf8)), name)
        let opened: [UInt8] = wire ? Array(#"{"headerOrder":["Upgrade","Connection","Sec-WebSocket-Accept"],"headers":{"Connection":"Upgrade","Sec-WebSocket-Accept":"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=","Upgrade":"websocket"},"status":101}"#.utf8) : []
        add(t + 0.03, TraceRecord(kind: .transportOpened, time: .zero, generation: g, direction: .inbound, payload: opened))
    }

    private mutating func close(_ t: Double, _ g: UInt64, byClient: Bool, _ name: String? = nil) {
        var o: [String: JSONValue] = ["code": 1001, "reason": byClient ? "bye" : "relay closed"]
        if wire { o["clean"] = true }
        add(t, TraceRecord(kind: .transportClosed, time: .zero, generation: g, direction: byClient ? .outbound : .inbound,
                           payload: Array(JSONValue.object(o).jsonText.utf8)), name)
    }

    private mutating func register(_ t: Double, _ g: UInt64, session: String?, token: String?, _ name: String? = nil) {
        var p: [String: JSONValue] = ["deviceId": .string(Self.device), "deviceName": "Test iPhone",
                                      "relayProtocolVersion": "1.6", "targetDesktopDeviceId": .string(Self.desktop)]
        if let session { p["relaySessionId"] = .string(session) }
        if let token { p["resumeToken"] = .string(token) }
        text(t, g, .outbound, ["type": "register", "payload": .object(p)], name)
    }

    private func traceparent(_ trace: String, _ span: String) -> String { "00-\(trace)-\(span)-01" }

    private mutating func lease(_ t: Double, _ g: UInt64, active: Bool = true, _ name: String? = nil) {
        var inner: [String: JSONValue] = ["sessionId": "sess-1", "active": .bool(active)]
        if mistake != .leaseWithoutAppSession { inner["appSessionId"] = "A1B2" }
        text(t, g, .outbound, ["type": "event", "payload": ["eventType": "chat:timeline-interest", "payload": .object(inner)]], name)
    }

    // MARK: - The script

    private mutating func script() {
        let g1: UInt64 = 1
        let desktopGen: UInt64 = 2
        let g2: UInt64 = wire ? 3 : 2
        if !wire {
            add(0, TraceRecord(kind: .input, time: .zero, payload: Array(#"{"input":"start","jwt":"x","ownership":1}"#.utf8)))
        }
        // Socket 1: a stale resume, refused.
        open(0, g1, "open1")
        if mistake == .heartbeatBeforeRegister { text(0.031, g1, .outbound, ["type": "heartbeat", "payload": [:]], "early-heartbeat") }
        var registerTime = 0.03
        let p: [String: JSONValue] = ["deviceId": .string(Self.device), "deviceName": "Test iPhone",
                                      "relayProtocolVersion": mistake == .wrongProtocolVersion ? "1.5" : "1.6",
                                      "targetDesktopDeviceId": .string(Self.desktop),
                                      "relaySessionId": .string(Self.staleSession), "resumeToken": .string(Self.staleToken)]
        text(registerTime, g1, .outbound, ["type": "register", "payload": .object(p)], "register1")
        let invalid: JSONValue = ["type": "error", "code": "invalidResume", "message": "no live session", "timestamp": "2026-01-15T10:00:00Z"]
        text(registerTime + 0.03, g1, .inbound, invalid, "invalid1")
        let delay = mistake == .reRegisterTooEarly ? 0.05 : mistake == .reRegisterTooLate ? 0.6 : 0.2
        registerTime += 0.03 + delay
        let kept = mistake == .tokenKeptAfterInvalidResume
        register(registerTime, g1, session: kept ? Self.staleSession : nil, token: kept ? Self.staleToken : nil, "reregister1")
        let loop = mistake == .registerAfterLoop || mistake == .loopEndsClientStops
        if loop {
            for k in 2...3 {
                text(registerTime + 0.03, g1, .inbound, invalid, "invalid\(k)")
                if k == 3 && mistake == .loopEndsClientStops {
                    close(registerTime + 0.03, g1, byClient: true)
                    break
                }
                registerTime += 0.23
                register(registerTime, g1, session: nil, token: nil, "reregister\(k)")
            }
        }
        var leaseHeld = false
        var issued = false
        if mistake != .loopEndsClientStops {
            let reg1 = registerTime + (mistake == .handshakeIgnored ? 11.0 : 0.03)
            socketLife(g1, registered: reg1, close: 45.0, first: true, leaseHeld: &leaseHeld)
            issued = true
        }
        // A desktop's socket (wire traces record every client): no heartbeat, snake_case, binary; not judged.
        if wire {
            open(0.5, desktopGen, phone: false)
            text(0.6, desktopGen, .outbound, ["type": "register", "payload": ["device_id": .string(Self.desktop)]])
            add(1.0, .frame(.binary(Array("PTC1".utf8) + [0, 1, 0x73, 0x68]), time: .zero, generation: desktopGen, direction: .outbound))
            close(60.0, desktopGen, byClient: false)
        }
        // Socket 2: resumes with what the relay issued, re-issues the lease.
        let open2 = mistake == .twoLiveGenerations ? 44.0 : 45.0
        open(open2, g2, "open2")
        let resume = mistake == .refusedTokenResumed ? (Self.staleSession, Self.staleToken) : (Self.session1, Self.token1)
        register(open2 + 0.03, g2, session: issued ? resume.0 : nil, token: issued ? resume.1 : nil, "register2")
        let reg2 = open2 + 0.06
        if issued {
            text(reg2, g2, .inbound, ["type": "resumed", "sessionId": .string(Self.session1), "expiresAt": "2026-01-16T10:00:00Z"], "registered2")
        } else {
            text(reg2, g2, .inbound, ["type": "registered", "sessionId": .string(Self.session1), "relaySessionId": .string(Self.session1),
                                      "resumeToken": .string(Self.token1), "expiresAt": "2026-01-16T10:00:00Z"], "registered2")
        }
        socketLife(g2, registered: reg2, close: 60.0, first: false, leaseHeld: &leaseHeld)
    }

    /// A registered socket's life: heartbeats and their pongs, two calls, the lease and its renewals.
    private mutating func socketLife(_ g: UInt64, registered reg: Double, close: Double, first: Bool, leaseHeld: inout Bool) {
        let n = first ? "1" : "2"
        if first {
            text(reg, g, .inbound, ["type": "registered", "sessionId": .string(Self.session1), "relaySessionId": .string(Self.session1),
                                    "resumeToken": .string(Self.token1), "expiresAt": "2026-01-16T10:00:00Z"], "registered1")
        }
        let silentFrom = first && (mistake == .watchdogIgnored || mistake == .relaySilentClientObeys) ? 25.0 : .infinity
        let interval = !first ? 5.0 : mistake == .heartbeatEvery6s ? 6.0 : mistake == .heartbeatEvery4s ? 4.0 : 5.0
        var inbound: [Double] = [reg]
        // Calls: a keyed session.update, then a system.ping.
        let r1 = reg + 0.7, r2 = reg + 2.7
        var closeAt = close
        if first {
            var params: [String: JSONValue] = ["sessionId": "sess-1", "updateData": ["name": "Refactor"]]
            if mistake == .snakeCaseKey { params = ["session_id": "sess-1", "updateData": ["name": "Refactor"]] }
            var req: [String: JSONValue] = ["id": "R1", "method": "session.update", "params": .object(params)]
            if mistake != .missingIdempotencyKey { req["idempotencyKey"] = "R1" }
            if mistake != .missingTraceparent { req["traceparent"] = .string(traceparent(Self.trace1, "00f067aa0ba902b7")) }
            text(r1, g, .outbound, ["type": "rpc.request", "payload": .object(req)], "request1")
            let answerTrace = mistake == .peerTraceIdMismatch ? Self.trace2 : Self.trace1
            text(r1 + 0.05, g, .inbound, ["type": "rpc.response", "payload": ["id": "R1", "result": ["ok": true], "isFinal": true,
                                                                              "traceparent": .string(traceparent(answerTrace, "b7ad6b7169203331"))]], "response1")
            inbound.append(r1 + 0.05)
            let method = mistake == .unknownMethod ? "system.pong" : "system.ping"
            text(r2, g, .outbound, ["type": "rpc.request", "payload": ["id": "R2", "method": .string(method), "params": [:],
                                                                        "traceparent": .string(traceparent(Self.trace2, "00f067aa0ba902b8"))]], "request2")
            if mistake == .duplicateRequestId {
                text(r2 + 0.01, g, .outbound, ["type": "rpc.request", "payload": ["id": "R2", "method": "session.get", "params": ["sessionId": "sess-1"],
                                                                                  "traceparent": .string(traceparent(Self.trace2, "00f067aa0ba902b9"))]], "request3")
            }
            if mistake == .timeoutIgnored || mistake == .pingUnansweredClientObeys {
                if mistake == .pingUnansweredClientObeys { closeAt = r2 + 3.0 }
            } else {
                text(r2 + 0.04, g, .inbound, ["type": "rpc.response", "payload": ["id": "R2", "result": [:],
                                                                                  "traceparent": .string(traceparent(Self.trace2, "b7ad6b7169203332"))]])
                inbound.append(r2 + 0.04)
            }
            if mistake == .registerTwice { register(reg + 3.5, g, session: nil, token: nil, "register-twice") }
            if mistake == .binaryFrame {
                add(reg + 4.0, .frame(.binary(Array("PTC1".utf8) + [0, 1, 0x73, 0x68]), time: .zero, generation: g, direction: .outbound), "binary")
            }
            if mistake == .unknownMessageType { text(reg + 4.1, g, .outbound, ["type": "hello", "payload": [:]], "hello") }
            // The relay pings the socket; the client's stack answers.
            if reg + 7.001 < closeAt {
                control(reg + 7.0, g, .inbound, ping: true)
                control(reg + 7.001, g, .outbound, ping: false)
                inbound.append(reg + 7.0)
            }
        }
        // Heartbeats and pongs.
        var beats: [Double] = []
        var t = reg + interval
        while t < close {
            beats.append(t)
            t += interval
        }
        for b in beats where b + 0.03 < silentFrom { inbound.append(b + 0.03) }
        if mistake == .relaySilentClientObeys && first {
            closeAt = (inbound.filter { $0 < silentFrom }.max() ?? reg) + 15.0
        }
        for (k, b) in beats.enumerated() where b < closeAt {
            text(b, g, .outbound, ["type": "heartbeat", "payload": [:]], "hb\(n).\(k + 1)")
            if !wire && first && k == 1 {
                // A send retry of the second heartbeat (the first attempt failed): not a new heartbeat.
                add(b + 0.25, TraceRecord(kind: .action, time: .zero, generation: g, payload: Array(#"{"action":"sendAttempt","attempt":2,"gen":1}"#.utf8)))
                text(b + 0.25, g, .outbound, ["type": "heartbeat", "payload": [:]])
            }
            if b + 0.03 < silentFrom && b + 0.03 < closeAt { text(b + 0.03, g, .inbound, ["type": "pong"]) }
        }
        // The lease: sent after the first registration, re-issued after the second, renewed every 20 s.
        let renewal = first && mistake == .leaseNotRenewed ? 26.0 : 20.0
        var leaseAt: Double
        if first {
            leaseAt = reg + 1.7
            lease(leaseAt, g, "lease1")
        } else if leaseHeld {
            leaseAt = reg + (mistake == .leaseReissuedLate ? 3.0 : 0.0)
            lease(leaseAt, g, "reissue")
        } else {
            leaseAt = .infinity
        }
        leaseHeld = true
        var k = 1
        while leaseAt + renewal < closeAt {
            leaseAt += renewal
            lease(leaseAt, g, "renewal\(n).\(k)")
            k += 1
        }
        self.close(closeAt, g, byClient: true, "close\(n)")
    }
}

/// Runs the checker over a trace file.
func check(_ path: String, _ options: CheckOptions = CheckOptions()) throws -> CheckReport {
    let reader = try TraceReader(path: path)
    let checker = TraceChecker(header: reader.header, options: options)
    while let e = try reader.next() { checker.add(InspectedRecord(e)) }
    return checker.finish()
}

/// A fresh temporary file path.
func temporaryTrace(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("speccheck-\(getpid())-\(name)-\(UUID().uuidString).rtrace").path
}
