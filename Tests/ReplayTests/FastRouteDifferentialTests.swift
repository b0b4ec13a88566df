@testable import Capture
import Foundation
import RelayClient
@testable import RelayProtocol
import Replay
import ReplayTesting
import Simulation
import Testing
import Trace

/// Issue 19, "one reference route per format": every fast route agrees with its reference route, record by
/// record, on every golden trace, on seeded simulations of every scenario, and on seeded respellings of
/// their records (whitespace, escapes, `_` keys, repeated keys, cuts, flipped bytes) that the fast routes
/// must hand to the reference. The routes and their references:
///
/// | fast route | reference |
/// |---|---|
/// | `RelayMessage(decodingInbound:)`: the pong literal, `readingCanonicalEvent`, `readingCanonicalRpcResponse`, the deferring parse | `RelayMessage(decodingInboundReference:)` |
/// | `TimelineUpdated(raw:)`'s direct read of the four scalars | `TimelineUpdated(json:)` |
/// | `RelayMessage.encodedText(form:)`'s direct writers (heartbeat, rpc.request, client events) | `referenceEncodedText(form:)` |
/// | `ClientRecordCodec.decodeInput` through `InputFastPath` | `ClientRecordCodec.decodeInputGeneral` |
/// | `ClientRecordCodec.directActionBytes` | `actionJSON(_:)`, serialised |
///
/// Debug builds also check each fast route against its reference on every call (`assert`), so every test
/// that replays or simulates checks them too.
@Suite struct FastRouteDifferentialTests {
    /// How often each fast route was taken: a route never taken would be checked by nothing.
    struct Taken {
        var pong = 0, canonicalEvent = 0, canonicalResponse = 0, deferred = 0, snapshotDirect = 0
        var encodedDirect = 0, inputFast = 0, actionDirect = 0
        var respellings = 0
    }

    /// Checks one trace's records and the actions a fresh machine gives for its inputs.
    static func check(_ header: TraceHeader, _ records: [TraceRecord], respell: Int, seed: UInt64, _ taken: inout Taken,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        var machine = RelayClientMachine(configuration: try ClientCapture.configuration(from: header))
        var rng = SeededRandom(seed: seed)
        for r in records where r.channel == .relay {
            if r.kind == .marker, r.payloadText.hasPrefix("client restart seed="), let s = UInt64(r.payloadText.dropFirst(20)) {
                var config = machine.configuration
                config.seed = s
                machine = RelayClientMachine(configuration: config)
                continue
            }
            if r.kind == .frameText, r.direction == .inbound {
                checkInbound(r.payloadText, &taken, sourceLocation: sourceLocation)
                for _ in 0..<respell {
                    checkInbound(String(decoding: Self.respelled(r.payload, &rng), as: UTF8.self), &taken, sourceLocation: sourceLocation)
                    taken.respellings += 1
                }
            }
            guard !ClientRecordCodec.isAction(r), r.kind != .marker, r.kind != .dropped else { continue }
            if r.kind == .input || r.kind == .timerFired {
                for _ in 0..<respell {
                    var changed = r
                    changed.payload = Self.respelled(r.payload, &rng)
                    checkInput(changed, &taken, sourceLocation: sourceLocation)
                    taken.respellings += 1
                }
            }
            guard let input = checkInput(r, &taken, sourceLocation: sourceLocation) else { continue }
            for action in machine.handle(input, at: r.time) {
                checkAction(action, &taken, sourceLocation: sourceLocation)
            }
        }
    }

    static func checkInbound(_ text: String, _ taken: inout Taken, sourceLocation: SourceLocation) {
        let fast = Result { () throws(InboundFrameError) in try RelayMessage(decodingInbound: text) }
        let reference = Result { () throws(InboundFrameError) in try RelayMessage(decodingInboundReference: text) }
        #expect(fast == reference, "\(text)", sourceLocation: sourceLocation)
        if text == #"{"type":"pong"}"# { taken.pong += 1 }
        else if RelayFrameReader.readingCanonicalEvent(text) != nil { taken.canonicalEvent += 1 }
        else if RelayFrameReader.readingCanonicalRpcResponse(text) != nil { taken.canonicalResponse += 1 }
        else if let d = try? RelayFrameReader.parsingDeferringEventPayload(text), d.deferred != nil { taken.deferred += 1 }
        guard case .success(.event(let e)) = fast, let raw = e.rawPayload else { return }
        let direct = Result { () throws(MessageDecodeError) in try TimelineUpdated(raw: raw) }
        let general = Result { () throws(MessageDecodeError) in try TimelineUpdated(json: raw.value) }
        #expect(direct == general, "\(text)", sourceLocation: sourceLocation)
        if case .success = direct { taken.snapshotDirect += 1 }
    }

