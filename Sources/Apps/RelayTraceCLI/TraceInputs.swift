#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Inspect
import RelayProtocol
import Trace

/// The traces of a command that reads many (`export`, `stats`, `check`, `verify`): its FILE arguments in
/// order, a directory standing for its `*.rtrace` files sorted by name (not recursive). Each trace is
/// read on its own and its result streamed before the next is opened, so a fleet of any size is read in
/// the memory of one trace (and of the list of a directory's names). A trace that cannot be opened (or a
/// directory that cannot be listed or holds no trace) is reported on stderr with its name and the others
/// are still read; the command exits with the worst (largest) exit code of all its traces (docs/CLI.md,
/// "Many traces").
struct TraceInputs {
    /// The FILE arguments as given.
    let arguments: [String]
    /// Whether the command reads several traces: more than one FILE, or a directory. With one FILE that
    /// is a trace, every command prints exactly what it always printed.
    let isMany: Bool

    /// The `file` arguments of `args`. `-` (stdin) may be given once.
    init(_ args: ParsedArguments, command: String) throws(UsageError) {
        arguments = args.positionalList("file")
        if arguments.count(where: { $0 == "-" }) > 1 {
            throw UsageError(message: "'-' (stdin) can be given once", commandPath: ["relaytrace", command])
        }
        isMany = arguments.count > 1 || arguments.contains(where: Self.isDirectory)
    }

    /// The FILE argument's help: files, directories or stdin.
    static func argument(_ what: String = "The trace files") -> ArgumentSpec {
        ArgumentSpec(name: "file", help: "\(what) ('-' for stdin), or directories: their *.rtrace files in name order.", variadic: true)
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return path != "-" && stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// The trace files of `path`: itself, or a directory's `*.rtrace` files sorted by name; a directory
    /// that cannot be listed or holds none throws the message and exit code (66) to report.
    static func files(of path: String) throws(InputFailure) -> [String] {
        guard isDirectory(path) else { return [path] }
        guard let dir = opendir(path) else {
            throw InputFailure(message: "Error: cannot list the directory \(path): \(String(cString: strerror(errno)))", code: .noInput)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            names.append(name)
        }
        let traces = names.filter { $0.hasSuffix(".rtrace") }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        if traces.isEmpty { throw InputFailure(message: "Error: the directory \(path) holds no .rtrace file", code: .noInput) }
        let prefix = path.hasSuffix("/") ? path : path + "/"
        return traces.map { prefix + $0 }
    }

    /// Why an input gave no trace: the message said on stderr and the exit code it counts as.
    struct InputFailure: Error {
        var message: String
        var code: ExitCode
    }

    /// Opens every trace in order and hands it to `body` (which returns the trace's exit code), or the
    /// error that kept it from opening (already reported on stderr; `body` returns its code, normally
    /// `RelayTraceCommand.exitCode(for:)`). Stops when stdout broke (`| head` went away). Returns the
    /// worst exit code (a directory that gave no trace counts 66).
    func forEach(_ ctx: CLIContext, _ body: (String, Result<TraceReader, TraceError>) -> ExitCode) -> ExitCode {
        var worst = ExitCode.success
        for argument in arguments {
            let paths: [String]
            do { paths = try Self.files(of: argument) } catch {
                ctx.stderr.line(error.message)
                worst = worst.worse(error.code)
                continue
            }
            for path in paths {
                if ctx.stdout.isBroken { return worst }
                let opened: Result<TraceReader, TraceError>
                do throws(TraceError) {
                    opened = .success(try RelayTraceCommand.openTraceFile(path))
                } catch {
                    ctx.stdout.flush()
                    ctx.stderr.line(RelayTraceCommand.openFailure(path, error))
                    opened = .failure(error)
                }
                worst = worst.worse(body(path, opened))
            }
        }
        return worst
    }

    /// As ``forEach(_:_:)`` for a command with nothing to say about a trace that did not open:
    /// `body` gets the opened ones, a failure counts its exit code.
    func forEachOpened(_ ctx: CLIContext, _ body: (String, TraceReader) -> ExitCode) -> ExitCode {
        forEach(ctx) { path, opened in
            switch opened {
            case .success(let reader): body(path, reader)
            case .failure(let error): RelayTraceCommand.exitCode(for: error)
            }
        }
    }
}

extension ExitCode {
    /// The worse of two exit codes: the larger (0 < 1 found < 65 data < 66 no input < 74 I/O).
    func worse(_ other: ExitCode) -> ExitCode { other.rawValue > rawValue ? other : self }
}

/// Prints what a command found in each of its traces in its `--format`: `jsonl`, rows (JSON objects)
/// with the trace's columns added; `json`, the one object, or with several traces one JSON array of the
/// objects with the trace's columns; text, under a `==> FILE <==` heading with several traces.
struct PerTraceOutput {
    let format: String
    let isMany: Bool
    private var first = true

    init(format: String, isMany: Bool) {
        self.format = format
        self.isMany = isMany
    }

    /// One trace's result: `rows` for jsonl, `json` for json, `text` for text (only the one asked for
    /// is made).
    mutating func add(_ columns: TraceColumns, rows: () -> [JSONValue], json: () -> JSONValue, text: () -> String, _ out: Output) {
        switch format {
        case "jsonl":
            for row in rows() { Self.line(columns.tagged(row), out) }
        case "json" where isMany:
            out.write(first ? "[\n" : ",\n")
            out.write(columns.tagged(json()).prettyText())
        case "json":
            out.line(json().prettyText())
        default:
            if isMany { out.line((first ? "" : "\n") + "==> \(columns.trace) <==") }
            out.write(text())
        }
        first = false
    }

    /// Ends the output (the JSON array of several traces; `[]` when none was read).
    func finish(_ out: Output) {
        if format == "json", isMany { out.write(first ? "[]\n" : "\n]\n") }
    }

    /// Writes `value` as one JSON line.
    static func line(_ value: JSONValue, _ out: Output) {
        out.write(bytes: value.serialized())
        out.write("\n")
    }
}
