import CSQLite
import Foundation
import OfflineQueue
import Testing

func tempDatabase(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("oq-\(name)-\(UInt64.random(in: 0...UInt64.max)).sqlite").path
}

func removeDatabase(_ path: String) {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}

/// Raw SQLite access for checks the store does not offer (schema, an old version).
func rawQuery(_ path: String, _ sql: String) -> [String] {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { return [] }
    defer { sqlite3_close(db) }
    var stmt: OpaquePointer?
    guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else { return [] }
    defer { sqlite3_finalize(stmt) }
    var out: [String] = []
    while sqlite3_step(stmt) == SQLITE_ROW { out.append(sqlite3_column_text(stmt, 0).map { String(cString: $0) } ?? "NULL") }
    return out
}

func rawExec(_ path: String, _ sql: String) -> Bool {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { return false }
    defer { sqlite3_close(db) }
    return sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK
}

func mutation(_ key: String, at t: Int64 = 1_768_478_400_000, method: String = "session.update") -> NewMutation {
    NewMutation(method: method, paramsJSON: #"{"sessionId":"s","key":"\#(key)"}"#, idempotencyKey: key, createdAt: t)
}

@Suite struct OfflineQueueStoreTests {
    @Test func openCreatesTheFourTablesAtTheCurrentVersionInWAL() throws {
        let path = tempDatabase("schema")
        defer { removeDatabase(path) }
        let store = try OfflineQueueStore(path: path)
        #expect(try store.schemaVersion() == 3)
        #expect(OfflineQueueSchema.currentVersion == 3)
        store.close()
        #expect(rawQuery(path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
                == ["cached_sessions", "linked_devices", "offline_queue", "transcriptions"])
        #expect(rawQuery(path, "PRAGMA journal_mode") == ["wal"])
        #expect(rawQuery(path, "PRAGMA user_version") == ["3"])
    }

    @Test func aVersionOneDatabaseIsMigratedAtOpenKeepingItsRows() throws {
        let path = tempDatabase("v1")
        defer { removeDatabase(path) }
        #expect(rawExec(path, OfflineQueueSchema.migrations[0] + """
            PRAGMA user_version = 1;
            INSERT INTO offline_queue (idempotency_key, method, params_json, created_at, state) VALUES ('old-1', 'session.update', '{}', 5, 'sent');
            """))
        let store = try OfflineQueueStore(path: path)
        #expect(try store.schemaVersion() == 3)
        let rows = try store.pending()
        #expect(rows.map(\.mutation.idempotencyKey) == ["old-1"])
        #expect(rows.first?.state == .sent)
        #expect(rows.first?.attempts == 0)   // the column migration 2 added, with its default
        #expect(rawQuery(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'offline_queue_open'") == ["offline_queue_open"])
    }

    @Test func aVersionTwoDatabaseGetsTheLinkColumnsKeepingItsLinkedDesktops() throws {
        let path = tempDatabase("v2")
        defer { removeDatabase(path) }
        #expect(rawExec(path, OfflineQueueSchema.migrations[0] + OfflineQueueSchema.migrations[1] + """
            PRAGMA user_version = 2;
            INSERT INTO linked_devices (device_id, name, linked_at, server_timestamp) VALUES ('d-old', 'Old Mac', 1, 10);
            """))
        let store = try OfflineQueueStore(path: path)
        #expect(try store.schemaVersion() == 3)
        #expect(try store.linkedDevices().map(\.deviceId) == ["d-old"])
        #expect(try store.selectedDesktop() == nil, "an old row is not selected by the migration")
        #expect(rawQuery(path, "SELECT mobile_device_id || '|' || selected FROM linked_devices") == ["|0"])
        // A link selects its desktop, one at a time; an older record of the same desktop is kept.
        let studio = LinkedDevice(deviceId: "d-studio", name: "Studio", linkedAt: 100, serverTimestamp: 100)
        #expect(try store.recordLink(studio, mobileDeviceId: "phone-1", code: "K7QF-3M9X") == .applied)
        #expect(try store.selectedDesktop() == studio)
        #expect(try store.recordLink(LinkedDevice(deviceId: "d-old", name: "Old Mac", linkedAt: 200, serverTimestamp: 200),
                                     mobileDeviceId: "phone-1", code: "ABCD-2345") == .applied)
        #expect(try store.selectedDesktop()?.deviceId == "d-old")
        #expect(try store.recordLink(LinkedDevice(deviceId: "d-studio", name: "Studio", linkedAt: 50, serverTimestamp: 50),
                                     mobileDeviceId: "phone-1", code: "ZZZZ-2345") == .keptStored(serverTimestamp: 100))
        #expect(try store.selectedDesktop()?.deviceId == "d-old")
        #expect(rawQuery(path, "SELECT count(*) FROM linked_devices WHERE selected = 1") == ["1"])
        #expect(rawQuery(path, "SELECT link_code FROM linked_devices WHERE device_id = 'd-old'") == ["ABCD-2345"])
        // The partial unique index refuses a second selected row.
        #expect(!rawExec(path, "UPDATE linked_devices SET selected = 1"))
    }

    @Test func aNewerSchemaIsRefusedAndLeftUntouched() throws {
        let path = tempDatabase("newer")
        defer { removeDatabase(path) }
        #expect(rawExec(path, "CREATE TABLE future (x); PRAGMA user_version = 7;"))
        do {
            _ = try OfflineQueueStore(path: path)
            Issue.record("a newer schema opened")
        } catch {
            #expect(error.operation == "migrate")
            #expect(error.description.contains("schema version 7 is newer"))
        }
        #expect(rawQuery(path, "PRAGMA user_version") == ["7"])
    }

    @Test func mutationsQueueInOrderOncePerKeyAndMoveThroughTheirStates() throws {
        let path = tempDatabase("queue")
        defer { removeDatabase(path) }
        let store = try OfflineQueueStore(path: path)
        let a = try store.enqueue(mutation("k-a")), b = try store.enqueue(mutation("k-b")), c = try store.enqueue(mutation("k-c"))
        #expect(a.id < b.id && b.id < c.id)
        #expect(a.state == .pending && a.attempts == 0)
        // The same key again is the same mutation, unchanged (idempotent enqueue).
        let again = try store.enqueue(NewMutation(method: "other", paramsJSON: "[]", idempotencyKey: "k-a", createdAt: 1))
        #expect(again == a)
        #expect(try store.pending().map(\.mutation.idempotencyKey) == ["k-a", "k-b", "k-c"])

        try store.markSent(a.id)
        try store.markSent(a.id)   // a resend, same key
        #expect(try store.mutation(idempotencyKey: "k-a")?.attempts == 2)
        #expect(try store.mutation(idempotencyKey: "k-a")?.state == .sent)
        try store.markAnswered(a.id, serverTimestamp: 1_768_478_500_000, resultJSON: #"{"ok":true}"#)
        try store.markFailed(b.id, reason: "desktop refused: session is read-only")
        #expect(try store.pending().map(\.mutation.idempotencyKey) == ["k-c"])
        let all = try store.all()
        #expect(all.map(\.state) == [.answered, .failed, .pending])
        #expect(all[0].serverTimestamp == 1_768_478_500_000 && all[0].resultJSON == #"{"ok":true}"#)
        #expect(all[1].failure == "desktop refused: session is read-only")
        // Final states are final.
        #expect(throws: OfflineQueueError.self) { try store.markSent(a.id) }
        #expect(throws: OfflineQueueError.self) { try store.markAnswered(b.id, serverTimestamp: 1, resultJSON: "{}") }
        #expect(throws: OfflineQueueError.self) { try store.markFailed(9_999, reason: "x") }
        #expect(try store.pending(limit: 0).isEmpty)
    }

    @Test func aBatchIsAllOrNothing() throws {
        let path = tempDatabase("batch")
        defer { removeDatabase(path) }
        let store = try OfflineQueueStore(path: path)
        let stored = try store.enqueue([mutation("b-1"), mutation("b-2"), mutation("b-1")])
        #expect(stored.map(\.mutation.idempotencyKey) == ["b-1", "b-2", "b-1"])
        #expect(stored[0].id == stored[2].id)
        #expect(try store.all().count == 2)
    }

    @Test func theQueueSurvivesARestartOfTheProcessState() throws {
        let path = tempDatabase("restart")
        defer { removeDatabase(path) }
        do {
            let store = try OfflineQueueStore(path: path)
            try store.enqueue([mutation("r-1"), mutation("r-2"), mutation("r-3")])
            try store.markSent(try #require(try store.mutation(idempotencyKey: "r-1")).id)
            try store.markAnswered(try #require(try store.mutation(idempotencyKey: "r-2")).id, serverTimestamp: 9, resultJSON: "{}")
            try store.cacheSession(CachedSession(sessionId: "s", payloadJSON: #"{"name":"A"}"#, serverTimestamp: 10))
            store.close()
        }
        let reopened = try OfflineQueueStore(path: path)
        // The sent-but-unanswered one is still to resend, under its key; order kept.
        let pending = try reopened.pending()
        #expect(pending.map(\.mutation.idempotencyKey) == ["r-1", "r-3"])
        #expect(pending.map(\.state) == [.sent, .pending])
        #expect(try reopened.cachedSession(id: "s")?.payloadJSON == #"{"name":"A"}"#)
    }

    @Test func theServerTimestampDecidesConflicts() throws {
        let path = tempDatabase("conflict")
        defer { removeDatabase(path) }
        let store = try OfflineQueueStore(path: path)
        #expect(try store.cacheSession(CachedSession(sessionId: "s", payloadJSON: "v100", serverTimestamp: 100)) == .applied)
        // Older: kept; equal: kept (a replayed answer changes nothing); newer: applied.
        #expect(try store.cacheSession(CachedSession(sessionId: "s", payloadJSON: "v99", serverTimestamp: 99)) == .keptStored(serverTimestamp: 100))
        #expect(try store.cacheSession(CachedSession(sessionId: "s", payloadJSON: "v100b", serverTimestamp: 100)) == .keptStored(serverTimestamp: 100))
        #expect(try store.cachedSession(id: "s")?.payloadJSON == "v100")
        #expect(try store.cacheSession(CachedSession(sessionId: "s", payloadJSON: "v101", serverTimestamp: 101)) == .applied)
        #expect(try store.cachedSession(id: "s")?.payloadJSON == "v101")
        #expect(try store.cachedSession(id: "nope") == nil)

        let desk = LinkedDevice(deviceId: "d1", name: "Studio Mac", linkedAt: 1, serverTimestamp: 50)
        #expect(try store.linkDevice(desk) == .applied)
        var renamed = desk
        renamed.name = "Old name"
        renamed.serverTimestamp = 40
        #expect(try store.linkDevice(renamed) == .keptStored(serverTimestamp: 50))
        renamed.serverTimestamp = 60
        #expect(try store.linkDevice(renamed) == .applied)
        #expect(try store.linkedDevices().map(\.name) == ["Old name"])
    }

    @Test func transcriptionsAreKeptPerSessionInOrder() throws {
        let path = tempDatabase("tx")
        defer { removeDatabase(path) }
        let store = try OfflineQueueStore(path: path)
        try store.addTranscription(sessionId: "s", text: "second", createdAt: 20)
        try store.addTranscription(sessionId: "s", text: "first", createdAt: 10)
        try store.addTranscription(sessionId: "t", text: "other", createdAt: 5)
        #expect(try store.transcriptions(sessionId: "s").map(\.text) == ["first", "second"])
    }

    @Test func anUnopenableFileIsATypedError() {
        do {
            _ = try OfflineQueueStore(path: "/nonexistent-dir-\(UInt64.random(in: 0...UInt64.max))/q.sqlite")
            Issue.record("opened a file in a missing directory")
        } catch {
            #expect(error.operation == "open")
            #expect(error.code == SQLITE_CANTOPEN)
        }
    }
}