    @discardableResult
    static func checkInput(_ r: TraceRecord, _ taken: inout Taken, sourceLocation: SourceLocation) -> ClientInput? {
        let fast = Result { () throws(CodecError) in try ClientRecordCodec.decodeInput(r) }
        let general = Result { () throws(CodecError) in try ClientRecordCodec.decodeInputGeneral(r) }
        #expect(fast == general, "\(r.kind) \(r.payloadText)", sourceLocation: sourceLocation)
        if InputFastPath.decode(r.payload, kind: r.kind) != nil { taken.inputFast += 1 }
        return try? fast.get()
    }

    static func checkAction(_ action: ClientAction, _ taken: inout Taken, sourceLocation: SourceLocation) {
        if let direct = ClientRecordCodec.directActionBytes(action) {
            let (json, _) = ClientRecordCodec.actionJSON(action)
            #expect(direct == json.serialized(), "\(action)", sourceLocation: sourceLocation)
            taken.actionDirect += 1
        }
        guard case .send(_, .text(let text), _) = action, let m = try? RelayMessage(decodingText: text) else { return }
        for form in [ProtocolForm.v1_6, .legacy] {
            let direct = Result { () throws(CamelCaseViolation) in try m.encodedText(form: form) }
            let reference = Result { () throws(CamelCaseViolation) in try m.referenceEncodedText(form: form) }
            #expect(direct == reference, "\(text)", sourceLocation: sourceLocation)
        }
        switch m {
        case .heartbeat, .rpcRequest: taken.encodedDirect += 1
        case .event(let e) where !e.isRelayForm: taken.encodedDirect += 1
        default: break
        }
    }

