import RelayProtocol

/// A desktop the phone linked (SPEC Part B: a row of `linked_devices`).
public struct LinkedDesktop: Sendable, Hashable {
    /// The desktop's device ID (lower-cased).
    public var deviceId: String
    /// Its name, as the relay reported it.
    public var name: String
    /// When the relay linked them, Unix epoch milliseconds on the relay's clock (its `linkedAt`).
    public var linkedAt: Int64

    /// Creates one.
    public init(deviceId: String, name: String, linkedAt: Int64) {
        self.deviceId = deviceId
        self.name = name
        self.linkedAt = linkedAt
    }
}

/// What the app and the store tell the machine about linking (docs/DEVICE_LINK.md).
public enum LinkInput: Sendable, Hashable {
    /// The user typed the code the desktop shows (any case, spaces and `-` ignored).
    case enterCode(String)
    /// The camera read the desktop's QR: its text (`relaytrace://link?code=K7QF-3M9X`).
    case scanCode(String)
    /// The store committed the ``LinkEffect/store(_:)`` row and claimed the resume-token key of the new
    /// pair: its ownership generation and the credentials stored under it (SPEC A7).
    case stored(ownership: UInt64, storedResume: ResumeCredentials?)
    /// The store could not write the row: the link is given up (nothing connects to that desktop).
    case storeFailed(String)
}

/// What the machine asks for, and reports, about linking.
public enum LinkEffect: Sendable, Hashable {
    /// Write this desktop to `linked_devices` (the most recent link is the one the app connects to at
    /// launch) and claim the resume-token key `<device>::<desktop>`; answer with
    /// ``LinkInput/stored(ownership:storedResume:)`` or ``LinkInput/storeFailed(_:)``. The phone connects
    /// to the desktop only after the row is committed.
    case store(LinkedDesktop)
    /// The link ended: linked (the relay socket to the desktop opens next) or failed, and why.
    case finished(LinkOutcome)
}

/// How a link ended.
public enum LinkOutcome: Sendable, Hashable {
    /// Linked, stored, and connecting to it.
    case linked(LinkedDesktop)
    /// Not linked.
    case failed(LinkFailure)
}

/// Why a link failed.
public enum LinkFailure: Sendable, Hashable, CustomStringConvertible {
    /// What was typed or scanned is not a link code (nothing was sent).
    case malformedCode(String)
    /// The client is not started (no JWT to authenticate the link socket).
    case notRunning
    /// The phone has no network path.
    case noNetworkPath
    /// Another link is in progress.
    case busy
    /// The relay refused the code (`linkCodeInvalid`, `linkCodeExpired`, `linkCodeUsed`,
    /// `linkAccountMismatch`, or another `error`).
    case refused(code: String, message: String)
    /// The link socket failed or closed before `link.accepted`.
    case connectionFailed(String)
    /// The store could not write the linked desktop.
    case storeFailed(String)

    /// A one-line description.
    public var description: String {
        switch self {
        case .malformedCode(let t): "not a link code: '\(t)'"
        case .notRunning: "the client is not started"
        case .noNetworkPath: "no network path"
        case .busy: "a link is already in progress"
        case .refused(let code, let message): "refused: \(code) \(message)"
        case .connectionFailed(let why): "link socket failed: \(why)"
        case .storeFailed(let why): "could not store the linked desktop: \(why)"
        }
    }
}

/// A link in progress.
public struct LinkAttempt: Sendable, Hashable {
    /// The code sent (grouped).
    public var code: String
    /// The link socket (nil once it closed after `link.accepted`).
    public var generation: Generation?
    /// The desktop the relay accepted, waiting for the store.
    public var accepted: LinkedDesktop?
}

/// Device linking in the client machine (seed 003; wire shapes are this project's, docs/DEVICE_LINK.md).
///
/// A code typed or scanned opens a link socket (its own generation, upgrade headers without
/// `X-Target-Desktop-Device-ID`, the 10 s handshake timeout) on which the phone sends `link.redeem`
/// instead of `register`. `link.accepted` asks the store to write the desktop (``LinkEffect/store(_:)``);
/// once the store answers, the link socket closes and the relay socket to the linked desktop opens, with
/// the resume key and ownership of the new pair. A refusal, a failure of the link socket or of the store
/// reports ``LinkOutcome/failed(_:)`` and returns to what was before (the previous desktop, or
/// `suspended(notLinked)`).
extension RelayClientMachine {
    mutating func linkInput(_ input: LinkInput) {
        switch input {
        case .enterCode(let text): beginLink(DeviceLink.normalised(text), raw: text)
        case .scanCode(let text): beginLink(DeviceLink.code(scanned: text), raw: text)
        case .stored(let ownership, let resume): linkStored(ownership: ownership, resume: resume)
        case .storeFailed(let why): linkStoreFailed(why)
        }
    }

