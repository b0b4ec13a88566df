/// The relay frame reader: how the client reads an inbound relay frame, on top of the generic JSON parser
/// (`JSONByteParser`, which knows nothing of relay frames).
///
/// It owns what is specific to relay frames: the deferral of an event's own payload (validated and
/// indexed, not built) and the canonical readers, which read a frame in exactly the bytes the relay
/// writes without a parse and give nil for anything else. `RelayMessage(decodingInbound:)` takes these
/// routes; `RelayMessage(decodingInboundReference:)` is the general route every one of them is checked
/// against (docs/ARCHITECTURE.md, "The hot paths").
enum RelayFrameReader {
    /// Parses an inbound message like `JSONValue.parsingNotingUnderscoreKeys`, except that an object at
    /// `$.payload.payload` (an event's own payload) is only validated (syntax, UTF-8, depth, `_` in its
    /// keys), not built: `.null` stands in its place in `value` and `deferred` holds its bytes and its
    /// top-level members. When the text has more than one top-level or envelope `payload` key, `ambiguous`
    /// is true and the caller must parse fully (the last key wins in a full parse).
    static func parsingDeferringEventPayload(_ text: String) throws(JSONParseError)
        -> (value: JSONValue, underscoreInKey: Bool, deferred: RawJSON?, ambiguous: Bool) {
        var text = text
        return try text.withUTF8 { buffer -> Result<(value: JSONValue, underscoreInKey: Bool, deferred: RawJSON?, ambiguous: Bool), JSONParseError> in
            var parser = JSONByteParser(buffer)
            var topPayloadKeys = 0, envelopePayloadKeys = 0
            var deferred: (range: Range<Int>, members: [ShallowMember])?
            do throws(JSONParseError) {
                // The top-level object, its `payload` (the envelope), and the envelope's `payload`: that
                // one is read shallowly. Every other value is built by the generic parser.
                let value = try parser.readDocument { p throws(JSONParseError) -> JSONValue in
                    guard p.isAt(ASCII.openBrace) else { return try p.parseValue() }
                    return try p.buildObject { p, key throws(JSONParseError) -> JSONValue in
                        guard key == "payload" else { return try p.parseValue() }
                        topPayloadKeys += 1
                        guard p.isAt(ASCII.openBrace) else { return try p.parseValue() }
                        return try p.buildObject { p, key throws(JSONParseError) -> JSONValue in
                            guard key == "payload" else { return try p.parseValue() }
                            envelopePayloadKeys += 1
                            guard p.isAt(ASCII.openBrace) else { return try p.parseValue() }
                            let start = p.index
                            let members = try p.parseShallowObject()
                            deferred = (start..<p.index, members)
                            return .null
                        }
                    }
                }
                let raw = deferred.map { d -> RawJSON in
                    let bytes = Array(UnsafeBufferPointer(rebasing: buffer[d.range]))
                    let index = d.members.map { m in
                        RawMember(key: m.key, built: m.scalar, source: bytes,
                                  range: (m.range.lowerBound - d.range.lowerBound)..<(m.range.upperBound - d.range.lowerBound))
                    }
                    return RawJSON(validated: bytes, index: index)
                }
                return .success((value, parser.underscoreInKey, raw, topPayloadKeys > 1 || envelopePayloadKeys > 1))
            } catch {
                return .failure(error)
            }
        }.get()
    }
}

/// The fields of an `event` frame read by ``RelayFrameReader/readingCanonicalEvent(_:)``.
struct CanonicalEventFields {
    var eventId: Int64
    var eventType: String
    var payload: RawJSON
    var sourceDeviceId: String
    var targetDeviceId: String?
    var timestamp: String
}

extension RelayFrameReader {
    /// Reads an `event` frame in exactly the shape the relay writes (compact, keys in canonical order):
    /// `{"eventId":<int>,"payload":{"eventType":"…","payload":{…}},"sourceDeviceId":"…","targetDeviceId":null|"…",`
    /// `"timestamp":"…","type":"event"}`, the envelope strings printable ASCII without escapes, the eventId a
    /// plain non-negative integer, and `$.payload.payload` an object validated and indexed as by
    /// ``parsingDeferringEventPayload(_:)`` (no tree built) with no `_` in any key. Anything else (other
    /// spacing or order, escapes, a `_` key, a syntax error, ...) gives nil: the caller then takes the general
    /// route, which stays the reference for results and errors.
    static func readingCanonicalEvent(_ text: String) -> CanonicalEventFields? {
        var text = text
        return text.withUTF8 { buffer -> CanonicalEventFields? in
            var parser = JSONByteParser(buffer)
            return parser.readCanonicalEvent()
        }
    }
}

