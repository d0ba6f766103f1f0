import FleetTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `signfleet coordinator` serves the captive-signing routes on its HTTP listener.
@Suite struct CaptiveSigningProcessTests {
    @Test func theCoordinatorServesSigningPagesAndTheIntegratorEndpoint() async throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("captive-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: store) }
        let token = "process-admin-token-0123"
        let coordinator = try ChildProcess.launch(
            try signfleetBinary(),
            ["coordinator", "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--store", store, "--admin-token", token],
            name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let line = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("http ") }
        let http = String(line.dropFirst("http ".count))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }

        let page = try await session.data(from: try #require(URL(string: "http://\(http)/signing/\(String(repeating: "A", count: 43))")))
        #expect((page.1 as? HTTPURLResponse)?.statusCode == 404)
        #expect(String(decoding: page.0, as: UTF8.self).contains("This signing link is not valid."))

        var request = URLRequest(url: try #require(URL(string: "http://\(http)/admin/signing-urls")))
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"envelopeID":"env-missing","recipientID":"r1"}"#.utf8)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let created = try await session.data(for: request)
        #expect((created.1 as? HTTPURLResponse)?.statusCode == 404, "\(String(decoding: created.0, as: UTF8.self))")
        #expect(String(decoding: created.0, as: UTF8.self).contains("not_found"))
        coordinator.signal(SIGTERM)
        #expect(try await coordinator.waitForExit(timeout: .seconds(30)) == 0, "\(coordinator.output)")
    }
}
