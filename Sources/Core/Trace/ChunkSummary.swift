#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one chunk holds, without its records: the combinations of record kind, flags and channel with
/// their counts, the transport generations, and the relay message types of its text frames. The writer
/// puts it in a summary frame (tag `RTCS`) right after the chunk, so a reader can tell that a chunk has
/// no record a filter wants without decompressing it (docs/TRACE_FORMAT.md §3.7).
///
/// A summary is a pure function of the chunk's records (``Builder``): a reader that decodes the chunk
/// computes it again and requires it to be equal, so a summary that does not describe its chunk is
/// reported as damage, never trusted silently.
public struct TraceChunkSummary: Sendable, Hashable {
    /// Records with one combination of kind, flags and channel.
    public struct Entry: Sendable, Hashable, Comparable {
        /// The record kind's on-disk value (any value: kinds are an open set).
        public var kind: UInt16
        /// The record flags byte (bit 0 generation present, bit 1 direction present, bit 2 outbound).
        public var flags: UInt8
        /// The channel's on-disk value.
        public var channel: UInt8
        /// How many records of the chunk have this combination.
        public var count: UInt32

        /// Creates an entry.
        public init(kind: UInt16, flags: UInt8, channel: UInt8, count: UInt32) {
            self.kind = kind
            self.flags = flags
            self.channel = channel
            self.count = count
        }

        /// The direction these records carry, if any.
        public var direction: FrameDirection? {
            flags & 2 == 0 ? nil : (flags & 4 != 0 ? .outbound : .inbound)
        }

        /// Ordered by kind, flags, channel.
        public static func < (a: Entry, b: Entry) -> Bool {
            (a.kind, a.flags, a.channel) < (b.kind, b.flags, b.channel)
        }
    }

    /// The longest message type a summary lists (longer ones count as untyped).
    public static let maxTypeLength = 255
    /// The most message types a summary lists (text frames of further types count as untyped).
    public static let maxTypes = 255

    /// The kind/flags/channel combinations present, ascending, with their counts.
    public var entries: [Entry]
    /// The distinct transport generations of the chunk's records, ascending.
    public var generations: [UInt64]
    /// The distinct relay message types (UTF-8 bytes of `$.type`) of its `frameText` records that
    /// ``messageType(ofText:)`` can tell, ascending by bytes.
    public var messageTypes: [[UInt8]]
    /// How many `frameText` records have a type the summary does not list (``messageType(ofText:)``
    /// could not tell it without a parse, or it is over the limits): when 0, `messageTypes` is exhaustive.
    public var untypedTextFrames: UInt32

    /// Creates a summary.
    public init(entries: [Entry], generations: [UInt64], messageTypes: [[UInt8]], untypedTextFrames: UInt32) {
        self.entries = entries
        self.generations = generations
        self.messageTypes = messageTypes
        self.untypedTextFrames = untypedTextFrames
    }

    /// How many records the summary counts.
    public var recordCount: UInt64 { entries.reduce(0) { $0 + UInt64($1.count) } }

    /// The message types as strings.
    public var messageTypeNames: [String] { messageTypes.map { String(decoding: $0, as: UTF8.self) } }

    /// Accumulates the summary of a chunk, one record at a time (the writer's and the reader's way).
    public struct Builder: Sendable {
        private var entries: [Entry] = []
        private var generations: [UInt64] = []
        private var types: [[UInt8]] = []
        private var untyped: UInt32 = 0
        private var last = -1

        /// An empty builder.
        public init() {}

        /// Whether no record was added.
        public var isEmpty: Bool { entries.isEmpty }

        /// Adds one record, given its header fields and payload.
        @inline(__always)
        public mutating func add(kind: UInt16, flags: UInt8, channel: UInt8, generation: UInt64?, payload: UnsafeRawBufferPointer) {
            if last >= 0, entries[last].kind == kind, entries[last].flags == flags, entries[last].channel == channel {
                entries[last].count &+= 1
            } else {
                addEntry(kind: kind, flags: flags, channel: channel)
            }
            if let g = generation { addGeneration(g) }
            if kind == 4 {  // frameText
                if let t = TraceChunkSummary.messageType(ofText: payload) {
                    addType(t)
                } else {
                    untyped &+= 1
                }
            }
        }

        /// Adds `record`.
        public mutating func add(_ r: TraceRecord) {
            var flags: UInt8 = r.generation != nil ? 1 : 0
            if let d = r.direction { flags |= d == .outbound ? 6 : 2 }
            r.payload.withUnsafeBytes {
                add(kind: r.kind.rawValue, flags: flags, channel: r.channel.rawValue, generation: r.generation, payload: $0)
            }
        }

