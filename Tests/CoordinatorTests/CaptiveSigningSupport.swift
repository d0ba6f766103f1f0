import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import Testing
import ZeroMQ

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One embedded (or plain) signer of a test envelope.
struct EmbeddedSigner {
    var id: String
    var name: String
    var email: String
    var clientUserId: String?
    var order: Int
}

/// A real coordinator (ZeroMQ ROUTER + HTTP listener on free ports, SQLite store, a test clock
/// for captive signing) and a logged-in sender device that composes and syncs envelopes.
final class CaptiveRig: Sendable {
    static let adminToken = "admin-token-0123456789"
    let temporary: TemporaryStore
    /// Moved by hand, so signing URLs and sessions expire without sleeping.
    let clock = TestClock()
    let registry = PrometheusCollectorRegistry()
    let services: CoordinatorServices
    let token: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let serving: Task<Void, Never>
    let endpoint: String
    let group: ServiceGroup
    let running: Task<Void, any Error>
    /// `host:port` of the HTTP listener.
    let http: String
    /// `host:port` of the HTTPS listener, when the rig has one, and the CA file a client trusts.
    let https: String?
    let caCertificate: String?
    let node: DeviceNode
    let client: FleetClient
    let connection: Task<Void, Never>
    let views: RemoteRecipientViewService

    /// - Parameters:
    ///   - storeDirectory: where the coordinator's store goes (a small disk); the devices' stay in `temporary.directory`.
    ///   - logger: the coordinator's logger (store and HTTP listener); silent unless given.
    ///   - pages: the page renderer and cache of the signing page (poppler's pdftoppm by default).
    ///   - https: also an HTTPS listener, with a local CA in the store's directory.
    init(storeDirectory: URL? = nil, logger given: Logger? = nil, pages: CaptivePageImages = CaptivePageImages(), https withTLS: Bool = false) async throws {
        var logger = Logger(label: "captive-rig")
        logger.logLevel = .critical
        logger = given ?? logger
        let factory = PrometheusMetricsFactory(registry: registry)
        temporary = try TemporaryStore(storeDirectory: storeDirectory, logger: logger, metricsFactory: factory)
        let clock = self.clock
        let services = CoordinatorServices(store: temporary.store, metricsFactory: factory, now: { clock.now() })
        self.services = services
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann Sender", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken

        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "captive-rig")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        endpoint = try await server.bind()
        serving = Task { try? await server.run() }

