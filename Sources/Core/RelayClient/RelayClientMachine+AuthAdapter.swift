import RelayProtocol

/// SPEC A2 (login and refresh): the machine hosts `AuthFlow` and translates its effects into its own
/// actions and timers.
extension RelayClientMachine {
    mutating func authInput(_ input: AuthInput) {
        if case .httpResponse(let id, _, _) = input, let attempt = httpAttempts.removeValue(forKey: id) {
            // A3: a reply for a request bound to a previous origin completes nothing: the flow learns that
            // the request failed, and retries on the current origin.
            guard region.complete(attempt).completes else {
                emit(.diagnostic(.staleReply(request: id, attempt: attempt)))
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
                emit(.diagnostic(.auth(what)))
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
}
