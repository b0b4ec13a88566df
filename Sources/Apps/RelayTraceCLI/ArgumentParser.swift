// A small argument parser following swift-argument-parser's conventions (which this project cannot
// depend on): `OVERVIEW / USAGE / ARGUMENTS / OPTIONS / SUBCOMMANDS` help on stdout with exit 0, usage
// errors on stderr (`Error: ...`, the usage line, `See '... --help' for more information.`) with exit 64.
// Later commands (stats, diff, export, replay, capture...) declare a `CommandSpec` and reuse it.
// Repeatable options collect every value (`array(_:)`); how a command's options combine is declared
// with it (`rules`) and checked here.

import RelayProtocol

/// Process exit codes (BSD sysexits, as swift-argument-parser and the house rules use them).
public enum ExitCode: Int32, Sendable, Error {
    /// Success.
    case success = 0
    /// A check found something: `diff` (the traces differ), `lint` (secrets found).
    case found = 1
    /// A problem found in the data (corrupt trace, failed verification).
    case dataError = 65
    /// The command line was wrong.
    case usage = 64
    /// An input file does not exist or cannot be opened.
    case noInput = 66
    /// An I/O error while reading or writing.
    case ioError = 74
}

/// A named option: `--name <value>` (or `--name=value`), or a flag `--name` when `valueName` is nil.
struct OptionSpec: Sendable {
    var long: String
    var short: Character? = nil
    var valueName: String? = nil
    var help: String
    /// The accepted values, when the option is an enumeration.
    var allowed: [String]? = nil
    var defaultValue: String? = nil
    /// Whether the option may be given more than once: every value is kept, in order
    /// (``ParsedArguments/array(_:)``). Any other option given twice with different values is a usage error.
    var repeatable = false
}

/// How the options of one command combine, declared with the command and checked by the parser once
/// every option is read, so a command's mode rules live in one place. An operand is an option name
/// (`step`, given on the command line) or `name=value` (`format=json`: given with that value).
struct OptionRule: Sendable {
    enum Kind: Sendable {
        /// The option needs one of these.
        case requires([String])
        /// The option cannot go with any of these.
        case excludes([String])
    }
    /// The option (or `name=value`) the rule is about.
    var option: String
    var kind: Kind
    /// Why, said after the rule in the error (`--perturb runs the whole trace per seed`).
    var reason: String? = nil

    /// `option` needs one of `others`.
    static func requires(_ option: String, _ others: [String], _ reason: String? = nil) -> OptionRule {
        OptionRule(option: option, kind: .requires(others), reason: reason)
    }

    /// `option` cannot go with any of `others`.
    static func excludes(_ option: String, _ others: [String], _ reason: String? = nil) -> OptionRule {
        OptionRule(option: option, kind: .excludes(others), reason: reason)
    }
}

/// A positional argument.
struct ArgumentSpec: Sendable {
    var name: String
    var help: String
    var optional = false
    /// Whether the argument takes every remaining positional (`<file> ...`); only the last argument may.
    /// Its values are ``ParsedArguments/positionalList(_:)``; ``ParsedArguments/positionals`` holds the first.
    var variadic = false
}

/// A command: its help text, its arguments and options, and either subcommands or a body.
struct CommandSpec: Sendable {
    var name: String
    var abstract: String
    var discussion: String? = nil
    var arguments: [ArgumentSpec] = []
    var options: [OptionSpec] = []
    var subcommands: [CommandSpec] = []
    /// How its options combine (checked after parsing; a broken rule is a usage error).
    var rules: [OptionRule] = []
    var run: (@Sendable (ParsedArguments, CLIContext) -> ExitCode)? = nil
}

/// What the parser found.
struct ParsedArguments: Sendable {
    /// Each positional argument's value (a variadic one's first value).
    var positionals: [String: String] = [:]
    /// Every value of a variadic positional argument, in order.
    var positionalLists: [String: [String]] = [:]
    /// Each option's value: the last one given, or its default.
    var values: [String: String] = [:]
    var flags: Set<String> = []
    /// Every value given for each option, in order (defaults not included).
    var lists: [String: [String]] = [:]

