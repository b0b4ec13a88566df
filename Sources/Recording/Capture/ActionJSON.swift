import RelayClient
import RelayProtocol

extension ClientRecordCodec {
    /// The JSON of an action that has no transport record kind, and the generation it concerns.
    static func actionJSON(_ action: ClientAction) -> (JSONValue, Generation?) {
        switch action {
        case .armTimer(let id, let deadline):
            return (["action": "armTimer", "timer": timerJSON(id), "deadline": .int(deadline.nanoseconds)], id.generation)
        case .cancelTimer(let id):
            return (["action": "cancelTimer", "timer": timerJSON(id)], id.generation)
        case .storeResumeCredentials(let key, let creds, let ownership):
            return (["action": "storeResume", "key": .string(key), "resume": resumeJSON(creds),
                     "ownership": .int(Int64(bitPattern: ownership))], nil)
        case .clearResumeCredentials(let key, let ownership):
            return (["action": "clearResume", "key": .string(key), "ownership": .int(Int64(bitPattern: ownership))], nil)
        case .callCompleted(let id, let outcome):
            var o: [String: JSONValue] = ["action": "callCompleted", "callId": .int(Int64(bitPattern: id.rawValue))]
            switch outcome {
            case .success(let result):
                o["outcome"] = "success"
                o["result"] = result
            case .failure(let f):
                o["outcome"] = "failure"
                o["failure"] = failureJSON(f)
            case .queued(let key):
                o["outcome"] = "queued"
                o["idempotencyKey"] = .string(key)
            }
            return (.object(o), nil)
        case .offlineQueue(let effect):
            switch effect {
            case .enqueue(let m):
                return (["action": "offlineQueue.enqueue", "mutation": mutationJSON(m)], nil)
            case .markSent(let key):
                return (["action": "offlineQueue.markSent", "idempotencyKey": .string(key)], nil)
            case .markAnswered(let key, let result, let ts):
                return (["action": "offlineQueue.markAnswered", "idempotencyKey": .string(key), "result": result,
                         "serverTimestamp": ts.map { .int($0) } ?? .null], nil)
            case .markFailed(let key, let reason):
                return (["action": "offlineQueue.markFailed", "idempotencyKey": .string(key), "reason": .string(reason)], nil)
            }
        case .offlineMutationFinished(let key, let outcome):
            var o: [String: JSONValue] = ["action": "offlineMutationFinished", "idempotencyKey": .string(key)]
            switch outcome {
            case .success(let r): o["outcome"] = "success"; o["result"] = r
            case .failure(let f): o["outcome"] = "failure"; o["failure"] = failureJSON(f)
            case .queued: o["outcome"] = "queued"
            }
            return (.object(o), nil)
        case .link(let effect):
            return (linkEffectJSON(effect), nil)
        case .callProgress(let id, let result):
            return (["action": "callProgress", "callId": .int(Int64(bitPattern: id.rawValue)), "result": result], nil)
        case .ingress(let effect):
            return (ingressJSON(effect), nil)
        case .identity(let effect):
            return (identityEffectJSON(effect), nil)
        case .auth(let effect):
            return (authEffectJSON(effect), nil)
        case .httpRequest(let request, let origin):
            var o: [String: JSONValue] = ["action": "httpRequest", "id": .int(Int64(bitPattern: request.id.rawValue)),
                                          "origin": .string(origin), "path": .string(request.kind.path)]
            switch request.kind {
            case .pollStatus(let pollingId, let poll):
                o["kind"] = "pollStatus"
                o["pollingId"] = .string(pollingId)
                o["poll"] = .int(Int64(poll))
            case .exchangeCode(let code, let verifier, let pollingId):
                o["kind"] = "exchangeCode"
                o["authCode"] = .string(code)
                o["pkceVerifier"] = .string(verifier)
                o["pollingId"] = .string(pollingId)
            case .refresh(let jwt):
                o["kind"] = "refresh"
                o["jwt"] = .string(jwt)
            }
            return (.object(o), nil)
        case .region(let effect):
            switch effect {
            case .persistRegion(let r):
                return (["action": "region.persist", "region": .string(r.rawValue)], nil)
            case .retireAttempts(let ids, let origin):
                return (["action": "region.retireAttempts", "attempts": .array(ids.map { .int(Int64(bitPattern: $0.rawValue)) }),
                         "region": .string(origin.region.rawValue), "epoch": .int(Int64(bitPattern: origin.epoch))], nil)
            case .publishRegion(let origin):
                return (["action": "region.publish", "region": .string(origin.region.rawValue),
                         "epoch": .int(Int64(bitPattern: origin.epoch))], nil)
            }
        case .deliverTerminalOutput(let frame):
            return (["action": "deliverTerminalOutput", "sessionId": .string(frame.sessionId), "bytes": .int(Int64(frame.data.count))], nil)
        case .phaseChanged(let phase):
            var o: [String: JSONValue] = ["action": "phaseChanged"]
            switch phase {
            case .idle: o["phase"] = "idle"
            case .connecting(let g): o["phase"] = "connecting"; o["gen"] = gen(g)
            case .registering(let g): o["phase"] = "registering"; o["gen"] = gen(g)
            case .registered(let g, let s): o["phase"] = "registered"; o["gen"] = gen(g); o["relaySessionId"] = .string(s)
            case .linking(let g): o["phase"] = "linking"; o["gen"] = gen(g)
            case .waitingToReconnect(let a): o["phase"] = "waitingToReconnect"; o["attempt"] = .int(Int64(a))
            case .suspended(let r): o["phase"] = "suspended"; o["reason"] = .string(r.rawValue)
            case .stopped(let r): o["phase"] = "stopped"; o["reason"] = .string(r.description)
            }
            return (.object(o), phase.generation)
        case .connectionFailed(let g, let failure):
            return (["action": "connectionFailed", "gen": gen(g), "reason": .string(failure.description)], g)
        case .desktopStatusChanged(let status):
            return (["action": "desktopStatusChanged", "status": .string(status.description)], nil)
        case .epochOpened(let epoch, let reason, let deadline):
            return (["action": "epochOpened", "epoch": .int(Int64(bitPattern: epoch)), "reason": .string(reason.rawValue),
                     "deadline": .int(deadline.nanoseconds)], nil)
        case .diagnostic(let d):
            var o = d.record.members
            o["action"] = "diagnostic"
            return (.object(o), nil)
        case .openTransport(let g, _, _), .send(let g, _, _), .closeTransport(let g, _, _):
            return (["action": "transport"], g)  // never reached: these have their own record kinds
        }
    }

