import Net
import Testing

@Suite("TCP")
struct TCPTests {
    /// Echo server: accepts one connection, echoes until EOF, returns how many bytes it echoed.
    private func echo(_ listener: TCPListener) throws -> NetThread {
        try NetThread {
            guard let conn = try? listener.accept(timeout: testTimeout) else { return }
            while let chunk = try? conn.read(maxCount: 16 * 1024, timeout: testTimeout), !chunk.isEmpty {
                guard (try? conn.write(chunk, timeout: testTimeout)) != nil else { break }
            }
            conn.close()
        }
    }

    @Test("echo over IPv4 and IPv6 loopback", arguments: ["127.0.0.1", "::1"])
    func echoRoundTrip(host: String) throws {
        let listener = try TCPListener(host: host, port: 0)
        #expect(listener.port != 0)
        #expect(listener.localAddress.isIPv6 == (host == "::1"))
        let server = try echo(listener)
        defer { server.join() }

        let client = try TCP.connect(host: host, port: listener.port, timeout: testTimeout)
        #expect(client.remoteAddress.port == listener.port)
        #expect(client.remoteAddress.host == host)
        var random = TestRandom(seed: 6)
        let payload = random.bytes(300_000)
        // Write from another thread while this one reads, so neither side's buffer fills up.
        let writer = try NetThread { try? client.write(payload, timeout: testTimeout) }
        var received: [UInt8] = []
        while received.count < payload.count {
            let chunk = try client.read(maxCount: 65536, timeout: testTimeout)
            if chunk.isEmpty { break }
            received += chunk
        }
        writer.join()
        #expect(received == payload)
        client.close()
        #expect(throws: NetError.self) { try client.read(maxCount: 1, timeout: testTimeout) }
    }

    @Test("end of stream reads as 0 bytes")
    func endOfStream() throws {
        let listener = try TCPListener(host: "127.0.0.1")
        let server = try NetThread {
            guard let conn = try? listener.accept(timeout: testTimeout) else { return }
            try? conn.write(Array("bye".utf8), timeout: testTimeout)
            conn.shutdownWrite()
            _ = try? conn.read(maxCount: 1, timeout: testTimeout)
        }
        let client = try TCP.connect(host: "localhost", port: listener.port, timeout: testTimeout)
        var got: [UInt8] = []
        while true {
            let chunk = try client.read(maxCount: 10, timeout: testTimeout)
            if chunk.isEmpty { break }
            got += chunk
        }
        #expect(got == Array("bye".utf8))
        client.close()
        server.join()
    }

    @Test("connecting to a closed port is a typed connectionRefused error")
    func connectionRefused() throws {
        // Bind an ephemeral port, then free it: nothing listens there any more.
        let port = try TCPListener(host: "127.0.0.1").port
        let error = #expect(throws: NetError.self) {
            _ = try TCP.connect(host: "127.0.0.1", port: port, timeout: testTimeout)
        }
        #expect(error?.kind == .connectionRefused)
        #expect(error?.errno == 111)  // ECONNREFUSED on Linux
        #expect(error?.operation.contains("127.0.0.1:\(port)") == true)
    }

    @Test("unresolvable host and port 0 are typed errors")
    func badTargets() {
        let resolve = #expect(throws: NetError.self) {
            _ = try TCP.connect(host: "no-such-host.invalid", port: 80, timeout: testTimeout)
        }
        #expect(resolve?.kind == .resolve)
        let zero = #expect(throws: NetError.self) { _ = try TCP.connect(host: "127.0.0.1", port: 0, timeout: testTimeout) }
        #expect(zero?.kind == .invalidArgument)
    }

    @Test("a read with nothing to read times out, and nothing is lost")
    func readTimeout() throws {
        let listener = try TCPListener(host: "127.0.0.1")
        let client = try TCP.connect(host: "127.0.0.1", port: listener.port, timeout: testTimeout)
        let server = try listener.accept(timeout: testTimeout)
        let error = #expect(throws: NetError.self) { _ = try client.read(maxCount: 10, timeout: .milliseconds(20)) }
        #expect(error?.kind == .timedOut)
        try server.write([1, 2, 3], timeout: testTimeout)
        #expect(try client.read(maxCount: 10, timeout: testTimeout) == [1, 2, 3])
    }

    @Test("an accept with no client times out; close wakes a blocked accept; the port is in use while bound")
    func acceptTimeoutAndClose() throws {
        let listener = try TCPListener(host: "127.0.0.1")
        let timeout = #expect(throws: NetError.self) { _ = try listener.accept(timeout: .milliseconds(20)) }
        #expect(timeout?.kind == .timedOut)

        let inUse = #expect(throws: NetError.self) { _ = try TCPListener(host: "127.0.0.1", port: listener.port) }
        #expect(inUse?.errno == 98)  // EADDRINUSE

        let result = Recorder<NetError.Kind>()
        let waiter = try NetThread {
            do throws(NetError) {
                _ = try listener.accept(timeout: testTimeout)
            } catch {
                result.append(error.kind)
            }
        }
        listener.close()
        waiter.join()
        #expect(result.values == [.closed])
    }

    @Test("close from another thread wakes a blocked reader")
    func closeWakesReader() throws {
        let listener = try TCPListener(host: "::1")
        let client = try TCP.connect(host: "::1", port: listener.port, timeout: testTimeout)
        let server = try listener.accept(timeout: testTimeout)
        let result = Recorder<NetError.Kind>()
        let reader = try NetThread {
            do throws(NetError) {
                _ = try client.read(maxCount: 10, timeout: testTimeout)
            } catch {
                result.append(error.kind)
            }
        }
        client.close()
        reader.join()
        #expect(result.values == [.closed])
        // The peer sees end of stream.
        #expect(try server.read(maxCount: 10, timeout: testTimeout).isEmpty)
    }
}
