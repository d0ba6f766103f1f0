import ArgumentParser
import Coordinator
import FleetProtocol
import Foundation

/// `signfleet admin integration-keys`: the REST API's OAuth integration keys and users' consent
/// to them (docs/rest-api.md, "Authentication").
struct AdminIntegrationKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "integration-keys",
        abstract: "Register, list and revoke OAuth integration keys; record a user's consent to one.",
        subcommands: [Add.self, ListKeys.self, Revoke.self, Consent.self])

    static func service(_ store: AdminCommand.StoreOption) async throws -> OAuthService {
        let storage = try await store.storage()
        let auth = AuthService(storage: storage)
        return OAuthService(store: storage, auth: auth, now: WallClock.system.now)
    }

    /// A service call whose refusal is a usage error naming what was wrong.
    static func checked<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            throw ValidationError(error.message)
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Register an integration key; prints `integration-key <id>`, and `client-secret <secret>` (shown only now) with --secret.",
            discussion: """
                A key for the JWT grant has the RSA public key its assertions are signed with (--public-key-file); a key for \
                the authorization code grant has a client secret (--secret) and the redirect URIs its consent page may send \
                codes to (--redirect-uri, repeatable, matched exactly). A key may have both.
                """)
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The account the key acts in.") var account: String
        @Option(help: "A name for operators (shown on the consent page).") var name: String
        @Option(help: "A PEM file with the RSA public key (-----BEGIN PUBLIC KEY-----, at least 2048 bits).") var publicKeyFile: String?
        @Flag(help: "Make a client secret (the authorization code grant).") var secret = false
        @Option(help: "A redirect URI of the authorization code grant (absolute http or https).") var redirectUri: [String] = []

        func run() async throws {
            var pem: String?
            if let publicKeyFile {
                do {
                    pem = try String(contentsOfFile: publicKeyFile, encoding: .utf8)
                } catch {
                    throw ValidationError("cannot read \(publicKeyFile): \(error.localizedDescription)")
                }
            }
            let oauth = try await AdminIntegrationKeysCommand.service(store)
            let registered = try await AdminIntegrationKeysCommand.checked {
                try await oauth.register(accountID: account, name: name, publicKeyPEM: pem, redirectURIs: redirectUri, secret: secret)
            }
            print("integration-key \(registered.key.id)")
            if let clientSecret = registered.secret { print("client-secret \(clientSecret)") }
        }
    }

    struct ListKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Print the keys, one per line: id, account, created, revoked or in-force, grants (jwt, code or jwt+code), name; then each redirect URI on a line of its own, indented.")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "Only this account's keys.") var account: String?

        func run() async throws {
            let oauth = try await AdminIntegrationKeysCommand.service(store)
            for key in try await oauth.keys(accountID: account) {
                let state = key.revokedAt.map { "revoked-\(ISO8601DateFormatter().string(from: $0))" } ?? "in-force"
                let grants = [key.hasPublicKey ? "jwt" : nil, key.redirectURIs.isEmpty ? nil : "code"].compactMap { $0 }.joined(separator: "+")
                print("\(key.id) \(key.accountID) \(ISO8601DateFormatter().string(from: key.createdAt)) \(state) \(grants) \(key.name)")
                for uri in key.redirectURIs { print("  redirect-uri \(uri)\(key.hasSecret ? "" : " (PKCE required: no client secret)")") }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Revoke a key: its assertions are refused from now on (tokens it got live out their hour).")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The key's account.") var account: String
        @Argument(help: "The integration key.") var id: String

        func run() async throws {
            let oauth = try await AdminIntegrationKeysCommand.service(store)
            try await AdminIntegrationKeysCommand.checked { try await oauth.revoke(id: id, accountID: account) }
            print("revoked integration key \(id)")
        }
    }

    struct Consent: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "consent", abstract: "Record a user's consent to a key acting for them (what DocuSign's consent page records).")
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The user's email (a user of the key's account).") var email: String
        @Option(help: "Space-separated scopes (default: signature impersonation).") var scopes: String = "signature impersonation"
        @Argument(help: "The integration key.") var id: String

        func run() async throws {
            let oauth = try await AdminIntegrationKeysCommand.service(store)
            let list = scopes.split(whereSeparator: \.isWhitespace).map(String.init)
            try await AdminIntegrationKeysCommand.checked { try await oauth.consent(keyID: id, email: email, scopes: list) }
            print("consent recorded: \(email) for integration key \(id) (\(list.joined(separator: " ")))")
        }
    }
}
