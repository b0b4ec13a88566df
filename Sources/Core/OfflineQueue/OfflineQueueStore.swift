import CSQLite

/// The schema of the phone's local database (SPEC Part B): one migration per version, applied in order
/// at open, each in its own transaction together with `PRAGMA user_version`.
public enum OfflineQueueSchema {
    /// The SQL of migration `i` takes the database from version `i` to `i + 1`.
    public static let migrations: [String] = [
        // 0 -> 1: the four tables of the architecture page.
        """
        CREATE TABLE linked_devices (
            device_id TEXT PRIMARY KEY NOT NULL,
            name TEXT NOT NULL,
            linked_at INTEGER NOT NULL,
            server_timestamp INTEGER NOT NULL
        );
        CREATE TABLE offline_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            idempotency_key TEXT NOT NULL UNIQUE,
            method TEXT NOT NULL,
            params_json TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'answered', 'failed')),
            server_timestamp INTEGER,
            result_json TEXT,
            failure TEXT
        );
        CREATE TABLE cached_sessions (
            session_id TEXT PRIMARY KEY NOT NULL,
            payload_json TEXT NOT NULL,
            server_timestamp INTEGER NOT NULL
        );
        CREATE TABLE transcriptions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        """,
        // 1 -> 2: send attempts per mutation, and the index the drain reads in queue order.
        """
        ALTER TABLE offline_queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX offline_queue_open ON offline_queue (state, id);
        """,
        // 2 -> 3: device linking (docs/DEVICE_LINK.md): which phone identity linked the desktop, with
        // which code, and which linked desktop the app connects to at launch (at most one row selected).
        """
        ALTER TABLE linked_devices ADD COLUMN mobile_device_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE linked_devices ADD COLUMN link_code TEXT;
        ALTER TABLE linked_devices ADD COLUMN selected INTEGER NOT NULL DEFAULT 0 CHECK (selected IN (0, 1));
        CREATE UNIQUE INDEX linked_devices_selected ON linked_devices (selected) WHERE selected = 1;
        """,
    ]

    /// The version this build writes (`PRAGMA user_version` after the migrations).
    public static var currentVersion: Int32 { Int32(migrations.count) }
}

/// Where a queued mutation is.
public enum MutationState: String, Sendable, Hashable, CaseIterable {
    /// Stored, never sent.
    case pending
    /// Sent at least once, not answered yet: resent (under the same key) after a restart or reconnect.
    case sent
    /// The server answered (final).
    case answered
    /// Failed for good, reported to the user (final).
    case failed
}

/// A mutation to queue while no relay is registered.
public struct NewMutation: Sendable, Hashable {
    /// The RPC method, e.g. `session.update`.
    public var method: String
    /// The params, as compact JSON text (stored as given).
    public var paramsJSON: String
    /// The idempotency key it is sent under, every time (SPEC A8).
    public var idempotencyKey: String
    /// When it was made, ms since the epoch, on the last known server clock (the phone's clock corrected
    /// by the last server timestamp seen): ordering information, not a conflict decider.
    public var createdAt: Int64

    /// A mutation.
    public init(method: String, paramsJSON: String, idempotencyKey: String, createdAt: Int64) {
        self.method = method
        self.paramsJSON = paramsJSON
        self.idempotencyKey = idempotencyKey
        self.createdAt = createdAt
    }
}

/// A stored mutation.
public struct QueuedMutation: Sendable, Hashable {
    /// Its position in the queue (SQLite rowid, AUTOINCREMENT: never reused).
    public var id: Int64
    /// What was queued.
    public var mutation: NewMutation
    /// Where it is.
    public var state: MutationState
    /// How many times it was sent.
    public var attempts: Int64
    /// The server's timestamp of its answer, once answered.
    public var serverTimestamp: Int64?
    /// The answer's result JSON, once answered.
    public var resultJSON: String?
    /// Why it failed, once failed.
    public var failure: String?
}

