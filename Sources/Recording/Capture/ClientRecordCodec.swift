public import RelayClient
public import RelayProtocol
public import Trace

/// Maps the relay client machine's inputs and actions to trace records and back (the trace vocabulary of
/// docs/TRACE_FORMAT.md, "Relay client records").
///
/// Socket facts use the transport kinds (`transportOpen`, `transportOpened`, `frameText`/`frameBinary`,
/// `transportClosed`, `transportFailed`) with their generation and direction; a fired timer is a
/// `timerFired` record; every other input is an `input` record and every other action an `action` record,
/// each a JSON object named by its `input` / `action` member. Inputs decode back exactly
/// (``decodeInput(_:)``), which is what the replayer feeds; actions are compared in their encoded form.
public enum ClientRecordCodec {
    // MARK: Inputs

    /// The record of `input` at `time`.
    public static func record(_ input: ClientInput, at time: Moment) -> TraceRecord {
        switch input {
        case .transportOpened(let g):
            return TraceRecord(kind: .transportOpened, time: time, channel: .relay, generation: g.rawValue,
                               direction: .inbound, payload: [])
        case .transportFrame(let g, let frame):
            return frameRecord(frame, g, .inbound, time)
        case .transportClosed(let g, let code, let reason):
            var o: [String: JSONValue] = ["reason": .string(reason)]
            if let code { o["code"] = .int(Int64(code)) }
            return jsonRecord(.transportClosed, time, g, .inbound, .object(o))
        case .transportFailed(let g, let failure):
            var o: [String: JSONValue] = ["error": .string(failure.description)]
            if case .upgradeRefused(let status) = failure { o["status"] = .int(Int64(status)) }
            return jsonRecord(.transportFailed, time, g, .inbound, .object(o))
        case .timerFired(let id):
            return jsonRecord(.timerFired, time, id.generation, nil, timerJSON(id))
        default:
            let (json, g) = inputJSON(input)
            return jsonRecord(.input, time, g, nil, json)
        }
    }

    /// The input a record stands for, or nil when the record is not an input (an action, a marker, a
    /// header...). Throws when the record claims to be an input but does not decode.
    ///
    /// The frequent timer and input records, in the exact canonical bytes `record(_:at:)`
    /// writes, are read directly; everything else goes through the general JSON decoder
    /// (``decodeInputGeneral(_:)``), which gives the same input.
    public static func decodeInput(_ record: TraceRecord) throws(CodecError) -> ClientInput? {
        if record.kind == .timerFired || record.kind == .input, let input = InputFastPath.decode(record.payload, kind: record.kind) {
            assert((try? decodeInputGeneral(record)) == input, "InputFastPath disagrees with decodeInputGeneral")
            return input
        }
        return try decodeInputGeneral(record)
    }

    /// ``decodeInput(_:)`` without its direct reader of canonical bytes: every JSON record is parsed as
    /// general JSON. The two agree on every record; this one is the reference the tests compare against.
    public static func decodeInputGeneral(_ record: TraceRecord) throws(CodecError) -> ClientInput? {
        let g = record.generation.map { Generation($0) }
        switch record.kind {
        case .transportOpened:
            return .transportOpened(try need(g, "transportOpened"))
        case .frameText, .frameBinary:
            guard record.direction == .inbound else { return nil }
            let frame: WireFrame = record.kind == .frameText
                ? .text(String(decoding: record.payload, as: UTF8.self)) : .binary(record.payload)
            return .transportFrame(try need(g, "frame"), frame)
        case .transportClosed:
            guard record.direction == .inbound else { return nil }
            let o = try object(record)
            let code = try o.optionalInt("code").map { UInt16(clamping: $0) }
            return .transportClosed(try need(g, "transportClosed"), code: code, reason: try o.string("reason"))
        case .transportFailed:
            let o = try object(record)
            if let status = try o.optionalInt("status") {
                return .transportFailed(try need(g, "transportFailed"), .upgradeRefused(status: Int(status)))
            }
            return .transportFailed(try need(g, "transportFailed"), .network(try o.string("error")))
        case .timerFired:
            return .timerFired(try timerID(try object(record)))
        case .input:
            return try input(try object(record), g)
        default:
            return nil
        }
    }

    // MARK: Actions

