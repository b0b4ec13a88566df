import RelayClient
import RelayProtocol
import RelayTestSupport
import Testing

/// A 24-hour session on virtual time: path changes, backgrounding, chats opening and closing, calls;
/// a scripted relay answers everything. It must end with no leaked timers, calls or generations, and never
/// have two live generations at once.
@Suite struct LongSessionTests {
    /// Answers the machine like a healthy relay and desktop would; tracks live generations.
    struct AutoPeer {
        var live: Set<Generation> = []
        var maxLive = 0
        var opened = 0
        var registrations = 0
        var interestFrames = 0
        var calls = 0

        /// Answers every unread action, and the actions of the answers, until the machine is quiet.
        mutating func settle(_ h: inout ClientHarness) {
            var pending = h.takeActions()
            var guardCount = 0
            while !pending.isEmpty {
                guardCount += 1
                precondition(guardCount < 10_000, "the machine and the peer are ping-ponging")
                if let answer = respond(to: pending.removeFirst()) {
                    h.feed(answer)
                    pending += h.takeActions()
                }
            }
        }

        /// Feeds `input` (the app's side of the session) and lets the peer answer.
        mutating func feed(_ input: ClientInput, _ h: inout ClientHarness) {
            h.feed(input)
            settle(&h)
        }

        /// Records `action` and returns the peer's answer to it, if it has one.
        mutating func respond(to action: ClientAction) -> ClientInput? {
            switch action {
            case .openTransport(let g, _, _):
                live.insert(g)
                maxLive = max(maxLive, live.count)
                opened += 1
                return .transportOpened(g)
            case .closeTransport(let g, _, _):
                live.remove(g)
            case .send(let g, _, _):
                switch action.sentMessage {
                case .register(let p)?:
                    registrations += 1
                    if p.resumeToken != nil {
                        return .transportFrame(g, RelayFrames.resumed(sessionId: p.relaySessionId ?? ""))
                    }
                    return .transportFrame(g, RelayFrames.registered())
                case .heartbeat?:
                    return .transportFrame(g, RelayFrames.pong)
                case .rpcRequest(let r)?:
                    calls += 1
                    return .transportFrame(g, RelayFrames.response(id: r.id, result: ["ok": true], traceparent: r.traceparent))
                case .event(let e)? where e.eventType == "chat:timeline-interest":
                    interestFrames += 1
                default:
                    break
                }
            default:
                break
            }
            return nil
        }

        /// Advances to `target`, letting the peer answer after every timer.
        mutating func advance(_ h: inout ClientHarness, to target: Moment) {
            while let next = h.armedTimers.first, next.deadline <= target {
                h.advance(to: next.deadline)
                settle(&h)
            }
            h.advance(to: target)
            settle(&h)
        }
    }

    @Test func twentyFourVirtualHoursEndWithNothingLeakedAndNeverTwoLiveGenerations() throws {
        var h = ClientHarness(seed: 2024)
        var peer = AutoPeer()
        var rng = SeededRandom(seed: 99)
        peer.feed(.networkPath(.satisfied(.wifi)), &h)
        peer.feed(TestIdentity.start(resume: TestIdentity.storedResume), &h)

        var interface = NetworkInterface.wifi
        var claims: [ClaimID] = []
        var nextClaim: UInt64 = 1
        var nextCall: UInt64 = 1
        let end = Moment.seconds(24 * 3600)
        var counts: [String: Int] = [:]
        while h.now < end {
            peer.advance(&h, to: h.now + .seconds(Double(1 + rng.next(upperBound: 90 as UInt64))))
            let roll = rng.next(upperBound: 100 as UInt64)
            switch roll {
            case 0..<3:  // Wi-Fi <-> cellular
                interface = interface == .wifi ? .cellular : .wifi
                peer.feed(.networkPath(.satisfied(interface)), &h)
                counts["switch", default: 0] += 1
            case 3..<5:  // lose the path for a while
                peer.feed(.networkPath(.unsatisfied), &h)
                peer.advance(&h, to: h.now + .seconds(Double(5 + rng.next(upperBound: 120 as UInt64))))
                peer.feed(.networkPath(.satisfied(interface)), &h)
                counts["pathLoss", default: 0] += 1
            case 5..<9:  // background for a while, then back
                peer.feed(.appState(.inactive), &h)
                peer.feed(.appState(.background), &h)
                peer.advance(&h, to: h.now + .seconds(Double(5 + rng.next(upperBound: 900 as UInt64))))
                peer.feed(.appState(.inactive), &h)
                peer.feed(.appState(.active), &h)
                for c in claims where rng.next(upperBound: 2 as UInt64) == 0 { peer.feed(.interest(.confirmVisible(c)), &h) }
                counts["background", default: 0] += 1
            case 9..<10:
                peer.feed(.desktopMediaPlaying(rng.next(upperBound: 2 as UInt64) == 0), &h)
            case 10..<20:  // open a chat
                let c = ClaimID(nextClaim)
                nextClaim += 1
                claims.append(c)
                peer.feed(.interest(.claim(c, baseSessionId: "sess-\(rng.next(upperBound: 5 as UInt64))")), &h)
                counts["claim", default: 0] += 1
            case 20..<28:  // close a chat
                if !claims.isEmpty {
                    peer.feed(.interest(.release(claims.remove(at: Int(rng.next(upperBound: UInt64(claims.count)))))), &h)
                }
            case 28..<45:  // a call
                let method = ["session.list", "job.list", "system.ping", "files.search"][Int(rng.next(upperBound: 4 as UInt64))]
                peer.feed(.call(CallRequest(callId: CallID(nextCall), method: method)), &h)
                nextCall += 1
            case 45..<47:  // the relay drops the socket
                if let g = h.machine.generation {
                    peer.live.remove(g)
                    peer.feed(.transportClosed(g, code: 1006, reason: "reset"), &h)
                }
            default:
                break
            }
            #expect(peer.live.count <= 1, "two live generations at \(h.now): \(peer.live)")
            if peer.live.count > 1 { break }
        }
        #expect(counts["switch", default: 0] > 10 && counts["background", default: 0] > 10 && counts["pathLoss", default: 0] > 5)
        #expect(peer.registrations > 50 && peer.interestFrames > 100 && peer.calls > 100)
        #expect(peer.maxLive == 1)

        h.stop()
        #expect(h.machine.pendingCalls.isEmpty, "no leaked calls")
        #expect(h.machine.generation == nil, "no live generation")
        #expect(h.machine.armedTimers.isEmpty, "no leaked timers in the machine: \(h.machine.armedTimers)")
        h.finish()
    }
}
