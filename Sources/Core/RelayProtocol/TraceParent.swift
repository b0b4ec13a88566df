/// Why a W3C `traceparent` was rejected.
public struct TraceParentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The character offset in the header where the problem is (0 for a wrong total length).
    public let offset: Int
    /// What is wrong, in words.
    public let message: String

    /// Creates an error at `offset`.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// `invalid traceparent at character <offset>: <message>`.
    public var description: String {
        "invalid traceparent at character \(offset): \(message); expected 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lower case"
    }
}

/// A W3C Trace Context `traceparent` (version 00): `00-<trace id>-<parent id>-<flags>`.
///
/// Every RPC request of protocol 1.6 carries one, and a response whose trace ID differs from its
/// request's is rejected (SPEC A8). Parsing is strict: only version `00` is accepted (a future version's
/// extra fields are not understood, and `ff` is forbidden by the spec), exactly 55 characters, lower-case
/// hex only, and neither ID may be all zeros.
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    /// 32 lower-case hex characters, not all zeros.
    public let traceId: String
    /// 16 lower-case hex characters, not all zeros.
    public let parentId: String
    /// The trace flags; bit 0 is "sampled".
    public let flags: UInt8

    /// The length of a version-00 header.
    public static let headerLength = 55

    /// Parses a header such as `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
    public init(parsing header: String) throws(TraceParentError) {
        let b = Array(header.utf8)
        guard b.count == TraceParent.headerLength else {
            throw TraceParentError(offset: 0, message: "length is \(b.count) bytes, not \(TraceParent.headerLength)")
        }
        for dash in [2, 35, 52] where b[dash] != UInt8(ascii: "-") {
            throw TraceParentError(offset: dash, message: "expected '-' separator")
        }
        let version = try TraceParent.hexValue(b, 0, 2)
        guard version == 0 else {
            throw TraceParentError(offset: 0, message: "unsupported version \(String(decoding: b[0..<2], as: UTF8.self)); only 00 is accepted")
        }
        _ = try TraceParent.hexValue(b, 3, 32)
        _ = try TraceParent.hexValue(b, 36, 16)
        let flags = try TraceParent.hexValue(b, 53, 2)
        let trace = String(decoding: b[3..<35], as: UTF8.self)
        let parent = String(decoding: b[36..<52], as: UTF8.self)
        try self.init(traceId: trace, parentId: parent, flags: UInt8(flags))
    }

    /// Creates a traceparent from its parts, validating them.
    public init(traceId: String, parentId: String, flags: UInt8 = 1) throws(TraceParentError) {
        let t = Array(traceId.utf8)
        let p = Array(parentId.utf8)
        guard t.count == 32 else { throw TraceParentError(offset: 3, message: "trace id has \(t.count) characters, not 32") }
        guard p.count == 16 else { throw TraceParentError(offset: 36, message: "parent id has \(p.count) characters, not 16") }
        _ = try TraceParent.hexValue(t, 0, 32, reportAt: 3)
        _ = try TraceParent.hexValue(p, 0, 16, reportAt: 36)
        guard t.contains(where: { $0 != UInt8(ascii: "0") }) else {
            throw TraceParentError(offset: 3, message: "trace id is all zeros, which W3C forbids")
        }
        guard p.contains(where: { $0 != UInt8(ascii: "0") }) else {
            throw TraceParentError(offset: 36, message: "parent id is all zeros, which W3C forbids")
        }
        self.traceId = traceId
        self.parentId = parentId
        self.flags = flags
    }

    private init(unchecked traceId: String, parentId: String, flags: UInt8) {
        self.traceId = traceId
        self.parentId = parentId
        self.flags = flags
    }

    /// A fresh traceparent from `rng` (trace and parent IDs both random, never all zeros).
    public static func random(using rng: inout SeededRandom, sampled: Bool = true) -> TraceParent {
        TraceParent(unchecked: nonZeroHex(&rng, bytes: 16), parentId: nonZeroHex(&rng, bytes: 8), flags: sampled ? 1 : 0)
    }

    /// The same trace with a fresh parent (span) ID from `rng`.
    public func child(using rng: inout SeededRandom) -> TraceParent {
        TraceParent(unchecked: traceId, parentId: TraceParent.nonZeroHex(&rng, bytes: 8), flags: flags)
    }

    /// Whether the sampled flag (bit 0) is set.
    public var isSampled: Bool { flags & 1 == 1 }

    /// The header value, `00-<trace>-<parent>-<flags as 2 hex>`.
    public var header: String {
        var s = "00-"
        s.reserveCapacity(3 + traceId.utf8.count + 1 + parentId.utf8.count + 3)
        s += traceId
        s += "-"
        s += parentId
        s += "-"
        s += hexString(CollectionOfOne(flags))
        return s
    }

    /// The header value.
    public var description: String { header }

    private static func nonZeroHex(_ rng: inout SeededRandom, bytes count: Int) -> String {
        while true {
            let b = rng.bytes(count)
            if b.contains(where: { $0 != 0 }) { return hexString(b) }
        }
    }

    /// The value of `count` lower-case hex digits at `start`; errors name `reportAt + position`.
    private static func hexValue(_ b: [UInt8], _ start: Int, _ count: Int, reportAt: Int = 0) throws(TraceParentError) -> UInt64 {
        var v: UInt64 = 0
        for i in start..<(start + count) {
            let c = b[i]
            guard let d = hexDigitValue(c) else { throw TraceParentError(offset: reportAt + i, message: "not a hex digit") }
            guard !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(c) else {
                throw TraceParentError(offset: reportAt + i, message: "upper-case hex digit; traceparent must be lower case")
            }
            v = v &<< 4 | UInt64(d)
        }
        return v
    }
}