    private mutating func beginLink(_ code: String?, raw: String) {
        guard isRunning else { return finishLink(.failed(.notRunning)) }
        guard let code else { return finishLink(.failed(.malformedCode(raw))) }
        guard linkAttempt == nil else { return finishLink(.failed(.busy)) }
        guard networkPath != .unsatisfied else { return finishLink(.failed(.noNetworkPath)) }
        closeOnPurpose("linking a desktop")
        let g = lastGeneration.next
        lastGeneration = g
        linkAttempt = LinkAttempt(code: code, generation: g, accepted: nil)
        emit(.openTransport(g, url: region.current?.socketURL ?? configuration.relayURL, headers: linkUpgradeHeaders()))
        arm(.handshake(g), at: now + tuning.handshakeTimeout)
        enter(.linking(CurrentSocket(generation: g, openedAt: now), reconnectAttempt: reconnectAttempt))
    }

    /// The A4 headers without a target desktop (there is none yet).
    func linkUpgradeHeaders() -> [HTTPHeader] {
        upgradeHeaders().filter { $0.name != "X-Target-Desktop-Device-ID" }
    }

    mutating func sendLinkRedeem(on g: Generation) {
        guard let attempt = linkAttempt else { return }
        send(.link(.redeem(LinkRedeem(code: attempt.code, deviceId: configuration.wireDeviceId, deviceName: configuration.deviceName))), on: g)
    }

    mutating func linkReceive(_ message: RelayMessage, on g: Generation) {
        switch message {
        case .link(.accepted(let a)):
            guard var attempt = linkAttempt, attempt.accepted == nil else { return unexpectedOnLink(message, g) }
            cancel(.handshake(g))
            let desktop = LinkedDesktop(deviceId: a.desktopDeviceId.lowercased(), name: a.desktopName,
                                        linkedAt: RFC3339.epochMilliseconds(a.linkedAt) ?? 0)
            attempt.accepted = desktop
            linkAttempt = attempt
            emit(.link(.store(desktop)))
        case .error(let e):
            guard linkAttempt?.accepted == nil else { return emit(.diagnostic(.relayError(g, code: e.code.rawValue, message: e.message))) }
            abandonLink(.refused(code: e.code.rawValue, message: e.message))
            emit(.closeTransport(g, code: ClientConstants.closeCode, reason: "link refused"))
            retire(g)
            returnFromLink()
        case .ping:
            send(.pong, on: g)
        case .pong:
            return
        default:
            unexpectedOnLink(message, g)
        }
    }

    private mutating func unexpectedOnLink(_ message: RelayMessage, _ g: Generation) {
        emit(.diagnostic(.unexpectedMessage(g, type: message.typeName, phase: phase.description)))
    }

    private mutating func linkStored(ownership: UInt64, resume: ResumeCredentials?) {
        guard let attempt = linkAttempt, let desktop = attempt.accepted else { return ignored("link stored") }
        linkAttempt = nil
        closeOnPurpose("linked desktop \(desktop.deviceId)")
        desktopId = desktop.deviceId
        resumeOwnership = ownership
        resumeCredentials = resume
        recentInvalidResumes = []
        emit(.link(.finished(.linked(desktop))))
        connectUnlessSuspended(reconnectAttempt: 0)
    }

    private mutating func linkStoreFailed(_ why: String) {
        guard let attempt = linkAttempt, attempt.accepted != nil else { return ignored("link store failed") }
        abandonLink(.storeFailed(why))
        // Once the link socket closed (after `link.accepted`), the machine already went back on its own: a
        // socket to the desktop it had, a reconnect to it, or a suspension. That is the way back; opening
        // another socket beside it would leave the current one open and forgotten.
        guard let g = attempt.generation, g == generation else { return }
        emit(.closeTransport(g, code: ClientConstants.closeCode, reason: "link not stored"))
        retire(g)
        returnFromLink()
    }

    /// Ends the attempt and tells the app why.
    mutating func abandonLink(_ failure: LinkFailure) {
        linkAttempt = nil
        finishLink(.failed(failure))
    }

    private mutating func finishLink(_ outcome: LinkOutcome) {
        emit(.link(.finished(outcome)))
    }

    /// After a failed link: back to the linked desktop (if any), else wait for a code.
    private mutating func returnFromLink() {
        connectUnlessSuspended(reconnectAttempt: 0)
    }
}