/// A session cached for offline use.
public struct CachedSession: Sendable, Hashable {
    /// The session ID.
    public var sessionId: String
    /// The session as JSON text.
    public var payloadJSON: String
    /// The server timestamp of this state (ms since the epoch).
    public var serverTimestamp: Int64
    /// A cached session.
    public init(sessionId: String, payloadJSON: String, serverTimestamp: Int64) {
        self.sessionId = sessionId
        self.payloadJSON = payloadJSON
        self.serverTimestamp = serverTimestamp
    }
}

/// A desktop linked to this phone.
public struct LinkedDevice: Sendable, Hashable {
    /// The desktop's device ID.
    public var deviceId: String
    /// Its name.
    public var name: String
    /// When it was linked (ms since the epoch).
    public var linkedAt: Int64
    /// The server timestamp of this record.
    public var serverTimestamp: Int64
    /// A linked device.
    public init(deviceId: String, name: String, linkedAt: Int64, serverTimestamp: Int64) {
        self.deviceId = deviceId
        self.name = name
        self.linkedAt = linkedAt
        self.serverTimestamp = serverTimestamp
    }
}

/// A voice transcription kept for a session.
public struct Transcription: Sendable, Hashable {
    /// Its row ID.
    public var id: Int64
    /// The session it belongs to.
    public var sessionId: String
    /// The text.
    public var text: String
    /// When it was made (ms since the epoch).
    public var createdAt: Int64
}

/// The outcome of a write decided by server timestamp.
public enum ConflictOutcome: Sendable, Hashable {
    /// Written: the row was absent or older.
    case applied
    /// Not written: the stored row's server timestamp is equal or newer (it is returned).
    case keptStored(serverTimestamp: Int64)
}

/// The phone's offline action queue and offline caches in one SQLite file (SPEC Part B): tables
/// `linked_devices`, `offline_queue`, `cached_sessions`, `transcriptions`; schema version in
/// `PRAGMA user_version`, migrated at open.
///
/// Crash safety: WAL journal, `synchronous=FULL`: a call that returned has committed, and a process
/// killed at any moment (even inside a write) loses nothing committed; an interrupted transaction
/// vanishes whole. Synchronous and small on purpose: the client machine's driver performs the queue
/// actions and feeds the results back as inputs. One connection; use from one thread at a time.
///
/// Conflicts (``ConflictOutcome``): the server's timestamp decides, never the phone's clock. A cached
/// row is replaced only by a write with a strictly greater server timestamp; equal or older writes keep
/// the stored row, so replaying an answer changes nothing and a late answer cannot roll state back.
public final class OfflineQueueStore {
    /// The database file.
    public let path: String
    private let db: SQLiteConnection

    /// Opens (creating if needed) the database at `path`, switches it to WAL, and migrates it to
    /// ``OfflineQueueSchema/currentVersion``. Throws for a database written by a newer build.
    public init(path: String) throws(OfflineQueueError) {
        self.path = path
        db = try SQLiteConnection(path: path)
        try db.exec("PRAGMA busy_timeout = 5000")
        let s = try db.prepare("PRAGMA journal_mode = WAL")
        let mode = try s.step() ? s.text(0).lowercased() : ""
        s.reset()
        guard mode == "wal" else {
            throw OfflineQueueError(operation: "journal_mode=WAL", path: path, code: SQLITE_ERROR,
                                    message: "the file system does not support WAL; put the database on a local disk")
        }
        try db.exec("PRAGMA synchronous = FULL")
        try migrate()
    }

    /// Closes the database (also on deinit).
    public func close() { db.close() }

    /// `PRAGMA user_version`.
    public func schemaVersion() throws(OfflineQueueError) -> Int32 {
        Int32(truncatingIfNeeded: try db.scalar("PRAGMA user_version") ?? 0)
    }

    private func migrate() throws(OfflineQueueError) {
        let version = try schemaVersion()
        guard version <= OfflineQueueSchema.currentVersion else {
            throw OfflineQueueError(operation: "migrate", path: path, code: SQLITE_ERROR,
                                    message: "schema version \(version) is newer than this build's \(OfflineQueueSchema.currentVersion); update the app (the file is left untouched)")
        }
        guard version >= 0 else {
            throw OfflineQueueError(operation: "migrate", path: path, code: SQLITE_CORRUPT, message: "negative schema version \(version)")
        }
        for v in Int(version)..<OfflineQueueSchema.migrations.count {
            try db.transaction { () throws(OfflineQueueError) in
                try db.exec(OfflineQueueSchema.migrations[v])
                try db.exec("PRAGMA user_version = \(v + 1)")
            }
        }
    }

