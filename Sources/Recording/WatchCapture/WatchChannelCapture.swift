public import RelayProtocol
public import Trace

/// Records the watch channel into a trace (channel `watch`), at the machines' boundary: the driver calls
/// ``record(_:at:)-(WatchChannelInput,_)`` with every input it hands a WatchLink machine and
/// ``record(actions:at:)`` with what the machine returned, in that order (see ``WatchRecordCodec``).
///
/// Appending never blocks: records go to the ``TraceWriter``'s bounded queue (or, with
/// `blockWhenFull`, wait for room: simulations are lossless).
public final class WatchChannelCapture: Sendable {
    /// The writer records go to.
    public let writer: TraceWriter

    /// Captures into `writer`.
    public init(writer: TraceWriter) {
        self.writer = writer
    }

    /// Opens a trace at `path` for the watch channel, writing the header (`seed`, wall-clock start,
    /// simulated or not, `client` = `{"channel":"watch", ...identity}`, plus `extra` members).
    public convenience init(path: String, seed: UInt64, identity: [String: JSONValue], wallClockStart: String,
                            simulated: Bool, options: TraceWriterOptions = TraceWriterOptions(),
                            extra: [String: JSONValue] = [:]) throws(TraceError) {
        let redactor = Redactor(policy: options.redaction, key: options.redactionKey ?? Redactor.randomKey())
        var options = options
        options.redactionKey = redactor.key
        var client = identity
        client["channel"] = "watch"
        let header = TraceHeader(seed: seed, redaction: TraceHeader.Redaction(redactor), wallClockStart: wallClockStart,
                                 simulated: simulated, client: .object(client), extra: extra)
        self.init(writer: try TraceWriter(path: path, header: header, options: options))
    }

    /// Records an input handed to a machine at `time`.
    public func record(_ input: WatchChannelInput, at time: Moment) {
        _ = writer.append(WatchRecordCodec.record(input, at: time))
    }

    /// Records one action a machine returned at `time`.
    public func record(_ action: WatchChannelAction, at time: Moment) {
        _ = writer.append(WatchRecordCodec.record(action, at: time))
    }

    /// Records the actions a machine returned at `time`, in order.
    public func record(actions: [WatchChannelAction], at time: Moment) {
        for a in actions { record(a, at: time) }
    }

    /// Records a marker (free text) at `time`, on channel `watch`.
    public func mark(_ text: String, at time: Moment) {
        _ = writer.append(TraceRecord(kind: .marker, time: time, channel: .watch, payload: Array(text.utf8)))
    }

    /// Closes the trace (index and trailer).
    public func close() throws(TraceError) -> TraceWriterSummary {
        try writer.close()
    }
}
