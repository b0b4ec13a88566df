public import RelayProtocol
public import Trace

/// The columns that say which trace a row of a result set over many traces comes from (`export
/// --format jsonl`, `stats`, `check` and `verify --format jsonl`): `trace`, the file as it was named
/// (`stdin` for `-`), and `traceId`, the header's identity (``TraceReader/identity``); and the trace's
/// wall-clock start, for the absolute time `ts` of a record. docs/COLUMNS.md describes every column.
public struct TraceColumns: Sendable, Hashable {
    /// The file as the command was given it (a directory's files as `DIR/NAME`), `stdin` for `-`.
    public var trace: String
    /// The header's identity, nil when the file could not be read far enough to have one.
    public var traceId: String?
    /// The header's `wallClockStart` in nanoseconds since the Unix epoch; nil when it is not RFC 3339.
    public var startNanoseconds: Int64?

    /// The columns of `file` (its name as given; `-` becomes `stdin`), read from `reader`.
    public init(file: String, reader: TraceReader) {
        self.init(file: file, traceId: reader.identity, wallClockStart: reader.header.wallClockStart)
    }

    /// The columns of `file` with the given identity and RFC 3339 start (nil: neither known).
    public init(file: String, traceId: String?, wallClockStart: String? = nil) {
        trace = file == "-" ? "stdin" : file
        self.traceId = traceId
        startNanoseconds = wallClockStart.flatMap { unixNanoseconds(rfc3339: $0) }
    }

    /// `t` on the wall clock: the trace's start plus `t`, RFC 3339 UTC with microseconds
    /// (`2026-01-15T10:00:02.120000Z`); JSON null when the start is unknown.
    public func ts(_ t: Moment) -> JSONValue {
        guard let start = startNanoseconds else { return .null }
        return .string(rfc3339(unixNanoseconds: start &+ t.nanoseconds, fractionDigits: 6))
    }

    /// `object` (a JSON object; anything else is returned as it is) with `trace` and `traceId` added.
    public func tagged(_ object: JSONValue) -> JSONValue {
        guard case .object(var o) = object else { return object }
        tag(&o)
        return .object(o)
    }

    /// Adds `trace` and `traceId` to the members `o`.
    func tag(_ o: inout [String: JSONValue]) {
        o["trace"] = .string(trace)
        o["traceId"] = traceId.map { .string($0) } ?? .null
    }
}

extension InspectedRecord {
    /// One row of `export --format jsonl`: the ``jsonLine`` of `frames --format jsonl` with the trace's
    /// columns (``TraceColumns``), `ts` (the wall-clock time of `t`) and `payload`: the payload's JSON
    /// text as recorded when it is JSON (the record has `json`), else null, so an engine can read it
    /// with its own JSON functions instead of guessing a type for `json`.
    public func exportLine(_ columns: TraceColumns) -> JSONValue {
        let line = jsonLine
        guard case .object(var o) = line else { return line }
        columns.tag(&o)
        o["ts"] = columns.ts(record.time)
        o["payload"] = o["json"] != nil ? .string(record.payloadText) : .null
        return .object(o)
    }
}
