import Coordinator
import DeviceNode
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import SyncContract
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Testing
import ZeroMQ

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A coordinator as `signfleet coordinator` runs it — ROUTER + HTTP in one `ServiceGroup` —
/// on free ports, with its own Prometheus registry, and one device that can sync to it.
final class ServiceRig: Sendable {
    let registry = PrometheusCollectorRegistry()
    let temporary: TemporaryStore
    let services: CoordinatorServices
    let token: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let server: FleetServer
    let endpoint: String
    let group: ServiceGroup
    let running: Task<Void, any Error>
    /// `host:port` of the HTTP listener.
    let http: String
    let logger: Logger

    init() async throws {
        var logger = Logger(label: "service-rig")
        logger.logLevel = .critical
        self.logger = logger
        let factory = PrometheusMetricsFactory(registry: registry)
        temporary = try TemporaryStore()
        services = CoordinatorServices(store: temporary.store, metricsFactory: factory)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "service-rig")
        // The server's and the devices' clocks stand still: no device is lost for its silence and
        // no request times out and is sent again, however slowly this machine runs the test.
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger,
            metricsFactory: factory, clock: ManualClock())
        self.server = server
        endpoint = try await server.bind()
        let store = temporary.store
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let httpServer = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: registry, instance: server.instance,
            status: { try await CoordinatorStatus.current(store: store, server: server) }, logger: logger,
            onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [CoordinatorService(server: server), httpServer], logger: logger)
        self.group = group
        running = Task { try await group.run() }
        http = try await firstElement(of: addresses, "the HTTP listener's address")
    }

    /// Stops the group gracefully; throws what the group threw.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        await loop.shutdown()
        context.shutdown()
        temporary.remove()
    }

    /// A connected device client (its node signs `envelopes` envelopes, ready to sync).
    func device(envelopes: Int) async throws -> (DeviceNode, [SyncItem], FleetClient, Task<Void, Never>, SyncEngine) {
        let (node, items) = try await signedItems(
            count: envelopes, directory: temporary.directory, deviceID: "tablet-\(UUID().uuidString.prefix(8))")
        let client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: node.deviceId, requestTimeout: .seconds(5), maxAttempts: 1),
            loop: loop, logger: logger, clock: ManualClock())
        let connection = Task { await client.run() }
        let engine = SyncEngine(
            node: node, client: client, accessToken: token,
            configuration: SyncEngineConfiguration(batchSize: 10, maxAttempts: 3, retryBackoff: Backoff(initial: .milliseconds(10), maximum: .milliseconds(100))),
            logger: logger)
        return (node, items, client, connection, engine)
    }

    /// GETs `path` over real loopback HTTP.
    func get(_ path: String) async throws -> (status: Int, body: Data, contentType: String?) {
        let url = try #require(URL(string: "http://\(http)\(path)"))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: url)
        let reply = try #require(response as? HTTPURLResponse)
        return (reply.statusCode, data, reply.value(forHTTPHeaderField: "Content-Type"))
    }

    func metrics() async throws -> PrometheusText {
        let (status, body, contentType) = try await get("/metrics")
        #expect(status == 200)
        #expect(contentType?.hasPrefix("text/plain") == true, "\(contentType ?? "no content type")")
        return PrometheusText(String(decoding: body, as: UTF8.self))
    }

    func status() async throws -> CoordinatorStatus {
        let (code, body, _) = try await get("/status")
        #expect(code == 200)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601  // the HTTP API's times
        return try decoder.decode(CoordinatorStatus.self, from: body)
    }
}

/// The Prometheus text exposition, read back by sample.
struct PrometheusText: CustomStringConvertible {
    let text: String
    init(_ text: String) { self.text = text }
    var description: String { text }

    /// The value of the sample `name` whose labels include `labels` (0 when absent).
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let series = line[..<space]
            let seriesName = series.prefix { $0 != "{" }
            guard seriesName == name, labels.allSatisfy({ series.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
            return Double(line[line.index(after: space)...]) ?? .nan
        }
        return 0
    }

