import FleetTesting
import Foundation
import Testing
@testable import Envelopes

private func inspectError(_ data: Data, limits: PDFInspector.Limits = .init()) -> PDFInspectionError.Code? {
    do {
        _ = try PDFInspector(limits: limits).inspect(data)
        return nil
    } catch {
        return error.code
    }
}

private func replacing(_ data: Data, _ target: String, with replacement: String) -> Data {
    Data(String(decoding: data, as: UTF8.self).replacingOccurrences(of: target, with: replacement).utf8)
}

/// Builds a PDF by hand from object bodies, with an optional (possibly wrong) xref table.
private func handmadePDF(_ objects: [String], trailer: String?, xref: Bool, separator: String = "\n") -> Data {
    var text = "%PDF-1.7" + separator
    var offsets: [Int] = []
    for (i, body) in objects.enumerated() {
        offsets.append(text.utf8.count)
        text += "\(i + 1) 0 obj\(separator)\(body)\(separator)endobj\(separator)"
    }
    if xref {
        let at = text.utf8.count
        text += "xref\(separator)0 \(objects.count + 1)\(separator)0000000000 65535 f\r\n"
        for o in offsets { text += String(format: "%010d 00000 n\r\n", o) }
        text += "trailer\(separator)\(trailer ?? "<< >>")\(separator)startxref\(separator)\(at)\(separator)"
    } else if let trailer {
        text += "trailer\(separator)\(trailer)\(separator)"
    }
    text += "%%EOF"
    return Data(text.utf8)
}

@Suite("PDF inspection")
struct PDFInspectorTests {
    @Test(arguments: [1, 2, 3, 7, 50, 400])
    func countsGeneratedPages(_ pages: Int) throws {
        let info = try PDFInspector().inspect(SamplePDF.make(pages: pages, title: "T (\\) é"))
        #expect(info.pageCount == pages)
        #expect(info.method == .pageTree)
        #expect(info.version == "1.4")
    }

    @Test func rejectsNonPDFAndEmptyData() {
        #expect(inspectError(Data()) == .notPDF)
        #expect(inspectError(Data("Hello, world".utf8)) == .notPDF)
        #expect(inspectError(Data("%PDF-".utf8)) == .notPDF)
        #expect(inspectError(Data("%PDF-x\n%%EOF".utf8)) == .notPDF)
        #expect(inspectError(Data(repeating: 0x20, count: 1024) + SamplePDF.make(pages: 1)) == .notPDF)
    }

    @Test func acceptsASmallPreambleBeforeTheHeader() throws {
        // Offsets in the xref are then off by the preamble, so the scan finds the page tree.
        let info = try PDFInspector().inspect(Data("junk\n".utf8) + SamplePDF.make(pages: 2))
        #expect(info.pageCount == 2)
    }

    @Test func rejectsZeroPagesAndTooLargeFiles() {
        #expect(inspectError(SamplePDF.make(pages: 0)) == .noPages)
        #expect(inspectError(SamplePDF.make(pages: 3), limits: .init(maxBytes: 200)) == .tooLarge)
        #expect(inspectError(SamplePDF.make(pages: 3), limits: .init(maxPages: 2)) == .implausiblePageCount)
    }

    @Test func rejectsEveryTruncation() {
        let pdf = SamplePDF.make(pages: 3)
        for cut in stride(from: 0, to: pdf.count - 6, by: 7) {
            let code = inspectError(pdf.prefix(cut))
            #expect(code == .truncated || code == .notPDF, "cut at \(cut) gave \(String(describing: code))")
        }
    }

