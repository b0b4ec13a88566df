public import RelayProtocol

/// Every number of the relay's behaviour (PROTOCOL.md), one place each.
public enum RelayConstants {
    /// §1: the one path the relay upgrades.
    public static let devicePath = "/ws/device-link"
    /// §1: a socket is dropped after this long without any frame.
    public static let idleTimeout: Duration = .seconds(60)
    /// §5: the sliding session TTL, extended by `heartbeat` and `rpc.request`.
    public static let sessionTTL: Duration = .seconds(24 * 3600)
    /// §5: expired sessions are swept this often.
    public static let sweepInterval: Duration = .seconds(5 * 60)
    /// §4: relay session IDs are this many `[A-Za-z0-9]` characters.
    public static let sessionIdLength = 32
    /// §4: resume tokens are this many `[A-Za-z0-9]` characters.
    public static let resumeTokenLength = 48
    /// §2: the rate-limit bucket holds this many text frames per connection.
    public static let rateBucketCapacity = 50.0
    /// §2: the bucket refills at this many frames per second.
    public static let rateRefillPerSecond = 25.0
    /// The `error` code of a frame refused for the rate limit. PROTOCOL.md §2 says the real relay drops
    /// the excess silently; this relay answers every refused frame instead (docs/CLI.md, "relay").
    public static let rateLimitedError = RelayErrorCode.rateLimited
    /// §5: at most this many events are kept per user for replay.
    public static let replayBufferCount = 500
    /// §5: events older than this are not replayed.
    public static let replayBufferAge: Duration = .seconds(300)
    /// §5: events larger than this (serialised `payload`) are delivered but not kept for replay.
    public static let replayMaxEventBytes = 256 * 1024
    /// §4: the relay's own RPC error message when no desktop is connected (code -32010).
    public static let desktopOfflineMessage = "Desktop is offline"
    /// The close code of a simulated relay restart (RFC 6455 1012, "service restart").
    public static let restartCloseCode: UInt16 = 1012
    /// The close code after a second successful `register` on one socket (RFC 6455 1008, policy).
    public static let doubleRegisterCloseCode: UInt16 = 1008
    /// The desktop a phone without a target gets, and the link desktop of `relaytrace relay` (the
    /// desktop ID of PROTOCOL.md's examples).
    public static let defaultDesktopId = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
    /// The placeholder account of a simulated desktop started without one: its link codes are open to
    /// any account (the phone then talks to a desktop the relay simulates for its own account).
    public static let openLinkAccount = "relaytrace-open-link"
}

/// What the development relay is built with. Everything that would otherwise come from the
/// environment (randomness, the wall clock) is here, so the relay is deterministic.
public struct DevRelayConfiguration: Sendable, Hashable {
    /// The seed of the relay's `SeededRandom` (session IDs and resume tokens; link codes and the
    /// simulated desktops' seeds are derived from it).
    public var seed: UInt64
    /// The wall-clock time at `Moment.zero`, in Unix epoch milliseconds: `expiresAt` and every
    /// `timestamp` are this plus the input's moment, never the system clock.
    public var wallClockOrigin: Int64
    /// Which desktops the relay simulates for phones that name one no real desktop serves.
    public var simulatedDesktops: DesktopSimulation = .any
    /// Desktop IDs (lower-cased) the relay never simulates: phones naming one get `-32010` until a real
    /// desktop of that ID connects (`relaytrace relay --offline ID`).
    public var offlineDesktops: Set<String> = []
    /// The desktop a phone without a target (a pre-1.6 phone) gets when the relay simulates one.
    public var defaultDesktopId = RelayConstants.defaultDesktopId
    /// Simulated desktops that come up at ``RelayInput/start`` (before any phone names them).
    public var desktopsAtStart: [StartingDesktop] = []
    /// The `chat:timeline-updated` cadence of the simulated desktops while a lease is active.
    public var desktopSnapshotInterval: Duration = .seconds(3)
    /// One-way latency between the relay and its simulated desktops (connects, frames, closes): zero
    /// behind a real socket; a simulation gives them the latency of its network, as a desktop elsewhere
    /// would have.
    public var desktopLatency: Duration = .zero

    /// Creates a configuration. The default origin is 2026-01-15T12:00:00.000Z.
    public init(seed: UInt64 = 1, wallClockOrigin: Int64 = 1_768_478_400_000) {
        self.seed = seed
        self.wallClockOrigin = wallClockOrigin
    }
}

/// Which desktops the development relay simulates.
public enum DesktopSimulation: Sendable, Hashable {
    /// Whatever desktop a phone names, for whatever account (JWT `sub`) the phone has.
    case any
    /// Only these desktop IDs (lower-cased), for any account; other targets get `-32010`.
    case only([String])
    /// None: only real desktops (`X-Client-Type: desktop`) answer.
    case none
}

/// A simulated desktop the relay brings up at start.
public struct StartingDesktop: Sendable, Hashable {
    /// The desktop's device ID.
    public var deviceId: String
    /// Its account (JWT `sub`); nil: the relay's placeholder account ``RelayConstants/openLinkAccount``,
    /// whose link codes any account may redeem.
    public var userId: String?
    /// Its name.
    public var name: String
    /// Whether it asks for a link code once registered (and a fresh one after each use or expiry).
    public var offersLinkCode: Bool

    /// Creates one.
    public init(deviceId: String, userId: String?, name: String = "Simulated Desktop", offersLinkCode: Bool) {
        self.deviceId = deviceId
        self.userId = userId
        self.name = name
        self.offersLinkCode = offersLinkCode
    }
}

/// RFC 3339 timestamps with milliseconds in UTC, from Unix epoch milliseconds (no Foundation).
public enum WallClock {
    /// `origin + moment` as `2026-01-15T12:00:00.000Z`.
    public static func rfc3339(originMilliseconds origin: Int64, at moment: Moment) -> String {
        rfc3339(epochMilliseconds: origin &+ moment.nanoseconds / 1_000_000)
    }

    /// Unix epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
    public static func rfc3339(epochMilliseconds ms: Int64) -> String {
        let msPerDay: Int64 = 86_400_000
        var days = ms / msPerDay
        var rem = ms % msPerDay
        if rem < 0 {
            rem += msPerDay
            days -= 1
        }
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        let secs = rem / 1000
        return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(secs / 3600, 2) + ":"
            + pad(secs / 60 % 60, 2) + ":" + pad(secs % 60, 2) + "." + pad(rem % 1000, 3) + "Z"
    }

    private static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