    func has(_ name: String) -> Bool {
        text.split(separator: "\n").contains { $0.hasPrefix("# TYPE \(name) ") }
    }
}

@Suite struct HTTPTests {
    @Test func healthAnswersWithTheInstanceAndUptime() async throws {
        let rig = try await ServiceRig()
        let (status, body, contentType) = try await rig.get("/health")
        #expect(status == 200)
        #expect(contentType?.contains("application/json") == true)
        let health = try JSONDecoder().decode(CoordinatorHTTPServer.Health.self, from: body)
        #expect(health.status == "ok")
        #expect(health.instance == rig.server.instance)
        #expect(health.uptime >= 0)
        let missing = try await rig.get("/nothing-here")
        #expect(missing.status == 404)
        try await rig.stop()
    }

    @Test func statusAndMetricsFollowAHeartbeatAndASyncOverZeroMQ() async throws {
        let rig = try await ServiceRig()
        var status = try await rig.status()
        #expect(status.devicesEnrolled == 0 && status.devicesAlive == 0 && status.envelopes == 0 && status.syncOutcomes.isEmpty)
        #expect(status.storePath == rig.temporary.store.path)
        let raw = String(decoding: try await rig.get("/status").body, as: UTF8.self)
        #expect(raw.contains("\"storePath\":\"\(rig.temporary.store.path)\""), "paths are not escaped: \(raw)")
        #expect(status.version == FleetProtocolInfo.softwareVersion)
        #expect(status.instance == rig.server.instance)
        var metrics = try await rig.metrics()
        // Request counters appear with their first request (below).
        for name in [FleetServerMetrics.connectedDevicesLabel, SyncIngestMetrics.itemsLabel, SyncIngestMetrics.durationLabel] {
            #expect(metrics.has(name), "no \(name) in\n\(metrics)")
        }
        #expect(metrics.value(FleetServerMetrics.connectedDevicesLabel) == 0)

        let (node, items, client, connection, engine) = try await rig.device(envelopes: 3)
        let heartbeat = ["type": Heartbeat.messageType.rawValue, "outcome": HeartbeatReply.messageType.rawValue]
        let before = try await rig.metrics().value(FleetServerMetrics.requestsLabel, heartbeat)
        _ = try await client.request(Heartbeat())
        metrics = try await rig.metrics()
        #expect(metrics.has(FleetServerMetrics.requestsLabel), "\(metrics)")
        #expect(metrics.value(FleetServerMetrics.requestsLabel, heartbeat) >= before + 1, "\(metrics)")
        #expect(metrics.value(FleetServerMetrics.requestsLabel, ["type": "hello", "outcome": "hello.reply"]) >= 1, "\(metrics)")
        #expect(metrics.value(FleetServerMetrics.connectedDevicesLabel) == 1, "\(metrics)")

        let summary = try await engine.syncAll()
        #expect(summary.succeeded == 3)
        // The same items again: answered as duplicates from the stored results.
        let again = try await client.request(SyncPush(deviceID: node.deviceId, items: items))
        #expect(again.results.map(\.outcome) == [.duplicate, .duplicate, .duplicate])

        metrics = try await rig.metrics()
        #expect(metrics.value(SyncIngestMetrics.itemsLabel, ["outcome": "applied"]) == 3, "\(metrics)")
        #expect(metrics.value(SyncIngestMetrics.itemsLabel, ["outcome": "duplicate"]) == 3, "\(metrics)")
        #expect(metrics.value(SyncIngestMetrics.itemsLabel, ["outcome": "rejected"]) == 0, "\(metrics)")
        #expect(metrics.value(SyncIngestMetrics.durationLabel + "_count") >= 2, "\(metrics)")
        #expect(
            metrics.value(FleetServerMetrics.requestsLabel, ["type": SyncPush.messageType.rawValue, "outcome": SyncAck.messageType.rawValue]) >= 2,
            "\(metrics)")
        #expect(metrics.value(FleetServerMetrics.requestsLabel, ["type": EnrollDevice.messageType.rawValue]) >= 1, "\(metrics)")

