public import RelayProtocol

/// The records of one decoded and checked chunk, read in place from its decompressed bytes: nothing is
/// copied until a record is asked for with ``record(at:)``. Valid only inside the closure that receives
/// it (its bytes belong to the decoder's buffer).
public struct TraceChunkView {
    /// The chunk's decompressed bytes (the records back to back, §4).
    public let bytes: UnsafeRawBufferPointer
    /// Where each record starts in `bytes`.
    let starts: [Int]

    init(bytes: UnsafeRawBufferPointer, starts: [Int]) {
        self.bytes = bytes
        self.starts = starts
    }

    /// How many records the chunk holds.
    public var count: Int { starts.count }

    /// The record at position `i` (0..<count) of the chunk, in place.
    @inline(__always)
    public subscript(i: Int) -> TraceRecordView {
        let at = starts[i]
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)))
        return TraceRecordView(
            kindValue: UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt16.self)),
            flags: bytes[at + 2], channelValue: bytes[at + 3],
            time: Moment(nanoseconds: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: Int64.self))),
            generationValue: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)),
            payload: UnsafeRawBufferPointer(rebasing: bytes[(at + TraceFormat.recordHeaderSize)..<(at + TraceFormat.recordHeaderSize + length)]))
    }

    /// The record at position `i`, with its payload copied out.
    public func record(at i: Int) -> TraceRecord { self[i].record }

    /// Every record from position `first` on, copied out.
    func records(from first: Int = 0) -> [TraceRecord] {
        var out = [TraceRecord]()
        out.reserveCapacity(starts.count - first)
        for i in first..<starts.count { out.append(self[i].record) }
        return out
    }
}

/// One record of a ``TraceChunkView``, in place: its header fields and its payload's bytes.
public struct TraceRecordView {
    /// The kind's on-disk value.
    public let kindValue: UInt16
    /// The flags byte (bit 0 generation present, bit 1 direction present, bit 2 outbound).
    public let flags: UInt8
    /// The channel's on-disk value.
    public let channelValue: UInt8
    /// The record's time.
    public let time: Moment
    /// The generation field (meaningful when bit 0 of `flags` is set).
    public let generationValue: UInt64
    /// The payload's bytes (valid as long as the view).
    public let payload: UnsafeRawBufferPointer

    /// The kind.
    public var kind: RecordKind { RecordKind(rawValue: kindValue) }
    /// The channel.
    public var channel: TraceChannel { TraceChannel(rawValue: channelValue) }
    /// The transport generation, when present.
    public var generation: UInt64? { flags & 1 != 0 ? generationValue : nil }
    /// The direction, when present.
    public var direction: FrameDirection? { flags & 2 != 0 ? (flags & 4 != 0 ? .outbound : .inbound) : nil }

    /// The record, its payload copied.
    public var record: TraceRecord {
        TraceRecord(kind: kind, time: time, channel: channel, generation: generation, direction: direction, payload: [UInt8](payload))
    }
}
