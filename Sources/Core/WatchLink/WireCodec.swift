public import RelayProtocol

/// One datagram of the watch <-> phone link: what the transport carries.
public enum WatchDatagram: Sendable, Hashable {
    /// Watch -> phone: a command under its sequence number and incarnation (C2, C8).
    case command(CommandEnvelope)
    /// Phone -> watch: an acknowledgement reply (C3).
    case ack(CommandAck)
    /// Phone -> watch: a snapshot (C9), carrying the newest acknowledgement (C14).
    case snapshot(WorkoutSnapshot)
}

/// The JSON wire codec of the watch link: commands, acknowledgements and snapshots as compact JSON
/// objects (`{"type":"command"|"ack"|"snapshot", ...}`), keys sorted, so equal datagrams are equal bytes.
///
/// Every 64-bit counter (sequence, ack, revision, rest end) travels as a decimal string (C12: JSON
/// numbers cannot hold every `UInt64`, and the watch's `Int` is 32 bits); the incarnation token as 32
/// lower-case hex digits. Other integers are JSON integers checked against their Swift type's range.
/// Decoding is strict: a missing or mistyped member is a ``WatchWireError`` naming its JSON path.
public enum WatchWire {
    /// The largest datagram the codec decodes (bounded allocation): 64 KiB, a UDP datagram's limit.
    public static let maxDatagramBytes = 65_507

    /// The bytes of `datagram`.
    public static func encode(_ datagram: WatchDatagram) -> [UInt8] {
        json(datagram).serialized()
    }

    /// The datagram in `bytes`; throws when they are not a datagram of this codec.
    public static func decode(_ bytes: some Collection<UInt8>) throws(WatchWireError) -> WatchDatagram {
        guard bytes.count <= maxDatagramBytes else {
            throw WatchWireError(path: "$", message: "datagram of \(bytes.count) bytes is over the \(maxDatagramBytes)-byte limit; split the state or drop the datagram")
        }
        let value: JSONValue
        do { value = try JSONValue(parsing: bytes) } catch {
            throw WatchWireError(path: "$", message: "not JSON (\(error)); the peer must send one compact JSON object per datagram")
        }
        return try datagram(from: value)
    }

    /// The JSON of `datagram`.
    public static func json(_ datagram: WatchDatagram) -> JSONValue {
        switch datagram {
        case .command(let c):
            var o = envelopeJSON(c).objectValue ?? [:]
            o["type"] = "command"
            return .object(o)
        case .ack(let a):
            var o = ackJSON(a).objectValue ?? [:]
            o["type"] = "ack"
            return .object(o)
        case .snapshot(let s):
            var o = snapshotJSON(s).objectValue ?? [:]
            o["type"] = "snapshot"
            return .object(o)
        }
    }

    /// The datagram a JSON value stands for.
    public static func datagram(from value: JSONValue) throws(WatchWireError) -> WatchDatagram {
        let o = try WireFields(value, path: "$")
        switch try o.string("type") {
        case "command": return .command(try envelope(o))
        case "ack": return .ack(try ack(o))
        case "snapshot": return .snapshot(try snapshot(o))
        case let other: throw o.bad("type", "unknown datagram type '\(other)'; expected command, ack or snapshot")
        }
    }

    // MARK: Commands

    /// `{"seq":"N","incarnation":"hex","session":"S","payload":{...}}`.
    public static func envelopeJSON(_ c: CommandEnvelope) -> JSONValue {
        ["seq": .string(String(c.sequence)), "incarnation": .string(c.incarnation.description),
         "session": .string(c.command.session.rawValue), "payload": payloadJSON(c.command.payload)]
    }

    /// Decodes ``envelopeJSON(_:)`` (at JSON path `path`).
    public static func envelope(from value: JSONValue, path: String = "$") throws(WatchWireError) -> CommandEnvelope {
        try envelope(try WireFields(value, path: path))
    }

    /// The JSON of a command (session and payload).
    public static func commandJSON(_ c: WatchCommand) -> JSONValue {
        ["session": .string(c.session.rawValue), "payload": payloadJSON(c.payload)]
    }

    /// Decodes ``commandJSON(_:)``.
    public static func command(from value: JSONValue, path: String = "$") throws(WatchWireError) -> WatchCommand {
        let o = try WireFields(value, path: path)
        return WatchCommand(session: SessionID(try o.string("session")), payload: try payload(try o.object("payload")))
    }

    static func envelope(_ o: WireFields) throws(WatchWireError) -> CommandEnvelope {
        CommandEnvelope(sequence: try o.uint64("seq"), incarnation: try o.token("incarnation"),
                        command: WatchCommand(session: SessionID(try o.string("session")),
                                              payload: try payload(try o.object("payload"))))
    }

