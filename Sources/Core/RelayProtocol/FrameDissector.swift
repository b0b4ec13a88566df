/// What a `WireFrame` contains, as far as the protocol layer can tell: the frame dissector the CLI and
/// the replayer share.
public enum DissectedFrame: Sendable, Hashable {
    /// A text frame holding a relay message.
    case message(RelayMessage)
    /// A binary PTC1 terminal frame.
    case terminal(TerminalFrame)
    /// A text frame that is not a relay message (not JSON, or a known type with bad fields).
    case malformedText(MessageDecodeError)
    /// A binary frame that is not PTC1.
    case malformedBinary(TerminalFrameError)

    /// One line for listings, e.g. `rpc.request id=R1 method=session.update key=K1`,
    /// `event device-status #42 from=relay`, `PTC1 session=t1 5 bytes "hello"`.
    public var summary: String {
        switch self {
        case .message(let m): m.summary
        case .terminal(let t): "PTC1 session=\(t.sessionId) \(t.data.count) bytes \"\(t.printablePreview(maxBytes: 48))\""
        case .malformedText(let e): "malformed text: \(e)"
        case .malformedBinary(let e): "malformed binary: \(e)"
        }
    }
}

extension WireFrame {
    /// Dissects this frame: text as a relay message, binary as PTC1. Never throws; malformed frames
    /// come back as `.malformedText` / `.malformedBinary`.
    public func dissect() -> DissectedFrame {
        switch self {
        case .text(let s):
            do throws(MessageDecodeError) {
                return .message(try RelayMessage(decodingText: s))
            } catch {
                return .malformedText(error)
            }
        case .binary(let b):
            do throws(TerminalFrameError) {
                return .terminal(try TerminalFrame(decoding: b))
            } catch {
                return .malformedBinary(error)
            }
        }
    }
}

extension RelayMessage {
    /// One line naming the message and its salient fields (resume tokens are shown only as present).
    public var summary: String {
        var parts = [typeName]
        func add(_ key: String, _ value: String?) { if let value { parts.append("\(key)=\(value)") } }
        switch self {
        case .register(let p):
            add("deviceId", p.deviceId)
            add("relaySessionId", p.relaySessionId)
            add("token", p.resumeToken.map { _ in "yes" })
            add("lastEventId", p.lastEventId.map { String($0) })
            add("v", p.relayProtocolVersion)
            add("target", p.targetDesktopDeviceId)
        case .heartbeat(let p):
            add("activeSessionId", p.activeSessionId)
        case .ping, .pong:
            break
        case .rpcRequest(let r):
            add("id", r.id)
            add("method", r.method)
            add("key", r.idempotencyKey)
            add("traceparent", r.traceparent?.header)
        case .rpcResponse(let r):
            add("id", r.id)
            if let e = r.error {
                parts.append("error=\(e.code) \"\(e.message)\"")
            } else {
                parts.append("ok")
            }
            if r.isFinal == true { parts.append("final") }
            add("traceparent", r.traceparent?.header)
        case .event(let e):
            parts.append(e.eventType)
            if let id = e.eventId { parts.append("#\(id)") }
            add("from", e.sourceDeviceId)
            add("to", e.targetDeviceId)
        case .eventAck(let a):
            add("lastEventId", String(a.lastEventId))
        case .terminalBind(let t), .terminalUnbind(let t):
            add("sessionId", t.sessionId)
            if t.includeSnapshot == true { parts.append("snapshot") }
            if t.forceSnapshot == true { parts.append("force") }
        case .terminalBound(let sessionId):
            add("sessionId", sessionId)
        case .registered(let r):
            add("sessionId", r.sessionId)
            add("expiresAt", r.expiresAt)
        case .resumed(let r):
            add("sessionId", r.sessionId)
            add("expiresAt", r.expiresAt)
        case .error(let e):
            parts.append(e.code.rawValue)
            parts.append("\"\(e.message)\"")
        case .link(let l):
            parts += l.summaryParts
        case .legacy:
            parts.append("(pre-1.6 kind)")
        case .unknown:
            parts.append("(unknown type)")
        }
        return parts.joined(separator: " ")
    }
}
