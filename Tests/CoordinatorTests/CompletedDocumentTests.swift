import Crypto
import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import SignatureCapture
import SyncContract
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Completed documents (docs/rest-api.md, "Completed documents"): the ink and values of filled
/// tabs drawn where the tabs are, checked with poppler — `pdftoppm` shows ink inside each tab and
/// nowhere else, `pdftotext` finds each value — on pages rotated, cropped and trimmed, and through
/// the REST routes on envelopes signed on a device and on the captive page.
@Suite struct CompletedDocumentTests {
    /// A page as `pdftoppm -gray` draws it at 72 dpi: one byte per point, 0 black.
    struct Raster {
        var width: Int
        var height: Int
        var gray: [UInt8]

        /// Pixels darker than mid-grey inside `rect` (shown points, top-left origin).
        func dark(in rect: (x: Double, y: Double, width: Double, height: Double)) -> Int {
            var count = 0
            for y in max(0, Int(rect.y))..<min(height, Int((rect.y + rect.height).rounded(.up))) {
                for x in max(0, Int(rect.x))..<min(width, Int((rect.x + rect.width).rounded(.up))) where gray[y * width + x] < 128 {
                    count += 1
                }
            }
            return count
        }

        /// Dark pixels outside every one of `rects` grown by `margin` points.
        func dark(outside rects: [(x: Double, y: Double, width: Double, height: Double)], margin: Double = 2) -> Int {
            var count = 0
            for y in 0..<height {
                for x in 0..<width where gray[y * width + x] < 128 {
                    let inside = rects.contains {
                        Double(x) >= $0.x - margin && Double(x) <= $0.x + $0.width + margin && Double(y) >= $0.y - margin
                            && Double(y) <= $0.y + $0.height + margin
                    }
                    if !inside { count += 1 }
                }
            }
            return count
        }
    }

    static func render(_ pdf: Data, page: Int) async throws -> Raster {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-render-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("in.pdf")
        try pdf.write(to: input)
        let (status, _, errors) = try await ChildProcess.run(
            "/usr/bin/pdftoppm", ["-r", "72", "-cropbox", "-gray", "-singlefile", "-f", "\(page)", "-l", "\(page)", input.path, directory.appendingPathComponent("out").path])
        try #require(status == 0, "pdftoppm: \(errors)")
        let pgm = [UInt8](try Data(contentsOf: directory.appendingPathComponent("out.pgm")))
        // P5 header: "P5\n<width> <height>\n255\n", then the pixels.
        var fields: [String] = [], index = 0, current = ""
        while fields.count < 4, index < pgm.count {
            let byte = pgm[index]
            index += 1
            if byte == 0x20 || byte == 0x0A {
                if !current.isEmpty { fields.append(current); current = "" }
            } else {
                current.append(Character(UnicodeScalar(byte)))
            }
        }
        let width = try #require(Int(fields[1])), height = try #require(Int(fields[2]))
        return Raster(width: width, height: height, gray: Array(pgm[index..<(index + width * height)]))
    }

