import Coordinator
import DeviceNode
import Envelopes
import FleetProtocol
import FleetTesting
import Foundation
import Logging
import Synchronization
import ZeroMQ

/// A real coordinator in this process for the connection tests: its own SQLite store, the account
/// `acme` with one user, and its request router, served over ZeroMQ (CURVE, a ROUTER on a free
/// port) or in process (FleetTesting). Coordinators of one test share a CURVE key pair, as a
/// cluster's members would, so a device pins one key for all of them.
final class TestCoordinator: Sendable {
    static let email = "ann@acme.example"
    static let secret = "secret-123"

    let directory: TempDirectory
    let services: CoordinatorServices
    let keys: CurveKeyPair
    /// While set, `sync.push` is never answered (the coordinator hangs on it); the rest is served.
    private let hangsPushes = Mutex(false)
    private let release: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation) = AsyncStream.makeStream()
    private let zeroMQ = Mutex<(context: ZMQContext, loop: ZMQIOLoop, serving: Task<Void, Never>)?>(nil)

    init(keys: CurveKeyPair) async throws {
        directory = try TempDirectory()
        var logger = Logger(label: "test-coordinator")
        logger.logLevel = .critical
        // Opening and migrating the store blocks (SQLite, fsync): on a thread of its own, not on the
        // two-thread cooperative pool every other test shares.
        let path = directory.path + "/coordinator.sqlite"
        let store = try await offPool { [logger] in try CoordinatorStore(path: path, logger: logger) }
        services = CoordinatorServices(store: store)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme")
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann Host", email: Self.email, secret: Self.secret)
        self.keys = keys
    }

    var hangsOnPush: Bool {
        get { hangsPushes.withLock { $0 } }
        set { hangsPushes.withLock { $0 = newValue } }
    }

    /// The coordinator's handlers, with the hang switch in front of `sync.push`.
    var router: RequestRouter {
        var router = RequestRouter()
        services.register(in: &router)
        let release = self.release.stream
        router.on(SyncPush.self) { [self, ingest = services.ingest] push, context throws(FleetError) in
            if self.hangsOnPush {
                for await _ in release {}  // until the test ends (or the server's task is cancelled)
                throw FleetError(.unavailable, "stopped", retryable: true)
            }
            do {
                return try await ingest.apply(push, credential: context.credential)
            } catch let error as FleetError {
                throw error
            } catch {
                throw FleetError(.internal, "\(error)", retryable: true)
            }
        }
        return router
    }

    /// Serves over ZeroMQ with CURVE on a free port; returns the bound endpoint.
    func serve() async throws -> String {
        var logger = Logger(label: "test-coordinator")
        logger.logLevel = .critical
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "test-coordinator")
        let server = FleetServer(
            configuration: FleetServerConfiguration(
                endpoint: "tcp://127.0.0.1:*", security: .curve(keys), heartbeatInterval: .milliseconds(300)),
            router: router, loop: loop, logger: logger)
        let endpoint = try await server.bind()
        let serving = Task<Void, Never> { try? await server.run() }
        zeroMQ.withLock { $0 = (context, loop, serving) }
        return endpoint
    }

    /// Kills the ZeroMQ server: its socket closes (LINGER 0) and nothing answers there any more.
    func kill() async {
        guard let running = zeroMQ.withLock({ state in defer { state = nil }; return state }) else { return }
        running.serving.cancel()
        await running.serving.value
        await running.loop.shutdown()
        running.context.shutdown()
    }

    /// An in-process server over the same router (no sockets).
    func inProcess() -> InProcessServer {
        InProcessServer(router: router, security: .curve(keys))
    }

    /// What this coordinator recorded for `node`'s items (asked over the services, as the device's own key).
    func results(of node: DeviceNode) async throws -> [SyncStoredResult] {
        let server = inProcess()
        // A clock that never moves: on a busy machine the answer comes late, never a timeout.
        let client = server.client(
            deviceID: node.deviceId, security: .curve(serverKey: keys.publicKey, keys: node.transportKeys), clock: ManualClock())
        let session = Task { await client.run() }
        defer { session.cancel() }
        do {
            return try await client.request(SyncResultsQuery(deviceID: node.deviceId)).results
        } catch let error as FleetError where error.code == .unauthenticated {
            return []  // the device never enrolled here
        }
    }

    func tearDown() async {
        release.continuation.finish()
        await kill()
    }
}

/// Runs blocking work on a thread of its own and returns its result.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "test-blocking"
        thread.start()
    }
}

/// A device node on a fresh store (logged in by its connection, not here).
func openDevice(in directory: TempDirectory, retainSynced: Duration? = nil) async throws -> DeviceNode {
    var configuration = DeviceConfiguration(storePath: directory.storePath)
    configuration.retainSynced = retainSynced
    var logger = Logger(label: "device")
    logger.logLevel = .critical
    return try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(), logger: logger)
}

/// Composes and signs one in-person envelope; returns its outbox sequence.
@discardableResult
func signOne(_ node: DeviceNode, seed: UInt64) async throws -> UInt64 {
    let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-\(seed)-\(UUID().uuidString.prefix(6))"), mode: .offline)
    guard case .completed(_, let sequence?) = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: seed)) else {
        throw DeviceNodeError(.signerFailed, "the synthetic signer did not complete")
    }
    return sequence
}
