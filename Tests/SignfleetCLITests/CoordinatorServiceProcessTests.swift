import FleetTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `signfleet coordinator` as a service group: both listeners announced, HTTP served,
/// graceful exit on SIGTERM / SIGINT, and settings from a `--config` file.
@Suite struct CoordinatorServiceProcessTests {
    struct Status: Decodable {
        var storePath: String
        var devicesEnrolled: Int
        var devicesAlive: Int
        var envelopes: Int
        var version: String
    }

    func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
    }

    /// Waits for `listening <endpoint>` then `http <host:port>` on standard output.
    func addresses(of coordinator: ChildProcess) async throws -> (zmq: String, http: String) {
        let listening = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
        let http = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("http ") }
        let lines = coordinator.lines(.standardOutput)
        #expect(
            lines.firstIndex(of: listening) ?? .max < lines.firstIndex(of: http) ?? .min, "`listening` comes first: \(lines)")
        return (String(listening.dropFirst("listening ".count)), String(http.dropFirst("http ".count)))
    }

    func get(_ address: String, _ path: String) async throws -> (Int, Data) {
        let url = try #require(URL(string: "http://\(address)\(path)"))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: url)
        return (try #require(response as? HTTPURLResponse).statusCode, data)
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func servesHTTPOnAFreePortAndExitsZeroOnASignal(signal: Int32) async throws {
        let store = temporaryPath("coordinator-service") + ".sqlite"
        let coordinator = try ChildProcess.launch(
            try signfleetBinary(), ["coordinator", "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--store", store],
            name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let (endpoint, http) = try await addresses(of: coordinator)
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:") && !endpoint.hasSuffix(":*"))
        #expect(http.hasPrefix("127.0.0.1:") && !http.hasSuffix(":0"), "\(http)")

        let (healthCode, health) = try await get(http, "/health")
        #expect(healthCode == 200)
        #expect(String(decoding: health, as: UTF8.self).contains("\"status\":\"ok\""))
        let (statusCode, statusBody) = try await get(http, "/status")
        #expect(statusCode == 200)
        let status = try JSONDecoder().decode(Status.self, from: statusBody)
        #expect(status.storePath == store && status.devicesEnrolled == 0 && status.envelopes == 0)
        let (metricsCode, metrics) = try await get(http, "/metrics")
        #expect(metricsCode == 200)
        let text = String(decoding: metrics, as: UTF8.self)
        // (signfleet_requests_total appears with the first request; HTTPTests covers it.)
        for name in ["signfleet_connected_devices", "signfleet_sync_items_total", "signfleet_sync_ingest_duration_seconds"] {
            #expect(text.contains("# TYPE \(name) "), "no \(name) in\n\(text)")
        }

        coordinator.signal(signal)
        #expect(try await coordinator.waitForExit(timeout: .seconds(30)) == 0, "\(coordinator.output)")
        #expect(coordinator.count { $0.contains("coordinator stopped") } == 1, "\(coordinator.output)")
    }

    @Test func theAdminTokenFlagTurnsOnTheAdminEndpoints() async throws {
        let store = temporaryPath("coordinator-admin") + ".sqlite"
        let token = "process-admin-token-0123"
        let coordinator = try ChildProcess.launch(
            try signfleetBinary(),
            ["coordinator", "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--store", store, "--admin-token", token],
            name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let (_, http) = try await addresses(of: coordinator)
        func seed(_ bearer: String?) async throws -> (Int, Data) {
            var request = URLRequest(url: try #require(URL(string: "http://\(http)/admin/seed-demo")))
            request.httpMethod = "POST"
            if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let (data, response) = try await session.data(for: request)
            return (try #require(response as? HTTPURLResponse).statusCode, data)
        }
        #expect(try await seed(nil).0 == 401)
        let (code, body) = try await seed(token)
        #expect(code == 200, "\(String(decoding: body, as: UTF8.self))")
        #expect(String(decoding: body, as: UTF8.self).contains("user1@demo.example"))
        coordinator.signal(SIGTERM)
        #expect(try await coordinator.waitForExit(timeout: .seconds(30)) == 0, "\(coordinator.output)")
    }

    @Test func aConfigFileSuppliesSettingsAndFlagsOverrideIt() async throws {
        let fileStore = temporaryPath("from-file") + ".sqlite"
        let flagStore = temporaryPath("from-flag") + ".sqlite"
        let config = temporaryPath("coordinator-config") + ".json"
        try Data(
            """
            {"bind": "tcp://127.0.0.1:*", "http": "127.0.0.1:0", "store": "\(fileStore)", "seed-demo": true, "log-level": "debug"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        defer { try? FileManager.default.removeItem(atPath: config) }

        // The file alone: its store and its seed-demo are used.
        let first = try ChildProcess.launch(try signfleetBinary(), ["coordinator", "--config", config], name: "coordinator")
        defer { Task { await first.terminate() } }
        let (_, http) = try await addresses(of: first)
        let (_, body) = try await get(http, "/status")
        #expect(try JSONDecoder().decode(Status.self, from: body).storePath == fileStore)
        #expect(first.count { $0.contains("demo data ready") } == 1, "\(first.output)")
        first.signal(SIGTERM)
        #expect(try await first.waitForExit(timeout: .seconds(30)) == 0, "\(first.output)")

        // A flag wins over the file.
        let second = try ChildProcess.launch(
            try signfleetBinary(), ["coordinator", "--config", config, "--store", flagStore, "--no-seed-demo"], name: "coordinator")
        defer { Task { await second.terminate() } }
        let (_, secondHTTP) = try await addresses(of: second)
        let (_, secondBody) = try await get(secondHTTP, "/status")
        #expect(try JSONDecoder().decode(Status.self, from: secondBody).storePath == flagStore)
        #expect(second.count { $0.contains("demo data ready") } == 0, "\(second.output)")
        second.signal(SIGTERM)
        #expect(try await second.waitForExit(timeout: .seconds(30)) == 0, "\(second.output)")
    }

    @Test(arguments: [
        (#"{"bind": "tcp://127.0.0.1:*", "hearbeat-ms": 100}"#, "hearbeat-ms"),
        (#"{"liveness": "many"}"#, "liveness"),
        (#"{"heartbeat-ms": 2}"#, "heartbeat-ms"),
        (#"{"http": "nowhere"}"#, "http"),
        (#"{"log-level": "loud"}"#, "log-level"),
    ])
    func aBadConfigFileIsRefusedNamingTheKey(json: String, key: String) async throws {
        let config = temporaryPath("bad-config") + ".json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: config))
        defer { try? FileManager.default.removeItem(atPath: config) }
        let child = try ChildProcess.launch(try signfleetBinary(), ["coordinator", "--config", config])
        #expect(try await child.waitForExit(timeout: .seconds(30)) != 0)
        #expect(child.output.contains("\"\(key)\""), "\(child.output)")
        #expect(child.lines(.standardOutput).allSatisfy { !$0.hasPrefix("listening ") }, "refused before binding: \(child.output)")
    }

    @Test func aMissingConfigFileIsNamed() async throws {
        let missing = temporaryPath("no-such-config") + ".json"
        let child = try ChildProcess.launch(try signfleetBinary(), ["coordinator", "--config", missing])
        #expect(try await child.waitForExit(timeout: .seconds(30)) != 0)
        #expect(child.output.contains(missing), "\(child.output)")
    }
}
