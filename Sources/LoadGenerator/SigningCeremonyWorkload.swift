import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Synchronization
import ZeroMQ

/// Settings of the real workload: who to log in as, where devices keep their stores.
public struct SigningCeremonyConfiguration: Sendable {
    /// The coordinator's ROUTER endpoint.
    public var endpoint: String
    public var email: String
    public var secret: String
    /// Each device's SQLite store is `<directory>/load-<index>.sqlite`.
    public var storeDirectory: String
    /// Per-attempt reply timeout of the devices' requests.
    public var requestTimeout: Duration
    /// Device ids are `<prefix>-<index>`; a fresh prefix per run keeps the server's sequences apart.
    public var deviceIDPrefix: String
    /// Store durability of the devices (an fsync per commit, or WAL without one).
    public var durability: DeviceConfiguration.Durability
    /// The coordinator's CURVE public key; nil: plain TCP. Load devices live for one run, so each
    /// proves a fresh transport key.
    public var serverKey: [UInt8]?

    public init(
        endpoint: String, email: String, secret: String, storeDirectory: String, requestTimeout: Duration = .seconds(5),
        deviceIDPrefix: String = "load-\(UUID().uuidString.prefix(8).lowercased())",
        durability: DeviceConfiguration.Durability = .powerLoss, serverKey: [UInt8]? = nil
    ) {
        self.serverKey = serverKey
        self.endpoint = endpoint
        self.email = email
        self.secret = secret
        self.storeDirectory = storeDirectory
        self.requestTimeout = requestTimeout
        self.deviceIDPrefix = deviceIDPrefix
        self.durability = durability
    }
}

/// The signing ceremony of a simulated device, as `SimulatedDevice` runs it: compose an envelope
/// with one in-person signer (`SampleEnvelope.inPerson`), capture the signature and sign
/// (`resumeSigning` with a `SyntheticSigner`), which commits the envelope to the outbox, then
/// push that item and wait for the coordinator's acknowledgement (`SyncEngine.syncOne`).
///
/// Steps timed: `compose`, `capture` (the synthetic person drawing the signature),
/// `signCommit` (binding, Ed25519 signature and the outbox commit: `DeviceNode` does them in one
/// call and one transaction, so they are timed together) and `syncAck` (push to ack).
public struct SigningCeremonyWorkload: LoadWorkload {
    public static let stepNames = ["compose", "capture", "signCommit", "syncAck"]
    public let configuration: SigningCeremonyConfiguration
    let loop: ZMQIOLoop
    let logger: Logger

    public init(configuration: SigningCeremonyConfiguration, loop: ZMQIOLoop, logger: Logger) {
        self.configuration = configuration
        self.loop = loop
        self.logger = logger
    }

    public var steps: [String] { Self.stepNames }

    public func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice {
        let deviceID = "\(configuration.deviceIDPrefix)-\(index)"
        var logger = logger
        logger[metadataKey: "device"] = "\(deviceID)"
        let security: ClientSecurity = try configuration.serverKey.map { .curve(serverKey: $0, keys: try CurveKeyPair.generate()) } ?? .plaintext
        let connection = FleetClientConnection.open(
            configuration: FleetClientConfiguration(
                endpoint: configuration.endpoint, deviceID: deviceID, security: security, requestTimeout: configuration.requestTimeout,
                maxAttempts: 2),
            loop: loop, logger: logger)
        let client = connection.client
        do {
            var storeConfiguration = DeviceConfiguration(
                storePath: URL(fileURLWithPath: configuration.storeDirectory).appendingPathComponent("load-\(index).sqlite").path,
                deviceId: deviceID)
            storeConfiguration.durability = configuration.durability
            let node = try await DeviceNode.open(
                configuration: storeConfiguration, accountService: RemoteAccountService(client: client), logger: logger)
            do {
                let token = try await client.request(AccessTokenRequest(email: configuration.email, secret: configuration.secret))
                let account = try await node.login(accessToken: token.accessToken)
                let engine = SyncEngine(
                    node: node, client: client, accessToken: token.accessToken,
                    configuration: SyncEngineConfiguration(maxAttempts: 1), logger: logger)
                // Enrolls the device's key now (an empty pass), so no ceremony pays for it.
                _ = try await engine.syncAll()
                return SigningDevice(
                    node: node, connection: connection, engine: engine, seed: seed, deviceID: deviceID, hostEmail: account.user.email)
            } catch {
                try? await node.close()
                throw error
            }
        } catch {
            await connection.close()
            throw error
        }
    }
}