    static func payloadJSON(_ p: CommandPayload) -> JSONValue {
        switch p {
        case .completeSet(let e):
            var o: [String: JSONValue] = ["kind": "completeSet", "exerciseIndex": .int(Int64(e.exerciseIndex)),
                                          "setOffset": .int(Int64(e.setOffset))]
            if let id = e.setId { o["setId"] = .string(id) }
            if let w = e.weightGrams { o["weightGrams"] = .int(w) }
            if let r = e.reps { o["reps"] = .int(r) }
            return .object(o)
        case .adjustRest(let d): return ["kind": "adjustRest", "deltaSeconds": .int(d)]
        case .skipExercise(let i): return ["kind": "skipExercise", "exerciseIndex": .int(Int64(i))]
        case .endWorkout: return ["kind": "endWorkout"]
        }
    }

    static func payload(_ o: WireFields) throws(WatchWireError) -> CommandPayload {
        switch try o.string("kind") {
        case "completeSet":
            return .completeSet(SetEntry(exerciseIndex: try o.uint32("exerciseIndex"), setOffset: try o.uint32("setOffset"),
                                         setId: try o.optionalString("setId"), weightGrams: try o.optionalInt("weightGrams"),
                                         reps: try o.optionalInt("reps")))
        case "adjustRest": return .adjustRest(deltaSeconds: try o.int("deltaSeconds"))
        case "skipExercise": return .skipExercise(exerciseIndex: try o.uint32("exerciseIndex"))
        case "endWorkout": return .endWorkout
        case let other: throw o.bad("kind", "unknown command kind '\(other)'; expected completeSet, adjustRest, skipExercise or endWorkout")
        }
    }

    // MARK: Acknowledgements

    /// `{"next":"N","incarnation":"hex"}`.
    public static func ackJSON(_ a: CommandAck) -> JSONValue {
        ["next": .string(String(a.next)), "incarnation": .string(a.incarnation.description)]
    }

    /// Decodes ``ackJSON(_:)``.
    public static func ack(from value: JSONValue, path: String = "$") throws(WatchWireError) -> CommandAck {
        try ack(try WireFields(value, path: path))
    }

    static func ack(_ o: WireFields) throws(WatchWireError) -> CommandAck {
        CommandAck(next: try o.uint64("next"), incarnation: try o.token("incarnation"))
    }

    // MARK: Snapshots

    /// `{"revision":"N","ack":{...}?,"state":{...}}`.
    public static func snapshotJSON(_ s: WorkoutSnapshot) -> JSONValue {
        var o: [String: JSONValue] = ["revision": .string(String(s.revision)), "state": stateJSON(s.state)]
        if let a = s.ack { o["ack"] = ackJSON(a) }
        return .object(o)
    }

    /// Decodes ``snapshotJSON(_:)``.
    public static func snapshot(from value: JSONValue, path: String = "$") throws(WatchWireError) -> WorkoutSnapshot {
        try snapshot(try WireFields(value, path: path))
    }

    static func snapshot(_ o: WireFields) throws(WatchWireError) -> WorkoutSnapshot {
        WorkoutSnapshot(revision: try o.uint64("revision"), state: try state(try o.object("state")),
                        ack: try o.optionalObject("ack").map { a throws(WatchWireError) in try ack(a) })
    }

    /// The JSON of a workout state (every field, watch-only ones included).
    public static func stateJSON(_ s: WorkoutState) -> JSONValue {
        var o: [String: JSONValue] = [
            "sessionId": .string(s.sessionId.rawValue), "phase": .string(s.phase.rawValue),
            "currentExerciseIndex": .int(Int64(s.currentExerciseIndex)), "elapsedSeconds": .int(s.elapsedSeconds),
            "exercises": .array(s.exercises.map { e in
                var x: [String: JSONValue] = ["plannedSets": .int(Int64(e.plannedSets)), "completedSets": .int(Int64(e.completedSets)),
                                              "setIds": .array(e.setIds.map { .string($0) })]
                if let w = e.workingWeightGrams { x["weightGrams"] = .int(w) }
                if let r = e.targetReps { x["targetReps"] = .int(r) }
                return .object(x)
            }),
        ]
        if let r = s.restEndsAtMilliseconds { o["restEndsAt"] = .string(String(r)) }
        return .object(o)
    }

    /// Decodes ``stateJSON(_:)``.
    public static func state(from value: JSONValue, path: String = "$") throws(WatchWireError) -> WorkoutState {
        try state(try WireFields(value, path: path))
    }

