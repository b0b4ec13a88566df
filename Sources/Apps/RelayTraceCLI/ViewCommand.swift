#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Net
import Foundation
import RelayProtocol
import Replay
import Trace
import Viewer
import WatchReplay

/// `relaytrace view`: the trace viewer in the browser.
enum ViewCommand {
    static let spec = CommandSpec(
        name: "view",
        abstract: "Open a trace in the browser: a frame list with filter and detail pane, and a zoomable timeline.",
        discussion: """
            Serves one page and a JSON API on a small local HTTP server (loopback by default) and prints its \
            URL first ('viewer on http://127.0.0.1:PORT/ ...'). The page reads the trace in pages through its \
            index (the list answers at once whatever the trace's size; the timeline is laid out by one pass \
            in the background): a virtualised frame list coloured by direction and type, a filter box (the \
            terms of 'frames': gen: dir: type: event: method: id: since: until: channel:, and words searched \
            in payloads), a detail pane with pretty JSON and redaction placeholders marked, and a canvas \
            timeline (generations that never overlap share a row; leases, recovery epochs and timers as \
            bands; RPC spans from call to completion) that redraws on zoom with ticks from hours to \
            milliseconds. Keys: j/k move, / filter, n next match, +/- zoom, 0 whole trace. --replay runs the \
            strict replay at once and marks its divergence on the timeline and in the list (the page's \
            replay button does it on demand). Runs until interrupted (SIGINT, SIGTERM) or --for.
            """,
        arguments: [ArgumentSpec(name: "file", help: "The trace file.")],
        options: [
            OptionSpec(long: "listen", valueName: "host:port", help: "Where to listen (port 0: any free port).", defaultValue: "127.0.0.1:8790"),
            OptionSpec(long: "open", help: "Open the page in the desktop's browser (xdg-open)."),
            OptionSpec(long: "replay", help: "Run the strict replay at start and mark the divergence, if any."),
            OptionSpec(long: "for", valueName: "time", help: "Stop after this long (e.g. 10m); default: until interrupted."),
        ],
        run: { args, ctx in run(args, ctx) })

    static func run(_ args: ParsedArguments, _ ctx: CLIContext) -> ExitCode {
        let command = ["relaytrace", "view"]
        let listen = args.value("listen") ?? "127.0.0.1:8790"
        guard let (host, port) = RelayCommand.parseListen(listen) else {
            return RelayTraceCommand.usageError(UsageError(message: "--listen '\(listen)' is not HOST:PORT (e.g. 127.0.0.1:8790, [::1]:0)", commandPath: command), ctx)
        }
        let stopAfter: Duration?
        do { stopAfter = try args.positiveDuration("for", path: command) } catch { return RelayTraceCommand.usageError(error, ctx) }
        let path = args.positionals["file"] ?? ""
        if path == "-" {
            return RelayTraceCommand.usageError(UsageError(message: "view reads a trace file by its index; write the trace to a file first", commandPath: command), ctx)
        }
        // Open once the way every command does (exit 66 missing, 65 not a trace).
        do { _ = try RelayTraceCommand.openTrace(path, ctx) } catch { return error }
        let service: ViewerService
        do {
            service = try ViewerService(path: path, replay: { replayResult(path: path) }, autoReplay: args.flag("replay"))
        } catch {
            ctx.stderr.line("Error: \(error.description)")
            return RelayTraceCommand.exitCode(for: error)
        }
        let server: ViewerHTTPServer
        do {
            server = try ViewerHTTPServer(host: host, port: port) { service.handle($0) }
        } catch {
            ctx.stderr.line("Error: cannot listen on \(listen): \(error)")
            return .ioError
        }
        let thread: NetThread
        do { thread = try NetThread { server.serve() } } catch {
            ctx.stderr.line("Error: \(error)")
            return .ioError
        }
        let records = (try? TraceReader(path: path)).flatMap { try? $0.chunks() }?.last.map { $0.firstRecord + UInt64($0.recordCount) } ?? 0
        ctx.stdout.line("viewer on \(server.url) (\(path): \(records) records); Ctrl-C stops it")
        if !["127.0.0.1", "localhost", "::1"].contains(host) {
            ctx.stderr.line("warning: listening on \(host), not loopback: anyone who can reach it can read the trace")
        }
        ctx.stdout.flush()
        if args.flag("open") { openBrowser(server.url, ctx) }
        waitForSignalOr(stopAfter)
        server.stop()
        thread.join()
        ctx.stdout.line("viewer stopped")
        // A damaged trace is served as far as it reads (the page shows where it stops); the exit code says so.
        if let damage = service.damage { return readFailure(damage, path: path, ctx) }
        return .success
    }

    /// Hands the URL to the desktop (xdg-open, or open on macOS); says so when there is none.
    static func openBrowser(_ url: String, _ ctx: CLIContext) {
        let opener = ["/usr/bin/xdg-open", "/usr/bin/open"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let opener else {
            ctx.stderr.line("warning: no xdg-open here to open a browser; open \(url) yourself")
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: opener)
        p.arguments = [url]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { ctx.stderr.line("warning: \(opener) \(url) failed: \(error)") }
    }

    /// The strict replay's result as `replay --format json` prints it (for the page), or
    /// `{"result": "unavailable", "reason"}` for a trace strict replay cannot run on.
    static func replayResult(path: String) -> JSONValue {
        if let source = (try? TraceReader(path: path))?.header.wireSource {
            return ["result": "unavailable", "reason": .string("a wire trace (recorded by the \(source)) holds no client inputs: strict replay needs a machine trace")]
        }
        if ReplayCommand.isWatchTrace(path: path) {
            do throws(ReplayError) {
                let r = try WatchReplayer(path: path, allowDamaged: false)
                let stop = r.run(until: [])
                return ReplayCommand.resultObject(stop, ReplayCommand.watchResultFields(r, path: path), state: { r.snapshot.json }).0
            } catch {
                return ["result": "unavailable", "reason": .string(error.message)]
            }
        }
        do throws(ReplayError) {
            let r = try Replayer(path: path, allowDamaged: false, checkpointInterval: Int.max)
            let stop = r.run(until: [])
            return ReplayCommand.resultObject(stop, ReplayCommand.resultFields(r, path: path), state: { r.snapshot.json }).0
        } catch {
            return ["result": "unavailable", "reason": .string(error.message)]
        }
    }
}
