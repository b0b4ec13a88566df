public import RelayProtocol
public import Trace
public import WatchLink

/// A watch app launch: what `WatchSender.init` was given, and the token it drew.
public struct WatchLaunch: Sendable, Hashable {
    /// The wall clock in ms the counter was seeded from.
    public var clockMilliseconds: UInt64
    /// The stored command-sequence floor, if any.
    public var storedFloor: UInt64?
    /// Whether the phone was reachable at launch.
    public var reachable: Bool
    /// The incarnation token the launch drew (an input: a replay launches the watch with this token).
    public var incarnation: IncarnationToken

    /// A launch.
    public init(clockMilliseconds: UInt64, storedFloor: UInt64?, reachable: Bool, incarnation: IncarnationToken) {
        self.clockMilliseconds = clockMilliseconds
        self.storedFloor = storedFloor
        self.reachable = reachable
        self.incarnation = incarnation
    }
}

/// A phone app launch: what the `PhoneReceiver` and the `SnapshotSender` were given.
public struct PhoneLaunch: Sendable, Hashable {
    /// The wall clock in ms the revision counter was seeded from.
    public var clockMilliseconds: UInt64
    /// The stored snapshot-revision floor, if any.
    public var revisionFloor: UInt64?
    /// The live workout session at launch, if any.
    public var liveSession: SessionID?
    /// The receiver checkpoint restored at launch, if any.
    public var checkpoint: ReceiverCheckpoint?

    /// A launch.
    public init(clockMilliseconds: UInt64, revisionFloor: UInt64?, liveSession: SessionID?, checkpoint: ReceiverCheckpoint?) {
        self.clockMilliseconds = clockMilliseconds
        self.revisionFloor = revisionFloor
        self.liveSession = liveSession
        self.checkpoint = checkpoint
    }
}

/// Everything that happens to the four WatchLink machines, as the trace records it.
public enum WatchChannelInput: Sendable, Hashable {
    /// The watch app launched (a new `WatchSender` and `SnapshotReceiver`).
    case watchLaunched(WatchLaunch)
    /// An input of the `WatchSender`. `.ackReceived` here is an ack *datagram* delivered to the watch.
    case watch(WatchInput)
    /// The acknowledgement of an applied snapshot, handed to the `WatchSender` (C14).
    case ackFromSnapshot(CommandAck)
    /// The phone app launched (a new `PhoneReceiver` and `SnapshotSender`).
    case phoneLaunched(PhoneLaunch)
    /// An input of the `PhoneReceiver`. `.command` is a command datagram delivered to the phone.
    case phone(ReceiverInput)
    /// An input of the `SnapshotSender`.
    case snapshotSender(SnapshotSenderInput)
    /// A snapshot datagram delivered to the watch's `SnapshotReceiver`.
    case snapshotReceived(WorkoutSnapshot)
}

/// Everything the four WatchLink machines do, as the trace records it.
public enum WatchChannelAction: Sendable, Hashable {
    /// An action of the `WatchSender`.
    case watch(WatchAction)
    /// An action of the `PhoneReceiver`.
    case phone(ReceiverAction)
    /// An action of the `SnapshotSender`.
    case snapshotSender(SnapshotSenderAction)
    /// What the `SnapshotReceiver` did with a snapshot.
    case snapshotReceiver(SnapshotOutcome)
}

/// Maps the watch channel's inputs and actions to trace records on channel `watch` and back (the
/// vocabulary of docs/TRACE_FORMAT.md, "Watch channel records").
///
/// A datagram *delivered* to a machine is a frame record whose payload is the datagram's bytes
/// (``WatchWire``): direction `outbound` is watch -> phone (commands), `inbound` is phone -> watch (acks
/// and snapshots). Timer fires are `timerFired` records; every other input is an `input` record and
/// every action an `action` record, each a JSON object `{"watch": name, "side": "watch"|"phone", ...}`.
/// A send is an action record carrying the datagram's JSON, so a lost datagram is a send without a
/// delivery. Inputs decode back exactly (``decodeInput(_:)``); actions are compared in encoded form.
public enum WatchRecordCodec {
    // MARK: Inputs

