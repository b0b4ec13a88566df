import RelayProtocol

/// Why a fault script did not parse: line and column (1-based, in characters) and what to do.
public struct FaultScriptError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The 1-based line.
    public var line: Int
    /// The 1-based column of the offending token.
    public var column: Int
    /// What is wrong and how to fix it.
    public var message: String

    /// Creates an error.
    public init(line: Int, column: Int, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    /// `fault script line 3, column 10: ...`.
    public var description: String { "fault script line \(line), column \(column): \(message)" }
}

extension FaultScript {
    /// The longest script accepted, in bytes (bounded work on outside input).
    public static let maxScriptBytes = 1 << 20

    /// Parses a script (grammar in docs/FAULTS.md). Blank lines and `#` comments are skipped.
    public static func parse(_ text: String) throws(FaultScriptError) -> FaultScript {
        guard text.utf8.count <= maxScriptBytes else {
            throw FaultScriptError(line: 1, column: 1, message: "script is \(text.utf8.count) bytes, more than \(maxScriptBytes); split it")
        }
        var directives: [FaultDirective] = []
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let tokens = try tokenize(rawLine, line: lineNumber)
            guard !tokens.isEmpty else { continue }
            var p = LineParser(tokens: tokens, line: lineNumber, endColumn: rawLine.count + 1)
            directives.append(try p.parseDirective())
        }
        return FaultScript(directives: directives)
    }

    struct Token {
        var text: String
        var column: Int
    }

    /// Splits a line into whitespace-separated tokens; `#` starts a comment; `key="a b"` keeps its
    /// quoted value (quotes removed, `\"` and `\\` escapes).
    static func tokenize(_ line: Substring, line number: Int) throws(FaultScriptError) -> [Token] {
        var tokens: [Token] = []
        var current = ""
        var start = 0
        var column = 0
        var inQuotes = false
        var escape = false
        var quoteColumn = 0
        for ch in line {
            column += 1
            if inQuotes {
                if escape {
                    current.append(ch)
                    escape = false
                } else if ch == "\\" {
                    escape = true
                } else if ch == "\"" {
                    inQuotes = false
                } else {
                    current.append(ch)
                }
                continue
            }
            if ch == "#" { break }
            if ch == " " || ch == "\t" || ch == "\r" {
                if !current.isEmpty || start > 0 { tokens.append(Token(text: current, column: start)) }
                current = ""
                start = 0
                continue
            }
            if start == 0 { start = column }
            if ch == "\"" {
                inQuotes = true
                quoteColumn = column
                continue
            }
            current.append(ch)
        }
        if inQuotes {
            throw FaultScriptError(line: number, column: quoteColumn, message: "unterminated quoted string; close it with \"")
        }
        if !current.isEmpty || start > 0 { tokens.append(Token(text: current, column: start)) }
        return tokens
    }

    /// Parses a duration such as `30s`, `1m30s`, `2h`, `500ms`, `1.5s` into nanoseconds (nil when it is
    /// not one): ``TimeSyntax/nanoseconds(_:bareSeconds:)``, the one time syntax of RelayTrace.
    public static func parseDuration(_ text: String) -> Int64? {
        TimeSyntax.nanoseconds(text)
    }
}

/// Parses one line's tokens.
struct LineParser {
    var tokens: [FaultScript.Token]
    var line: Int
    var endColumn: Int
    var index = 0

    init(tokens: [FaultScript.Token], line: Int, endColumn: Int) {
        self.tokens = tokens
        self.line = line
        self.endColumn = endColumn
    }

    func error(_ token: FaultScript.Token?, _ message: String) -> FaultScriptError {
        FaultScriptError(line: line, column: token?.column ?? endColumn, message: message)
    }

    var peek: FaultScript.Token? { index < tokens.count ? tokens[index] : nil }

    mutating func next(expecting what: String) throws(FaultScriptError) -> FaultScript.Token {
        guard let t = peek else { throw error(nil, "expected \(what) but the line ended") }
        index += 1
        return t
    }

    mutating func time(_ what: String) throws(FaultScriptError) -> Moment {
        let t = try next(expecting: what)
        guard let ns = FaultScript.parseDuration(t.text) else {
            throw error(t, "\"\(t.text)\" is not a time; write e.g. 30s, 1m30s, 2h, 500ms")
        }
        return Moment(nanoseconds: ns)
    }

    /// `key=value` arguments with their tokens.
    struct Arguments {
        var values: [String: (value: String, token: FaultScript.Token)] = [:]
        var positional: [FaultScript.Token] = []
    }

