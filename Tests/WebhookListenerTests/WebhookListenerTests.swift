import FleetTesting
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import Coordinator
@testable import WebhookListener

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Connect listener for tests (docs/webhooks.md, "A listener for tests"): it accepts what the
/// coordinator signs, with either key of a rotation, refuses what it did not, writes a receipt
/// before each answer, and answers as its control API says, replayably from its seed.
@Suite(.timeLimit(.minutes(2))) struct WebhookListenerTests {
    static let body = Array(#"{"event":"envelope-completed","retryCount":2,"configurationId":"7","generatedDateTime":"2026-11-30T04:00:00.0000000Z","data":{"accountId":"acme","envelopeId":"env-9"}}"#.utf8)

    static func key(_ id: String, _ secret: String) -> ConnectKeyRecord {
        ConnectKeyRecord(id: id, accountID: "acme", secret: secret, createdAt: Date(timeIntervalSince1970: 0))
    }

    @Test func whatTheCoordinatorSignsIsValidWithEitherKeyOfARotation() {
        let headers = ConnectMessage.signatures(of: Data(Self.body), keys: [Self.key("k1", "old-secret"), Self.key("k2", "new-secret")])
        let values = ConnectSignatureCheck.signatureHeaders(headers)
        #expect(values.count == 2)
        #expect(ConnectSignatureCheck(secrets: ["new-secret"]).check(body: Self.body, signatures: values) == .valid)
        #expect(ConnectSignatureCheck(secrets: ["old-secret"]).check(body: Self.body, signatures: values) == .valid)
        #expect(ConnectSignatureCheck(secrets: ["someone-else"]).check(body: Self.body, signatures: values) == .invalid)
        #expect(ConnectSignatureCheck(secrets: []).check(body: Self.body, signatures: values) == .invalid)
        // One byte changed: no key matches any more.
        var tampered = Self.body
        tampered[tampered.count - 3] ^= 1
        #expect(ConnectSignatureCheck(secrets: ["new-secret", "old-secret"]).check(body: tampered, signatures: values) == .invalid)
        #expect(ConnectSignatureCheck(secrets: ["new-secret"]).check(body: Self.body, signatures: []) == .unsigned)
        #expect(ConnectSignatureCheck(secrets: ["new-secret"]).check(body: Self.body, signatures: ["not base64 !", String(repeating: "A", count: 10_000)]) == .invalid)
    }

    @Test func signatureHeadersAreFoundByNumberWhateverTheirCase() {
        let found = ConnectSignatureCheck.signatureHeaders([
            (name: "x-docusign-signature-2", value: "two"), (name: "Content-Type", value: "application/json"),
            (name: "X-DocuSign-Signature-1", value: "one"), (name: "X-DocuSign-Signature-0", value: "zero"),
            (name: "X-DocuSign-Signature-x", value: "bad"),
        ])
        #expect(found == ["one", "two"])
    }

    @Test func aPolicyOutOfRangeSaysWhatIsWrong() throws {
        #expect(WebhookAnswerPolicy(status: 99).problem?.contains("from 200 to 599") == true)
        #expect(WebhookAnswerPolicy(status: 500, fraction: 0).problem?.contains("more than 0") == true)
        #expect(WebhookAnswerPolicy(status: 500, fraction: .nan).problem != nil)
        #expect(WebhookAnswerPolicy(status: 503, fraction: 0.5).problem == nil)
        let decoded = try JSONDecoder().decode(WebhookAnswerPolicy.self, from: Data(#"{"status": 500}"#.utf8))
        #expect(decoded == WebhookAnswerPolicy(status: 500, fraction: 1))
    }

    @Test func aReceiptsFileCutShortMidLineKeepsItsWholeLines() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try ReceiptLog(path: path)
        let receipt = WebhookReceipt(received: 1, path: "/hook", event: "envelope-sent", hmac: .valid, bodySHA256: "ab", bytes: 2, answered: 200)
        try log.append(receipt)
        try log.append(receipt)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"answered":200,"bodySHA"#.utf8))
        handle.closeFile()
        #expect(try WebhookReceipts.read(path: path) == [receipt, receipt])
        // A listener started again on that file: its receipts are whole lines after the cut one.
        let again = try ReceiptLog(path: path)
        let later = WebhookReceipt(received: 2, path: "/hook", event: "envelope-completed", hmac: .unsigned, bodySHA256: "cd", bytes: 3, answered: 500)
        try again.append(later)
        #expect(try WebhookReceipts.read(path: path) == [receipt, receipt, later])
    }

    /// A listener on a real socket: the receipt of each POST, the answers the control API sets
    /// (the same seed, the same answers), a bad policy refused with its reason, a body too large.
    @Test func aListenerRecordsEachMessageAndAnswersAsTold() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("listener-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func answers(seed: UInt64, file: String) async throws -> (answers: [Int], receipts: [WebhookReceipt], base: String, stop: () async -> Void) {
            let (addresses, announce) = AsyncStream<String>.makeStream()
            var logger = Logger(label: "listener")
            logger.logLevel = .critical
            let service = try WebhookListenerService(
                configuration: .init(receiptsPath: directory + "/" + file, secrets: ["new-secret"], seed: seed, maxBodyBytes: 4096),
                logger: logger, onListening: { announce.yield($0) })
            let group = ServiceGroup(configuration: .init(services: [service], logger: logger))
            let running = Task { try await group.run() }
            let base = "http://" + (try await firstElement(of: addresses, "the listener's address"))
            let session = URLSession(configuration: .ephemeral)
            func send(_ path: String, _ method: String = "POST", body: [UInt8], headers: [(name: String, value: String)] = []) async throws -> (Int, Data) {
                var request = URLRequest(url: try #require(URL(string: base + path)))
                request.httpMethod = method
                request.httpBody = Data(body)
                for header in headers { request.setValue(header.value, forHTTPHeaderField: header.name) }
                let (data, response) = try await session.data(for: request)
                return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
            }
            let signed = ConnectMessage.signatures(of: Data(Self.body), keys: [Self.key("k2", "new-secret")])
            var seen: [Int] = []
            seen.append(try await send("/hook", body: Self.body, headers: signed).0)
            seen.append(try await send("/hook", body: Self.body).0)
            let refused = try await send("/control/answer", "PUT", body: Array(#"{"status": 700}"#.utf8))
            #expect(refused.0 == 400 && String(decoding: refused.1, as: UTF8.self).contains("from 200 to 599"))
            #expect(try await send("/control/answer", "PUT", body: Array(#"{"status": 503, "fraction": 0.5}"#.utf8)).0 == 200)
            for _ in 0..<20 { seen.append(try await send("/hook", body: Self.body, headers: signed).0) }
            #expect(try await send("/big", body: Array(repeating: 0x61, count: 5000)).0 == 413)
            let stats = try JSONSerialization.jsonObject(with: try await send("/control/stats", "GET", body: []).1) as? [String: Any]
            #expect(stats?["received"] as? Int == 23, "\(String(describing: stats))")
            let receipts = try WebhookReceipts.read(path: directory + "/" + file)
            return (seen, receipts, base, { running.cancel(); _ = try? await running.value })
        }
        let first = try await answers(seed: 77, file: "a.jsonl")
        await first.stop()
        #expect(first.answers.prefix(2) == [200, 200])
        let drawn = Array(first.answers.dropFirst(2))
        #expect(drawn.contains(503) && drawn.contains(200) && Set(drawn) == [200, 503], "\(drawn)")
        // Every message has its receipt, in order, with what it was answered.
        #expect(first.receipts.count == 23)
        #expect(first.receipts.prefix(22).map(\.answered) == first.answers)
        #expect(first.receipts[0].hmac == .valid && first.receipts[1].hmac == .unsigned)
        let r = first.receipts[0]
        #expect(r.event == "envelope-completed" && r.envelopeId == "env-9" && r.configurationId == "7" && r.retryCount == 2 && r.path == "/hook")
        #expect(r.bytes == Self.body.count && r.bodySHA256.count == 64)
        // Body and signatures kept: the HMAC can be checked again from the receipt alone.
        let kept = try #require(r.body.flatMap { Data(base64Encoded: $0) })
        #expect(Array(kept) == Self.body)
        #expect(ConnectSignatureCheck(secrets: ["new-secret"]).check(body: Array(kept), signatures: r.signatures) == .valid)
        #expect(first.receipts[22].answered == 413 && first.receipts[22].hmac == .unchecked && first.receipts[22].bytes == 5000)
        // The same seed draws the same answers.
        let second = try await answers(seed: 77, file: "b.jsonl")
        await second.stop()
        #expect(second.answers == first.answers)
    }
}