    /// The record of `input` at `time`.
    public static func record(_ input: WatchChannelInput, at time: Moment) -> TraceRecord {
        switch input {
        case .watch(.ackReceived(let ack)):
            return frame(.ack(ack), .inbound, time)
        case .phone(.command(let envelope)):
            return frame(.command(envelope), .outbound, time)
        case .snapshotReceived(let snapshot):
            return frame(.snapshot(snapshot), .inbound, time)
        case .watch(.timerFired(.stalledAck)):
            return json(.timerFired, time, ["watch": "timer", "side": "watch", "timer": "stalledAck"])
        case .snapshotSender(.timerFired(.heartbeat)):
            return json(.timerFired, time, ["watch": "timer", "side": "phone", "timer": "heartbeat"])
        default:
            return json(.input, time, inputJSON(input))
        }
    }

    /// The input a record stands for; nil when the record is not a watch-channel input (another channel,
    /// an action, a marker). Throws when a watch record that claims to be an input does not decode.
    public static func decodeInput(_ record: TraceRecord) throws(WatchWireError) -> WatchChannelInput? {
        guard record.channel == .watch else { return nil }
        switch record.kind {
        case .frameText:
            let datagram = try WatchWire.decode(record.payload)
            switch (datagram, record.direction) {
            case (.command(let c), .outbound): return .phone(.command(c))
            case (.ack(let a), .inbound): return .watch(.ackReceived(a))
            case (.snapshot(let s), .inbound): return .snapshotReceived(s)
            default:
                throw WatchWireError(path: "$.type", message: "a \(WatchWire.json(datagram)["type"]?.stringValue ?? "?") datagram with direction \(record.direction.map(\.description) ?? "none"); commands travel outbound (watch -> phone), acks and snapshots inbound")
            }
        case .timerFired:
            let o = try fields(record)
            switch (try o.string("side"), try o.string("timer")) {
            case ("watch", "stalledAck"): return .watch(.timerFired(.stalledAck))
            case ("phone", "heartbeat"): return .snapshotSender(.timerFired(.heartbeat))
            case let (side, timer): throw o.bad("timer", "unknown timer '\(timer)' on side '\(side)'")
            }
        case .input:
            return try input(try fields(record))
        default:
            return nil
        }
    }