        status = try await rig.status()
        #expect(status.devicesEnrolled == 1)
        #expect(status.devicesAlive == 1)
        #expect(status.envelopes == 3)
        #expect(status.syncOutcomes == ["applied": 3])

        try await node.close()
        connection.cancel()
        await connection.value
        try await rig.stop()
    }

    @Test func aRefusedRequestIsCountedByItsErrorCode() async throws {
        let rig = try await ServiceRig()
        let (node, items, client, connection, _) = try await rig.device(envelopes: 1)
        // Not enrolled: the push is refused, and counted under the error's code.
        await #expect(throws: FleetError.self) { _ = try await client.request(SyncPush(deviceID: node.deviceId, items: items)) }
        let metrics = try await rig.metrics()
        let refused = metrics.text.split(separator: "\n").filter {
            $0.hasPrefix(FleetServerMetrics.requestsLabel + "{") && $0.contains("type=\"sync.push\"") && !$0.contains("outcome=\"sync.ack\"")
        }
        #expect(refused.count == 1, "\(metrics)")
        try await node.close()
        connection.cancel()
        await connection.value
        try await rig.stop()
    }

    @Test func itemsBehindAGapAreCounted() async throws {
        let registry = PrometheusCollectorRegistry()
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let services = CoordinatorServices(store: temporary.store, metricsFactory: PrometheusMetricsFactory(registry: registry))
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        let token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        let (node, base) = try await signedItems(count: 1, directory: temporary.directory)
        let forger = Forger(id: "forged-gap")
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let items = try (1...3).map { try forger.item(from: base[0], sequence: UInt64($0), transaction: "g\($0)") }
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: [items[1], items[2]]), routingID: forger.id)
        #expect(ack.status == .gap)
        let metrics = PrometheusText(registry.emitToString())
        #expect(metrics.value(SyncIngestMetrics.itemsLabel, ["outcome": "gap"]) == 2, "\(metrics)")
        #expect(metrics.value(SyncIngestMetrics.itemsLabel, ["outcome": "applied"]) == 0, "\(metrics)")
        #expect(metrics.value(SyncIngestMetrics.durationLabel + "_count") == 1, "\(metrics)")
        try await node.close()
    }

    @Test func statusIsUnavailableWhenTheStoreCannotBeRead() async throws {
        struct StoreDown: Error, CustomStringConvertible { var description: String { "disk I/O error" } }
        var logger = Logger(label: "status-503")
        logger.logLevel = .critical
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let server = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: PrometheusCollectorRegistry(), instance: "down",
            status: { throw StoreDown() }, logger: logger, onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [server], logger: logger)
        let running = Task { try await group.run() }
        let address = try await firstElement(of: addresses, "the HTTP listener's address")
        let url = try #require(URL(string: "http://\(address)/status"))
        let session = URLSession(configuration: .ephemeral)
        let (body, response) = try await session.data(from: url)
        session.finishTasksAndInvalidate()
        #expect((response as? HTTPURLResponse)?.statusCode == 503)
        struct Failure: Decodable { struct Detail: Decodable { var message: String }; var error: Detail }
        let failure = try JSONDecoder().decode(Failure.self, from: body)
        #expect(failure.error.message.contains("store cannot be read: disk I/O error"), "\(failure.error.message)")
        await group.triggerGracefulShutdown()
        try await running.value
    }

    @Test func aBusyPortIsReportedWithWhatToDo() async throws {
        let rig = try await ServiceRig()
        let port = try #require(rig.http.split(separator: ":").last.flatMap { Int($0) })
        let clash = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: port), registry: rig.registry, instance: "clash",
            status: { throw CancellationError() }, logger: rig.logger)
        await #expect {
            try await clash.run()
        } throws: { error in
            "\(error)".contains("cannot listen for HTTP on 127.0.0.1:\(port)") && "\(error)".contains("--http")
        }
        try await rig.stop()
    }
}

