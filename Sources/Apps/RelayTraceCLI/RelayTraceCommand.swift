#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Trace

/// Entry point of the `relaytrace` command.
public enum RelayTraceCommand {
    /// The tool's version (`relaytrace --version`).
    public static let version = TraceHeader.currentToolVersion

    /// Runs the command with the process arguments and exits with its status.
    public static func main() -> Never {
        // `relaytrace frames x | head`: a closed pipe must end the command quietly, not kill it.
        signal(SIGPIPE, SIG_IGN)
        // A file-size limit (`ulimit -f`) is a write error like a full disk (EFBIG, exit 74), not a kill.
        signal(SIGXFSZ, SIG_IGN)
        let status = run(Array(CommandLine.arguments.dropFirst()))
        exit(status)
    }

    /// Runs the command line `arguments` (without the program name), writing to stdout and stderr;
    /// returns the exit status. Every write is checked here, for every command: a failed write to
    /// stdout or stderr exits 74 with a message (`CLIContext.finish`), a closed pipe stays quiet.
    public static func run(_ arguments: [String]) -> Int32 {
        let context = CLIContext.standard()
        let code = dispatch(arguments, context)
        return context.finish(code).rawValue
    }

    static let root = CommandSpec(
        name: "relaytrace",
        abstract: "Record-and-replay debugger for the PlanToCode relay client: inspect and check trace files.",
        options: [OptionSpec(long: "version", help: "Show the version.")],
        subcommands: [InfoCommand.spec, VerifyCommand.spec, FramesCommand.spec, SimulateCommand.spec, CaptureCommand.spec, RelayCommand.spec, ProxyCommand.spec, ReplayCommand.spec, ShowCommand.spec, StatsCommand.spec,
                      TimelineCommand.spec, ViewCommand.spec, DiffCommand.spec, ExportCommand.spec, RedactCommand.spec, LintCommand.spec, CheckCommand.spec,
                      CommandSpec(name: "help", abstract: "Show subcommand help information.")])

    static func dispatch(_ args: [String], _ ctx: CLIContext) -> ExitCode {
        let path = [root.name]
        guard let first = args.first else {
            ctx.stderr.write("Error: Missing expected subcommand\nUsage: \(root.usage(path: path))\n  See '\(root.name) --help' for more information.\n")
            return .usage
        }
        switch first {
        case "-h", "--help":
            ctx.stdout.write(root.help(path: path))
            return .success
        case "--version":
            ctx.stdout.line(version)
            return .success
        case "help":
            let rest = Array(args.dropFirst())
            guard let name = rest.first else {
                ctx.stdout.write(root.help(path: path))
                return .success
            }
            guard let sub = root.subcommands.first(where: { $0.name == name }), rest.count == 1 else {
                return usageError(UsageError(message: "Unknown subcommand '\(rest.joined(separator: " "))'", commandPath: path), ctx)
            }
            ctx.stdout.write(sub.help(path: path + [sub.name]))
            return .success
        default:
            break
        }
        guard let sub = root.subcommands.first(where: { $0.name == first }), let body = sub.run else {
            let what = first.hasPrefix("-") ? "Unknown option '\(first)'" : "Unknown subcommand '\(first)'"
            return usageError(UsageError(message: what, commandPath: path), ctx)
        }
        let subPath = path + [sub.name]
        do {
            switch try sub.parse(Array(args.dropFirst()), path: subPath) {
            case .help:
                ctx.stdout.write(sub.help(path: subPath))
                return .success
            case .run(let parsed):
                return body(parsed, ctx)
            }
        } catch {
            return usageError(error, ctx)
        }
    }

    static func usageError(_ e: UsageError, _ ctx: CLIContext) -> ExitCode {
        var spec = root
        for name in e.commandPath.dropFirst() {
            if let s = spec.subcommands.first(where: { $0.name == name }) { spec = s }
        }
        ctx.stderr.write("Error: \(e.message)\nUsage: \(spec.usage(path: e.commandPath))\n  See '\(e.commandPath.joined(separator: " ")) --help' for more information.\n")
        return .usage
    }

    /// Opens a trace for a command, mapping failures to exit codes: missing or unreadable file 66,
    /// other I/O 74, not a trace / damaged header 65.
    static func openTrace(_ path: String, _ ctx: CLIContext, salvage: Bool = false) throws(ExitCode) -> TraceReader {
        do throws(TraceError) {
            return try openTraceFile(path, salvage: salvage)
        } catch {
            ctx.stderr.line(openFailure(path, error))
            throw exitCode(for: error)
        }
    }

    /// Opens a trace (`-` spools stdin), throwing the reader's error.
    static func openTraceFile(_ path: String, salvage: Bool = false) throws(TraceError) -> TraceReader {
        if path == "-" {
            let spooled = try StdinSpool.spool()
            defer { unlink(spooled) }  // the open descriptor keeps the data until exit
            return try TraceReader(path: spooled, options: .init(salvage: salvage))
        }
        return try TraceReader(path: path, options: .init(salvage: salvage))
    }

    /// The message for a trace that could not be opened: `Error: FILE: why`.
    static func openFailure(_ path: String, _ error: TraceError) -> String { "Error: " + about(path, error.description) }

    /// `message` naming the file it is about: `FILE: message`, unless the message names it already
    /// (`-` is `stdin`).
    static func about(_ path: String, _ message: String) -> String {
        let name = path == "-" ? "stdin" : path
        return message.contains(name) ? message : "\(name): \(message)"
    }

    /// The exit code for a trace error.
    static func exitCode(for error: TraceError) -> ExitCode {
        if error.code == .writerStopped { return .ioError }  // a write failed (disk full) and the writer stopped
        if error.code == .io {
            switch error.systemErrno {
            case ENOENT, EACCES, EISDIR, ENOTDIR, ELOOP, ENAMETOOLONG: return .noInput
            default: return .ioError
            }
        }
        return .dataError
    }
}