    static func inputJSON(_ input: WatchChannelInput) -> JSONValue {
        switch input {
        case .watchLaunched(let l):
            var o: [String: JSONValue] = ["watch": "launch", "side": "watch", "clockMs": u64(l.clockMilliseconds),
                                          "reachable": .bool(l.reachable), "incarnation": .string(l.incarnation.description)]
            if let f = l.storedFloor { o["storedFloor"] = u64(f) }
            return .object(o)
        case .watch(let w):
            switch w {
            case .tap(let command, let confirm):
                var o: [String: JSONValue] = ["watch": "tap", "side": "watch", "command": WatchWire.commandJSON(command)]
                if let c = confirm {
                    var x: [String: JSONValue] = ["setsOnExercise": .int(Int64(c.setsOnExercise))]
                    if let n = c.exerciseName { x["exerciseName"] = .string(n) }
                    o["confirm"] = .object(x)
                }
                return .object(o)
            case .reachability(let r):
                return ["watch": "reachability", "side": "watch", "reachable": .bool(r)]
            case .sendFailed(let seq):
                return ["watch": "sendFailed", "side": "watch", "seq": u64(seq)]
            case .ackReceived(let a):  // never reached: a frame record
                return ["watch": "ack", "side": "watch", "via": "datagram", "ack": WatchWire.ackJSON(a)]
            case .timerFired:  // never reached: a timerFired record
                return ["watch": "timer", "side": "watch", "timer": "stalledAck"]
            }
        case .ackFromSnapshot(let a):
            return ["watch": "ack", "side": "watch", "via": "snapshot", "ack": WatchWire.ackJSON(a)]
        case .phoneLaunched(let l):
            var o: [String: JSONValue] = ["watch": "launch", "side": "phone", "clockMs": u64(l.clockMilliseconds)]
            if let f = l.revisionFloor { o["revisionFloor"] = u64(f) }
            if let s = l.liveSession { o["liveSession"] = .string(s.rawValue) }
            if let c = l.checkpoint { o["checkpoint"] = ["incarnation": .string(c.incarnation.description), "expected": u64(c.expected)] }
            return .object(o)
        case .phone(let p):
            switch p {
            case .sessionStarted(let s): return ["watch": "sessionStarted", "side": "phone", "session": .string(s.rawValue)]
            case .sessionEnded(let s): return ["watch": "sessionEnded", "side": "phone", "session": .string(s.rawValue)]
            case .command(let c):  // never reached: a frame record
                return ["watch": "command", "side": "phone", "envelope": WatchWire.envelopeJSON(c)]
            }
        case .snapshotSender(let s):
            switch s {
            case .update(let state): return ["watch": "update", "side": "phone", "state": WatchWire.stateJSON(state)]
            case .ack(let a): return ["watch": "ack", "side": "phone", "ack": WatchWire.ackJSON(a)]
            case .stop: return ["watch": "stop", "side": "phone"]
            case .timerFired:  // never reached: a timerFired record
                return ["watch": "timer", "side": "phone", "timer": "heartbeat"]
            }
        case .snapshotReceived(let s):  // never reached: a frame record
            return ["watch": "snapshot", "side": "watch", "snapshot": WatchWire.snapshotJSON(s)]
        }
    }

    static func input(_ o: WireFields) throws(WatchWireError) -> WatchChannelInput {
        let side = try o.string("side")
        guard side == "watch" || side == "phone" else { throw o.bad("side", "'\(side)' is neither watch nor phone") }
        switch (side, try o.string("watch")) {
        case ("watch", "launch"):
            guard let token = WatchWire.token(fromHex: try o.string("incarnation")) else { throw o.bad("incarnation", "not 32 hex digits") }
            return .watchLaunched(WatchLaunch(clockMilliseconds: try o.uint64("clockMs"), storedFloor: try o.optionalUInt64("storedFloor"),
                                              reachable: try o.bool("reachable"), incarnation: token))
        case ("watch", "tap"):
            let command = try WatchWire.command(from: o.value("command") ?? .null, path: o.path + ".command")
            let confirm = try o.optionalObject("confirm").map { c throws(WatchWireError) in
                ConfirmationContext(exerciseName: try c.optionalString("exerciseName"), setsOnExercise: try c.uint32("setsOnExercise"))
            }
            return .watch(.tap(command, confirm: confirm))
        case ("watch", "reachability"):
            return .watch(.reachability(try o.bool("reachable")))
        case ("watch", "sendFailed"):
            return .watch(.sendFailed(sequence: try o.uint64("seq")))
        case ("watch", "ack"):
            let ack = try WatchWire.ack(from: o.value("ack") ?? .null, path: o.path + ".ack")
            switch try o.string("via") {
            case "snapshot": return .ackFromSnapshot(ack)
            case "datagram": return .watch(.ackReceived(ack))
            case let other: throw o.bad("via", "unknown '\(other)'; expected snapshot or datagram")
            }
        case ("phone", "launch"):
            let checkpoint = try o.optionalObject("checkpoint").map { c throws(WatchWireError) in
                ReceiverCheckpoint(incarnation: try c.token("incarnation"), expected: try c.uint64("expected"))
            }
            return .phoneLaunched(PhoneLaunch(clockMilliseconds: try o.uint64("clockMs"), revisionFloor: try o.optionalUInt64("revisionFloor"),
                                              liveSession: try o.optionalString("liveSession").map(SessionID.init), checkpoint: checkpoint))
        case ("phone", "sessionStarted"):
            return .phone(.sessionStarted(SessionID(try o.string("session"))))
        case ("phone", "sessionEnded"):
            return .phone(.sessionEnded(SessionID(try o.string("session"))))
        case ("phone", "command"):
            return .phone(.command(try WatchWire.envelope(from: o.value("envelope") ?? .null, path: o.path + ".envelope")))
        case ("phone", "update"):
            return .snapshotSender(.update(try WatchWire.state(from: o.value("state") ?? .null, path: o.path + ".state")))
        case ("phone", "ack"):
            return .snapshotSender(.ack(try WatchWire.ack(from: o.value("ack") ?? .null, path: o.path + ".ack")))
        case ("phone", "stop"):
            return .snapshotSender(.stop)
        case ("watch", "snapshot"):
            return .snapshotReceived(try WatchWire.snapshot(from: o.value("snapshot") ?? .null, path: o.path + ".snapshot"))
        case let (_, name):
            throw o.bad("watch", "unknown \(side) input '\(name)'")
        }
    }