/// One virtual signing device: its own store, key, connection and sync engine.
final class SigningDevice: LoadDevice {
    let node: DeviceNode
    let connection: FleetClientConnection
    let engine: SyncEngine
    let seed: UInt64
    let deviceID: String
    let hostEmail: String
    /// Sequences whose ceremonies saw their item acknowledged, for the audit.
    private let acknowledgedSequences = Mutex<[UInt64]>([])

    init(node: DeviceNode, connection: FleetClientConnection, engine: SyncEngine, seed: UInt64, deviceID: String, hostEmail: String) {
        self.node = node
        self.connection = connection
        self.engine = engine
        self.seed = seed
        self.deviceID = deviceID
        self.hostEmail = hostEmail
    }

    func perform(ceremony: Int) async throws -> [StepTiming] {
        let clock = ContinuousClock()
        let composeStart = clock.now
        let envelope = try SampleEnvelope.inPerson(signers: 1, transactionId: "\(deviceID)-\(ceremony)", hostEmail: hostEmail)
        let id = try await node.compose(envelope, mode: .offline)
        let composed = clock.now

        let signer = TimedSigner(SyntheticSigner(seed: seed &+ UInt64(ceremony)))
        let outcome = try await node.resumeSigning(envelopeId: id, driver: signer)
        let signed = clock.now
        guard case .completed(_, let sequence?) = outcome else {
            throw CeremonyFailure(kind: "signing.notCompleted", "signing ended with \(outcome)")
        }

        let summary = try await engine.syncOne(sequence: sequence)
        let acknowledged = clock.now
        if summary.failed > 0 {
            throw CeremonyFailure(kind: "sync.rejected", "the coordinator rejected item \(sequence) of \(deviceID)")
        }
        acknowledgedSequences.withLock { $0.append(sequence) }
        let capture = signer.elapsed
        return [
            StepTiming("compose", composed - composeStart),
            StepTiming("capture", capture),
            StepTiming("signCommit", max(.zero, signed - composed - capture)),
            StepTiming("syncAck", acknowledged - signed),
        ]
    }

    /// The device's outbox and every result the coordinator holds for it (`sync.results`, paged).
    func auditInput() async throws -> DeviceAuditInput? {
        do {
            let outbox = try await node.outboxItems().map(AuditOutboxItem.init)
            var results: [SyncStoredResult] = []
            var lastApplied: UInt64 = 0
            var after: UInt64 = 0
            // Enough to see every item the device holds and some beyond; a coordinator that
            // holds far more than that has already shown the anomaly.
            let readAtMost = outbox.count + 2 * Int(SyncResultsQuery.maxLimit)
            while results.count < readAtMost {
                let page = try await connection.client.request(SyncResultsQuery(deviceID: deviceID, after: after))
                results += page.results
                lastApplied = page.lastApplied
                guard let next = page.nextAfter, next > after else { break }
                after = next
            }
            return DeviceAuditInput(
                deviceID: deviceID, outbox: outbox, acknowledgedInRun: acknowledgedSequences.withLock { $0 }, coordinator: results,
                coordinatorLastApplied: lastApplied)
        } catch {
            throw CeremonyFailure(kind: "audit", "\(deviceID): \(error)")
        }
    }

    func close() async {
        try? await node.close()
        await connection.close()
    }
}

/// Wraps a signer and adds up the time its people spend drawing (the capture step).
final class TimedSigner<Base: SignerDriver>: SignerDriver {
    let base: Base
    private let total = Mutex<Duration>(.zero)

    init(_ base: Base) { self.base = base }

    var elapsed: Duration { total.withLock { $0 } }

    func act(in session: SigningSession) async throws -> SignerAction {
        let start = ContinuousClock.now
        defer { total.withLock { $0 += ContinuousClock.now - start } }
        return try await base.act(in: session)
    }
}
