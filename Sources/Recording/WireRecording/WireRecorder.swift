#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import RelayProtocol
public import Trace
import Synchronization

/// Writes a *wire trace*: what crossed the wire between a client and a relay, for any client (the iOS
/// app, a desktop build, a python test client), with no client inputs (docs/TRACE_FORMAT.md §14).
///
/// One recorder is one trace file. Each socket gets a ``WireSocket`` from ``openSocket(url:headers:peer:)``
/// (the next transport generation: 1, 2, ... in the order sockets are opened or accepted), and the
/// WebSocket stack that owns the socket reports what happens on it from its own callbacks: the upgrade
/// answered or refused, every text and binary message in both directions, pings and pongs, the close and
/// who started it, a failure. The recorder stamps each record with its own monotonic clock and hands it to
/// a ``TraceWriter`` (chunked zstd, crash safe: a killed process loses at most its last second; secrets
/// in JSON payloads and headers redacted by default).
///
/// Three writers use it: `relaytrace relay --record` (source `relay`), `relaytrace proxy` (source `proxy`)
/// and any Swift client that records itself in-app (source `recorder`). Every call is thread-safe and
/// short: it takes the time and queues the record under one lock (so records of all sockets are in time
/// order); redaction, encoding, compression and the file writes run on the writer's background thread.
///
/// ```swift
/// let recorder = try WireRecorder(path: "app.rtrace", source: .recorder, details: ["app": "MyApp 2.1"])
/// let socket = recorder.openSocket(url: url, headers: request.allHTTPHeaderFields.map { ($0.key, $0.value) } ?? [])
/// socket.opened()                 // the upgrade succeeded (101)
/// socket.sent(.text(json))        // the client sent a message
/// socket.received(.text(reply))   // a message arrived from the relay
/// socket.closed(code: 1001, reason: "", byClient: true)
/// try recorder.close()            // index and trailer: the trace is complete
/// ```
public final class WireRecorder: Sendable {
    /// Who writes the trace (the header's `wire.source`).
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// The development relay, recording every connection it serves (`relaytrace relay --record`).
        case relay
        /// The recording proxy between a client and any relay (`relaytrace proxy`).
        case proxy
        /// A client recording its own sockets in-app (this type called from the client's WebSocket callbacks).
        case recorder
    }

    /// The header as written (the writer fills in the redaction key).
    public let header: TraceHeader
    private let writer: TraceWriter
    private let clock: @Sendable () -> Moment
    private let nextGeneration = Atomic<UInt64>(1)

    /// Writes a wire trace to `path`.
    /// - Parameters:
    ///   - source: who records (the header's `wire.source`).
    ///   - details: more members of the header's `wire` object (e.g. `listen`, `upstream`, `app`).
    ///   - wallClockStart: the RFC 3339 wall-clock time of the trace start (the header's
    ///     `wallClockStart`); the caller takes it, the recorder never reads the wall clock.
    ///   - options: the writer's options (queue, chunking, redaction, overwrite). The default drops and
    ///     counts records when its queue is full rather than block the caller; set `blockWhenFull` where
    ///     losing a frame is worse than waiting (the relay and the proxy do).
    ///   - clock: the monotonic time of each record since the trace start; by default the continuous
    ///     clock from this initialiser on. Tests pass a virtual clock.
    /// - Throws: ``TraceError`` when the file exists (unless `options.overwrite`) or cannot be written.
    public convenience init(path: String, source: Source, details: [String: JSONValue] = [:], wallClockStart: String,
                            options: TraceWriterOptions = TraceWriterOptions(),
                            clock: (@Sendable () -> Moment)? = nil) throws(TraceError) {
        let sink = try FileSink(path: path, overwrite: options.overwrite)
        try self.init(sink: sink, source: source, details: details, wallClockStart: wallClockStart, options: options, clock: clock)
    }

    /// Writes a wire trace to `sink` (which becomes the recorder's). See ``init(path:source:details:wallClockStart:options:clock:)``.
    public init(sink: any TraceSink, source: Source, details: [String: JSONValue] = [:], wallClockStart: String,
                options: TraceWriterOptions = TraceWriterOptions(), clock: (@Sendable () -> Moment)? = nil) throws(TraceError) {
        var wire = details
        wire["source"] = .string(source.rawValue)
        let header = TraceHeader(seed: 0, wallClockStart: wallClockStart, simulated: false, client: .object([:]),
                                 extra: ["wire": .object(wire)])
        writer = try TraceWriter(sink: sink, header: header, options: options)
        self.header = writer.header
        if let clock {
            self.clock = clock
        } else {
            // The monotonic clock read directly: ContinuousClock's Duration arithmetic costs more than
            // the rest of a record's append.
            let start = monotonicNanoseconds()
            self.clock = { Moment(nanoseconds: monotonicNanoseconds() - start) }
        }
    }

    /// A new socket (the next generation) and its `transportOpen` record: the upgrade request as the
    /// client sent it (`url` is the URL or the request target; headers in order; secrets are redacted by
    /// the writer), the connecting peer's address when known, and the device, desktop and client type
    /// read from `X-Device-ID`, `X-Target-Desktop-Device-ID` and `X-Client-Type`.
    public func openSocket(url: String, headers: [(name: String, value: String)], peer: String? = nil) -> WireSocket {
        var merged: [String: String] = [:]
        var order: [String] = []
        for (name, value) in headers {
            if let old = merged[name] { merged[name] = old + ", " + value } else {
                merged[name] = value
                order.append(name)
            }
        }
        func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveEquals(name) }?.value
        }
        var o: [String: JSONValue] = [
            "url": .string(url),
            "headers": .object(merged.mapValues { .string($0) }),
            "headerOrder": .array(order.map { .string($0) }),
        ]
        if let peer { o["peer"] = .string(peer) }
        if let d = header("X-Device-ID") { o["deviceId"] = .string(d) }
        if let d = header("X-Target-Desktop-Device-ID") { o["desktopId"] = .string(d) }
        if let c = header("X-Client-Type") { o["clientType"] = .string(c) }
        let payload = JSONValue.object(o).serialized()
        // Numbers are taken in call order; a racing open may be stamped a hair before a lower number's.
        let generation = nextGeneration.add(1, ordering: .relaxed).oldValue
        append(.transportOpen, generation: generation, direction: .outbound, payload: payload)
        return WireSocket(recorder: self, generation: generation)
    }

    /// A failure that belongs to no socket's generation yet: a connection that failed before its upgrade
    /// request was read (TLS handshake, malformed request). It takes a generation of its own (so accept
    /// order stays visible) and writes only a `transportFailed` record.
    public func connectionFailed(_ error: String, peer: String? = nil, status: Int? = nil) {
        var o: [String: JSONValue] = ["error": .string(error)]
        if let peer { o["peer"] = .string(peer) }
        if let status { o["status"] = .int(Int64(status)) }
        let payload = JSONValue.object(o).serialized()
        append(.transportFailed, generation: nextGeneration.add(1, ordering: .relaxed).oldValue, direction: .inbound, payload: payload)
    }

    /// A user marker (free text) at the current time, e.g. "test step 3 begins".
    public func marker(_ text: String) {
        append(.marker, generation: nil, direction: nil, payload: Array(text.utf8))
    }

    /// How many sockets were opened so far.
    public var sockets: UInt64 { nextGeneration.load(ordering: .relaxed) - 1 }

    /// The writer's counts so far (records, chunks, dropped...).
    public var status: TraceWriterSummary { writer.status }

    /// Writes everything still queued, then the index and trailer: the trace is complete. Later calls on
    /// this recorder's sockets are counted as dropped.
    @discardableResult
    public func close() throws(TraceError) -> TraceWriterSummary { try writer.close() }

    /// Makes everything queued reach the file now (it does so by itself every 0.5 s).
    public func flush() { writer.flush() }

    func append(_ kind: RecordKind, generation: UInt64?, direction: FrameDirection?, payload: [UInt8]) {
        // The writer stamps the time under its own queue lock: one lock per record, and times never go
        // back in the file whichever threads record.
        writer.append(TraceRecord(kind: kind, time: .zero, channel: .relay, generation: generation, direction: direction,
                                  payload: payload), stampedBy: clock)
    }
}