        private mutating func addEntry(kind: UInt16, flags: UInt8, channel: UInt8) {
            for i in entries.indices where entries[i].kind == kind && entries[i].flags == flags && entries[i].channel == channel {
                entries[i].count &+= 1
                last = i
                return
            }
            entries.append(Entry(kind: kind, flags: flags, channel: channel, count: 1))
            last = entries.count - 1
        }

        private mutating func addGeneration(_ g: UInt64) {
            if generations.last == g { return }
            if !generations.contains(g) { generations.append(g) }
        }

        private mutating func addType(_ t: UnsafeRawBufferPointer) {
            for known in types where known.count == t.count && known.withUnsafeBytes({ $0.elementsEqual(t) }) {
                return
            }
            if types.count >= TraceChunkSummary.maxTypes {
                untyped &+= 1
                return
            }
            types.append(Array(t))
        }

        /// The summary of the records added so far.
        public var summary: TraceChunkSummary {
            TraceChunkSummary(
                entries: entries.sorted(), generations: generations.sorted(),
                messageTypes: types.sorted { $0.lexicographicallyPrecedes($1) }, untypedTextFrames: untyped)
        }

        /// Starts again with no record.
        public mutating func reset() {
            entries.removeAll(keepingCapacity: true)
            generations.removeAll(keepingCapacity: true)
            types.removeAll(keepingCapacity: true)
            untyped = 0
            last = -1
        }
    }

    /// The relay message type of a `frameText` payload when its bytes alone prove it, else nil (the
    /// frame then counts as untyped). The rule (docs/TRACE_FORMAT.md §3.7): the payload holds no `\`, the
    /// six bytes `"type"` occur exactly once, and either the payload starts with `{"type":"` or it ends
    /// with `"type":"...."}` right after a `{` or `,`; the type is the bytes between the quotes (1 to 255
    /// bytes, no `"`). For valid JSON that is the value of the top-level `type` member (no escape can hide a
    /// second `type` key and the final `}` closes the top-level object); invalid JSON has no type at all,
    /// so a listed type that the record turns out not to have only makes the summary less useful, never
    /// wrong about what is absent.
    public static func messageType(ofText p: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let n = p.count
        guard n >= 12, let base = p.baseAddress else { return nil }
        if memchr(base, 0x5C, n) != nil { return nil }  // a backslash: an escape could spell anything
        let key: StaticString = #""type""#
        let k = UnsafeRawBufferPointer(start: key.utf8Start, count: 6)
        guard let at = ByteSearch.firstIndex(of: k, in: p) else { return nil }
        if ByteSearch.contains(k, in: UnsafeRawBufferPointer(rebasing: p[(at + 6)...])) { return nil }  // twice: could be a duplicate key
        func byte(_ i: Int) -> UInt8 { p[i] }
        // `"type":"` at `at`.
        guard at + 8 < n, byte(at + 6) == 0x3A, byte(at + 7) == 0x22 else { return nil }
        let start = at + 8
        guard let close = memchr(base + start, 0x22, n - start) else { return nil }
        let end = base.distance(to: UnsafeRawPointer(close))
        let length = end - start
        guard length >= 1, length <= maxTypeLength else { return nil }
        let first = at == 1 && byte(0) == 0x7B && end + 1 < n && (byte(end + 1) == 0x2C || byte(end + 1) == 0x7D)
        let last = end + 2 == n && byte(end + 1) == 0x7D && at >= 1 && (byte(at - 1) == 0x2C || byte(at - 1) == 0x7B)
        guard first || last else { return nil }
        let value = UnsafeRawBufferPointer(rebasing: p[start..<end])
        guard validUTF8(value) else { return nil }
        return value
    }

