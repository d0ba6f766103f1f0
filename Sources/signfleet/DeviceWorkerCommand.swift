import ArgumentParser
import DeviceNode
import Foundation
import Logging

/// `signfleet device-worker` (hidden): composes and signs envelopes in a loop on one device store,
/// printing `committed <seq> <transactionId>` after each outbox commit. The crash test kills it
/// with SIGKILL at random points and checks the store.
struct DeviceWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-worker",
        abstract: "Compose and sign envelopes in a loop on one device store (crash-test child).",
        shouldDisplay: false)

    @Option(help: "Path of the device's SQLite store.")
    var store: String

    @Option(help: "Seed of the signers and transaction ids.")
    var seed: UInt64 = 1

    @Option(help: "How many envelopes to compose and sign.")
    var count: Int = 10

    @Option(help: "In-person signers per envelope.")
    var signers: Int = 2

    func run() async throws {
        var logger = Logger(label: "device-worker")
        logger.logLevel = .warning
        let user = UserInfo(accountId: "acct-1", accountName: "Crash Test", userId: "user-1", userName: "Ann Host",
                            email: "host@example.com", host: "http://127.0.0.1")
        let accounts = InMemoryAccountService(tokens: ["worker-token": user])
        let node = try await DeviceNode.open(
            configuration: DeviceConfiguration(storePath: store), accountService: accounts, logger: logger)
        try await node.login(accessToken: "worker-token")
        announce("ready \(node.deviceId) seed \(seed)")

        // Finish what an earlier (killed) run left half-signed.
        for cached in try await node.cachedEnvelopes() where cached.canResume {
            let outcome = try await node.resumeSigning(envelopeId: cached.envelope.localId, driver: SyntheticSigner(seed: seed))
            if case .completed(_, let sequence?) = outcome {
                announce("committed \(sequence) \(cached.envelope.transactionId)")
            }
        }
        for index in 0..<max(0, count) {
            let transactionId = "tx-\(seed)-\(index)"
            let envelope = try SampleEnvelope.inPerson(signers: signers, transactionId: transactionId)
            let id = try await node.compose(envelope, mode: .offline)
            let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: seed &+ UInt64(index)))
            switch outcome {
            case .completed(_, let sequence?), .declined(_, let sequence, _):
                announce("committed \(sequence) \(transactionId)")
            case .readyForSync(let sequence, _):
                announce("queued \(sequence) \(transactionId)")
            case .completed(_, nil), .cancelled:
                break
            }
        }
        try await node.close()
        announce("done")
    }
}
