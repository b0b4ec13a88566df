public import RelayProtocol

/// A link code the relay issued (docs/DEVICE_LINK.md).
public struct IssuedLinkCode: Sendable, Hashable {
    /// The code, grouped (`K7QF-3M9X`).
    public var code: String
    /// The account it belongs to; nil: open to any account.
    public var userId: String?
    /// The desktop that asked for it (lower-cased).
    public var desktopDeviceId: String
    /// The desktop's name.
    public var desktopName: String
    /// When it stops being valid.
    public var expiresAt: Moment
    /// The phone that used it (one use), once used.
    public var usedBy: String?
}

/// A phone linked to a desktop through the relay.
public struct DeviceLinkRecord: Sendable, Hashable {
    /// The phone's account.
    public var userId: String
    /// The phone (lower-cased).
    public var mobileDeviceId: String
    /// The desktop (lower-cased).
    public var desktopDeviceId: String
    /// The code used.
    public var code: String
    /// When.
    public var linkedAt: Moment
}

/// Device linking (seed 003; the wire shapes are this project's, see ``DeviceLink``): a registered
/// desktop sends `link.create` and gets `link.created` with a fresh code (10 minutes, one use); a phone
/// sends `link.redeem` on an accepted socket (registered or not) and gets `link.accepted`, or an `error`
/// `linkCodeInvalid` / `linkCodeExpired` / `linkCodeUsed` / `linkAccountMismatch`. The desktop gets
/// `link.accepted` too. From then on the phone's socket (and its later ones that name no target) go to
/// that desktop.
extension DevRelay {
    mutating func linkMessage(_ c: ConnectionID, _ conn: RelayConnection, _ message: LinkMessage) {
        switch message {
        case .create(let name):
            guard conn.kind == .desktop else {
                return sendError(c, .invalidPayload, "link.create is sent by desktops (X-Client-Type: desktop)")
            }
            guard conn.isRegistered else {
                return sendError(c, .authRequired, "register first: link codes are made for registered desktops")
            }
            issueCode(c, conn, name: name ?? conn.deviceName)
        case .redeem(let r):
            guard conn.kind == .mobile else {
                return sendError(c, .invalidPayload, "link.redeem is sent by phones (X-Client-Type: mobile)")
            }
            redeem(c, conn, r)
        case .created, .accepted:
            sendError(c, .unknownMessageType, "\(message.typeName) is sent by the relay, not by clients")
        }
    }

    private mutating func issueCode(_ c: ConnectionID, _ conn: RelayConnection, name: String) {
        var code = DeviceLink.newCode(using: &linkRng)
        while linkCodes[code] != nil { code = DeviceLink.newCode(using: &linkRng) }
        let open = openCodeDesktops.contains(DeviceKey(userId: conn.userId, deviceId: conn.deviceId))
        let issued = IssuedLinkCode(code: code, userId: open ? nil : conn.userId, desktopDeviceId: conn.deviceId,
                                    desktopName: name, expiresAt: now + DeviceLink.codeLifetime, usedBy: nil)
        linkCodes[code] = issued
        let expires = wallClock(issued.expiresAt)
        send(c, .link(.created(LinkCreated(code: code, uri: DeviceLink.uri(code: code), expiresAt: expires))))
        log("\(c) link code \(code) for desktop \(conn.deviceId) (\(name)), \(open ? "any account" : "user \(conn.userId)"), expires \(expires)")
        out.append(.linkCodeIssued(LinkCodeOffer(code: code, uri: DeviceLink.uri(code: code), desktopDeviceId: conn.deviceId,
                                                 desktopName: name, userId: issued.userId, expiresAt: issued.expiresAt,
                                                 expiresAtText: expires)))
    }

    private mutating func redeem(_ c: ConnectionID, _ conn: RelayConnection, _ r: LinkRedeem) {
        guard lowercasedASCII(r.deviceId) == conn.deviceId else {
            return sendError(c, .invalidDeviceId, "link.redeem deviceId \(lowercasedASCII(r.deviceId)) is not X-Device-ID \(conn.deviceId)")
        }
        guard let code = DeviceLink.normalised(r.code), var issued = linkCodes[code] else {
            log("\(c) link code \(r.code) refused: unknown")
            return sendError(c, DeviceLink.Refusal.invalid, "no link code \(r.code); type the code the desktop shows (8 letters and digits)")
        }
        if issued.expiresAt <= now {
            linkCodes[code] = nil
            log("\(c) link code \(code) refused: expired")
            return sendError(c, DeviceLink.Refusal.expired, "link code \(code) expired at \(wallClock(issued.expiresAt)); ask the desktop for a new one")
        }
        if issued.usedBy != nil {
            log("\(c) link code \(code) refused: already used")
            return sendError(c, DeviceLink.Refusal.used, "link code \(code) was already used; a code links one phone, ask the desktop for a new one")
        }
        if let owner = issued.userId, owner != conn.userId {
            log("\(c) link code \(code) refused: user \(conn.userId) is not the desktop's account")
            return sendError(c, DeviceLink.Refusal.accountMismatch, "link code \(code) belongs to another account; sign in with the desktop's account")
        }
        issued.usedBy = conn.deviceId
        linkCodes[code] = issued
        links[DeviceKey(userId: conn.userId, deviceId: conn.deviceId)] = issued.desktopDeviceId
        linkRecords.append(DeviceLinkRecord(userId: conn.userId, mobileDeviceId: conn.deviceId, desktopDeviceId: issued.desktopDeviceId,
                                            code: code, linkedAt: now))
        connections[c]?.targetDesktopDeviceId = issued.desktopDeviceId
        let accepted = LinkAccepted(desktopDeviceId: issued.desktopDeviceId, desktopName: issued.desktopName, mobileDeviceId: conn.deviceId,
                                    mobileName: r.deviceName, linkedAt: wallClock(now))
        send(c, .link(.accepted(accepted)))
        log("\(c) linked phone \(conn.deviceId) of user \(conn.userId) to desktop \(issued.desktopDeviceId) with code \(code)")
        // The desktop that made the code hears of it (on whichever account's connection it has).
        if let d = connections.values.first(where: { $0.kind == .desktop && $0.deviceId == issued.desktopDeviceId && $0.isRegistered
            && ($0.userId == conn.userId || issued.userId == nil && openCodeDesktops.contains(DeviceKey(userId: $0.userId, deviceId: $0.deviceId))) }) {
            send(d.id, .link(.accepted(accepted)))
        }
    }
}