    static func mutationJSON(_ m: OfflineMutation) -> JSONValue {
        ["idempotencyKey": .string(m.idempotencyKey), "method": .string(m.method), "params": m.params,
         "createdAt": .int(m.createdAt.nanoseconds)]
    }

    static func failureJSON(_ f: CallFailure) -> JSONValue {
        switch f {
        case .unknownMethod(let m): ["kind": "unknownMethod", "method": .string(m)]
        case .missingIdempotencyKey(let m): ["kind": "missingIdempotencyKey", "method": .string(m)]
        case .snakeCaseKey(let p): ["kind": "snakeCaseKey", "path": .string(p)]
        case .duplicateRequestId(let id): ["kind": "duplicateRequestId", "requestId": .string(id)]
        case .timedOut(let d): ["kind": "timedOut", "after": .int(d.nanoseconds)]
        case .remote(let code, let message, let data):
            ["kind": "remote", "code": .int(Int64(code)), "message": .string(message), "data": data ?? .null]
        case .connectionClosed(let why): ["kind": "connectionClosed", "reason": .string(why)]
        case .clientStopped(let why): ["kind": "clientStopped", "reason": .string(why)]
        }
    }

    static func ingressJSON(_ e: IngressEffect) -> JSONValue {
        func key(_ k: TimelineKey) -> JSONValue {
            ["sessionId": .string(k.sessionId), "runId": .string(k.runId), "threadId": .string(k.threadId)]
        }
        switch e {
        case .deliverControl(let event):
            return ["action": "ingress.deliverControl", "eventType": .string(event.eventType), "eventId": event.eventId.map { .int($0) } ?? .null]
        case .deliverSnapshot(let s):
            return ["action": "ingress.deliverSnapshot", "sessionId": .string(s.sessionId), "runId": .string(s.runId),
                    "threadId": .string(s.threadId), "revision": .int(s.revision)]
        case .droppedSnapshot(let k, let eventId, let reason):
            var o: [String: JSONValue] = ["action": "ingress.droppedSnapshot", "key": key(k), "eventId": eventId.map { .int($0) } ?? .null]
            switch reason {
            case .superseded: o["reason"] = "superseded"
            case .notLeased: o["reason"] = "notLeased"
            case .undecodable(let e): o["reason"] = "undecodable"; o["error"] = .string(e.description)
            case .overflow: o["reason"] = "overflow"
            case .discarded: o["reason"] = "discarded"
            }
            return .object(o)
        case .rejectedSnapshot(let eventId, let error):
            return ["action": "ingress.rejectedSnapshot", "eventId": eventId.map { .int($0) } ?? .null, "error": .string(error.description)]
        case .unexpectedProcessed:
            return ["action": "ingress.unexpectedProcessed"]
        }
    }

    static func identityEffectJSON(_ e: IdentityEffect) -> JSONValue {
        switch e {
        case .readIdentity: return ["action": "identity.read"]
        case .ready(let deviceId, let login):
            var o: [String: JSONValue] = ["action": "identity.ready", "deviceId": .string(deviceId)]
            if let login { o["login"] = loginJSON(login) }
            return .object(o)
        case .offerResetDeviceIdentity: return ["action": "identity.offerReset"]
        case .resetDeviceIdentity: return ["action": "identity.reset"]
        case .ignored(let why):  // the machine reports these as diagnostics; the same record here
            var o = why.record.members
            o["action"] = "diagnostic"
            return .object(o)
        }
    }

    static func authEffectJSON(_ e: AuthEffect) -> JSONValue {
        switch e {
        case .openBrowser(let path, let pollingId, let challenge):
            return ["action": "auth.openBrowser", "path": .string(path), "pollingId": .string(pollingId), "pkceChallenge": .string(challenge)]
        case .http(let r): return ["action": "auth.http", "id": .int(Int64(bitPattern: r.id.rawValue)), "path": .string(r.kind.path)]
        case .arm(let t, let d): return ["action": "auth.arm", "timer": .string("\(t)"), "deadline": .int(d.nanoseconds)]
        case .cancel(let t): return ["action": "auth.cancel", "timer": .string("\(t)")]
        case .loggedIn(let l): return ["action": "auth.loggedIn", "login": loginJSON(l)]
        case .loginFailed(let f): return ["action": "auth.loginFailed", "reason": .string(f.description)]
        case .tokenUpdated(let l): return ["action": "auth.tokenUpdated", "login": loginJSON(l)]
        case .sessionEnded(let r): return ["action": "auth.sessionEnded", "reason": .string(r.description)]
        case .ignored(let why):  // the machine reports these as diagnostics; the same record here
            var o = why.record.members
            o["action"] = "diagnostic"
            return .object(o)
        }
    }
}
