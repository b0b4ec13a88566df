import RelayProtocol

/// One of the relay's own simulated desktops: the machine and the connection it holds (if any).
public struct SimulatedPeer: Sendable {
    /// Its number (its timers are ``RelayTimer/desktop(serial:_:)``).
    public let serial: UInt64
    /// The account it serves.
    public let userId: String
    /// The desktop machine.
    public internal(set) var desktop: SimulatedDesktop
    /// The relay-side connection it is using (nil between sockets).
    public internal(set) var connection: ConnectionID?
}

/// The relay's own simulated desktops (docs/DEVICE_LINK.md, "any account, any desktop"): a
/// ``SimulatedDesktop`` for each (account, desktop ID) a phone names that no real desktop serves, each
/// with its own jobs and snapshot streams, plus those of ``DevRelayConfiguration/desktopsAtStart``.
///
/// They talk to the relay over connections with ``ConnectionID/simulatedBit`` set, exactly as a real
/// desktop's socket would (upgrade, `register`, frames through the same faults and routing; not the
/// per-socket rate limit, since one such connection carries every phone's RPCs),
/// but with no socket and no latency: the relay hands their frames over inside ``DevRelay/handle(_:at:)``
/// in order (a FIFO, no recursion), so a driver only ever sees the real sockets. A real desktop of the
/// same account and ID takes over from a simulated one (which then goes away for good).
extension DevRelay {
    enum Delivery: Sendable {
        /// An input for a simulated desktop.
        case toDesktop(serial: UInt64, DesktopInput)
        /// A network action of a simulated desktop (connect, send, close) reaching the relay.
        case fromDesktop(serial: UInt64, DesktopAction)

        var serial: UInt64 {
            switch self {
            case .toDesktop(let s, _), .fromDesktop(let s, _): s
            }
        }
    }

    /// Hands `delivery` over after ``DevRelayConfiguration/desktopLatency`` (at once when zero).
    mutating func deliver(_ delivery: Delivery) {
        guard configuration.desktopLatency > .zero else { return queue.append(delivery) }
        lastLinkSlot += 1
        inFlight[lastLinkSlot] = delivery
        arm(.desktopLink(slot: lastLinkSlot), at: now + configuration.desktopLatency)
    }

    /// A delayed delivery arrived.
    mutating func linkArrived(_ slot: UInt64) {
        guard let d = inFlight.removeValue(forKey: slot) else { return }
        queue.append(d)
    }

    /// Brings up the desktops of `desktopsAtStart` (once).
    mutating func startDesktops() {
        guard !started else { return }
        started = true
        for d in configuration.desktopsAtStart {
            let user = d.userId ?? RelayConstants.openLinkAccount
            let key = DeviceKey(userId: user, deviceId: lowercasedASCII(d.deviceId))
            guard simulatedByKey[key] == nil else { continue }
            addDesktop(userId: user, deviceId: d.deviceId, name: d.name, offersLinkCode: d.offersLinkCode,
                       openCodes: d.userId == nil)
        }
    }

    /// Whether the relay simulates `deviceId` (lower-cased) for phones that name it.
    func simulates(_ deviceId: String) -> Bool {
        if configuration.offlineDesktops.contains(deviceId) { return false }
        switch configuration.simulatedDesktops {
        case .any: return true
        case .only(let ids): return ids.contains { lowercasedASCII($0) == deviceId }
        case .none: return false
        }
    }

    /// The desktop a phone talks to when it names none.
    var fallbackDesktopId: String {
        if case .only(let ids) = configuration.simulatedDesktops, let first = ids.first { return lowercasedASCII(first) }
        return lowercasedASCII(configuration.defaultDesktopId)
    }

    /// Makes sure a phone's target desktop exists: a real one connected, or a simulated one (brought up
    /// now, registered by the time this returns); nothing for a desktop the relay does not simulate.
    mutating func ensureDesktop(for phone: RelayConnection) {
        let target = phone.targetDesktopDeviceId ?? links[DeviceKey(userId: phone.userId, deviceId: phone.deviceId)] ?? fallbackDesktopId
        let key = DeviceKey(userId: phone.userId, deviceId: target)
        if let c = devices[key], connections[c] != nil { return }
        guard simulatedByKey[key] == nil, simulates(target) else { return }
        addDesktop(userId: phone.userId, deviceId: target, name: "Simulated Desktop", offersLinkCode: false, openCodes: false)
    }

    private mutating func addDesktop(userId: String, deviceId: String, name: String, offersLinkCode: Bool, openCodes: Bool) {
        lastDesktopSerial += 1
        let serial = lastDesktopSerial
        // The first desktop gets the relay's seed + 1 (what a simulation's single desktop always had).
        let seed = configuration.seed &+ 1 &+ (serial - 1) &* 1_000_003
        let desktop = SimulatedDesktop(configuration: SimulatedDesktopConfiguration(
            deviceId: deviceId, deviceName: name, userId: userId, seed: seed,
            snapshotInterval: configuration.desktopSnapshotInterval, offersLinkCode: offersLinkCode))
        let key = DeviceKey(userId: userId, deviceId: desktop.wireDeviceId)
        simulated[serial] = SimulatedPeer(serial: serial, userId: userId, desktop: desktop, connection: nil)
        simulatedByKey[key] = serial
        if openCodes { openCodeDesktops.insert(key) }
        log("simulating desktop \(desktop.wireDeviceId) for user \(userId)")
        queue.append(.toDesktop(serial: serial, .start))
        // `ignore` rules installed before this desktop existed apply to it too.
        for f in desktopRules { queue.append(.toDesktop(serial: serial, .fault(f))) }
        drainQueue()
    }