    /// The record of `action` at `time`.
    public static func record(_ action: ClientAction, at time: Moment) -> TraceRecord {
        switch action {
        case .openTransport(let g, let url, let headers):
            var h: [String: JSONValue] = [:]
            for header in headers { h[header.name] = .string(header.value) }
            let json: JSONValue = ["url": .string(url), "headers": .object(h),
                                   "headerOrder": .array(headers.map { .string($0.name) })]
            return jsonRecord(.transportOpen, time, g, .outbound, json)
        case .send(let g, let frame, _):
            return frameRecord(frame, g, .outbound, time)
        case .closeTransport(let g, let code, let reason):
            return jsonRecord(.transportClosed, time, g, .outbound, ["code": .int(Int64(code)), "reason": .string(reason)])
        case .armTimer(let id, _), .cancelTimer(let id):
            return directRecord(action, time, id.generation)
        case .phaseChanged(let phase):
            return directRecord(action, time, phase.generation)
        case .connectionFailed(let g, _):
            return directRecord(action, time, g)
        case .ingress(.deliverSnapshot), .ingress(.deliverControl), .callCompleted, .desktopStatusChanged,
             .epochOpened:
            return directRecord(action, time, nil)
        default:
            let (json, g) = actionJSON(action)
            return jsonRecord(.action, time, g, nil, json)
        }
    }

    /// An action record from `directActionBytes` (the same bytes as the `actionJSON` route).
    private static func directRecord(_ action: ClientAction, _ time: Moment, _ g: Generation?) -> TraceRecord {
        guard let bytes = directActionBytes(action) else {
            let (json, g) = actionJSON(action)
            return jsonRecord(.action, time, g, nil, json)
        }
        assert({ let (json, jg) = actionJSON(action); return json.serialized() == bytes && jg == g }(), "directActionBytes disagrees with actionJSON")
        return TraceRecord(kind: .action, time: time, channel: .relay, generation: g?.rawValue, direction: nil, payload: bytes)
    }

    /// The records of `action`: usually one; a retried send (`attempt` > 1) is preceded by a
    /// `sendAttempt` action record, since frame records carry no attempt number.
    public static func records(_ action: ClientAction, at time: Moment) -> [TraceRecord] {
        if case .send(let g, _, let attempt) = action, attempt > 1 {
            let marker: JSONValue = ["action": "sendAttempt", "gen": .int(Int64(g.rawValue)), "attempt": .int(Int64(attempt))]
            return [jsonRecord(.action, time, g, nil, marker), record(action, at: time)]
        }
        return [record(action, at: time)]
    }

    /// Whether a record is one the machine's actions produce (for the replayer's comparison).
    public static func isAction(_ record: TraceRecord) -> Bool {
        switch record.kind {
        case .transportOpen, .action: true
        case .frameText, .frameBinary, .transportClosed: record.direction == .outbound
        default: false
        }
    }

    // MARK: JSON forms

    /// The `timer` name of every timer ``timerJSON(_:)`` writes (what `replay --break timer=NAME` takes).
    public static let timerNames = ["handshake", "heartbeat", "watchdog", "reRegister", "sendRetry", "rpcTimeout", "reconnect",
                                    "epochDeadline", "probe", "foregroundRecovery", "auth.poll", "auth.refresh",
                                    "interest.renewal", "interest.retry"]

    /// The JSON of a timer ID, e.g. `{"timer":"heartbeat","gen":3}`.
    public static func timerJSON(_ id: TimerID) -> JSONValue {
        switch id {
        case .handshake(let g): ["timer": "handshake", "gen": gen(g)]
        case .heartbeat(let g): ["timer": "heartbeat", "gen": gen(g)]
        case .watchdog(let g): ["timer": "watchdog", "gen": gen(g)]
        case .reRegister(let g): ["timer": "reRegister", "gen": gen(g)]
        case .sendRetry(let g, let slot): ["timer": "sendRetry", "gen": gen(g), "slot": .int(Int64(bitPattern: slot))]
        case .rpcTimeout(let id, let own): ["timer": "rpcTimeout", "requestId": .string(id), "ownership": .int(Int64(bitPattern: own))]
        case .reconnect(let attempt): ["timer": "reconnect", "attempt": .int(Int64(attempt))]
        case .epochDeadline(let e): ["timer": "epochDeadline", "epoch": .int(Int64(bitPattern: e))]
        case .probe(let e): ["timer": "probe", "epoch": .int(Int64(bitPattern: e))]
        case .foregroundRecovery: ["timer": "foregroundRecovery"]
        case .auth(.poll): ["timer": "auth.poll"]
        case .auth(.refresh): ["timer": "auth.refresh"]
        case .interest(.renewal(let d)): ["timer": "interest.renewal", "desktopId": .string(d)]
        case .interest(.retry(let d)): ["timer": "interest.retry", "desktopId": .string(d)]
        }
    }

