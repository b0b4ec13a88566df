import COpenSSL
import RelayProtocol

extension TraceReader {
    /// The trace's identity from its header: the first 8 bytes (16 lower-case hex digits) of SHA-256 of
    /// the header record's JSON as stored. Every copy of the file has it under any name; traces whose
    /// headers differ (a recorder's random redaction key, a simulation's seed or scenario, the start
    /// time) have different ones. The `traceId` column of the commands that read many traces.
    public var identity: String { sha256Hex(headerRecord.payload, bytes: 8) }
}

/// The first `bytes` bytes of SHA-256(`data`) as lower-case hex.
func sha256Hex(_ data: [UInt8], bytes: Int) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    data.withUnsafeBufferPointer { p in _ = SHA256(p.baseAddress, p.count, &digest) }
    return hexString(digest.prefix(bytes))
}
