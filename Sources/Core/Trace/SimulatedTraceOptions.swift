import RelayProtocol

extension TraceWriterOptions {
    /// The wall-clock start written into simulated traces (the development relay's clock origin), so the
    /// same seed writes the same bytes; every simulation (relay client and watch channel) uses it.
    public static let simulatedWallClockStart = "2026-01-15T12:00:00.000Z"

    /// Writer options for simulated traces: lossless (the simulation waits for the writer) and chunked by
    /// capture time only, with a redaction key derived from the seed: deterministic bytes.
    public static func simulated(seed: UInt64, overwrite: Bool) -> TraceWriterOptions {
        var o = TraceWriterOptions()
        o.blockWhenFull = true
        o.wallClockFlush = false
        // A simulation can be run again, so it needs no crash-safety flushes: chunks close at 1 MiB or
        // after a minute of capture time, which keeps them large and the file small.
        o.flushInterval = .seconds(60)
        o.overwrite = overwrite
        // The same run makes the same file again: a trace cut short by a write error is removed.
        o.removeIncompleteFile = true
        var rng = SeededRandom(seed: seed ^ 0x5245_4441_4354_4B59)
        o.redactionKey = rng.bytes(32)
        return o
    }
}