    /// The value of an option (the last one given, or its default).
    func value(_ long: String) -> String? { values[long] }
    /// Every value given for an option, in order; its default alone when none was given; empty when
    /// it has neither. A repeatable option's values: `--break a --break b` is `["a", "b"]`.
    func array(_ long: String) -> [String] { lists[long] ?? values[long].map { [$0] } ?? [] }
    /// Every value of a positional argument: a variadic one's values in order, another's one value.
    func positionalList(_ name: String) -> [String] { positionalLists[name] ?? positionals[name].map { [$0] } ?? [] }
    /// Whether a flag was given.
    func flag(_ long: String) -> Bool { flags.contains(long) }
    /// A positive duration option (`--for 10m`): nil when absent; a `UsageError` naming the option and
    /// its text when that is not a positive time.
    func positiveDuration(_ long: String, path: [String]) throws(UsageError) -> Duration? {
        guard let text = values[long] else { return nil }
        guard let ns = TimeSyntax.nanoseconds(text), ns > 0 else {
            throw UsageError(message: "--\(long) '\(text)' is not a time (e.g. 30s, 2m)", commandPath: path)
        }
        return .nanoseconds(ns)
    }

    /// Whether an option or flag was given on the command line (a default does not count).
    func isGiven(_ long: String) -> Bool { flags.contains(long) || lists[long] != nil }

    /// Whether a rule operand holds: `name` given, or `name=value` given with that value.
    func holds(_ operand: String) -> Bool {
        guard let eq = operand.firstIndex(of: "=") else { return isGiven(operand) }
        let name = String(operand[..<eq])
        return lists[name] != nil && values[name] == String(operand[operand.index(after: eq)...])
    }
}

/// A command-line mistake: shown with the usage of `command`.
struct UsageError: Error {
    var message: String
    var commandPath: [String]
}

/// Why parsing stopped early without an error.
enum ParseOutcome {
    case run(ParsedArguments)
    case help
}

