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
    struct Violation: Decodable { var id: String; var impact: String; var targets: [[String]] }
    var axe: [Violation]?
    /// One .page against pdftoppm's drawing of it (captive_signing.py `render_pages`).
    struct PageReport: Decodable {
        var pdf: String
        var page: Int
        var css: [Double]
        var tab: [Double]?
        var marker: [Int]?
        var loaded: Bool
        var mean: Double
        var off: Double
        var blank_mean: Double
        var blank_off: Double
        var shot_size: [Int]
        var reference_size: [Int]
    }
    var pages: [PageReport]?
    /// A signature preview: its pixel ratio and its box's; its ink's aspect and the pad's.
    struct Preview: Decodable { var canvas: Double; var box: Double; var ink: Double; var pad: Double? }
    var previews: [Preview]?
    var focus_order: [String]?
    var focus_in_pad: String?
    var focus_after_adopt: String?
    var focus_after_error: String?
    var error_shown: String?
    var error_after: Bool?
    var signed: Int?
    var notes_shown: Int?
    var page_count: Int?
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
        let results = try await Self.browse(plan, in: directory)

        // Signed with a pen: redirected with signing_complete, an ISO record with pressure stored.
        let sign = try #require(results["sign"])
        #expect(sign.event == "signing_complete")
        #expect(sign.final_url?.hasPrefix(returnURL) == true)
        #expect(sign.reopened_event == "viewing_complete", "single use: reopening a finished URL")
        let tabs = try await rig.services.captive.storedTabs(envelopeID: signed)
        let iso = try #require(tabs.first { $0.type == "signHere" }?.isoRecord, "the signature was stored")
        let record = try ISOSignatureRecord(bytes: iso)
        #expect(record.sampleCount > 10)
        #expect(record.channels.starts(with: [.x, .y, .t]))
        #expect(tabs.first { $0.type == "signHere" }?.pointerType == "pen")
        // The preview fills its field without stretching: its pixels have the field's shape and the
        // ink keeps the drawing's aspect (a stretched 600x200 pad in a 200x60 field would not).
        let previews = try #require(sign.previews, "previews measured")
        #expect(!previews.isEmpty)
        for preview in previews {
            #expect(abs(preview.canvas / preview.box - 1) < 0.05, "\(preview)")
            if let pad = preview.pad { #expect(abs(preview.ink / pad - 1) < 0.15, "\(preview)") }
        }
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

    /// Runs `captive_signing.py` on a plan and reads its scenario results (scenario errors are recorded).
    private static func browse(_ plan: [[String: Any]], in directory: URL) async throws -> [String: BrowserResult] {
        let planFile = directory.appendingPathComponent("plan-\(UUID().uuidString).json")
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
        return results
    }

    /// PDFs made at test time by reportlab and Ghostscript (compressed; A4, Letter landscape, Legal,
    /// a CropBox, /Rotate 90, A4 landscape) shown in Chromium: each page's screenshot matches
    /// pdftoppm's own drawing of it within a tolerance, each signature field sits on the marker the
    /// producer drew, axe-core finds nothing serious, and the page is signed with the keyboard alone.
    @Test(.disabled(if: skip, "SIGNFLEET_SKIP_BROWSER=1"))
    func realDocumentsShowAsPopplerDrawsThemAndSignWithTheKeyboard() async throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run scripts/install-deps.sh")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("captive-render-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let produced = try await ProducedDocuments.make(in: directory)
        let rig = try await CaptiveRig()
        let fallbackRig = try await CaptiveRig(pages: CaptivePageImages(renderer: PDFPageRenderer(executable: "/bin/false")))
        let bea = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)
        let viewed = try await rig.sync(try CaptiveRenderingTests.envelope(produced, signer: bea))
        let typed = try await rig.sync(try CaptiveRenderingTests.envelope(produced, signer: bea))
        let broken = try await fallbackRig.sync(try CaptiveRig.envelope([bea]))
        let viewURL = try await rig.url(viewed, .clientUserID("cu-bea"))
        let typedURL = try await rig.url(typed, .clientUserID("cu-bea"))
        let brokenURL = try await fallbackRig.url(broken, .clientUserID("cu-bea"))
        let pages = produced.documents.flatMap { document in
            document.pages.indices.map { ["pdf": document.file, "page": $0 + 1] as [String: Any] }
        }
        let results = try await Self.browse([
            // Page 6 is Ghostscript's rotated page: its field is tall and narrow, unlike the 3:1 pad.
            ["name": "render", "url": viewURL.url, "action": "render", "pages": pages, "axe": true, "sign_page": 5],
            ["name": "keyboard", "url": typedURL.url, "action": "keyboard", "typed": "Bea Buyer", "text": "Bern", "axe": true],
            ["name": "fallback", "url": brokenURL.url, "action": "fallback"],
        ], in: directory)

        let render = try #require(results["render"])
        #expect(render.axe?.isEmpty == true, "axe-core: \(render.axe ?? [])")
        let reports = try #require(render.pages)
        let expected = produced.documents.flatMap(\.pages)
        #expect(reports.count == expected.count)
        for (report, page) in zip(reports, expected) {
            let name = "\(URL(fileURLWithPath: report.pdf).lastPathComponent) page \(report.page)"
            print("\(name): \(report.css) CSS px, screenshot \(report.shot_size) vs pdftoppm \(report.reference_size), "
                + "mean diff \(report.mean) (blank \(report.blank_mean)), off \(report.off); field \(report.tab ?? []) marker \(report.marker ?? [])")
            #expect(report.loaded, "\(name): the page image loaded")
            // True size: a point is 4/3 CSS px.
            #expect(abs(report.css[0] - page.width * 4 / 3) < 1 && abs(report.css[1] - page.height * 4 / 3) < 1, "\(name): \(report.css)")
            #expect(abs(report.shot_size[0] - report.reference_size[0]) <= 1 && abs(report.shot_size[1] - report.reference_size[1]) <= 1, "\(name)")
            // Close to poppler's drawing, and far closer than a blank page would be.
            #expect(report.mean < 3 && report.off < 0.01, "\(name): mean \(report.mean), off \(report.off)")
            #expect(report.mean < report.blank_mean / 5, "\(name): mean \(report.mean) vs blank \(report.blank_mean)")
            // The signature field covers the marker the producer drew (found in poppler's drawing).
            let tab = try #require(report.tab, "\(name): a signature field")
            let marker = try #require(report.marker, "\(name): the marker shows in poppler's drawing")
            for (a, b) in zip(tab, marker.map(Double.init)) {
                #expect(abs(a - b) <= 2, "\(name): field \(tab) vs marker \(marker)")
            }
        }

        let tall = try #require(render.previews?.first, "the preview of the tall field was measured")
        #expect(tall.box < 0.5, "a tall field: \(tall)")
        #expect(abs(tall.canvas / tall.box - 1) < 0.05 && abs(tall.ink / (tall.pad ?? 0) - 1) < 0.15, "not stretched: \(tall)")

        let keyboard = try #require(results["keyboard"])
        #expect(keyboard.axe?.isEmpty == true, "axe-core: \(keyboard.axe ?? [])")
        #expect(keyboard.error_shown == "Sign every signature field before finishing.")
        #expect(keyboard.focus_after_error?.hasPrefix("sign-") == true, "Finish moves focus to the first unsigned field")
        #expect(keyboard.signed == expected.count, "every signature field signed from the keyboard")
        #expect(keyboard.focus_in_pad == "pad-typed")
        #expect(keyboard.focus_after_adopt?.hasPrefix("sign-") == true, "focus returns to the field")
        #expect(keyboard.error_after == false, "the error is cleared once every field is signed")
        #expect(keyboard.event == "signing_complete")
        // Focus follows the pages: fields in document order, top to bottom on each page.
        let order = try #require(keyboard.focus_order).filter { $0.hasPrefix("sign-") || $0.hasPrefix("tab-") }
        let tabs = try await rig.services.captive.storedTabs(envelopeID: typed)
        #expect(tabs.filter { $0.type == "signHere" }.allSatisfy { $0.pointerType == "typed" && $0.value == "Bea Buyer" && $0.isoRecord == nil })
        #expect(tabs.first { $0.type == "checkbox" }?.selected == true)
        #expect(tabs.first { $0.type == "text" }?.value == "Bern")
        let envelopeTabs = try CaptiveRenderingTests.envelope(produced, signer: bea).tabs
        let sortedIndices = envelopeTabs.indices.sorted {
            let a = envelopeTabs[$0], b = envelopeTabs[$1]
            let docA = a.documentId == "reportlab" ? 0 : 1, docB = b.documentId == "reportlab" ? 0 : 1
            return (docA, a.pageNumber, a.frame.y, a.frame.x) < (docB, b.pageNumber, b.frame.y, b.frame.x)
        }
        let expectedOrder = sortedIndices.map { envelopeTabs[$0].type == .signHere ? "sign-\($0)" : "tab-\($0)" }
        #expect(order == expectedOrder)

        let fallback = try #require(results["fallback"])
        #expect(fallback.page_count == 2)
        #expect(fallback.notes_shown == 2, "every page whose image failed says so")
        #expect(fallback.texts?["note"] == "This page could not be drawn here; open the PDF to read it.")
        await fallbackRig.tearDown()
        await rig.tearDown()
    }
}
