public import WebSocket

/// A WebSocket server on event loops: one listening socket, and every connection served by one loop of
/// an ``EventLoopGroup`` (about one thread per core, never a thread per connection): a
/// ``LoopStreamServer`` whose streams speak WebSocket (``LoopWebSocket``).
///
/// For each accepted socket, on its loop: the TLS handshake (when configured, non-blocking), the upgrade
/// request read and validated (a malformed one is refused with the codec's status: 400, 426), then
/// `upgrade` is called with the connection (its ``LoopWebSocket/request`` set), which answers with
/// ``LoopWebSocket/accept(headers:handler:)`` or ``LoopWebSocket/refuse(status:headers:body:)``, at once
/// or later from any thread. `handshakeTimeout` bounds TLS, the request and the decision (no decision in
/// time: 503). Accepted connections deliver their events to the handler given to `accept`.
///
/// ``stop()`` stops accepting, drops every connection (handlers get `.closed(1006)` naming the server's
/// stop) and stops the loops it made itself; a server that is not stopped keeps serving (call it).
public final class WebSocketServer: Sendable {
    private let streams: LoopStreamServer

    /// The listening socket's address (with the real port when 0 was asked for).
    public var localAddress: SocketAddress { streams.localAddress }
    /// The bound port.
    public var port: UInt16 { streams.port }
    /// The loops serving the connections.
    public var group: EventLoopGroup { streams.group }

    /// Binds `host:port` (0: an ephemeral port, see ``port``) and starts accepting.
    /// - Parameters:
    ///   - tls: the server identity for `wss`; nil serves plain `ws`.
    ///   - configuration: codec limits and options of every connection (transparent for a proxy).
    ///   - limits: output buffering and backpressure of every connection.
    ///   - handshakeTimeout: bound on the TLS handshake, reading the upgrade request and the decision.
    ///   - closeTimeout: each connection's close-handshake timeout.
    ///   - group: the loops to serve on; nil starts ``EventLoopGroup/defaultThreadCount`` loops, stopped by
    ///     ``stop()``.
    ///   - log: called (on a loop) with one line per connection event: accepted, refused, failed
    ///     handshake, dropped, ended; and accept failures.
    ///   - upgrade: called on the connection's loop once its upgrade request is read: accept or refuse it.
    /// - Throws: ``NetError`` when the address cannot be bound or the loops cannot start.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                configuration: WebSocketConfiguration = WebSocketConfiguration(),
                limits: LoopBufferLimits = LoopBufferLimits(),
                handshakeTimeout: Duration = .seconds(10), closeTimeout: Duration = .seconds(5),
                group: EventLoopGroup? = nil, log: (@Sendable (String) -> Void)? = nil,
                upgrade: @escaping @Sendable (LoopWebSocket) -> Void) throws(NetError) {
        streams = try LoopStreamServer(host: host, port: port, tls: tls, limits: limits, group: group, log: log) { stream in
            LoopWebSocket.serve(stream, configuration: configuration, closeTimeout: closeTimeout, handshakeTimeout: handshakeTimeout,
                                log: log, upgrade: upgrade)
        }
    }

    /// A server that decides every upgrade with `decide` (synchronously, on the connection's loop) and
    /// gives accepted connections' events to `handler`.
    public convenience init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil,
                            configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            limits: LoopBufferLimits = LoopBufferLimits(),
                            handshakeTimeout: Duration = .seconds(10), closeTimeout: Duration = .seconds(5),
                            group: EventLoopGroup? = nil, log: (@Sendable (String) -> Void)? = nil,
                            decide: @escaping @Sendable (WebSocketUpgradeRequest) -> WebSocketUpgradeDecision = { _ in .accept() },
                            handler: @escaping LoopWebSocketHandler) throws(NetError) {
        try self.init(host: host, port: port, tls: tls, configuration: configuration, limits: limits,
                      handshakeTimeout: handshakeTimeout, closeTimeout: closeTimeout, group: group, log: log) { connection in
            guard let request = connection.request else { return }
            switch decide(request) {
            case .accept(let headers): connection.accept(headers: headers, handler: handler)
            case .refuse(let status, let headers, let body): connection.refuse(status: status, headers: headers, body: body)
            }
        }
    }

    /// How many sockets are open (being set up, open, or closing).
    public var connectionCount: Int { streams.connectionCount }

    /// Stops accepting, drops every connection (handlers get `.closed(1006)`), and stops the loops when the
    /// server made them. Waits for all of it; never call it from one of the server's loops. Idempotent.
    public func stop() {
        streams.stop()
    }
}