    static func timerID(_ o: Fields) throws(CodecError) -> TimerID {
        switch try o.string("timer") {
        case "handshake": return .handshake(try o.gen())
        case "heartbeat": return .heartbeat(try o.gen())
        case "watchdog": return .watchdog(try o.gen())
        case "reRegister": return .reRegister(try o.gen())
        case "sendRetry": return .sendRetry(try o.gen(), slot: UInt64(bitPattern: try o.int("slot")))
        case "rpcTimeout": return .rpcTimeout(requestId: try o.string("requestId"), ownership: UInt64(bitPattern: try o.int("ownership")))
        case "reconnect": return .reconnect(attempt: Int(try o.int("attempt")))
        case "epochDeadline": return .epochDeadline(epoch: UInt64(bitPattern: try o.int("epoch")))
        case "probe": return .probe(epoch: UInt64(bitPattern: try o.int("epoch")))
        case "foregroundRecovery": return .foregroundRecovery
        case "auth.poll": return .auth(.poll)
        case "auth.refresh": return .auth(.refresh)
        case "interest.renewal": return .interest(.renewal(desktopId: try o.string("desktopId")))
        case "interest.retry": return .interest(.retry(desktopId: try o.string("desktopId")))
        case let other: throw CodecError(path: o.path + ".timer", message: "unknown timer '\(other)'")
        }
    }

    static func inputJSON(_ input: ClientInput) -> (JSONValue, Generation?) {
        switch input {
        case .start(let p):
            var o: [String: JSONValue] = ["input": "start", "jwt": .string(p.jwt), "ownership": .int(Int64(bitPattern: p.resumeOwnership))]
            if let r = p.storedResume { o["resume"] = resumeJSON(r) }
            return (.object(o), nil)
        case .stop:
            return (["input": "stop"], nil)
        case .sendFailed(let g, let frame, let attempt, let transient, let reason):
            var o: [String: JSONValue] = ["input": "sendFailed", "gen": gen(g), "attempt": .int(Int64(attempt)),
                                          "transient": .bool(transient), "reason": .string(reason)]
            switch frame {
            case .text(let t): o["text"] = .string(t)
            case .binary(let b): o["binaryHex"] = .string(hexString(b))
            }
            return (.object(o), g)
        case .call(let c):
            var o: [String: JSONValue] = ["input": "call", "callId": .int(Int64(bitPattern: c.callId.rawValue)),
                                          "method": .string(c.method), "params": c.params]
            if let k = c.idempotencyKey { o["idempotencyKey"] = .string(k) }
            if let r = c.requestId { o["requestId"] = .string(r) }
            return (.object(o), nil)
        case .networkPath(let p):
            let name: String = switch p {
            case .unsatisfied: "unsatisfied"
            case .satisfied(let i): i.rawValue
            }
            return (["input": "networkPath", "path": .string(name)], nil)
        case .appState(let s):
            return (["input": "appState", "state": .string(s.rawValue)], nil)
        case .desktopMediaPlaying(let playing):
            return (["input": "media", "playing": .bool(playing)], nil)
        case .push(.desktopOnline(let d)):
            return (["input": "push", "push": "desktopOnline", "desktopId": .string(d)], nil)
        case .identity(let i):
            return (identityJSON(i), nil)
        case .auth(let a):
            return (authJSON(a), nil)
        case .selectRegion(let r):
            return (["input": "selectRegion", "region": .string(r.rawValue)], nil)
        case .interest(let i):
            switch i {
            case .claim(let id, let s):
                return (["input": "interest.claim", "claimId": .int(Int64(bitPattern: id.rawValue)), "baseSessionId": .string(s)], nil)
            case .confirmVisible(let id):
                return (["input": "interest.confirmVisible", "claimId": .int(Int64(bitPattern: id.rawValue))], nil)
            case .release(let id):
                return (["input": "interest.release", "claimId": .int(Int64(bitPattern: id.rawValue))], nil)
            }
        case .snapshotProcessed:
            return (["input": "snapshotProcessed"], nil)
        case .offlineQueue(.loaded(let mutations)):
            return (["input": "offlineQueue.loaded", "mutations": .array(mutations.map(mutationJSON))], nil)
        case .link(let l):
            return (linkInputJSON(l), nil)
        case .transportOpened(let g), .transportFrame(let g, _), .transportClosed(let g, _, _), .transportFailed(let g, _):
            return (["input": "transport"], g)  // never reached: these have their own record kinds
        case .timerFired(let id):
            return (timerJSON(id), id.generation)  // never reached: timerFired has its own kind
        }
    }

