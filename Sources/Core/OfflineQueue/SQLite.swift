import CSQLite

/// SQLite's "copy the bytes now" destructor.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A thin owner of one `sqlite3*` connection (internal: the store is the public API).
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?
    let path: String

    init(path: String) throws(OfflineQueueError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw OfflineQueueError(operation: "open", path: path, code: rc, message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    func close() {
        if let h = handle {
            sqlite3_close_v2(h)
            handle = nil
        }
    }

    func error(_ operation: String, _ rc: Int32) -> OfflineQueueError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "the database is closed"
        return OfflineQueueError(operation: operation, path: path, code: rc, message: message)
    }

    /// Runs SQL without results (may hold several statements).
    func exec(_ sql: String) throws(OfflineQueueError) {
        guard let handle else { throw error("exec", SQLITE_MISUSE) }
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error("exec \(sql.prefix(60))", rc) }
    }

    func prepare(_ sql: String) throws(OfflineQueueError) -> SQLiteStatement {
        guard let handle else { throw error("prepare", SQLITE_MISUSE) }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error("prepare \(sql.prefix(60))", rc) }
        return SQLiteStatement(stmt: stmt, connection: self)
    }

    /// The integer in the first column of the first row of `sql`.
    func scalar(_ sql: String) throws(OfflineQueueError) -> Int64? {
        let s = try prepare(sql)
        defer { s.reset() }
        guard try s.step() else { return nil }
        return s.int(0)
    }

    /// Runs `body` in one `BEGIN IMMEDIATE ... COMMIT` transaction; rolls back when it throws.
    func transaction<T>(_ body: () throws(OfflineQueueError) -> T) throws(OfflineQueueError) -> T {
        try exec("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try exec("COMMIT")
            return value
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }

    var changes: Int32 { handle.map { sqlite3_changes($0) } ?? 0 }
    var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }
}

/// One prepared statement; finalised on deinit.
final class SQLiteStatement {
    private let stmt: OpaquePointer
    private let connection: SQLiteConnection

    init(stmt: OpaquePointer, connection: SQLiteConnection) {
        self.stmt = stmt
        self.connection = connection
    }

    deinit { sqlite3_finalize(stmt) }

    /// Binds the values to parameters 1, 2, ...
    @discardableResult
    func bind(_ values: SQLiteValue...) throws(OfflineQueueError) -> SQLiteStatement {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
        for (i, v) in values.enumerated() {
            let n = Int32(i + 1)
            let rc: Int32 = switch v {
            case .null: sqlite3_bind_null(stmt, n)
            case .int(let x): sqlite3_bind_int64(stmt, n, x)
            case .text(let t): sqlite3_bind_text(stmt, n, t, -1, sqliteTransient)
            }
            guard rc == SQLITE_OK else { throw connection.error("bind", rc) }
        }
        return self
    }

    /// Steps: true with a row, false when done.
    func step() throws(OfflineQueueError) -> Bool {
        let rc = sqlite3_step(stmt)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error("step", rc)
        }
    }

    /// Resets the statement (a statement left on a row keeps a read transaction open).
    func reset() { sqlite3_reset(stmt) }

    /// Steps to completion (a statement without rows).
    func run() throws(OfflineQueueError) {
        while try step() {}
    }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }

    func optionalInt(_ column: Int32) -> Int64? {
        sqlite3_column_type(stmt, column) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, column)
    }

    func text(_ column: Int32) -> String { optionalText(column) ?? "" }

    func optionalText(_ column: Int32) -> String? {
        guard sqlite3_column_type(stmt, column) != SQLITE_NULL, let p = sqlite3_column_text(stmt, column) else { return nil }
        let n = Int(sqlite3_column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case null
    case int(Int64)
    case text(String)

    static func optional(_ s: String?) -> SQLiteValue { s.map { .text($0) } ?? .null }
    static func optional(_ i: Int64?) -> SQLiteValue { i.map { .int($0) } ?? .null }
}
