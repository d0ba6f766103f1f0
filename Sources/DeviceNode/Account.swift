import Foundation
import Synchronization

/// What the server says about the owner of an access token (the `userinfo` call).
public struct UserInfo: Hashable, Sendable, Codable {
    /// The account id.
    public var accountId: String
    /// The account's display name.
    public var accountName: String
    /// The user id.
    public var userId: String
    /// The user's name.
    public var userName: String
    /// The user's email; self signers are recipients with this email.
    public var email: String
    /// The server's base URL.
    public var host: String
    /// Whether the account may sign offline (the SDK's *Offline Signing* feature).
    public var offlineSigningEnabled: Bool

    /// Creates user info.
    public init(
        accountId: String, accountName: String, userId: String, userName: String, email: String, host: String,
        offlineSigningEnabled: Bool = true
    ) {
        self.accountId = accountId
        self.accountName = accountName
        self.userId = userId
        self.userName = userName
        self.email = email
        self.host = host
        self.offlineSigningEnabled = offlineSigningEnabled
    }
}

/// The logged-in account as the device keeps it (the SDK's `DSMAccountInfo`).
public struct AccountInfo: Hashable, Sendable, Codable {
    /// What the server said about the user.
    public var user: UserInfo
    /// The access token used for server calls.
    public var accessToken: String
    /// When the user logged in online.
    public var loggedInAt: Date
    /// Whether this session was restored offline from the persisted account.
    public var isOffline: Bool
}

/// The seam to the server's account API: resolves an access token to its user.
///
/// The fleet's network implementation comes with the sync engine; ``InMemoryAccountService`` is
/// for tests and simulations.
public protocol AccountService: Sendable {
    /// The user owning `accessToken`.
    /// - Throws: any error when the token is invalid or the server cannot be reached.
    func userInfo(accessToken: String) async throws -> UserInfo
}

/// An ``AccountService`` holding tokens in memory.
///
/// ```swift
/// let accounts = InMemoryAccountService(tokens: ["token-1": user])
/// ```
public final class InMemoryAccountService: AccountService {
    /// Why the in-memory service refused.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What happened.
        public var message: String
        public var description: String { message }
    }

    private let state: Mutex<(tokens: [String: UserInfo], reachable: Bool)>

    /// Creates a service that knows these tokens.
    public init(tokens: [String: UserInfo] = [:]) {
        state = Mutex((tokens, true))
    }

    /// Adds or replaces a token.
    public func register(token: String, for user: UserInfo) {
        state.withLock { $0.tokens[token] = user }
    }

    /// Simulates the server being unreachable (every call throws).
    public func setReachable(_ reachable: Bool) {
        state.withLock { $0.reachable = reachable }
    }

    public func userInfo(accessToken: String) async throws -> UserInfo {
        let (user, reachable) = state.withLock { ($0.tokens[accessToken], $0.reachable) }
        guard reachable else { throw Failure(message: "the account service is unreachable") }
        guard let user else { throw Failure(message: "unknown or expired access token") }
        return user
    }
}
