import Coordinator
import DeviceNode
import FleetProtocol
import FleetTesting
import FleetZeroMQTransport
import Foundation
import Logging
import Testing
import ZeroMQ

/// docs/embedding.md's "The pieces underneath": a FleetClient, an access token and a SyncEngine
/// push a device's outbox (the doc shows this function's body, from its first line to `summary`).
func syncEngineExample(node: DeviceNode, endpoint: String, serverKey: [UInt8], loop: ZMQIOLoop, logger: Logger) async throws
    -> SyncSummary
{
    // BEGIN EXAMPLE sync-engine
    let client = FleetClient(configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: node.deviceId,
                                                                     security: .curve(serverKey: serverKey, keys: node.transportKeys)),
                             loop: loop, logger: logger)
    async let _: Void = client.run()           // the client's session, until this scope ends (then cancelled)
    let token = try await client.request(AccessTokenRequest(email: "user1@demo.example", secret: "demo-secret"))
    let engine = SyncEngine(node: node, client: client, accessToken: token.accessToken)
    let summary = try await engine.syncAll()   // enrolls the key once per session, pushes in order, records receipts
    // END EXAMPLE
    return summary
}

@Suite("docs/embedding.md: the pieces underneath")
struct SyncEngineExampleTests {
    @Test("the SyncEngine example in docs/embedding.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("sync-engine", in: "docs/embedding.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the SyncEngine example pushes a device's outbox to a real coordinator over CURVE")
    func runs() async throws {
        let keys = try CurveKeyPair.generate()
        let coordinator = try await TestCoordinator(keys: keys)
        _ = try await coordinator.services.accounts.seedDemo()
        let endpoint = try await coordinator.serve()
        let directory = try TempDirectory()
        var logger = Logger(label: "sync-engine-example")
        logger.logLevel = .critical
        // The app logged its user in (here with a token its account service knows) and signed two envelopes.
        let user = UserInfo(accountId: "demo", accountName: "Demo Co", userId: "demo-user-1", userName: "Demo User 1",
                            email: "user1@demo.example", host: endpoint)
        let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath),
                                             accountService: InMemoryAccountService(tokens: ["app-token": user]), logger: logger)
        try await node.login(accessToken: "app-token")
        try await signOne(node, seed: 21)
        try await signOne(node, seed: 22)
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "sync-engine-example")

        let summary = try await withDeadline(.seconds(120), "the SyncEngine example") { [logger] in
            try await syncEngineExample(node: node, endpoint: endpoint, serverKey: keys.publicKey, loop: loop, logger: logger)
        }
        #expect(summary == SyncSummary(attempted: 2, succeeded: 2, failed: 0, remaining: 0))
        #expect(try await node.pendingOutboxItems().isEmpty)
        // On a busy machine a push can time out and be sent again: the server answers the second
        // with the stored result as a duplicate. Either way each item has its receipt, and the
        // coordinator applied each once (below).
        let outcomes = try await node.outboxItems().map(\.receipt?.outcome)
        #expect(outcomes.count == 2 && outcomes.allSatisfy { $0 == .applied || $0 == .duplicate }, "the receipts are recorded: \(outcomes)")
        let recorded = try await coordinator.results(of: node)
        #expect(recorded.map(\.sequence) == [1, 2])
        try await node.close()
        await loop.shutdown()
        context.shutdown()
        await coordinator.tearDown()
    }
}
