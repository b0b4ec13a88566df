public import RelayProtocol

/// A9: one recovery epoch for the target desktop: a window with a deadline inside which the client
/// probes the desktop with `system.ping`, with backoff.
public struct RecoveryEpoch: Sendable, Hashable {
    /// The epoch number (counting from 1 for the machine's life).
    public var id: UInt64
    /// Why it was opened.
    public var reason: EpochReason
    /// When it was opened.
    public var openedAt: Moment
    /// When the desktop is shown as temporarily offline if it has not answered.
    public var deadline: Moment
    /// Probes that failed so far (they pace the backoff).
    public var failedProbes: Int
    /// The request ID of the probe in flight, if any (one at a time).
    public var probeInFlight: String?
    /// A probe is due as soon as a registered socket can carry it: set when the epoch opens and when
    /// the backoff after a failed probe has run out, cleared when a probe is sent. A new registration
    /// probes only when one is due, so a probe whose timeout replaced the socket is still backed off.
    public var probeDue: Bool = true
}

/// SPEC A9: recovery epochs, network path changes, the app's lifecycle and `desktop_online` pushes.
extension RelayClientMachine {
    /// Whether the session is running (started, not stopped).
    var isRunning: Bool {
        switch phase {
        case .idle, .stopped: false
        default: true
        }
    }

    // MARK: Network path

    mutating func networkPathChanged(_ path: NetworkPath) {
        let old = networkPath
        networkPath = path
        guard isRunning, old != path else { return }
        switch (old, path) {
        case (_, .unsatisfied):
            // Lost path: close every connected relay, fail its calls, open an epoch whose probing ends at
            // once for lack of a path: the desktop is shown temporarily offline.
            closeOnPurpose("network path lost")
            openEpoch(.pathLost)
            endEpoch(showing: .temporarilyOffline(.noNetworkPath))
            suspend(.noNetworkPath)
        case (.unsatisfied, .satisfied):
            guard phase == .suspended(.noNetworkPath) else { return }
            if appState == .background, !mediaPlaying {
                return suspend(.background)
            }
            openEpoch(.pathRestored)
            openNextGeneration(reconnectAttempt: 0)
        case (.satisfied, .satisfied):
            // Interface switch: the old relay is closed and its calls failed *before* exactly one
            // replacement opens; the current epoch is discarded, the replacement gets a fresh window.
            guard generation != nil || isWaitingToReconnect else { return }
            closeOnPurpose("network interface changed")
            openEpoch(.interfaceSwitch)
            openNextGeneration(reconnectAttempt: 0)
        }
    }

    private var isWaitingToReconnect: Bool {
        if case .waitingToReconnect = phase { true } else { false }
    }

    // MARK: App lifecycle

    mutating func appStateChanged(_ state: AppState) {
        let old = appState
        appState = state
        guard old != state else { return }
        interestFollowsApp(from: old, to: state)
        if state == .active { applyIdentity(identity.handle(.appActive)) }
        guard isRunning else { return }
        if state == .background {
            cancel(.foregroundRecovery)
            // Background: disconnect every relay, gracefully, unless desktop-backed media is playing.
            guard !mediaPlaying else { return }
            closeOnPurpose("app in background")
            if epoch != nil { endEpoch(showing: nil) }
            suspend(.background)
        } else if old == .background {
            // Back to the foreground: recovery for the active desktop starts 1.5 s later.
            arm(.foregroundRecovery, at: now + tuning.foregroundRecoveryDelay)
        }
    }

    // MARK: Recovery

    /// Starts recovery now (foreground timer, `desktop_online` push, relay `online`): a fresh epoch; a
    /// registered socket is probed at once (and kept only if the ping answers within its 3 s timeout),
    /// otherwise a socket is opened and probed after registration.
    mutating func startRecovery(_ reason: EpochReason) {
        guard isRunning else { return ignored("recovery (\(reason.rawValue))") }
        guard !desktopId.isEmpty else {
            // No desktop to recover: back to waiting for a link (from the background, say).
            if case .suspended = phase { suspend(.notLinked) }
            return ignored("recovery (\(reason.rawValue)) with no linked desktop")
        }
        openEpoch(reason)
        if networkPath == .unsatisfied {
            return endEpoch(showing: .temporarilyOffline(.noNetworkPath))
        }
        switch phase {
        case .registered:
            probeNow()
        case .suspended, .waitingToReconnect:
            for (id, _) in armedTimers { if case .reconnect = id { cancel(id) } }
            openNextGeneration(reconnectAttempt: 0)
        case .connecting, .registering, .linking, .idle, .stopped:
            return  // probed once registered
        }
    }