/// Nanoseconds on the system's monotonic clock.
func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// One socket of a ``WireRecorder``: its generation, and a method for each thing that can happen on it.
///
/// Directions are the client's, as everywhere in RelayTrace: `sent` and `.outbound` are client to relay,
/// `received` and `.inbound` relay to client. A server or proxy that records reports what the client sent
/// as `sent` (it is what the server received). After the first ``closed(code:reason:byClient:clean:)`` or
/// ``failed(_:)`` the socket is done: later closes (the other side's echo) and failures are ignored.
public final class WireSocket: Sendable {
    /// The socket's transport generation in the trace (1 for the first socket).
    public let generation: UInt64
    private let recorder: WireRecorder
    private let finished = Atomic<Bool>(false)

    init(recorder: WireRecorder, generation: UInt64) {
        self.recorder = recorder
        self.generation = generation
    }

    /// The upgrade succeeded: a `transportOpened` record with the response status (101) and the response
    /// headers when the caller has them.
    public func opened(status: Int = 101, headers: [(name: String, value: String)] = []) {
        var o: [String: JSONValue] = ["status": .int(Int64(status))]
        if !headers.isEmpty {
            var merged: [String: String] = [:]
            var order: [String] = []
            for (name, value) in headers {
                if let old = merged[name] { merged[name] = old + ", " + value } else {
                    merged[name] = value
                    order.append(name)
                }
            }
            o["headers"] = .object(merged.mapValues { .string($0) })
            o["headerOrder"] = .array(order.map { .string($0) })
        }
        recorder.append(.transportOpened, generation: generation, direction: .inbound, payload: JSONValue.object(o).serialized())
    }