    /// A real desktop of the same account and ID connected: the simulated one steps aside for good (its
    /// timers cancelled, its connection dropped without a `disconnected` announcement).
    mutating func retireSimulatedDesktop(_ key: DeviceKey) {
        guard let serial = simulatedByKey.removeValue(forKey: key), let peer = simulated.removeValue(forKey: serial) else { return }
        for (t, _) in armedTimers { if case .desktop(let s, _) = t, s == serial { cancel(t) } }
        queue.removeAll { $0.serial == serial }
        for (slot, d) in inFlight.sorted(by: { $0.key < $1.key }) where d.serial == serial {
            inFlight[slot] = nil
            cancel(.desktopLink(slot: slot))
        }
        if let c = peer.connection {
            simulatedOwner[c] = nil
            removeConnection(c, announce: false)
        }
        log("simulated desktop \(peer.desktop.wireDeviceId) of user \(peer.userId) replaced by a real desktop")
    }

    /// A desktop fault: every simulated desktop gets it now; `ignore` rules are kept for later ones.
    mutating func applyDesktopFault(_ f: DesktopFault) {
        if case .ignore = f.effect { desktopRules.append(f) }
        for serial in simulated.keys.sorted() { queue.append(.toDesktop(serial: serial, .fault(f))) }
    }

    /// Performs a relay action on a connection: a driver's socket gets the action; a simulated desktop's
    /// connection turns it into the desktop's input (delivered in order by ``drainQueue()``).
    mutating func emit(_ action: RelayAction) {
        let c: ConnectionID
        switch action {
        case .acceptUpgrade(let x), .refuseUpgrade(let x, _, _), .send(let x, _), .close(let x, _, _): c = x
        default: return out.append(action)
        }
        guard c.isSimulated else { return out.append(action) }
        guard let serial = simulatedOwner[c], simulated[serial]?.connection == c else { return }
        switch action {
        case .acceptUpgrade: deliver(.toDesktop(serial: serial, .connected))
        case .refuseUpgrade(_, let status, _):
            simulated[serial]?.connection = nil
            simulatedOwner[c] = nil
            deliver(.toDesktop(serial: serial, .refused(status: status)))
        case .send(_, let frame): deliver(.toDesktop(serial: serial, .frame(frame)))
        case .close(_, let code, let reason):
            simulated[serial]?.connection = nil
            simulatedOwner[c] = nil
            deliver(.toDesktop(serial: serial, .closed(code: code, reason: reason)))
        default: break
        }
    }

    /// Hands queued inputs to the simulated desktops and performs what they do, until nothing is left.
    mutating func drainQueue() {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !queue.isEmpty {
            let item = queue.removeFirst()
            switch item {
            case .toDesktop(let serial, let input):
                guard var peer = simulated[serial] else { continue }
                let actions = peer.desktop.handle(input, at: now)
                simulated[serial] = peer
                for a in actions {
                    switch a {
                    case .connect, .send, .close:
                        if configuration.desktopLatency > .zero { deliver(.fromDesktop(serial: serial, a)) } else { desktopAction(serial, a) }
                    default:
                        desktopAction(serial, a)
                    }
                }
            case .fromDesktop(let serial, let action):
                desktopAction(serial, action)
            }
        }
    }

    private mutating func desktopAction(_ serial: UInt64, _ action: DesktopAction) {
        guard let peer = simulated[serial] else { return }
        switch action {
        case .connect(var request):
            lastSimulatedConnection += 1
            let c = ConnectionID(rawValue: ConnectionID.simulatedBit | lastSimulatedConnection)
            simulated[serial]?.connection = c
            simulatedOwner[c] = serial
            // One simulated desktop serves every phone of its account through this connection: the
            // per-socket rate limit is for client sockets (it capped all RPCs near 25/s, dropping the rest).
            request.inProcess = true
            upgrade(c, request)
        case .send(let frame):
            guard let c = peer.connection, connections[c] != nil else { return }
            connections[c]?.lastFrameAt = now
            switch frame {
            case .text(let text): receiveText(c, text)
            case .binary(let bytes): receiveBinary(c, bytes, faults: true)
            }
        case .close(let code, let reason):
            guard let c = peer.connection else { return }
            simulated[serial]?.connection = nil
            simulatedOwner[c] = nil
            if connections[c] != nil {
                log("\(c) closed by the simulated desktop (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : ", \(reason)"))")
                removeConnection(c)
            }
        case .armTimer(let t, let deadline):
            arm(.desktop(serial: serial, t), at: deadline)
        case .cancelTimer(let t):
            cancel(.desktop(serial: serial, t))
        case .log(let line):
            out.append(.log(line))
        }
    }
}
