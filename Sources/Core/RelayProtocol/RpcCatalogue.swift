/// One RPC method the client may call, with its rules (PROTOCOL.md §7, SPEC A8).
public struct RpcMethod: Sendable, Hashable {
    /// The method name, e.g. `session.update`.
    public let name: String
    /// Whether a request must carry an `idempotencyKey` (a mutation); the client refuses to send one
    /// without it.
    public let needsIdempotencyKey: Bool
    /// How long the client waits for the response before failing the call and reconnecting.
    public let timeout: Duration

    /// Creates a method description.
    public init(name: String, needsIdempotencyKey: Bool, timeout: Duration) {
        self.name = name
        self.needsIdempotencyKey = needsIdempotencyKey
        self.timeout = timeout
    }
}

/// The RPC methods of protocol 1.6: the single source of the method table in code.
///
/// `Tests/RelayProtocolTests/Fixtures/rpc-methods.tsv` (a copy of the shared catalogue) is checked
/// against this table line by line.
public enum RpcCatalogue {
    /// The number of methods (SPEC A8).
    public static let methodCount = 65
    /// The number of methods that need an idempotency key (SPEC A8).
    public static let idempotencyKeyedCount = 22

    /// Every method, in the catalogue's (alphabetical) order.
    public static let all: [RpcMethod] = [
        m("account.deleteAccount", true, 30),
        m("actions.createImplementationPlan", true, 30),
        m("actions.estimatePromptTokens", false, 60),
        m("actions.getImplementationPlanPrompt", false, 30),
        m("actions.mergePlans", true, 30),
        m("app.getActiveSessionId", false, 30),
        m("app.getProjectDirectory", false, 30),
        m("app.getUserHomeDirectory", false, 30),
        m("app.listFolders", false, 30),
        m("app.setProjectDirectory", true, 30),
        m("config.refreshRuntimeAIConfig", false, 30),
        m("files.getMetadata", false, 30),
        m("files.search", false, 90),
        m("job.cancel", true, 30),
        m("job.delete", true, 30),
        m("job.get", false, 90),
        m("job.list", false, 60),
        m("job.updateContent", true, 30),
        m("plan.generateMarkdown", false, 180),
        m("session.create", true, 30),
        m("session.delete", true, 30),
        m("session.duplicate", true, 30),
        m("session.get", false, 60),
        m("session.getContents", false, 30),
        m("session.getFileRelationships", false, 30),
        m("session.getHistoryState", false, 90),
        m("session.getOverview", false, 30),
        m("session.list", false, 60),
        m("session.mergeHistoryState", true, 90),
        m("session.rename", true, 30),
        m("session.syncHistoryState", true, 90),
        m("session.update", true, 60),
        m("session.updateFileBrowserState", false, 30),
        m("settings.getAppSetting", false, 30),
        m("settings.getDefaultTaskModelSettings", false, 30),
        m("settings.getExternalFolders", false, 30),
        m("settings.getProjectTaskModelSettings", false, 60),
        m("settings.getProvidersWithModels", false, 30),
        m("settings.resetProjectTaskSetting", false, 30),
        m("settings.setAppSetting", false, 30),
        m("settings.setExternalFolders", true, 30),
        m("settings.setProjectTaskSetting", true, 30),
        m("speech.transcribe", false, 30),
        m("system.ping", false, 3),
        m("systemPrompts.getDefault", false, 30),
        m("systemPrompts.getProject", false, 30),
        m("systemPrompts.isProjectCustomized", false, 30),
        m("systemPrompts.resetProject", false, 30),
        m("systemPrompts.setProject", true, 30),
        m("terminal.detach", false, 30),
        m("terminal.getActiveSessions", false, 30),
        m("terminal.getAvailableShells", false, 30),
        m("terminal.getDefaultShell", false, 30),
        m("terminal.getLog", false, 30),
        m("terminal.getMetadata", false, 30),
        m("terminal.getStatus", false, 30),
        m("terminal.kill", true, 30),
        m("terminal.resize", false, 30),
        m("terminal.setDefaultShell", false, 30),
        m("terminal.start", true, 60),
        m("terminal.write", true, 30),
        m("text.enhance", false, 30),
        m("text.refine", false, 30),
        m("workflows.startFileFinder", true, 30),
        m("workflows.startWebSearch", true, 30),
    ]

    private static let byName: [String: RpcMethod] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The method called `name`, or nil when the catalogue does not list it. O(1).
    public static func method(named name: String) -> RpcMethod? { byName[name] }

    private static func m(_ name: String, _ keyed: Bool, _ seconds: Int64) -> RpcMethod {
        RpcMethod(name: name, needsIdempotencyKey: keyed, timeout: .seconds(seconds))
    }
}

/// An RPC error code (the `code` of `RpcErrorBody`): JSON-RPC's, the desktop's (-32000 ... -32009) and
/// the relay's (-32010). Unknown codes are representable too.
public struct RpcErrorCode: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The numeric code.
    public let rawValue: Int

    /// The code `rawValue`.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// -32700: the request was not valid JSON.
    public static let parseError = RpcErrorCode(rawValue: -32700)
    /// -32600: the request object is invalid.
    public static let invalidRequest = RpcErrorCode(rawValue: -32600)
    /// -32601: no such method.
    public static let methodNotFound = RpcErrorCode(rawValue: -32601)
    /// -32602: invalid parameters.
    public static let invalidParams = RpcErrorCode(rawValue: -32602)
    /// -32603: internal error.
    public static let internalError = RpcErrorCode(rawValue: -32603)
    /// -32000: the desktop refused the caller (first of the desktop's range).
    public static let unauthorized = RpcErrorCode(rawValue: -32000)
    /// -32009: the desktop does not implement the method (last of the desktop's range).
    public static let notImplemented = RpcErrorCode(rawValue: -32009)
    /// -32010: the relay answers this itself when no desktop is connected ("Desktop is offline").
    public static let desktopOffline = RpcErrorCode(rawValue: -32010)
    /// -32011: RelayTrace's development relay refused the request for its per-socket rate limit (not in
    /// PROTOCOL.md, whose relay drops the excess silently); `data.retryAfterMs` says when to retry.
    public static let rateLimited = RpcErrorCode(rawValue: -32011)

    /// The desktop's application range, -32000 ... -32009.
    public static let desktopRange: ClosedRange<Int> = -32009 ... -32000

    /// Whether this code is in the desktop's range.
    public var isDesktopError: Bool { RpcErrorCode.desktopRange.contains(rawValue) }

    /// Whether this is one of JSON-RPC's own codes (-32700, -32600 ... -32603).
    public var isJSONRPCError: Bool { rawValue == -32700 || (-32603 ... -32600).contains(rawValue) }

    /// The number.
    public var description: String { String(rawValue) }
}
