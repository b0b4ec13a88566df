public import RelayProtocol
public import Trace

/// What a fault does to the delivery it targets.
public enum FaultKind: String, Sendable, Hashable, CaseIterable {
    /// The delivery is lost.
    case drop
    /// The delivery arrives, and a second copy `amount` later.
    case duplicate
    /// The delivery is held until the next delivery, then arrives right after it.
    case reorder
    /// The delivery arrives `amount` late (overtaken by the deliveries of that stretch).
    case delay
    /// Watch channel: the watch app is relaunched (new incarnation, its queue dies) right after the
    /// datagram is sent; the datagram itself goes ahead.
    case restart
    /// Relay channel: the relay socket dies (closed with 1006) instead of delivering the frame.
    case kill
}

/// One seeded fault: a kind, the delivery it targets (its ordinal among the deliveries of the perturbed
/// run: datagrams sent on the watch channel, inbound frames on the relay channel, counted from 0), and a
/// duration parameter (the delay, or the gap before a duplicate; zero when the kind takes none).
public struct Fault: Sendable, Hashable, CustomStringConvertible {
    /// What it does.
    public var kind: FaultKind
    /// The delivery it targets (0-based ordinal in the perturbed run).
    public var target: Int
    /// The delay or duplicate gap.
    public var amount: Duration

    /// A fault.
    public init(kind: FaultKind, target: Int, amount: Duration = .zero) {
        self.kind = kind
        self.target = target
        self.amount = amount
    }

    /// `drop@12`, `delay@3+1.500s`.
    public var description: String {
        amount == .zero ? "\(kind.rawValue)@\(target)" : "\(kind.rawValue)@\(target)+\(Moment(nanoseconds: amount.nanoseconds))"
    }

    /// `{"kind":"delay","target":3,"amountNs":1500000000}`.
    public var json: JSONValue {
        .object(["kind": .string(kind.rawValue), "target": .int(Int64(target)), "amountNs": .int(amount.nanoseconds)])
    }

    /// Decodes ``json``; `path` names the value in error messages.
    public init(json: JSONValue, path: String = "$") throws(PerturbationError) {
        guard let k = json["kind"]?.stringValue, let kind = FaultKind(rawValue: k) else {
            throw PerturbationError(message: "\(path).kind: expected one of \(FaultKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard case .int(let t)? = json["target"], t >= 0, t <= Int64(Int32.max) else {
            throw PerturbationError(message: "\(path).target: expected a delivery ordinal (a non-negative integer)")
        }
        var amount = Duration.zero
        if let a = json["amountNs"] {
            guard case .int(let ns) = a, ns >= 0 else {
                throw PerturbationError(message: "\(path).amountNs: expected a non-negative integer of nanoseconds")
            }
            amount = .nanoseconds(ns)
        }
        self.init(kind: kind, target: Int(t), amount: amount)
    }

    /// A fault list as a JSON array.
    public static func json(_ faults: [Fault]) -> JSONValue { .array(faults.map(\.json)) }

    /// Decodes a JSON array of faults.
    public static func decode(_ json: JSONValue) throws(PerturbationError) -> [Fault] {
        guard case .array(let items) = json else { throw PerturbationError(message: "$: expected an array of faults") }
        var out: [Fault] = []
        for (i, item) in items.enumerated() { out.append(try Fault(json: item, path: "$[\(i)]")) }
        return out
    }

    /// The fault list of `seed`: 1 to `maxFaults` faults of `kinds`, each targeting one of `deliveries`
    /// deliveries (the count of an unperturbed run), sorted by target. Delays are 0.1-8 s, duplicate
    /// gaps 1 ms-2 s. Same seed, same list.
    public static func derive(seed: UInt64, deliveries: Int, kinds: [FaultKind], maxFaults: Int = 6) -> [Fault] {
        guard deliveries > 0, !kinds.isEmpty, maxFaults > 0 else { return [] }
        var rng = SeededRandom(seed: seed ^ 0x5045_5254_5552_4221)
        let n = 1 + Int(rng.next(upperBound: UInt64(maxFaults)))
        var faults: [Fault] = []
        for _ in 0..<n {
            let kind = kinds[Int(rng.next(upperBound: UInt64(kinds.count)))]
            let target = Int(rng.next(upperBound: UInt64(deliveries)))
            let draw: UInt64 = rng.next(upperBound: 2_000)
            let amount: Duration = switch kind {
            case .delay: .milliseconds(Int64(draw) * 4 + 100)
            case .duplicate: .milliseconds(Int64(draw) + 1)
            default: .zero
            }
            faults.append(Fault(kind: kind, target: target, amount: amount))
        }
        return faults.sorted { ($0.target, $0.kind.rawValue) < ($1.target, $1.kind.rawValue) }
    }
}

/// One channel's perturbation replayer (`RelayPerturbation`, `WatchPerturbation`): the trace run on virtual
/// time under seeded faults, the channel's invariants checked as it goes. A conformer gives its fault kinds,
/// its unperturbed delivery count and a run under a fault list; seeds become fault lists here, the same way
/// for every channel.
public protocol PerturbationReplay: AnyObject {
    /// The kinds seeded faults are drawn from.
    static var kinds: [FaultKind] { get }
    /// The deliveries an unperturbed run makes (what seeded faults target).
    var baselineDeliveries: Int { get }
    /// Runs with `faults`; `record` keeps the run's own records.
    func run(faults: [Fault], record: Bool) -> PerturbedRun
}

extension PerturbationReplay {
    /// The fault list of `seed` for this trace.
    public func faults(seed: UInt64) -> [Fault] {
        Fault.derive(seed: seed, deliveries: baselineDeliveries, kinds: Self.kinds)
    }

