import RelayClient
import RelayProtocol

extension ClientRecordCodec {
    /// The canonical JSON bytes of the most frequent actions, written directly (no `JSONValue` objects,
    /// no key sorting at run time), or nil for an action without a direct writer. The bytes are exactly
    /// `actionJSON(action).0.serialized()`: keys below are written in UTF-8 byte order by hand, and the
    /// tests compare both paths for every case.
    static func directActionBytes(_ action: ClientAction) -> [UInt8]? {
        var w = CanonicalJSONWriter()
        switch action {
        case .armTimer(let id, let deadline):
            w.raw("{\"action\":\"armTimer\",\"deadline\":")
            w.int(deadline.nanoseconds)
            w.key("timer")
            writeTimer(id, into: &w)
            w.raw("}")
        case .cancelTimer(let id):
            w.raw("{\"action\":\"cancelTimer\",\"timer\":")
            writeTimer(id, into: &w)
            w.raw("}")
        case .phaseChanged(let phase):
            w.raw("{\"action\":\"phaseChanged\"")
            switch phase {
            case .idle:
                w.raw(",\"phase\":\"idle\"")
            case .connecting(let g):
                w.key("gen")
                w.int(Int64(bitPattern: g.rawValue))
                w.raw(",\"phase\":\"connecting\"")
            case .registering(let g):
                w.key("gen")
                w.int(Int64(bitPattern: g.rawValue))
                w.raw(",\"phase\":\"registering\"")
            case .registered(let g, let s):
                w.key("gen")
                w.int(Int64(bitPattern: g.rawValue))
                w.raw(",\"phase\":\"registered\"")
                w.key("relaySessionId")
                w.string(s)
            case .linking(let g):
                w.key("gen")
                w.int(Int64(bitPattern: g.rawValue))
                w.raw(",\"phase\":\"linking\"")
            case .waitingToReconnect(let a):
                w.key("attempt")
                w.int(Int64(a))
                w.raw(",\"phase\":\"waitingToReconnect\"")
            case .suspended(let r):
                w.raw(",\"phase\":\"suspended\"")
                w.key("reason")
                w.string(r.rawValue)
            case .stopped(let r):
                w.raw(",\"phase\":\"stopped\"")
                w.key("reason")
                w.string(r.description)
            }
            w.raw("}")
        case .ingress(.deliverSnapshot(let s)):
            w.raw("{\"action\":\"ingress.deliverSnapshot\",\"revision\":")
            w.int(s.revision)
            w.key("runId")
            w.string(s.runId)
            w.key("sessionId")
            w.string(s.sessionId)
            w.key("threadId")
            w.string(s.threadId)
            w.raw("}")
        case .ingress(.deliverControl(let event)):
            w.raw("{\"action\":\"ingress.deliverControl\",\"eventId\":")
            if let id = event.eventId { w.int(id) } else { w.raw("null") }
            w.key("eventType")
            w.string(event.eventType)
            w.raw("}")
        case .callCompleted(let id, let outcome):
            w.raw("{\"action\":\"callCompleted\",\"callId\":")
            w.int(Int64(bitPattern: id.rawValue))
            switch outcome {
            case .success(let result):
                w.raw(",\"outcome\":\"success\",\"result\":")
                w.value(result)
            case .failure(let f):
                w.key("failure")
                w.value(failureJSON(f))
                w.raw(",\"outcome\":\"failure\"")
            case .queued(let key):
                w.key("idempotencyKey")
                w.string(key)
                w.raw(",\"outcome\":\"queued\"")
            }
            w.raw("}")
        case .desktopStatusChanged(let status):
            w.raw("{\"action\":\"desktopStatusChanged\",\"status\":")
            w.string(status.description)
            w.raw("}")
        case .epochOpened(let epoch, let reason, let deadline):
            w.raw("{\"action\":\"epochOpened\",\"deadline\":")
            w.int(deadline.nanoseconds)
            w.key("epoch")
            w.int(Int64(bitPattern: epoch))
            w.key("reason")
            w.string(reason.rawValue)
            w.raw("}")
        case .connectionFailed(let g, let failure):
            w.raw("{\"action\":\"connectionFailed\",\"gen\":")
            w.int(Int64(bitPattern: g.rawValue))
            w.key("reason")
            w.string(failure.description)
            w.raw("}")
        default:
            return nil
        }
        return w.bytes
    }

    /// `timerJSON(id).serialized()`, written directly (keys in UTF-8 byte order).
    static func writeTimer(_ id: TimerID, into w: inout CanonicalJSONWriter) {
        switch id {
        case .handshake(let g): genTimer(g, "{\"gen\":", ",\"timer\":\"handshake\"}", &w)
        case .heartbeat(let g): genTimer(g, "{\"gen\":", ",\"timer\":\"heartbeat\"}", &w)
        case .watchdog(let g): genTimer(g, "{\"gen\":", ",\"timer\":\"watchdog\"}", &w)
        case .reRegister(let g): genTimer(g, "{\"gen\":", ",\"timer\":\"reRegister\"}", &w)
        case .sendRetry(let g, let slot):
            w.raw("{\"gen\":")
            w.int(Int64(bitPattern: g.rawValue))
            w.key("slot")
            w.int(Int64(bitPattern: slot))
            w.raw(",\"timer\":\"sendRetry\"}")
        case .rpcTimeout(let requestId, let ownership):
            w.raw("{\"ownership\":")
            w.int(Int64(bitPattern: ownership))
            w.key("requestId")
            w.string(requestId)
            w.raw(",\"timer\":\"rpcTimeout\"}")
        case .reconnect(let attempt):
            w.raw("{\"attempt\":")
            w.int(Int64(attempt))
            w.raw(",\"timer\":\"reconnect\"}")
        case .epochDeadline(let e):
            w.raw("{\"epoch\":")
            w.int(Int64(bitPattern: e))
            w.raw(",\"timer\":\"epochDeadline\"}")
        case .probe(let e):
            w.raw("{\"epoch\":")
            w.int(Int64(bitPattern: e))
            w.raw(",\"timer\":\"probe\"}")
        case .foregroundRecovery: w.raw("{\"timer\":\"foregroundRecovery\"}")
        case .auth(.poll): w.raw("{\"timer\":\"auth.poll\"}")
        case .auth(.refresh): w.raw("{\"timer\":\"auth.refresh\"}")
        case .interest(.renewal(let d)):
            w.raw("{\"desktopId\":")
            w.string(d)
            w.raw(",\"timer\":\"interest.renewal\"}")
        case .interest(.retry(let d)):
            w.raw("{\"desktopId\":")
            w.string(d)
            w.raw(",\"timer\":\"interest.retry\"}")
        }
    }

    @inline(__always)
    private static func genTimer(_ g: Generation, _ head: StaticString, _ tail: StaticString, _ w: inout CanonicalJSONWriter) {
        w.raw(head)
        w.int(Int64(bitPattern: g.rawValue))
        w.raw(tail)
    }
}
