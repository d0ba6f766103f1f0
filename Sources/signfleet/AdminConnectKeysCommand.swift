import ArgumentParser
import Coordinator
import FleetProtocol
import Foundation

/// `signfleet admin connect-keys`: an account's Connect HMAC keys (docs/webhooks.md, "Signatures").
/// Each delivery of a configuration with `includeHMAC` carries one signature per active key, so a
/// key is rotated by adding the new one, moving the listener to it, then revoking the old one.
struct AdminConnectKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect-keys",
        abstract: "Add, list and revoke an account's Connect HMAC keys.",
        subcommands: [Add.self, ListKeys.self, Revoke.self])

    static func service(_ store: AdminCommand.StoreOption) async throws -> ConnectService {
        let storage = try await store.storage()
        return ConnectService(store: storage, links: CaptiveSigningLinks(), now: WallClock.system.now)
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Make a key; prints `connect-key <id> <secret>` (give the secret to the listener).")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The account the key signs for.") var account: String

        func run() async throws {
            let connect = try await AdminConnectKeysCommand.service(store)
            let key = try await AdminIntegrationKeysCommand.checked { try await connect.addKey(accountID: account) }
            print("connect-key \(key.id) \(key.secret)")
        }
    }

    struct ListKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Print the account's keys, one per line: id, created, in-force or revoked-<time> (secrets are not printed).")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The account.") var account: String

        func run() async throws {
            let storage = try await store.storage()
            for key in try await storage.connectKeys(accountID: account) {
                let state = key.revokedAt.map { "revoked-\(ISO8601DateFormatter().string(from: $0))" } ?? "in-force"
                print("\(key.id) \(ISO8601DateFormatter().string(from: key.createdAt)) \(state)")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Stop signing with a key.")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The account.") var account: String
        @Argument(help: "The key's id.") var id: String

        func run() async throws {
            let connect = try await AdminConnectKeysCommand.service(store)
            try await AdminIntegrationKeysCommand.checked { try await connect.revokeKey(id: id, accountID: account) }
            print("revoked \(id)")
        }
    }
}
