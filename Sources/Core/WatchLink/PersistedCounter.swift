/// A 64-bit counter that survives restarts (SPEC C8, C10, C12): seeded at launch from a millisecond
/// clock reading, with a floor of the last value it ever handed out, so neither a restart nor a clock
/// going backwards can make it repeat a value.
///
/// The value never passes through a platform `Int` (32 bits on the watch's arm64_32 slice): it is a
/// `UInt64` in memory, in ``CounterFloorRecord``, and as 8 big-endian bytes in storage.
public struct PersistedCounter: Sendable, Hashable {
    /// The largest value a counter hands out. `UInt64.max` is reserved so "one past" always exists.
    public static let maxValue: UInt64 = .max - 1

    /// The storage key of this counter's floor.
    public let key: String
    /// The value the next ``take()`` hands out.
    public private(set) var next: UInt64
    /// The highest value handed out or protected in this launch, if any.
    public private(set) var highestUsed: UInt64?

    /// A counter for `key`, seeded from `clockMilliseconds` with `storedFloor` (the last value this
    /// counter ever handed out, as loaded from storage; nil when nothing is stored):
    /// `next = max(clockMilliseconds, storedFloor + 1)`.
    public init(key: String, clockMilliseconds: UInt64, storedFloor: UInt64?) {
        self.key = key
        var seed = clockMilliseconds
        if let floor = storedFloor {
            let (above, overflow) = floor.addingReportingOverflow(1)
            seed = max(seed, overflow ? .max : above)
        }
        next = seed
    }

    /// Hands out the next value and returns it with the record to persist before the value is used;
    /// nil when the counter is exhausted (only reachable with a corrupt floor near `UInt64.max`).
    public mutating func take() -> (value: UInt64, persist: CounterFloorRecord)? {
        guard next <= Self.maxValue else { return nil }
        let value = next
        next = value + 1
        highestUsed = max(highestUsed ?? value, value)
        return (value, CounterFloorRecord(key: key, value: value))
    }

    /// Records that `value` was used (e.g. re-registering a re-queued command): the counter never hands
    /// it out again, and an older value cannot pull it back (SPEC C6).
    public mutating func protect(_ value: UInt64) {
        highestUsed = max(highestUsed ?? value, value)
        if value >= next { next = value == .max ? .max : value + 1 }
    }
}

/// "Store `value` under `key`": the persist action of a ``PersistedCounter``.
public struct CounterFloorRecord: Sendable, Hashable, CustomStringConvertible {
    /// The storage key.
    public var key: String
    /// The floor: the last value handed out.
    public var value: UInt64

    /// A record.
    public init(key: String, value: UInt64) {
        self.key = key
        self.value = value
    }

    /// The value as stored: 8 bytes, big-endian (no `Int` on the way, SPEC C12).
    public var bytes: [UInt8] { CounterFloorRecord.encode(value) }

    /// `key := value`.
    public var description: String { "\(key) := \(value)" }

    /// `value` as 8 big-endian bytes.
    public static func encode(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// Decodes a stored floor of `key`; throws when the stored bytes are not exactly 8.
    public static func decode(_ bytes: [UInt8], key: String) throws(CounterFloorError) -> UInt64 {
        guard bytes.count == 8 else { throw CounterFloorError(key: key, byteCount: bytes.count) }
        var value: UInt64 = 0
        for b in bytes { value = value << 8 | UInt64(b) }
        return value
    }
}

/// A stored counter floor that cannot be read.
public struct CounterFloorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The storage key.
    public var key: String
    /// How many bytes were stored.
    public var byteCount: Int

    /// The error for `byteCount` bytes stored under `key`.
    public init(key: String, byteCount: Int) {
        self.key = key
        self.byteCount = byteCount
    }

    /// What, where and what to do.
    public var description: String {
        "stored counter floor '\(key)' is \(byteCount) bytes at offset 0, expected exactly 8 (a big-endian "
            + "UInt64); pass nil as the floor (the counter is then seeded from the clock alone, safe unless the "
            + "clock went backwards) and the next persist overwrites it"
    }
}