        let (addresses, announced) = AsyncStream<String>.makeStream()
        let httpServer = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: registry, instance: "captive",
            status: { throw CancellationError() }, logger: logger,
            admin: CoordinatorAdminRoutes(directory: services.accounts, token: Self.adminToken),
            captive: CaptiveSigningRoutes(service: services.captive, logger: logger, pages: pages),
            rest: RESTRoutes(services: services),
            storeFaults: temporary.store.faults,
            onListening: { announced.yield($0) })
        var members: [any Service] = [httpServer]
        let (secureAddresses, secureAnnounced) = AsyncStream<String>.makeStream()
        if withTLS {
            let identity = try LocalTLSIdentity.loadOrCreate(directory: temporary.directory.appendingPathComponent("tls"), names: ["127.0.0.1"])
            caCertificate = identity.caCertificatePath
            members.append(
                CoordinatorHTTPSListener(host: "127.0.0.1", port: 0, identity: identity, server: httpServer, onListening: { secureAnnounced.yield($0) }))
        } else {
            caCertificate = nil
        }
        group = ServiceGroup(services: members, logger: logger)
        let group = self.group
        running = Task { try await group.run() }
        http = try await firstElement(of: addresses, "the HTTP listener's address")
        https = withTLS ? try await firstElement(of: secureAddresses, "the HTTPS listener's address") : nil

        var configuration = DeviceConfiguration(storePath: temporary.directory.appendingPathComponent("sender.sqlite").path)
        configuration.deviceId = "sender-\(UUID().uuidString.prefix(8))"
        client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: configuration.deviceId ?? "sender", requestTimeout: .seconds(10), maxAttempts: 3),
            loop: loop, logger: logger, clock: ManualClock())
        let client = self.client
        connection = Task { await client.run() }
        node = try await DeviceNode.open(configuration: configuration, accountService: RemoteAccountService(client: client))
        try await node.login(accessToken: token)
        views = RemoteRecipientViewService(client: client)
    }

    /// A device with no login (the integrator flow), with its own store and cookies.
    func anonymousDevice(_ name: String) async throws -> DeviceNode {
        var configuration = DeviceConfiguration(storePath: temporary.directory.appendingPathComponent("\(name).sqlite").path)
        configuration.deviceId = "\(name)-\(UUID().uuidString.prefix(8))"
        return try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService())
    }

    /// Composes `envelope` on the sender device, queues it and syncs it; returns the server id.
    func sync(_ envelope: Envelope, mode: SigningMode = .online) async throws -> String {
        let id = try await node.compose(envelope, mode: mode)
        _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
        let engine = SyncEngine(node: node, client: client, accessToken: token)
        let summary = try await engine.syncAll()
        #expect(summary.failed == 0, "the envelope syncs")
        return SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: envelope.transactionId)
    }

    /// An envelope with one 2-page document; each signer has a sign-here tab (page 2), a text
    /// tab and a checkbox (page 1).
    static func envelope(
        _ signers: [EmbeddedSigner], name: String = "Lease agreement", subject: String = "Please sign the lease",
        transaction: String = UUID().uuidString
    ) throws -> Envelope {
        let document = try DocumentBuilder().documentId("doc1").name("Lease").pdfBytes(SamplePDF.make(pages: 2, title: "Lease")).build()
        var builder = EnvelopeBuilder().envelopeName(name).emailSubject(subject).emailMessage("Signed in the app.")
            .addDocument(document).transactionId(transaction)
        for (index, signer) in signers.enumerated() {
            var recipient = RecipientBuilder(type: .signer).recipientId(signer.id).name(signer.name).email(signer.email)
                .routingOrder(signer.order)
            if let clientUserId = signer.clientUserId { recipient = recipient.clientUserId(clientUserId) }
            let offset = Double(index) * 70
            let tabs = [
                try TabBuilder(type: .signHere).tabId("sign-\(signer.id)").documentId("doc1").recipientId(signer.id).pageNumber(2)
                    .frame(x: 72, y: 520 + offset, width: 200, height: 60).build(),
                try TabBuilder(type: .text).tabId("city-\(signer.id)").name("City").documentId("doc1").recipientId(signer.id)
                    .pageNumber(1).frame(x: 72, y: 220 + offset, width: 200, height: 26).build(),
                try TabBuilder(type: .checkbox).tabId("agree-\(signer.id)").name("I agree").documentId("doc1").recipientId(signer.id)
                    .pageNumber(1).frame(x: 300, y: 220 + offset, width: 24, height: 24).optional().build(),
            ]
            builder = builder.addRecipient(try recipient.build(), tabs: tabs)
        }
        return try builder.build()
    }

    /// Asks for a signing URL directly from the service (as `recipient.view` would).
    func url(_ envelopeID: String, _ selection: CaptiveSigningService.RecipientSelection, returnURL: String? = nil) async throws
        -> RecipientViewReply
    {
        try await services.captive.issue(
            accountID: "acme", envelopeID: envelopeID, selection: selection, returnURL: returnURL ?? "http://\(http)/signing-return",
            locale: nil, issuedBy: "test")
    }

    /// One real HTTP request; redirects are not followed.
    func request(_ method: String, _ url: String, body: String? = nil, cookie: String? = nil) async throws -> (
        status: Int, body: String, headers: [String: String]
    ) {
        let answer = try await requestBytes(method, url, body: body, cookie: cookie)
        return (answer.status, String(decoding: answer.body, as: UTF8.self), answer.headers)
    }

    /// ``request(_:_:body:cookie:)`` with the body as bytes (page images).
    func requestBytes(_ method: String, _ url: String, body: String? = nil, cookie: String? = nil) async throws -> (
        status: Int, body: Data, headers: [String: String]
    ) {
        var request = URLRequest(url: try #require(URL(string: url.hasPrefix("http") ? url : "http://\(http)\(url)")))
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
        if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        let delegate = NoRedirectDelegate()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await delegate.run(request, in: session)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return (http.statusCode, data, headers)
    }

    /// `GET /metrics`, read back by sample.
    func metrics() async throws -> PrometheusText {
        PrometheusText(try await request("GET", "/metrics").body)
    }

    func envelope(_ id: String) async throws -> EnvelopeQueryReply {
        try await services.envelopes.envelope(id: id, accountID: "acme")
    }

    func tearDown() async {
        try? await node.close()
        connection.cancel()
        await connection.value
        serving.cancel()
        await serving.value
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await loop.shutdown()
        context.shutdown()
        temporary.remove()
    }
}


/// The events a node publishes until one matches.
func captiveEvent(_ events: AsyncStream<DeviceEvent>, _ what: String, where predicate: @escaping @Sendable (DeviceEvent) -> Bool)
    async throws -> DeviceEvent
{
    try await firstElement(of: events, within: .seconds(30), what, where: predicate)
}
