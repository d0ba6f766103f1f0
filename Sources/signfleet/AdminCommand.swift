import ArgumentParser
import Coordinator
import CoordinatorPostgres
import FleetProtocol
import Foundation

/// `signfleet admin`: manages the coordinator's accounts and users directly in its store.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Create accounts and users in a coordinator store.",
        subcommands: [
            CreateAccount.self, CreateUser.self, SeedDemo.self, List.self, Token.self, Envelopes.self, Devices.self, ReturnOriginsCommand.self,
            AdminTemplatesCommand.self, AdminEnvelopeCommand.self, AdminIntegrationKeysCommand.self, AdminConnectKeysCommand.self,
        ]
    )

    /// `signfleet admin devices revoke`: frees a device id for new keys (docs/protocol.md, section 1.1).
    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "devices", abstract: "Manage enrolled devices.", subcommands: [Revoke.self])

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke",
                abstract: "Revoke a device's keys: it can do nothing until it enrolls again (same account, new keys); its history stays.")
            @OptionGroup var store: StoreOption
            @Option(help: "The device id.") var id: String
            @Option(help: "The device's account (needed only when several accounts have a device with this id).") var account: String?

            func run() async throws {
                let coordinatorStore = try await store.storage()
                let devices = DeviceRegistry(storage: coordinatorStore, auth: AuthService(storage: coordinatorStore))
                let revoked: Bool
                do {
                    revoked = try await devices.revoke(deviceID: id, accountID: account)
                } catch let error as FleetError {
                    throw ValidationError(error.message)
                }
                guard revoked else {
                    FileHandle.standardError.write(Data("error: no device \"\(id)\" is enrolled in \(store.shown)\n".utf8))
                    throw ExitCode(1)
                }
                print("revoked device \(id): it may enroll again with new keys")
            }
        }
    }

    /// `signfleet admin return-origins`: where an account's signing ceremonies may return
    /// (docs/captive-signing.md, "Return URLs").
    struct ReturnOriginsCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "return-origins",
            abstract: "List, add or remove an account's allowed return-URL origins (none listed: any http or https origin).",
            subcommands: [ListOrigins.self, Add.self, Remove.self])

        struct ListOrigins: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "list", abstract: "Print the account's allowed origins, one per line.")
            @OptionGroup var store: StoreOption
            @Option(help: "The account's id.") var account: String

            func run() async throws {
                let directory = try await store.open()
                guard try await directory.account(id: account) != nil else { throw ValidationError("no account \"\(account)\" in \(store.shown)") }
                for origin in try await ReturnOrigins(storage: directory.storage).list(accountID: account) { print(origin) }
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "add", abstract: "Allow origins (a URL is reduced to scheme://host[:port]).")
            @OptionGroup var store: StoreOption
            @Option(help: "The account's id.") var account: String
            @Option(name: .customLong("origin"), help: "An http or https origin or URL; repeat for several.") var origins: [String]

            func run() async throws {
                try await change { try await $0.add(accountID: account, origins) }
            }

            func change(_ body: (ReturnOrigins) async throws -> [String]) async throws {
                do {
                    let list = try await body(ReturnOrigins(storage: try await store.storage()))
                    print("account \(account) return origins: \(list.isEmpty ? "any http or https origin" : list.joined(separator: " "))")
                } catch let error as FleetError {
                    throw ValidationError(error.message)
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove origins from the account's list.")
            @OptionGroup var store: StoreOption
            @Option(help: "The account's id.") var account: String
            @Option(name: .customLong("origin"), help: "An origin or URL to remove; repeat for several.") var origins: [String]

            func run() async throws {
                do {
                    let list = try await ReturnOrigins(storage: try await store.storage()).remove(accountID: account, origins)
                    print("account \(account) return origins: \(list.isEmpty ? "any http or https origin" : list.joined(separator: " "))")
                } catch let error as FleetError {
                    throw ValidationError(error.message)
                }
            }
        }
    }

    struct StoreOption: ParsableArguments {
        @Option(help: ArgumentHelp(
            "The coordinator's store: a SQLite file (created if missing) or a postgres:// URL (docs/storage.md).",
            discussion: "Without --store: $SIGNFLEET_STORE when set (a URL with a password stays off the command line), else signfleet-coordinator.sqlite."))
        var store: String?

        /// `--store`, else `SIGNFLEET_STORE`, else `signfleet-coordinator.sqlite`.
        var location: String {
            store ?? ProcessInfo.processInfo.environment["SIGNFLEET_STORE"] ?? "signfleet-coordinator.sqlite"
        }

        /// The store as messages name it: a URL without its password.
        var shown: String {
            PostgresCoordinatorStore.isURL(location) ? PostgresCoordinatorStore.redacted(url: location) : location
        }

        /// The store, SQLite or PostgreSQL.
        func storage() async throws -> any CoordinatorStorage {
            let store = location
            do {
                if PostgresCoordinatorStore.isURL(store) {
                    // One command, asked once: an unreachable server is an error now, not after a minute of retries.
                    try await PostgresCoordinatorStore.probe(url: store)
                    return try await PostgresCoordinatorStore(url: store)
                }
                return try CoordinatorStore(path: store)
            } catch {
                let shown = PostgresCoordinatorStore.isURL(store) ? "the PostgreSQL store" : "the store at \(store)"
                throw ValidationError("cannot open \(shown): \(String(reflecting: error))")
            }
        }

        func open() async throws -> AccountDirectory {
            AccountDirectory(storage: try await storage())
        }
    }

    struct CreateAccount: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create-account", abstract: "Create an account.")
        @OptionGroup var store: StoreOption
        @Option(help: "Account name (1 to 100 characters).") var name: String
        @Option(help: "Account id (default: a new UUID).") var id: String?
        @Flag(inversion: .prefixedNo, help: "Whether the account may sign offline.") var offlineSigning = true
        @Option(help: "Requests per hour.") var hourlyLimit = 3_000
        @Option(help: "Requests per burst window.") var burstLimit = 500
        @Option(help: "Burst window in seconds.") var burstWindow = 30

        func run() async throws {
            let account = try await store.open().createAccount(
                id: id ?? UUID().uuidString, name: name, offlineSigning: offlineSigning,
                rateLimits: RateLimits(hourly: hourlyLimit, burst: burstLimit, burstWindowSeconds: burstWindow))
            print("account \(account.id) \"\(account.name)\" offlineSigning=\(account.offlineSigning)")
        }
    }

    struct CreateUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create-user", abstract: "Create a user of an account.")
        @OptionGroup var store: StoreOption
        @Option(help: "The account's id.") var account: String
        @Option(help: "User name.") var name: String
        @Option(help: "Email, used to log in.") var email: String
        @Option(help: "Secret, used to log in (at least 8 bytes).") var secret: String

        func run() async throws {
            let user = try await store.open().createUser(accountID: account, name: name, email: email, secret: secret)
            print("user \(user.id) \(user.email) in account \(user.accountID)")
        }
    }

    /// `signfleet admin token`: an access token for a user, as `auth.token` issues them, for REST
    /// clients (docs/rest-api.md: `Authorization: Bearer <token>`).
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Issue an access token for a user (for the REST API's Authorization: Bearer header).",
            discussion: "Prints `access-token <token>`, `expires-at <ISO 8601>` and `account <id>`. The coordinator serving this store accepts it at once.")
        @OptionGroup var store: StoreOption
        @Option(help: "The user's email.") var email: String
        @Option(help: "The user's secret.") var secret: String
        @Option(help: "Seconds the token is valid (1 to 86400).") var lifetime = 3600

        func validate() throws {
            guard (1...86_400).contains(lifetime) else { throw ValidationError("--lifetime must be 1 to 86400 seconds; got \(lifetime)") }
        }

        func run() async throws {
            let storage = try await store.storage()
            let auth = AuthService(storage: storage, tokenLifetime: .seconds(lifetime))
            let reply: AccessTokenReply
            do {
                reply = try await auth.issueToken(email: email, secret: secret)
            } catch let error as FleetError {
                throw ValidationError(error.message)
            }
            let (_, account) = try await auth.authenticate(reply.accessToken)
            print("access-token \(reply.accessToken)")
            print("expires-at \(ISO8601DateFormatter().string(from: reply.expiresAt))")
            print("account \(account.id)")
        }
    }

    struct SeedDemo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "seed-demo", abstract: "Create the demo account and users (secret: \(DemoData.secret)).")
        @OptionGroup var store: StoreOption
        @Option(help: "How many demo users.") var users = 1

        func run() async throws {
            let (account, created) = try await store.open().seedDemo(userCount: users)
            print("account \(account.id) with users: \(created.map(\.email).joined(separator: ", "))")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List accounts and their users.")
        @OptionGroup var store: StoreOption

        func run() async throws {
            let directory = try await store.open()
            for account in try await directory.accounts() {
                let limits = account.rateLimits
                print(
                    "account \(account.id) \"\(account.name)\" offlineSigning=\(account.offlineSigning) "
                        + "hourlyLimit=\(limits.hourly) burstLimit=\(limits.burst) burstWindow=\(limits.burstWindowSeconds)")
                for user in try await directory.users(accountID: account.id) {
                    print("  user \(user.id) \(user.email) \"\(user.name)\"")
                }
            }
        }
    }

    struct Envelopes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "envelopes",
            abstract: "Show each device's synced envelopes and check them.",
            discussion: """
                Exits 0 when every device's envelopes came from sequences 1...N with none missing or \
                repeated (N = --expect-per-device when given), 1 otherwise.
                """)
        @OptionGroup var store: StoreOption
        @Option(help: "The number of envelopes each device should have.") var expectPerDevice: Int?
        @Option(help: "The number of devices that should have synced.") var expectDevices: Int?

        func run() async throws {
            let summaries: [DeviceEnvelopeSummary]
            do {
                summaries = try await store.storage().envelopeSummaries()
            } catch {
                throw ValidationError("cannot read the store at \(store.shown): \(error)")
            }
            var problems: [String] = []
            for device in summaries {
                print("device \(device.deviceID): \(device.envelopes) envelopes, \(device.rejected) rejected, last applied \(device.lastAppliedSequence)")
                let expected = (0..<(device.envelopes + device.rejected)).map { UInt64($0 + 1) }
                if device.rejected == 0 && device.sequences != expected {
                    problems.append("device \(device.deviceID): sequences \(device.sequences) are not 1...\(device.envelopes)")
                }
                if let expectPerDevice, device.envelopes != expectPerDevice {
                    problems.append("device \(device.deviceID): \(device.envelopes) envelopes, expected \(expectPerDevice)")
                }
            }
            if let expectDevices, summaries.count != expectDevices {
                problems.append("\(summaries.count) devices synced, expected \(expectDevices)")
            }
            let total = summaries.reduce(0) { $0 + $1.envelopes }
            if problems.isEmpty {
                print("valid: \(total) envelopes from \(summaries.count) devices, each device's in order, none missing, none duplicated")
            } else {
                problems.forEach { print("invalid: \($0)") }
                throw ExitCode(1)
            }
        }
    }
}
