import Crypto
import FleetProtocol
import Foundation

/// Rate limits of an account, enforced by ``RateLimiter`` on every request that
/// authenticates to the account: at most `burst` requests per `burstWindowSeconds`
/// and `hourly` per hour.
public struct RateLimits: Sendable, Hashable, Codable {
    public var hourly: Int
    public var burst: Int
    public var burstWindowSeconds: Int

    public init(hourly: Int = 3_000, burst: Int = 500, burstWindowSeconds: Int = 30) {
        self.hourly = hourly
        self.burst = burst
        self.burstWindowSeconds = burstWindowSeconds
    }
}

/// An account as an administrator sees it.
public struct Account: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    public var offlineSigning: Bool
    public var rateLimits: RateLimits
}

/// A user as an administrator sees it (never with its secret).
public struct User: Sendable, Hashable, Codable {
    public var id: String
    public var accountID: String
    public var name: String
    public var email: String
}

extension FleetErrorCode {
    /// The object to create exists already (an account id, a user's email).
    public static let alreadyExists = FleetErrorCode("already_exists")
}

/// Creates accounts and users: the admin path behind `signfleet admin` and the
/// HTTP admin endpoints (``CoordinatorAdminRoutes``).
public struct AccountDirectory: Sendable {
    package let storage: any CoordinatorStorage
    let now: @Sendable () -> Date

    public init(store: CoordinatorStore, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.init(storage: store, now: now)
    }

    package init(storage: any CoordinatorStorage, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.storage = storage
        self.now = now
    }

    /// Creates an account.
    /// - Throws: `FleetError` `invalid_request` for an empty or over-long name or bad limits,
    ///   `already_exists` when an account with `id` exists.
    public func createAccount(
        id: String = UUID().uuidString, name: String, offlineSigning: Bool = true, rateLimits: RateLimits = RateLimits()
    ) async throws -> Account {
        try Self.check(name, "account name")
        guard rateLimits.hourly > 0, rateLimits.burst > 0, rateLimits.burstWindowSeconds > 0 else {
            throw FleetError(.invalidRequest, "rate limits must be positive")
        }
        let record = AccountRecord(
            id: id, name: name, offlineSigning: offlineSigning, hourlyLimit: rateLimits.hourly,
            burstLimit: rateLimits.burst, burstWindowSeconds: rateLimits.burstWindowSeconds, createdAt: now())
        try await storage.insertAccount(record)
        return Account(id: id, name: name, offlineSigning: offlineSigning, rateLimits: rateLimits)
    }

    /// Creates a user of an account who logs in with `email` and `secret`.
    /// - Throws: `FleetError` `not_found` for an unknown account, `already_exists` for a
    ///   duplicate email, `invalid_request` for bad fields.
    public func createUser(
        id: String = UUID().uuidString, accountID: String, name: String, email: String, secret: String
    ) async throws -> User {
        try Self.check(name, "user name")
        try Self.check(email, "email")
        guard email.contains("@") else { throw FleetError(.invalidRequest, "email \"\(email)\" has no @") }
        guard secret.utf8.count >= 8 else { throw FleetError(.invalidRequest, "a secret needs at least 8 bytes") }
        let salt = Data((0..<16).map { _ in UInt8.random(in: .min ... .max) })
        let record = UserRecord(
            id: id, accountID: accountID, name: name, email: email, secretSalt: salt,
            secretHash: SecretHash.hash(secret, salt: salt), createdAt: now())
        try await storage.insertUser(record)
        return User(id: id, accountID: accountID, name: name, email: email)
    }

    /// The account `id`, or `nil`.
    public func account(id: String) async throws -> Account? {
        try await storage.account(id: id).map(Self.account)
    }

    /// All accounts, by name.
    public func accounts() async throws -> [Account] {
        try await storage.accounts().map(Self.account)
    }

    /// The users of an account, by email.
    public func users(accountID: String) async throws -> [User] {
        try await storage.users(accountID: accountID).map { User(id: $0.id, accountID: $0.accountID, name: $0.name, email: $0.email) }
    }

    /// Seeds a demo account with offline signing and one user per device
    /// group name, all with the secret `demo-secret`; safe to call again (an
    /// existing demo account keeps its limits).
    @discardableResult
    public func seedDemo(
        accountName: String = "Demo Co", userCount: Int = 1, rateLimits: RateLimits = DemoData.rateLimits
    ) async throws -> (Account, [User]) {
        let accountID = "demo"
        // Coordinators sharing a store may seed at once: whatever another one created first is kept.
        do {
            _ = try await createAccount(id: accountID, name: accountName, rateLimits: rateLimits)
        } catch let error as FleetError where error.code == .alreadyExists {}
        guard let account = try await self.account(id: accountID) else { throw StoreRefusal.noAccount(accountID) }
        for index in try await self.users(accountID: accountID).count..<userCount {
            do {
                _ = try await createUser(
                    id: "demo-user-\(index + 1)", accountID: accountID, name: "Demo User \(index + 1)",
                    email: "user\(index + 1)@demo.example", secret: DemoData.secret)
            } catch let error as FleetError where error.code == .alreadyExists {}
        }
        let users = try await self.users(accountID: accountID)
        try await TemplateCatalog(storage: storage, auth: AuthService(storage: storage, now: now), now: now).seedDemo(accountID: accountID)
        return (account, users)
    }

    static func account(_ record: AccountRecord) -> Account {
        Account(
            id: record.id, name: record.name, offlineSigning: record.offlineSigning,
            rateLimits: RateLimits(hourly: record.hourlyLimit, burst: record.burstLimit, burstWindowSeconds: record.burstWindowSeconds))
    }

    static func check(_ value: String, _ field: String) throws {
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty, value.count <= 100 else {
            throw FleetError(.invalidRequest, "\(field) must be 1 to 100 characters")
        }
    }
}

/// The well-known credentials of seeded demo users.
public enum DemoData {
    public static let secret = "demo-secret"
    /// Limits of the seeded demo account: far above what a demo fleet sends (its
    /// devices all share the one account), so a demo is never throttled.
    public static let rateLimits = RateLimits(hourly: 10_000_000, burst: 1_000_000, burstWindowSeconds: 30)
}

/// Salted SHA-256 of a user's secret. A simulator's credential store; a real
/// server would use a slow password hash.
enum SecretHash {
    static func hash(_ secret: String, salt: Data) -> Data {
        var hasher = SHA256()
        hasher.update(data: salt)
        hasher.update(data: Data(secret.utf8))
        return Data(hasher.finalize())
    }

    /// Compares in time independent of where the bytes differ.
    static func matches(_ secret: String, salt: Data, hash: Data) -> Bool {
        let candidate = Self.hash(secret, salt: salt)
        guard candidate.count == hash.count else { return false }
        return zip(candidate, hash).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
