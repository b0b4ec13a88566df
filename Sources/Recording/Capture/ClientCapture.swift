public import RelayClient
public import RelayProtocol
public import Trace

/// Records what the relay client saw and did into a trace, at the machine's boundary.
///
/// The driver calls ``record(_:at:)`` with every input it hands the machine and ``record(_:at:)-(ClientAction)``
/// (or ``record(actions:at:)``) with every action the machine returns, in that order and inside the same
/// critical section as `machine.handle`. So the trace's order is exactly the machine's order, which is what
/// strict replay needs (see docs/ARCHITECTURE.md, "Capture at the machine boundary"). Socket facts (open,
/// opened, frames in and out, closed, failed) become the transport record kinds with their generation and
/// direction; everything else becomes `input` / `action` records (``ClientRecordCodec``).
///
/// Appending never blocks: records go to the ``TraceWriter``'s bounded queue, which redacts, compresses
/// and writes them on its own thread.
public final class ClientCapture: Sendable {
    /// The writer records go to.
    public let writer: TraceWriter

    /// Captures into `writer`.
    public init(writer: TraceWriter) {
        self.writer = writer
    }

    /// Opens a trace at `path` for a client with `configuration`, writing the header (tool and protocol
    /// versions, seed, redaction policy and key, wall-clock start, simulated or not, the client's identity).
    public convenience init(path: String, configuration: ClientConfiguration, wallClockStart: String,
                            simulated: Bool, options: TraceWriterOptions = TraceWriterOptions(),
                            extra: [String: JSONValue] = [:]) throws(TraceError) {
        let redactor = Redactor(policy: options.redaction, key: options.redactionKey ?? Redactor.randomKey())
        var options = options
        options.redactionKey = redactor.key
        let header = TraceHeader(seed: configuration.seed, redaction: TraceHeader.Redaction(redactor),
                                 wallClockStart: wallClockStart, simulated: simulated,
                                 client: ClientCapture.clientJSON(configuration), extra: extra)
        self.init(writer: try TraceWriter(path: path, header: header, options: options))
    }

    /// Records an input handed to the machine at `time`.
    public func record(_ input: ClientInput, at time: Moment) {
        _ = writer.append(ClientRecordCodec.record(input, at: time))
    }

    /// Records one action the machine returned at `time`.
    public func record(_ action: ClientAction, at time: Moment) {
        for r in ClientRecordCodec.records(action, at: time) { _ = writer.append(r) }
    }

    /// Records the actions the machine returned at `time`, in order.
    public func record(actions: [ClientAction], at time: Moment) {
        for a in actions { record(a, at: time) }
    }

    /// Records a user marker (free text) at `time`.
    public func mark(_ text: String, at time: Moment) {
        _ = writer.append(TraceRecord(kind: .marker, time: time, channel: .relay, generation: nil, direction: nil,
                                      payload: Array(text.utf8)))
    }

    /// Closes the trace (index and trailer).
    public func close() throws(TraceError) -> TraceWriterSummary {
        try writer.close()
    }

    /// The client identity stored in the trace header (`client`), from which a replay rebuilds the machine.
    public static func clientJSON(_ c: ClientConfiguration) -> JSONValue {
        ["deviceId": .string(c.deviceId), "deviceName": .string(c.deviceName), "desktopId": .string(c.desktopId),
         "relayURL": .string(c.relayURL), "allowInsecureLoopback": .bool(c.allowInsecureLoopback)]
    }

    /// The configuration a trace header describes (its `client` member and `seed`).
    public static func configuration(from header: TraceHeader) throws(CodecError) -> ClientConfiguration {
        guard case .object(let o) = header.client else { throw CodecError(path: "$.client", message: "missing client identity") }
        let f = Fields(values: o, path: "$.client")
        do {
            return try ClientConfiguration(deviceId: try f.string("deviceId"), deviceName: try f.string("deviceName"),
                                           desktopId: try f.string("desktopId"), relayURL: try f.string("relayURL"),
                                           allowInsecureLoopback: f.value("allowInsecureLoopback")?.boolValue ?? false,
                                           seed: header.seed)
        } catch let e as ClientConfigurationError {
            throw CodecError(path: "$.client.relayURL", message: e.description)
        } catch let e as CodecError {
            throw e
        } catch {
            throw CodecError(path: "$.client", message: "\(error)")
        }
    }
}
