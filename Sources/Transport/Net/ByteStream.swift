/// A reliable, ordered, bidirectional byte stream: a TCP connection (``TCPStream``) or TLS over one
/// (``TLSStream``).
///
/// Threading: one thread may read while another writes (the live driver runs a reader thread per socket
/// and sends from others); concurrent writes are serialised by the stream, concurrent reads are not
/// meaningful (they would split the stream between readers). ``close()`` may be called from any thread
/// and wakes a reader or writer blocked on this stream.
public protocol ByteStream: AnyObject, Sendable {
    /// Reads at most `buffer.count` bytes into `buffer`, blocking until at least one byte is available.
    /// Returns the number of bytes read, 0 at end of stream (the peer closed its side).
    /// - Parameter timeout: how long to wait for data; nil waits without limit.
    /// - Throws: ``NetError`` `.timedOut` (nothing was consumed: reading again is safe), `.closed` after
    ///   ``close()``, `.read` or `.tls` when the connection failed.
    func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(NetError) -> Int

    /// Writes all of `bytes`, blocking while the peer does not take them.
    /// - Parameter timeout: how long the whole write may take; nil waits without limit.
    /// - Throws: ``NetError`` `.timedOut` (part of the bytes may have been written: the stream is then
    ///   unusable), `.closed` after ``close()``, `.write` or `.tls` when the connection failed.
    func write(_ bytes: UnsafeRawBufferPointer, timeout: Duration?) throws(NetError)

    /// Closes both directions (TLS: sends close_notify first, without waiting). Idempotent; a blocked
    /// reader or writer returns. The descriptor is released when the stream is deinitialised.
    func close()

    /// The peer's address, e.g. `127.0.0.1:443` or `[::1]:8080`.
    var remoteAddress: SocketAddress { get }
}

extension ByteStream {
    /// Reads at most `maxCount` bytes (see ``read(into:timeout:)``); an empty array means end of stream.
    public func read(maxCount: Int, timeout: Duration?) throws(NetError) -> [UInt8] {
        let count = max(1, maxCount)
        var buffer = [UInt8](repeating: 0, count: count)
        let outcome = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(NetError) in try read(into: raw, timeout: timeout) }
        }
        let n = try outcome.get()
        buffer.removeLast(count - n)
        return buffer
    }

    /// Writes all of `bytes` (see ``write(_:timeout:)``).
    public func write(_ bytes: [UInt8], timeout: Duration?) throws(NetError) {
        let outcome = bytes.withUnsafeBytes { raw in
            Result { () throws(NetError) in try write(raw, timeout: timeout) }
        }
        try outcome.get()
    }
}
