import Crypto
import FleetProtocol
import Foundation
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#endif

/// The HTTPS listener's identity: a local certificate authority made on first start and kept in a
/// directory beside the store, and a server certificate it signs for the names and addresses the
/// listener answers to (docs/rest-api.md, "TLS"). A client trusts `ca.pem` (the official SDK's
/// `Configuration.ssl_ca_cert`); nothing is trusted system-wide.
///
/// Files (the directory is created `0700`; keys are written `0600`):
/// - `ca.pem`, `ca-key.pem`: the CA, ECDSA P-256, valid ten years, `CA:true, pathlen:0`;
/// - `server.pem`, `server-key.pem`: the server certificate, ECDSA P-256, valid 397 days,
///   `serverAuth`, with subject alternative names for every name asked for plus `localhost`,
///   `127.0.0.1` and `::1`. It is made again when one of the names is missing from it (then
///   with the names it had as well, up to 64: coordinators on several hosts can share the
///   directory), when it expires within a day, or when the CA changed.
public struct LocalTLSIdentity: Sendable {
    /// The CA certificate a client trusts.
    public var caCertificatePath: String
    /// The server certificate then the CA's, PEM.
    public var certificateChainPEM: String
    /// The server's private key, PEM (PKCS#8).
    public var privateKeyPEM: String

    static let caValidity: TimeInterval = 10 * 365 * 86_400
    static let serverValidity: TimeInterval = 397 * 86_400
    /// The most names a server certificate gathers (beyond, it names only the host asked now).
    static let maxNames = 64