    // MARK: Actions

    /// The record of `action` at `time` (always an `action` record).
    public static func record(_ action: WatchChannelAction, at time: Moment) -> TraceRecord {
        json(.action, time, actionJSON(action))
    }

    /// Whether a record is one the watch channel's actions produce.
    public static func isAction(_ record: TraceRecord) -> Bool {
        record.channel == .watch && record.kind == .action
    }

    /// The JSON of an action.
    public static func actionJSON(_ action: WatchChannelAction) -> JSONValue {
        switch action {
        case .watch(let a): watchActionJSON(a)
        case .phone(let a): receiverActionJSON(a)
        case .snapshotSender(let a): snapshotSenderActionJSON(a)
        case .snapshotReceiver(.applied(let s)):
            ["watch": "snapshotApplied", "side": "watch", "revision": u64(s.revision)]
        case .snapshotReceiver(.rejectedOlder(let incoming, let holding)):
            ["watch": "snapshotRejected", "side": "watch", "revision": u64(incoming), "holding": u64(holding)]
        }
    }

    static func watchActionJSON(_ a: WatchAction) -> JSONValue {
        switch a {
        case .confirm(let c):
            var o: [String: JSONValue] = ["watch": "confirm", "side": "watch", "exerciseName": .string(c.exerciseName), "text": .string(c.description)]
            if let n = c.setNumber { o["setNumber"] = .int(Int64(n)) }
            if let w = c.weightGrams { o["weightGrams"] = .int(w) }
            if let r = c.reps { o["reps"] = .int(r) }
            return .object(o)
        case .persist(let r):
            return ["watch": "persist", "side": "watch", "key": .string(r.key), "value": u64(r.value)]
        case .send(let c, let resend):
            return ["watch": "send", "side": "watch", "resend": .bool(resend), "datagram": WatchWire.json(.command(c))]
        case .tapRefused(let c, let why):
            var o: [String: JSONValue] = ["watch": "tapRefused", "side": "watch", "command": WatchWire.commandJSON(c)]
            switch why {
            case .queueFull(let n): o["reason"] = "queueFull"; o["queued"] = .int(Int64(n))
            case .counterExhausted: o["reason"] = "counterExhausted"
            }
            return .object(o)
        case .armTimer(.stalledAck, let deadline):
            return ["watch": "armTimer", "side": "watch", "timer": "stalledAck", "deadline": .int(deadline.nanoseconds)]
        case .cancelTimer(.stalledAck):
            return ["watch": "cancelTimer", "side": "watch", "timer": "stalledAck"]
        case .diagnostic(let d):
            var o = d.record.members
            o["watch"] = "diagnostic"
            o["side"] = "watch"
            return .object(o)
        }
    }