    static func input(_ o: Fields, _ g: Generation?) throws(CodecError) -> ClientInput {
        switch try o.string("input") {
        case "start":
            let resume = try o.optionalObject("resume").map { r throws(CodecError) in
                ResumeCredentials(relaySessionId: try r.string("relaySessionId"), resumeToken: try r.string("resumeToken"))
            }
            return .start(StartParameters(jwt: try o.string("jwt"), storedResume: resume,
                                          resumeOwnership: UInt64(bitPattern: try o.int("ownership"))))
        case "stop":
            return .stop
        case "sendFailed":
            let frame: WireFrame
            if let t = try o.optionalString("text") {
                frame = .text(t)
            } else {
                frame = .binary(try bytes(fromHex: try o.string("binaryHex"), path: o.path + ".binaryHex"))
            }
            return .sendFailed(try o.gen(), frame: frame, attempt: Int(try o.int("attempt")),
                               transient: try o.bool("transient"), reason: try o.string("reason"))
        case "call":
            return .call(CallRequest(callId: CallID(UInt64(bitPattern: try o.int("callId"))), method: try o.string("method"),
                                     params: o.value("params") ?? .object([:]),
                                     idempotencyKey: try o.optionalString("idempotencyKey"),
                                     requestId: try o.optionalString("requestId")))
        case "networkPath":
            let p = try o.string("path")
            if p == "unsatisfied" { return .networkPath(.unsatisfied) }
            guard let i = NetworkInterface(rawValue: p) else { throw o.bad("path", "unknown path '\(p)'") }
            return .networkPath(.satisfied(i))
        case "appState":
            guard let s = AppState(rawValue: try o.string("state")) else { throw o.bad("state", "unknown app state") }
            return .appState(s)
        case "media":
            return .desktopMediaPlaying(try o.bool("playing"))
        case "push":
            return .push(.desktopOnline(desktopId: try o.string("desktopId")))
        case "identity":
            return .identity(try identityInput(o))
        case "auth":
            return .auth(try authInput(o))
        case "selectRegion":
            guard let r = Region(rawValue: try o.string("region")) else { throw o.bad("region", "unknown region") }
            return .selectRegion(r)
        case "interest.claim":
            return .interest(.claim(ClaimID(UInt64(bitPattern: try o.int("claimId"))), baseSessionId: try o.string("baseSessionId")))
        case "interest.confirmVisible":
            return .interest(.confirmVisible(ClaimID(UInt64(bitPattern: try o.int("claimId")))))
        case "interest.release":
            return .interest(.release(ClaimID(UInt64(bitPattern: try o.int("claimId")))))
        case "snapshotProcessed":
            return .snapshotProcessed
        case "offlineQueue.loaded":
            guard let list = o.value("mutations")?.arrayValue else { throw o.bad("mutations", "missing or not an array") }
            var mutations: [OfflineMutation] = []
            for (i, item) in list.enumerated() {
                guard let m = item.objectValue else { throw o.bad("mutations[\(i)]", "not an object") }
                let f = Fields(values: m, path: "\(o.path).mutations[\(i)]")
                mutations.append(OfflineMutation(idempotencyKey: try f.string("idempotencyKey"), method: try f.string("method"),
                                                 params: f.value("params") ?? .object([:]),
                                                 createdAt: Moment(nanoseconds: try f.int("createdAt"))))
            }
            return .offlineQueue(.loaded(mutations))
        case "link.enterCode", "link.scanCode", "link.stored", "link.storeFailed":
            return .link(try linkInput(o))
        case let other:
            throw o.bad("input", "unknown input '\(other)'")
        }
    }

    // MARK: A1 / A2 forms

    static func loginJSON(_ l: StoredLogin) -> JSONValue {
        ["jwt": .string(l.jwt), "expiry": .int(l.expiry.nanoseconds)]
    }

    static func login(_ o: Fields) throws(CodecError) -> StoredLogin {
        StoredLogin(jwt: try o.string("jwt"), expiry: Moment(nanoseconds: try o.int("expiry")))
    }