@Suite struct CoordinatorConfigurationTests {
    @Test func aFileSetsEveryKeyAndFlagsAreAppliedOnTop() throws {
        var configuration = CoordinatorConfiguration()
        try configuration.apply(
            json: Data(
                #"{"bind": "tcp://127.0.0.1:7000", "http": "127.0.0.1:9000", "heartbeat-ms": 250, "liveness": 5, "store": "/tmp/x.sqlite", "seed-demo": true, "token-lifetime": 60, "max-message-size": 4096, "log-level": "debug"}"#
                    .utf8))
        #expect(configuration.bind == "tcp://127.0.0.1:7000")
        #expect(configuration.http == "127.0.0.1:9000")
        #expect(configuration.heartbeatMs == 250 && configuration.liveness == 5 && configuration.tokenLifetime == 60)
        #expect(configuration.store == "/tmp/x.sqlite" && configuration.seedDemo && configuration.maxMessageSize == 4096)
        #expect(configuration.logLevel == "debug")
        #expect(try configuration.httpAddress()?.port == 9000)
        try configuration.validate()
    }

    @Test func signingLifetimesAndTheHTTPConnectionLimitAreConfigurable() throws {
        var configuration = CoordinatorConfiguration()
        #expect(configuration.signingURLLifetime == 300 && configuration.signingSessionTimeout == 1200 && configuration.httpMaxConnections == nil)
        try configuration.apply(
            json: Data(#"{"signing-url-lifetime": 30, "signing-session-timeout": 90, "http-max-connections": 64}"#.utf8))
        #expect(configuration.signingURLLifetime == 30 && configuration.signingSessionTimeout == 90 && configuration.httpMaxConnections == 64)
        try configuration.validate()
        configuration.signingURLLifetime = 0
        #expect { try configuration.validate() } throws: { ($0 as? CoordinatorConfigurationError)?.key == "signing-url-lifetime" }
        configuration.signingURLLifetime = 30
        configuration.httpMaxConnections = 0
        #expect { try configuration.validate() } throws: { ($0 as? CoordinatorConfigurationError)?.key == "http-max-connections" }
    }

    @Test func theHeartbeatBudgetComesFromTheFileAndIsBounded() throws {
        var configuration = CoordinatorConfiguration()
        #expect(configuration.heartbeatBudget == 1000)
        try configuration.apply(json: Data(#"{"heartbeat-budget": 250}"#.utf8))
        #expect(configuration.heartbeatBudget == 250)
        try configuration.validate()
        for bad in [0, -1, 1_000_001] {
            configuration.heartbeatBudget = bad
            #expect(
                throws: CoordinatorConfigurationError(
                    key: "heartbeat-budget", "--heartbeat-budget (file key \"heartbeat-budget\") must be 1 to 1000000 heartbeats a second")
            ) { try configuration.validate() }
        }
    }

    @Test(arguments: [
        (#"{"heartbeat": 5}"#, "heartbeat"),
        (#"{"heartbeat-budget": 2.5}"#, "heartbeat-budget"),
        (#"{"liveness": "three"}"#, "liveness"),
        (#"{"seed-demo": 1}"#, "seed-demo"),
        (#"{"token-lifetime": 1.5}"#, "token-lifetime"),
    ])
    func aBadKeyOrValueIsNamed(json: String, key: String) throws {
        var configuration = CoordinatorConfiguration()
        #expect {
            try configuration.apply(json: Data(json.utf8))
        } throws: { error in
            (error as? CoordinatorConfigurationError)?.key == key && "\(error)".contains("\"\(key)\"")
        }
    }

    @Test func outOfRangeValuesAndBadAddressesAreNamed() throws {
        var configuration = CoordinatorConfiguration()
        configuration.heartbeatMs = 1
        #expect(throws: CoordinatorConfigurationError(key: "heartbeat-ms", "--heartbeat-ms (file key \"heartbeat-ms\") must be at least 10")) {
            try configuration.validate()
        }
        configuration = CoordinatorConfiguration()
        configuration.http = "localhost"
        #expect { try configuration.validate() } throws: { ($0 as? CoordinatorConfigurationError)?.key == "http" }
        configuration.http = "off"
        #expect(try configuration.httpAddress() == nil)
        configuration.http = "[::1]:0"
        #expect(try configuration.httpAddress()?.host == "::1")
        // The probe listener: an address like --http's, and only beside the main listener.
        configuration.probeHTTP = "8081"
        #expect { try configuration.validate() } throws: { ($0 as? CoordinatorConfigurationError)?.key == "probe-http" }
        try configuration.apply(json: Data(#"{"probe-http": "0.0.0.0:8081"}"#.utf8))
        #expect(try configuration.probeHTTPAddress()?.port == 8081)
        configuration.http = "off"
        #expect(throws: CoordinatorConfigurationError(key: "probe-http", "--probe-http (file key \"probe-http\") needs the HTTP listener (--http is off)")) {
            try configuration.validate()
        }
    }

    /// `signfleet fleet run` passes a scenario's rate limits this way (its coordinator.json).
    @Test func demoRateLimitsComeFromTheFileAndReachTheSeededAccount() async throws {
        var configuration = CoordinatorConfiguration()
        #expect(configuration.demoRateLimits == DemoData.rateLimits)
        try configuration.apply(json: Data(#"{"seed-demo": true, "demo-hourly-limit": 120, "demo-burst-limit": 7}"#.utf8))
        try configuration.validate()
        #expect(configuration.demoRateLimits == RateLimits(hourly: 120, burst: 7, burstWindowSeconds: 30))

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("demo-limits-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let accounts = AccountDirectory(store: try CoordinatorStore(path: path))
        let (account, _) = try await accounts.seedDemo(rateLimits: configuration.demoRateLimits)
        #expect(try await accounts.account(id: account.id)?.rateLimits == RateLimits(hourly: 120, burst: 7, burstWindowSeconds: 30))

        // Without a burst the hourly budget is the only limit; a burst alone is refused.
        var hourlyOnly = CoordinatorConfiguration()
        hourlyOnly.demoHourlyLimit = 50
        #expect(hourlyOnly.demoRateLimits.burst == 50)
        var burstOnly = CoordinatorConfiguration()
        burstOnly.demoBurstLimit = 5
        #expect { try burstOnly.validate() } throws: {
            ($0 as? CoordinatorConfigurationError)?.key == "demo-burst-limit" && "\($0)".contains("needs demo-hourly-limit")
        }
        #expect { try configuration.apply(json: Data(#"{"demo-hourly-limit": "many"}"#.utf8)) } throws: {
            ($0 as? CoordinatorConfigurationError)?.key == "demo-hourly-limit"
        }
    }
}

/// Idle HTTP connections, unfinished headers included, are closed (issue #14: 1,100 of them used to
/// exhaust the file descriptors and stop sync).
@Suite struct HTTPIdleConnectionTests {
    @Test func aConnectionThatStopsMidHeadersIsClosedAfterTheIdleTimeout() async throws {
        var logger = Logger(label: "idle")
        logger.logLevel = .critical
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let server = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0, idleTimeout: .milliseconds(500)), registry: PrometheusCollectorRegistry(),
            instance: "idle", status: { throw CancellationError() }, logger: logger, onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [server], logger: logger)
        let running = Task { try await group.run() }
        let address = try await firstElement(of: addresses, "the HTTP listener's address")
        let port = try #require(address.split(separator: ":").last.flatMap { UInt16($0) })
        // A raw socket that sends half a request and then nothing; a blocking read returns 0 once
        // the server closes it (SO_RCVTIMEO bounds the wait if it never does).
        let closedWithin: Double? = await Task.detached {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var peer = sockaddr_in()
            peer.sin_family = sa_family_t(AF_INET)
            peer.sin_port = port.bigEndian
            peer.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { return nil }
            let partial = Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
            _ = partial.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            let start = ContinuousClock.now
            var buffer = [UInt8](repeating: 0, count: 256)
            let read = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard read == 0 else { return nil }  // closed by the server, not timed out
            let elapsed = start.duration(to: .now).components
            return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        }.value
        #expect(closedWithin != nil, "the server never closed the half-open request")
        #expect((closedWithin ?? 99) < 10)
        await group.triggerGracefulShutdown()
        try await running.value
    }
}