    // MARK: The queue

    /// Queues `mutation`; with a key already queued, returns the stored one unchanged (idempotent).
    @discardableResult
    public func enqueue(_ mutation: NewMutation) throws(OfflineQueueError) -> QueuedMutation {
        try enqueue([mutation])[0]
    }

    /// Queues `mutations` in order, in one transaction (all or none).
    @discardableResult
    public func enqueue(_ mutations: [NewMutation]) throws(OfflineQueueError) -> [QueuedMutation] {
        try db.transaction { () throws(OfflineQueueError) in
            let insert = try db.prepare("""
                INSERT INTO offline_queue (idempotency_key, method, params_json, created_at, state)
                VALUES (?, ?, ?, ?, 'pending') ON CONFLICT (idempotency_key) DO NOTHING
                """)
            var out: [QueuedMutation] = []
            for m in mutations {
                try insert.bind(.text(m.idempotencyKey), .text(m.method), .text(m.paramsJSON), .int(m.createdAt)).run()
                guard let stored = try mutationLocked(idempotencyKey: m.idempotencyKey) else {
                    throw OfflineQueueError(operation: "enqueue", path: path, code: SQLITE_INTERNAL,
                                            message: "mutation '\(m.idempotencyKey)' vanished inside its transaction")
                }
                out.append(stored)
            }
            return out
        }
    }

    /// The mutations still to send or resend (`pending` and `sent`), in queue order, at most `limit`.
    public func pending(limit: Int = 1_000) throws(OfflineQueueError) -> [QueuedMutation] {
        let s = try db.prepare("SELECT \(columns) FROM offline_queue WHERE state IN ('pending', 'sent') ORDER BY id LIMIT ?")
        try s.bind(.int(Int64(max(0, limit))))
        var out: [QueuedMutation] = []
        while try s.step() { out.append(row(s)) }
        return out
    }

    /// Every mutation, in queue order (for inspection and tests).
    public func all() throws(OfflineQueueError) -> [QueuedMutation] {
        let s = try db.prepare("SELECT \(columns) FROM offline_queue ORDER BY id")
        var out: [QueuedMutation] = []
        while try s.step() { out.append(row(s)) }
        return out
    }

    /// The mutation queued under `idempotencyKey`, if any.
    public func mutation(idempotencyKey: String) throws(OfflineQueueError) -> QueuedMutation? {
        try mutationLocked(idempotencyKey: idempotencyKey)
    }

    /// Records a send: `pending`/`sent` -> `sent`, one more attempt. Throws for a final mutation.
    public func markSent(_ id: Int64) throws(OfflineQueueError) {
        try update(id, "markSent", "UPDATE offline_queue SET state = 'sent', attempts = attempts + 1 WHERE id = ? AND state IN ('pending', 'sent')", [])
    }

    /// Records the server's answer (final).
    public func markAnswered(_ id: Int64, serverTimestamp: Int64, resultJSON: String) throws(OfflineQueueError) {
        try update(id, "markAnswered", "UPDATE offline_queue SET state = 'answered', server_timestamp = ?, result_json = ? WHERE id = ? AND state IN ('pending', 'sent')",
                   [.int(serverTimestamp), .text(resultJSON)])
    }

    /// Records a failure for good (final); the caller reports it to the user.
    public func markFailed(_ id: Int64, reason: String) throws(OfflineQueueError) {
        try update(id, "markFailed", "UPDATE offline_queue SET state = 'failed', failure = ? WHERE id = ? AND state IN ('pending', 'sent')", [.text(reason)])
    }