    /// `bytes` spelled another way, or broken: a space after a comma or colon, a letter as a `\u` escape, a
    /// key given a `_`, the first `payload` key repeated, cut short, or one byte flipped.
    static func respelled(_ bytes: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        guard !bytes.isEmpty else { return bytes }
        var b = bytes
        let i = Int(rng.next(upperBound: UInt64(b.count)))
        func firstIndex(from start: Int, where test: (UInt8) -> Bool) -> Int? {
            (start..<b.count).first { test(b[$0]) } ?? (0..<start).first { test(b[$0]) }
        }
        switch rng.next(upperBound: UInt64(6)) {
        case 0:
            if let k = firstIndex(from: i, where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: ":") }) { b.insert(UInt8(ascii: " "), at: k + 1) }
        case 1:
            if let k = firstIndex(from: i, where: { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }) {
                b.replaceSubrange(k...k, with: Array(String(format: "\\u%04x", b[k]).utf8))
            }
        case 2:
            if let k = firstIndex(from: i, where: { $0 == UInt8(ascii: ":") }), k > 0, b[k - 1] == UInt8(ascii: "\"") {
                b.insert(UInt8(ascii: "_"), at: k - 1)
            }
        case 3:
            if b.first == UInt8(ascii: "{"), b.count > 2 { b.insert(contentsOf: Array(#""payload":{},"#.utf8), at: 1) }
        case 4:
            b.removeSubrange(i...)
        default:
            b[i] ^= UInt8(1 << rng.next(upperBound: UInt64(8)))
        }
        return b
    }

    static let goldenNames = GoldenTraceTests.names

    /// A seeded string: plain ASCII, or with quotes, backslashes, control bytes, non-ASCII, `_`.
    static func text(_ rng: inout SeededRandom) -> String {
        let pieces = ["a", "Z", "9", "-", " ", "\"", "\\", "\u{1}", "\n", "é", "日", "🙂", "_", "/", "\u{7f}"]
        return String((0..<Int(rng.next() % 12)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined())
    }

    /// A seeded JSON value of depth at most `depth`, its keys camelCase or (rarely) with a `_`.
    static func value(_ rng: inout SeededRandom, depth: Int) -> JSONValue {
        switch rng.next() % (depth > 0 ? 8 : 5) {
        case 0: return .null
        case 1: return .bool(rng.next() % 2 == 0)
        case 2: return .int(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63))
        case 3: return .double(Double(Int64(bitPattern: rng.next()) >> 20) / 1024)
        case 4: return .string(text(&rng))
        case 5: return .array((0..<Int(rng.next() % 4)).map { _ in value(&rng, depth: depth - 1) })
        default:
            var o: [String: JSONValue] = [:]
            for _ in 0..<Int(rng.next() % 4) {
                o[(rng.next() % 16 == 0 ? "snake_" : "k") + rng.alphanumeric(3)] = value(&rng, depth: depth - 1)
            }
            return .object(o)
        }
    }

    /// Outbound messages no simulation sends (a heartbeat naming a session, params and payloads of every
    /// shape and spelling) through `encodedText` against its reference, in both protocol forms, with each
    /// direct writer taken.
    @Test func seededOutboundMessagesAgreeWithTheReferenceWriter() {
        var rng = SeededRandom(seed: 0x19_02)
        var direct = (heartbeat: 0, request: 0, event: 0)
        for _ in 0..<3_000 {
            let m: RelayMessage
            switch rng.next() % 3 {
            case 0: m = .heartbeat(HeartbeatPayload(activeSessionId: rng.next() % 2 == 0 ? nil : Self.text(&rng)))
            case 1:
                m = .rpcRequest(RpcRequest(id: Self.text(&rng), method: Self.text(&rng), params: Self.value(&rng, depth: 3),
                                           idempotencyKey: rng.next() % 2 == 0 ? nil : Self.text(&rng),
                                           traceparent: rng.next() % 2 == 0 ? nil : TraceParent.random(using: &rng)))
            default: m = .event(EventMessage(eventType: Self.text(&rng), payload: Self.value(&rng, depth: 3)))
            }
            for form in [ProtocolForm.v1_6, .legacy] {
                let fast = Result { () throws(CamelCaseViolation) in try m.encodedText(form: form) }
                let reference = Result { () throws(CamelCaseViolation) in try m.referenceEncodedText(form: form) }
                #expect(fast == reference, "\(m)")
            }
            switch m {
            case .heartbeat(let p) where p.activeSessionId == nil: direct.heartbeat += 1
            case .rpcRequest(let r) where !CamelCaseGuard.containsViolation(r.params): direct.request += 1
            case .event(let e) where !CamelCaseGuard.containsViolation(e.payload): direct.event += 1
            default: break
            }
        }
        #expect(direct.heartbeat > 100 && direct.request > 100 && direct.event > 100, "\(direct)")
    }

    /// The canonical readers accept exactly the development relay's bytes: every frame of the tour that a
    /// canonical reader (or the pong literal) takes, with each of its bytes changed in turn (one bit flipped,
    /// so a letter changes case, a quote or brace becomes another character, a digit another digit or
    /// punctuation), still decodes, or fails, exactly as the reference route says.
    @Test func everyByteOfACanonicalFrameChangedAgreesWithTheReference() throws {
        let reader = try TraceReader(path: try TraceReplay.packageRoot(from: #filePath) + "/Traces/tour.rtrace")
        var frames: [String] = []
        var seen = (event: 0, response: 0, pong: 0)
        for e in reader.readAll().entries where e.record.kind == .frameText && e.record.direction == .inbound {
            let text = e.record.payloadText
            if text == #"{"type":"pong"}"#, seen.pong < 2 {
                seen.pong += 1
            } else if RelayFrameReader.readingCanonicalEvent(text) != nil, seen.event < 12 {
                seen.event += 1
            } else if RelayFrameReader.readingCanonicalRpcResponse(text) != nil, seen.response < 8 {
                seen.response += 1
            } else {
                continue
            }
            frames.append(text)
        }
        #expect(seen.event == 12 && seen.response == 8 && seen.pong == 2, "\(seen)")
        var taken = Taken(), changed = 0
        for text in frames {
            let bytes = Array(text.utf8)
            for i in bytes.indices {
                var b = bytes
                b[i] ^= 0x01
                Self.checkInbound(String(decoding: b, as: UTF8.self), &taken, sourceLocation: #_sourceLocation)
                changed += 1
            }
        }
        #expect(changed > 5_000)
    }

    @Test(arguments: goldenNames)
    func everyFastRouteAgreesWithItsReferenceOnTheGoldenTrace(name: String) throws {
        let reader = try TraceReader(path: try TraceReplay.packageRoot(from: #filePath) + "/Traces/\(name).rtrace")
        let records = reader.readAll().entries.map(\.record)
        var taken = Taken()
        try Self.check(reader.header, records, respell: 2, seed: 0x19_01, &taken)
        #expect(taken.respellings > 0)
        #expect(taken.inputFast > 0 && taken.actionDirect > 0, "\(name): \(taken)")
    }

    @Test func seededSimulationsOfEveryScenarioTakeEveryFastRouteAndAgree() throws {
        var taken = Taken()
        for scenario in Scenario.all {
            for seed: UInt64 in [7, 19] {
                let path = try simulatedTrace(scenario.name, seed: seed)
                defer { try? FileManager.default.removeItem(atPath: path) }
                let reader = try TraceReader(path: path)
                try Self.check(reader.header, reader.readAll().entries.map(\.record), respell: 1, seed: seed, &taken)
            }
        }
        // Each route was taken, so each was compared.
        #expect(taken.pong > 0 && taken.canonicalEvent > 0 && taken.canonicalResponse > 0, "\(taken)")
        #expect(taken.deferred > 0 && taken.snapshotDirect > 0 && taken.encodedDirect > 0, "\(taken)")
        #expect(taken.inputFast > 0 && taken.actionDirect > 0 && taken.respellings > 1000, "\(taken)")
    }
}