    static func text(_ pdf: Data) async throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-text-\(UUID().uuidString).pdf")
        try pdf.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, output, errors) = try await ChildProcess.run("/usr/bin/pdftotext", ["-layout", file.path, "-"])
        try #require(status == 0, "pdftotext: \(errors)")
        return output
    }

    static func pageCount(_ pdf: Data) throws -> Int { try PDFInspector().pageGeometry(pdf).count }

    /// A one-page PDF with these page entries (boxes, rotation) besides `/MediaBox [0 0 612 792]`,
    /// and nothing printed on it; `kids` lists the page that many times in the page tree.
    static func blankPage(_ entries: String, kids: Int = 1) -> Data {
        PDFWriter.serialize(
            objects: [
                "<< /Type /Catalog /Pages 2 0 R >>",
                "<< /Type /Pages /Kids [\(Array(repeating: "3 0 R", count: kids).joined(separator: " "))] /Count \(kids) >>",
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \(entries) /Contents 4 0 R >>",
                "<< /Length 0 >>\nstream\n\nendstream",
            ], trailer: "/Root 1 0 R")
    }

    /// A diagonal stroke, a lift, and a short second stroke, in an ISO record (X, Y, T, S).
    static func signatureRecord() throws -> [UInt8] {
        var values: [Int32] = []
        for i in 0..<30 { values += [Int32(1000 + i * 100), Int32(2000 + i * 40), Int32(i), 1] }
        values += [4000, 2000, 30, 0]
        for i in 0..<10 { values += [Int32(2000 + i * 50), Int32(3000), Int32(31 + i), 1] }
        let scale = ISOScalingValue(approximating: 100)
        return try ISOSignatureRecord(
            descriptions: [
                ISOChannelDescription(channel: .x, scaling: scale, minimum: 1000, maximum: 4000),
                ISOChannelDescription(channel: .y, scaling: scale, minimum: 2000, maximum: 3160),
                ISOChannelDescription(channel: .t, scaling: ISOScalingValue(approximating: 200)),
                ISOChannelDescription(channel: .s, minimum: 0, maximum: 1),
            ], values: values
        ).encoded()
    }

    static let frames: [(x: Double, y: Double, width: Double, height: Double)] = [
        (100, 150, 120, 40), (300, 300, 140, 18), (50, 400, 14, 14),
    ]

    static func fill() throws -> EnvelopeFill {
        let sign = try TabBuilder(type: .signHere).documentId("d").recipientId("1").pageNumber(1).frame(x: 100, y: 150, width: 120, height: 40).build()
        var city = try TabBuilder(type: .text).documentId("d").recipientId("1").pageNumber(1).frame(x: 300, y: 300, width: 140, height: 18).build()
        city.value = "Bern"
        var agree = try TabBuilder(type: .checkbox).documentId("d").recipientId("1").pageNumber(1).frame(x: 50, y: 400, width: 14, height: 14).build()
        agree.selected = true
        var offPage = try TabBuilder(type: .text).documentId("d").recipientId("1").pageNumber(1).frame(x: 10, y: 10, width: 40, height: 18).build()
        offPage.pageNumber = 7
        offPage.value = "Nowhere"
        return EnvelopeFill(entries: [
            .init(tab: sign, signature: try signatureRecord(), source: .device("dev-1")),
            .init(tab: city, signature: nil, source: .device("dev-1")),
            .init(tab: agree, signature: nil, source: .device("dev-1")),
            .init(tab: offPage, signature: nil, source: .device("dev-1")),
        ])
    }

    /// Uneven boxes (a transposed or unflipped coordinate shows), boxes reaching past their parent,
    /// rotations as written in any form, a TrimBox larger than the CropBox.
    @Test(arguments: [
        "",
        "/CropBox [20 30 600 780] /TrimBox [25 35 590 770]",
        "/CropBox [20 30 600 780] /TrimBox [25 35 590 770] /Rotate 90",
        "/CropBox [20 30 600 780] /TrimBox [25 35 590 770] /Rotate 180",
        "/CropBox [20 30 600 780] /TrimBox [25 35 590 770] /Rotate 270",
        "/CropBox [20 30 600 780] /Rotate -90",
        "/CropBox [20 30 600 780] /Rotate 450",
        "/CropBox [-100 -100 612 792]",
        "/CropBox [40 40 560 740] /TrimBox [0 0 612 792] /Rotate 90",
    ])
    func inkAndValuesLandInTheirTabsWhateverThePagesBoxes(entries: String) async throws {
        let original = Self.blankPage(entries)
        let drawn = try await CompletedDocuments().document((id: "d", pdf: original), fill: try Self.fill())
        let raster = try await Self.render(drawn, page: 1)
        let shown = try #require(try PDFInspector().pageGeometry(original).first)
        #expect(raster.width == Int(shown.width.rounded()) && raster.height == Int(shown.height.rounded()), "the page keeps its shown size")
        #expect(raster.dark(in: Self.frames[0]) > 60, "the signature's ink is in its tab")
        #expect(raster.dark(in: Self.frames[1]) > 20, "the text value is in its tab")
        #expect(raster.dark(in: Self.frames[2]) > 10, "the checkbox is ticked")
        #expect(raster.dark(outside: Self.frames) == 0, "nothing is drawn anywhere else (\(entries))")
        let text = try await Self.text(drawn)
        #expect(text.contains("Bern") && !text.contains("Nowhere"), "\(text)")
    }

    /// qpdf runs in a limited address space: with 8 MiB it cannot even start (the same PDF draws
    /// with the default limit, as every other test here shows), and the failure is an error.
    @Test func qpdfRunsWithinItsMemoryLimit() async throws {
        var documents = CompletedDocuments()
        documents.limits.maxMemoryBytes = 8 << 20
        let original = Self.blankPage("")
        await #expect(throws: CompletedDocuments.Failure.self) {
            _ = try await documents.document((id: "d", pdf: original), fill: try Self.fill())
        }
        let drawn = try await CompletedDocuments().document((id: "d", pdf: original), fill: try Self.fill())
        #expect(drawn.starts(with: Array("%PDF-".utf8)) && drawn != original)
    }

    @Test func aDocumentWithNothingFilledIsServedAsItsBytes() async throws {
        let original = SamplePDF.make(pages: 2, title: "Plain")
        let served = try await CompletedDocuments().document((id: "other", pdf: original), fill: try Self.fill())
        #expect(served == original)
    }

    @Test func combinedPutsDocumentsInOrderThenTheCertificateWithInkOnlyOnTheDocuments() async throws {
        let first = SamplePDF.make(pages: 2, title: "First")
        let second = Self.blankPage("")
        let certificate = PDFWriter.document(pages: [PDFWriter.Page(width: 612, height: 792, content: "BT /F1 12 Tf 72 700 Td (Certificate here) Tj ET")])
        let combined = try await CompletedDocuments().combined(
            [(id: "first", pdf: first), (id: "d", pdf: second)], fill: try Self.fill(), certificate: certificate)
        #expect(try Self.pageCount(combined) == 4)
        let text = try await Self.text(combined)
        let order = ["First", "Page 2 of 2", "Bern", "Certificate here"].map { text.range(of: $0)?.lowerBound }
        #expect(order.allSatisfy { $0 != nil } && order.map { $0! } == order.map { $0! }.sorted(), "\(text)")
        let third = try await Self.render(combined, page: 3)
        #expect(third.dark(in: Self.frames[0]) > 60, "the second document's ink is on the combined file's third page")
        let last = try await Self.render(combined, page: 4)
        #expect(last.dark(in: Self.frames[0]) == 0 && last.dark(in: Self.frames[2]) == 0, "the certificate gets no ink")
        let again = try await CompletedDocuments().combined(
            [(id: "first", pdf: first), (id: "d", pdf: second)], fill: try Self.fill(), certificate: certificate)
        #expect(again == combined, "the same envelope gives the same bytes (qpdf --deterministic-id)")
    }

    @Test func hostileDocumentsAndTabsAreRefusedOrSkippedNeverACrash() async throws {
        await #expect(throws: CompletedDocuments.Failure.self) {
            _ = try await CompletedDocuments().document((id: "d", pdf: Data("not a pdf".utf8)), fill: try Self.fill())
        }
        var missing = CompletedDocuments()
        missing.executable = "/nonexistent/qpdf"
        let fill = try Self.fill()
        do {
            _ = try await missing.document((id: "d", pdf: Self.blankPage("")), fill: fill)
            Issue.record("a fill without qpdf must fail")
        } catch {
            guard case .missing = error else { Issue.record("\(error)"); return }
        }
        var tab = try TabBuilder(type: .text).documentId("d").recipientId("1").pageNumber(1).frame(x: 10, y: 10, width: 40, height: 18).build()
        tab.value = "x"
        for frame in [
            TabFrame(x: .nan, y: 1, width: 1, height: 1), TabFrame(x: 1, y: 1, width: -5, height: 1), TabFrame(x: .infinity, y: 0, width: 1, height: 1),
            TabFrame(x: 1e306, y: 0, width: 1, height: 1), TabFrame(x: 0, y: 0, width: 1e306, height: 10),
        ] {
            tab.frame = frame
            #expect(DocumentStamp.operators(for: .init(tab: tab, signature: nil, source: .none), pageHeight: 792).isEmpty)
        }
        var sign = tab
        sign.type = .signHere
        sign.value = nil
        sign.frame = TabFrame(x: 10, y: 10, width: 100, height: 40)
        #expect(DocumentStamp.operators(for: .init(tab: sign, signature: [0x53, 0x44, 0x49], source: .none), pageHeight: 792).isEmpty, "an unreadable record draws nothing")
    }

    @Test func pagesOutOfRangeSenderValuesOnSigningTabsAndUnsignedDatesDrawNothing() async throws {
        var tab = try TabBuilder(type: .text).documentId("d").recipientId("1").pageNumber(1).frame(x: 100, y: 100, width: 100, height: 20).build()
        tab.value = "drawn"
        var entries: [EnvelopeFill.Entry] = []
        for page in [Int.min, -1, 0, 2, Int.max] {
            tab.pageNumber = page
            entries.append(.init(tab: tab, signature: nil, source: .none))
        }
        #expect(DocumentStamp.pages(for: "d", geometry: [.letter], fill: EnvelopeFill(entries: entries)) == nil, "no page of the document: nothing")
        var sign = try TabBuilder(type: .signHere).documentId("d").recipientId("1").pageNumber(1).frame(x: 100, y: 150, width: 120, height: 40).build()
        sign.value = "Sender's guess"
        var date = try TabBuilder(type: .dateSigned).documentId("d").recipientId("1").pageNumber(1).frame(x: 300, y: 300, width: 140, height: 18).build()
        date.value = "2027-01-15"
        let unsigned = EnvelopeFill(entries: [.init(tab: sign, signature: nil, source: .none), .init(tab: date, signature: nil, source: .none)])
        #expect(DocumentStamp.pages(for: "d", geometry: [.letter], fill: unsigned) == nil, "a value on a signing tab is no signature; a date is not drawn before signing")
        sign.value = "Dora Typed"
        var typed = EnvelopeFill.Entry(tab: sign, signature: nil, source: .captive(Date(timeIntervalSince1970: 0)))
        typed.typed = true
        let signed = EnvelopeFill(entries: [typed, .init(tab: date, signature: nil, source: .none)])
        let drawn = try await CompletedDocuments().document((id: "d", pdf: Self.blankPage("")), fill: signed)
        let text = try await Self.text(drawn)
        #expect(text.contains("Dora Typed") && text.contains("2027-01-15"), "a typed signature and, once signed, the date: \(text)")
    }

    /// qpdf clips an overlay to the page's TrimBox (docs/rest-api.md): ink outside it is cut off.
    @Test func inkOutsideASmallerTrimBoxIsCutOff() async throws {
        var outside = try TabBuilder(type: .checkbox).documentId("d").recipientId("1").pageNumber(1).frame(x: 500, y: 50, width: 14, height: 14).build()
        outside.selected = true
        var fill = try Self.fill()
        fill.entries.append(.init(tab: outside, signature: nil, source: .device("dev-1")))
        // Shown, the TrimBox spans x 30…460, y 180…680.
        let drawn = try await CompletedDocuments().document((id: "d", pdf: Self.blankPage("/CropBox [20 30 600 780] /TrimBox [50 100 480 600]")), fill: fill)
        let raster = try await Self.render(drawn, page: 1)
        #expect(raster.dark(in: (x: 500, y: 50, width: 14, height: 14)) == 0)
        #expect(raster.dark(in: Self.frames[1]) > 20 && raster.dark(in: Self.frames[2]) > 10, "inside it, drawn")
    }

    @Test func aPageListedTwiceInThePageTreeNeitherFailsNorShiftsTheInk() async throws {
        let twice = Self.blankPage("", kids: 2)
        let drawn = try await CompletedDocuments().document((id: "d", pdf: twice), fill: try Self.fill())
        let raster = try await Self.render(drawn, page: 1)
        #expect(raster.dark(in: Self.frames[0]) > 60)
        let combined = try await CompletedDocuments().combined([(id: "d", pdf: twice), (id: "d", pdf: Self.blankPage(""))], fill: try Self.fill(), certificate: nil)
        let last = try await Self.render(combined, page: try Self.pageCount(combined))
        #expect(last.dark(in: Self.frames[0]) > 60, "the second document's ink stays on its own page")
        // One document and a certificate: one qpdf run when the page counts agree, else two; the
        // certificate never gets the document's ink either way.
        let certificate = PDFWriter.document(pages: [PDFWriter.Page(width: 612, height: 792, content: "BT /F1 12 Tf 72 700 Td (Certificate here) Tj ET")])
        for document in [Self.blankPage(""), twice] {
            let joined = try await CompletedDocuments().combined([(id: "d", pdf: document)], fill: try Self.fill(), certificate: certificate)
            let pages = try Self.pageCount(joined)
            #expect(pages == (document == twice ? 3 : 2))
            #expect(try await Self.render(joined, page: 1).dark(in: Self.frames[0]) > 60)
            let end = try await Self.render(joined, page: pages)
            #expect(end.dark(in: Self.frames[0]) == 0 && end.dark(in: Self.frames[2]) == 0, "the certificate gets no ink")
            #expect(try await Self.text(joined).contains("Certificate here"))
        }
        let single = try await CompletedDocuments().drawnAndJoined((id: "d", pdf: Self.blankPage("")), fill: try Self.fill(), certificate: certificate, account: "")
        #expect(single != nil, "a plain page tree takes the one-run path")
        let doubled = try await CompletedDocuments().drawnAndJoined((id: "d", pdf: twice), fill: try Self.fill(), certificate: certificate, account: "")
        #expect(doubled == nil, "a page listed twice falls back to two runs")
    }

    @Test func certificateLinesWrapToThePageAndHostileNamesStayBounded() {
        let line = CompletionCertificate.Line(text: String(repeating: "word ", count: 200) + String(repeating: "x", count: 5000))
        let wrapped = CompletionCertificate.wrap(line, width: 504)
        #expect(wrapped.count <= 50 && wrapped.count > 10)
        for part in wrapped { #expect(PDFWriter.helveticaWidth(part.text, size: 9) <= 504 + 0.001, "\(part.text.prefix(40))") }
        #expect(PDFWriter.text("a(b)\\c é 日") == "(a\\(b\\)\\\\c \\351 ?)")
    }
}

