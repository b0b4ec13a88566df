public import Replay
public import WatchReplay
public import Testing
public import RelayClient
import Foundation

/// Swift Testing helpers for replaying traces in a test target.
///
/// ```swift
/// import ReplayTesting
///
/// @Test func invalidResumeReRegistersAfter200ms() throws {
///     let replay = try TraceReplay(named: "invalid-resume")      // Traces/invalid-resume.rtrace
///     replay.expectNoDivergence()                                // the whole trace, strictly
///     let at = try replay.pause(before: .timer("reRegister"))
///     #expect(replay.replayer.machine.resumeCredentials == nil)
/// }
/// ```
/// Failure messages name the trace, the record, the generation and the SPEC rule involved.
public struct TraceReplay {
    /// The trace's path.
    public let path: String
    /// The replayer (step it, set breakpoints, read `machine` and `snapshot`).
    public let replayer: Replayer

    /// Loads `Traces/<name>.rtrace` of the package that contains the calling test file (found by walking
    /// up from `filePath` to the directory holding `Package.swift`), or `name` itself when it is a path.
    public init(named name: String, filePath: String = #filePath) throws {
        path = try TraceReplay.path(named: name, filePath: filePath)
        replayer = try Replayer(path: path)
    }

    /// `Traces/<name>.rtrace` of the package above `filePath`, or `name` itself when it is a path.
    static func path(named name: String, filePath: String) throws -> String {
        if name.contains("/") { return name }
        return try packageRoot(from: filePath) + "/Traces/" + name + (name.hasSuffix(".rtrace") ? "" : ".rtrace")
    }

    /// The package root above `filePath` (the first directory up with a `Package.swift`).
    public static func packageRoot(from filePath: String) throws -> String {
        var dir = URL(fileURLWithPath: filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir.path }
            dir.deleteLastPathComponent()
        }
        throw ReplayError(message: "no Package.swift above \(filePath); pass the trace's path instead of its name")
    }

    /// Replays the rest of the trace strictly; records an issue with the divergence report (trace, record,
    /// generation, SPEC rule, JSON differences, context) if it diverges.
    public func expectNoDivergence(sourceLocation: SourceLocation = #_sourceLocation) {
        TraceReplay.expectFinished(replayer.run(), path: path, sourceLocation: sourceLocation)
    }

    /// Records an issue unless `stop` is the end of the trace.
    static func expectFinished(_ stop: ReplayStop, path: String, sourceLocation: SourceLocation) {
        switch stop {
        case .diverged(let d):
            Issue.record(Comment(rawValue: "\(path): \(d.description)"), sourceLocation: sourceLocation)
        case .damaged(let at, let error):
            Issue.record(Comment(rawValue: "\(path): the trace is damaged at record \(at): \(error.description)"), sourceLocation: sourceLocation)
        case .refused(let condition, let why):
            Issue.record(Comment(rawValue: "\(path): cannot break on \(condition): \(why)"), sourceLocation: sourceLocation)
        case .finished, .paused:
            break
        }
    }

    /// Replays up to (not including) the first record matching `condition`; returns its index. Records an
    /// issue and throws if the replay diverges or ends first.
    @discardableResult
    public func pause(before condition: ReplayCondition<RelayClientMachine>, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
        try TraceReplay.expectPause(replayer.run(until: [condition]), before: condition, path: path, sourceLocation: sourceLocation)
    }

    /// The record a replay paused before; records an issue and throws when `stop` is anything else.
    static func expectPause<Subject>(_ stop: ReplayStop, before condition: ReplayCondition<Subject>, path: String, sourceLocation: SourceLocation) throws -> Int {
        switch stop {
        case .paused(let at, _):
            return at
        case .finished:
            Issue.record(Comment(rawValue: "\(path): the trace ended before \(condition)"), sourceLocation: sourceLocation)
            throw ReplayError(message: "\(path): no record matches \(condition)")
        case .diverged(let d):
            Issue.record(Comment(rawValue: "\(path): \(d.description)"), sourceLocation: sourceLocation)
            throw ReplayError(message: "\(path): diverged before \(condition)")
        case .damaged(let at, let error):
            Issue.record(Comment(rawValue: "\(path): the trace is damaged at record \(at): \(error.description)"), sourceLocation: sourceLocation)
            throw ReplayError(message: "\(path): damaged before \(condition)", traceError: error)
        case .refused(let c, let why):
            Issue.record(Comment(rawValue: "\(path): cannot break on \(c): \(why)"), sourceLocation: sourceLocation)
            throw ReplayError(message: "\(path): cannot break on \(c): \(why)")
        }
    }
}

/// ``TraceReplay`` for watch-channel traces (``WatchReplayer``: the four WatchLink machines):
///
/// ```swift
/// @Test func theStalledAckResendsTheNamedCommand() throws {
///     let replay = try WatchTraceReplay(named: "my-workout")        // Traces/my-workout.rtrace
///     try replay.pause(before: .timer("stalledAck"))
///     #expect(replay.replayer.watch?.queue.isEmpty == false)
///     replay.expectNoDivergence()
/// }
/// ```
/// Conditions that apply: ``ReplayCondition/time(_:)``, ``ReplayCondition/record(_:)``,
/// ``ReplayCondition/timer(_:)`` (`stalledAck`, `heartbeat`) and ``ReplayCondition/state(_:_:)`` over
/// ``WatchReplaySnapshot``; one naming relay frames records an issue (the replay refuses it).
public struct WatchTraceReplay {
    /// The trace's path.
    public let path: String
    /// The replayer (step it, set breakpoints, read the machines and `snapshot`).
    public let replayer: WatchReplayer

    /// Loads `Traces/<name>.rtrace` of the package that contains the calling test file, or `name` itself
    /// when it is a path, as ``TraceReplay/init(named:filePath:)``.
    public init(named name: String, filePath: String = #filePath) throws {
        path = try TraceReplay.path(named: name, filePath: filePath)
        replayer = try WatchReplayer(path: path)
    }

    /// Replays the rest of the trace strictly; records an issue with the divergence report if it diverges.
    public func expectNoDivergence(sourceLocation: SourceLocation = #_sourceLocation) {
        TraceReplay.expectFinished(replayer.run(), path: path, sourceLocation: sourceLocation)
    }

    /// Replays up to (not including) the first record matching `condition`; returns its index. Records an
    /// issue and throws if the replay diverges or ends first.
    @discardableResult
    public func pause(before condition: ReplayCondition<WatchReplaySnapshot>, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
        try TraceReplay.expectPause(replayer.run(until: [condition]), before: condition, path: path, sourceLocation: sourceLocation)
    }
}
