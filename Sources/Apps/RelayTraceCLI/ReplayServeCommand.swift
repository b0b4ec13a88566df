import Dispatch
import Foundation
import Glibc
import Net
import RelayProtocol
import Runtime
import Trace
import WireRecording
import WireReplay

/// `relaytrace relay --replay FILE`: a recorded session's relay side served to live clients.
enum ReplayServeCommand {
    static func run(_ file: String, _ args: ParsedArguments, listen: String, host: String, port: UInt16, tls: TLSServerContext?,
                    stopAfter: Duration?, _ ctx: CLIContext) -> ExitCode {
        let path = ["relaytrace", "relay"]
        guard let speed = Double(args.value("speed") ?? "1"), speed > 0, speed.isFinite else {
            return RelayTraceCommand.usageError(UsageError(message: "--speed '\(args.value("speed") ?? "")' is not a positive number (e.g. 2, 0.5)", commandPath: path), ctx)
        }
        let json = args.value("format") == "json"
        let session: RecordedSession
        do throws(TraceError) { session = try RecordedSession.load(path: file) } catch {
            ctx.stderr.line("Error: \(file): \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        }
        guard !session.sockets.isEmpty else {
            ctx.stderr.line("Error: \(file) holds no relay socket to replay (no transportOpen record on channel relay)")
            return .dataError
        }
        // The replayed session's own recording, opened before listening.
        let recordPath = args.value("record")
        let recorder: WireRecorder?
        switch openRelayRecording(args, details: ["listen": .string(listen), "replayOf": .string(file)], ctx) {
        case .success(let r): recorder = r
        case .failure(let code): return code.code
        }
        let options = ReplayingRelayOptions(strict: args.flag("strict"), speed: speed)
        ctx.stdout.flush()
        // Text: everything on stdout, as the relay does. JSON: stdout holds only the result object; the
        // first line (the URL) and the log go to stderr.
        let lines = LineWriter(descriptor: json ? 2 : 1)
        let finished = DispatchSemaphore(value: 0)
        let replay: ReplayHost
        do throws(NetError) {
            replay = try ReplayHost(session: session, options: options, host: host, port: port, tls: tls, recorder: recorder,
                                    log: { lines.write($0) }, onFinished: { finished.signal() })
        } catch {
            ctx.stderr.line("Error: cannot listen on \(listen): \(error)")
            if let recorder, let recordPath {
                _ = try? recorder.close()
                unlink(recordPath)
            }
            return .ioError
        }
        lines.release(first: "listening on \(replay.url) (replaying \(file): \(session.sockets.count) recorded socket\(session.sockets.count == 1 ? "" : "s"), \(options.strict ? "strict" : "lenient"), speed \(speed))")
        waitForSignalOr(stopAfter, wakeUp: finished)
        replay.stop()
        var code: ExitCode = .success
        if let recorder, let recordPath {
            let sockets = recorder.sockets
            do throws(TraceError) {
                let written = try recorder.close()
                ctx.stderr.line("wrote \(recordPath): \(sockets) socket\(sockets == 1 ? "" : "s"), \(written.records) records in \(written.chunks) chunks, \(written.dropped) dropped")
                if written.dropped > 0 { code = .ioError }
            } catch {
                ctx.stderr.line("Error: \(recordPath): \(error.description)")
                code = .ioError
            }
        }
        let r = replay.result
        let matched = r.findings.isEmpty && r.finished
        if json {
            let o: [String: JSONValue] = [
                "file": .string(file), "result": .string(matched ? "matched" : "diverged"), "finished": .bool(r.finished),
                "strict": .bool(options.strict), "speed": .double(speed),
                "sockets": ["recorded": .int(Int64(r.recordedSockets)), "served": .int(Int64(r.servedSockets))],
                "matchedFrames": .int(Int64(r.matchedFrames)), "servedFrames": .int(Int64(r.servedFrames)),
                "findings": .array(r.findings.map(\.json)),
            ]
            ctx.stdout.line(JSONValue.object(o).prettyText())
        } else {
            lines.write("replay \(r.finished ? "finished" : "stopped before the recording's end"): \(r.servedSockets) of \(r.recordedSockets) recorded sockets served, \(r.matchedFrames) client frames matched, \(r.servedFrames) relay frames sent, \(r.findings.count) finding\(r.findings.count == 1 ? "" : "s")")
            for f in r.findings { lines.write("  " + f.description.split(separator: "\n").joined(separator: "\n  ")) }
            if matched { lines.write("every client frame matched the recording") }
        }
        if lines.reportFailure(ctx) { return .ioError }
        if code != .success { return code }
        return matched ? .success : .found
    }
}
