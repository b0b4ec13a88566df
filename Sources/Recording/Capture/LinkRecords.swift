import RelayClient
import RelayProtocol

/// Device linking's inputs and actions as record JSON (docs/TRACE_FORMAT.md, "Relay client records").
extension ClientRecordCodec {
    static func linkInputJSON(_ input: LinkInput) -> JSONValue {
        switch input {
        case .enterCode(let text): ["input": "link.enterCode", "text": .string(text)]
        case .scanCode(let text): ["input": "link.scanCode", "text": .string(text)]
        case .stored(let ownership, let resume):
            ["input": "link.stored", "ownership": .int(Int64(bitPattern: ownership)), "resume": resume.map(resumeJSON) ?? .null]
        case .storeFailed(let why): ["input": "link.storeFailed", "reason": .string(why)]
        }
    }

    static func linkInput(_ o: Fields) throws(CodecError) -> LinkInput {
        switch try o.string("input") {
        case "link.enterCode": return .enterCode(try o.string("text"))
        case "link.scanCode": return .scanCode(try o.string("text"))
        case "link.stored":
            let resume = try o.optionalObject("resume").map { r throws(CodecError) in
                ResumeCredentials(relaySessionId: try r.string("relaySessionId"), resumeToken: try r.string("resumeToken"))
            }
            return .stored(ownership: UInt64(bitPattern: try o.int("ownership")), storedResume: resume)
        default: return .storeFailed(try o.string("reason"))
        }
    }

    static func linkedDesktopJSON(_ d: LinkedDesktop) -> JSONValue {
        ["deviceId": .string(d.deviceId), "name": .string(d.name), "linkedAt": .int(d.linkedAt)]
    }

    static func linkEffectJSON(_ effect: LinkEffect) -> JSONValue {
        switch effect {
        case .store(let d):
            return ["action": "link.store", "desktop": linkedDesktopJSON(d)]
        case .finished(.linked(let d)):
            return ["action": "link.finished", "outcome": "linked", "desktop": linkedDesktopJSON(d)]
        case .finished(.failed(let f)):
            var o: [String: JSONValue] = ["action": "link.finished", "outcome": "failed", "reason": .string(f.description)]
            switch f {
            case .malformedCode: o["failure"] = "malformedCode"
            case .notRunning: o["failure"] = "notRunning"
            case .noNetworkPath: o["failure"] = "noNetworkPath"
            case .busy: o["failure"] = "busy"
            case .refused(let code, _): o["failure"] = "refused"; o["code"] = .string(code)
            case .connectionFailed: o["failure"] = "connectionFailed"
            case .storeFailed: o["failure"] = "storeFailed"
            }
            return .object(o)
        }
    }
}