    /// The relay reported the desktop's status (`device-status`).
    mutating func relayReported(_ status: DeviceStatus.Status) {
        switch status {
        case .online:
            // When the relay sends online, ping at once.
            if epoch != nil {
                probeNow()
            } else if desktopStatus != .online {
                startRecovery(.relayReportedOnline)
            }
        case .disconnected:
            endEpoch(showing: .temporarilyOffline(.relayReportedDisconnected))
        default:
            return
        }
    }

    /// Opens a new epoch (discarding the current one) with a fresh window.
    mutating func openEpoch(_ reason: EpochReason) {
        if let e = epoch {
            cancel(.epochDeadline(epoch: e.id))
            cancel(.probe(epoch: e.id))
        }
        lastEpochId += 1
        let e = RecoveryEpoch(id: lastEpochId, reason: reason, openedAt: now,
                              deadline: now + tuning.recoveryWindow, failedProbes: 0, probeInFlight: nil)
        epoch = e
        emit(.epochOpened(epoch: e.id, reason: reason, deadline: e.deadline))
        arm(.epochDeadline(epoch: e.id), at: e.deadline)
        setDesktopStatus(.recovering(epoch: e.id))
    }

    /// Ends the current epoch, showing `status` (nil keeps what is shown).
    mutating func endEpoch(showing status: DesktopStatus?) {
        if let e = epoch {
            cancel(.epochDeadline(epoch: e.id))
            cancel(.probe(epoch: e.id))
            epoch = nil
        }
        if let status { setDesktopStatus(status) }
    }

    /// Sends a `system.ping` probe for the open epoch if the socket is registered and none is in flight
    /// (relay `online`, a new epoch, a due probe). Backoff is not this function's business: only
    /// `online` and a new epoch call it while a backoff is running, and the SPEC wants those at once.
    mutating func probeNow() {
        guard var e = epoch, case .registered = phase, e.probeInFlight == nil else { return }
        cancel(.probe(epoch: e.id))
        guard let ping = RpcCatalogue.method(named: ClientConstants.probeMethod) else { return }
        let requestId = rng.uuidString()
        e.probeInFlight = requestId
        e.probeDue = false
        epoch = e
        _ = issue(method: ping, params: .object([:]), idempotencyKey: nil, requestId: requestId,
                  callId: CallID(0), purpose: .probe(epoch: e.id))
    }

    /// A probe answered or failed.
    mutating func probeCompleted(epochId: UInt64, _ outcome: CallOutcome) {
        guard var e = epoch, e.id == epochId else { return }  // a probe of a discarded epoch
        e.probeInFlight = nil
        switch outcome {
        case .success:
            epoch = e
            endEpoch(showing: .online)
        case .failure, .queued:
            e.failedProbes += 1
            epoch = e
            let ladder = ClientConstants.recoveryProbeBackoff
            let next = now + ladder[min(e.failedProbes - 1, ladder.count - 1)]
            if next < e.deadline { arm(.probe(epoch: e.id), at: next) }
        }
    }

    /// The backoff after a failed probe ran out: probe now if a registered socket is there, otherwise
    /// as soon as one registers.
    mutating func probeBackoffEnded(_ id: UInt64) {
        guard var e = epoch, e.id == id else { return }
        e.probeDue = true
        epoch = e
        probeNow()
    }

    /// A socket registered during an epoch: it carries the probe that is due, if one is. A probe that
    /// failed (an error answer, or a timeout that replaced the socket) keeps its backoff: the new
    /// socket waits for the backoff timer like the old one would have (SPEC A9: probes back off).
    mutating func registeredDuringEpoch() {
        guard epoch?.probeDue == true else { return }
        probeNow()
    }

    mutating func epochDeadlinePassed(_ id: UInt64) {
        guard epoch?.id == id else { return }
        endEpoch(showing: .temporarilyOffline(.deadline))
    }

    // MARK: Helpers

    /// Closes the current socket on purpose (1001) and fails the calls it carried; stops a pending
    /// reconnect.
    mutating func closeOnPurpose(_ reason: String) {
        if let g = generation {
            emit(.closeTransport(g, code: ClientConstants.closeCode, reason: reason))
            retire(g)
            failCalls(sentOn: g, .connectionClosed(reason))
        }
        for (id, _) in armedTimers { if case .reconnect = id { cancel(id) } }
    }

    /// Suspends for `reason`, keeping the reconnect ladder's position unless `reconnectAttempt` is given.
    mutating func suspend(_ reason: SuspendReason, reconnectAttempt: Int? = nil) {
        enter(.suspended(reason, reconnectAttempt: reconnectAttempt ?? self.reconnectAttempt))
    }

    mutating func setDesktopStatus(_ status: DesktopStatus) {
        guard status != desktopStatus else { return }
        desktopStatus = status
        emit(.desktopStatusChanged(status))
    }
}
