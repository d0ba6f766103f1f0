import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import Logging
import SignatureCapture
import ZeroMQ

/// What one simulated device does. The first slice of the fleet's behaviour model:
/// a fixed number of envelopes with one in-person signer each, at exponentially
/// distributed intervals, synced after each signing when the coordinator answers.
public struct SimulatedDeviceConfiguration: Sendable {
    public var deviceID: String
    /// The coordinator's (or the fault proxy's) endpoint.
    public var endpoint: String
    /// Where the device keeps its SQLite store (`<deviceID>.sqlite`).
    public var storeDirectory: String
    /// The user the device logs in as.
    public var email: String
    public var secret: String
    /// Every random choice of the device comes from this seed.
    public var seed: UInt64
    /// Envelopes to compose and sign; the device then syncs until its outbox is empty.
    public var envelopes: Int
    /// Mean time between two envelopes.
    public var meanInterval: Duration
    public var requestTimeout: Duration

    public init(
        deviceID: String, endpoint: String, storeDirectory: String, email: String, secret: String, seed: UInt64,
        envelopes: Int, meanInterval: Duration = .milliseconds(500), requestTimeout: Duration = .seconds(1)
    ) {
        self.deviceID = deviceID
        self.endpoint = endpoint
        self.storeDirectory = storeDirectory
        self.email = email
        self.secret = secret
        self.seed = seed
        self.envelopes = envelopes
        self.meanInterval = meanInterval
        self.requestTimeout = requestTimeout
    }
}

/// A simulated signing device: a ``DeviceNode`` with its own store and key, a
/// ``FleetClient`` connection, and a ``SyncEngine``. It signs offline whatever the
/// network does, and syncs whenever the coordinator answers.
///
/// After a restart it finds its store (signed envelopes, outbox, account) and carries
/// on: envelopes already composed count towards `envelopes`.
public actor SimulatedDevice {
    public let configuration: SimulatedDeviceConfiguration
    private let loop: ZMQIOLoop
    private let logger: Logger

    public init(configuration: SimulatedDeviceConfiguration, loop: ZMQIOLoop, logger: Logger) {
        self.configuration = configuration
        self.loop = loop
        var logger = logger
        logger[metadataKey: "device"] = "\(configuration.deviceID)"
        self.logger = logger
    }

    /// Signs its envelopes and syncs them; returns when the outbox is empty
    /// (or the task is cancelled).
    public func run() async throws {
        let client = FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: configuration.endpoint, deviceID: configuration.deviceID, requestTimeout: configuration.requestTimeout,
                maxAttempts: 2),
            loop: loop, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            group.addTask { try await self.work(client: client) }
            // The work ends first (or throws); the connection is then stopped.
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    private func work(client: FleetClient) async throws {
        var random = SeededRandom(seed: configuration.seed)
        var storeConfiguration = DeviceConfiguration(
            storePath: URL(fileURLWithPath: configuration.storeDirectory).appendingPathComponent("\(configuration.deviceID).sqlite").path)
        storeConfiguration.deviceId = configuration.deviceID
        let node = try await DeviceNode.open(
            configuration: storeConfiguration, accountService: RemoteAccountService(client: client), logger: logger)
        do {
            let token = try await login(node, client: client)
            let engine = SyncEngine(
                node: node, client: client, accessToken: token,
                configuration: SyncEngineConfiguration(maxAttempts: 1), logger: logger)
            let hostEmail = await node.currentAccount?.user.email ?? configuration.email
            var signed = try await node.lastSequence()
            while signed < UInt64(configuration.envelopes) {
                let wait = random.exponential(mean: Double(configuration.meanInterval.milliseconds))
                try await Task.sleep(for: .milliseconds(Int64(wait)))
                let transaction = "\(configuration.deviceID)-\(signed + 1)"
                let envelope = try SampleEnvelope.inPerson(
                    signers: 1, transactionId: transaction, hostEmail: hostEmail)
                let id = try await node.compose(envelope, mode: .offline)
                let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: random.next()))
                guard case .completed(_, let sequence?) = outcome else {
                    logger.warning("signing did not complete", metadata: ["outcome": "\(outcome)"])
                    continue
                }
                signed = sequence
                logger.info("signed", metadata: ["sequence": "\(sequence)", "transaction": "\(transaction)"])
                await sync(engine)
            }
            while try await !node.pendingOutboxItems(limit: 1).isEmpty {
                await sync(engine)
                if try await !node.pendingOutboxItems(limit: 1).isEmpty {
                    try await Task.sleep(for: configuration.requestTimeout)  // the coordinator is away: try again later
                }
            }
            logger.info("drained", metadata: ["signed": "\(signed)"])
            try await node.close()
        } catch {
            try? await node.close()
            throw error
        }
    }

    /// Logs in with a fresh token, or offline with the persisted account when the
    /// coordinator does not answer (an app on a plane).
    private func login(_ node: DeviceNode, client: FleetClient) async throws -> String {
        while true {
            do {
                let token = try await client.request(AccessTokenRequest(email: configuration.email, secret: configuration.secret))
                _ = try await node.login(accessToken: token.accessToken)
                return token.accessToken
            } catch let error as FleetError where error.retryable {
                if let account = try? await node.loginOffline() {
                    logger.notice("coordinator unreachable; logged in offline")
                    return account.accessToken
                }
                logger.notice("coordinator unreachable; waiting to log in", metadata: ["error": "\(error)"])
            }
        }
    }

    private func sync(_ engine: SyncEngine) async {
        do {
            let summary = try await engine.syncAll()
            if summary.attempted > 0 {
                logger.info("synced", metadata: ["items": "\(summary.succeeded)", "rejected": "\(summary.failed)"])
            }
        } catch is CancellationError {
            return
        } catch {
            logger.notice("sync deferred", metadata: ["error": "\(error)"])
        }
    }
}

extension Duration {
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
