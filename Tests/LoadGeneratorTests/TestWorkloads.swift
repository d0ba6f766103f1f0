import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Synchronization
import ZeroMQ

@testable import LoadGenerator

/// A "ceremony" of one request (`auth.token`) per arrival, on a `FleetClient` per device: lets
/// tests control the server's behaviour exactly.
struct RequestWorkload: LoadWorkload {
    let endpoint: String
    let loop: ZMQIOLoop
    let requestTimeout: Duration

    var steps: [String] { ["request"] }

    func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice {
        var logger = Logger(label: "load-test")
        logger.logLevel = .critical
        let client = FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: endpoint, deviceID: "load-test-\(index)-\(UUID().uuidString.prefix(6))", requestTimeout: requestTimeout, maxAttempts: 1),
            loop: loop, logger: logger)
        return RequestDevice(client: client, connection: Task { await client.run() })
    }
}

final class RequestDevice: LoadDevice {
    let client: FleetClient
    let connection: Task<Void, Never>

    init(client: FleetClient, connection: Task<Void, Never>) {
        self.client = client
        self.connection = connection
    }

    func perform(ceremony: Int) async throws -> [StepTiming] {
        let start = ContinuousClock.now
        _ = try await client.request(AccessTokenRequest(email: "load@example.com", secret: "ceremony-\(ceremony)"))
        return [StepTiming("request", ContinuousClock.now - start)]
    }

    func close() async {
        connection.cancel()
        await connection.value
    }
}

/// A real `FleetServer` whose `auth.token` handler answers at once, except that the request
/// numbered `stallAt` stalls the whole server for `stall` (as a long pause would): it and every
/// request that arrives before the stall ends are answered when it ends. (The server itself
/// handles different devices' requests concurrently, so stalling one handler would hold only
/// that device.)
final class StallingServer: Sendable {
    let context: ZMQContext
    let loop: ZMQIOLoop
    let endpoint: String
    let serving: Task<Void, Never>
    private let state = StallState()

    var stalledAt: ContinuousClock.Instant? { state.value.withLock { $0.stalledAt } }
    var requests: Int { state.value.withLock { $0.requests } }

    init(stallAt: Int, stall: Duration) async throws {
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "stalling-server")
        var logger = Logger(label: "stalling-server")
        logger.logLevel = .critical
        var router = RequestRouter()
        let state = self.state
        router.on(AccessTokenRequest.self) { _, _ in
            let stallEnds = state.value.withLock { state -> ContinuousClock.Instant? in
                state.requests += 1
                if state.requests == stallAt {
                    state.stalledAt = .now
                    return .now + stall
                }
                guard let stalledAt = state.stalledAt, stalledAt + stall > .now else { return nil }
                return stalledAt + stall
            }
            if let stallEnds { try? await Task.sleep(until: stallEnds, clock: .continuous) }
            return AccessTokenReply(accessToken: "token", expiresAt: Date(timeIntervalSinceNow: 3600))
        }
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*", heartbeatInterval: .seconds(5)),
            router: router, loop: loop, logger: logger)
        endpoint = try await server.bind()
        serving = Task { try? await server.run() }
    }

    func stop() async {
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
    }
}

final class StallState: Sendable {
    let value = Mutex<(requests: Int, stalledAt: ContinuousClock.Instant?)>((0, nil))
}
