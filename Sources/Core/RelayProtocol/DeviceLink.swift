/// Device linking (seed 003: the desktop makes a link code and shows a QR; the phone scans it or types
/// the code; both talk to `/ws/device-link`; the relay validates and from then on relays between the
/// pair).
///
/// The seeds give no wire shapes for linking: the messages, error codes, code alphabet, lifetime and QR
/// text below are **this project's design** (docs/DEVICE_LINK.md), written in the protocol's style
/// (camelCase, `type` + `payload`, refusals as `error` with a code). They are not PlanToCode's.
public enum DeviceLink {
    /// The characters of a link code: upper-case letters and digits without the easily confused
    /// `0 O 1 I L` (31 symbols).
    public static let alphabet: [Character] = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789")
    /// A code has this many symbols (about 39.6 bits), shown as two groups of four: `K7QF-3M9X`.
    public static let codeLength = 8
    /// A code is valid this long after the relay issued it.
    public static let codeLifetime: Duration = .seconds(600)
    /// What a link QR holds: this prefix and the code, e.g. `relaytrace://link?code=K7QF-3M9X`.
    public static let uriPrefix = "relaytrace://link?code="

    /// The canonical form of a typed code (`k7qf 3m9x`, `K7QF-3M9X`, `k7qf3m9x` all give `K7QF-3M9X`):
    /// ASCII letters upper-cased, spaces and `-` removed, then grouped; nil when what is left is not
    /// `codeLength` symbols of ``alphabet``.
    public static func normalised(_ typed: String) -> String? {
        var symbols: [Character] = []
        for ch in typed {
            if ch == " " || ch == "-" { continue }
            let up = Character(ch.uppercased())
            guard alphabet.contains(up) else { return nil }
            symbols.append(up)
        }
        guard symbols.count == codeLength else { return nil }
        return String(symbols[0..<4]) + "-" + String(symbols[4...])
    }

    /// The code in a scanned QR text: ``uriPrefix`` followed by a code (or a bare code); nil otherwise.
    public static func code(scanned text: String) -> String? {
        if text.hasPrefix(uriPrefix) { return normalised(String(text.dropFirst(uriPrefix.count))) }
        if text.contains("://") { return nil }
        return normalised(text)
    }

    /// The QR text of a code: ``uriPrefix`` + the code.
    public static func uri(code: String) -> String { uriPrefix + code }

    /// A fresh code from `rng` (grouped, e.g. `K7QF-3M9X`).
    public static func newCode(using rng: inout SeededRandom) -> String {
        var symbols: [Character] = []
        for _ in 0..<codeLength { symbols.append(alphabet[Int(rng.next(upperBound: UInt64(alphabet.count)))]) }
        return String(symbols[0..<4]) + "-" + String(symbols[4...])
    }

    /// The relay's refusals of a `link.redeem` (`error` codes of this project's design).
    public enum Refusal {
        /// No code like it was issued (or it was mistyped).
        public static let invalid = RelayErrorCode(rawValue: "linkCodeInvalid")
        /// The code's 10 minutes are over.
        public static let expired = RelayErrorCode(rawValue: "linkCodeExpired")
        /// The code was already used by a phone (one use).
        public static let used = RelayErrorCode(rawValue: "linkCodeUsed")
        /// The code belongs to another account than the phone's JWT `sub`.
        public static let accountMismatch = RelayErrorCode(rawValue: "linkAccountMismatch")
        /// Every refusal, in this order.
        public static let all: [RelayErrorCode] = [invalid, expired, used, accountMismatch]
    }
}

/// The device-link messages (this project's design, see ``DeviceLink``), each with its fields in
/// `payload`.
public enum LinkMessage: Sendable, Hashable {
    /// `link.create` (desktop -> relay): make a link code for this desktop. `deviceName` overrides the
    /// name of its `register`.
    case create(deviceName: String?)
    /// `link.created` (relay -> desktop): the code, its QR text and its expiry (RFC 3339).
    case created(LinkCreated)
    /// `link.redeem` (phone -> relay, instead of `register` on a socket opened for linking): the code,
    /// typed or scanned, and the phone's identity.
    case redeem(LinkRedeem)
    /// `link.accepted` (relay -> phone and -> desktop): the pair is linked.
    case accepted(LinkAccepted)

    /// The wire `type` strings.
    public enum TypeName {
        /// `link.create`
        public static let create = "link.create"
        /// `link.created`
        public static let created = "link.created"
        /// `link.redeem`
        public static let redeem = "link.redeem"
        /// `link.accepted`
        public static let accepted = "link.accepted"
        /// All four.
        public static let all: Set<String> = [create, created, redeem, accepted]
    }

    /// The wire `type`.
    public var typeName: String {
        switch self {
        case .create: TypeName.create
        case .created: TypeName.created
        case .redeem: TypeName.redeem
        case .accepted: TypeName.accepted
        }
    }

    init(type: String, top: FieldReader) throws(MessageDecodeError) {
        switch type {
        case TypeName.create:
            let p = try top.optionalObject("payload") ?? FieldReader(object: [:], path: "$.payload")
            self = .create(deviceName: try p.optionalString("deviceName"))
        case TypeName.created:
            self = .created(try LinkCreated(reading: top.object("payload")))
        case TypeName.redeem:
            self = .redeem(try LinkRedeem(reading: top.object("payload")))
        default:
            self = .accepted(try LinkAccepted(reading: top.object("payload")))
        }
    }

    var payload: JSONValue {
        switch self {
        case .create(let name):
            var b = ObjectBuilder(capacity: 1)
            b.set("deviceName", name)
            return b.value
        case .created(let c): return c.json
        case .redeem(let r): return r.json
        case .accepted(let a): return a.json
        }
    }

