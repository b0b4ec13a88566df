import Inspect
import RelayProtocol
import Synchronization
import Trace
import Sync

/// The names a user types for message types, record kinds, event types and RPC methods (`frames
/// --type/--event/--method`, `replay --break type=/event=/method=`), checked against the protocol's
/// vocabulary (``KnownNames``) so that a misspelt one is a usage error with a suggestion, not a filter
/// that matches nothing.
enum NameCheck {
    /// One vocabulary: what it is called in messages and its names.
    struct Vocabulary {
        var what: String
        var option: String
        var names: [String]
        /// Listed in the error when no suggestion is close (short lists only).
        var listed: Bool
    }

    /// Record kinds a filter can name (`transportClosed`, `input`...).
    static let recordKinds: [String] = RecordKind.known.map(\.name).filter { $0 != "header" }

    static let types = Vocabulary(what: "a message type or record kind", option: "--type", names: KnownNames.messageTypes + recordKinds, listed: true)
    static let events = Vocabulary(what: "an event type", option: "--event", names: KnownNames.eventTypes, listed: true)
    static let methods = Vocabulary(what: "an RPC method", option: "--method", names: KnownNames.methods, listed: false)

    /// Checks each of `values` against `vocabulary`; the first unknown one is a usage error that says
    /// what was meant: the closest name, or the option the name belongs to (`--event` for an event type
    /// given to `--type`), or the names themselves. `label` names the option in the message.
    static func check(_ values: some Sequence<String>, _ vocabulary: Vocabulary, label: String? = nil, path: [String]) throws(UsageError) {
        let all = [types, events, methods]
        for value in values where !vocabulary.names.contains(value) {
            let name = label ?? vocabulary.option
            var message = "\(name) '\(value)' is not \(vocabulary.what)"
            if let other = all.first(where: { $0.option != vocabulary.option && $0.names.contains(value) }) {
                let key = String(other.option.dropFirst(2))
                message += "; '\(value)' is \(other.what): use \(label == nil ? "--\(key) \(value)" : "\(key)=\(value)")"
            } else if let s = KnownNames.suggestion(for: value, among: vocabulary.names) {
                message += "; did you mean '\(s)'?"
            } else if vocabulary.listed {
                message += " (one of: \(vocabulary.names.joined(separator: ", ")))"
            } else {
                message += " of the catalogue (\(vocabulary.names.count) methods, docs/PROTOCOL.md §7)"
            }
            throw UsageError(message: message, commandPath: path)
        }
    }
}

/// Which filter values the records printed by `frames` held, to warn about a legal value that matched
/// nothing (`--method session.get` on a trace without one). Safe to fill from any thread.
final class FilterHits: Sendable {
    private let seen = Locked<(types: Set<String>, events: Set<String>, methods: Set<String>, ids: Set<String>, answered: Set<String>)>(([], [], [], [], []))

    /// Notes what a printed record holds.
    func note(_ rec: InspectedRecord) {
        seen.withLock { s in
            s.types.insert(rec.record.kind.name)
            if let t = rec.type { s.types.insert(t) }
            if let e = rec.eventType { s.events.insert(e) }
            if let m = rec.method { s.methods.insert(m) }
            if let i = rec.rpcId ?? rec.namedRequestId { s.ids.insert(i) }
            if rec.type == "rpc.response", let i = rec.rpcId { s.answered.insert(i) }
        }
    }

    /// The warnings for `filter`'s values that no printed record held, and the note for each `--rpc-id`
    /// whose request got no response (with the command that tells how it ended).
    func warnings(_ filter: FrameFilter, file: String) -> [String] {
        let s = seen.withLock { $0 }
        var out: [String] = []
        func absent(_ option: String, _ values: Set<String>?, _ found: Set<String>) {
            for v in (values ?? []).sorted() where !found.contains(v) {
                out.append("warning: no record matched \(option) \(v) (with the other filters) in \(file)")
            }
        }
        absent("--type", filter.types, s.types)
        absent("--event", filter.events, s.events)
        absent("--method", filter.methods, s.methods)
        absent("--rpc-id", filter.rpcIds, s.ids)
        for id in (filter.rpcIds ?? []).sorted() where s.ids.contains(id) && !s.answered.contains(id) {
            out.append("note: request \(id) got no response here; 'relaytrace frames \(file) --follow \(id)' shows how it ended")
        }
        return out
    }
}