    /// The upgrade was refused with an HTTP status (401, 404, 429, 502...): a `transportFailed` record
    /// with `status` and the reason (the response body or the refuser's explanation). The socket is done.
    public func refused(status: Int, reason: String) {
        guard finish() else { return }
        let o: [String: JSONValue] = ["error": .string(reason.isEmpty ? "upgrade refused with \(status)" : reason),
                                      "status": .int(Int64(status))]
        recorder.append(.transportFailed, generation: generation, direction: .inbound, payload: JSONValue.object(o).serialized())
    }

    /// The socket failed without a close handshake (connection reset, TLS error, timeout): a
    /// `transportFailed` record. The socket is done.
    public func failed(_ error: String) {
        guard finish() else { return }
        recorder.append(.transportFailed, generation: generation, direction: .inbound,
                        payload: JSONValue.object(["error": .string(error)]).serialized())
    }

    /// A text or binary message the client sent (client to relay).
    public func sent(_ frame: WireFrame) { message(frame, .outbound) }

    /// A text or binary message the client received (relay to client).
    public func received(_ frame: WireFrame) { message(frame, .inbound) }

    /// A text or binary message in `direction`.
    public func message(_ frame: WireFrame, _ direction: FrameDirection) {
        switch frame {
        case .text(let text):
            recorder.append(.frameText, generation: generation, direction: direction, payload: Array(text.utf8))
        case .binary(let bytes):
            recorder.append(.frameBinary, generation: generation, direction: direction, payload: bytes)
        }
    }

    /// A ping with its application data, in `direction` (`.outbound`: the client pinged).
    public func ping(_ data: [UInt8] = [], _ direction: FrameDirection) {
        recorder.append(.ping, generation: generation, direction: direction, payload: data)
    }

    /// A pong with its application data, in `direction` (`.outbound`: the client answered a ping).
    public func pong(_ data: [UInt8] = [], _ direction: FrameDirection) {
        recorder.append(.pong, generation: generation, direction: direction, payload: data)
    }

    /// The socket is closing: the first close frame crossed (or, with `clean` false, the connection ended
    /// without one). `code` is the close frame's code (nil: no code, 1005 on the wire's receiving side),
    /// `byClient` says which side closed first. A `transportClosed` record, direction out when the client
    /// closed, in when the relay did. The socket is done.
    public func closed(code: Int?, reason: String, byClient: Bool, clean: Bool = true) {
        guard finish() else { return }
        var o: [String: JSONValue] = ["reason": .string(reason), "clean": .bool(clean)]
        if let code { o["code"] = .int(Int64(code)) }
        recorder.append(.transportClosed, generation: generation, direction: byClient ? .outbound : .inbound,
                        payload: JSONValue.object(o).serialized())
    }

    /// Whether the socket is done (closed, failed or refused).
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    private func finish() -> Bool {
        finished.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}

extension String {
    /// ASCII case-insensitive equality (HTTP header names).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }
        return zip(a, b).allSatisfy { x, y in lower(x) == lower(y) }
    }
}
