/// Event names (`eventType`) of PROTOCOL.md §4 and SPEC.md.
public enum EventNames {
    // Relay-made events.
    /// `device-status`: a device came online or disconnected (`DeviceStatus`).
    public static let deviceStatus = "device-status"
    /// `device-unlinked` (`DeviceUnlinked`).
    public static let deviceUnlinked = "device-unlinked"
    /// `active-session-changed` (`ActiveSessionChanged`).
    public static let activeSessionChanged = "active-session-changed"
    /// `event-replay-gap`: events between the client's last and the relay's oldest were lost (`EventReplayGap`).
    public static let eventReplayGap = "event-replay-gap"

    // Desktop events.
    /// `job:created`
    public static let jobCreated = "job:created"
    /// `job:deleted`
    public static let jobDeleted = "job:deleted"
    /// `job:status-changed`
    public static let jobStatusChanged = "job:status-changed"
    /// `job:stream-progress`
    public static let jobStreamProgress = "job:stream-progress"
    /// `job:tokens-updated`
    public static let jobTokensUpdated = "job:tokens-updated"
    /// `job:cost-updated`
    public static let jobCostUpdated = "job:cost-updated"
    /// `job:response-appended`
    public static let jobResponseAppended = "job:response-appended"
    /// `job:error-details`
    public static let jobErrorDetails = "job:error-details"
    /// `job:finalized`
    public static let jobFinalized = "job:finalized"
    /// `job:metadata-updated`
    public static let jobMetadataUpdated = "job:metadata-updated"
    /// `jobs:list-invalidated`
    public static let jobsListInvalidated = "jobs:list-invalidated"
    /// `session-created`
    public static let sessionCreated = "session-created"
    /// `session-updated`
    public static let sessionUpdated = "session-updated"
    /// `session-deleted`
    public static let sessionDeleted = "session-deleted"
    /// `session-task-updated`
    public static let sessionTaskUpdated = "session-task-updated"
    /// `session-files-updated`
    public static let sessionFilesUpdated = "session-files-updated"
    /// `session-field-validated`
    public static let sessionFieldValidated = "session-field-validated"
    /// `session-file-browser-state-updated`
    public static let sessionFileBrowserStateUpdated = "session-file-browser-state-updated"
    /// `session-snapshot`
    public static let sessionSnapshot = "session-snapshot"
    /// `history-state-changed`
    public static let historyStateChanged = "history-state-changed"
    /// `PlanCreated`
    public static let planCreated = "PlanCreated"
    /// `PlanModified`
    public static let planModified = "PlanModified"
    /// `PlanDeleted`
    public static let planDeleted = "PlanDeleted"
    /// `project-directory-updated`
    public static let projectDirectoryUpdated = "project-directory-updated"
    /// `terminal.exit`
    public static let terminalExit = "terminal.exit"
    /// `chat:timeline-updated` (1.6): a block snapshot of a chat thread (`TimelineUpdated`).
    public static let chatTimelineUpdated = "chat:timeline-updated"
    /// `chat:timeline-interest` (1.6, client -> relay): the timeline lease (`TimelineInterest`).
    public static let chatTimelineInterest = "chat:timeline-interest"

    /// The events the relay itself makes.
    public static let relayMade: [String] = [deviceStatus, deviceUnlinked, activeSessionChanged, eventReplayGap]

    /// Every event name above, relay-made first, then desktop events in PROTOCOL.md order.
    public static let all: [String] = relayMade + [
        jobCreated, jobDeleted, jobStatusChanged, jobStreamProgress, jobTokensUpdated, jobCostUpdated,
        jobResponseAppended, jobErrorDetails, jobFinalized, jobMetadataUpdated, jobsListInvalidated,
        sessionCreated, sessionUpdated, sessionDeleted, sessionTaskUpdated, sessionFilesUpdated,
        sessionFieldValidated, sessionFileBrowserStateUpdated, sessionSnapshot, historyStateChanged,
        planCreated, planModified, planDeleted, projectDirectoryUpdated, terminalExit,
        chatTimelineUpdated, chatTimelineInterest,
    ]

