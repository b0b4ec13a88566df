/// A deterministic priority queue of timed events: earliest first, ties in insertion order. The one
/// scheduler under every virtual-time runner (simulations, what-if replay), so that the same inputs give
/// the same order everywhere.
public struct TimedQueue<Element> {
    private var heap: [(time: Moment, seq: UInt64, element: Element)] = []
    private var nextSeq: UInt64 = 0

    /// An empty queue.
    public init() {}

    /// Whether nothing is queued.
    public var isEmpty: Bool { heap.isEmpty }
    /// How many events are queued.
    public var count: Int { heap.count }
    /// The time of the earliest event.
    public var nextTime: Moment? { heap.first?.time }

    /// Queues `element` for `time`.
    public mutating func push(_ element: Element, at time: Moment) {
        heap.append((time, nextSeq, element))
        nextSeq += 1
        var i = heap.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            guard less(i, p) else { break }
            heap.swapAt(i, p)
            i = p
        }
    }

    /// Removes and returns the earliest event (the first queued among equals).
    public mutating func pop() -> (time: Moment, element: Element)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count, less(l, m) { m = l }
            if r < heap.count, less(r, m) { m = r }
            guard m != i else { break }
            heap.swapAt(i, m)
            i = m
        }
        return (top.time, top.element)
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        (heap[a].time, heap[a].seq) < (heap[b].time, heap[b].seq)
    }
}

extension TimedQueue: Sendable where Element: Sendable {}
