public import RelayProtocol

/// One scripted input from the app's UI (a call, a claim, a lifecycle change) at a moment of time: what
/// a simulation feeds on virtual time and the live client on the real clock (so it lives with the inputs,
/// below both).
public struct ScenarioStep: Sendable, Hashable {
    /// When (from the start of the run).
    public var at: Moment
    /// What the UI hands the client.
    public var input: ClientInput
    /// Creates a step.
    public init(at: Moment, _ input: ClientInput) {
        self.at = at
        self.input = input
    }
}

/// When and how the simulated user links a desktop.
public struct SimulatedLink: Sendable, Hashable {
    /// When the code is entered.
    public var at: Moment
    /// Scanned from the QR (true) or typed (false).
    public var scanned: Bool
    /// Creates one.
    public init(at: Moment, scanned: Bool) {
        self.at = at
        self.scanned = scanned
    }
}