    private static func validUTF8(_ b: UnsafeRawBufferPointer) -> Bool {
        var ascii = true
        for x in b where x >= 0x80 { ascii = false; break }
        if ascii { return true }
        var it = b.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    // MARK: what a filter can learn

    /// Whether some record of the chunk has a kind whose on-disk value satisfies `kind`.
    public func hasKind(where kind: (UInt16) -> Bool) -> Bool { entries.contains { kind($0.kind) } }

    /// Whether some record has this channel.
    public func hasChannel(_ channel: UInt8) -> Bool { entries.contains { $0.channel == channel } }

    /// Whether some record carries `direction`.
    public func hasDirection(_ direction: FrameDirection) -> Bool { entries.contains { $0.direction == direction } }

    /// Whether some `frameText` record may have a message type for which `matches` holds: false only
    /// when every text frame's type is listed and none of the listed ones matches.
    public func mayHaveMessageType(where matches: (String) -> Bool) -> Bool {
        guard entries.contains(where: { $0.kind == 4 }) else { return false }
        if untypedTextFrames > 0 { return true }
        return messageTypes.contains { matches(String(decoding: $0, as: UTF8.self)) }
    }
}

extension FrameCodec {
    /// The summary frame of chunk `sequence` (whose zstd frame has CRC-32C `frameCRC`), appended to `out`.
    static func appendSummaryFrame(_ s: TraceChunkSummary, sequence: UInt32, frameCRC: UInt32, to out: inout [UInt8]) {
        let start = out.count
        let content = summaryContentSize(s)
        beginFrame(&out, tag: TraceFormat.tagSummary, contentSize: content)
        out.appendLE(sequence)
        out.appendLE(frameCRC)
        out.appendLE(UInt16(s.entries.count))
        out.appendLE(UInt16(s.messageTypes.count))
        out.appendLE(UInt32(s.generations.count))
        out.appendLE(s.untypedTextFrames)
        for e in s.entries {
            out.appendLE(e.kind)
            out.append(e.flags)
            out.append(e.channel)
            out.appendLE(e.count)
        }
        for g in s.generations { out.appendLE(g) }
        for t in s.messageTypes {
            out.append(UInt8(t.count))
            out.append(contentsOf: t)
        }
        out.appendLE(CRC32C.checksum(out, (start + 8)..<out.count))
    }

    /// The content size (after the 8 frame bytes) of the summary frame of `s`.
    static func summaryContentSize(_ s: TraceChunkSummary) -> Int {
        24 + 8 * s.entries.count + 8 * s.generations.count + s.messageTypes.reduce(0) { $0 + 1 + $1.count } + 4
    }

    /// Decodes a whole summary frame (`b` starts at its magic) found at `offset`: its chunk sequence number,
    /// the CRC-32C of that chunk's zstd frame, and the summary. Throws on a CRC mismatch or a layout that
    /// does not add up.
    static func decodeSummaryFrame(_ b: [UInt8], offset: UInt64) throws(TraceError) -> (sequence: UInt32, frameCRC: UInt32, summary: TraceChunkSummary) {
        guard b.count >= 36, b.u32(at: 0) == TraceFormat.skippableMagic, b.u32(at: 8) == TraceFormat.tagSummary,
            let size = b.u32(at: 4), Int(size) == b.count - 8
        else { throw TraceError(.corrupt, offset: offset, "expected a chunk summary frame (tag RTCS) here; the file is damaged") }
        guard let crc = b.u32(at: b.count - 4), crc == CRC32C.checksum(b, 8..<(b.count - 4)) else {
            throw TraceError(.checksumMismatch, offset: offset, "chunk summary CRC-32C mismatch; the summary is damaged")
        }
        let sequence = b.u32(at: 12) ?? 0
        let frameCRC = b.u32(at: 16) ?? 0
        let e = Int(b.u16(at: 20) ?? 0)
        let m = Int(b.u16(at: 22) ?? 0)
        let g = Int(b.u32(at: 24) ?? 0)
        let untyped = b.u32(at: 28) ?? 0
        let end = b.count - 4
        var p = 32
        guard e <= (end - p) / 8 else { throw TraceError(.corrupt, offset: offset, "chunk summary lists \(e) entries, more than its frame holds") }
        var entries = [TraceChunkSummary.Entry]()
        entries.reserveCapacity(e)
        for _ in 0..<e {
            entries.append(.init(kind: b.u16(at: p) ?? 0, flags: b[p + 2], channel: b[p + 3], count: b.u32(at: p + 4) ?? 0))
            p += 8
        }
        guard g <= (end - p) / 8 else { throw TraceError(.corrupt, offset: offset, "chunk summary lists \(g) generations, more than its frame holds") }
        var gens = [UInt64]()
        gens.reserveCapacity(g)
        for _ in 0..<g {
            gens.append(b.u64(at: p) ?? 0)
            p += 8
        }
        var types = [[UInt8]]()
        types.reserveCapacity(m)
        for i in 0..<m {
            guard p < end, p + 1 + Int(b[p]) <= end else {
                throw TraceError(.corrupt, offset: offset, "chunk summary message type \(i) runs past the end of its frame")
            }
            let n = Int(b[p])
            types.append(Array(b[(p + 1)..<(p + 1 + n)]))
            p += 1 + n
        }
        guard p == end else { throw TraceError(.corrupt, offset: offset, "chunk summary frame has \(end - p) bytes after its last member") }
        return (sequence, frameCRC, TraceChunkSummary(entries: entries, generations: gens, messageTypes: types, untypedTextFrames: untyped))
    }
}
