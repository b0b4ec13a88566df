import Foundation
import Inspect
import RelayProtocol
import SpecCheck
import Testing
import Trace

/// Synthetic traces in both conventions, written with `TraceWriter`: the well-behaved client passes with
/// every rule judged; each mistake is caught by exactly its rule, at the right record, with the measured
/// figure; relay faults the client handles correctly are no finding.
@Suite struct SyntheticTraceTests {
    static let cases: [(Convention, Mistake)] = Convention.allCases.flatMap { c in Mistake.allCases.map { (c, $0) } }

    func run(_ convention: Convention, _ mistake: Mistake) throws -> (SyntheticClient, CheckReport) {
        let client = SyntheticClient(convention, mistake)
        let path = try client.write(to: temporaryTrace("\(convention)-\(mistake)"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return (client, try check(path))
    }

    @Test(arguments: Convention.allCases)
    func theWellBehavedClientPassesWithEveryRuleJudged(convention: Convention) throws {
        let (_, report) = try run(convention, .none)
        #expect(report.findings.isEmpty, "\(report.text)")
        #expect(!report.clientBrokeARule)
        #expect(report.kind == (convention == .wire ? .wire : .machine))
        // Every rule had something to judge (the loop rule has its own well-behaved trace below).
        let unjudged = report.rules.filter { $0.status != .held }.map(\.rule)
        #expect(unjudged == [.invalidResumeLoop], "\(report.text)")
        #expect(report.phoneSockets == 2 && report.phoneDevices == 1)
        #expect(report.desktopSockets == (convention == .wire ? 1 : 0))
    }

    @Test(arguments: cases)
    func eachMistakeIsCaughtByItsRuleAlone(convention: Convention, mistake: Mistake) throws {
        let (_, report) = try run(convention, mistake)
        let rules = Set(report.findings.map(\.rule))
        if let rule = mistake.rule {
            #expect(rules == [rule], "\(mistake) on a \(convention) trace:\n\(report.text)")
            let tally = try #require(report.rules.first { $0.rule == rule })
            #expect(tally.status == .broken && tally.broken >= 1)
            #expect(report.clientBrokeARule == !rule.blamesPeer)
        } else {
            #expect(rules.isEmpty, "\(mistake) on a \(convention) trace:\n\(report.text)")
        }
    }

    /// The first finding of `mistake`: its main record (by name), and its measured seconds.
    @Test(arguments: Convention.allCases.flatMap { c in [
        (c, Mistake.heartbeatEvery6s, "hb1.1", 6.0), (c, .heartbeatEvery4s, "hb1.1", 4.0),
        (c, .reRegisterTooEarly, "reregister1", 0.05), (c, .reRegisterTooLate, "reregister1", 0.6),
        (c, .leaseNotRenewed, "renewal1.1", 26.0), (c, .leaseReissuedLate, "reissue", 3.0),
        (c, .timeoutIgnored, "close1", 42.01), (c, .watchdogIgnored, "close1", 24.68),
    ] })
    func findingsNameTheRecordAndTheFigure(convention: Convention, mistake: Mistake, record: String, seconds: Double) throws {
        let (client, report) = try run(convention, mistake)
        let f = try #require(report.findings.first)
        #expect(f.records.first == client.marks[record], "\(f.text)")
        #expect(abs((f.measuredSeconds ?? -1) - seconds) < 0.0015, "\(f.text)")
        let secondSocket: UInt64 = convention == .wire ? 3 : 2
        #expect(f.generation == (record == "reissue" ? secondSocket : 1))
        #expect(f.device == SyntheticClient.device && f.desktop == SyntheticClient.desktop)
        #expect(f.text.contains(f.rule.rawValue) && f.text.contains(f.required))
    }

    @Test(arguments: Convention.allCases)
    func untypicalMistakesNameTheirRecords(convention: Convention) throws {
        func first(_ m: Mistake) throws -> (SyntheticClient, CheckFinding) {
            let (c, r) = try run(convention, m)
            return (c, try #require(r.findings.first))
        }
        var (c, f) = try first(.missingTraceparent)
        #expect(f.records == [c.marks["request1"]!] && f.measured == "no traceparent")
        (c, f) = try first(.missingIdempotencyKey)
        #expect(f.records == [c.marks["request1"]!] && f.measured.contains("session.update"))
        (c, f) = try first(.snakeCaseKey)
        #expect(f.records == [c.marks["request1"]!] && f.measured.contains("session_id") && f.measured.contains("$.payload.params.session_id"))
        (c, f) = try first(.tokenKeptAfterInvalidResume)
        #expect(f.records == [c.marks["reregister1"]!, c.marks["invalid1"]!] && f.measured.contains("resume token"))
        (c, f) = try first(.refusedTokenResumed)
        #expect(f.records == [c.marks["register2"]!] && f.measured.contains("record \(c.marks["invalid1"]!)"))
        (c, f) = try first(.registerAfterLoop)
        #expect(f.records == [c.marks["reregister3"]!, c.marks["invalid3"]!])
        (c, f) = try first(.duplicateRequestId)
        #expect(f.records == [c.marks["request3"]!, c.marks["request2"]!])
        (c, f) = try first(.twoLiveGenerations)
        if convention == .machine {
            #expect(f.records == [c.marks["open2"]!, c.marks["open1"]!])
        } else {
            // The relay cannot tell a late close from a live socket until the client sends on it.
            #expect(f.records == [c.marks["close1"]!, c.marks["open2"]!])
        }
        (c, f) = try first(.handshakeIgnored)
        #expect(f.records.last == c.marks["reregister1"] && abs((f.measuredSeconds ?? 0) - 11.0) < 0.001, "\(f.text)")
        (c, f) = try first(.heartbeatBeforeRegister)
        #expect(f.records == [c.marks["early-heartbeat"]!])
        (c, f) = try first(.peerTraceIdMismatch)
        #expect(f.records == [c.marks["response1"]!, c.marks["request1"]!] && f.blamesPeer && f.json["party"] == "peer")
    }

    @Test(arguments: Convention.allCases)
    func theLoopRuleHoldsWhenTheClientStopsAtTheThirdRefusal(convention: Convention) throws {
        let (_, report) = try run(convention, .loopEndsClientStops)
        let loop = try #require(report.rules.first { $0.rule == .invalidResumeLoop })
        #expect(loop.status == .held && loop.checked == 1)
        let again = try #require(report.rules.first { $0.rule == .reRegister })
        #expect(again.checked == 2 && again.broken == 0)
    }

    @Test func toleranceWidensWhatHolds() throws {
        let client = SyntheticClient(.wire, .heartbeatEvery6s)
        let path = try client.write(to: temporaryTrace("tolerance"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try check(path).findings.count > 0)
        #expect(try check(path, CheckOptions(tolerance: .milliseconds(1100))).findings.isEmpty)
        let skipped = try check(path, CheckOptions(skip: [.heartbeat]))
        #expect(skipped.findings.isEmpty && skipped.rules.first { $0.rule == .heartbeat }?.status == .skipped)
        // A 0.05 s re-register is early only within the early tolerance.
        let early = SyntheticClient(.machine, .reRegisterTooEarly)
        let p2 = try early.write(to: temporaryTrace("early"))
        defer { try? FileManager.default.removeItem(atPath: p2) }
        #expect(try check(p2).findings.map(\.rule) == [.reRegister])
        #expect(try check(p2, CheckOptions(earlyTolerance: .milliseconds(160))).findings.isEmpty)
    }

    @Test func findingsAndTalliesAreJSON() throws {
        let (_, report) = try run(.wire, .missingTraceparent)
        let j = report.json
        #expect(j["result"] == "broken")
        #expect(j["trace"]?["kind"] == "wire")
        let f = try #require(j["findings"]?[0])
        #expect(f["rule"] == "A8.traceparent" && f["section"] == "A8" && f["party"] == "client" && f["gen"] == 1)
        let rules = try #require(j["rules"]?.arrayValue)
        #expect(rules.count == CheckRule.allCases.count)
        let tp = try #require(rules.first { $0["rule"] == "A8.traceparent" })
        #expect(tp["checked"] == 2 && tp["broken"] == 1 && tp["held"] == 1 && tp["status"] == "broken")
        // A finding is a value on its own: one JSON object per line round-trips.
        let line = f.jsonText
        #expect(try JSONValue(parsing: line).canonicallyEquals(f))
    }
}
