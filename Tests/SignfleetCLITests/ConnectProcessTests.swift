import Envelopes
import FleetTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Connect across `kill -9` (docs/webhooks.md, "Delivery"): an event committed while its listener
/// fails is delivered by the restarted coordinator, signed with a key made by `signfleet admin
/// connect-keys`; the keys' CLI lists and revokes.
@Suite(.timeLimit(.minutes(3))) struct ConnectProcessTests {
    static let listener = DeployManifestTests.repository.appendingPathComponent("Tests/interop/connect_listener.py")

    @Test func anEventCommittedBeforeKill9IsDeliveredAfterTheRestart() async throws {
        let place = try AdminStoreDirectory("connect")
        defer { place.remove() }
        let (binary, directory, store, admin) = (place.binary, place.directory, place.store, place.admin)
        #expect(try await admin(["create-account", "--id", "acme", "--name", "Acme"]).status == 0)
        #expect(try await admin(["create-user", "--account", "acme", "--name", "Ann", "--email", "ann@acme.example", "--secret", "secret-123"]).status == 0)
        let added = try await admin(["connect-keys", "add", "--account", "acme"])
        let fields = added.out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map(String.init)
        try #require(added.status == 0 && fields.count == 3 && fields[0] == "connect-key", "\(added)")
        let (keyID, secret) = (fields[1], fields[2])
        let old = try await admin(["connect-keys", "add", "--account", "acme"])
        let oldID = try #require(old.out.split(separator: " ").dropFirst().first.map(String.init))
        #expect(try await admin(["connect-keys", "revoke", oldID, "--account", "acme"]).status == 0)
        let listed = try await admin(["connect-keys", "list", "--account", "acme"])
        #expect(listed.out.contains("\(keyID) ") && listed.out.contains("in-force") && listed.out.contains("revoked-") && !listed.out.contains(secret), "\(listed)")
        let again = try await admin(["connect-keys", "revoke", oldID, "--account", "acme"])
        #expect(again.status != 0 && again.err.contains("no active Connect key"), "\(again)")
        let token = try #require(
            try await admin(["token", "--email", "ann@acme.example", "--secret", "secret-123"]).out.split(separator: "\n")
                .first { $0.hasPrefix("access-token ") }.map { String($0.dropFirst("access-token ".count)) })

        func coordinator() async throws -> (ChildProcess, String) {
            let process = try ChildProcess.launch(
                binary, ["coordinator", "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--store", store, "--connect-timeout", "2"],
                name: "coordinator")
            let line = try await process.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("http ") }
            return (process, String(line.dropFirst("http ".count)))
        }
        let (first, http) = try await coordinator()
        // The listener fails every message while this file exists.
        let failing = directory.appendingPathComponent("failing")
        FileManager.default.createFile(atPath: failing.path, contents: Data())
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let listener = try ChildProcess.launch(
            "/usr/bin/env",
            [
                python, Self.listener.path, "--host", "http://\(http)/restapi", "--token=\(token)", "--account", "acme", "--secret=\(secret)",
                "--fail-first", "0", "--fail-while", failing.path,
            ], name: "listener")
        defer { Task { await listener.terminate() } }
        try await listener.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("configured ") }

        let pdf = SamplePDF.make(pages: 1).base64EncodedString()
        var request = URLRequest(url: try #require(URL(string: "http://\(http)/restapi/v2.1/accounts/acme/envelopes")))
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(
            #"{"emailSubject": "kill", "status": "sent", "documents": [{"documentId": "1", "name": "x", "documentBase64": "\#(pdf)"}], "recipients": {"signers": [{"recipientId": "1", "name": "A", "email": "a@example.com", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "1", "xPosition": "10", "yPosition": "10"}]}}]}}"#.utf8)
        let (body, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 201, "\(String(decoding: body, as: UTF8.self))")
        let envelopeID = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["envelopeId"] as? String)

        // The first attempt is refused (500): the event is committed, not delivered. Then kill -9.
        try await listener.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.contains(envelopeID) && $0.contains("\"status\": 500") }
        first.signal(SIGKILL)
        _ = try await first.waitForExit(timeout: .seconds(30))
        try FileManager.default.removeItem(at: failing)
        let (second, _) = try await coordinator()
        defer { Task { await second.terminate() } }

        // The restarted coordinator delivers both events, in order, signed with the key in force.
        try await listener.waitForLines(2, in: .standardOutput, timeout: .seconds(120)) { $0.contains(envelopeID) && $0.contains("\"status\": 200") }
        let delivered = listener.lines(.standardOutput).filter { $0.contains(envelopeID) && $0.contains("\"status\": 200") }
        #expect(delivered.count == 2 && delivered[0].contains("\"event\": \"envelope-sent\"") && delivered[1].contains("\"event\": \"recipient-sent\""), "\(listener.output)")
        #expect(listener.lines(.standardOutput).filter { $0.hasPrefix("{") }.allSatisfy { $0.contains("\"hmac\": \"valid\"") }, "\(listener.output)")
        // At least once: the refused attempt and the delivery (its retryCount is 0 when the kill came
        // before the refusal was recorded, and the restarted coordinator took the claim over).
        #expect(listener.lines(.standardOutput).filter { $0.contains(envelopeID) && $0.contains("\"event\": \"envelope-sent\"") }.count >= 2)
        second.signal(SIGTERM)
        #expect(try await second.waitForExit(timeout: .seconds(30)) == 0, "\(second.output)")
    }
}
