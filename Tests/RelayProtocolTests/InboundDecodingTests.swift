import RelayProtocol
import Testing

/// The reference path `RelayMessage(decodingInbound:)` must agree with: full parse, camelCase guard,
/// decode of the tree.
private func reference(_ text: String) -> Result<RelayMessage, InboundFrameError> {
    let json: JSONValue
    do { json = try JSONValue(parsing: text) } catch { return .failure(.syntax(error)) }
    do { try CamelCaseGuard.check(json) } catch { return .failure(.snakeCase(error)) }
    do { return .success(try RelayMessage(decoding: json)) } catch { return .failure(.message(error)) }
}

private func inbound(_ text: String) -> Result<RelayMessage, InboundFrameError> {
    do { return .success(try RelayMessage(decodingInbound: text)) } catch { return .failure(error) }
}

private let snapshotPayload = #"{"sessionId":"s1","runId":"r1","threadId":"t1","revision":7,"blocks":[{"kind":"text","text":"héllo \"q\" \u00e9"},{"n":[1,-2.5,1e3,true,false,null]}]}"#

private func event(_ payload: String, type: String = "chat:timeline-updated") -> String {
    #"{"type":"event","eventId":12,"sourceDeviceId":"d","targetDeviceId":null,"timestamp":"t","payload":{"eventType":"\#(type)","payload":\#(payload)}}"#
}