    /// Whether `name` is a `job:*` event, which needs `jobId` and `sessionId` in its payload.
    public static func isJobEvent(_ name: String) -> Bool { name.hasPrefix("job:") }
}

/// An event payload with a typed Swift form.
public protocol TypedEventPayload: Sendable, Hashable {
    /// The `eventType` this payload travels under.
    static var eventType: String { get }
    /// Decodes the payload; `path` names `json` in errors (e.g. `$.payload.payload`).
    init(json: JSONValue, path: String) throws(MessageDecodeError)
    /// The payload as JSON (absent optionals omitted).
    var json: JSONValue { get }
}

/// `device-status` `{deviceId, status, reason?}`.
public struct DeviceStatus: TypedEventPayload {
    /// The reported status. Equality goes by `rawValue`, so `.other("online") == .online`.
    public enum Status: Sendable, Hashable, RawRepresentable {
        /// `online`
        case online
        /// `disconnected`
        case disconnected
        /// Anything else, kept verbatim.
        case other(String)

        /// The status for a wire string; never fails.
        public init(rawValue: String) {
            switch rawValue {
            case "online": self = .online
            case "disconnected": self = .disconnected
            default: self = .other(rawValue)
            }
        }

        /// The wire string.
        public var rawValue: String {
            switch self {
            case .online: "online"
            case .disconnected: "disconnected"
            case .other(let s): s
            }
        }
    }

    /// `device-status`.
    public static let eventType = EventNames.deviceStatus
    /// The device the status is about.
    public var deviceId: String
    /// Online or disconnected.
    public var status: Status
    /// Why, if the relay said.
    public var reason: String?

    /// Creates a device status.
    public init(deviceId: String, status: Status, reason: String? = nil) {
        self.deviceId = deviceId
        self.status = status
        self.reason = reason
    }

    /// Decodes `{deviceId, status, reason?}`.
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        let r = try FieldReader(json, path: path)
        deviceId = try r.string("deviceId")
        status = Status(rawValue: try r.string("status"))
        reason = try r.optionalString("reason")
    }

    /// The payload JSON.
    public var json: JSONValue {
        var b = ObjectBuilder(capacity: 3)
        b.set("deviceId", deviceId)
        b.set("status", status.rawValue)
        b.set("reason", reason)
        return b.value
    }
}

/// `chat:timeline-interest` `{appSessionId, sessionId, active}`: the timeline lease (SPEC A11).
public struct TimelineInterest: TypedEventPayload {
    /// `chat:timeline-interest`.
    public static let eventType = EventNames.chatTimelineInterest
    /// The phone app's session ID (random per app session).
    public var appSessionId: String
    /// The base chat session the lease is for.
    public var sessionId: String
    /// Whether the lease is held (`false` releases it).
    public var active: Bool

    /// Creates a lease message.
    public init(appSessionId: String, sessionId: String, active: Bool) {
        self.appSessionId = appSessionId
        self.sessionId = sessionId
        self.active = active
    }

    /// Decodes `{appSessionId, sessionId, active}`.
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        let r = try FieldReader(json, path: path)
        appSessionId = try r.string("appSessionId")
        sessionId = try r.string("sessionId")
        active = try r.bool("active")
    }

    /// The payload JSON.
    public var json: JSONValue {
        .object(["appSessionId": .string(appSessionId), "sessionId": .string(sessionId), "active": .bool(active)])
    }
}

