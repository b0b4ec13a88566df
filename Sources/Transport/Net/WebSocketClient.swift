public import WebSocket

/// Opens client WebSocket connections over TCP (`ws`) or TLS (`wss`).
public enum WebSocketClient {
    /// Connects to `url`, runs the opening handshake, and returns the open channel.
    ///
    /// - Parameters:
    ///   - url: `ws://host[:port]/path?query` or `wss://...`.
    ///   - headers: extra request headers, in order (e.g. `Authorization`, `X-Device-ID`).
    ///   - tls: how a `wss` server is verified (on by default, against the system store).
    ///   - timeout: bound on connect, TLS handshake and WebSocket handshake together.
    ///   - configuration: codec limits (32 MiB messages by default) and options.
    ///   - closeTimeout: how long the channel waits for the server's half of the close handshake.
    ///   - maskingKeys: where frame masks come from (the system's secure generator when nil).
    /// - Throws: ``WebSocketError``: `.invalidURL`; `.transport` (refused, timed out, certificate
    ///   verification, ...); `.handshake` (kind `.refused` with the HTTP status, e.g. 401).
    public static func connect(url: String, headers: HTTPHeaders = HTTPHeaders(),
                               tls: TLSClientConfiguration = TLSClientConfiguration(),
                               timeout: Duration = .seconds(10),
                               configuration: WebSocketConfiguration = WebSocketConfiguration(),
                               closeTimeout: Duration = .seconds(5),
                               maskingKeys: (any MaskingKeySource)? = nil) throws(WebSocketError) -> WebSocketChannel {
        let parsed = try WebSocketURL(url)
        let deadline = Deadline(timeout)
        func left() -> Duration { deadline.instant.map { $0 - ContinuousClock.now } ?? timeout }

        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var handshake: WebSocketClientHandshake
        do throws(WebSocketHandshakeError) {
            handshake = try WebSocketClientHandshake(host: parsed.hostHeader, path: parsed.target, nonce: nonce,
                                                     extraHeaders: headers)
        } catch {
            throw .handshake(error)
        }

        let stream: any ByteStream
        do throws(NetError) {
            let tcp = try TCP.connect(host: parsed.host, port: parsed.port, timeout: left())
            stream = parsed.isSecure ? try TLSStream.connect(over: tcp, host: parsed.host, configuration: tls, timeout: left()) : tcp
            try stream.write(handshake.requestBytes, timeout: left())
        } catch {
            throw .transport(error)
        }

        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count: Int
            do throws(NetError) {
                let remaining = left()
                let outcome = buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(NetError) in try stream.read(into: raw, timeout: remaining) }
                }
                count = try outcome.get()
            } catch {
                stream.close()
                throw .transport(error)
            }
            guard count > 0 else {
                stream.close()
                throw .transport(NetError(.read, operation: "WebSocket handshake with \(parsed)",
                                          "the server closed the connection before answering the upgrade; is it a WebSocket endpoint?"))
            }
            let progress: WebSocketHandshakeProgress<WebSocketUpgradeResponse>
            do throws(WebSocketHandshakeError) {
                progress = try handshake.receive(Array(buffer[0..<count]))
            } catch {
                stream.close()
                throw .handshake(error)
            }
            if case .complete(_, let consumed) = progress {
                return WebSocketChannel(stream: stream, role: .client, configuration: configuration,
                                        maskingKeys: maskingKeys, initialBytes: Array(buffer[consumed..<count]),
                                        closeTimeout: closeTimeout)
            }
        }
    }
}
