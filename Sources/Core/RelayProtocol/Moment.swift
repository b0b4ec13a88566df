/// A point on a monotonic clock: nanoseconds since the start of a session or trace.
///
/// Machines never read a clock: every input arrives with the `Moment` it happened at, and every timer
/// an action arms names the `Moment` it is due. The live driver maps the process's monotonic clock onto
/// this scale; the replayer and the test harness advance it virtually.
public struct Moment: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Nanoseconds since the origin (the trace start). May be negative only in arithmetic, never on the wire.
    public var nanoseconds: Int64

    /// Creates a moment `nanoseconds` after the origin.
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The origin.
    public static let zero = Moment(nanoseconds: 0)

    /// A moment `seconds` after the origin (rounded to the nearest nanosecond).
    public static func seconds(_ seconds: Double) -> Moment {
        Moment(nanoseconds: Int64((seconds * 1e9).rounded()))
    }

    /// This moment in seconds since the origin.
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public static func < (lhs: Moment, rhs: Moment) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// The moment `rhs` after `lhs`.
    public static func + (lhs: Moment, rhs: Duration) -> Moment {
        Moment(nanoseconds: lhs.nanoseconds &+ rhs.nanoseconds)
    }

    /// The moment `rhs` before `lhs`.
    public static func - (lhs: Moment, rhs: Duration) -> Moment {
        Moment(nanoseconds: lhs.nanoseconds &- rhs.nanoseconds)
    }

    /// The time from `rhs` to `lhs`.
    public static func - (lhs: Moment, rhs: Moment) -> Duration {
        .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds)
    }

    /// Seconds with millisecond precision, e.g. `12.345s`.
    public var description: String {
        let ms = nanoseconds / 1_000_000
        let sign = ms < 0 ? "-" : ""
        let a = ms.magnitude
        let frac = String(a % 1000)
        return "\(sign)\(a / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)s"
    }

    // Codable as a bare integer of nanoseconds.
    public init(from decoder: any Decoder) throws {
        nanoseconds = try decoder.singleValueContainer().decode(Int64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(nanoseconds)
    }
}

extension Duration {
    /// This duration in whole nanoseconds (truncated toward zero; saturates at the `Int64` range).
    public var nanoseconds: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        return ns &+ atto / 1_000_000_000
    }

    /// This duration in seconds as a `Double`.
    public var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
