public import RelayProtocol

/// What a record says. Stored on disk as a little-endian `UInt16`; values this build does not know are
/// kept as `.unknown(raw)` and their records are skipped by length by readers that do not care.
public enum RecordKind: Sendable, Hashable, CustomStringConvertible {
    /// The trace header (JSON: format and tool versions, seed, redaction policy, wall-clock start...).
    /// Lives in the file-header frame, never in a chunk.
    case header
    /// The driver opens a socket: generation, JSON `{url, headers}` (headers after redaction).
    case transportOpen
    /// The socket of `generation` is open.
    case transportOpened
    /// A text message on `generation` in `direction`; payload = the message bytes (UTF-8 JSON).
    case frameText
    /// A binary message on `generation` in `direction`; payload = the message bytes (PTC1).
    case frameBinary
    /// The socket of `generation` closed: JSON `{code, reason}`.
    case transportClosed
    /// The socket of `generation` failed: JSON `{error}`.
    case transportFailed
    /// A timer fired: JSON timer id.
    case timerFired
    /// Any other client input (path, lifecycle, push, identity/keychain answers, UI calls, claims): JSON.
    case input
    /// A client action, for divergence checks: JSON.
    case action
    /// A user marker: UTF-8 text.
    case marker
    /// The writer dropped records because its queue was full: JSON `{count, firstTime, lastTime}` (ns).
    case dropped
    /// The writer stopped early: JSON `{reason}`. Written only if the writer still could.
    case writerStopped
    /// A WebSocket ping on `generation` in `direction` (wire traces); payload = its application data.
    case ping
    /// A WebSocket pong on `generation` in `direction` (wire traces); payload = its application data.
    case pong
    /// A kind this build does not know (a newer writer): preserved, skippable.
    case unknown(UInt16)

    /// The on-disk value.
    public var rawValue: UInt16 {
        switch self {
        case .header: 1
        case .transportOpen: 2
        case .transportOpened: 3
        case .frameText: 4
        case .frameBinary: 5
        case .transportClosed: 6
        case .transportFailed: 7
        case .timerFired: 8
        case .input: 9
        case .action: 10
        case .marker: 11
        case .dropped: 12
        case .writerStopped: 13
        case .ping: 14
        case .pong: 15
        case .unknown(let raw): raw
        }
    }

    /// The kind for an on-disk value (`.unknown` for values this build does not know).
    public init(rawValue: UInt16) {
        switch rawValue {
        case 1: self = .header
        case 2: self = .transportOpen
        case 3: self = .transportOpened
        case 4: self = .frameText
        case 5: self = .frameBinary
        case 6: self = .transportClosed
        case 7: self = .transportFailed
        case 8: self = .timerFired
        case 9: self = .input
        case 10: self = .action
        case 11: self = .marker
        case 12: self = .dropped
        case 13: self = .writerStopped
        case 14: self = .ping
        case 15: self = .pong
        default: self = .unknown(rawValue)
        }
    }

    /// Every kind this build knows, in on-disk order.
    public static let known: [RecordKind] = (1...15).map { RecordKind(rawValue: $0) }

    /// The name used by the CLI and the docs, e.g. `frameText`; `unknown(42)` for unknown kinds.
    public var name: String {
        switch self {
        case .header: "header"
        case .transportOpen: "transportOpen"
        case .transportOpened: "transportOpened"
        case .frameText: "frameText"
        case .frameBinary: "frameBinary"
        case .transportClosed: "transportClosed"
        case .transportFailed: "transportFailed"
        case .timerFired: "timerFired"
        case .input: "input"
        case .action: "action"
        case .marker: "marker"
        case .dropped: "dropped"
        case .writerStopped: "writerStopped"
        case .ping: "ping"
        case .pong: "pong"
        case .unknown(let raw): "unknown(\(raw))"
        }
    }

    /// Whether the payload of this kind is JSON (and so goes through redaction).
    public var hasJSONPayload: Bool {
        switch self {
        case .header, .transportOpen, .transportOpened, .frameText, .transportClosed, .transportFailed, .timerFired,
            .input, .action, .dropped, .writerStopped:
            true
        case .frameBinary, .marker, .ping, .pong, .unknown:
            false
        }
    }

    /// The kind's name.
    public var description: String { name }
}

/// Which link a record belongs to.
public enum TraceChannel: Sendable, Hashable, CustomStringConvertible {
    /// The phone <-> relay WebSocket (and everything the relay client machine sees).
    case relay
    /// The watch <-> phone channel.
    case watch
    /// A channel this build does not know: preserved.
    case unknown(UInt8)

    /// The on-disk value.
    public var rawValue: UInt8 {
        switch self {
        case .relay: 0
        case .watch: 1
        case .unknown(let raw): raw
        }
    }

    /// The channel for an on-disk value.
    public init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .relay
        case 1: self = .watch
        default: self = .unknown(rawValue)
        }
    }

    /// `relay`, `watch` or `unknown(N)`.
    public var description: String {
        switch self {
        case .relay: "relay"
        case .watch: "watch"
        case .unknown(let raw): "unknown(\(raw))"
        }
    }
}

/// The direction of a frame, seen from the client.
public enum FrameDirection: Sendable, Hashable, CustomStringConvertible {
    /// Relay -> client.
    case inbound
    /// Client -> relay.
    case outbound

    /// `in` or `out`.
    public var description: String { self == .inbound ? "in" : "out" }
}

/// One record of a trace: something that happened to (or was done by) the client, with its time.
public struct TraceRecord: Sendable, Hashable {
    /// What the record says.
    public var kind: RecordKind
    /// When, on the trace's monotonic clock (nanoseconds since trace start).
    public var time: Moment
    /// Which link.
    public var channel: TraceChannel
    /// The transport generation, for records about a socket.
    public var generation: UInt64?
    /// The direction, for frames.
    public var direction: FrameDirection?
    /// Kind-specific bytes: JSON text for most kinds, the raw message for frames.
    public var payload: [UInt8]

    /// Creates a record.
    public init(
        kind: RecordKind, time: Moment, channel: TraceChannel = .relay, generation: UInt64? = nil,
        direction: FrameDirection? = nil, payload: [UInt8] = []
    ) {
        self.kind = kind
        self.time = time
        self.channel = channel
        self.generation = generation
        self.direction = direction
        self.payload = payload
    }

    /// A frame record for a WebSocket message on `generation`.
    public static func frame(
        _ frame: WireFrame, time: Moment, generation: UInt64, direction: FrameDirection,
        channel: TraceChannel = .relay
    ) -> TraceRecord {
        switch frame {
        case .text(let text):
            TraceRecord(
                kind: .frameText, time: time, channel: channel, generation: generation, direction: direction,
                payload: Array(text.utf8))
        case .binary(let bytes):
            TraceRecord(
                kind: .frameBinary, time: time, channel: channel, generation: generation, direction: direction,
                payload: bytes)
        }
    }

    /// The payload as text (lossy for invalid UTF-8).
    public var payloadText: String { String(decoding: payload, as: UTF8.self) }
}