    mutating func parseDirective() throws(FaultScriptError) -> FaultDirective {
        let first = try next(expecting: "at, from or on")
        var timing: FaultTiming
        var triggerArgs = Arguments()
        var triggerToken: FaultScript.Token?
        switch first.text {
        case "at":
            timing = .at(try time("a time after 'at'"))
        case "from":
            let from = try time("a time after 'from'")
            let kw = try next(expecting: "'to'")
            guard kw.text == "to" else { throw error(kw, "expected 'to' in 'from T1 to T2'") }
            let toToken = peek
            let to = try time("a time after 'to'")
            guard to > from else { throw error(toToken, "the window ends at or before it starts; write from T1 to T2 with T2 > T1") }
            timing = .window(from: from, to: to)
        case "on":
            let type = try next(expecting: "a message type after 'on' (e.g. register, rpc.request)")
            triggerToken = type
            while let t = peek, FaultTarget(rawValue: t.text) == nil {
                index += 1
                try add(t, to: &triggerArgs)
            }
            for (key, entry) in triggerArgs.values where !["method", "event", "count", "peer"].contains(key) {
                throw error(entry.token, "unknown trigger argument \"\(key)\"; use method=, event=, peer= or count=")
            }
            if let p = triggerArgs.positional.first { throw error(p, "unexpected \"\(p.text)\" in the trigger; write key=value") }
            let peer = try peerValue(triggerArgs)
            try checkNames(triggerArgs, type: type)
            timing = .on(FrameMatch(direction: .fromClient, peer: peer, messageType: type.text,
                                    method: triggerArgs.values["method"]?.value, eventType: triggerArgs.values["event"]?.value))
        default:
            throw error(first, "a directive starts with 'at T', 'from T1 to T2' or 'on TYPE', not \"\(first.text)\"")
        }
        let targetToken = try next(expecting: "a target (relay, desktop or client)")
        guard let target = FaultTarget(rawValue: targetToken.text) else {
            throw error(targetToken, "unknown target \"\(targetToken.text)\"; use relay, desktop or client")
        }
        let verb = try next(expecting: "a directive after '\(target.rawValue)'")
        var args = Arguments()
        while let t = peek {
            index += 1
            try add(t, to: &args)
        }
        if let c = triggerArgs.values["count"], args.values["count"] == nil { args.values["count"] = c }
        let fault = try build(target: target, verb: verb, args: args, timing: timing, triggerToken: triggerToken)
        return FaultDirective(line: line, timing: timing, fault: fault)
    }

    func add(_ t: FaultScript.Token, to args: inout Arguments) throws(FaultScriptError) {
        if let eq = t.text.firstIndex(of: "=") {
            let key = String(t.text[..<eq])
            let value = String(t.text[t.text.index(after: eq)...])
            guard !key.isEmpty else { throw error(t, "an argument needs a key before '='") }
            guard args.values[key] == nil else { throw error(t, "argument \"\(key)\" given twice") }
            args.values[key] = (value, t)
        } else {
            args.positional.append(t)
        }
    }

    func peerValue(_ args: Arguments) throws(FaultScriptError) -> ClientKind? {
        guard let p = args.values["peer"] else { return .mobile }
        switch p.value {
        case "mobile": return .mobile
        case "desktop": return .desktop
        case "any": return nil
        default: throw error(p.token, "peer=\(p.value) is not mobile, desktop or any")
        }
    }

    /// Checks the names a frame match gives (`type=`, `method=`, `event=`, and the message type of an
    /// `on` trigger) against the protocol's vocabulary, so a misspelt or misplaced one is an error with a
    /// suggestion instead of a fault that matches nothing: `type=chat:timeline-interest` is an event type
    /// (use `event=`).
    func checkNames(_ args: Arguments, type typeToken: FaultScript.Token? = nil) throws(FaultScriptError) {
        let vocabularies: [(key: String, what: String, names: [String])] = [
            ("type", "a message type", KnownNames.messageTypes + ["binary"]),
            ("method", "an RPC method of the catalogue", KnownNames.methods),
            ("event", "an event type", KnownNames.eventTypes),
        ]
        var given: [(key: String, value: String, token: FaultScript.Token, trigger: Bool)] = []
        if let t = typeToken { given.append(("type", t.text, t, true)) }
        for v in vocabularies {
            if let entry = args.values[v.key] { given.append((v.key, entry.value, entry.token, false)) }
        }
        for g in given {
            guard let v = vocabularies.first(where: { $0.key == g.key }), !v.names.contains(g.value) else { continue }
            let shown = g.trigger ? "'on \(g.value)'" : "\(g.key)=\(g.value)"
            var message = "\(shown): \"\(g.value)\" is not \(v.what), so it would match nothing"
            if let other = vocabularies.first(where: { $0.key != g.key && $0.names.contains(g.value) }) {
                message += "; it is \(other.what): write \(other.key)=\(g.value)"
            } else if let s = KnownNames.suggestion(for: g.value, among: v.names) {
                message += "; did you mean '\(s)'?"
            }
            throw error(g.token, message)
        }
    }

