import Coordinator
import Crypto
import FleetProtocol
import FleetTesting
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP listener alone (no ROUTER) on a free port, with the admin routes when `token` is set.
final class AdminRig: Sendable {
    static let token = "admin-token-0123456789"
    let temporary: TemporaryStore
    let services: CoordinatorServices
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let http: String

    init(token: String? = AdminRig.token) async throws {
        var logger = Logger(label: "admin-rig")
        logger.logLevel = .critical
        temporary = try TemporaryStore()
        let services = CoordinatorServices(store: temporary.store)
        self.services = services
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let server = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: PrometheusCollectorRegistry(), instance: "admin",
            status: { throw CancellationError() }, logger: logger,
            admin: token.map { CoordinatorAdminRoutes(directory: services.accounts, token: $0) },
            onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [server], logger: logger)
        self.group = group
        running = Task { try await group.run() }
        http = try await firstElement(of: addresses, "the HTTP listener's address")
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        temporary.remove()
    }

    /// Sends `method path` over real loopback HTTP with `body` and the bearer `token`.
    func send(
        _ method: String, _ path: String, json body: Data? = nil, token: String? = AdminRig.token
    ) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: try #require(URL(string: "http://\(http)\(path)")))
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        return (try #require(response as? HTTPURLResponse).statusCode, data)
    }

    func send(_ method: String, _ path: String, _ value: some Encodable, token: String? = AdminRig.token) async throws -> (
        status: Int, body: Data
    ) {
        try await send(method, path, json: try JSONEncoder().encode(value), token: token)
    }
}

@Suite struct HTTPAdminTests {
    typealias Routes = CoordinatorAdminRoutes

    /// A template edited through the running coordinator (what a fleet's `template_edit` fault does
    /// instead of writing its store file): the tab changes and `lastModified` moves on.
    @Test func aTemplateTabEditedOverHTTPChangesTheTemplate() async throws {
        let rig = try await AdminRig()
        _ = try await rig.services.accounts.seedDemo()
        let before = try await rig.services.templates.template(accountID: "demo", id: "demo-nda")
        let reply = try await rig.send("POST", "/admin/accounts/demo/templates/demo-nda/tab", Routes.TabEdit(index: 0, label: "Edited over HTTP"))
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let after = try await rig.services.templates.template(accountID: "demo", id: "demo-nda")
        #expect(after.tabs.first?.label == "Edited over HTTP")
        #expect(after.lastModified > before.lastModified)
        let both = try await rig.send("POST", "/admin/accounts/demo/templates/demo-nda/tab", Routes.TabEdit(tabId: "x", index: 0))
        #expect(both.status == 400)
        let unknown = try await rig.send("POST", "/admin/accounts/demo/templates/nope/tab", Routes.TabEdit(index: 0, label: "x"))
        #expect(unknown.status == 404)
        try await rig.stop()
    }

    @Test func anAccountAndUserCreatedOverHTTPCanLogIn() async throws {
        let rig = try await AdminRig()
        var reply = try await rig.send(
            "POST", "/admin/accounts", Routes.AccountRequest(id: "acme", name: "Acme", hourlyLimit: 100, burstLimit: 10))
        #expect(reply.status == 201, "\(String(decoding: reply.body, as: UTF8.self))")
        let account = try JSONDecoder().decode(Account.self, from: reply.body)
        #expect(account.id == "acme" && account.name == "Acme" && account.offlineSigning)
        #expect(account.rateLimits == RateLimits(hourly: 100, burst: 10, burstWindowSeconds: 30))

        reply = try await rig.send(
            "POST", "/admin/accounts/acme/users", Routes.UserRequest(name: "Ann", email: "ann@acme.example", secret: "secret-123"))
        #expect(reply.status == 201, "\(String(decoding: reply.body, as: UTF8.self))")
        let user = try JSONDecoder().decode(User.self, from: reply.body)
        #expect(user.accountID == "acme" && user.email == "ann@acme.example")
        #expect(!String(decoding: reply.body, as: UTF8.self).contains("secret"), "the secret is never answered")

        let token = try await rig.services.auth.issueToken(email: "ann@acme.example", secret: "secret-123")
        #expect(!token.accessToken.isEmpty)

        reply = try await rig.send("GET", "/admin/accounts")
        #expect(reply.status == 200)
        let list = try JSONDecoder().decode(Routes.AccountList.self, from: reply.body)
        #expect(list.accounts.map(\.id) == ["acme"])
        #expect(list.accounts.first?.users == [user])
        try await rig.stop()
    }

    @Test func seedDemoCreatesTheDemoAccountAndIsSafeToRepeat() async throws {
        let rig = try await AdminRig()
        for _ in 0..<2 {
            let reply = try await rig.send("POST", "/admin/seed-demo")
            #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            let seeded = try JSONDecoder().decode(Routes.SeededDemo.self, from: reply.body)
            #expect(seeded.account.id == "demo")
            #expect(seeded.users.map(\.email) == ["user1@demo.example"])
        }
        _ = try await rig.services.auth.issueToken(email: "user1@demo.example", secret: DemoData.secret)
        try await rig.stop()
    }