    private func update(_ id: Int64, _ op: String, _ sql: String, _ values: [SQLiteValue]) throws(OfflineQueueError) {
        let s = try db.prepare(sql)
        switch values.count {
        case 0: try s.bind(.int(id)).run()
        case 1: try s.bind(values[0], .int(id)).run()
        default: try s.bind(values[0], values[1], .int(id)).run()
        }
        guard db.changes == 1 else {
            let state = try? mutationByID(id)?.state.rawValue
            throw OfflineQueueError(operation: op, path: path, code: SQLITE_CONSTRAINT,
                                    message: state.map { "mutation \(id) is already \($0) (final); it is not changed again" }
                                        ?? "no mutation with id \(id)")
        }
    }

    private let columns = "id, idempotency_key, method, params_json, created_at, state, attempts, server_timestamp, result_json, failure"

    private func row(_ s: SQLiteStatement) -> QueuedMutation {
        QueuedMutation(id: s.int(0), mutation: NewMutation(method: s.text(2), paramsJSON: s.text(3), idempotencyKey: s.text(1), createdAt: s.int(4)),
                       state: MutationState(rawValue: s.text(5)) ?? .failed, attempts: s.int(6), serverTimestamp: s.optionalInt(7),
                       resultJSON: s.optionalText(8), failure: s.optionalText(9))
    }

    private func mutationLocked(idempotencyKey: String) throws(OfflineQueueError) -> QueuedMutation? {
        let s = try db.prepare("SELECT \(columns) FROM offline_queue WHERE idempotency_key = ?")
        try s.bind(.text(idempotencyKey))
        defer { s.reset() }
        return try s.step() ? row(s) : nil
    }

    private func mutationByID(_ id: Int64) throws(OfflineQueueError) -> QueuedMutation? {
        let s = try db.prepare("SELECT \(columns) FROM offline_queue WHERE id = ?")
        try s.bind(.int(id))
        defer { s.reset() }
        return try s.step() ? row(s) : nil
    }

    // MARK: Caches (conflicts by server timestamp)

    /// Caches `session` unless the stored copy has an equal or newer server timestamp.
    @discardableResult
    public func cacheSession(_ session: CachedSession) throws(OfflineQueueError) -> ConflictOutcome {
        try db.transaction { () throws(OfflineQueueError) in
            if let stored = try cachedSession(id: session.sessionId), stored.serverTimestamp >= session.serverTimestamp {
                return .keptStored(serverTimestamp: stored.serverTimestamp)
            }
            try db.prepare("INSERT OR REPLACE INTO cached_sessions (session_id, payload_json, server_timestamp) VALUES (?, ?, ?)")
                .bind(.text(session.sessionId), .text(session.payloadJSON), .int(session.serverTimestamp)).run()
            return .applied
        }
    }

    /// The cached session `id`, if any.
    public func cachedSession(id: String) throws(OfflineQueueError) -> CachedSession? {
        let s = try db.prepare("SELECT session_id, payload_json, server_timestamp FROM cached_sessions WHERE session_id = ?")
        try s.bind(.text(id))
        defer { s.reset() }
        return try s.step() ? CachedSession(sessionId: s.text(0), payloadJSON: s.text(1), serverTimestamp: s.int(2)) : nil
    }

    /// Records a linked desktop unless the stored record has an equal or newer server timestamp.
    @discardableResult
    public func linkDevice(_ device: LinkedDevice) throws(OfflineQueueError) -> ConflictOutcome {
        try db.transaction { () throws(OfflineQueueError) in
            if let kept = try newerLinkRecord(than: device) { return kept }
            try db.prepare("INSERT OR REPLACE INTO linked_devices (device_id, name, linked_at, server_timestamp) VALUES (?, ?, ?, ?)")
                .bind(.text(device.deviceId), .text(device.name), .int(device.linkedAt), .int(device.serverTimestamp)).run()
            return .applied
        }
    }

    /// Records a desktop linked with a code by phone `mobileDeviceId` and selects it (the one the app
    /// connects to at launch), in one transaction. A stored record with an equal or newer server
    /// timestamp is kept (and stays as selected as it was).
    @discardableResult
    public func recordLink(_ device: LinkedDevice, mobileDeviceId: String, code: String) throws(OfflineQueueError) -> ConflictOutcome {
        try db.transaction { () throws(OfflineQueueError) in
            if let kept = try newerLinkRecord(than: device) { return kept }
            try db.exec("UPDATE linked_devices SET selected = 0 WHERE selected = 1")
            try db.prepare("""
                INSERT OR REPLACE INTO linked_devices (device_id, name, linked_at, server_timestamp, mobile_device_id, link_code, selected)
                VALUES (?, ?, ?, ?, ?, ?, 1)
                """)
                .bind(.text(device.deviceId), .text(device.name), .int(device.linkedAt), .int(device.serverTimestamp),
                      .text(mobileDeviceId), .text(code)).run()
            return .applied
        }
    }