    /// `code=K7QF-3M9X desktop=...`: the salient fields for the dissector.
    var summaryParts: [String] {
        switch self {
        case .create(let name): name.map { ["deviceName=\($0)"] } ?? []
        case .created(let c): ["code=\(c.code)", "expiresAt=\(c.expiresAt)"]
        case .redeem(let r): ["code=\(r.code)", "deviceId=\(r.deviceId)"]
        case .accepted(let a): ["desktop=\(a.desktopDeviceId)", "mobile=\(a.mobileDeviceId)"]
        }
    }
}

/// `link.created`: a code the relay issued to a desktop.
public struct LinkCreated: Sendable, Hashable {
    /// The code, grouped (`K7QF-3M9X`).
    public var code: String
    /// The QR text (``DeviceLink/uri(code:)``).
    public var uri: String
    /// When the code stops being valid, RFC 3339.
    public var expiresAt: String

    /// Creates the message.
    public init(code: String, uri: String, expiresAt: String) {
        self.code = code
        self.uri = uri
        self.expiresAt = expiresAt
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        code = try r.string("code")
        uri = try r.string("uri")
        expiresAt = try r.string("expiresAt")
    }

    var json: JSONValue { ["code": .string(code), "uri": .string(uri), "expiresAt": .string(expiresAt)] }
}

/// `link.redeem`: a phone presents a code.
public struct LinkRedeem: Sendable, Hashable {
    /// The code as the phone normalised it.
    public var code: String
    /// The phone's device ID (lower-cased).
    public var deviceId: String
    /// The phone's name (shown on the desktop).
    public var deviceName: String

    /// Creates the message.
    public init(code: String, deviceId: String, deviceName: String) {
        self.code = code
        self.deviceId = deviceId
        self.deviceName = deviceName
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        code = try r.string("code")
        deviceId = try r.string("deviceId")
        deviceName = try r.optionalString("deviceName") ?? ""
    }

    var json: JSONValue { ["code": .string(code), "deviceId": .string(deviceId), "deviceName": .string(deviceName)] }
}

/// `link.accepted`: the relay linked a phone to a desktop (sent to both).
public struct LinkAccepted: Sendable, Hashable {
    /// The desktop's device ID (lower-cased).
    public var desktopDeviceId: String
    /// The desktop's name.
    public var desktopName: String
    /// The phone's device ID (lower-cased).
    public var mobileDeviceId: String
    /// The phone's name.
    public var mobileName: String
    /// When the relay linked them, RFC 3339 (the record's `linked_at` and server timestamp).
    public var linkedAt: String

    /// Creates the message.
    public init(desktopDeviceId: String, desktopName: String, mobileDeviceId: String, mobileName: String, linkedAt: String) {
        self.desktopDeviceId = desktopDeviceId
        self.desktopName = desktopName
        self.mobileDeviceId = mobileDeviceId
        self.mobileName = mobileName
        self.linkedAt = linkedAt
    }

    init(reading r: FieldReader) throws(MessageDecodeError) {
        desktopDeviceId = try r.string("desktopDeviceId")
        desktopName = try r.optionalString("desktopName") ?? ""
        mobileDeviceId = try r.string("mobileDeviceId")
        mobileName = try r.optionalString("mobileName") ?? ""
        linkedAt = try r.string("linkedAt")
    }

    var json: JSONValue {
        ["desktopDeviceId": .string(desktopDeviceId), "desktopName": .string(desktopName), "mobileDeviceId": .string(mobileDeviceId),
         "mobileName": .string(mobileName), "linkedAt": .string(linkedAt)]
    }
}

/// RFC 3339 timestamps to Unix epoch milliseconds (no Foundation): the inverse of the relay's
/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (an offset `±HH:MM` instead of `Z` is applied).
public enum RFC3339 {
    /// Milliseconds since 1970-01-01T00:00:00Z, or nil when `text` is not such a timestamp.
    public static func epochMilliseconds(_ text: String) -> Int64? {
        let u = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= u.count else { return nil }
            var v: Int64 = 0
            for c in u[from..<(from + count)] {
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int64(c - 0x30)
            }
            return v
        }
        guard u.count >= 20, let y = num(0, 4), u[4] == 0x2D, let mo = num(5, 2), u[7] == 0x2D, let d = num(8, 2),
              u[10] == 0x54 || u[10] == 0x74, let h = num(11, 2), u[13] == 0x3A, let mi = num(14, 2), u[16] == 0x3A,
              let s = num(17, 2), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = 19
        var ms: Int64 = 0
        if i < u.count, u[i] == 0x2E {
            i += 1
            var digits = 0
            while i < u.count, u[i] >= 0x30, u[i] <= 0x39 {
                if digits < 3 { ms = ms * 10 + Int64(u[i] - 0x30) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { ms *= 10 } }
        }
        var offsetMinutes: Int64 = 0
        guard i < u.count else { return nil }
        if u[i] == 0x5A || u[i] == 0x7A {
            i += 1
        } else if u[i] == 0x2B || u[i] == 0x2D, let oh = num(i + 1, 2), i + 3 < u.count, u[i + 3] == 0x3A, let om = num(i + 4, 2) {
            offsetMinutes = (oh * 60 + om) * (u[i] == 0x2B ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == u.count else { return nil }
        // Howard Hinnant's days_from_civil.
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let mp = (mo + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 86_400 + h * 3600 + mi * 60 + s) - offsetMinutes * 60) * 1000 + ms
    }
}