@Suite struct ISOStrokesTests {
    @Test func strokesBreakWhereThePenLiftsOrTheClockSkips() throws {
        let record = try ISOSignatureRecord(bytes: try CompletedDocumentTests.signatureRecord())
        let strokes = record.strokes()
        #expect(strokes.map(\.count) == [30, 10], "a lift (S = 0) ends the first stroke")
        #expect(abs(strokes[0][0].x - 10) < 1e-9 && abs(strokes[0][0].y - 20) < 1e-9, "positions in millimetres")
        #expect(record.strokes(maxPoints: 5).map(\.count) == [5], "bounded")
        // Without S: a gap in T breaks the stroke.
        let values: [Int32] = [100, 100, 0, 200, 200, 1, 300, 300, 5, 400, 400, 6]
        let gapped = try ISOSignatureRecord(
            descriptions: [
                ISOChannelDescription(channel: .x, scaling: ISOScalingValue(approximating: 100), minimum: 100, maximum: 400),
                ISOChannelDescription(channel: .y, scaling: ISOScalingValue(approximating: 100), minimum: 100, maximum: 400),
                ISOChannelDescription(channel: .t, scaling: ISOScalingValue(approximating: 200)),
            ],
            values: values)
        #expect(gapped.strokes().map(\.count) == [2, 2])
    }
}

