import RelayProtocol

/// SPEC A1 (identity), A2 (auth), A3 (region), A10 (ingress) and A11 (timeline interest): the machine
/// hosts these components and translates their effects into its own actions and timers.
extension RelayClientMachine {
    // MARK: A1 Identity

    mutating func applyIdentity(_ effects: [IdentityEffect]) {
        for effect in effects {
            switch effect {
            case .ready(let deviceId, let login):
                guard deviceId.lowercased() == configuration.wireDeviceId else {
                    emit(.diagnostic(.identityMismatch(configured: configuration.wireDeviceId, read: deviceId.lowercased())))
                    continue
                }
                emit(.identity(effect))
                if let login {
                    jwt = login.jwt
                    applyAuth(auth.handle(.resumeSession(login), at: now))
                }
                if let pending = pendingStart {
                    handleStart(pending)
                }
            case .ignored(let what):
                emit(.diagnostic(.component("identity", what)))
            case .readIdentity, .offerResetDeviceIdentity, .resetDeviceIdentity:
                emit(.identity(effect))
            }
        }
    }

    // MARK: A2 Auth

    mutating func authInput(_ input: AuthInput) {
        if case .httpResponse(let id, _, _) = input, let attempt = httpAttempts.removeValue(forKey: id) {
            // A3: a reply for a request bound to a previous origin completes nothing: the flow learns that
            // the request failed, and retries on the current origin.
            guard region.complete(attempt).completes else {
                emit(.diagnostic(.staleOrigin("reply to \(id) (\(attempt))")))
                return applyAuth(auth.handle(.httpFailed(id, reason: "reply from a previous origin"), at: now))
            }
        }
        if case .httpFailed(let id, _) = input, let attempt = httpAttempts.removeValue(forKey: id) {
            region.abandon(attempt)
        }
        applyAuth(auth.handle(input, at: now))
    }

    mutating func applyAuth(_ effects: [AuthEffect]) {
        for effect in effects {
            switch effect {
            case .arm(let t, let deadline):
                arm(.auth(t), at: deadline)
            case .cancel(let t):
                cancel(.auth(t))
            case .http(let request):
                if let attempt = try? region.beginAttempt(.rest(path: request.kind.path)) {
                    httpAttempts[request.id] = attempt.id
                }
                emit(.httpRequest(request, origin: restOrigin))
            case .loggedIn(let login), .tokenUpdated(let login):
                jwt = login.jwt
                emit(.auth(effect))
            case .sessionEnded:
                emit(.auth(effect))
                endSession()
            case .openBrowser, .loginFailed:
                emit(.auth(effect))
            case .ignored(let what):
                emit(.diagnostic(.component("auth", what)))
            }
        }
    }

    /// The REST origin: the chosen region's, or the relay URL's host over https.
    var restOrigin: String {
        if let origin = region.current { return origin.restOrigin }
        let url = configuration.relayURL
        guard let schemeEnd = url.firstRange(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        let scheme = url[..<schemeEnd.lowerBound].lowercased() == "ws" ? "http" : "https"
        return "\(scheme)://\(authority)"
    }

    /// A2: the session ended (refresh refused with 401/403, or logout): every relay is closed with 1001,
    /// every pending call fails, the stored resume token is deleted, and the client stops.
    mutating func endSession() {
        if resumeCredentials != nil {
            resumeCredentials = nil
            emit(.clearResumeCredentials(key: resumeKey, ownership: resumeOwnership))
        }
        stop(.sessionEnded)
    }

    // MARK: A3 Region

    mutating func selectRegion(_ r: Region) {
        var moved = false
        for effect in region.select(r) {
            switch effect {
            case .persistRegion:
                emit(.region(effect))
            case .retireAttempts(let ids, _):
                for id in ids where id != registrationAttempt {
                    if let request = httpAttempts.first(where: { $0.value == id })?.key {
                        httpAttempts[request] = nil
                        region.abandon(id)
                        applyAuth(auth.handle(.httpFailed(request, reason: "region changed"), at: now))
                    }
                }
            case .publishRegion:
                emit(.region(effect))
                moved = true
            }
        }
        // The relay of the previous origin is closed and one socket opens on the new origin.
        guard moved, isRunning else { return }
        switch phase {
        case .connecting, .registering, .registered, .waitingToReconnect:
            closeOnPurpose("region changed")
            reconnectAttempt = 0
            openNextGeneration()
        default:
            return  // suspended or stopped: the next socket uses the new origin
        }
    }

    // MARK: A11 Timeline interest

    mutating func interestInput(_ input: InterestInput) {
        switch input {
        case .claim(let id, let session):
            applyInterest(interest.claim(id, desktopId: desktopId, baseSessionId: session, at: now))
        case .confirmVisible(let id):
            applyInterest(interest.confirmVisible(id, at: now))
        case .release(let id):
            applyInterest(interest.release(id, at: now))
        }
    }

    mutating func applyInterest(_ effects: [InterestEffect]) {
        for effect in effects {
            switch effect {
            case .send(let leaseDesktop, let lease):
                guard leaseDesktop == desktopId else { continue }
                guard case .registered(let g, _) = phase else {
                    applyInterest(interest.deliveryFailed(desktopId: desktopId, at: now, rng: &rng))
                    continue
                }
                let message = RelayMessage.event(EventMessage(eventType: EventNames.chatTimelineInterest, payload: lease.json,
                                                              eventId: nil, sourceDeviceId: nil, targetDeviceId: nil,
                                                              timestamp: nil))
                guard let text = try? message.encodedText() else { continue }
                lastInterestFrame = text
                emit(.send(g, .text(text), attempt: 1))
            case .arm(let t, let deadline):
                arm(.interest(t), at: deadline)
            case .cancel(let t):
                cancel(.interest(t))
            case .gaveUp(_, let lease):
                emit(.diagnostic(.interestGaveUp(lease)))
            case .diagnostic(let d):
                emit(.diagnostic(.component("interest", "\(d)")))
            }
        }
    }

    /// A9/A11: the app's lifecycle drives the interest coordinator: inactive suspends timeline interest,
    /// background ends every lease, the foreground starts a new foreground generation.
    mutating func interestFollowsApp(from old: AppState, to new: AppState) {
        let wasForeground = old != .background, isForeground = new != .background
        let wasActive = old == .active, isActive = new == .active
        if wasActive, !isActive { applyInterest(interest.suspend(at: now)) }
        if wasForeground, !isForeground { applyInterest(interest.enteredBackground(at: now)) }
        if !wasForeground, isForeground { applyInterest(interest.enteredForeground(at: now)) }
        if !wasActive, isActive { applyInterest(interest.resume(at: now)) }
    }

    // MARK: A10 Ingress

    mutating func applyIngress(_ effects: [IngressEffect]) {
        for effect in effects { emit(.ingress(effect)) }
    }
}
