import COpenSSL
import Foundation

/// A throw-away TLS server identity made on the spot through the system OpenSSL: a P-256 key and a
/// self-signed certificate valid for a day for `localhost`, `127.0.0.1` and `::1`, written as PEM files
/// in a private temporary directory. The client of a local capture trusts exactly this certificate, so
/// `wss` is verified end to end without a CA on the machine.
public struct SelfSignedIdentity: Sendable {
    /// The certificate (PEM); also the client's only trust anchor.
    public let certificatePath: String
    /// The private key (PEM, mode 0600).
    public let privateKeyPath: String
    /// The directory holding both (remove it when done).
    public let directory: String

    /// Makes a new identity.
    public static func generate() throws -> SelfSignedIdentity {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path

        guard let kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw IdentityError("EVP_PKEY_CTX_new_id failed") }
        defer { EVP_PKEY_CTX_free(kctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(kctx) == 1, EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kctx, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(kctx, &pkey) == 1, let pkey else { throw IdentityError("P-256 key generation failed") }
        defer { EVP_PKEY_free(pkey) }

        guard let x = X509_new() else { throw IdentityError("X509_new failed") }
        defer { X509_free(x) }
        var serial = [UInt8](repeating: 0, count: 8)
        _ = RAND_bytes(&serial, Int32(serial.count))
        let serialValue = serial.reduce(0) { ($0 << 8) | Int($1) } & 0x7FFF_FFFF_FFFF_FFFF
        guard X509_set_version(x, 2) == 1, ASN1_INTEGER_set(X509_get_serialNumber(x), serialValue) == 1,
              X509_gmtime_adj(X509_getm_notBefore(x), -60) != nil, X509_gmtime_adj(X509_getm_notAfter(x), 86_400) != nil,
              X509_set_pubkey(x, pkey) == 1, let name = X509_get_subject_name(x),
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, "relaytrace local relay", -1, -1, 0) == 1,
              X509_set_issuer_name(x, name) == 1 else { throw IdentityError("building the certificate failed") }
        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, x, x, nil, nil, 0)
        for (nid, value) in [(NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1"), (NID_basic_constraints, "critical,CA:TRUE"),
                             (NID_key_usage, "critical,digitalSignature,keyCertSign"), (NID_ext_key_usage, "serverAuth")] {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { throw IdentityError("extension \(value) failed") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x, ext, -1) == 1 else { throw IdentityError("adding \(value) failed") }
        }
        guard X509_sign(x, pkey, EVP_sha256()) > 0 else { throw IdentityError("signing the certificate failed") }

        guard let cbio = BIO_new_file(cert, "w") else { throw IdentityError("cannot write \(cert)") }
        let certOK = PEM_write_bio_X509(cbio, x) == 1
        BIO_free(cbio)
        let fd = open(key, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw IdentityError("cannot create \(key)") }
        close(fd)
        guard let kbio = BIO_new_file(key, "w") else { throw IdentityError("cannot write \(key)") }
        let keyOK = PEM_write_bio_PrivateKey(kbio, pkey, nil, nil, 0, nil, nil) == 1
        BIO_free(kbio)
        guard certOK, keyOK else { throw IdentityError("writing the PEM files failed") }
        return SelfSignedIdentity(certificatePath: cert, privateKeyPath: key, directory: dir.path)
    }

    /// Removes the files.
    public func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Making a self-signed identity failed.
public struct IdentityError: Error, CustomStringConvertible {
    /// What failed.
    public var description: String
    init(_ d: String) { description = d }
}