    static func receiverActionJSON(_ a: ReceiverAction) -> JSONValue {
        switch a {
        case .execute(let c):
            return ["watch": "execute", "side": "phone", "seq": u64(c.sequence), "envelope": WatchWire.envelopeJSON(c)]
        case .rejected(let c, .sessionNotLive(let named, let live)):
            var o: [String: JSONValue] = ["watch": "rejected", "side": "phone", "seq": u64(c.sequence), "reason": "sessionNotLive",
                                          "session": .string(named.rawValue), "envelope": WatchWire.envelopeJSON(c)]
            if let live { o["live"] = .string(live.rawValue) }
            return .object(o)
        case .buffered(let seq, let expected):
            return ["watch": "buffered", "side": "phone", "seq": u64(seq), "expected": u64(expected)]
        case .discarded(let seq, let why):
            var o: [String: JSONValue] = ["watch": "discarded", "side": "phone", "seq": u64(seq)]
            switch why {
            case .duplicate(let e): o["reason"] = "duplicate"; o["expected"] = u64(e)
            case .alreadyBuffered(let e): o["reason"] = "alreadyBuffered"; o["expected"] = u64(e)
            case .outsideWindow(let e): o["reason"] = "outsideWindow"; o["expected"] = u64(e)
            case .retiredIncarnation(let t): o["reason"] = "retiredIncarnation"; o["incarnation"] = .string(t.description)
            case .malformedSequence: o["reason"] = "malformedSequence"
            }
            return .object(o)
        case .resynchronised(let r):
            var o: [String: JSONValue] = ["watch": "resynchronised", "side": "phone", "to": .string(r.to.description),
                                          "baseline": u64(r.baseline), "discardedBuffered": .int(Int64(r.discardedBuffered))]
            if let from = r.from { o["from"] = .string(from.description) }
            return .object(o)
        case .sendAck(let ack):
            return ["watch": "sendAck", "side": "phone", "datagram": WatchWire.json(.ack(ack))]
        }
    }

    static func snapshotSenderActionJSON(_ a: SnapshotSenderAction) -> JSONValue {
        switch a {
        case .persist(let r):
            return ["watch": "persist", "side": "phone", "key": .string(r.key), "value": u64(r.value)]
        case .send(let s, let delivery):
            let name: String = switch delivery {
            case .phaseChange: "phaseChange"
            case .heartbeat: "heartbeat"
            case .ackReply: "ackReply"
            }
            return ["watch": "sendSnapshot", "side": "phone", "delivery": .string(name), "revision": u64(s.revision),
                    "datagram": WatchWire.json(.snapshot(s))]
        case .armTimer(.heartbeat, let deadline):
            return ["watch": "armTimer", "side": "phone", "timer": "heartbeat", "deadline": .int(deadline.nanoseconds)]
        case .cancelTimer(.heartbeat):
            return ["watch": "cancelTimer", "side": "phone", "timer": "heartbeat"]
        case .revisionsExhausted:
            return ["watch": "revisionsExhausted", "side": "phone"]
        }
    }

    // MARK: Helpers

    static func u64(_ v: UInt64) -> JSONValue { .string(String(v)) }

    static func frame(_ d: WatchDatagram, _ dir: FrameDirection, _ time: Moment) -> TraceRecord {
        TraceRecord(kind: .frameText, time: time, channel: .watch, direction: dir, payload: WatchWire.encode(d))
    }

    static func json(_ kind: RecordKind, _ time: Moment, _ value: JSONValue) -> TraceRecord {
        TraceRecord(kind: kind, time: time, channel: .watch, payload: value.serialized())
    }

    static func fields(_ record: TraceRecord) throws(WatchWireError) -> WireFields {
        let value: JSONValue
        do { value = try JSONValue(parsing: record.payload) } catch {
            throw WatchWireError(path: "$", message: "the \(record.kind) payload is not JSON: \(error)")
        }
        return try WireFields(value, path: "$")
    }
}