    /// `.keptStored` when the stored record of `device` has an equal or newer server timestamp (inside a
    /// transaction), nil when `device` may be written.
    private func newerLinkRecord(than device: LinkedDevice) throws(OfflineQueueError) -> ConflictOutcome? {
        let q = try db.prepare("SELECT server_timestamp FROM linked_devices WHERE device_id = ?")
        try q.bind(.text(device.deviceId))
        let stored = try q.step() ? q.int(0) : nil
        q.reset()
        guard let stored, stored >= device.serverTimestamp else { return nil }
        return .keptStored(serverTimestamp: stored)
    }

    /// The selected linked desktop (the most recent link), if any: the app connects to it at launch.
    public func selectedDesktop() throws(OfflineQueueError) -> LinkedDevice? {
        let s = try db.prepare("SELECT device_id, name, linked_at, server_timestamp FROM linked_devices WHERE selected = 1")
        defer { s.reset() }
        return try s.step() ? LinkedDevice(deviceId: s.text(0), name: s.text(1), linkedAt: s.int(2), serverTimestamp: s.int(3)) : nil
    }

    /// Every linked desktop, by device ID.
    public func linkedDevices() throws(OfflineQueueError) -> [LinkedDevice] {
        let s = try db.prepare("SELECT device_id, name, linked_at, server_timestamp FROM linked_devices ORDER BY device_id")
        var out: [LinkedDevice] = []
        while try s.step() { out.append(LinkedDevice(deviceId: s.text(0), name: s.text(1), linkedAt: s.int(2), serverTimestamp: s.int(3))) }
        return out
    }

    /// Stores a transcription; returns it with its row ID.
    @discardableResult
    public func addTranscription(sessionId: String, text: String, createdAt: Int64) throws(OfflineQueueError) -> Transcription {
        try db.prepare("INSERT INTO transcriptions (session_id, text, created_at) VALUES (?, ?, ?)")
            .bind(.text(sessionId), .text(text), .int(createdAt)).run()
        return Transcription(id: db.lastInsertRowID, sessionId: sessionId, text: text, createdAt: createdAt)
    }

    /// The transcriptions of `sessionId`, oldest first.
    public func transcriptions(sessionId: String) throws(OfflineQueueError) -> [Transcription] {
        let s = try db.prepare("SELECT id, session_id, text, created_at FROM transcriptions WHERE session_id = ? ORDER BY created_at, id")
        try s.bind(.text(sessionId))
        var out: [Transcription] = []
        while try s.step() { out.append(Transcription(id: s.int(0), sessionId: s.text(1), text: s.text(2), createdAt: s.int(3))) }
        return out
    }

    /// `PRAGMA integrity_check`: "ok" for a sound file.
    public func integrityCheck() throws(OfflineQueueError) -> String {
        let s = try db.prepare("PRAGMA integrity_check")
        defer { s.reset() }
        return try s.step() ? s.text(0) : ""
    }
}

/// A failed database operation: which, on which file, SQLite's (extended) result code and message, and
/// what to do.
public struct OfflineQueueError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation (e.g. `open`, `migrate`, `step`, `markSent`).
    public var operation: String
    /// The database file.
    public var path: String
    /// SQLite's extended result code.
    public var code: Int32
    /// SQLite's message, or ours.
    public var message: String

    /// An error.
    public init(operation: String, path: String, code: Int32, message: String) {
        self.operation = operation
        self.path = path
        self.code = code
        self.message = message
    }

    /// `offline queue <path>: <operation> failed (SQLite code N): <message>`.
    public var description: String {
        "offline queue \(path): \(operation) failed (SQLite code \(code)): \(message)"
    }
}
