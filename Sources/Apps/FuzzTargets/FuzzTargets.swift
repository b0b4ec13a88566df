import DevRelay
import RelayProtocol
import RelayTraceCLI
import Trace
import WatchLink
import WebSocket

/// One coverage-guided fuzz target: a name for `tools/fuzz.sh` and a body that takes arbitrary bytes.
/// A body must return for every input (errors are expected); it crashes only on a bug, including a
/// broken invariant it checks (round trips, numbering).
public struct FuzzTarget: Sendable {
    /// The name (`tools/fuzz.sh NAME`, the corpus directory `fuzz/corpus/NAME`).
    public let name: String
    /// What it feeds and to what.
    public let summary: String
    /// Runs one input.
    public let run: @Sendable ([UInt8]) -> Void
}

/// Every fuzz target.
public enum FuzzTargets {
    /// The targets, by name.
    public static let all: [FuzzTarget] = [
        FuzzTarget(name: "trace-file", summary: "the bytes as a whole trace file: open, read, salvage, seek", run: TraceFuzzing.readFile),
        FuzzTarget(name: "trace-header", summary: "the bytes as the header JSON in a checksummed header frame", run: TraceFuzzing.readHeader),
        FuzzTarget(name: "trace-chunk", summary: "the bytes as one chunk's records (count, times, content), compressed and checksummed", run: TraceFuzzing.readChunk),
        FuzzTarget(name: "trace-index", summary: "the bytes as the index frame's content, with the trailer pointing at it", run: TraceFuzzing.readIndex),
        FuzzTarget(name: "trace-trailer", summary: "the bytes as the trailer's fields, CRC recomputed", run: TraceFuzzing.readTrailer),
        FuzzTarget(name: "ws-frames", summary: "the bytes as a WebSocket stream to the frame parser and to a connection, both roles; frames re-encode to themselves", run: webSocketFrames),
        FuzzTarget(name: "ws-handshake", summary: "the bytes as an upgrade request to the server handshake and as a response to the client handshake", run: webSocketHandshake),
        FuzzTarget(name: "json", summary: "the bytes to the JSON parser; what parses serialises and parses back to an equal value", run: json),
        FuzzTarget(name: "relay-message", summary: "the bytes as a relay frame to the message decoders; an encoded message decodes and encodes to the same bytes", run: relayMessage),
        FuzzTarget(name: "watch-wire", summary: "the bytes as a watch-link datagram; what decodes encodes and decodes back to itself", run: watchWire),
        FuzzTarget(name: "fault-script", summary: "the bytes as a fault script (docs/FAULTS.md) and as durations", run: faultScript),
        FuzzTarget(name: "cli-options", summary: "the bytes as NUL-separated command-line arguments to the option parser", run: cliOptions),
    ]

    /// The target called `name`.
    public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }

    static func webSocketFrames(_ bytes: [UInt8]) {
        // The first byte splits the input in two deliveries (exercising partial frames).
        let split = bytes.isEmpty ? 0 : min(bytes.count, Int(bytes[0]) % (bytes.count + 1))
        for role in [WebSocketRole.server, .client] {
            var parser = WebSocketFrameParser(role: role, maxFrameSize: 1 << 16)
            parser.append(bytes[..<split])
            parser.append(bytes[split...])
            var frames = 0
            while frames < 10_000, let frame = try? parser.nextFrame() {
                frames += 1
                // A parsed frame serialises to bytes that parse back to the same frame.
                var again = WebSocketFrameParser(role: role, maxFrameSize: 1 << 16)
                again.append(WebSocketFrameEncoder.bytes(of: frame))
                if let back = try? again.nextFrame() {
                    precondition(back == frame, "a parsed frame re-encodes to itself")
                }
            }
            var connection = WebSocketConnection(role: role, configuration: WebSocketConfiguration(maxFrameSize: 1 << 16, maxMessageSize: 1 << 17))
            bytes[..<split].withUnsafeBytes { _ = connection.receive($0) }
            bytes[split...].withUnsafeBytes { _ = connection.receive($0) }
            _ = connection.takeOutbound()
        }
    }

    static func webSocketHandshake(_ bytes: [UInt8]) {
        var server = WebSocketServerHandshake(maxHeadSize: 4096)
        if case .complete(let request, _)? = try? server.receive(bytes) {
            _ = try? WebSocketHandshake.acceptResponse(for: request)
        }
        if var client = try? WebSocketClientHandshake(host: "relay.example", path: "/ws/device-link", nonce: [UInt8](repeating: 7, count: 16), maxHeadSize: 4096) {
            let split = bytes.count / 2
            _ = try? client.receive(Array(bytes[..<split]))
            _ = try? client.receive(Array(bytes[split...]))
        }
    }

    static func json(_ bytes: [UInt8]) {
        guard let value = try? JSONValue(parsing: bytes) else { return }
        let text = value.serialized()
        guard let back = try? JSONValue(parsing: text) else { preconditionFailure("serialised JSON parses: \(String(decoding: text, as: UTF8.self))") }
        precondition(back.canonicallyEquals(value), "JSON survives a round trip")
    }

    static func relayMessage(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        _ = try? RelayMessage(decodingInbound: text)
        _ = try? JSONValue.parsingNotingUnderscoreKeys(text)
        guard let message = try? RelayMessage(decodingUTF8: bytes) else { return }
        guard let encoded = try? message.encodedBytes() else { return }
        guard let back = try? RelayMessage(decodingUTF8: encoded) else {
            preconditionFailure("an encoded message decodes: \(String(decoding: encoded, as: UTF8.self))")
        }
        // Encoding normalises (e.g. the 1.6 form writes `relaySessionId` when it was absent); the
        // normal form is a fixed point.
        precondition((try? back.encodedBytes()) == encoded, "an encoded message decodes and encodes back to the same bytes")
    }

    static func watchWire(_ bytes: [UInt8]) {
        guard let d = try? WatchWire.decode(bytes) else { return }
        let encoded = WatchWire.encode(d)
        guard let back = try? WatchWire.decode(encoded) else { preconditionFailure("an encoded datagram decodes") }
        precondition(back == d, "a decoded datagram encodes and decodes back to itself")
        precondition(WatchWire.encode(back) == encoded, "equal datagrams are equal bytes")
    }

    static func faultScript(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        if let script = try? FaultScript.parse(text) { _ = script.schedule }
        for line in text.split(separator: "\n").prefix(64) { _ = FaultScript.parseDuration(String(line)) }
    }

    static func cliOptions(_ bytes: [UInt8]) {
        let args = bytes.split(separator: 0, omittingEmptySubsequences: false).prefix(64).map { String(decoding: $0, as: UTF8.self) }
        let code = CLIFuzzEntry.parse(args)
        precondition(code == 0 || code == 64, "parsing alone ends in success or a usage error")
    }
}