/// `chat:timeline-updated` `{sessionId, runId, threadId, revision, blocks}`: a best-effort block snapshot
/// (SPEC A10); a newer one for the same (session, run, thread) replaces a waiting one.
public struct TimelineUpdated: TypedEventPayload {
    /// `chat:timeline-updated`.
    public static let eventType = EventNames.chatTimelineUpdated
    /// The chat session.
    public var sessionId: String
    /// The run within the session.
    public var runId: String
    /// The thread within the run.
    public var threadId: String
    /// The snapshot's revision; higher is newer.
    public var revision: Int64
    /// The blocks, opaque to the protocol layer. A snapshot decoded by ``init(raw:path:)`` keeps them as
    /// raw bytes (``rawBlocks``) and parses them on each read of this property.
    public var blocks: JSONValue {
        get {
            switch blockStorage {
            case .value(let v): v
            case .raw(let r): r.value
            }
        }
        set { blockStorage = .value(newValue) }
    }
    /// The blocks' bytes when the snapshot was decoded from raw bytes without building them, else nil.
    public var rawBlocks: RawJSON? {
        if case .raw(let r) = blockStorage { return r }
        return nil
    }

    private enum BlockStorage: Sendable {
        case value(JSONValue)
        case raw(RawJSON)
    }
    private var blockStorage: BlockStorage

    /// Creates a snapshot.
    public init(sessionId: String, runId: String, threadId: String, revision: Int64, blocks: JSONValue) {
        self.sessionId = sessionId
        self.runId = runId
        self.threadId = threadId
        self.revision = revision
        self.blockStorage = .value(blocks)
    }

    /// Decodes `{sessionId, runId, threadId, revision, blocks}`; `blocks` may be any JSON (absent is null).
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        let r = try FieldReader(json, path: path)
        sessionId = try r.string("sessionId")
        runId = try r.string("runId")
        threadId = try r.string("threadId")
        revision = try r.int64("revision")
        blockStorage = .value(r.value("blocks") ?? .null)
    }

    /// Decodes the same fields from the payload's raw bytes, building only the four scalar fields: the
    /// blocks stay raw. Results and errors are those of ``init(json:path:)`` on `raw.value`.
    public init(raw: RawJSON, path: String = "$") throws(MessageDecodeError) {
        guard let m = raw.members() else {
            self = try TimelineUpdated(json: raw.value, path: path)
            return
        }
        // The usual case, read without a field table: each of the four present (the last of its name) with
        // the right type. Anything else goes through the reader below, whose errors are the reference.
        if case .string(let s)? = m.last(named: "sessionId")?.built, case .string(let r)? = m.last(named: "runId")?.built,
           case .string(let t)? = m.last(named: "threadId")?.built, case .int(let n)? = m.last(named: "revision")?.built {
            sessionId = s
            runId = r
            threadId = t
            revision = n
            if let b = m.last(named: "blocks") {
                blockStorage = b.built.map { .value($0) } ?? .raw(b.raw)
            } else {
                blockStorage = .value(.null)
            }
            assert((try? TimelineUpdated(json: raw.value, path: path)) == self, "TimelineUpdated(raw:)'s direct read disagrees with init(json:)")
            return
        }
        var scalars = [String: JSONValue](minimumCapacity: 4)
        for name in ["sessionId", "runId", "threadId", "revision"] {
            if let v = m.last(named: name) { scalars[name] = v.value }
        }
        let r = FieldReader(object: scalars, path: path)
        sessionId = try r.string("sessionId")
        runId = try r.string("runId")
        threadId = try r.string("threadId")
        revision = try r.int64("revision")
        if let b = m.last(named: "blocks") {
            blockStorage = b.built.map { .value($0) } ?? .raw(b.raw)
        } else {
            blockStorage = .value(.null)
        }
    }

    /// Equal when every field and the blocks' value are equal.
    public static func == (a: TimelineUpdated, b: TimelineUpdated) -> Bool {
        a.sessionId == b.sessionId && a.runId == b.runId && a.threadId == b.threadId && a.revision == b.revision
            && a.blocks == b.blocks
    }

    /// Hashes every field and the blocks' value.
    public func hash(into h: inout Hasher) {
        h.combine(sessionId)
        h.combine(runId)
        h.combine(threadId)
        h.combine(revision)
        h.combine(blocks)
    }

    /// The snapshot key: a newer snapshot with the same key replaces a waiting one.
    public var key: TimelineKey { TimelineKey(sessionId: sessionId, runId: runId, threadId: threadId) }

    /// The payload JSON.
    public var json: JSONValue {
        .object(["sessionId": .string(sessionId), "runId": .string(runId), "threadId": .string(threadId),
                 "revision": .int(revision), "blocks": blocks])
    }
}