extension JSONByteParser {
    /// Moves past `literal` when the input continues with it; false (index unchanged) otherwise.
    private mutating func consume(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard end - index >= n, let base = bytes.baseAddress else { return false }
        let a = UnsafeRawPointer(base + index), b = UnsafeRawPointer(literal.utf8Start)
        var k = 0
        while k < n {
            guard a.load(fromByteOffset: k, as: UInt8.self) == b.load(fromByteOffset: k, as: UInt8.self) else { return false }
            k += 1
        }
        index += n
        return true
    }

    /// A string of printable ASCII without escapes at `index`; nil for anything else.
    private mutating func plainString() -> String? {
        guard index < end, bytes[index] == ASCII.quote else { return nil }
        let start = index + 1
        var i = start
        while i < end {
            let b = bytes[i]
            if b == ASCII.quote {
                index = i + 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            }
            guard b >= 0x20 && b < 0x7F && b != ASCII.backslash else { return nil }
            i += 1
        }
        return nil
    }

    /// A non-negative integer of at most 18 digits without fraction or exponent at `index`; nil otherwise.
    private mutating func plainInteger() -> Int64? {
        var i = index
        var v: Int64 = 0
        while i < end && bytes[i] >= ASCII.zero && bytes[i] <= ASCII.nine {
            guard i - index < 18 else { return nil }
            v = v * 10 + Int64(bytes[i] - ASCII.zero)
            i += 1
        }
        let n = i - index
        guard n > 0, n == 1 || bytes[index] != ASCII.zero else { return nil }
        if i < end && (bytes[i] == ASCII.dot || bytes[i] == ASCII.lowerE || bytes[i] == ASCII.upperE) { return nil }
        index = i
        return v
    }

    /// See ``RelayFrameReader/readingCanonicalEvent(_:)``.
    mutating func readCanonicalEvent() -> CanonicalEventFields? {
        guard consume(#"{"eventId":"#), let eventId = plainInteger(),
              consume(#","payload":{"eventType":"#), let eventType = plainString(),
              consume(#","payload":"#), index < end, bytes[index] == ASCII.openBrace else { return nil }
        let start = index
        depth = 2  // the object's depth in the whole message, as in the general parse
        guard let members = try? parseShallowObject(), !underscoreInKey else { return nil }
        let range = start..<index
        guard consume(#"},"sourceDeviceId":"#), let source = plainString(), consume(#","targetDeviceId":"#) else {
            return nil
        }
        var target: String?
        if !consume("null") {
            guard let t = plainString() else { return nil }
            target = t
        }
        guard consume(#","timestamp":"#), let timestamp = plainString(), consume(#","type":"event"}"#), index == end else {
            return nil
        }
        let raw = Array(UnsafeBufferPointer(rebasing: bytes[range]))
        let index = members.map { m in
            RawMember(key: m.key, built: m.scalar, source: raw,
                      range: (m.range.lowerBound - range.lowerBound)..<(m.range.upperBound - range.lowerBound))
        }
        return CanonicalEventFields(eventId: eventId, eventType: eventType, payload: RawJSON(validated: raw, index: index),
                                    sourceDeviceId: source, targetDeviceId: target, timestamp: timestamp)
    }
}

/// The fields of an `rpc.response` frame read by ``RelayFrameReader/readingCanonicalRpcResponse(_:)``.
struct CanonicalRpcResponseFields {
    var id: String
    var isFinal: Bool
    var result: JSONValue
    var traceparent: String
}

extension RelayFrameReader {
    /// Reads an `rpc.response` frame in exactly the shape the relay writes for a result:
    /// `{"payload":{"id":"…","isFinal":true|false,"result":<any value>,"traceparent":"…"},"type":"rpc.response"}`
    /// (compact, keys in canonical order, `id` and `traceparent` printable ASCII without escapes), the result
    /// parsed with no `_` in any key. Anything else gives nil: the caller takes the general route, which stays
    /// the reference for results and errors.
    static func readingCanonicalRpcResponse(_ text: String) -> CanonicalRpcResponseFields? {
        var text = text
        return text.withUTF8 { buffer -> CanonicalRpcResponseFields? in
            var parser = JSONByteParser(buffer)
            return parser.readCanonicalRpcResponse()
        }
    }
}

extension JSONByteParser {
    /// See ``RelayFrameReader/readingCanonicalRpcResponse(_:)``.
    mutating func readCanonicalRpcResponse() -> CanonicalRpcResponseFields? {
        guard consume(#"{"payload":{"id":"#), let id = plainString(), consume(#","isFinal":"#) else { return nil }
        let isFinal: Bool
        if consume("true") {
            isFinal = true
        } else if consume("false") {
            isFinal = false
        } else {
            return nil
        }
        guard consume(#","result":"#) else { return nil }
        depth = 2  // the value's depth in the whole message, as in the general parse
        guard let result = try? parseValue(), !underscoreInKey,
              consume(#","traceparent":"#), let traceparent = plainString(),
              consume(#"},"type":"rpc.response"}"#), index == end else { return nil }
        return CanonicalRpcResponseFields(id: id, isFinal: isFinal, result: result, traceparent: traceparent)
    }
}
