import RelayProtocol
import WatchLink

/// The session that is live on the phone in these tests.
let live = SessionID("8E1F0C52-LIVE")
/// A session the phone has ended.
let ended = SessionID("3B7A9D10-ENDED")
/// Two incarnation tokens.
let tokenA = IncarnationToken(high: 0xA, low: 1)
let tokenB = IncarnationToken(high: 0xB, low: 2)

/// A command with `seq` for `session`; the payload names the sequence so tests can tell commands apart.
func envelope(_ seq: UInt64, _ token: IncarnationToken = tokenA, session: SessionID = live) -> CommandEnvelope {
    CommandEnvelope(sequence: seq, incarnation: token,
                    command: WatchCommand(session: session, payload: .adjustRest(deltaSeconds: Int64(seq % 1000))))
}

/// A set completion as the wrist shows it.
func completeSet(_ reps: Int64, weightGrams: Int64? = 50_000, session: SessionID = live) -> WatchCommand {
    WatchCommand(session: session, payload: .completeSet(SetEntry(exerciseIndex: 0, setOffset: 0,
                                                                  weightGrams: weightGrams, reps: reps)))
}

extension Array where Element == ReceiverAction {
    /// The sequence numbers executed, in order.
    var executed: [UInt64] { compactMap { if case .execute(let c) = $0 { c.sequence } else { nil } } }
    /// The sequence numbers rejected by the session guard, in order.
    var rejected: [UInt64] { compactMap { if case .rejected(let c, _) = $0 { c.sequence } else { nil } } }
    /// The acknowledgements sent, in order.
    var acks: [UInt64] { compactMap { if case .sendAck(let a) = $0 { a.next } else { nil } } }
}

extension Array where Element == WatchAction {
    /// The commands sent, in order, with whether each was a resend.
    var sent: [UInt64] { compactMap { if case .send(let c, _) = $0 { c.sequence } else { nil } } }
    /// The commands resent.
    var resent: [UInt64] { compactMap { if case .send(let c, true) = $0 { c.sequence } else { nil } } }
    /// The confirmations shown.
    var confirmations: [TapConfirmation] { compactMap { if case .confirm(let c) = $0 { c } else { nil } } }
    /// The floors persisted.
    var persisted: [UInt64] { compactMap { if case .persist(let r) = $0 { r.value } else { nil } } }
}

/// A watch sender launched at `clock` ms with `floor`, from generator seed `seed`.
func launchWatch(clock: UInt64 = 1_718_000_000_000, floor: UInt64? = nil, seed: UInt64 = 1,
                 reachable: Bool = true) -> WatchSender {
    var rng = SeededRandom(seed: seed)
    return WatchSender(clockMilliseconds: clock, storedFloor: floor, rng: &rng, reachable: reachable)
}

/// The acknowledgement `next` for `sender`'s incarnation.
func ack(_ next: UInt64, for sender: WatchSender) -> WatchInput {
    .ackReceived(CommandAck(next: next, incarnation: sender.incarnation))
}