    static func identityJSON(_ i: IdentityInput) -> JSONValue {
        switch i {
        case .start: return ["input": "identity", "event": "start"]
        case .protectedDataAvailable: return ["input": "identity", "event": "protectedDataAvailable"]
        case .appActive: return ["input": "identity", "event": "appActive"]
        case .resetConfirmed: return ["input": "identity", "event": "resetConfirmed"]
        case .identityRead(let outcome):
            var r: [String: JSONValue]
            switch outcome {
            case .available(let d, let l):
                r = ["outcome": "available", "deviceId": .string(d)]
                if let l { r["login"] = loginJSON(l) }
            case .lockedBeforeFirstUnlock: r = ["outcome": "lockedBeforeFirstUnlock"]
            case .jwtLocked(let d): r = ["outcome": "jwtLocked", "deviceId": .string(d)]
            case .unreadable: r = ["outcome": "unreadable"]
            }
            return ["input": "identity", "event": "identityRead", "read": .object(r)]
        }
    }

    static func identityInput(_ o: Fields) throws(CodecError) -> IdentityInput {
        switch try o.string("event") {
        case "start": return .start
        case "protectedDataAvailable": return .protectedDataAvailable
        case "appActive": return .appActive
        case "resetConfirmed": return .resetConfirmed
        case "identityRead":
            let r = try o.object("read")
            switch try r.string("outcome") {
            case "available":
                return .identityRead(.available(deviceId: try r.string("deviceId"),
                                                login: try r.optionalObject("login").map { l throws(CodecError) in try login(l) }))
            case "lockedBeforeFirstUnlock": return .identityRead(.lockedBeforeFirstUnlock)
            case "jwtLocked": return .identityRead(.jwtLocked(deviceId: try r.string("deviceId")))
            case "unreadable": return .identityRead(.unreadable)
            case let other: throw r.bad("outcome", "unknown outcome '\(other)'")
            }
        case let other: throw o.bad("event", "unknown identity event '\(other)'")
        }
    }

    static func authJSON(_ a: AuthInput) -> JSONValue {
        switch a {
        case .startLogin(let pkce, let pollingId):
            return ["input": "auth", "event": "startLogin", "pkceVerifier": .string(pkce.verifier),
                    "pkceChallenge": .string(pkce.challenge), "pollingId": .string(pollingId)]
        case .cancelLogin: return ["input": "auth", "event": "cancelLogin"]
        case .resumeSession(let l): return ["input": "auth", "event": "resumeSession", "login": loginJSON(l)]
        case .refreshNow: return ["input": "auth", "event": "refreshNow"]
        case .logout: return ["input": "auth", "event": "logout"]
        case .httpResponse(let id, let status, let body):
            let b: JSONValue = switch body {
            case .none: ["body": "none"]
            case .token(let l): ["body": "token", "login": loginJSON(l)]
            case .poll(.pending): ["body": "poll", "result": "pending"]
            case .poll(.completed(let code)): ["body": "poll", "result": "completed", "authCode": .string(code)]
            case .poll(.failed(let why)): ["body": "poll", "result": "failed", "reason": .string(why)]
            }
            return ["input": "auth", "event": "httpResponse", "id": .int(Int64(bitPattern: id.rawValue)),
                    "status": .int(Int64(status)), "body": b]
        case .httpFailed(let id, let reason):
            return ["input": "auth", "event": "httpFailed", "id": .int(Int64(bitPattern: id.rawValue)), "reason": .string(reason)]
        case .timerFired(let t):
            return ["input": "auth", "event": "timerFired", "timer": .string(t == .poll ? "poll" : "refresh")]
        }
    }

    static func authInput(_ o: Fields) throws(CodecError) -> AuthInput {
        switch try o.string("event") {
        case "startLogin":
            return .startLogin(pkce: PKCEPair(verifier: try o.string("pkceVerifier"), challenge: try o.string("pkceChallenge")),
                               pollingId: try o.string("pollingId"))
        case "cancelLogin": return .cancelLogin
        case "resumeSession": return .resumeSession(try login(try o.object("login")))
        case "refreshNow": return .refreshNow
        case "logout": return .logout
        case "httpResponse":
            let b = try o.object("body")
            let body: AuthResponseBody
            switch try b.string("body") {
            case "none": body = .none
            case "token": body = .token(try login(try b.object("login")))
            case "poll":
                switch try b.string("result") {
                case "pending": body = .poll(.pending)
                case "completed": body = .poll(.completed(code: try b.string("authCode")))
                case "failed": body = .poll(.failed(try b.string("reason")))
                case let other: throw b.bad("result", "unknown poll result '\(other)'")
                }
            case let other: throw b.bad("body", "unknown body '\(other)'")
            }
            return .httpResponse(AuthRequestID(UInt64(bitPattern: try o.int("id"))), status: Int(try o.int("status")), body: body)
        case "httpFailed":
            return .httpFailed(AuthRequestID(UInt64(bitPattern: try o.int("id"))), reason: try o.string("reason"))
        case "timerFired":
            return .timerFired(try o.string("timer") == "poll" ? .poll : .refresh)
        case let other: throw o.bad("event", "unknown auth event '\(other)'")
        }
    }