    @Test func rejectsGarbageAfterTheHeader() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<20 {
            let garbage = (0..<Int.random(in: 10...4000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let data = Data("%PDF-1.7\n".utf8) + Data(garbage) + Data("\n%%EOF\n".utf8)
            #expect(inspectError(data) == .unreadablePageTree)
        }
        #expect(inspectError(Data("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF".utf8)) == .unreadablePageTree)
    }

    @Test func rejectsImplausibleDeclaredCounts() {
        let pdf = SamplePDF.make(pages: 2)
        #expect(inspectError(replacing(pdf, "/Count 2", with: "/Count 999999999999")) == .implausiblePageCount)
        #expect(inspectError(replacing(pdf, "/Count 2", with: "/Count 9000")) == .implausiblePageCount)
        #expect(inspectError(replacing(pdf, "/Count 2", with: "/Count -3")) == .implausiblePageCount)
        // Beyond Int: not an integer, so the tree is unreadable and the page objects are counted.
        let info = try? PDFInspector().inspect(replacing(pdf, "/Count 2", with: "/Count 99999999999999999999999"))
        #expect(info?.pageCount == 2)
        #expect(info?.method == .pageObjectScan)
    }

    @Test func damagedXrefFallsBackToScanning() throws {
        // Removing spaces shifts every offset after the first object, so the xref is wrong.
        let pdf = replacing(SamplePDF.make(pages: 4), "<< /Type /Pages /Kids", with: "<</Type/Pages/Kids")
        let info = try PDFInspector().inspect(replacing(pdf, "1 0 obj\n", with: "1  0  obj\r\n"))
        #expect(info.pageCount == 4)
        #expect(info.method == .pageTreeScan)
    }

    @Test func readsWhitespaceAndCommentVariants() throws {
        let objects = [
            "<</Type/Catalog/Pages 2 0 R>>",
            "<<%comment\r/Type\t/Pages/Kids[3 0 R 4 0 R 5 0 R]/Count\r\n3>>",
            "<</Type/Page/Parent 2 0 R>>", "<</Type/Page/Parent 2 0 R>>", "<</Type /Page /Parent 2 0 R>>",
        ]
        for separator in ["\n", "\r\n", "\r", " "] {
            let info = try PDFInspector().inspect(handmadePDF(objects, trailer: "<</Size 6/Root 1 0 R>>", xref: true, separator: separator))
            #expect(info.pageCount == 3, "separator \(Array(separator.utf8))")
            #expect(info.method == .pageTree)
        }
    }

    @Test func indirectCountAndEscapedNames() throws {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pa#67es /Kids [4 0 R] /Count 3 0 R >>",
            "1",
            "<< /Type /Page /Parent 2 0 R /Annots [ (a \\) ( nested ) string) <414243> [1 2.5 [true false null]] ] >>",
        ]
        let info = try PDFInspector().inspect(handmadePDF(objects, trailer: "<< /Root 1 0 R /Size 5 >>", xref: true))
        #expect(info.pageCount == 1)
        #expect(info.method == .pageTree)
    }