    /// Runs the faults of `seed`.
    public func run(seed: UInt64, record: Bool = false) -> PerturbedRun {
        var r = run(faults: faults(seed: seed), record: record)
        r.seed = seed
        return r
    }
}

/// A bad fault list, a seed range that does not parse, a trace of no known channel.
public struct PerturbationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, where, and what to do.
    public var message: String
    /// An error.
    public init(message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// An invariant a perturbed run broke: which, when, and the evidence.
public struct InvariantViolation: Sendable, Hashable, CustomStringConvertible {
    /// The invariant's name: `exactly-once`, `in-order`, `monotonic-snapshots`, `one-live-generation`,
    /// `lease-renewed-after-expiry`.
    public var invariant: String
    /// The virtual time it broke at.
    public var time: Moment
    /// What was seen.
    public var detail: String

    /// A violation.
    public init(invariant: String, time: Moment, detail: String) {
        self.invariant = invariant
        self.time = time
        self.detail = detail
    }

    /// `in-order at 12.000s: ...`.
    public var description: String { "\(invariant) at \(time): \(detail)" }
}

/// A seed or an inclusive seed range, as `--perturb` takes it: `7` or `1..500`.
public struct SeedRange: Sendable, Hashable {
    /// The first seed.
    public var lower: UInt64
    /// The last seed (inclusive).
    public var upper: UInt64

    /// Parses `N` or `A..B` (A <= B).
    public init(parsing text: String) throws(PerturbationError) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 1, let v = UInt64(text) {
            lower = v
            upper = v
        } else if parts.count == 3, parts[1].isEmpty, let a = UInt64(parts[0]), let b = UInt64(parts[2]), a <= b {
            lower = a
            upper = b
        } else {
            throw PerturbationError(message: "--perturb '\(text)': expected a seed (e.g. 7) or an inclusive range A..B with A <= B (e.g. 1..500)")
        }
    }

    /// The seeds, in order.
    public var seeds: ClosedRange<UInt64> { lower...upper }
}

/// Delta debugging (Zeller's ddmin): the smallest sub-list of a failing list that still fails.
public enum DeltaDebugging {
    /// Reduces `items` (which must make `fails` true) to a 1-minimal sub-list, order kept: removing any
    /// single element of the result makes `fails` false. `fails` is called at most `budget` times; when
    /// the budget runs out, the smallest failing list found so far is returned.
    public static func minimize<T>(_ items: [T], budget: Int = 2_000, fails: ([T]) -> Bool) -> [T] {
        var current = items
        var calls = 0
        func test(_ c: [T]) -> Bool {
            calls += 1
            return fails(c)
        }
        var n = 2
        while current.count >= 2, calls < budget {
            let chunks = split(current, into: n)
            var reduced = false
            // Reduce to a subset.
            for c in chunks where calls < budget && c.count < current.count {
                if test(c) {
                    current = c
                    n = 2
                    reduced = true
                    break
                }
            }
            if !reduced {
                // Reduce to a complement.
                for i in chunks.indices where calls < budget {
                    let complement = chunks.enumerated().filter { $0.offset != i }.flatMap(\.element)
                    if complement.count < current.count, test(complement) {
                        current = complement
                        n = max(n - 1, 2)
                        reduced = true
                        break
                    }
                }
            }
            if !reduced {
                if n >= current.count { break }
                n = min(current.count, 2 * n)
            }
        }
        if current.count == 1, calls < budget, test([]) { current = [] }
        return current
    }

    private static func split<T>(_ items: [T], into n: Int) -> [[T]] {
        var out: [[T]] = []
        var start = 0
        for i in 0..<n {
            let end = start + (items.count - start) / (n - i)
            if end > start { out.append(Array(items[start..<end])) }
            start = end
        }
        return out
    }
}

/// What one perturbed replay did.
public struct PerturbedRun: Sendable {
    /// The seed the faults came from (nil for a hand-made or shrunk list).
    public var seed: UInt64?
    /// The faults applied.
    public var faults: [Fault]
    /// The first invariant broken, if any.
    public var violation: InvariantViolation?
    /// Deliveries made (the ordinals faults target run from 0 to this).
    public var deliveries: Int
    /// The run's own records (inputs and actions through the capture codec), when asked for.
    public var records: [TraceRecord]
    /// After shrinking: what became of the recorded script (e.g. `5 of 23 recorded inputs kept`).
    public var scriptNote: String?
    /// After shrinking a relay run: the record numbers (in the perturbed trace) of the recorded inputs
    /// kept; the other recorded inputs were left out of the run.
    public var keptInputs: [Int]?

    /// A run's outcome.
    public init(seed: UInt64?, faults: [Fault], violation: InvariantViolation?, deliveries: Int, records: [TraceRecord] = []) {
        self.seed = seed
        self.faults = faults
        self.violation = violation
        self.deliveries = deliveries
        self.records = records
    }

    /// `seed 7: in-order at 12.000s: ... faults [drop@3, delay@5+1.200s]` or `seed 7: holds (4 faults)`.
    public var line: String {
        let s = seed.map { "seed \($0)" } ?? "shrunk"
        let f = "[" + faults.map(\.description).joined(separator: ", ") + "]"
        guard let violation else { return "\(s): holds, faults \(f)" }
        return "\(s): \(violation.invariant) broken at \(violation.time): \(violation.detail); faults \(f)"
    }
}
