import DeviceNode
import FleetTesting
import Foundation
import SignatureCapture
import Testing

@testable import Coordinator

/// What `browser/captive_signing.py` reports for one scenario.
private struct BrowserResult: Decodable {
    var name: String
    var final_url: String?
    var event: String?
    var texts: [String: String]?
    var alert: Bool?
    var reopened_event: String?
    var error: String?
    var current_url: String?
}

/// A real browser (headless Chromium through Selenium, installed by scripts/install-deps.sh)
/// on the real signing pages of an in-process coordinator. Set SIGNFLEET_SKIP_BROWSER=1 to
/// leave it out on a machine without a browser; otherwise a missing browser fails the test.
@Suite(.serialized, .timeLimit(.minutes(6))) struct CaptiveBrowserTests {
    static let skip = ProcessInfo.processInfo.environment["SIGNFLEET_SKIP_BROWSER"] == "1"

    private static var script: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("browser/captive_signing.py")
    }

    @Test(.disabled(if: skip, "SIGNFLEET_SKIP_BROWSER=1"))
    func aPersonSignsDeclinesAndFinishesLaterInHeadlessChromium() async throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run scripts/install-deps.sh")
        }
        let rig = try await CaptiveRig()
        let returnURL = "http://\(rig.http)/signing-return"
        let bea = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)
        let carl = EmbeddedSigner(id: "r2", name: "Carl Cosigner", email: "carl@example.com", clientUserId: "cu-carl", order: 2)
        let evil = EmbeddedSigner(id: "r1", name: "<script>alert('pwned')</script>Mallory", email: "m@example.com", clientUserId: "cu-m", order: 1)
        let signed = try await rig.sync(try CaptiveRig.envelope([bea, carl]))
        let declined = try await rig.sync(try CaptiveRig.envelope([bea]))
        let later = try await rig.sync(try CaptiveRig.envelope([bea]))
        let expired = try await rig.sync(try CaptiveRig.envelope([bea]))
        let hostile = try await rig.sync(try CaptiveRig.envelope([evil], name: "<img src=x onerror=alert(1)>Deal"))

        let expiredURL = try await rig.url(expired, .clientUserID("cu-bea"))
        rig.clock.advance(301)  // five minutes and a second: only this URL was issued before
        let signURL = try await rig.url(signed, .clientUserID("cu-bea"))
        let declineURL = try await rig.url(declined, .clientUserID("cu-bea"))
        let laterURL = try await rig.url(later, .clientUserID("cu-bea"))
        let hostileURL = try await rig.url(hostile, .clientUserID("cu-m"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("captive-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let screenshots = ProcessInfo.processInfo.environment["SIGNFLEET_SCREENSHOT_DIR"].map { URL(fileURLWithPath: $0) } ?? directory
        let screenshot = screenshots.appendingPathComponent("captive-signing.png").path
        let plan: [[String: Any]] = [
            ["name": "sign", "url": signURL.url, "action": "sign", "pointer": "pen", "text": "Bern", "screenshot": screenshot, "then": "reopen"],
            ["name": "decline", "url": declineURL.url, "action": "decline", "reason": "The rent is wrong"],
            ["name": "later", "url": laterURL.url, "action": "later"],
            ["name": "expired", "url": expiredURL.url, "action": "open", "expect_redirect": true],
            ["name": "hostile", "url": hostileURL.url, "action": "open", "read": ["signer-name", "envelope-name"]],
        ]
        let planFile = directory.appendingPathComponent("plan.json")
        try JSONSerialization.data(withJSONObject: plan).write(to: planFile)
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let browser = try ChildProcess.launch("/usr/bin/env", [python, Self.script.path, planFile.path], name: "selenium")
        let status: Int32
        do {
            status = try await browser.waitForExit(timeout: .seconds(240))
        } catch {
            await browser.terminate()
            throw error
        }
        #expect(status == 0, "\(browser.output)")
        var results: [String: BrowserResult] = [:]
        for line in browser.lines(.standardOutput) where line.hasPrefix("{") {
            let result = try JSONDecoder().decode(BrowserResult.self, from: Data(line.utf8))
            results[result.name] = result
        }
        for (name, result) in results where result.error != nil {
            Issue.record("scenario \(name) failed in the browser: \(result.error ?? "") at \(result.current_url ?? "?")\n\(browser.output)")
        }

        // Signed with a pen: redirected with signing_complete, an ISO record with pressure stored.
        let sign = try #require(results["sign"], "\(browser.output)")
        #expect(sign.event == "signing_complete")
        #expect(sign.final_url?.hasPrefix(returnURL) == true)
        #expect(sign.reopened_event == "viewing_complete", "single use: reopening a finished URL")
        let tabs = try await rig.services.captive.storedTabs(envelopeID: signed)
        let iso = try #require(tabs.first { $0.type == "signHere" }?.isoRecord, "the signature was stored")
        let record = try ISOSignatureRecord(bytes: iso)
        #expect(record.sampleCount > 10)
        #expect(record.channels.starts(with: [.x, .y, .t]))
        #expect(tabs.first { $0.type == "signHere" }?.pointerType == "pen")
        #expect(record.channels.contains(.f), "Chromium reported the pen's pressure")
        #expect(tabs.first { $0.type == "text" }?.value == "Bern")
        #expect(tabs.first { $0.type == "checkbox" }?.selected == true)
        #expect(try await rig.envelope(signed).recipients.map(\.status) == ["signed", "sent"])
        #expect(FileManager.default.fileExists(atPath: screenshot))

        #expect(results["decline"]?.event == "decline")
        let declinedEnvelope = try await rig.envelope(declined)
        #expect(declinedEnvelope.status == "declined")
        #expect(declinedEnvelope.recipients[0].declineReason == "The rent is wrong")
        #expect(results["later"]?.event == "cancel")
        #expect(try await rig.envelope(later).recipients[0].status == "delivered")
        #expect(results["expired"]?.event == "ttl_expired")
        #expect(try await rig.envelope(expired).recipients[0].status == "sent")

        let hostileResult = try #require(results["hostile"])
        #expect(hostileResult.alert == false, "no script ran")
        #expect(hostileResult.texts?["signer-name"]?.contains("<script>alert('pwned')</script>Mallory") == true, "shown as text")
        #expect(hostileResult.texts?["envelope-name"] == "<img src=x onerror=alert(1)>Deal")
        await rig.tearDown()
    }
}