    @Test func withoutXrefUsesTheTrailerOrCatalogOrPageObjects() throws {
        let tree = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            "<< /Type /Page /Parent 2 0 R >>", "<< /Type /Page /Parent 2 0 R >>",
        ]
        let withTrailer = try PDFInspector().inspect(handmadePDF(tree, trailer: "<< /Root 1 0 R >>", xref: false))
        #expect(withTrailer.pageCount == 2)
        #expect(withTrailer.method == .pageTreeScan)
        let catalogOnly = try PDFInspector().inspect(handmadePDF(tree, trailer: nil, xref: false))
        #expect(catalogOnly.pageCount == 2)
        #expect(catalogOnly.method == .pageTreeScan)
        let pagesOnly = try PDFInspector().inspect(handmadePDF(
            ["<< /Type /Page >>", "<< /Type /Page >>", "<< /Type /Page >>", "<< /Type /Font >>"], trailer: nil, xref: false))
        #expect(pagesOnly.pageCount == 3)
        #expect(pagesOnly.method == .pageObjectScan)
    }

    @Test func followsIncrementalUpdates() throws {
        let original = SamplePDF.make(pages: 3)
        let text = String(decoding: original, as: UTF8.self)
        let oldXref = try #require(text.range(of: "startxref\n").map { text[$0.upperBound...].prefix { $0.isNumber } })
        var update = "2 0 obj\n<< /Type /Pages /Kids [5 0 R 7 0 R] /Count 2 >>\nendobj\n"
        let objectAt = original.count
        let xrefAt = objectAt + update.utf8.count
        update += "xref\n0 1\n0000000000 65535 f \n2 1\n\(String(format: "%010d", objectAt)) 00000 n \n"
        update += "trailer\n<< /Size 11 /Root 1 0 R /Prev \(oldXref) >>\nstartxref\n\(xrefAt)\n%%EOF\n"
        let info = try PDFInspector().inspect(original + Data(update.utf8))
        #expect(info.pageCount == 2)
        #expect(info.method == .pageTree)
    }

    @Test func survivesHostileStructures() {
        let deep = String(repeating: "[", count: 50_000) + String(repeating: "]", count: 50_000)
        let deepDict = String(repeating: "<< /A ", count: 10_000) + String(repeating: ">> ", count: 10_000)
        let loopRefs = handmadePDF(
            ["<< /Type /Catalog /Pages 2 0 R >>", "3 0 R", "2 0 R"], trailer: "<< /Root 1 0 R /Prev 0 >>", xref: true)
        let selfPrev = replacing(SamplePDF.make(pages: 1), "/Root 1 0 R", with: "/Root 1 0 R /Prev 9")
        // Thousands of unterminated objects: each parse must stop at the next object, not at EOF.
        let unterminated = Data(("%PDF-1.4\n" + (0..<20_000).map { "\($0) 0 obj [ (x " }.joined() + "\n%%EOF").utf8)
        let inputs: [Data] = [
            unterminated,
            Data("%PDF-1.4\n1 0 obj\n<< /Type /Pages /Kids \(deep) /Count 1 >>\nendobj\n%%EOF".utf8),
            Data("%PDF-1.4\n1 0 obj\n\(deepDict)\nendobj\n%%EOF".utf8),
            Data("%PDF-1.4\n1 0 obj\n(unterminated string\n%%EOF".utf8),
            Data("%PDF-1.4\nxref\n0 99999999999\ntrailer\nstartxref\n9\n%%EOF".utf8),
            Data("%PDF-1.4\nstartxref\n-5\n%%EOF".utf8),
            Data("%PDF-1.4\nstartxref\n999999999999999\n%%EOF".utf8),
            loopRefs,
            selfPrev,
        ]
        for input in inputs {
            // Only that it returns (or throws) matters here.
            _ = inspectError(input)
        }
        #expect(inspectError(loopRefs) != nil)
        #expect(inspectError(selfPrev) == nil)
    }

    @Test func seededRandomInputsNeverCrash() {
        let seed = testSeed("PDF fuzz")
        var rng = SeededGenerator(seed: seed)
        let bases = [[UInt8](SamplePDF.make(pages: 3)), [UInt8](Data(base64Encoded: qpdfObjectStreamPDF) ?? Data())]
        let fragments = ["obj", "endobj", " 0 R", "/Type", "/Pages", "/Page", "/Count", "<<", ">>", "[", "]", "(", ")",
                         "trailer", "startxref", "xref", "%%EOF", "\n", " ", "#", "\\", "12", "-1", "/Root"]
        for round in 0..<400 {
            var bytes = bases[round % 2]
            for _ in 0..<Int.random(in: 1...12, using: &rng) {
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(contentsOf: Array(fragments.randomElement(using: &rng)!.utf8), at: at)
                default: bytes.replaceSubrange(at..<min(bytes.count, at + Int.random(in: 1...40, using: &rng)), with: [])
                }
                if bytes.isEmpty { bytes = [0] }
            }
            do {
                let info = try PDFInspector().inspect(Data(bytes))
                #expect((1...10_000).contains(info.pageCount), "seed \(seed) round \(round)")
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
        for _ in 0..<100 {
            let body = (0..<Int.random(in: 0...2000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = inspectError(Data("%PDF-1.5\n".utf8) + Data(body) + Data("%%EOF".utf8))
            _ = inspectError(Data(body))
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/qpdf")))
    func qpdfAcceptsGeneratedPDFs() throws {
        for pages in [1, 3] {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-sample-\(UUID().uuidString).pdf")
            try SamplePDF.make(pages: pages, title: "Check").write(to: url)
            defer { try? FileManager.default.removeItem(at: url) }
            let (status, _, errors) = try ChildProcess.runToCompletion("/usr/bin/qpdf", ["--check", url.path])
            #expect(status == 0, "qpdf --check failed for \(pages) pages: \(errors)")
        }
    }
}