/// The (session, run, thread) a timeline snapshot belongs to.
public struct TimelineKey: Sendable, Hashable {
    /// The chat session.
    public var sessionId: String
    /// The run.
    public var runId: String
    /// The thread.
    public var threadId: String

    /// Creates a key.
    public init(sessionId: String, runId: String, threadId: String) {
        self.sessionId = sessionId
        self.runId = runId
        self.threadId = threadId
    }
}

/// `event-replay-gap` `{lastEventId, oldestBufferedId, latestBufferedId}`: the relay could not replay
/// everything above the client's `lastEventId`.
public struct EventReplayGap: TypedEventPayload {
    /// `event-replay-gap`.
    public static let eventType = EventNames.eventReplayGap
    /// The client's `lastEventId` from `register`.
    public var lastEventId: Int64
    /// The oldest event the relay still holds.
    public var oldestBufferedId: Int64
    /// The newest event the relay holds.
    public var latestBufferedId: Int64

    /// Creates a gap notice.
    public init(lastEventId: Int64, oldestBufferedId: Int64, latestBufferedId: Int64) {
        self.lastEventId = lastEventId
        self.oldestBufferedId = oldestBufferedId
        self.latestBufferedId = latestBufferedId
    }

    /// Decodes `{lastEventId, oldestBufferedId, latestBufferedId}`.
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        let r = try FieldReader(json, path: path)
        lastEventId = try r.int64("lastEventId")
        oldestBufferedId = try r.int64("oldestBufferedId")
        latestBufferedId = try r.int64("latestBufferedId")
    }

    /// The payload JSON.
    public var json: JSONValue {
        .object(["lastEventId": .int(lastEventId), "oldestBufferedId": .int(oldestBufferedId),
                 "latestBufferedId": .int(latestBufferedId)])
    }
}

/// `device-unlinked` `{deviceId}`.
public struct DeviceUnlinked: TypedEventPayload {
    /// `device-unlinked`.
    public static let eventType = EventNames.deviceUnlinked
    /// The device that was unlinked.
    public var deviceId: String

    /// Creates the payload.
    public init(deviceId: String) { self.deviceId = deviceId }

    /// Decodes `{deviceId}`.
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        deviceId = try FieldReader(json, path: path).string("deviceId")
    }

    /// The payload JSON.
    public var json: JSONValue { .object(["deviceId": .string(deviceId)]) }
}

/// `active-session-changed` `{sessionId, projectDirectory?}`.
public struct ActiveSessionChanged: TypedEventPayload {
    /// `active-session-changed`.
    public static let eventType = EventNames.activeSessionChanged
    /// The session now active on the desktop.
    public var sessionId: String
    /// Its project directory, if sent.
    public var projectDirectory: String?

    /// Creates the payload.
    public init(sessionId: String, projectDirectory: String? = nil) {
        self.sessionId = sessionId
        self.projectDirectory = projectDirectory
    }

    /// Decodes `{sessionId, projectDirectory?}`.
    public init(json: JSONValue, path: String = "$") throws(MessageDecodeError) {
        let r = try FieldReader(json, path: path)
        sessionId = try r.string("sessionId")
        projectDirectory = try r.optionalString("projectDirectory")
    }

    /// The payload JSON.
    public var json: JSONValue {
        var b = ObjectBuilder(capacity: 2)
        b.set("sessionId", sessionId)
        b.set("projectDirectory", projectDirectory)
        return b.value
    }
}
