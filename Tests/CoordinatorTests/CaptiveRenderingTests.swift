import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Synchronization
import Testing

@testable import Coordinator

/// What `browser/make_documents.py` wrote: PDFs from real producers (reportlab, Ghostscript) and
/// where each page's magenta marker shows, in points from the shown page's top-left corner.
struct ProducedDocuments: Decodable {
    struct Page: Decodable {
        var media: [Double]
        var crop: [Double]
        var rotation: Int
        var width: Double
        var height: Double
        var marker: [Double]
    }
    struct Document: Decodable {
        var file: String
        var producer: String
        var pages: [Page]
    }
    var seed: Int
    var documents: [Document]

    static var script: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("browser/make_documents.py")
    }

    /// Runs the producers into `directory` with a seed (`SIGNFLEET_SEED`, else fresh; printed).
    static func make(in directory: URL) async throws -> ProducedDocuments {
        for tool in ["/usr/bin/gs", "/usr/bin/pdftoppm", "/usr/bin/pdfinfo"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run scripts/install-deps.sh")
        }
        let seed = Int(truncatingIfNeeded: testSeed("CaptiveRenderingTests"))
        print("make_documents.py seed \(seed) (SIGNFLEET_SEED=\(seed) replays it)")
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let child = try ChildProcess.launch("/usr/bin/env", [python, script.path, directory.path, "\(seed)"], name: "make_documents")
        let status = try await child.waitForExit(timeout: .seconds(120))
        try #require(status == 0, "make_documents.py failed (reportlab and Ghostscript come from scripts/install-deps.sh):\n\(child.output)")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: directory.appendingPathComponent("manifest.json")))
    }
}

/// Runs a program to completion with a deadline and returns its standard output.
func runTool(_ path: String, _ arguments: [String]) async throws -> String {
    let child = try ChildProcess.launch(path, arguments, name: URL(fileURLWithPath: path).lastPathComponent)
    let status = try await child.waitForExit(timeout: .seconds(60))
    try #require(status == 0, "\(path) \(arguments) exited \(status): \(child.output)")
    return child.lines(.standardOutput).joined(separator: "\n")
}

