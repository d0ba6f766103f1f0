import Crypto
import FleetProtocol
import Foundation
import Metrics
import Logging
import Synchronization
import Testing

@testable import Coordinator

/// A temporary store file, deleted with its WAL files at the end of a test.
struct TemporaryStore {
    let directory: URL
    let store: CoordinatorStore

    /// - Parameter storeDirectory: where the store file goes (another disk, say); `directory` otherwise.
    init(storeDirectory: URL? = nil, logger: Logger? = nil, metricsFactory: (any MetricsFactory)? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = (storeDirectory ?? directory).appendingPathComponent("store.sqlite").path
        store = try CoordinatorStore(
            path: path, logger: logger ?? Logger(label: "signfleet.coordinator.store"), metricsFactory: metricsFactory ?? MetricsSystem.factory)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// A clock a test moves by hand.
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    private let wall = Mutex(false)
    func now() -> Date { wall.withLock { $0 } ? Date() : current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    /// From now on the wall clock's time: for a test whose other party reads the wall clock
    /// (a JWT the official SDK signs with `time()`), however long that party takes.
    func followWallClock() { wall.withLock { $0 = true } }
}

func expectFleetError(_ code: FleetErrorCode, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
    do {
        try await body()
        Issue.record("expected \(code), but it succeeded", sourceLocation: sourceLocation)
    } catch let error as FleetError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected FleetError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct AccountsAndAuthTests {
    @Test func accountsAndUsersAreCreatedAndValidated() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let directory = AccountDirectory(store: temporary.store)
        let account = try await directory.createAccount(id: "acme", name: "Acme", offlineSigning: false)
        #expect(account.rateLimits == RateLimits(hourly: 3_000, burst: 500, burstWindowSeconds: 30))
        _ = try await directory.createUser(accountID: "acme", name: "Ada", email: "ada@acme.example", secret: "correct horse")
        await expectFleetError(.alreadyExists) {
            _ = try await directory.createUser(accountID: "acme", name: "Ada 2", email: "ADA@acme.example", secret: "correct horse")
        }
        await expectFleetError(.alreadyExists) { _ = try await directory.createAccount(id: "acme", name: "Acme again") }
        await expectFleetError(.notFound) {
            _ = try await directory.createUser(accountID: "nope", name: "Bob", email: "bob@x.example", secret: "correct horse")
        }
        await expectFleetError(.invalidRequest) { _ = try await directory.createAccount(name: String(repeating: "x", count: 101)) }
        await expectFleetError(.invalidRequest) {
            _ = try await directory.createUser(accountID: "acme", name: "Eve", email: "eve@acme.example", secret: "short")
        }
        #expect(try await directory.users(accountID: "acme").map(\.email) == ["ada@acme.example"])
    }

    @Test func demoSeedIsIdempotent() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let directory = AccountDirectory(store: temporary.store)
        _ = try await directory.seedDemo(userCount: 2)
        let (account, users) = try await directory.seedDemo(userCount: 3)
        #expect(account.offlineSigning)
        #expect(users.map(\.email) == ["user1@demo.example", "user2@demo.example", "user3@demo.example"])
    }

    @Test func tokensAreIssuedCheckedExpiredAndStoredOnlyAsHashes() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let clock = TestClock()
        let services = CoordinatorServices(store: temporary.store, host: "http://h", tokenLifetime: .seconds(60), now: clock.now)
        _ = try await services.accounts.seedDemo()

        await expectFleetError(.unauthenticated) { _ = try await services.auth.issueToken(email: "user1@demo.example", secret: "wrong-secret") }
        await expectFleetError(.unauthenticated) { _ = try await services.auth.issueToken(email: "nobody@demo.example", secret: DemoData.secret) }

        let token = try await services.auth.issueToken(email: "user1@demo.example", secret: DemoData.secret)
        #expect(token.expiresAt == clock.now().addingTimeInterval(60))
        let info = try await services.auth.userInfo(token: token.accessToken)
        #expect(info.accountID == "demo")
        #expect(info.email == "user1@demo.example")
        #expect(info.host == "http://h")
        #expect(info.offlineSigningEnabled)

        // The store never holds the token itself.
        let file = try Data(contentsOf: URL(fileURLWithPath: temporary.store.path))
        let wal = (try? Data(contentsOf: URL(fileURLWithPath: temporary.store.path + "-wal"))) ?? Data()
        #expect(file.range(of: Data(token.accessToken.utf8)) == nil && wal.range(of: Data(token.accessToken.utf8)) == nil)

        clock.advance(59)
        _ = try await services.auth.userInfo(token: token.accessToken)
        clock.advance(2)
        await expectFleetError(.tokenExpired) { _ = try await services.auth.userInfo(token: token.accessToken) }
        await expectFleetError(.unauthenticated) { _ = try await services.auth.userInfo(token: "made-up") }
    }

    @Test func storeSurvivesReopening() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        _ = try await AccountDirectory(store: temporary.store).seedDemo()
        let reopened = try CoordinatorStore(path: temporary.store.path)
        #expect(try await AccountDirectory(store: reopened).account(id: "demo") != nil)
    }
}

@Suite struct EnrollmentTests {
    func setUp() async throws -> (TemporaryStore, CoordinatorServices, String) {
        let temporary = try TemporaryStore()
        let services = CoordinatorServices(store: temporary.store)
        _ = try await services.accounts.seedDemo()
        let token = try await services.auth.issueToken(email: "user1@demo.example", secret: DemoData.secret).accessToken
        return (temporary, services, token)
    }

    @Test func enrollmentBindsAKeyAndIsSafeToRetry() async throws {
        let (temporary, services, token) = try await setUp()
        defer { temporary.remove() }
        let key = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        let request = EnrollDevice(accessToken: token, deviceID: "dev-1", publicKey: key)
        let first = try await services.devices.enroll(request, routingID: "dev-1")
        #expect(first.accountID == "demo")
        #expect(first.lastAppliedSequence == 0)
        let again = try await services.devices.enroll(request, routingID: "dev-1")
        #expect(again == first, "a retried enrollment gets the same answer")

        let device = try await services.devices.authenticate(deviceID: "dev-1", routingID: "dev-1")
        #expect(device.publicKey == key)
        await expectFleetError(.forbidden) { _ = try await services.devices.authenticate(deviceID: "dev-1", routingID: "dev-2") }
        await expectFleetError(.unauthenticated) { _ = try await services.devices.authenticate(deviceID: "dev-9", routingID: "dev-9") }
    }

    @Test func enrollmentRefusesAnotherKeyAForeignRoutingIDAndBadKeys() async throws {
        let (temporary, services, token) = try await setUp()
        defer { temporary.remove() }
        let key = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "dev-1", publicKey: key), routingID: "dev-1")
        let otherKey = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        await expectFleetError(.forbidden) {
            _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "dev-1", publicKey: otherKey), routingID: "dev-1")
        }
        await expectFleetError(.invalidRequest) {
            _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "dev-2", publicKey: key), routingID: "dev-3")
        }
        await expectFleetError(.invalidRequest) {
            _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "dev-2", publicKey: [1, 2, 3]), routingID: "dev-2")
        }
        await expectFleetError(.unauthenticated) {
            _ = try await services.devices.enroll(EnrollDevice(accessToken: "nope", deviceID: "dev-2", publicKey: key), routingID: "dev-2")
        }
    }
}