    @Test func revokingADeviceFreesItsIDForNewKeysAndAnUnknownOneIs404() async throws {
        let rig = try await AdminRig()
        _ = try await rig.services.accounts.seedDemo()
        let token = try await rig.services.auth.issueToken(email: "user1@demo.example", secret: DemoData.secret).accessToken
        let old = Curve25519.Signing.PrivateKey()
        _ = try await rig.services.devices.enroll(
            EnrollDevice(accessToken: token, deviceID: "tablet-r", publicKey: Array(old.publicKey.rawRepresentation)), routingID: "tablet-r")
        let new = EnrollDevice(accessToken: token, deviceID: "tablet-r", publicKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation))
        await expectFleetError(.forbidden) { _ = try await rig.services.devices.enroll(new, routingID: "tablet-r") }

        #expect(try await rig.send("POST", "/admin/devices/tablet-r/revoke", token: "wrong-token-0123456789").status == 401)
        let reply = try await rig.send("POST", "/admin/devices/tablet-r/revoke")
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let revoked = try JSONDecoder().decode(Routes.RevokedDevice.self, from: reply.body)
        #expect(revoked.deviceID == "tablet-r" && revoked.revoked)
        _ = try await rig.services.devices.enroll(new, routingID: "tablet-r")
        #expect(try await rig.send("POST", "/admin/devices/nobody/revoke").status == 404)
        try await rig.stop()
    }

    @Test func aMissingOrWrongTokenIsRefusedWith401() async throws {
        let rig = try await AdminRig()
        for token in [nil, "wrong", AdminRig.token + "x"] {
            let reply = try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(name: "Nope"), token: token)
            #expect(reply.status == 401)
            let failure = try JSONDecoder().decode(Routes.Failure.self, from: reply.body)
            #expect(failure.code == "unauthenticated")
            #expect(try await rig.send("GET", "/admin/accounts", token: token).status == 401)
        }
        #expect(try await rig.services.accounts.accounts().isEmpty)
        try await rig.stop()
    }

    @Test func withoutATokenTheAdminRoutesAreOff() async throws {
        let rig = try await AdminRig(token: nil)
        #expect(try await rig.send("GET", "/admin/accounts").status == 404)
        #expect(try await rig.send("POST", "/admin/seed-demo").status == 404)
        #expect(try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(name: "Nope")).status == 404)
        #expect(try await rig.services.accounts.accounts().isEmpty)
        try await rig.stop()
    }

    @Test func refusalsMapToStatusCodesWithAJSONBody() async throws {
        let rig = try await AdminRig()
        #expect(try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(id: "acme", name: "Acme")).status == 201)
        let ann = Routes.UserRequest(name: "Ann", email: "ann@acme.example", secret: "secret-123")
        #expect(try await rig.send("POST", "/admin/accounts/acme/users", ann).status == 201)

        func expectFailure(_ reply: (status: Int, body: Data), _ status: Int, _ code: String) throws {
            #expect(reply.status == status, "\(String(decoding: reply.body, as: UTF8.self))")
            let failure = try JSONDecoder().decode(Routes.Failure.self, from: reply.body)
            #expect(failure.code == code)
            #expect(!failure.message.isEmpty)
        }
        try expectFailure(try await rig.send("POST", "/admin/accounts/acme/users", ann), 409, "already_exists")
        try expectFailure(
            try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(id: "acme", name: "Again")), 409, "already_exists")
        try expectFailure(try await rig.send("POST", "/admin/accounts/nobody/users", ann), 404, "not_found")
        try expectFailure(try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(name: " ")), 400, "invalid_request")
        try expectFailure(
            try await rig.send("POST", "/admin/accounts", Routes.AccountRequest(name: "Bad", hourlyLimit: 0)), 400, "invalid_request")
        try expectFailure(try await rig.send("POST", "/admin/accounts", json: Data("{\"nam".utf8)), 400, "invalid_request")
        let short = Routes.UserRequest(name: "Bob", email: "bob@acme.example", secret: "short")
        try expectFailure(try await rig.send("POST", "/admin/accounts/acme/users", short), 400, "invalid_request")
        #expect(try await rig.services.accounts.users(accountID: "acme").map(\.email) == ["ann@acme.example"])
        try await rig.stop()
    }

    @Test func aBodyOverTheLimitIsRefusedWith413() async throws {
        let rig = try await AdminRig()
        let huge = Routes.AccountRequest(name: String(repeating: "x", count: Routes.maxBodyBytes + 1))
        let reply = try await rig.send("POST", "/admin/accounts", huge)
        #expect(reply.status == 413)
        #expect(try await rig.services.accounts.accounts().isEmpty)
        try await rig.stop()
    }

    @Test func theAdminTokenComesFromTheFileOrTheFlagAndMustBeLongEnough() throws {
        var configuration = CoordinatorConfiguration()
        #expect(configuration.adminToken == nil)
        try configuration.apply(json: Data(#"{"admin-token": "\#(AdminRig.token)"}"#.utf8))
        #expect(configuration.adminToken == AdminRig.token)
        try configuration.validate()
        configuration.adminToken = "short"
        #expect { try configuration.validate() } throws: { ($0 as? CoordinatorConfigurationError)?.key == "admin-token" }
    }
}