    // MARK: Helpers

    static func resumeJSON(_ r: ResumeCredentials) -> JSONValue {
        ["relaySessionId": .string(r.relaySessionId), "resumeToken": .string(r.resumeToken)]
    }

    static func gen(_ g: Generation) -> JSONValue { .int(Int64(bitPattern: g.rawValue)) }

    static func frameRecord(_ frame: WireFrame, _ g: Generation, _ dir: FrameDirection, _ time: Moment) -> TraceRecord {
        switch frame {
        case .text(let t):
            TraceRecord(kind: .frameText, time: time, channel: .relay, generation: g.rawValue, direction: dir, payload: Array(t.utf8))
        case .binary(let b):
            TraceRecord(kind: .frameBinary, time: time, channel: .relay, generation: g.rawValue, direction: dir, payload: b)
        }
    }

    static func jsonRecord(_ kind: RecordKind, _ time: Moment, _ g: Generation?, _ dir: FrameDirection?, _ json: JSONValue) -> TraceRecord {
        TraceRecord(kind: kind, time: time, channel: .relay, generation: g?.rawValue, direction: dir, payload: json.serialized())
    }

    static func need(_ g: Generation?, _ what: String) throws(CodecError) -> Generation {
        guard let g else { throw CodecError(path: "$", message: "a \(what) record without a generation") }
        return g
    }

    static func object(_ record: TraceRecord) throws(CodecError) -> Fields {
        let json: JSONValue
        do { json = try JSONValue(parsing: record.payload) } catch {
            throw CodecError(path: "$", message: "the \(record.kind) payload is not JSON: \(error)")
        }
        guard case .object(let o) = json else { throw CodecError(path: "$", message: "the \(record.kind) payload is not a JSON object") }
        return Fields(values: o, path: "$")
    }

    static func bytes(fromHex hex: String, path: String) throws(CodecError) -> [UInt8] {
        guard hex.utf8.count % 2 == 0 else { throw CodecError(path: path, message: "odd number of hex digits") }
        guard let bytes = hexDecoded(hex) else { throw CodecError(path: path, message: "not hex") }
        return bytes
    }
}

/// A record that does not decode as what its kind promises, with the JSON path of the problem.
public struct CodecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the payload (JSONPath).
    public var path: String
    /// What is wrong.
    public var message: String
    /// `<path>: <message>`.
    public var description: String { "\(path): \(message)" }
}

/// Typed reads of a JSON object's members, with JSONPath errors.
struct Fields {
    var values: [String: JSONValue]
    var path: String

    func value(_ key: String) -> JSONValue? {
        guard let v = values[key], !v.isNull else { return nil }
        return v
    }

    func bad(_ key: String, _ message: String) -> CodecError { CodecError(path: "\(path).\(key)", message: message) }

    func string(_ key: String) throws(CodecError) -> String {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard let s = v.stringValue else { throw bad(key, "not a string") }
        return s
    }

    func optionalString(_ key: String) throws(CodecError) -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v.stringValue else { throw bad(key, "not a string") }
        return s
    }

    func int(_ key: String) throws(CodecError) -> Int64 {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard let i = v.intValue else { throw bad(key, "not an integer") }
        return i
    }

    func optionalInt(_ key: String) throws(CodecError) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let i = v.intValue else { throw bad(key, "not an integer") }
        return i
    }

    func bool(_ key: String) throws(CodecError) -> Bool {
        guard let b = value(key)?.boolValue else { throw bad(key, "missing or not a boolean") }
        return b
    }

    func object(_ key: String) throws(CodecError) -> Fields {
        guard let o = value(key)?.objectValue else { throw bad(key, "missing or not an object") }
        return Fields(values: o, path: "\(path).\(key)")
    }

    func optionalObject(_ key: String) throws(CodecError) -> Fields? {
        guard let v = value(key) else { return nil }
        guard let o = v.objectValue else { throw bad(key, "not an object") }
        return Fields(values: o, path: "\(path).\(key)")
    }

    func gen() throws(CodecError) -> Generation { Generation(UInt64(bitPattern: try int("gen"))) }
}
