import CZstd

/// The version of the linked libzstd, e.g. `1.5.4`.
public var zstdLibraryVersion: String {
    let v = ZSTD_versionNumber()
    return "\(v / 10000).\(v / 100 % 100).\(v % 100)"
}

/// A reusable zstd compression context: one-shot frames with the content size and a content checksum.
/// Not thread-safe: one owner (the writer thread).
final class ZstdCompressor {
    private let cctx: OpaquePointer

    /// A context compressing at `level` (zstd levels 1...22; 3 is zstd's default).
    init(level: Int32) throws(TraceError) {
        guard let c = ZSTD_createCCtx() else { throw TraceError(.compression, "ZSTD_createCCtx failed (out of memory)") }
        cctx = c
        for (param, value) in [(ZSTD_c_compressionLevel, level), (ZSTD_c_checksumFlag, 1), (ZSTD_c_contentSizeFlag, 1)] {
            let r = ZSTD_CCtx_setParameter(c, param, value)
            if ZSTD_isError(r) != 0 {
                ZSTD_freeCCtx(c)
                throw TraceError(.compression, "zstd refused parameter \(param.rawValue)=\(value): \(Self.errorName(r))")
            }
        }
    }

    deinit { ZSTD_freeCCtx(cctx) }

    /// The worst-case compressed size of `count` bytes.
    static func bound(_ count: Int) -> Int { ZSTD_compressBound(count) }

    /// Compresses `src` into one zstd frame written at `dst[offset...]`; `dst` must have
    /// `bound(src.count)` bytes from `offset`. Returns the frame's size.
    func compress(_ src: [UInt8], into dst: inout [UInt8], at offset: Int) throws(TraceError) -> Int {
        let capacity = dst.count - offset
        let r = src.withUnsafeBytes { s in
            dst.withUnsafeMutableBytes { d in
                ZSTD_compress2(cctx, d.baseAddress! + offset, capacity, s.baseAddress, s.count)
            }
        }
        if ZSTD_isError(r) != 0 { throw TraceError(.compression, "zstd compression failed: \(Self.errorName(r))") }
        return r
    }

    static func errorName(_ code: Int) -> String {
        guard let p = ZSTD_getErrorName(code) else { return "error \(code)" }
        return String(cString: p)
    }
}

/// A reusable zstd decompression context. Not thread-safe: one owner (a reader).
final class ZstdDecompressor {
    private let dctx: OpaquePointer

    init() throws(TraceError) {
        guard let d = ZSTD_createDCtx() else { throw TraceError(.compression, "ZSTD_createDCtx failed (out of memory)") }
        dctx = d
    }

    deinit { ZSTD_freeDCtx(dctx) }

    /// The content size a frame declares: nil when unknown or when the bytes are not a frame header.
    static func declaredContentSize(_ frame: UnsafeRawBufferPointer) -> UInt64? {
        let r = ZSTD_getFrameContentSize(frame.baseAddress, frame.count)
        if r >= UInt64.max - 1 { return nil }  // ZSTD_CONTENTSIZE_UNKNOWN / ZSTD_CONTENTSIZE_ERROR
        return r
    }

    /// The size of the zstd frame at the start of `bytes` (walks block headers, no decompression), or nil.
    static func frameSize(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let r = ZSTD_findFrameCompressedSize(bytes.baseAddress, bytes.count)
        return ZSTD_isError(r) != 0 ? nil : r
    }

    /// Decompresses the single frame `src` into `dst[0..<size]` (`dst` is resized to `size`); the frame's
    /// content checksum is verified by zstd. Fails unless it yields exactly `size` bytes.
    func decompress(_ src: UnsafeRawBufferPointer, size: Int, into dst: inout [UInt8]) throws(TraceError) -> Int {
        if dst.count != size {
            // Not zeroed first: zstd writes all `size` bytes or fails (and then the caller throws away the
            // buffer's contents); zeroing a 1 MiB chunk buffer was a tenth of a seek's decompression.
            if dst.count < size { dst = [UInt8](unsafeUninitializedCapacity: size) { _, n in n = size } } else { dst.removeLast(dst.count - size) }
        }
        if size == 0 {
            var scratch: UInt8 = 0
            let r = ZSTD_decompressDCtx(dctx, &scratch, 0, src.baseAddress, src.count)
            if ZSTD_isError(r) != 0 { throw TraceError(.compression, ZstdCompressor.errorName(r)) }
            return r
        }
        let r = dst.withUnsafeMutableBytes { d in ZSTD_decompressDCtx(dctx, d.baseAddress, size, src.baseAddress, src.count) }
        if ZSTD_isError(r) != 0 {
            let code = ZSTD_getErrorCode(r)
            if code == ZSTD_error_checksum_wrong {
                throw TraceError(.checksumMismatch, "zstd content checksum mismatch")
            }
            throw TraceError(.compression, ZstdCompressor.errorName(r))
        }
        return r
    }
}
