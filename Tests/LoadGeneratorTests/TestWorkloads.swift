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
        let connection = FleetClientConnection.open(
            configuration: FleetClientConfiguration(
                endpoint: endpoint, deviceID: "load-test-\(index)-\(UUID().uuidString.prefix(6))", requestTimeout: requestTimeout, maxAttempts: 1),
            loop: loop, logger: logger)
        return RequestDevice(connection: connection)
    }
}

final class RequestDevice: LoadDevice {
    let connection: FleetClientConnection
    var client: FleetClient { connection.client }

    init(connection: FleetClientConnection) {
        self.connection = connection
    }

    func perform(ceremony: Int) async throws -> [StepTiming] {
        let start = ContinuousClock.now
        _ = try await client.request(AccessTokenRequest(email: "load@example.com", secret: "ceremony-\(ceremony)"))
        return [StepTiming("request", ContinuousClock.now - start)]
    }

    func close() async {
        await connection.close()
    }
}

/// Devices without I/O whose first `quick` ceremonies (over all devices) finish at once and every
/// later one runs until it is cancelled, as against a coordinator that stopped answering. The
/// probe tells a test what ran and what is still running.
struct HangingWorkload: LoadWorkload {
    let probe: CeremonyProbe

    var steps: [String] { ["ceremony"] }

    func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice {
        HangingDevice(probe: probe)
    }
}

final class HangingDevice: LoadDevice {
    let probe: CeremonyProbe

    init(probe: CeremonyProbe) {
        self.probe = probe
    }

    func perform(ceremony: Int) async throws -> [StepTiming] {
        let hangs = probe.began()
        defer { probe.ended() }
        if hangs {
            // Never yields and is never finished: only the task's cancellation ends the wait.
            let (never, keptOpen) = AsyncStream<Never>.makeStream()
            for await _ in never {}
            keptOpen.finish()
            try Task.checkCancellation()
        }
        probe.completed.continuation.yield(ceremony)
        return [StepTiming("ceremony", .zero)]
    }

    func close() async {
        probe.closed()
    }
}

/// What a ``HangingWorkload``'s devices did: ceremonies running now, devices closed, and a stream
/// of the ceremonies that completed.
final class CeremonyProbe: Sendable {
    private struct Counts {
        var began = 0
        var running = 0
        var closed = 0
    }

    let quick: Int
    let completed = AsyncStream<Int>.makeStream()
    private let counts = Mutex(Counts())

    init(quick: Int) {
        self.quick = quick
    }

    var running: Int { counts.withLock { $0.running } }
    var closedDevices: Int { counts.withLock { $0.closed } }

    /// Counts a ceremony in; true when it is to hang.
    func began() -> Bool {
        counts.withLock {
            $0.began += 1
            $0.running += 1
            return $0.began > quick
        }
    }

    func ended() { counts.withLock { $0.running -= 1 } }
    func closed() { counts.withLock { $0.closed += 1 } }
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
