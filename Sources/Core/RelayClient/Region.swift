
/// A PlanToCode region (SPEC A3). Its raw value is what the driver persists (UserDefaults on iOS).
public enum Region: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The United States region, `https://api-us.plantocode.com`.
    case us
    /// The European region, `https://api-eu.plantocode.com`.
    case eu

    /// The region's base URL (SPEC A3), e.g. `https://api-eu.plantocode.com`.
    public var baseURL: String {
        switch self {
        case .us: ClientConstants.usBaseURL
        case .eu: ClientConstants.euBaseURL
        }
    }

    /// The host of the base URL, e.g. `api-eu.plantocode.com`.
    public var host: String {
        let url = baseURL
        let scheme = "https://"
        return url.hasPrefix(scheme) ? String(url.dropFirst(scheme.count)) : url
    }

    /// The origin every REST request of this region goes to (the base URL; paths are appended to it).
    public var restOrigin: String { baseURL }

    /// The relay socket URL of this region: `wss://<host>/ws/device-link` (SPEC A3, A4).
    public var socketURL: String { "wss://" + host + ClientConstants.deviceLinkPath }

    /// The raw value, `us` or `eu`.
    public var description: String { rawValue }

    /// Reads a persisted region value.
    ///
    /// - Throws: ``RegionError`` with code ``RegionError/Code/unknownRegion`` when `persisted` is not
    ///   `us` or `eu` (exact, lower case).
    public static func parse(persisted value: String) throws(RegionError) -> Region {
        guard let region = Region(rawValue: value) else {
            throw RegionError(
                code: .unknownRegion,
                message: "the persisted region '\(value)' is neither 'us' nor 'eu'; discard it and let the user choose a region again")
        }
        return region
    }
}

/// A region error: what went wrong and what to do.
public struct RegionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of error.
    public enum Code: Sendable, Hashable {
        /// A persisted region value is not a known region.
        case unknownRegion
        /// An attempt was begun before any region was chosen.
        case noRegionChosen
    }

    /// What kind of error.
    public var code: Code
    /// What went wrong and what to do.
    public var message: String
    /// The message.
    public var description: String { message }
}

/// The origin an attempt was bound to: the region and the selection it belongs to (SPEC A3).
///
/// `epoch` counts region selections (1 for the first). Switching `us` -> `eu` -> `us` yields a new origin
/// (epoch 3), so a reply for an attempt begun on the first `us` selection is still stale: it belongs to a
/// navigation state that was replaced, even though the URL is the same again.
public struct RegionOrigin: Sendable, Hashable, CustomStringConvertible {
    /// The region.
    public var region: Region
    /// The selection number (counts up from 1 with every effective region change).
    public var epoch: UInt64

    /// Creates an origin.
    public init(region: Region, epoch: UInt64) {
        self.region = region
        self.epoch = epoch
    }

    /// The REST origin of the region.
    public var restOrigin: String { region.restOrigin }
    /// The relay socket URL of the region.
    public var socketURL: String { region.socketURL }
    /// e.g. `eu#2`.
    public var description: String { "\(region)#\(epoch)" }
}

/// One registration attempt or REST request bound to a region origin (counts up from 1).
public struct AttemptID: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The number.
    public var rawValue: UInt64
    /// Creates attempt `rawValue`.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// Creates attempt `value`.
    public init(_ value: UInt64) { rawValue = value }
    public static func < (a: AttemptID, b: AttemptID) -> Bool { a.rawValue < b.rawValue }
    /// `attempt#3`.
    public var description: String { "attempt#\(rawValue)" }
}

/// What an attempt is, for traces.
public enum AttemptKind: Sendable, Hashable, CustomStringConvertible {
    /// A relay registration (socket open + `register`) on the region's socket URL.
    case registration
    /// A REST request to this path on the region's origin.
    case rest(path: String)

    /// `registration` or `rest <path>`.
    public var description: String {
        switch self {
        case .registration: "registration"
        case .rest(let path): "rest \(path)"
        }
    }
}

/// An attempt that was begun, with the origin it must use.
public struct BoundAttempt: Sendable, Hashable {
    /// The attempt's handle; its reply is checked with ``RegionBinding/complete(_:)``.
    public var id: AttemptID
    /// What it is.
    public var kind: AttemptKind
    /// The origin it is bound to; use its ``RegionOrigin/restOrigin`` or ``RegionOrigin/socketURL``.
    public var origin: RegionOrigin
}

/// What a reply to an attempt may do.
public enum AttemptVerdict: Sendable, Hashable {
    /// The attempt was bound to the current origin: its reply completes it.
    case current(RegionOrigin)
    /// The attempt was bound to a previous origin: its reply completes nothing (SPEC A3).
    case staleOrigin(attempt: RegionOrigin, current: RegionOrigin?)
    /// No such attempt is pending (never begun, or already completed or abandoned): complete nothing.
    case unknown(AttemptID)