/// The REST routes over a real coordinator: what a device signer and a captive signer gave, drawn.
@Suite struct CompletedDocumentRESTTests {
    static func get(_ rig: CaptiveRig, _ path: String) async throws -> (status: Int, body: Data, headers: [String: String]) {
        var request = URLRequest(url: try #require(URL(string: "http://\(rig.http)/restapi/v2.1/accounts/acme\(path)")))
        request.setValue("Bearer \(rig.token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return (http.statusCode, data, headers)
    }

    @Test(.timeLimit(.minutes(2))) func devicesAndCaptiveSignersInkIsDrawnAndTheCertificateSaysWhereTheySigned() async throws {
        let rig = try await CaptiveRig()
        // Signed on the device: an in-person signer's signature and a text tab (SyntheticSigner
        // fills text with the signer's name).
        let document = try DocumentBuilder().documentId("doc1").name("NDA").pdfBytes(SamplePDF.make(pages: 1, title: "NDA")).build()
        let walkIn = try RecipientBuilder(type: .inPersonSigner).recipientId("1").hostName("Ann Host").hostEmail("ann@example.com")
            .signerName("Bob Walkin").build()
        let signFrame = (x: 100.0, y: 500.0, width: 160.0, height: 50.0)
        let tabs = [
            try TabBuilder(type: .signHere).tabId("sign").documentId("doc1").recipientId("1").pageNumber(1)
                .frame(x: signFrame.x, y: signFrame.y, width: signFrame.width, height: signFrame.height).build(),
            try TabBuilder(type: .text).tabId("name").documentId("doc1").recipientId("1").pageNumber(1).frame(x: 100, y: 300, width: 200, height: 24).build(),
        ]
        let offline = try EnvelopeBuilder().envelopeName("NDA").emailSubject("Please sign the NDA").addDocument(document)
            .addRecipient(walkIn, tabs: tabs).transactionId(UUID().uuidString).build()
        let deviceID = try await rig.sync(offline, mode: .offline)

        let drawn = try await Self.get(rig, "/envelopes/\(deviceID)/documents/doc1")
        #expect(drawn.status == 200 && drawn.headers["content-type"] == "application/pdf", "\(drawn.status) \(String(decoding: drawn.body.prefix(300), as: UTF8.self))")
        #expect(drawn.headers["content-disposition"] == "file; filename=\"NDA.pdf\"")
        let page = try await CompletedDocumentTests.render(drawn.body, page: 1)
        #expect(page.dark(in: signFrame) > 100, "the device signer's ink is in the sign-here tab")
        let text = try await CompletedDocumentTests.text(drawn.body)
        #expect(text.contains("Bob Walkin") && text.contains("NDA"), "\(text)")

        let aggregate = try #require(try await rig.services.envelopes.store.envelope(id: deviceID, accountID: "acme"))
        let payload = try SyncPayload(canonicalBytes: Array(aggregate.envelope.payload))
        let device = try #require(try await rig.services.envelopes.store.devices(id: aggregate.envelope.deviceID, limit: 4).first)
        let certificate = try await Self.get(rig, "/envelopes/\(deviceID)/documents/certificate")
        let words = try await CompletedDocumentTests.text(certificate.body).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("Certificate of Completion") && words.contains(deviceID) && words.contains("Bob Walkin"), "\(words)")
        #expect(words.contains("on device \(aggregate.envelope.deviceID), enrolled key SHA-256 \(CompletionCertificate.hex(SHA256.hash(data: device.publicKey)))"), "\(words)")
        let record = try #require(payload.signatures.first?.isoRecord)
        #expect(words.contains("signature record SHA-256 \(CompletionCertificate.hex(SHA256.hash(data: record)))"), "\(words)")

        // Signed on the captive page: a drawn signature, a text value and a ticked checkbox.
        let captiveID = try await rig.sync(
            CaptiveRig.envelope([EmbeddedSigner(id: "1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-1", order: 1)]))
        let url = try await rig.url(captiveID, .clientUserID("cu-1")).url
        let opened = try await rig.request("GET", url)
        let session = try #require(opened.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        let csrf = try #require(opened.body.range(of: "name=\"csrf\" value=\"").flatMap { opened.body[$0.upperBound...].split(separator: "\"").first })
        let points = (0..<40).map { "[\(10 + $0 * 7),\(20 + ($0 % 8) * 6),0.5,\($0 * 16),0]" }.joined(separator: ",")
        let drawing = "{\"pointerType\":\"pen\",\"width\":300,\"height\":100,\"points\":[\(points)]}"
        let form = "action=finish&csrf=\(csrf)&tab-1=Zurich&tab-2=on&sig-0=" + (drawing.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let finished = try await rig.request("POST", url, body: form, cookie: session)
        #expect(finished.status == 303, "\(finished.status) \(finished.body.prefix(400))")

        let tabs2 = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/envelopes/\(captiveID)/recipients/1/tabs", token: rig.token)
        #expect((tabs2.json["textTabs"] as? [[String: Any]])?.first?["value"] as? String == "Zurich", "list_tabs shows what the captive signer entered: \(tabs2.json)")
        #expect((tabs2.json["checkboxTabs"] as? [[String: Any]])?.first?["selected"] as? String == "true", "\(tabs2.json)")

        let combined = try await Self.get(rig, "/envelopes/\(captiveID)/documents/combined?certificate=false")
        #expect(combined.status == 200 && (try? CompletedDocumentTests.pageCount(combined.body)) == 2)
        let first = try await CompletedDocumentTests.render(combined.body, page: 1)
        #expect(first.dark(in: (x: 72, y: 220, width: 200, height: 26)) > 20, "the text value")
        #expect(first.dark(in: (x: 300, y: 220, width: 24, height: 24)) > 10, "the ticked checkbox")
        let second = try await CompletedDocumentTests.render(combined.body, page: 2)
        #expect(second.dark(in: (x: 72, y: 520, width: 200, height: 60)) > 60, "the drawn signature on page 2")
        #expect(try await CompletedDocumentTests.text(combined.body).contains("Zurich"))
        let captiveCertificate = try await CompletedDocumentTests.text(try await Self.get(rig, "/envelopes/\(captiveID)/documents/certificate").body)
        #expect(captiveCertificate.contains("on the captive signing page at"), "\(captiveCertificate)")

        let unknown = try await Self.get(rig, "/envelopes/\(captiveID)/documents/doc9")
        #expect(unknown.status == 400 && String(decoding: unknown.body, as: UTF8.self).contains("DOCUMENT_DOES_NOT_EXIST"))
        await rig.tearDown()
    }
}
