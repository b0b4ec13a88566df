/// Every number of SPEC.md Part C that the WatchLink machines use, in one place, each with its rule.
///
/// Tests state the SPEC's values literally (not through these names), so changing a constant here turns
/// the test of its rule red.
public enum WatchLinkConstants {
    /// C7: when the acknowledgement has not moved for this long, the watch resends the one command it names.
    public static let stalledAckTimeout: Duration = .seconds(5)
    /// C9: the phone sends a full snapshot as a heartbeat this often (and at every phase change).
    public static let snapshotHeartbeatInterval: Duration = .seconds(15)
    /// C13: the ActivityKit data budget for static attributes plus dynamic content state together, in bytes.
    public static let liveActivityBudgetBytes = 4096

    /// C8/C10: the storage key of the watch's command-sequence floor (the last number it ever spent).
    public static let commandSequenceStorageKey = "watchlink.commandSequence.floor"
    /// C10: the storage key of the phone's snapshot-revision floor (its own key, never the command's).
    public static let snapshotRevisionStorageKey = "watchlink.snapshotRevision.floor"

    /// C5 (bounded allocation): the phone buffers at most this many early commands; a command further
    /// ahead of the acknowledgement than this is dropped unbuffered and arrives again by resend.
    public static let receiveWindow: UInt64 = 1024
    /// C14 (bounded allocation): the watch holds at most this many unacknowledged commands; a tap beyond
    /// it is refused and not confirmed.
    public static let maxQueuedCommands = 10_000
    /// C8: the phone remembers this many retired incarnation tokens, so a late command from an earlier
    /// launch is discarded instead of being taken for a new incarnation.
    public static let retiredIncarnationMemory = 64
}
