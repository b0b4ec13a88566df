import RelayClient
import RelayProtocol
import Trace

/// A direct reader for the input records replay meets most often, in the exact canonical bytes
/// `ClientRecordCodec.record(_:at:)` writes (keys sorted, no whitespace, plain ASCII strings, canonical
/// non-negative integers). Anything else, including any valid but differently written JSON, gives nil and
/// is left to the general decoder, so the fast path can only agree with it (ClientRecordCodecTests check
/// that for every input case).
enum InputFastPath {
    /// The input `payload` (of a `timerFired` or `input` record) stands for, or nil to use the general path.
    static func decode(_ payload: [UInt8], kind: RecordKind) -> ClientInput? {
        payload.withUnsafeBufferPointer { b -> ClientInput? in
            var r = CanonicalReader(bytes: b)
            switch kind {
            case .timerFired: return r.timer()
            case .input: return r.input()
            default: return nil
            }
        }
    }
}

/// A cursor over canonical JSON bytes; every method returns nil (or false) on the first byte that is not
/// exactly what the canonical writer would have written.
private struct CanonicalReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    /// Consumes `literal` if the bytes at the cursor are exactly it.
    mutating func take(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count - index >= n else { return false }
        let p = literal.utf8Start
        for k in 0..<n where bytes[index + k] != p[k] { return false }
        index += n
        return true
    }

    /// A canonical non-negative integer (`0` or digits without a leading zero) that fits in an Int64.
    mutating func uint() -> UInt64? {
        let start = index
        var v: UInt64 = 0
        while index < bytes.count, bytes[index] &- 0x30 < 10 {
            guard index - start < 18 else { return nil }  // 18 digits always fit; longer ones go the general way
            v = v * 10 + UInt64(bytes[index] &- 0x30)
            index += 1
        }
        guard index > start, !(bytes[start] == 0x30 && index - start > 1) else { return nil }
        return v
    }

    /// A string of printable ASCII without `"` or `\` (which JSON writes as itself), after its opening quote;
    /// consumes the closing quote.
    mutating func plainString() -> String? {
        let start = index
        while index < bytes.count {
            let c = bytes[index]
            if c == 0x22 {
                let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return s
            }
            guard c >= 0x20, c < 0x7F, c != 0x5C else { return nil }
            index += 1
        }
        return nil
    }

    /// `{"gen":N,"timer":"heartbeat"}` and the other generation timers, `{"timer":"foregroundRecovery"}`,
    /// `{"desktopId":"D","timer":"interest.renewal"}` (and `interest.retry`).
    mutating func timer() -> ClientInput? {
        if take(#"{"gen":"#) {
            guard let g = uint(), take(#","timer":""#), let name = plainString(), take("}"), atEnd else { return nil }
            let gen = Generation(g)
            switch name {
            case "heartbeat": return .timerFired(.heartbeat(gen))
            case "watchdog": return .timerFired(.watchdog(gen))
            case "handshake": return .timerFired(.handshake(gen))
            case "reRegister": return .timerFired(.reRegister(gen))
            default: return nil
            }
        }
        if take(#"{"desktopId":""#) {
            guard let d = plainString(), take(#","timer":"interest."#) else { return nil }
            if take(#"renewal"}"#), atEnd { return .timerFired(.interest(.renewal(desktopId: d))) }
            if take(#"retry"}"#), atEnd { return .timerFired(.interest(.retry(desktopId: d))) }
            return nil
        }
        if take(#"{"timer":"foregroundRecovery"}"#), atEnd { return .timerFired(.foregroundRecovery) }
        return nil
    }

    /// `snapshotProcessed`, `call` without options and with empty params, `appState`, `networkPath`,
    /// `interest.claim` and `interest.release`, each in its canonical bytes.
    mutating func input() -> ClientInput? {
        if take(#"{"input":""#) {
            if take(#"snapshotProcessed"}"#) { return atEnd ? .snapshotProcessed : nil }
            if take(#"appState","state":""#) {
                guard let s = plainString(), take("}"), atEnd, let state = AppState(rawValue: s) else { return nil }
                return .appState(state)
            }
            if take(#"networkPath","path":""#) {
                guard let p = plainString(), take("}"), atEnd else { return nil }
                if p == "unsatisfied" { return .networkPath(.unsatisfied) }
                guard let i = NetworkInterface(rawValue: p) else { return nil }
                return .networkPath(.satisfied(i))
            }
            return nil
        }
        if take(#"{"callId":"#) {
            guard let id = uint(), take(#","input":"call","method":""#), let method = plainString(),
                  take(#","params":{}}"#), atEnd else { return nil }
            return .call(CallRequest(callId: CallID(id), method: method, params: .object([:])))
        }
        if take(#"{"baseSessionId":""#) {
            guard let s = plainString(), take(#","claimId":"#), let id = uint(), take(#","input":"interest.claim"}"#), atEnd
            else { return nil }
            return .interest(.claim(ClaimID(id), baseSessionId: s))
        }
        if take(#"{"claimId":"#) {
            guard let id = uint(), take(#","input":"interest.release"}"#), atEnd else { return nil }
            return .interest(.release(ClaimID(id)))
        }
        return nil
    }
}
