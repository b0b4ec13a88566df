import RelayProtocol

/// SPEC A10 (event ingress): the machine hosts `EventIngress` and translates its effects into its own
/// actions and timers.
extension RelayClientMachine {
    mutating func applyIngress(_ effects: [IngressEffect]) {
        for effect in effects { emit(.ingress(effect)) }
    }
}
