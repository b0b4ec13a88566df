public import Replay
public import Testing
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
        let path: String
        if name.contains("/") {
            path = name
        } else {
            path = try TraceReplay.packageRoot(from: filePath) + "/Traces/" + name + (name.hasSuffix(".rtrace") ? "" : ".rtrace")
        }
        self.path = path
        self.replayer = try Replayer(path: path)
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
        switch replayer.run() {
        case .diverged(let d):
            Issue.record(Comment(rawValue: "\(path): \(d.description)"), sourceLocation: sourceLocation)
        case .damaged(let at, let error):
            Issue.record(Comment(rawValue: "\(path): the trace is damaged at record \(at): \(error.description)"), sourceLocation: sourceLocation)
        case .finished, .paused:
            break
        }
    }

    /// Replays up to (not including) the first record matching `condition`; returns its index. Records an
    /// issue and throws if the replay diverges or ends first.
    @discardableResult
    public func pause(before condition: ReplayCondition, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
        switch replayer.run(until: [condition]) {
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
        }
    }
}
