import Dispatch
import Foundation
public import Runtime
public import Testing
import Trace
import WireReplay

/// A recording's relay side served to the client under test, for one test: `relaytrace relay --replay`
/// in process, on a free loopback port.
///
/// ```swift
/// import ReplayTesting
///
/// @Test func resumesAfterARestart() throws {
///     let relay = try RecordedRelay(named: "app-resume")        // Traces/app-resume.rtrace, a wire trace
///     let client = MyRelayClient(url: relay.url)                // the client you test, as it is
///     try client.runResumeFlow()
///     relay.expectMatched()   // every client frame matched the recording; an issue per finding otherwise
/// }
/// ```
/// The recording can be a wire trace (`relay --record`, `proxy`, the in-app `WireRecorder`) or a machine
/// trace (`capture`). Matching, timing and what counts as a difference are those of `relay --replay`
/// (docs/CLI.md).
public final class RecordedRelay: Sendable {
    /// The trace served.
    public let path: String
    /// The URL to point the client at, e.g. `ws://127.0.0.1:54321/ws/device-link`.
    public let url: String
    private let host: ReplayHost
    private let done = DispatchSemaphore(value: 0)

    /// Serves `Traces/<name>.rtrace` of the calling test's package (or `name` when it is a path).
    /// - Parameters:
    ///   - strict: end a socket at its first divergence instead of answering what can be answered.
    ///   - speed: recorded delays divided by this (2: twice as fast).
    public init(named name: String, strict: Bool = false, speed: Double = 1, filePath: String = #filePath) throws {
        path = try TraceReplay.path(named: name, filePath: filePath)
        let session = try RecordedSession.load(path: path)
        let done = done
        host = try ReplayHost(session: session, options: ReplayingRelayOptions(strict: strict, speed: speed),
                              onFinished: { done.signal() })
        url = host.url
    }

    /// Waits until every recorded socket was served and ended, or `timeout` passed; then stops the relay
    /// (what the recording still expected is reported) and returns the result.
    @discardableResult
    public func finish(within timeout: Duration = .seconds(30)) -> ReplayHostResult {
        _ = done.wait(timeout: .now() + .nanoseconds(Int(timeout.nanoseconds)))
        host.stop()
        return host.result
    }

    /// ``finish(within:)``, then an issue for each finding (record, what was expected, what came) and for a
    /// recording the client did not get through.
    public func expectMatched(within timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) {
        let result = finish(within: timeout)
        for f in result.findings {
            Issue.record(Comment(rawValue: "\(path): \(f.description)"), sourceLocation: sourceLocation)
        }
        if result.findings.isEmpty && !result.finished {
            Issue.record(Comment(rawValue: "\(path): the client used \(result.servedSockets) of \(result.recordedSockets) recorded sockets before the timeout"),
                         sourceLocation: sourceLocation)
        }
    }

    deinit { host.stop() }
}
