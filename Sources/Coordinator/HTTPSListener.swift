import Hummingbird
import NIOSSL
import ServiceLifecycle

/// The coordinator's HTTP API over TLS, beside the plain listener (docs/rest-api.md, "TLS"): the
/// same routes and connection budget, with the certificate of ``LocalTLSIdentity``. DocuSign's
/// official SDKs make their OAuth calls over HTTPS only (`"https://" + oauth_host_name`), so the
/// JWT grant and user info need it; every other route answers here too.
public struct CoordinatorHTTPSListener: Service {
    public let host: String
    public let port: Int
    let identity: LocalTLSIdentity
    let server: CoordinatorHTTPServer
    let onListening: @Sendable (String) async -> Void

    /// - Parameters:
    ///   - host: the address to listen on.
    ///   - port: the port; 0 picks a free one.
    ///   - identity: the TLS certificate and key it serves (``LocalTLSIdentity``).
    ///   - server: the plain listener, whose routes, budget and idle timeout this shares.
    ///   - onListening: called once bound, with `host:port` (the real port when `port` is 0).
    public init(
        host: String, port: Int, identity: LocalTLSIdentity, server: CoordinatorHTTPServer,
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
        self.identity = identity
        self.server = server
        self.onListening = onListening
    }

    public func run() async throws {
        let chain = try NIOSSLCertificate.fromPEMBytes(Array(identity.certificateChainPEM.utf8)).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        let host = self.host
        let links = server.captive?.service.links ?? server.rest?.links
        let onListening = self.onListening
        try await CoordinatorHTTPServer.serve(
            server.makeRouter(secure: true), host: host, port: port, idleTimeout: server.configuration.idleTimeout, budget: server.budget,
            logger: server.logger, what: "HTTPS", hint: "choose another --https address (port 0 picks a free one) or leave it off", tls: tls
        ) { address, port in
            let linkHost = (host == "0.0.0.0" || host == "::") ? "127.0.0.1" : (host.contains(":") ? "[\(host)]" : host)
            links?.publish(secureBaseURL: "https://\(linkHost):\(port)")
            await onListening(address)
        }
    }
}