/// Page geometry, the poppler renderer and the page-image route, on PDFs made at test time.
@Suite(.serialized, .timeLimit(.minutes(4))) struct CaptiveRenderingTests {
    static func temporaryDirectory(_ name: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func pageGeometryAgreesWithTheProducerAndWithPoppler() async throws {
        let directory = try Self.temporaryDirectory("geometry")
        defer { try? FileManager.default.removeItem(at: directory) }
        let produced = try await ProducedDocuments.make(in: directory)
        for document in produced.documents {
            let pdf = try Data(contentsOf: URL(fileURLWithPath: document.file))
            let geometry = try PDFInspector().pageGeometry(pdf)
            #expect(geometry.count == document.pages.count, "\(document.producer)")
            // pdfinfo prints each page's CropBox and rotation: an independent reading of the same file.
            let info = try await runTool("/usr/bin/pdfinfo", ["-box", "-f", "1", "-l", "\(document.pages.count)", document.file])
            for (index, (page, expected)) in zip(geometry, document.pages).enumerated() {
                let where_ = "\(document.producer) page \(index + 1)"
                #expect(abs(page.width - expected.width) < 0.01 && abs(page.height - expected.height) < 0.01, "\(where_): \(page)")
                #expect(page.rotation == expected.rotation, "\(where_)")
                let crop = [page.cropBox.x0, page.cropBox.y0, page.cropBox.x1, page.cropBox.y1]
                #expect(zip(crop, expected.crop).allSatisfy { abs($0 - $1) < 0.01 }, "\(where_): \(crop) vs \(expected.crop)")
                let prefix = "Page \(String(repeating: " ", count: max(0, 4 - "\(index + 1)".count)))\(index + 1) "
                let popplerCrop = try #require(info.split(separator: "\n").first { $0.hasPrefix(prefix + "CropBox:") })
                    .split(separator: " ").compactMap { Double($0) }.suffix(4)
                #expect(zip(crop, popplerCrop).allSatisfy { abs($0 - $1) < 0.01 }, "\(where_): poppler says \(Array(popplerCrop))")
                let popplerRotation = try #require(info.split(separator: "\n").first { $0.hasPrefix(prefix + "rot:") })
                    .split(separator: " ").compactMap { Int($0) }.last
                #expect(popplerRotation == page.rotation, "\(where_)")
            }
        }
    }

    @Test func inheritedBoxesAndRotationFollowThePageTree() throws {
        // A hand-made tree only to pin inheritance: the root /Pages gives a MediaBox, a CropBox and
        // /Rotate 270 that the first page keeps and the second page overrides.
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 600 800] /CropBox [10 20 590.5 780] /Rotate -90 >>",
            "<< /Type /Page /Parent 2 0 R >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 842 595] /Rotate 180 /CropBox [900 900 1000 1000] >>",
        ]
        var pdf = "%PDF-1.4\n"
        var offsets: [Int] = []
        for (index, object) in objects.enumerated() {
            offsets.append(pdf.utf8.count)
            pdf += "\(index + 1) 0 obj\n\(object)\nendobj\n"
        }
        let xref = pdf.utf8.count
        pdf += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        pdf += offsets.map { String(format: "%010d 00000 n \n", $0) }.joined()
        pdf += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        let pages = try PDFInspector().pageGeometry(Data(pdf.utf8))
        #expect(pages.count == 2)
        #expect(pages[0].rotation == 270)
        #expect(pages[0].cropBox == PDFRect(10, 20, 590.5, 780))
        #expect(pages[0].width == 760 && pages[0].height == 580.5)
        // A CropBox outside the MediaBox is ignored: the MediaBox shows (and the box as written is kept).
        #expect(
            pages[1] == PDFPageGeometry(
                mediaBox: PDFRect(0, 0, 842, 595), cropBox: PDFRect(0, 0, 842, 595), rotation: 180,
                written: .init(cropBox: PDFRect(900, 900, 1000, 1000), rotation: 180)))
        #expect(throws: PDFInspectionError.self) { try PDFInspector().pageGeometry(Data("not a pdf".utf8)) }
    }

    @Test func theRendererDrawsRealPagesAndSurvivesHostileOnes() async throws {
        let renderer = PDFPageRenderer()
        try #require(renderer.isAvailable, "\(renderer.executable) is missing: run scripts/install-deps.sh")
        let directory = try Self.temporaryDirectory("renderer")
        defer { try? FileManager.default.removeItem(at: directory) }
        let produced = try await ProducedDocuments.make(in: directory)
        let document = produced.documents[0]
        let pdf = try Data(contentsOf: URL(fileURLWithPath: document.file))
        let geometry = try PDFInspector().pageGeometry(pdf)
        // The landscape page: 792 x 612 pt is 1056 x 816 px at 96 dpi, and twice that at scale 2.
        let png = try await renderer.render(pdf: pdf, page: 2, geometry: geometry[1], scale: 1)
        #expect(Self.pngSize(png).map { [$0.0, $0.1] } == [1056, 816])
        let double = try await renderer.render(pdf: pdf, page: 2, geometry: geometry[1], scale: 2)
        #expect(Self.pngSize(double).map { [$0.0, $0.1] } == [2112, 1632])

        await #expect(throws: PDFPageRenderer.Failure.self) {
            _ = try await renderer.render(pdf: Data("%PDF-1.4 garbage".utf8), page: 1, geometry: .letter, scale: 1)
        }
        await #expect(throws: PDFPageRenderer.Failure.self) {
            _ = try await renderer.render(pdf: pdf, page: 99, geometry: .letter, scale: 1)
        }
        var hurried = PDFPageRenderer.Limits()
        hurried.timeout = .milliseconds(1)
        await #expect(throws: PDFPageRenderer.Failure.timedOut(.milliseconds(1))) {
            _ = try await PDFPageRenderer(limits: hurried).render(pdf: pdf, page: 1, geometry: geometry[0], scale: 2)
        }
        var small = PDFPageRenderer.Limits()
        small.maxOutputBytes = 1000
        await #expect(throws: PDFPageRenderer.Failure.self) {
            _ = try await PDFPageRenderer(limits: small).render(pdf: pdf, page: 1, geometry: geometry[0], scale: 1)
        }
        // A renderer that dies at once (reads nothing, prints nothing) is a failure, not a crash.
        await #expect(throws: PDFPageRenderer.Failure.self) {
            _ = try await PDFPageRenderer(executable: "/bin/false").render(pdf: pdf, page: 1, geometry: .letter, scale: 1)
        }
        await #expect(throws: PDFPageRenderer.Failure.missing("/nonexistent/pdftoppm")) {
            _ = try await PDFPageRenderer(executable: "/nonexistent/pdftoppm").render(pdf: pdf, page: 1, geometry: .letter, scale: 1)
        }
        // The largest page a PDF may declare (200 x 200 inches) is drawn at a lower resolution, within 4096 px.
        let huge = PDFPageGeometry(mediaBox: PDFRect(0, 0, 14_400, 14_400), cropBox: PDFRect(0, 0, 14_400, 14_400), rotation: 0)
        #expect(Double(14_400) * renderer.dpi(for: huge, scale: 2) / 72 <= 4096)
    }

    @Test func theCacheDrawsEachPageOnceRemembersPDFFailuresAndStaysWithinItsBudget() async throws {
        // A failure is held as 1,024 bytes.
        let cache = PageImageCache(maxBytes: 2_000, maxConcurrentRenders: 1)
        let renders = RenderCounter()
        let key = Self.key
        // Two requests for a page being drawn share one render.
        let (opened, gate) = AsyncStream<Void>.makeStream()
        let (started, signal) = AsyncStream<Void>.makeStream()
        let first = Task {
            await cache.image(key(1)) { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
                renders.count.withLock { $0 += 1 }
                signal.yield()
                for await _ in opened { break }
                return [UInt8](repeating: 1, count: 600)
            }
        }
        for await _ in started { break }
        let second = Task { await cache.image(key(1), render: renders.image(600)) }
        let deadline = ContinuousClock.now + .seconds(10)
        while await cache.joined == 0 {
            try #require(ContinuousClock.now < deadline, "the second request never joined the render")
            await Task.yield()
        }
        gate.yield()
        let (a, b) = (await first.value, await second.value)
        #expect(a.cached == false && b.cached == true)
        #expect((try? a.image.get()) == (try? b.image.get()))
        #expect(renders.count.withLock { $0 } == 1)
        #expect(await cache.image(key(1), render: renders.image(600)).cached)

        // A PDF's failure is remembered; a timeout for a while (below).
        let failing: @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8] = { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
            renders.count.withLock { $0 += 1 }
            throw .failed("broken")
        }
        _ = await cache.image(key(2), render: failing)
        #expect(await cache.image(key(2), render: failing).cached)
        // Within 2,000 bytes: page 4 (800 bytes) pushes out the least recently used, page 1.
        _ = await cache.image(key(4), render: renders.image(800))
        #expect(await cache.usage.bytes <= 2_000)
        #expect(await cache.image(key(4), render: renders.image(800)).cached)
        #expect(await cache.image(key(2), render: failing).cached, "page 2 was used after page 1")
        #expect(await cache.image(key(1), render: renders.image(600)).cached == false, "page 1 was evicted")
    }

    /// A document too heavy to draw in time costs one time-out per page per `timeoutMemory`, not
    /// one per request (every reload took a render slot for the whole 15 s again, issue #31).
    @Test func aTimedOutPageIsRememberedUntilItsMemoryPasses() async throws {
        let clock = ManualClock()
        let cache = PageImageCache(timeoutMemory: .seconds(300), clock: clock)
        let renders = RenderCounter()
        let slow: @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8] = { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
            renders.count.withLock { $0 += 1 }
            throw .timedOut(.seconds(15))
        }
        let first = await cache.image(Self.key(3), render: slow)
        #expect(first.cached == false && first.image == .failure(.timedOut(.seconds(15))))
        await clock.advance(by: .seconds(299))
        let again = await cache.image(Self.key(3), render: renders.image(10))
        #expect(again.cached && again.image == .failure(.timedOut(.seconds(15))), "within its memory a time-out is answered at once")
        #expect(renders.count.withLock { $0 } == 1)
        await clock.advance(by: .seconds(1))
        let retried = await cache.image(Self.key(3), render: renders.image(10))
        #expect(retried.cached == false && (try? retried.image.get())?.count == 10, "after it, the page is drawn again")
        #expect(await cache.usage.bytes == 10, "the forgotten time-out's bytes are given back")
    }

    /// One account's heavy document held both render slots and queued its other pages ahead of
    /// everyone: another account's signer waited 59.9 s for one page (issue #31). Slots now go to
    /// the waiting account with the fewest renders running, so that signer waits for one render.
    @Test func anotherAccountsPageIsDrawnBeforeTheRestOfAHeavyDocument() async throws {
        let cache = PageImageCache(maxConcurrentRenders: 2)
        let (started, signal) = AsyncStream<String>.makeStream()
        let gates = Mutex<[String: AsyncStream<Void>.Continuation]>([:])
        /// A render that says it started and ends when its gate opens.
        func gated(_ name: String) -> @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8] {
            let (opened, gate) = AsyncStream<Void>.makeStream()
            gates.withLock { $0[name] = gate }
            return { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
                signal.yield(name)
                for await _ in opened { break }
                return Array(name.utf8)
            }
        }
        func heavy(_ page: Int) -> PageImageCache.Key { .init(envelopeID: "heavy", documentID: "d", page: page, scale: 1) }
        var order = started.makeAsyncIterator()
        var requests: [Task<Void, Never>] = []
        for page in 1...6 {
            let render = gated("heavy-\(page)")
            requests.append(Task { _ = await cache.image(heavy(page), account: "a-heavy", render: render) })
            // One at a time, so the heavy account's requests take the slots and queue in page order:
            // each has reached the slots (holds one or waits) before the next is made.
            try await waitUntil("heavy page \(page) runs or waits") { await cache.runningRenders + cache.waitingRenders == page }
        }
        var first = [await order.next(), await order.next()]
        first.sort { ($0 ?? "") < ($1 ?? "") }
        #expect(first == ["heavy-1", "heavy-2"])
        let light = gated("light-1")
        requests.append(Task {
            _ = await cache.image(.init(envelopeID: "light", documentID: "d", page: 1, scale: 1), account: "b-light", render: light)
        })
        try await waitUntil("the light page waits") { await cache.waitingRenders == 5 }
        gates.withLock { $0["heavy-1"]?.yield() }
        #expect(await order.next() == "light-1", "the first slot freed goes to the other account, not to heavy page 3")
        gates.withLock { $0["heavy-2"]?.yield() }
        #expect(await order.next() == "heavy-3", "then the heavy document goes on in page order")
        // A gate opened early is kept until its render waits on it: let everything finish.
        gates.withLock { gates in for gate in gates.values { gate.yield() } }
        for request in requests { await request.value }
        #expect(await cache.waitingRenders == 0)
    }

    /// Polls `condition` between yields, failing after a deadline that only guards against a hang.
    func waitUntil(_ what: String, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while await !condition() {
            try #require(ContinuousClock.now < deadline, "never: \(what)")
            await Task.yield()
        }
    }

    static func key(_ page: Int) -> PageImageCache.Key { .init(envelopeID: "e", documentID: "d", page: page, scale: 1) }

    /// Counts renders; its renders make an image of a given size.
    final class RenderCounter: Sendable {
        let count = Mutex(0)
        func image(_ size: Int) -> @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8] {
            { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
                self.count.withLock { $0 += 1 }
                return [UInt8](repeating: 7, count: size)
            }
        }
    }

    @Test func thePageImageRouteServesTheSessionsBrowserAndCaches() async throws {
        let rig = try await CaptiveRig()
        let directory = try Self.temporaryDirectory("route")
        defer { try? FileManager.default.removeItem(at: directory) }
        let produced = try await ProducedDocuments.make(in: directory)
        let envelope = try await rig.sync(try Self.envelope(produced, signer: EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)))
        let url = try await rig.url(envelope, .clientUserID("cu-bea"))
        let path = try #require(URL(string: url.url)?.path)
        let page = try await rig.request("GET", path)
        #expect(page.status == 200)
        let cookie = try #require(page.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        // The page sizes each page from its own geometry and asks for its image.
        #expect(page.body.contains("\(path)/documents/reportlab/pages/2"))
        #expect(page.body.contains("width:1056px;aspect-ratio:1056/816"), "US Letter landscape at 96 dpi")
        #expect(!page.body.contains("render-note\" role"), "the note is hidden while pages are drawn")

        let image = "\(path)/documents/reportlab/pages/2"
        #expect(try await rig.requestBytes("GET", image).status == 403, "no session cookie")
        #expect(try await rig.requestBytes("GET", "/signing/unknown-token/documents/reportlab/pages/2", cookie: cookie).status == 404)
        let first = try await rig.requestBytes("GET", image, cookie: cookie)
        #expect(first.status == 200)
        #expect(first.headers["content-type"] == "image/png")
        #expect(first.headers["cache-control"] == "private, max-age=3600, immutable")
        #expect(first.headers["x-page-cache"] == "miss")
        #expect(Self.pngSize([UInt8](first.body)).map { [$0.0, $0.1] } == [1056, 816])
        let again = try await rig.requestBytes("GET", image, cookie: cookie)
        #expect(again.headers["x-page-cache"] == "hit")
        #expect(again.body == first.body)
        #expect(try await rig.requestBytes("GET", "\(image)?scale=2", cookie: cookie).headers["x-page-cache"] == "miss")
        #expect(try await rig.requestBytes("GET", "\(image)?scale=3", cookie: cookie).status == 404)
        #expect(try await rig.requestBytes("GET", "\(path)/documents/reportlab/pages/5", cookie: cookie).status == 404)
        #expect(try await rig.requestBytes("GET", "\(path)/documents/reportlab/pages/0", cookie: cookie).status == 404)
        #expect(try await rig.requestBytes("GET", "\(path)/documents/nope/pages/1", cookie: cookie).status == 404)
        await rig.tearDown()
    }

    @Test func withoutTheRendererThePageSaysSoAndShowsItsText() async throws {
        let rig = try await CaptiveRig(pages: CaptivePageImages(renderer: PDFPageRenderer(executable: "/nonexistent/pdftoppm")))
        let envelope = try await rig.sync(try CaptiveRig.envelope([EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)]))
        let url = try await rig.url(envelope, .clientUserID("cu-bea"))
        let path = try #require(URL(string: url.url)?.path)
        let page = try await rig.request("GET", path)
        #expect(page.status == 200)
        #expect(!page.body.contains("class=\"page-image\""))
        #expect(page.body.components(separatedBy: "<p class=\"render-note\" role=\"status\">This page could not be drawn here").count == 3)
        #expect(page.body.contains("pdf-text"), "the text layer of the uncompressed sample shows")
        let cookie = try #require(page.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        let image = try await rig.request("GET", "\(path)/documents/doc1/pages/1", cookie: cookie)
        #expect(image.status == 503)
        #expect(image.body.contains("not installed"))
        await rig.tearDown()
    }

    /// An envelope with both produced documents; the signer has a sign-here tab on every page,
    /// exactly over that page's marker, and a text tab and a checkbox on the first page.
    static func envelope(_ produced: ProducedDocuments, signer: EmbeddedSigner) throws -> Envelope {
        var builder = EnvelopeBuilder().envelopeName("Produced documents").emailSubject("Please sign").emailMessage("Made at test time.")
            .transactionId(UUID().uuidString)
        var tabs: [Tab] = []
        for document in produced.documents {
            let pdf = try Data(contentsOf: URL(fileURLWithPath: document.file))
            builder = builder.addDocument(
                try DocumentBuilder().documentId(document.producer).name("\(document.producer) document").pdfBytes(pdf).build())
            for (index, page) in document.pages.enumerated() {
                let m = page.marker
                tabs.append(
                    try TabBuilder(type: .signHere).tabId("sign-\(document.producer)-\(index + 1)").name("Signature")
                        .documentId(document.producer).recipientId(signer.id).pageNumber(index + 1)
                        .frame(x: m[0], y: m[1], width: m[2], height: m[3]).build())
            }
        }
        tabs.append(
            try TabBuilder(type: .text).tabId("city").name("City").documentId("reportlab").recipientId(signer.id).pageNumber(1)
                .frame(x: 60, y: 40, width: 160, height: 24).build())
        tabs.append(
            try TabBuilder(type: .checkbox).tabId("agree").name("I agree").documentId("reportlab").recipientId(signer.id)
                .pageNumber(1).frame(x: 300, y: 40, width: 20, height: 20).optional().build())
        let recipient = RecipientBuilder(type: .signer).recipientId(signer.id).name(signer.name).email(signer.email)
            .routingOrder(signer.order).clientUserId(signer.clientUserId ?? "")
        return try builder.addRecipient(try recipient.build(), tabs: tabs).build()
    }

    /// Width and height from a PNG's IHDR chunk.
    static func pngSize(_ png: [UInt8]) -> (Int, Int)? {
        guard png.count >= 24, png.starts(with: [0x89, 0x50, 0x4E, 0x47]) else { return nil }
        func word(_ at: Int) -> Int { png[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (word(16), word(20))
    }
}
