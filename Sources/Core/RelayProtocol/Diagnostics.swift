/// A diagnostic as a trace records it: a stable code and structured fields. Its English is not recorded;
/// ``text`` renders it from ``DiagnosticCatalogue`` when it is shown, so rewording a message changes no
/// trace.
///
/// The machines' diagnostic enums (the relay client's `ClientDiagnostic`, the watch sender's
/// `WatchDiagnostic`) each say what record a case is; the catalogue, here below both of them and below
/// the inspection commands, holds the one English sentence of every code.
public struct DiagnosticRecord: Sendable, Hashable, CustomStringConvertible {
    /// The stable name of what happened, e.g. `staleGeneration` or `interest.ignored`.
    public var code: String
    /// What it happened to: generations and times as integers (`gen`, nanoseconds), names as strings.
    /// No member is named `code`, `action`, `watch` or `side` (the record's own members).
    public var fields: [String: JSONValue]

    /// Creates a record.
    public init(_ code: String, _ fields: [String: JSONValue] = [:]) {
        self.code = code
        self.fields = fields
    }

    /// The members a record of this diagnostic is made of besides the ones that say what kind of record it
    /// is: `code` and the fields.
    public var members: [String: JSONValue] {
        var o = fields
        o["code"] = .string(code)
        return o
    }

    /// Reads a diagnostic back from a record's JSON object: its `code` and every member but `code` and
    /// the record-kind members `ignoring`. Nil when there is no string `code` (a record from before
    /// diagnostics were typed holds only `text`).
    public init?(json: JSONValue, ignoring kindMembers: Set<String>) {
        guard case .object(let o) = json, let code = o["code"]?.stringValue else { return nil }
        var fields = o
        fields["code"] = nil
        for k in kindMembers { fields[k] = nil }
        self.init(code, fields)
    }

    /// The English sentence, rendered by ``DiagnosticCatalogue/text(of:)``.
    public var text: String { DiagnosticCatalogue.text(of: self) }
    /// The English sentence.
    public var description: String { text }
}

/// The English of every diagnostic code, in one place.
///
/// A template names fields in braces: `{input}` is a field as written (a string as is, a number in
/// decimal, `null` or a missing field as `none`); `{gen:g}` a generation (`g3`); `{to:t}` a time in
/// nanoseconds (`12.500s`); `{token:p8}` the first 8 characters of a string. A code the catalogue does
/// not know (a trace from a newer writer) renders as its code and fields, so nothing is hidden.
public enum DiagnosticCatalogue {
    /// The templates by code. The wording is what the diagnostics said before they were typed, so a trace
    /// recorded then (with only `text`) still replays strictly (``matchesLegacyText(_:_:)``).
    public static let templates: [String: String] = [
        // The relay client machine.
        "staleGeneration": "stale {input} on {gen:g} (current {current:g})",
        "staleTimer": "stale timer {timer}",
        "undecodableFrame": "undecodable frame on {gen:g}: {error}",
        "droppedSnakeCaseMessage": "dropped message on {gen:g}: snake_case key at {path}",
        "unmatchedResponse": "response for no pending call {requestId}",
        "traceIdMismatch": "response {requestId} rejected: trace ID {received}, request had {expected}",
        "responseOnOtherGeneration": "response {requestId} on {receivedOn:g}, request went on {sentOn:g}",
        "unexpectedMessage": "unexpected {type} on {gen:g} in {phase}",
        "relayError": "relay error on {gen:g}: {relayCode} {message}",
        "timeWentBackwards": "time went backwards from {from:t} to {to:t}",
        "ignoredInput": "ignored {input} in {phase}",
        "waitingForIdentity": "start held until the device identity is known",
        "identityMismatch": "identity store has device {read}, client is configured for {configured}",
        "staleRegistration": "stale origin: registration on {gen:g} (attempt#{attempt})",
        "staleReply": "stale origin: reply to auth#{request} (attempt#{attempt})",
        "interestGaveUp": "interest delivery for {sessionId} given up after 4 retries",
        // The timeline-interest coordinator (A11), inside the client.
        "interest.staleTimer": "interest: stale timer {timer}",
        "interest.unknownClaim": "interest: {input} for unknown claim#{claim}",
        "interest.alreadyInForeground": "interest: ignored {input}: already in the foreground",
        "interest.desktopNotRegistered": "interest: ignored {input}: desktop not registered",
        "interest.nothingToDeliver": "interest: ignored {input}: no interest to deliver",
        "interest.retryScheduled": "interest: ignored {input}: a retry is already scheduled",
        "interest.gaveUp": "interest: ignored {input}: gave up until the next renewal or registration",
        // The login and refresh flow (A2), inside the client.
        "auth.noLoginInProgress": "auth: cancelLogin: no login in progress",
        "auth.sessionActive": "auth: resumeSession: a session is already active",
        "auth.noSession": "auth: {input}: no session",
        "auth.staleTimer": "auth: timer {timer}: not armed for this time (stale)",
        "auth.loginInProgress": "auth: startLogin: a login is already in progress",
        "auth.alreadyLoggedIn": "auth: startLogin: already logged in; log out first",
        "auth.staleResponse": "auth: response for auth#{request}: no such request pending (stale)",
        "auth.staleFailure": "auth: failure of auth#{request}: no such request pending (stale)",
        // The identity gate (A1), inside the client.
        "identity.alreadyStarted": "identity: start: already started",
        "identity.readNotRequested": "identity: identityRead: no read was requested",
        "identity.notUnreadable": "identity: resetConfirmed: the identity is not unreadable",
        // The watch sender (SPEC Part C).
        "ackForOtherIncarnation": "ignored ack {next}@{incarnation:p8}: another incarnation",
        "ackOutsideSentRange": "ignored ack {next}@{incarnation:p8}: outside the sent range {baseline}..<{sentNext}",
        "sendFailedForUnknownSequence": "ignored a send failure for #{sequence}: not queued",
    ]

    /// The sentence of `d`: its template with the fields filled in, or for an unknown code the code and
    /// its fields as JSON.
    public static func text(of d: DiagnosticRecord) -> String {
        guard let template = templates[d.code] else {
            return d.fields.isEmpty ? d.code : "\(d.code) \(JSONValue.object(d.fields).jsonText)"
        }
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += rest[..<open]
            let spec = rest[rest.index(after: open)..<close]
            let parts = spec.split(separator: ":", maxSplits: 1)
            out += render(d.fields[String(parts[0])], format: parts.count > 1 ? parts[1] : "")
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    private static func render(_ v: JSONValue?, format: Substring) -> String {
        switch (v, format) {
        case (nil, _), (.null?, _): return "none"
        case (.int(let n)?, "g"): return "g\(n)"
        case (.int(let n)?, "t"): return Moment(nanoseconds: n).description
        case (.string(let s)?, "p8"): return String(s.prefix(8))
        case (.string(let s)?, _): return s
        case (.int(let n)?, _): return String(n)
        case (let other?, _): return other.jsonText
        }
    }

    /// Whether `legacy`, the `text` of a diagnostic recorded before diagnostics were typed, says what `d`
    /// says: a trace recorded then still replays strictly against a client that now records codes.
    public static func matchesLegacyText(_ legacy: String, _ d: DiagnosticRecord) -> Bool { legacy == text(of: d) }
}
