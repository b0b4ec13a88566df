/// The command line's parsing without running anything, for coverage-guided fuzzing (`tools/fuzz.sh
/// cli-options`) and its regression tests.
public enum CLIFuzzEntry {
    /// Parses `arguments` (without the program name) as `relaytrace` does: finds the subcommand, parses
    /// its options and arguments, builds the help or usage text it would print, and runs the
    /// option-value parsers that need no file (`frames` filters, `replay --break`). Returns the exit code
    /// the parse alone decides: 0 when a command would run or help would print, 64 for a usage error.
    @discardableResult
    public static func parse(_ arguments: [String]) -> Int32 {
        let root = RelayTraceCommand.root
        let path = [root.name]
        guard let first = arguments.first else { return ExitCode.usage.rawValue }
        if first == "help" || first == "-h" || first == "--help" {
            _ = root.help(path: path)
            return ExitCode.success.rawValue
        }
        guard let sub = root.subcommands.first(where: { $0.name == first }) else {
            _ = root.usage(path: path)
            return ExitCode.usage.rawValue
        }
        let subPath = path + [sub.name]
        do throws(UsageError) {
            switch try sub.parse(Array(arguments.dropFirst()), path: subPath) {
            case .help:
                _ = sub.help(path: subPath)
            case .run(let parsed):
                if sub.name == "frames" { _ = try FramesCommand.filter(parsed) }
                if sub.name == "replay", let b = parsed.value("break") { _ = try ReplayCommand.parseBreakpoints(b, commandPath: subPath) }
            }
            return ExitCode.success.rawValue
        } catch {
            precondition(error.commandPath.first == root.name, "a usage error names the command it belongs to")
            _ = sub.usage(path: error.commandPath)
            return ExitCode.usage.rawValue
        }
    }
}
