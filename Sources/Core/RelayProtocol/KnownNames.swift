/// The names of the protocol that people type into RelayTrace (filters, break expressions, fault scripts),
/// so that a misspelt one is refused with a suggestion instead of matching nothing in silence.
public enum KnownNames {
    /// Every message `type` of the device-link protocol: client to relay, relay to client, the link
    /// messages (docs/DEVICE_LINK.md) and the older kinds of seed 003 that a dissector names.
    public static let messageTypes: [String] = {
        let t = RelayMessage.TypeName.self
        let current = [t.register, t.heartbeat, t.ping, t.pong, t.rpcRequest, t.rpcResponse, t.event, t.eventAck,
                       t.terminalBind, t.terminalUnbind, t.terminalBound, t.registered, t.resumed, t.error]
        return current + LinkMessage.TypeName.all.sorted() + t.legacyKinds.sorted()
    }()

    /// Every event type (`eventType`) the protocol names.
    public static let eventTypes: [String] = EventNames.all

    /// Every RPC method of the catalogue.
    public static let methods: [String] = RpcCatalogue.all.map(\.name)

    /// The candidate closest to `value` when it is close enough to be a slip of the keyboard: the same
    /// name in another case, or at most about a third of its characters wrong (edit distance); nil when
    /// none is. Ties go to the earlier candidate.
    public static func suggestion(for value: String, among candidates: some Sequence<String>) -> String? {
        let lower = value.lowercased()
        var best: (name: String, distance: Int)?
        for c in candidates {
            if c == value { return c }
            let d = c.lowercased() == lower ? 0 : editDistance(lower, c.lowercased())
            if d < (best?.distance ?? .max) { best = (c, d) }
        }
        guard let best else { return nil }
        let allowed = max(2, value.count / 3)
        return best.distance <= allowed ? best.name : nil
    }

    /// ` did you mean 'x'?` for a misspelt `value`, or the empty string.
    public static func didYouMean(_ value: String, among candidates: some Sequence<String>) -> String {
        suggestion(for: value, among: candidates).map { "; did you mean '\($0)'?" } ?? ""
    }

    /// The Levenshtein distance between two strings (insertions, deletions, substitutions), by characters.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a), y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }
}