    static func state(_ o: WireFields) throws(WatchWireError) -> WorkoutState {
        let phaseName = try o.string("phase")
        guard let phase = WorkoutPhase(rawValue: phaseName) else {
            throw o.bad("phase", "unknown phase '\(phaseName)'; expected one of \(WorkoutPhase.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var exercises: [ExerciseProgress] = []
        for (i, v) in try o.array("exercises").enumerated() {
            let e = try WireFields(v, path: "\(o.path).exercises[\(i)]")
            var ids: [String] = []
            for (j, id) in try e.array("setIds").enumerated() {
                guard let s = id.stringValue else { throw WatchWireError(path: "\(e.path).setIds[\(j)]", message: "not a string") }
                ids.append(s)
            }
            exercises.append(ExerciseProgress(plannedSets: try e.uint32("plannedSets"), completedSets: try e.uint32("completedSets"),
                                              workingWeightGrams: try e.optionalInt("weightGrams"),
                                              targetReps: try e.optionalInt("targetReps"), setIds: ids))
        }
        return WorkoutState(sessionId: SessionID(try o.string("sessionId")), phase: phase,
                            currentExerciseIndex: try o.uint32("currentExerciseIndex"), elapsedSeconds: try o.int("elapsedSeconds"),
                            restEndsAtMilliseconds: try o.optionalUInt64("restEndsAt"), exercises: exercises)
    }

    // MARK: Tokens

    /// Parses 32 hex digits (either case) as a token; nil otherwise.
    public static func token(fromHex text: String) -> IncarnationToken? {
        let u = Array(text.utf8)
        guard u.count == 32 else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, c) in u.enumerated() {
            guard let digit = hexDigitValue(c) else { return nil }
            let n = UInt64(digit)
            if i < 16 { high = high << 4 | n } else { low = low << 4 | n }
        }
        return IncarnationToken(high: high, low: low)
    }
}

/// A datagram (or a JSON fragment of one) that does not decode, with the JSON path of the problem.
public struct WatchWireError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where (JSONPath, `$` is the datagram).
    public var path: String
    /// What is wrong and what to do.
    public var message: String
    /// An error at `path`.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
    /// `<path>: <message>`.
    public var description: String { "\(path): \(message)" }
}

/// Typed reads of a JSON object's members with JSONPath errors (shared with the capture codec).
public struct WireFields: Sendable {
    /// The members.
    public let values: [String: JSONValue]
    /// The object's JSON path.
    public let path: String

    /// The object `value` at `path`; throws when it is not an object.
    public init(_ value: JSONValue, path: String) throws(WatchWireError) {
        guard let o = value.objectValue else { throw WatchWireError(path: path, message: "expected a JSON object, found \(value.typeDescription)") }
        values = o
        self.path = path
    }

    /// The member `key` (nil when absent or null).
    public func value(_ key: String) -> JSONValue? {
        guard let v = values[key], !v.isNull else { return nil }
        return v
    }

    /// An error about member `key`.
    public func bad(_ key: String, _ message: String) -> WatchWireError { WatchWireError(path: "\(path).\(key)", message: message) }

    /// A required string.
    public func string(_ key: String) throws(WatchWireError) -> String {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard let s = v.stringValue else { throw bad(key, "expected a string, found \(v.typeDescription)") }
        return s
    }

    /// An optional string.
    public func optionalString(_ key: String) throws(WatchWireError) -> String? {
        guard value(key) != nil else { return nil }
        return try string(key)
    }

    /// A required JSON integer.
    public func int(_ key: String) throws(WatchWireError) -> Int64 {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard case .int(let i) = v else { throw bad(key, "expected an integer, found \(v.typeDescription)") }
        return i
    }

    /// An optional JSON integer.
    public func optionalInt(_ key: String) throws(WatchWireError) -> Int64? {
        guard value(key) != nil else { return nil }
        return try int(key)
    }

    /// A required integer in `UInt32` range.
    public func uint32(_ key: String) throws(WatchWireError) -> UInt32 {
        let i = try int(key)
        guard let u = UInt32(exactly: i) else { throw bad(key, "\(i) is outside 0...\(UInt32.max)") }
        return u
    }

    /// A required `UInt64` written as a decimal string (C12).
    public func uint64(_ key: String) throws(WatchWireError) -> UInt64 {
        let s = try string(key)
        guard let u = UInt64(s), s.utf8.first != UInt8(ascii: "+") else {
            throw bad(key, "'\(s)' is not a decimal UInt64; 64-bit counters travel as decimal strings")
        }
        return u
    }

    /// An optional `UInt64` written as a decimal string.
    public func optionalUInt64(_ key: String) throws(WatchWireError) -> UInt64? {
        guard value(key) != nil else { return nil }
        return try uint64(key)
    }

    /// A required boolean.
    public func bool(_ key: String) throws(WatchWireError) -> Bool {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard let b = v.boolValue else { throw bad(key, "expected a boolean, found \(v.typeDescription)") }
        return b
    }

    /// A required incarnation token (32 hex digits).
    public func token(_ key: String) throws(WatchWireError) -> IncarnationToken {
        let s = try string(key)
        guard let t = WatchWire.token(fromHex: s) else { throw bad(key, "'\(s)' is not 32 hex digits") }
        return t
    }

    /// A required array.
    public func array(_ key: String) throws(WatchWireError) -> [JSONValue] {
        guard let v = value(key) else { throw bad(key, "missing") }
        guard let a = v.arrayValue else { throw bad(key, "expected an array, found \(v.typeDescription)") }
        return a
    }

    /// A required object.
    public func object(_ key: String) throws(WatchWireError) -> WireFields {
        guard let v = value(key) else { throw bad(key, "missing") }
        return try WireFields(v, path: "\(path).\(key)")
    }

    /// An optional object.
    public func optionalObject(_ key: String) throws(WatchWireError) -> WireFields? {
        guard let v = value(key) else { return nil }
        return try WireFields(v, path: "\(path).\(key)")
    }
}