/// Inbound frames are decoded with the snapshot payload left raw; results and errors equal the full path.
@Suite struct InboundDecodingTests {
    static let frames: [String] = [
        event(snapshotPayload),
        event(snapshotPayload, type: "device-status"),
        event(#"{"deviceId":"d","status":"online"}"#, type: "device-status"),
        event("null"),
        event("[1,2]"),
        event("{}"),
        event(#"{"sessionId":"s","runId":"r","threadId":"t","revision":1}"#),
        event(#"{"sessionId":"s","runId":"r","threadId":"t","revision":"x","blocks":[]}"#),
        event(#"{"sessionId":1,"runId":"r","threadId":"t","revision":1,"blocks":[]}"#),
        event(#"{"sess\u0069onId":"s","runId":"r","threadId":"t","revision":1,"blocks":[]}"#),
        event(#"{"sessionId":"a","sessionId":"b","runId":"r","threadId":"t","revision":1,"blocks":{}}"#),
        // snake_case keys deep inside the skipped payload, also behind an escape
        event(#"{"sessionId":"s","runId":"r","threadId":"t","revision":1,"blocks":[{"a":{"file_path":"x"}}]}"#),
        event(#"{"sessionId":"s","runId":"r","threadId":"t","revision":1,"blocks":[{"file\u005fpath":"x"}]}"#),
        event(#"{"snake_key":1}"#),
        // syntax and UTF-8 errors inside the skipped payload
        event(#"{"sessionId":"s","blocks":[1,]}"#),
        event(#"{"sessionId":"s","blocks":[1e400]}"#),
        event(#"{"sessionId":"s","blocks":[01]}"#),
        event("{\"sessionId\":\"s\",\"blocks\":[\"\u{01}\"]}"),
        event(#"{"sessionId":"s","blocks":["\ud800"]}"#),
        event(#"{"sessionId":"s","blocks":[tru]}"#),
        event(#"{"sessionId":"s","blocks":{"a" 1}}"#),
        event(#"{"sessionId":"s""#),
        event(String(repeating: "[", count: 600) + String(repeating: "]", count: 600)),
        // ambiguous envelopes: repeated payload keys (the last one wins)
        #"{"type":"event","payload":{"eventType":"chat:timeline-updated","payload":{"sessionId":"a"},"payload":\#(snapshotPayload)}}"#,
        #"{"type":"event","payload":{"eventType":"chat:timeline-updated","payload":\#(snapshotPayload),"payload":null}}"#,
        #"{"type":"event","payload":{"eventType":"chat:timeline-updated","payload":\#(snapshotPayload)},"payload":{"eventType":"x"}}"#,
        // other messages with a payload.payload object
        #"{"type":"rpc.response","payload":{"id":"1","payload":{"a":1},"result":{"ok":true}}}"#,
        #"{"type":"registered","payload":{"sessionId":"s","payload":{"x":1}}}"#,
        #"{"type":"heartbeat"}"#,
        #"{"type":"event","payload":{"payload":{"a":1}}}"#,
        #"{"type":"event","payload":{"eventType":"chat:timeline-updated","payload":{"a":1}}} x"#,
        "\u{FEFF}{}",
    ]

    @Test(arguments: frames)
    func agreesWithTheFullPath(_ text: String) {
        #expect(inbound(text) == reference(text))
    }

    @Test func aSnapshotPayloadStaysRawAndDecodesToTheSameSnapshot() throws {
        guard case .event(let e) = try RelayMessage(decodingInbound: event(snapshotPayload)) else {
            Issue.record("not an event")
            return
        }
        let raw = try #require(e.rawPayload)
        #expect(raw.bytes == Array(snapshotPayload.utf8))
        let fromRaw = try TimelineUpdated(raw: raw, path: "$.payload.payload")
        #expect(fromRaw.rawBlocks != nil)
        #expect(fromRaw == (try TimelineUpdated(json: JSONValue(parsing: snapshotPayload), path: "$.payload.payload")))
        #expect(fromRaw.revision == 7 && fromRaw.sessionId == "s1")
    }

    @Test func controlEventPayloadsAreBuilt() throws {
        guard case .event(let e) = try RelayMessage(decodingInbound: event(#"{"deviceId":"d","status":"online"}"#, type: "device-status")) else {
            Issue.record("not an event")
            return
        }
        #expect(e.rawPayload == nil)
        #expect(e.payload == ["deviceId": "d", "status": "online"])
    }

    @Test func rawMembersIndexTopLevelKeysOnly() throws {
        let text = event(#"{"a":{"bc":1},"b":"x","c":[1],"b":"y","d":null}"#, type: "chat:timeline-updated")
        guard case .event(let e) = try RelayMessage(decodingInbound: text) else {
            Issue.record("not an event")
            return
        }
        let m = try #require(e.rawPayload?.members())
        #expect(m.map(\.key) == ["a", "b", "c", "b", "d"])
        #expect(m.last(named: "b")?.built == "y")
        #expect(m.last(named: "a")?.built == nil)
        #expect(m.last(named: "a")?.raw.bytes == Array(#"{"bc":1}"#.utf8))
        #expect(m.last(named: "c")?.value == [1])
        #expect(m.last(named: "d")?.built == .null)
        #expect(m.last(named: "z") == nil)
        #expect((try RawJSON(validating: Array("[1]".utf8))).members() == nil)
        #expect((try RawJSON(validating: Array(#"{"\u0061":1}"#.utf8))).members()?.last(named: "a")?.value == 1)
    }
}

/// An event in the relay's own compact, canonically ordered shape (the one read directly).
private func canonicalEvent(_ payload: String, type: String = "chat:timeline-updated", eventId: String = "12",
                            target: String = "null", timestamp: String = #""2026-01-15T12:00:04.104Z""#) -> String {
    #"{"eventId":\#(eventId),"payload":{"eventType":"\#(type)","payload":\#(payload)},"sourceDeviceId":"9a7e2c1d","targetDeviceId":\#(target),"timestamp":\#(timestamp),"type":"event"}"#
}

/// Events in the relay's canonical shape are read without a tree; results, errors and the raw payload equal
/// both the full path and the deferring parse (which a leading space forces).
@Suite struct CanonicalEventDecodingTests {
    static let frames: [String] = InboundDecodingTests.frames.compactMap { frame -> String? in
        // every payload of the general list, in the canonical envelope
        let prefix = #"{"type":"event","eventId":12,"sourceDeviceId":"d","targetDeviceId":null,"timestamp":"t","payload":{"eventType":""#
        guard frame.hasPrefix(prefix), frame.hasSuffix("}}") else { return nil }
        let rest = frame.dropFirst(prefix.count)
        guard let quote = rest.firstIndex(of: "\"") else { return nil }
        let type = String(rest[..<quote])
        let payloadStart = rest.index(quote, offsetBy: #"","payload":"#.count)
        return canonicalEvent(String(rest[payloadStart..<rest.index(rest.endIndex, offsetBy: -2)]), type: type)
    } + [
        canonicalEvent(snapshotPayload, target: #""desk-1""#),
        canonicalEvent(snapshotPayload, eventId: "0"),
        canonicalEvent(snapshotPayload, eventId: "999999999999999999"),
        canonicalEvent(snapshotPayload, eventId: "9999999999999999999"),
        canonicalEvent(snapshotPayload, eventId: "-3"),
        canonicalEvent(snapshotPayload, eventId: "01"),
        canonicalEvent(snapshotPayload, eventId: "1.0"),
        canonicalEvent(snapshotPayload, eventId: "1e2"),
        canonicalEvent(snapshotPayload, eventId: "\"7\""),
        canonicalEvent(snapshotPayload, eventId: "null"),
        canonicalEvent(snapshotPayload, target: "7"),
        canonicalEvent(snapshotPayload, target: #""esc\"aped""#),
        canonicalEvent(snapshotPayload, timestamp: "null"),
        canonicalEvent(snapshotPayload, timestamp: #""t\u0031""#),
        canonicalEvent(snapshotPayload, timestamp: #""été""#),
        canonicalEvent(snapshotPayload, type: "chat:timeline\\u002dupdated"),
        canonicalEvent(#"{"jobId":"j","sessionId":"s","status":"queued"}"#, type: "job:created"),
        canonicalEvent(#"{"job_id":"j"}"#, type: "job:created"),
        canonicalEvent(snapshotPayload).replacing(#""type":"event"}"#, with: #""type":"event","x_y":1}"#),
        canonicalEvent(snapshotPayload).replacing(#""type":"event"}"#, with: #""type":"event","extra":1}"#),
        canonicalEvent(snapshotPayload).replacing(#""type":"event"}"#, with: #""type":"event"} "#),
        canonicalEvent(snapshotPayload).replacing(#""type":"event"}"#, with: #""type":"event"}}"#),
        canonicalEvent(snapshotPayload).replacing(#""type":"event"}"#, with: #""type":"eventx"}"#),
        canonicalEvent("[1]"),
        canonicalEvent("null"),
        canonicalEvent(String(repeating: "{\"a\":", count: 600) + "1" + String(repeating: "}", count: 600)),
        canonicalEvent(String(repeating: "{\"a\":", count: 509) + "1" + String(repeating: "}", count: 509)),
        canonicalEvent(String(repeating: "{\"a\":", count: 510) + "1" + String(repeating: "}", count: 510)),
        canonicalEvent(String(repeating: "{\"a\":", count: 511) + "1" + String(repeating: "}", count: 511)),
        String(canonicalEvent(snapshotPayload).dropLast(3)),
    ]

    @Test func theListCoversTheGeneralPayloads() {
        #expect(Self.frames.count > 40)
    }

    @Test(arguments: frames)
    func agreesWithTheFullAndTheDeferringPaths(_ text: String) {
        let direct = inbound(text)
        #expect(direct == reference(text))
        // The leading space moves error offsets by one, so only results are compared with the deferring parse.
        let deferring = inbound(" " + text)
        if case .success = direct { #expect(direct == deferring) }
        if case .success(.event(let a)) = direct, case .success(.event(let b)) = deferring {
            #expect(a.rawPayload?.bytes == b.rawPayload?.bytes)
            #expect(a.rawPayload?.members()?.map(\.key) == b.rawPayload?.members()?.map(\.key))
            #expect(a.rawPayload?.members()?.map(\.built) == b.rawPayload?.members()?.map(\.built))
        }
    }

    @Test func aCanonicalSnapshotKeepsItsPayloadRaw() throws {
        guard case .event(let e) = try RelayMessage(decodingInbound: canonicalEvent(snapshotPayload, target: #""desk""#)) else {
            Issue.record("not an event")
            return
        }
        #expect(e.rawPayload?.bytes == Array(snapshotPayload.utf8))
        #expect(e.eventId == 12 && e.eventType == "chat:timeline-updated" && e.sourceDeviceId == "9a7e2c1d")
        #expect(e.targetDeviceId == "desk" && e.timestamp == "2026-01-15T12:00:04.104Z")
    }
}

/// `TimelineUpdated(raw:)` gives what `TimelineUpdated(json:)` gives on the same bytes: fields, blocks and errors.
@Suite struct TimelineUpdatedRawTests {
    static let payloads: [String] = [
        snapshotPayload,
        #"{"blocks":[],"revision":3,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"revision":3,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":null,"revision":3,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":"x","revision":3,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":3.0,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":3.5,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":"3","runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":null,"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"runId":"r","sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":3,"runId":null,"sessionId":"s","threadId":"t"}"#,
        #"{"blocks":[1],"revision":3,"runId":"r","sessionId":{"a":1},"threadId":"t"}"#,
        #"{"blocks":[1],"revision":3,"runId":"r","sessionId":"s","threadId":7}"#,
        #"{"blocks":[1],"revision":3,"runId":"r","sessionId":"s"}"#,
        #"{"sessionId":"a","sessionId":"b","runId":"r","threadId":"t","revision":1,"blocks":{}}"#,
        #"{"sessionId":"a","sessionId":1,"runId":"r","threadId":"t","revision":1,"blocks":{}}"#,
        #"{"sessionId":1,"sessionId":"b","runId":"r","threadId":"t","revision":1,"blocks":[1],"blocks":[2]}"#,
        #"{"sessionId":"s\u0031","runId":"r","threadId":"t","revision":-9223372036854775808,"blocks":[{"k":[true]}]}"#,
        #"{"sessionId":"s","runId":"r","threadId":"t","revision":1e2,"blocks":[]}"#,
        "[1,2]",
        "{}",
    ]

    @Test(arguments: payloads)
    func rawAgreesWithJSON(_ text: String) throws {
        let raw = try RawJSON(validating: Array(text.utf8))
        let viaRaw = Result { () throws(MessageDecodeError) -> TimelineUpdated in try TimelineUpdated(raw: raw, path: "$.p") }
        let viaJSON = Result { () throws(MessageDecodeError) -> TimelineUpdated in
            try TimelineUpdated(json: raw.value, path: "$.p")
        }
        #expect(viaRaw == viaJSON)
        if case .success(let a) = viaRaw, case .success(let b) = viaJSON {
            #expect(a.key == b.key && a.revision == b.revision && a.blocks == b.blocks)
        }
    }
}

/// An rpc.response in the relay's canonical result shape (the one read directly).
private func canonicalResponse(id: String = #""14452A08-5697-4892-A7A3-66C27B1C2E64""#, isFinal: String = "true",
                               result: String = #"{"sessions":[{"id":"s-1","name":"Fix tests"}]}"#,
                               traceparent: String = #""00-7336239ae2487ab222a7fd6f1223c124-c08c66e5daabcdb0-01""#) -> String {
    #"{"payload":{"id":\#(id),"isFinal":\#(isFinal),"result":\#(result),"traceparent":\#(traceparent)},"type":"rpc.response"}"#
}

/// rpc.response frames in the relay's canonical shape are read directly; results and errors equal the full path.
@Suite struct CanonicalRpcResponseDecodingTests {
    static let frames: [String] = [
        canonicalResponse(),
        canonicalResponse(isFinal: "false"),
        canonicalResponse(isFinal: "null"),
        canonicalResponse(isFinal: "1"),
        canonicalResponse(isFinal: "truex"),
        canonicalResponse(result: "null"),
        canonicalResponse(result: "7"),
        canonicalResponse(result: #""text""#),
        canonicalResponse(result: "[]"),
        canonicalResponse(result: #"{"a":{"b":[1,2.5,"é",true,null]},"payload":{"payload":{"x":1}}}"#),
        canonicalResponse(result: #"{"file_path":"x"}"#),
        canonicalResponse(result: #"{"a":[{"b_c":1}]}"#),
        canonicalResponse(result: #"{"a":[1,]}"#),
        canonicalResponse(result: #"{"a":1,"a":2}"#),
        canonicalResponse(result: String(repeating: "[", count: 509) + String(repeating: "]", count: 509)),
        canonicalResponse(result: String(repeating: "[", count: 510) + String(repeating: "]", count: 510)),
        canonicalResponse(result: String(repeating: "[", count: 511) + String(repeating: "]", count: 511)),
        canonicalResponse(id: #""1""#),
        canonicalResponse(id: #""es\"c""#),
        canonicalResponse(id: "7"),
        canonicalResponse(id: "null"),
        canonicalResponse(traceparent: #""not-a-traceparent""#),
        canonicalResponse(traceparent: "null"),
        canonicalResponse(traceparent: #""00-7336239ae2487ab222a7fd6f1223c124-c08c66e5daabcdb0-0\u0031""#),
        canonicalResponse().replacing(#""type":"rpc.response"}"#, with: #""type":"rpc.response"} "#),
        canonicalResponse().replacing(#""type":"rpc.response"}"#, with: #""type":"rpc.response","x":1}"#),
        canonicalResponse().replacing(#""type":"rpc.response"}"#, with: #""type":"rpc.responses"}"#),
        canonicalResponse().replacing(#""isFinal""#, with: #""error":{"code":1,"message":"m"},"isFinal""#),
        String(canonicalResponse().dropLast(2)),
    ]

    @Test(arguments: frames)
    func agreesWithTheFullPath(_ text: String) {
        #expect(inbound(text) == reference(text))
    }

    @Test func theCanonicalShapeDecodesItsFields() throws {
        guard case .rpcResponse(let r) = try RelayMessage(decodingInbound: canonicalResponse(isFinal: "false")) else {
            Issue.record("not an rpc.response")
            return
        }
        #expect(r.id == "14452A08-5697-4892-A7A3-66C27B1C2E64" && r.isFinal == false && r.error == nil)
        #expect(r.result == ["sessions": [["id": "s-1", "name": "Fix tests"]]])
        #expect(r.traceparent?.header == "00-7336239ae2487ab222a7fd6f1223c124-c08c66e5daabcdb0-01")
    }
}

/// Strings are scanned eight bytes at a time up to the first byte that needs a look of its own; a byte of
/// each such kind at every offset of a word (in keys and values, in the built envelope and deep in the
/// skipped snapshot payload, and cut off at every length) gives the same results and errors as the full path.
@Suite struct WordAtATimeStringTests {
    static let specials = ["\\\"", "\\\\", "\\u005f", "\\n", "_", "é", "😀", "\u{01}", "\u{1F}", " ", "~", "\u{7F}"]

    static var frames: [String] {
        var out: [String] = []
        for special in specials {
            for offset in 0...17 {
                let text = String(repeating: "a", count: offset) + special + String(repeating: "b", count: 19 - offset)
                let key = String(repeating: "k", count: offset) + special + "K"
                for payload in [
                    #"{"sessionId":"s","runId":"r","threadId":"t","revision":1,"blocks":[{"text":"\#(text)"}]}"#,
                    #"{"sessionId":"s","runId":"r","threadId":"t","revision":1,"blocks":[{"\#(key)":1}]}"#,
                    #"{"sessionId":"\#(text)","runId":"r","threadId":"t","revision":1,"blocks":[]}"#,
                    #"{"\#(key)":"s","runId":"r","threadId":"t","revision":1,"blocks":[]}"#,
                ] {
                    out.append(canonicalEventForStrings(payload))
                    out.append(event(payload))
                }
            }
        }
        let whole = canonicalEventForStrings(#"{"sessionId":"s","runId":"r","threadId":"t","revision":1,"blocks":[{"text":"abcdefghijklmnopqrstuvwxyz"}]}"#)
        for cut in stride(from: whole.utf8.count - 60, to: whole.utf8.count, by: 1) {
            out.append(String(decoding: Array(whole.utf8.prefix(cut)), as: UTF8.self))
        }
        return out
    }

    @Test func theListIsLarge() {
        #expect(Self.frames.count > 900)
    }

    @Test func everyFrameAgreesWithTheFullPath() {
        for text in Self.frames {
            #expect(inbound(text) == reference(text), "\(text)")
        }
    }

    @Test func plainStringsParseToTheirText() throws {
        for special in ["_", "é", "😀", " ", "~", "\u{7F}"] {
            for offset in 0...17 {
                let text = String(repeating: "a", count: offset) + special + String(repeating: "b", count: 19 - offset)
                #expect(try JSONValue(parsing: #"{"\#(text)":"\#(text)"}"#) == .object([text: .string(text)]))
            }
        }
    }

    @Test func aControlByteIsReportedWhereItIs() {
        for offset in 0...17 {
            let text = "[\"" + String(repeating: "a", count: offset) + "\u{01}" + String(repeating: "b", count: 19 - offset) + "\"]"
            #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
            do { _ = try JSONValue(parsing: text) } catch { #expect(error.offset == 2 + offset) }
        }
    }
}

private func canonicalEventForStrings(_ payload: String) -> String {
    #"{"eventId":12,"payload":{"eventType":"chat:timeline-updated","payload":\#(payload)},"sourceDeviceId":"9a7e2c1d","targetDeviceId":null,"timestamp":"2026-01-15T12:00:04.104Z","type":"event"}"#
}
