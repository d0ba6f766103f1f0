import ArgumentParser
import Coordinator
import CoordinatorPostgres
import FleetProtocol
import Foundation
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import ZeroMQ

/// `signfleet coordinator`: the server side. A ZeroMQ ROUTER for devices (hello, heartbeats,
/// access tokens, enrollment, sync ingest) and an HTTP listener for health, Prometheus
/// metrics and a JSON status, both run as services of one `ServiceGroup` that shuts down
/// gracefully on SIGTERM and SIGINT. See docs/coordinator.md.
struct CoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator",
        abstract: "Run the coordinator (the e-signature server devices sync with).",
        discussion: """
            Binds a ZeroMQ ROUTER and prints `listening <endpoint>` on standard output once bound, then \
            `http <host:port>` once the HTTP listener (GET /health, /metrics, /status; /admin/… with \
            --admin-token) is up, with `rest http://<host:port>/restapi` (the eSignature REST API's base path, \
            docs/rest-api.md), and `http-probe <host:port>` once the --probe-http listener is. \
            Use `tcp://127.0.0.1:*` and `--http 127.0.0.1:0` to let the system pick free ports. \
            Settings come from flags, then the optional --config JSON file (same keys as the flags, \
            without dashes), then defaults. Stops gracefully on SIGINT or SIGTERM (exit code 0).
            """
    )

    @Option(help: "JSON configuration file with the flags' names as keys; flags override it.")
    var config: String?

    @Option(help: "ZeroMQ endpoint to bind (default tcp://127.0.0.1:5555).")
    var bind: String?

    @Option(help: "HTTP listener host:port; port 0 picks a free port, `off` disables it (default 127.0.0.1:0).")
    var http: String?

    @Option(
        help: """
            A second HTTP listener host:port serving only GET /health and /metrics, with connections of its own: probes \
            answered however many connections the main listener holds (default off; port 0 picks a free port).
            """)
    var probeHttp: String?

    @Option(
        help: """
            An HTTPS listener host:port serving the same routes over TLS, with a local CA made on first start (the official \
            DocuSign SDKs' OAuth calls need HTTPS; docs/rest-api.md). Default off; port 0 picks a free port.
            """)
    var https: String?

    @Option(help: "Where the HTTPS listener's local CA and certificate are kept (default <store>.tls beside a SQLite store).")
    var tlsDir: String?

    @Option(help: "Devices send a heartbeat after this many idle milliseconds (default 1000).")
    var heartbeatMs: Int?

    @Option(help: "A device silent for this many heartbeat intervals is reported lost (default 3).")
    var liveness: Int?

    @Option(
        help: """
            Heartbeats a second planned for across the fleet (default 1000): the interval announced to devices grows \
            with the devices alive to stay within it.
            """)
    var heartbeatBudget: Int?

    @Option(help: "libzmq I/O threads, which run every connection's CURVE handshake and encryption (default 2, 1 to 64).")
    var ioThreads: Int?

    @Option(
        help: """
            The coordinator's store: a SQLite file path, created if missing (default signfleet-coordinator.sqlite), or a \
            PostgreSQL URL postgres://user[:password]@host[:port]/database[?schema=name] shared by several coordinators (docs/storage.md).
            """)
    var store: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Create the demo account and user (user1@demo.example, secret demo-secret) if missing (default off).")
    var seedDemo: Bool?

    @Option(help: "Requests per hour of the demo account --seed-demo creates (default: no practical limit).")
    var demoHourlyLimit: Int?

    @Option(help: "Requests per 30 s burst window of that account (default: the hourly limit); needs --demo-hourly-limit.")
    var demoBurstLimit: Int?

    @Option(help: "Access tokens expire after this many seconds (default 3600).")
    var tokenLifetime: Int?

    @Option(help: "Largest accepted frame, in bytes (default 16777216).")
    var maxMessageSize: Int?

    @Option(help: "Bearer token of the HTTP admin endpoints (/admin/…, at least 16 characters); without it they are off.")
    var adminToken: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    @Flag(help: "Serve plain TCP instead of CURVE: no transport authentication, any peer can claim any device id (comparison runs and old clients only).")
    var plaintext = false

    @Option(help: "Write the coordinator's CURVE public key (Z85, one line) to this file once bound, for devices to pin.")
    var publicKeyFile: String?

    @Option(help: "HTTP connections served at once; beyond, requests get 503 (default: a quarter of the open-file limit, 16 to 1024).")
    var httpMaxConnections: Int?

    @Option(help: "Seconds a captive signing URL may wait to be opened (default 300, as DocuSign).")
    var signingUrlLifetime: Int?

    @Option(help: "Seconds a signing page may sit idle before its session ends (default 1200, as DocuSign).")
    var signingSessionTimeout: Int?

    @Option(help: "Attempts per Connect event before it becomes a failure record (default 8; docs/webhooks.md).")
    var connectAttempts: Int?

    @Option(help: "Seconds a Connect listener has to answer a delivery (default 10).")
    var connectTimeout: Int?

    @Option(help: "Seed of the Connect back-off's jitter (default: drawn at start and printed).")
    var connectSeed: Int?

    @Option(help: "Days delivered Connect events and failure records are kept (default 7; 0 keeps them for ever).")
    var connectRetentionDays: Int?

    /// Defaults, then the file, then the flags.
    func settings() throws -> CoordinatorConfiguration {
        var settings = CoordinatorConfiguration()
        if let config { try settings.apply(fileAt: config) }
        if let bind { settings.bind = bind }
        if let http { settings.http = http }
        if let probeHttp { settings.probeHTTP = probeHttp }
        if let https { settings.https = https }
        if let tlsDir { settings.tlsDir = tlsDir }
        if let heartbeatMs { settings.heartbeatMs = heartbeatMs }
        if let liveness { settings.liveness = liveness }
        if let heartbeatBudget { settings.heartbeatBudget = heartbeatBudget }
        if let ioThreads { settings.ioThreads = ioThreads }
        if let store { settings.store = store }
        if let seedDemo { settings.seedDemo = seedDemo }
        if let demoHourlyLimit { settings.demoHourlyLimit = demoHourlyLimit }
        if let demoBurstLimit { settings.demoBurstLimit = demoBurstLimit }
        if let tokenLifetime { settings.tokenLifetime = tokenLifetime }
        if let maxMessageSize { settings.maxMessageSize = maxMessageSize }
        if let logLevel { settings.logLevel = logLevel }
        if let adminToken { settings.adminToken = adminToken }
        if plaintext { settings.plaintext = true }
        if let publicKeyFile { settings.publicKeyFile = publicKeyFile }
        if let httpMaxConnections { settings.httpMaxConnections = httpMaxConnections }
        if let signingUrlLifetime { settings.signingURLLifetime = signingUrlLifetime }
        if let signingSessionTimeout { settings.signingSessionTimeout = signingSessionTimeout }
        if let connectAttempts { settings.connectAttempts = connectAttempts }
        if let connectTimeout { settings.connectTimeout = connectTimeout }
        if let connectSeed { settings.connectSeed = connectSeed }
        if let connectRetentionDays { settings.connectRetentionDays = connectRetentionDays }
        try settings.validate()
        return settings
    }

    func validate() throws {
        do {
            _ = try settings()
        } catch let error as CoordinatorConfigurationError {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        let settings = try settings()
        var loggingOptions = try LoggingOptions.parse([])
        loggingOptions.logLevel = settings.logLevel
        let logger = try loggingOptions.makeLogger(label: "coordinator")
        // The one place metrics are bootstrapped: libraries report to MetricsSystem.factory.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        // A descriptor per connected peer: the soft limit (often 1,024) would cap the fleet and
        // starve the store and the HTTP listener of descriptors first.
        logger.info("open file limit", metadata: ["limit": "\(OpenFileLimit.raiseToHardLimit())"])

        let coordinatorStore: any CoordinatorStorage
        let security: WireSecurity
        let shown = PostgresCoordinatorStore.isURL(settings.store) ? "the PostgreSQL store" : "the store at \(settings.store)"
        do {
            if PostgresCoordinatorStore.isURL(settings.store) {
                coordinatorStore = try await PostgresCoordinatorStore(url: settings.store, logger: logger)
            } else {
                coordinatorStore = try CoordinatorStore(path: settings.store, logger: logger)
            }
            security = settings.plaintext ? .plaintext : .curve(try await coordinatorStore.curveKeyPair())
        } catch {
            throw ValidationError("cannot open \(shown): \(String(reflecting: error))")
        }
        logger.info("store ready", metadata: ["store": "\(coordinatorStore.location)"])
        let configuration = FleetServerConfiguration(
            endpoint: settings.bind,
            security: security,
            heartbeatInterval: .milliseconds(settings.heartbeatMs),
            heartbeatLiveness: settings.liveness,
            heartbeatBudget: Double(settings.heartbeatBudget),
            limits: WireLimits(maxMessageSize: settings.maxMessageSize),
            maxQueueDelay: .seconds(1)
        )
        let services = CoordinatorServices(
            storage: coordinatorStore, tokenLifetime: .seconds(settings.tokenLifetime),
            captive: CaptiveSigningConfiguration(
                urlLifetime: TimeInterval(settings.signingURLLifetime), inactivityTimeout: TimeInterval(settings.signingSessionTimeout)))
        if settings.seedDemo {
            let (account, users) = try await services.accounts.seedDemo(rateLimits: settings.demoRateLimits)
            logger.info(
                "demo data ready",
                metadata: [
                    "account": "\(account.id)", "users": "\(users.map(\.email))", "hourlyLimit": "\(account.rateLimits.hourly)",
                    "burstLimit": "\(account.rateLimits.burst)",
                ])
        }
        var router = RequestRouter(codec: WireCodec(limits: configuration.limits))
        services.register(in: &router)
        let context = try ZMQContext(ioThreads: settings.ioThreads)
        let loop = try ZMQIOLoop(context: context, label: "coordinator-io")
        let server = FleetServer(configuration: configuration, router: router, loop: loop, logger: logger)
        do {
            let endpoint = try await server.bind()
            switch security {
            case .curve(let keys):
                let publicKey = Z85.encode(keys.publicKey) ?? ""
                if let path = settings.publicKeyFile {
                    do {
                        try Data((publicKey + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
                    } catch {
                        throw ValidationError("cannot write the public key to \(path): \(error.localizedDescription)")
                    }
                }
                // Before `listening`: whoever waits for that line can read the key already.
                announce("curve-public-key \(publicKey)")
            case .plaintext:
                announce("WARNING plain TCP: no transport authentication; any peer can act as any device")
            }
            announce("listening \(endpoint)")
            var members: [any Service] = [CoordinatorService(server: server)]
            // Connect's deliveries (docs/webhooks.md): the publisher logs its jitter seed, so a run's delays can be replayed.
            var connect = ConnectPublisherConfiguration()
            connect.maxAttempts = settings.connectAttempts
            connect.requestTimeout = .seconds(settings.connectTimeout)
            connect.retention = settings.connectRetentionDays > 0 ? .seconds(settings.connectRetentionDays * 86_400) : nil
            // Checked to be 0 or more; the bit pattern never traps whatever a file held.
            connect.jitterSeed = UInt64(bitPattern: Int64(settings.connectSeed ?? Int.random(in: 0...Int.max)))
            // The transport's own deadline (a hang guard) ends within a claim's lifetime.
            let connectTransport = HTTPConnectTransport(deadline: .seconds(Int64(settings.connectTimeout) * 2))
            members.append(
                ConnectPublisher(store: coordinatorStore, connect: services.connect, configuration: connect, transport: connectTransport, logger: logger))
            if let address = try settings.httpAddress() {
                let http = CoordinatorHTTPServer(
                    configuration: .init(host: address.host, port: address.port, maxConnections: settings.httpMaxConnections),
                    registry: registry,
                    instance: server.instance,
                    status: { try await CoordinatorStatus.current(storage: coordinatorStore, server: server) },
                    logger: logger,
                    admin: settings.adminToken.map { CoordinatorAdminRoutes(directory: services.accounts, token: $0) },
                    captive: CaptiveSigningRoutes(service: services.captive, logger: logger),
                    rest: RESTRoutes(services: services),
                    storeFaults: coordinatorStore.faults, storeRegressions: coordinatorStore.regressions,
                    onListening: { address in
                        announce("http \(address)")
                        // Where a DocuSign SDK's ApiClient(host:) points (docs/rest-api.md).
                        announce("rest http://\(address)/restapi")
                    })
                members.append(http)
                if let secure = try settings.httpsAddress(), let directory = settings.tlsDirectory() {
                    let identity: LocalTLSIdentity
                    do {
                        identity = try LocalTLSIdentity.loadOrCreate(directory: URL(fileURLWithPath: directory), names: [secure.host])
                    } catch {
                        throw ValidationError("cannot make or read the TLS certificate in \(directory): \(error)")
                    }
                    members.append(
                        CoordinatorHTTPSListener(
                            host: secure.host, port: secure.port, identity: identity, server: http,
                            onListening: { address in
                                announce("https \(address), ca-certificate \(identity.caCertificatePath)")
                                announce("rest https://\(address)/restapi")
                            }))
                }
                if let probe = try settings.probeHTTPAddress() {
                    members.append(
                        CoordinatorProbeListener(
                            host: probe.host, port: probe.port, server: http, onListening: { address in announce("http-probe \(address)") }))
                }
            }
            try await ShutdownSignals.run(members, logger: logger)
        } catch {
            await loop.shutdown()
            context.shutdown()
            throw error
        }
        await loop.shutdown()
        context.shutdown()
        logger.info("coordinator stopped")
    }
}