    /// Reads the identity in `directory`, making what is missing or no longer fits.
    /// - Parameters:
    ///   - directory: where the CA and the server certificate live (made when missing).
    ///   - names: host names and IP addresses (without ports) the listener answers to.
    ///   - now: the time certificates are judged and made at.
    public static func loadOrCreate(directory: URL, names: [String], now: Date = WallClock.system.now()) throws -> LocalTLSIdentity {
        let files = FileManager.default
        try files.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard chmod(directory.path, 0o700) == 0 else { throw FleetError(.internal, "cannot make \(directory.path) private: \(String(cString: strerror(errno)))") }
        // Coordinators sharing the directory (on one PostgreSQL store) take turns: one makes the CA.
        let lock = open(directory.appendingPathComponent("lock").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw FleetError(.internal, "cannot open the lock in \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { throw FleetError(.internal, "cannot lock \(directory.path): \(String(cString: strerror(errno)))") }
        let caPath = directory.appendingPathComponent("ca.pem"), caKeyPath = directory.appendingPathComponent("ca-key.pem")
        let serverPath = directory.appendingPathComponent("server.pem"), serverKeyPath = directory.appendingPathComponent("server-key.pem")

        let ca: Certificate, caKey: P256.Signing.PrivateKey
        if let caPEM = try? String(contentsOf: caPath, encoding: .utf8), let keyPEM = try? String(contentsOf: caKeyPath, encoding: .utf8) {
            ca = try Certificate(pemEncoded: caPEM)
            caKey = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
            guard ca.publicKey == Certificate.PublicKey(caKey.publicKey) else {
                throw FleetError(.invalidRequest, "ca.pem and ca-key.pem in \(directory.path) do not belong together; remove both to make a new CA (clients must then trust the new ca.pem)")
            }
            guard ca.notValidAfter > now.addingTimeInterval(serverValidity) else {
                throw FleetError(.invalidRequest, "the local CA in \(directory.path) expires before a new certificate would; remove ca.pem and ca-key.pem to make a new one")
            }
        } else {
            caKey = P256.Signing.PrivateKey()
            ca = try makeCA(key: caKey, now: now)
            try write(caKey.pemRepresentation, to: caKeyPath, mode: 0o600)
            try write(try ca.serializeAsPEM().pemString, to: caPath, mode: 0o644)
        }

        var wanted = try subjectAlternativeNames(names)
        var server: Certificate?
        var serverKey: P256.Signing.PrivateKey?
        if let pem = try? String(contentsOf: serverPath, encoding: .utf8), let keyPEM = try? String(contentsOf: serverKeyPath, encoding: .utf8),
            let certificate = try? Certificate(pemEncoded: pem), let key = try? P256.Signing.PrivateKey(pemRepresentation: keyPEM),
            certificate.issuer == ca.subject, certificate.notValidAfter > now.addingTimeInterval(86_400),
            certificate.publicKey == Certificate.PublicKey(key.publicKey),
            ca.publicKey.isValidSignature(certificate.signature, for: certificate),
            let present = try? certificate.extensions.subjectAlternativeNames
        {
            if Set(wanted).isSubset(of: Set(present)) {
                server = certificate
                serverKey = key
            } else if Set(present).union(wanted).count <= maxNames {
                // Coordinators sharing the directory on different hosts: the new certificate keeps
                // the names of the one before, so each one's restart finds its host and none is
                // made again at every start of the other.
                wanted = Array(present) + wanted.filter { !present.contains($0) }
            }
        }
        if server == nil {
            let key = P256.Signing.PrivateKey()
            let certificate = try makeServer(key: key, names: wanted, ca: ca, caKey: caKey, now: now)
            try write(key.pemRepresentation, to: serverKeyPath, mode: 0o600)
            try write(try certificate.serializeAsPEM().pemString, to: serverPath, mode: 0o644)
            server = certificate
            serverKey = key
        }
        guard let server, let serverKey else { throw FleetError(.internal, "no server certificate was made") }
        return LocalTLSIdentity(
            caCertificatePath: caPath.path,
            certificateChainPEM: try server.serializeAsPEM().pemString + "\n" + ca.serializeAsPEM().pemString + "\n",
            privateKeyPEM: serverKey.pemRepresentation)
    }

    static func makeCA(key: P256.Signing.PrivateKey, now: Date) throws -> Certificate {
        let name = try DistinguishedName {
            OrganizationName("SignFleet")
            CommonName("SignFleet local CA")
        }
        let publicKey = Certificate.PublicKey(key.publicKey)
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(caValidity),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: publicKey)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
    }

    static func makeServer(
        key: P256.Signing.PrivateKey, names: [GeneralName], ca: Certificate, caKey: P256.Signing.PrivateKey, now: Date
    ) throws -> Certificate {
        let subject = try DistinguishedName {
            OrganizationName("SignFleet")
            CommonName("SignFleet coordinator")
        }
        let publicKey = Certificate.PublicKey(key.publicKey)
        let authority = try ca.extensions.subjectKeyIdentifier?.keyIdentifier
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(serverValidity),
            issuer: ca.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectKeyIdentifier(hash: publicKey)
                AuthorityKeyIdentifier(keyIdentifier: authority)
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey))
    }

    /// Each name as an IP address when it parses as one, else a DNS name; with `localhost`,
    /// `127.0.0.1` and `::1` always; without duplicates, in a stable order.
    static func subjectAlternativeNames(_ names: [String]) throws -> [GeneralName] {
        var out: [GeneralName] = []
        for raw in names + ["localhost", "127.0.0.1", "::1"] {
            let name = raw.hasPrefix("[") && raw.hasSuffix("]") ? String(raw.dropFirst().dropLast()) : raw
            // A wildcard bind is no name a client connects to; the loopback names above stand in.
            guard !name.isEmpty, name != "0.0.0.0", name != "::" else { continue }
            let general: GeneralName
            if let bytes = ipAddressBytes(name) {
                general = .ipAddress(ASN1OctetString(contentBytes: ArraySlice(bytes)))
            } else {
                guard name.utf8.count <= 253, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else {
                    throw FleetError(.invalidRequest, "\"\(name)\" is neither an IP address nor a host name, so no certificate can name it")
                }
                general = .dnsName(name.lowercased())
            }
            if !out.contains(general) { out.append(general) }
        }
        return out
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address, or nil.
    static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// Writes a file whole or not at all, with `mode` from its creation on (a private key is never
    /// readable by others, even for an instant): a new file beside it, synced, then renamed over.
    static func write(_ text: String, to url: URL, mode: mode_t) throws {
        let temporary = url.path + ".tmp-\(UUID().uuidString)"
        let fd = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FleetError(.internal, "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                let error = errno
                close(fd)
                unlink(temporary)
                throw FleetError(.internal, "cannot write \(temporary): \(String(cString: strerror(error)))")
            }
            written += n
        }
        let synced = fsync(fd) == 0
        close(fd)
        guard synced, rename(temporary, url.path) == 0 else {
            let error = errno
            unlink(temporary)
            throw FleetError(.internal, "cannot write \(url.path): \(String(cString: strerror(error)))")
        }
    }
}
