import Crypto
import FleetTesting
import Foundation
import Testing
import WebhookListener

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `signfleet webhook-listener` as a process (docs/webhooks.md, "A listener for tests"): it says
/// where it listens, checks signatures with the keys of its keys file, appends receipts, and stops
/// cleanly on SIGTERM; a bad option is refused with its reason.
@Suite(.timeLimit(.minutes(2))) struct WebhookListenerProcessTests {
    @Test func theListenerChecksSignaturesWritesReceiptsAndStopsOnSIGTERM() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-listener-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys"), receipts = directory.appendingPathComponent("receipts.jsonl")
        try Data("old-secret\n\nnew-secret\n".utf8).write(to: keys)
        let listener = try ChildProcess.launch(
            try signfleetBinary(), ["webhook-listener", "--receipts", receipts.path, "--keys-file", keys.path, "--seed", "9"], name: "listener")
        let line = try await listener.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("listening http://") }
        #expect(listener.lines(.standardOutput).first == "seed 9")
        let base = String(line.dropFirst("listening ".count))

        let body = Data(#"{"event":"recipient-completed","retryCount":0,"data":{"envelopeId":"env-1"}}"#.utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data("new-secret".utf8)))
        let session = URLSession(configuration: .ephemeral)
        for signature in [Data(mac).base64EncodedString(), "AAAA"] {
            var request = URLRequest(url: try #require(URL(string: base + "/connect")))
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue(signature, forHTTPHeaderField: "X-DocuSign-Signature-1")
            let (_, response) = try await session.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
        listener.signal(SIGTERM)
        #expect(try await listener.waitForExit(timeout: .seconds(30)) == 0, "\(listener.output)")
        let read = try WebhookReceipts.read(path: receipts.path)
        #expect(read.map(\.hmac) == [.valid, .invalid], "\(read)")
        #expect(read.allSatisfy { $0.event == "recipient-completed" && $0.envelopeId == "env-1" && $0.path == "/connect" })

        let refused = try ChildProcess.launch(
            try signfleetBinary(), ["webhook-listener", "--receipts", receipts.path, "--listen", "nowhere"], name: "refused")
        #expect(try await refused.waitForExit(timeout: .seconds(30)) != 0)
        #expect(refused.output.contains("--listen must be host:port"), "\(refused.output)")
    }
}
