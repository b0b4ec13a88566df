import Net
import WebSocket
import WireRecording

/// The sockets a relay host serves (``RelayHost``, ``ReplayHost``), by its machine's connection ID: each
/// waits for the machine's upgrade decision, is then open until it ends, and carries its recording (`relay
/// --record`, `relay --replay --record`). Kept in the host's state, touched on the machine's loop.
struct ServedSockets<ID: Hashable> {
    private var pending: [ID: LoopWebSocket] = [:]
    private var open: [ID: LoopWebSocket] = [:]
    private var recorded: [ID: WireSocket] = [:]

    /// A socket whose upgrade the machine is to decide, with its recording (nil: not recorded).
    mutating func admit(_ id: ID, _ connection: LoopWebSocket, recording socket: WireSocket?) {
        pending[id] = connection
        if let socket { recorded[id] = socket }
    }

    /// The machine decided `id`'s upgrade: an accepted socket is open from now on, a refused one is
    /// forgotten. Nil when the socket no longer waits for a decision.
    mutating func decide(_ id: ID, accept: Bool) -> (connection: LoopWebSocket, socket: WireSocket?)? {
        guard let connection = pending.removeValue(forKey: id) else { return nil }
        guard accept else { return (connection, recorded.removeValue(forKey: id)) }
        open[id] = connection
        return (connection, recorded[id])
    }

    /// An open socket with its recording; nil when `id` is not open (refused, ended, never admitted).
    func openSocket(_ id: ID) -> (connection: LoopWebSocket, socket: WireSocket?)? {
        open[id].map { ($0, recorded[id]) }
    }

    /// The socket `id` ended.
    mutating func ended(_ id: ID) {
        open.removeValue(forKey: id)
        recorded.removeValue(forKey: id)
    }

    /// The server stopped with sockets still waiting for a decision: their recordings say refused, 503
    /// with `reason`, in `order`; they are forgotten.
    mutating func refuseUndecided(reason: String, order: (ID, ID) -> Bool) {
        for id in pending.keys.sorted(by: order) {
            recorded.removeValue(forKey: id)?.refused(status: 503, reason: reason)
        }
        pending.removeAll()
    }
}

/// Carries out a machine's upgrade decision on a socket `decide` handed out: records it, then refuses with
/// `refusal` (status and body) or accepts and hands every later event of the socket to `events`.
func performUpgradeDecision(_ decided: (connection: LoopWebSocket, socket: WireSocket?), refusal: (status: Int, body: String)?,
                            events: @escaping @Sendable (WebSocketEvent, WireSocket?) -> Void) {
    let (connection, socket) = decided
    if let refusal {
        socket?.refused(status: refusal.status, reason: refusal.body)
        connection.refuse(status: refusal.status, body: refusal.body)
    } else {
        socket?.opened(status: 101)
        connection.accept { _, event in events(event, socket) }
    }
}
