import Crypto
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import Logging
import Testing
import ZeroMQ

@testable import Coordinator

@Suite struct CoordinatorWireTests {
    @Test func deviceGetsATokenItsUserInfoAndEnrollsOverTCP() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let services = CoordinatorServices(store: temporary.store, host: "http://127.0.0.1:9")
        _ = try await services.accounts.seedDemo()
        var router = RequestRouter()
        services.register(in: &router)

        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "coordinator-wire-tests")
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let client = FleetClient(configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: "tablet-7"), loop: loop, logger: logger, clock: ManualClock())
        let connection = Task { await client.run() }

        do {
            _ = try await client.request(AccessTokenRequest(email: "user1@demo.example", secret: "wrong-secret"))
            Issue.record("a wrong secret must be refused")
        } catch let error as FleetError {
            #expect(error.code == .unauthenticated)
        }
        let token = try await client.request(AccessTokenRequest(email: "user1@demo.example", secret: DemoData.secret))
        let info = try await client.request(UserInfoRequest(accessToken: token.accessToken))
        #expect(info.accountID == "demo")
        #expect(info.host == "http://127.0.0.1:9")

        let key = Curve25519.Signing.PrivateKey()
        let enrolled = try await client.request(
            EnrollDevice(accessToken: token.accessToken, deviceID: "tablet-7", publicKey: Array(key.publicKey.rawRepresentation)))
        #expect(enrolled.deviceID == "tablet-7")
        #expect(try await services.devices.device(id: "tablet-7")?.publicKey == Array(key.publicKey.rawRepresentation))

        // A device cannot enroll under another device's id.
        do {
            _ = try await client.request(
                EnrollDevice(accessToken: token.accessToken, deviceID: "tablet-8", publicKey: Array(key.publicKey.rawRepresentation)))
            Issue.record("enrolling another device's id must be refused")
        } catch let error as FleetError {
            #expect(error.code == .invalidRequest)
        }

        connection.cancel()
        await connection.value
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
    }
}