    /// Whether the reply may complete anything (only for ``current(_:)``).
    public var completes: Bool {
        if case .current = self { return true }
        return false
    }
}

/// What ``RegionBinding`` wants done, in order.
public enum RegionEffect: Sendable, Hashable {
    /// Persist the chosen region (UserDefaults). Always comes before ``publishRegion(_:)``.
    case persistRegion(Region)
    /// These attempts were bound to the previous origin: their replies will complete nothing. The machine
    /// cancels them (closes that relay socket with 1001, cancels the REST requests) and still reports
    /// their end with ``RegionBinding/complete(_:)`` or ``RegionBinding/abandon(_:)``.
    case retireAttempts([AttemptID], origin: RegionOrigin)
    /// Publish the new origin to navigation state / the UI; new attempts use it from now on.
    case publishRegion(RegionOrigin)
}

/// SPEC A3 as a sans-IO value type: the chosen region, persisted before it is published, and every
/// registration attempt and REST request bound to the origin it used.
///
/// Contract with the driver: every begun attempt ends with exactly one ``complete(_:)`` (a reply arrived)
/// or ``abandon(_:)`` (it failed without a reply, or was cancelled), so the table never leaks; the count is
/// in ``pendingAttemptCount``.
public struct RegionBinding: Sendable, Hashable {
    /// The current origin; nil until a region is chosen or restored.
    public private(set) var current: RegionOrigin?
    /// The last attempt ID handed out (0 before the first).
    public private(set) var lastAttempt = AttemptID(0)
    private var attempts: [AttemptID: BoundAttempt] = [:]

    /// A binding restored from the persisted region (nil when none was persisted: the user chooses one).
    ///
    /// Restoring emits nothing: the value is already persisted; the driver reads ``current`` to build its
    /// first navigation state.
    public init(persisted: Region? = nil) {
        current = persisted.map { RegionOrigin(region: $0, epoch: 1) }
    }

    /// The number of attempts begun and not yet completed or abandoned.
    public var pendingAttemptCount: Int { attempts.count }

    /// The user chose `region`. When it differs from the current region, returns (in this order)
    /// ``RegionEffect/persistRegion(_:)``, ``RegionEffect/retireAttempts(_:origin:)`` for the attempts
    /// still pending on the previous origin (only when there are any), and
    /// ``RegionEffect/publishRegion(_:)``. Choosing the current region again changes nothing and returns
    /// no effects.
    public mutating func select(_ region: Region) -> [RegionEffect] {
        if let current, current.region == region { return [] }
        let previous = current
        let origin = RegionOrigin(region: region, epoch: (previous?.epoch ?? 0) + 1)
        current = origin
        var effects: [RegionEffect] = [.persistRegion(region)]
        if let previous {
            let stale = attempts.values.filter { $0.origin == previous }.map(\.id).sorted()
            if !stale.isEmpty { effects.append(.retireAttempts(stale, origin: previous)) }
        }
        effects.append(.publishRegion(origin))
        return effects
    }

    /// Begins an attempt on the current origin and binds it to that origin.
    ///
    /// - Throws: ``RegionError`` with code ``RegionError/Code/noRegionChosen`` before any region is chosen.
    public mutating func beginAttempt(_ kind: AttemptKind) throws(RegionError) -> BoundAttempt {
        guard let current else {
            throw RegionError(
                code: .noRegionChosen,
                message: "cannot begin \(kind): no region is chosen yet; restore the persisted region or let the user choose one first")
        }
        lastAttempt = AttemptID(lastAttempt.rawValue &+ 1)
        let attempt = BoundAttempt(id: lastAttempt, kind: kind, origin: current)
        attempts[attempt.id] = attempt
        return attempt
    }

    /// The origin attempt `id` is bound to, while it is pending.
    public func origin(of id: AttemptID) -> RegionOrigin? { attempts[id]?.origin }

    /// Whether `origin` is the current origin (same region and same selection).
    public func isCurrent(_ origin: RegionOrigin) -> Bool { origin == current }

    /// A reply to attempt `id` arrived: ends the attempt and says whether the reply may complete anything.
    /// Only a reply for an attempt bound to the current origin does (SPEC A3).
    public mutating func complete(_ id: AttemptID) -> AttemptVerdict {
        guard let attempt = attempts.removeValue(forKey: id) else { return .unknown(id) }
        if attempt.origin == current { return .current(attempt.origin) }
        return .staleOrigin(attempt: attempt.origin, current: current)
    }

    /// Attempt `id` ended without a reply (failed or cancelled). Returns whether it was pending.
    @discardableResult
    public mutating func abandon(_ id: AttemptID) -> Bool {
        attempts.removeValue(forKey: id) != nil
    }
}