    func count(_ args: Arguments) throws(FaultScriptError) -> Int? {
        guard let c = args.values["count"] else { return nil }
        guard let n = Int(c.value), n > 0, n <= 1_000_000 else {
            throw error(c.token, "count=\(c.value) is not a whole number from 1 to 1000000")
        }
        return n
    }

    func only(_ args: Arguments, keys: Set<String>, positional: Int, verb: FaultScript.Token, usage: String) throws(FaultScriptError) {
        for (key, entry) in args.values where !keys.contains(key) {
            throw error(entry.token, "'\(verb.text)' takes no argument \"\(key)\"; usage: \(usage)")
        }
        if args.positional.count > positional {
            let extra = args.positional[positional]
            throw error(extra, "unexpected \"\(extra.text)\"; usage: \(usage)")
        }
        if args.positional.count < positional {
            throw error(nil, "'\(verb.text)' needs more; usage: \(usage)")
        }
    }

    func build(target: FaultTarget, verb: FaultScript.Token, args: Arguments, timing: FaultTiming,
               triggerToken: FaultScript.Token?) throws(FaultScriptError) -> Fault {
        var until: Moment? = nil
        if case .window(_, let to) = timing { until = to }
        var trigger: FrameMatch? = nil
        if case .on(let m) = timing { trigger = m }
        func noTrigger() throws(FaultScriptError) {
            if trigger != nil {
                throw error(triggerToken, "'on' triggers work with relay close-client, restart, invalid-resume and ownership-failed only; use 'at' or 'from ... to' for '\(verb.text)'")
            }
        }
        func noWindow() throws(FaultScriptError) {
            if until != nil {
                throw error(verb, "'\(verb.text)' happens at one moment; use 'at T' instead of 'from ... to'")
            }
        }
        switch target {
        case .relay:
            switch verb.text {
            case "drop", "delay":
                try noTrigger()
                let isDelay = verb.text == "delay"
                let usage = isDelay
                    ? "delay to-client|from-client by=DURATION [type=T] [method=M] [event=E] [peer=mobile|desktop|any] [count=N]"
                    : "drop to-client|from-client [type=T] [method=M] [event=E] [peer=mobile|desktop|any] [count=N]"
                try only(args, keys: isDelay ? ["by", "type", "method", "event", "peer", "count"] : ["type", "method", "event", "peer", "count"],
                         positional: 1, verb: verb, usage: usage)
                try checkNames(args)
                let dirToken = args.positional[0]
                guard let direction = FrameDirection(rawValue: dirToken.text) else {
                    throw error(dirToken, "\"\(dirToken.text)\" is not to-client or from-client")
                }
                let match = FrameMatch(direction: direction, peer: try peerValue(args), messageType: args.values["type"]?.value,
                                       method: args.values["method"]?.value, eventType: args.values["event"]?.value)
                if isDelay {
                    guard let by = args.values["by"] else { throw error(verb, "delay needs by=DURATION; usage: \(usage)") }
                    guard let ns = FaultScript.parseDuration(by.value), ns > 0 else {
                        throw error(by.token, "by=\(by.value) is not a positive duration (e.g. by=2s)")
                    }
                    return .relay(RelayFault(.delay(match, by: .nanoseconds(ns)), count: try count(args), until: until))
                }
                return .relay(RelayFault(.drop(match), count: try count(args), until: until))
            case "invalid-resume", "ownership-failed":
                try only(args, keys: ["count"], positional: 0, verb: verb, usage: "\(verb.text) [count=N]")
                if let trigger, trigger.messageType != RelayMessage.TypeName.register {
                    throw error(triggerToken, "'\(verb.text)' answers registers; its trigger can only be 'on register'")
                }
                let effect: RelayFault.Effect = verb.text == "invalid-resume" ? .invalidResume : .deviceOwnershipFailed
                return .relay(RelayFault(effect, count: try count(args), until: until))
            case "close-client":
                try noWindow()
                try only(args, keys: ["code", "reason", "peer", "count"], positional: 0, verb: verb,
                         usage: "close-client [code=N] [reason=TEXT] [peer=mobile|desktop|any] [count=N]")
                var code: UInt16? = nil
                if let c = args.values["code"] {
                    guard let v = UInt16(c.value), v >= 1000, v <= 4999 else {
                        throw error(c.token, "code=\(c.value) is not a close code from 1000 to 4999 (omit it for an empty close frame)")
                    }
                    code = v
                }
                var t = trigger
                if t != nil, args.values["peer"] != nil { t?.peer = try peerValue(args) }
                let effect = RelayFault.Effect.closeClient(code: code, reason: args.values["reason"]?.value ?? "fault: close-client",
                                                           peer: t == nil ? try peerValue(args) : t?.peer)
                return .relay(RelayFault(effect, trigger: t, count: try count(args)))
            case "restart":
                try noWindow()
                try only(args, keys: ["count"], positional: 0, verb: verb, usage: "restart")
                return .relay(RelayFault(.restart, trigger: trigger, count: try count(args)))
            case "refuse-upgrades":
                try noTrigger()
                try only(args, keys: ["status", "count"], positional: 0, verb: verb, usage: "refuse-upgrades status=401|429|500 [count=N]")
                guard let s = args.values["status"] else { throw error(verb, "refuse-upgrades needs status=401, 429 or 500") }
                guard let status = Int(s.value), [401, 429, 500].contains(status) else {
                    throw error(s.token, "status=\(s.value) is not 401, 429 or 500")
                }
                return .relay(RelayFault(.refuseUpgrades(status: status), count: try count(args), until: until))
            default:
                throw error(verb, "unknown relay directive \"\(verb.text)\"; use drop, delay, invalid-resume, ownership-failed, close-client, restart or refuse-upgrades")
            }
        case .desktop:
            try noTrigger()
            switch verb.text {
            case "ignore-pings":
                try only(args, keys: ["count"], positional: 0, verb: verb, usage: "ignore-pings [count=N]")
                return .desktop(DesktopFault(.ignore(method: "system.ping"), count: try count(args), until: until))
            case "ignore":
                try only(args, keys: ["method", "count"], positional: 0, verb: verb, usage: "ignore method=NAME [count=N]")
                guard let m = args.values["method"], !m.value.isEmpty else { throw error(verb, "ignore needs method=NAME") }
                try checkNames(args)
                return .desktop(DesktopFault(.ignore(method: m.value), count: try count(args), until: until))
            case "disconnect":
                try only(args, keys: ["code"], positional: 0, verb: verb, usage: "disconnect [code=N]")
                var code: UInt16? = nil
                if let c = args.values["code"] {
                    guard let v = UInt16(c.value), v >= 1000, v <= 4999 else {
                        throw error(c.token, "code=\(c.value) is not a close code from 1000 to 4999")
                    }
                    code = v
                }
                return .desktop(DesktopFault(.disconnect(code: code), until: until))
            case "reconnect":
                try noWindow()
                try only(args, keys: [], positional: 0, verb: verb, usage: "reconnect")
                return .desktop(DesktopFault(.reconnect))
            default:
                throw error(verb, "unknown desktop directive \"\(verb.text)\"; use ignore-pings, ignore, disconnect or reconnect")
            }
        case .client:
            try noTrigger()
            try noWindow()
            func word<T>(_ usage: String, _ make: (String) -> T?) throws(FaultScriptError) -> T {
                try only(args, keys: [], positional: 1, verb: verb, usage: usage)
                let w = args.positional[0]
                guard let v = make(w.text) else { throw error(w, "\"\(w.text)\" is not valid here; usage: \(usage)") }
                return v
            }
            switch verb.text {
            case "path":
                return .client(.path(try word("path wifi|cellular|none") { ClientFault.Path(rawValue: $0) }))
            case "app":
                return .client(.app(try word("app background|inactive|active|foreground") { ClientFault.App(rawValue: $0) }))
            case "media":
                return .client(.media(try word("media on|off") { $0 == "on" ? true : $0 == "off" ? false : nil }))
            case "push":
                return try word("push desktop-online") { $0 == "desktop-online" ? Fault.client(.pushDesktopOnline) : nil }
            default:
                throw error(verb, "unknown client directive \"\(verb.text)\"; use path, app, media or push")
            }
        }
    }
}
