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

    /// Makes a new identity in a new private temporary directory, valid for `localhost`, `127.0.0.1`,
    /// `::1` and the extra `names` (host names, or IP addresses, e.g. the machine's address on the
    /// network a phone uses).
    public static func generate(names: [String] = []) throws -> SelfSignedIdentity {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relaytrace-tls-\(UUID().uuidString)")
        return try generate(in: dir.path, names: names)
    }

    /// The identity kept in `directory` (`cert.pem`, `key.pem`) when both files are there, else a new one
    /// written there (the directory is made, mode 0700). A proxy that keeps its certificate this way is
    /// trusted once by a phone or simulator and stays trusted across runs.
    public static func loadOrGenerate(in directory: String, names: [String] = []) throws -> (identity: SelfSignedIdentity, new: Bool) {
        let cert = (directory as NSString).appendingPathComponent("cert.pem")
        let key = (directory as NSString).appendingPathComponent("key.pem")
        if FileManager.default.fileExists(atPath: cert), FileManager.default.fileExists(atPath: key) {
            return (SelfSignedIdentity(certificatePath: cert, privateKeyPath: key, directory: directory), false)
        }
        return (try generate(in: directory, names: names), true)
    }

    /// The SHA-256 fingerprint of the certificate in `certificatePath` (the DER bytes), as
    /// colon-separated upper-case hex pairs, as browsers and iOS' certificate details show it.
    public static func sha256Fingerprint(certificatePath: String) throws -> String {
        guard let bio = BIO_new_file(certificatePath, "r") else { throw IdentityError("cannot read \(certificatePath)") }
        defer { BIO_free(bio) }
        guard let x = PEM_read_bio_X509(bio, nil, nil, nil) else { throw IdentityError("\(certificatePath) holds no PEM certificate") }
        defer { X509_free(x) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard X509_digest(x, EVP_sha256(), &digest, &length) == 1, length == 32 else { throw IdentityError("X509_digest failed") }
        return digest.map { b in let h = String(b, radix: 16, uppercase: true); return h.count == 1 ? "0" + h : h }.joined(separator: ":")
    }

    private static func generate(in directory: String, names: [String]) throws -> SelfSignedIdentity {
        let dir = URL(fileURLWithPath: directory)
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
        let extra = names.map { n in n.contains(":") || n.allSatisfy({ $0.isNumber || $0 == "." }) ? "IP:\(n)" : "DNS:\(n)" }
        let alternativeNames = (["DNS:localhost", "IP:127.0.0.1", "IP:::1"] + extra).joined(separator: ",")
        for (nid, value) in [(NID_subject_alt_name, alternativeNames), (NID_basic_constraints, "critical,CA:TRUE"),
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
