import Foundation
import FleetTesting
import Testing

@Suite struct AdminTemplatesCLITests {
    func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> (Int32, ChildProcess) {
        let child = try ChildProcess.launch(
            try signfleetBinary(), arguments,
            environment: environment.map { ProcessInfo.processInfo.environment.merging($0) { _, given in given } })
        return (try await child.waitForExit(timeout: .seconds(30)), child)
    }

    /// Without `--store`, the store comes from `SIGNFLEET_STORE` (how the fleet launcher keeps a
    /// PostgreSQL password off command lines), and no message repeats a URL's password.
    @Test func theStoreCanComeFromTheEnvironmentAndMessagesHideItsPassword() async throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("admin-env-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) } }
        var (status, child) = try await run(["admin", "seed-demo"], environment: ["SIGNFLEET_STORE": store])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(
            ["admin", "templates", "create-sample", "--name", "Lease", "--id", "lease"], environment: ["SIGNFLEET_STORE": store])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(["admin", "templates", "list", "--store", store])
        #expect(child.lines(.standardOutput).contains { $0.hasPrefix("template lease \"Lease\"") }, "\(child.output)")
        // `--store` wins over the environment.
        (status, child) = try await run(["admin", "templates", "list", "--store", store], environment: ["SIGNFLEET_STORE": store + ".other"])
        #expect(child.lines(.standardOutput).contains { $0.hasPrefix("template lease \"Lease\"") }, "--store wins: \(child.output)")

        // A PostgreSQL store named with a password: whatever the command says (no such device, or
        // the server refusing the password), it does not repeat the password.
        var url = try #require(URLComponents(string: try await PostgresTestServer.url()))
        url.password = "s3cret-pw"
        url.queryItems = [URLQueryItem(name: "schema", value: "admin_env_\(UInt32.random(in: 1...UInt32.max))")]
        (status, child) = try await run(["admin", "devices", "revoke", "--id", "d-1"], environment: ["SIGNFLEET_STORE": try #require(url.string)])
        #expect(status != 0)
        #expect(child.output.contains("postgres://") || child.output.contains("PostgreSQL"), "\(child.output)")
        #expect(!child.output.contains("s3cret-pw"), "\(child.output)")

        // Nothing listens on port 1: an error at once (not after the pool's minute of retries),
        // naming the store without its password.
        let started = ContinuousClock.now
        (status, child) = try await run(
            ["admin", "devices", "revoke", "--id", "d-1"], environment: ["SIGNFLEET_STORE": "postgres://fleet:s3cret-pw@127.0.0.1:1/fleet"])
        #expect(status != 0)
        #expect(started.duration(to: .now) < .seconds(20), "an unreachable server is reported within its 5 s connect timeout")
        #expect(child.output.contains("cannot open the PostgreSQL store"), "\(child.output)")
        #expect(!child.output.contains("s3cret-pw"), "\(child.output)")
    }

    /// `signfleet admin token`: a REST client's bearer token, from the store the coordinator serves.
    @Test func aTokenIssuedByTheAdminCommandNamesItsAccountAndAWrongSecretIsRefused() async throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("admin-token-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) } }
        var (status, child) = try await run(["admin", "seed-demo", "--store", store])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(["admin", "token", "--store", store, "--email", "user1@demo.example", "--secret", "demo-secret", "--lifetime", "600"])
        #expect(status == 0, "\(child.output)")
        let lines = child.lines(.standardOutput)
        let token = try #require(lines.first { $0.hasPrefix("access-token ") }?.dropFirst("access-token ".count))
        #expect(token.count == 43, "32 random bytes, base64url: \(token)")
        #expect(lines.contains("account demo"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("expires-at 20") }, "\(lines)")
        (status, child) = try await run(["admin", "token", "--store", store, "--email", "user1@demo.example", "--secret", "wrong"])
        #expect(status != 0 && child.output.contains("wrong email or secret"), "\(child.output)")
        (status, child) = try await run(["admin", "token", "--store", store, "--email", "user1@demo.example", "--secret", "demo-secret", "--lifetime", "0"])
        #expect(status != 0 && child.output.contains("--lifetime"), "\(child.output)")
    }

    @Test func createListReplaceAndSetTabThroughTheAdminCommand() async throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("admin-templates-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) } }
        var (status, child) = try await run(["admin", "seed-demo", "--store", store])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(["admin", "templates", "create-sample", "--store", store, "--name", "Lease", "--folder", "Housing", "--id", "lease", "--pages", "3"])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(["admin", "templates", "list", "--store", store])
        #expect(status == 0)
        let listed = child.lines(.standardOutput)
        #expect(listed.contains { $0.hasPrefix("template lease \"Lease\" folder=Housing") }, "\(listed)")
        #expect(listed.contains { $0.hasPrefix("template demo-nda \"Mutual NDA\" folder=Legal") }, "seed-demo adds demo templates: \(listed)")
        #expect(listed.last == "3 of 3 templates")

        // Fewer pages than the tabs use: refused unless a rule is given.
        (status, child) = try await run(["admin", "templates", "replace-document", "--store", store, "--id", "lease", "--sample-pages", "1"])
        #expect(status != 0)
        #expect(child.output.contains("move-to-last-page"), "\(child.output)")
        (status, child) = try await run(["admin", "templates", "replace-document", "--store", store, "--id", "lease", "--sample-pages", "1", "--tabs", "remove"])
        #expect(status == 0, "\(child.output)")
        #expect(child.output.contains("removed tabs [1, 2]"), "\(child.output)")
        (status, child) = try await run(["admin", "templates", "set-tab", "--store", store, "--id", "lease", "--tab-id", "company", "--value", "Acme"])
        #expect(status == 0, "\(child.output)")
        (status, child) = try await run(["admin", "templates", "set-tab", "--store", store, "--id", "lease", "--tab-id", "nope", "--value", "x"])
        #expect(status != 0)
        #expect(child.output.contains("not_found"), "\(child.output)")
        (status, child) = try await run(["admin", "templates", "list", "--store", store, "--search", "lea", "--match", "prefix"])
        #expect(child.lines(.standardOutput).count == 2, "\(child.output)")
    }
}
