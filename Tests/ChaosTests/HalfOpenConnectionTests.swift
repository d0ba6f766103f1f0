import Chaos
import FleetProtocol
import FleetTesting
import FleetZeroMQTransport
import Logging
import Testing
import ZeroMQ

/// A half-open connection — the path to the coordinator silent, no reset — is cured under the
/// client's socket by libzmq's ZMTP heartbeats (`FleetClientConfiguration.transportHeartbeat`),
/// so the client never needs a socket of its own making, a new handshake and a new `hello` for it
/// (docs/protocol.md, "Heartbeats and liveness"). The fault proxy's `timeout` toxic with 0 (bytes
/// dropped, the connection left open) makes the silence.
@Suite struct HalfOpenConnectionTests {
    @Test func libzmqRedialsASilentConnectionAndTheRequestIsAnsweredOnTheSameSocket() async throws {
        var logger = Logger(label: "half-open")
        logger.logLevel = .critical
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "half-open")
        // Heartbeats every 10 s, so the application's own liveness (30 s) stays out of the way.
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*", heartbeatInterval: .seconds(10)),
            router: RequestRouter(), loop: loop, logger: logger)
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let proxies = FaultProxyServer(seed: 7, logger: logger)
        let upstream = "127.0.0.1:" + (endpoint.split(separator: ":").last.map(String.init) ?? "")
        let proxy = try await proxies.create(ProxyDefinition(name: "coordinator", upstream: upstream))

        var configuration = FleetClientConfiguration(
            endpoint: "tcp://\(proxy.listen)", deviceID: "dev-1", requestTimeout: .seconds(1), maxAttempts: 10)
        configuration.maxRequestTimeout = .seconds(1)
        configuration.transportHeartbeat = TransportHeartbeat(interval: .milliseconds(100), timeout: .milliseconds(300))
        let client = FleetClient(configuration: configuration, loop: loop, logger: logger)
        let connection = Task { await client.run() }
        _ = try await firstElement(of: client.events, within: .seconds(120), "connected") {
            if case .connected = $0 { true } else { false }
        }
        // Usually the first connection; on a machine too busy to answer a 300 ms PING in time,
        // libzmq may already have dialled again, so the test silences whichever is current.
        let current = try await proxies.connectionsAccepted("coordinator")
        #expect(current >= 1)

        // The coordinator's replies stop reaching this connection, and only this one: the toxic
        // applies to a connection by a seeded draw, and its name is chosen so that the draw takes
        // the current connection and spares the next ones (revision 1: the proxy's first toxic).
        let name = try #require(
            (0..<100_000).lazy.map { "silence-\($0)" }.first { name in
                ToxicityDraw.applies(seed: 7, proxy: "coordinator", connection: current, toxic: name, revision: 1, toxicity: 0.5)
                    && (current + 1...current + 8).allSatisfy {
                        !ToxicityDraw.applies(seed: 7, proxy: "coordinator", connection: $0, toxic: name, revision: 1, toxicity: 0.5)
                    }
            })
        _ = try await proxies.addToxic(
            Toxic(name: name, stream: .downstream, toxicity: 0.5, kind: .timeout(timeout: 0)), to: "coordinator")

        // The request's reply is dropped; libzmq hears no PONG within 300 ms and dials again; the
        // resend goes out on the new connection, under the same socket, and is answered.
        let reply = try await withDeadline(.seconds(120), "the request answered over the redialled connection") {
            try await client.request(Heartbeat())
        }
        #expect(reply.serverInstance == server.instance)
        #expect(try await proxies.connectionsAccepted("coordinator") > current, "libzmq dialled again")
        #expect(await client.socketsOpened == 1, "the client kept its socket: no new handshake or hello of its own making")

        connection.cancel()
        await connection.value
        serving.cancel()
        await serving.value
        await proxies.shutdown()
        await loop.shutdown()
        context.shutdown()
    }
}
