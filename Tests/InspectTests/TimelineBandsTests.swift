import Inspect
import RelayProtocol
import Testing
import Trace

/// The timeline's bands and the lanes wire and watch traces add (what the viewer draws).
@Suite struct TimelineBandsTests {
    final class Feed {
        var t = Timeline()
        var n: UInt64 = 0
        func add(_ kind: RecordKind, _ s: Double, gen: UInt64? = nil, dir: FrameDirection? = nil, channel: TraceChannel = .relay, _ payload: String = "") {
            t.add(InspectedRecord(number: n, record: TraceRecord(kind: kind, time: .seconds(s), channel: channel, generation: gen, direction: dir, payload: Array(payload.utf8))))
            n += 1
        }
        func lane(_ name: String) -> [TimelineMark] { t.lanes.first { $0.name == name }?.marks ?? [] }
    }

    static func interest(_ active: Bool) -> String {
        #"{"type":"event","payload":{"eventType":"chat:timeline-interest","payload":{"appSessionId":"A","sessionId":"s1","active":\#(active)}}}"#
    }

    @Test func aLeaseIsHeldUntilTheNextRenewalTheReleaseOrExpiry() {
        let f = Feed()
        f.add(.frameText, 0, gen: 1, dir: .outbound, Self.interest(true))
        f.add(.frameText, 20, gen: 1, dir: .outbound, Self.interest(true))
        f.add(.frameText, 30, gen: 1, dir: .outbound, Self.interest(false))
        f.add(.frameText, 100, gen: 1, dir: .outbound, Self.interest(true))
        f.add(.marker, 300)
        f.t.finish()
        let marks = f.lane("leases")
        #expect(marks.map(\.kind) == [.leaseRenew, .leaseRenew, .leaseRelease, .leaseRenew])
        #expect(marks[0].end == .seconds(20))
        #expect(marks[1].end == .seconds(30))
        #expect(marks[2].end == nil)
        #expect(marks[3].end == .seconds(140))  // never renewed again: held until it expires (40 s)
    }

    @Test func aTimerIsABandFromArmedToFiredOrCancelled() {
        let f = Feed()
        f.add(.action, 1, #"{"action":"armTimer","timer":{"timer":"heartbeat","gen":1},"deadline":26000000000}"#)
        f.add(.timerFired, 26, #"{"timer":"heartbeat","gen":1}"#)
        f.add(.action, 26, #"{"action":"armTimer","timer":{"timer":"watchdog","gen":1},"deadline":41000000000}"#)
        f.add(.action, 30, #"{"action":"cancelTimer","timer":{"timer":"watchdog","gen":1}}"#)
        f.add(.action, 31, #"{"action":"armTimer","timer":{"timer":"probe","epoch":1},"deadline":35000000000}"#)
        f.t.finish()
        let marks = f.lane("timers")
        #expect(marks.count == 3)
        #expect(marks.map(\.kind) == [.timer, .timer, .timer])
        #expect(marks[0].time == .seconds(1) && marks[0].end == .seconds(26))
        #expect(marks[1].end == .seconds(30))
        #expect(marks[2].end == .seconds(35))  // neither fired nor cancelled: its deadline
        #expect(f.t.checks.isEmpty)
    }

    @Test func wirePingsAreHeartbeatsAndTheWatchChannelHasItsLane() {
        let f = Feed()
        f.add(.transportOpen, 0, gen: 1, dir: .outbound, #"{"url":"/ws/device-link"}"#)
        f.add(.ping, 1, gen: 1, dir: .inbound, "p")
        f.add(.pong, 1.001, gen: 1, dir: .outbound, "p")
        f.add(.frameText, 2, dir: .outbound, channel: .watch, #"{"type":"command"}"#)
        f.add(.input, 3, channel: .watch, #"{"input":"watchLaunched"}"#)
        f.t.finish()
        #expect(f.lane("g1").map(\.kind) == [.open, .heartbeat, .heartbeat])
        #expect(f.lane("watch").map(\.kind) == [.watchFrame, .watchEvent])
        #expect(f.t.ascii(width: 60).contains("watch"))
        // Labels are left out when asked (the viewer fetches them).
        var quiet = Timeline(labels: false)
        quiet.add(InspectedRecord(number: 0, record: TraceRecord(kind: .ping, time: .seconds(1), generation: 1, direction: .inbound, payload: [])))
        #expect(quiet.lanes.first?.marks.first?.label == "")
        #expect(f.lane("g1")[1].label.hasPrefix("ping"))
    }
}
