import Crypto
import FleetProtocol
import Foundation

/// Issues expiring access tokens and answers who a token belongs to.
///
/// A token is 32 random bytes, base64url-encoded; the store keeps only its
/// SHA-256, so a leaked store leaks no usable token.
public struct AuthService: Sendable {
    let store: any CoordinatorStorage
    public var tokenLifetime: Duration
    /// The base URL reported as `host` when no HTTP listener has published its address.
    public var host: String?
    /// The HTTP listener's real address, once bound (port 0 picks a free one).
    let links: CaptiveSigningLinks?
    let now: @Sendable () -> Date

    public init(
        store: CoordinatorStore, tokenLifetime: Duration = .seconds(3600), host: String? = nil, links: CaptiveSigningLinks? = nil,
        now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.init(storage: store, tokenLifetime: tokenLifetime, host: host, links: links, now: now)
    }

    package init(
        storage store: any CoordinatorStorage, tokenLifetime: Duration = .seconds(3600), host: String? = nil,
        links: CaptiveSigningLinks? = nil, now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.store = store
        self.tokenLifetime = tokenLifetime
        self.host = host
        self.links = links
        self.now = now
    }

    /// What `auth.userinfo` reports as `host`: the listener's real base URL; else the configured
    /// one; else empty (no HTTP listener).
    public var advertisedHost: String { links?.baseURL ?? host ?? "" }

    /// Exchanges a user's credentials for a token.
    /// - Throws: `FleetError` `unauthenticated` when the email or secret is wrong (the
    ///   message does not say which, so emails cannot be probed).
    public func issueToken(email: String, secret: String) async throws -> AccessTokenReply {
        let token = Self.makeToken()
        let issuedAt = now()
        let expiresAt = issuedAt.addingTimeInterval(Double(tokenLifetime.components.seconds))
        try await store.issueToken(email: email) { user in
            guard let user, SecretHash.matches(secret, salt: user.secretSalt, hash: user.secretHash) else {
                throw FleetError(.unauthenticated, "wrong email or secret")
            }
            return AccessTokenRecord(tokenHash: Self.hash(token), userID: user.id, issuedAt: issuedAt, expiresAt: expiresAt)
        }
        return AccessTokenReply(accessToken: token, expiresAt: expiresAt)
    }

    /// Issues a token for a user without their secret: for a grant that proved itself otherwise
    /// (the OAuth JWT grant), living `lifetime` or the configured lifetime, whichever is shorter.
    func issueToken(for user: UserRecord, lifetime: TimeInterval) async throws -> AccessTokenReply {
        let token = Self.makeToken()
        let issuedAt = now()
        let expiresAt = issuedAt.addingTimeInterval(min(lifetime, Double(tokenLifetime.components.seconds)))
        try await store.issueToken(email: user.email) { found in
            guard let found, found.id == user.id else { throw FleetError(.unauthenticated, "the user is gone") }
            return AccessTokenRecord(tokenHash: Self.hash(token), userID: found.id, issuedAt: issuedAt, expiresAt: expiresAt)
        }
        return AccessTokenReply(accessToken: token, expiresAt: expiresAt)
    }

    /// The user, and their account, that a token belongs to.
    /// - Throws: `FleetError` `unauthenticated` for an unknown token, `token_expired` for an expired one.
    public func authenticate(_ token: String) async throws -> (User, Account) {
        let now = now()
        guard let owner = try await store.tokenOwner(tokenHash: Self.hash(token)) else {
            throw FleetError(.unauthenticated, "unknown access token; request a new one with auth.token")
        }
        guard owner.token.expiresAt > now else {
            throw FleetError(.tokenExpired, "the access token expired at \(owner.token.expiresAt); request a new one")
        }
        guard let user = owner.user, let account = owner.account else {
            throw FleetError(.unauthenticated, "the token's user no longer exists")
        }
        return (User(id: user.id, accountID: user.accountID, name: user.name, email: user.email), AccountDirectory.account(account))
    }

    /// What a device's login needs.
    public func userInfo(token: String) async throws -> UserInfoReply {
        try await userInfo(token: token, meter: { _ in })
    }

    /// `userInfo(token:)`, with `meter` called once the account is known (rate limits).
    func userInfo(token: String, meter: (Account) throws -> Void) async throws -> UserInfoReply {
        let (user, account) = try await authenticate(token)
        try meter(account)
        return UserInfoReply(
            accountID: account.id, accountName: account.name, userID: user.id, userName: user.name, email: user.email,
            host: advertisedHost, offlineSigningEnabled: account.offlineSigning)
    }

    static func makeToken() -> String {
        var generator = SystemRandomNumberGenerator()  // a secret, not a simulation choice: never seeded
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func hash(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }
}