extension CommandSpec {
    /// Parses `args` (without the command path) against this command.
    func parse(_ args: [String], path: [String]) throws(UsageError) -> ParseOutcome {
        var parsed = ParsedArguments()
        for o in options { if let d = o.defaultValue { parsed.values[o.long] = d } }
        var positionals: [String] = []
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || a == "-" || !a.hasPrefix("-") {
                positionals.append(a)
                continue
            }
            if a == "--" {
                onlyPositionals = true
                continue
            }
            if a == "-h" || a == "--help" { return .help }
            var name = a
            var inline: String? = nil
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            let spec: OptionSpec?
            if name.hasPrefix("--") {
                spec = options.first { "--" + $0.long == name }
            } else {
                spec = name.count == 2 ? options.first { $0.short.map { "-\($0)" } == name } : nil
            }
            guard let spec else { throw UsageError(message: "Unknown option '\(name)'", commandPath: path) }
            guard let valueName = spec.valueName else {
                if inline != nil { throw UsageError(message: "The flag '--\(spec.long)' does not take a value", commandPath: path) }
                parsed.flags.insert(spec.long)
                continue
            }
            let value: String
            if let inline { value = inline } else {
                guard i < args.count else {
                    throw UsageError(message: "Missing value for '--\(spec.long) <\(valueName)>'", commandPath: path)
                }
                value = args[i]
                i += 1
            }
            if let allowed = spec.allowed, !allowed.contains(value) {
                let hint = KnownNames.suggestion(for: value, among: allowed).map { " Did you mean '\($0)'?" } ?? ""
                throw UsageError(
                    message: "The value '\(value)' is invalid for '--\(spec.long) <\(valueName)>'.\(hint) Please provide one of \(Self.list(allowed)).",
                    commandPath: path)
            }
            if !spec.repeatable, let earlier = parsed.lists[spec.long]?.first, earlier != value {
                throw UsageError(message: "'--\(spec.long)' was given twice ('\(earlier)' and '\(value)'); it takes one value", commandPath: path)
            }
            parsed.values[spec.long] = value
            parsed.lists[spec.long, default: []].append(value)
        }
        for (k, spec) in arguments.enumerated() {
            if k < positionals.count {
                parsed.positionals[spec.name] = positionals[k]
                if spec.variadic { parsed.positionalLists[spec.name] = Array(positionals[k...]) }
            } else if !spec.optional {
                throw UsageError(message: "Missing expected argument '<\(spec.name)>'", commandPath: path)
            }
        }
        if arguments.last?.variadic != true, positionals.count > arguments.count {
            throw UsageError(message: "Unexpected argument '\(positionals[arguments.count])'", commandPath: path)
        }
        try check(parsed, path: path)
        return .run(parsed)
    }

    /// Checks the command's ``rules`` against what was given.
    func check(_ parsed: ParsedArguments, path: [String]) throws(UsageError) {
        func shown(_ operand: String) -> String { "--" + operand.split(separator: "=", maxSplits: 1).joined(separator: " ") }
        for rule in rules where parsed.holds(rule.option) {
            let why = rule.reason.map { "; \($0)" } ?? ""
            switch rule.kind {
            case .requires(let others):
                if !others.contains(where: parsed.holds) {
                    let list = others.map(shown)
                    let needed = list.count == 1 ? list[0] : list.dropLast().joined(separator: ", ") + " or " + (list.last ?? "")
                    throw UsageError(message: "\(shown(rule.option)) goes with \(needed)\(why)", commandPath: path)
                }
            case .excludes(let others):
                if let other = others.first(where: parsed.holds) {
                    throw UsageError(message: "\(shown(rule.option)) cannot go with \(shown(other))\(why)", commandPath: path)
                }
            }
        }
    }

    static func list(_ values: [String]) -> String {
        let quoted = values.map { "'\($0)'" }
        if quoted.count <= 1 { return quoted.joined() }
        return quoted.dropLast().joined(separator: ", ") + " and " + (quoted.last ?? "")
    }

    /// `relaytrace info <file> [--format <format>]`.
    func usage(path: [String]) -> String {
        var parts = [path.joined(separator: " ")]
        if !subcommands.isEmpty { parts.append("<subcommand>") }
        for a in arguments {
            let shown = "<\(a.name)>" + (a.variadic ? " ..." : "")
            parts.append(a.optional ? "[\(shown)]" : shown)
        }
        for o in options {
            if let v = o.valueName { parts.append("[--\(o.long) <\(v)>\(o.repeatable ? " ..." : "")]") } else { parts.append("[--\(o.long)]") }
        }
        return parts.joined(separator: " ")
    }

    /// The full help text.
    func help(path: [String]) -> String {
        var out = "OVERVIEW: \(abstract)\n"
        if let discussion { out += "\n\(discussion)\n" }
        out += "\nUSAGE: \(usage(path: path))\n"
        func row(_ left: String, _ right: String) -> String {
            let pad = left.count < 24 ? String(repeating: " ", count: 24 - left.count) : "\n" + String(repeating: " ", count: 26)
            return "  \(left)\(pad)\(right)\n"
        }
        if !arguments.isEmpty {
            out += "\nARGUMENTS:\n"
            for a in arguments { out += row("<\(a.name)>", a.help) }
        }
        out += "\nOPTIONS:\n"
        for o in options {
            var left = o.short.map { "-\($0), " } ?? ""
            left += "--\(o.long)"
            if let v = o.valueName { left += " <\(v)>" }
            var text = o.help
            if o.repeatable { text += " (repeatable)" }
            if let d = o.defaultValue { text += " (default: \(d))" }
            out += row(left, text)
        }
        out += row("-h, --help", "Show help information.")
        if !subcommands.isEmpty {
            out += "\nSUBCOMMANDS:\n"
            for s in subcommands { out += row(s.name, s.abstract) }
            out += "\n  See '\(path.first ?? name) help <subcommand>' for detailed help.\n"
        }
        return out
    }
}
