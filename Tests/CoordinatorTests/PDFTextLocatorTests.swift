import Envelopes
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

/// Where anchor tabs land (docs/rest-api.md, "Anchor tabs"): `pdftotext`'s words, parsed strictly,
/// and the anchor matching rules, on words written by hand and on a real PDF's.
@Suite struct PDFTextLocatorTests {
    static func word(_ text: String, line: Int, left: Double, width: Double, page: Int = 1) -> PDFTextLocator.Word {
        PDFTextLocator.Word(page: page, line: line, text: text, left: left, top: 100, width: width, height: 12)
    }

    static let words = [
        word("Please", line: 0, left: 72, width: 36), word("Sign", line: 0, left: 112, width: 24), word("Here:", line: 0, left: 140, width: 30),
        word("Signature", line: 1, left: 72, width: 54), word("SIGN", line: 2, left: 72, width: 28, page: 2),
    ]

    @Test func anAnchorMayCrossWordsOfOneLineAndTakesTheirBox() {
        let boxes = PDFTextLocator.occurrences(of: "sign  here", in: Self.words)
        #expect(boxes.count == 1)
        let box = boxes.first
        #expect(box?.left == 112 && box?.page == 1 && box?.top == 100 && box?.bottom == 112)
        // "here" is four of "Here:"'s five characters.
        #expect(box.map { abs($0.right - (140 + 30 * 4 / 5)) < 1e-9 } == true)
    }

    @Test func matchingIsCaseInsensitiveAndByPartOfAWordUnlessAskedOtherwise() {
        #expect(PDFTextLocator.occurrences(of: "sign", in: Self.words).count == 3, "Sign, Signature and SIGN")
        let exact = PDFTextLocator.occurrences(of: "Sign", in: Self.words, matching: .init(caseSensitive: true))
        #expect(exact.map(\.left) == [112, 72], "Sign and Signature")
        let whole = PDFTextLocator.occurrences(of: "sign", in: Self.words, matching: .init(wholeWord: true))
        #expect(whole.map(\.page) == [1, 2], "Sign and SIGN, not Signature")
        #expect(PDFTextLocator.occurrences(of: "Here", in: Self.words, matching: .init(wholeWord: true)).count == 1, "a colon is no letter")
        #expect(PDFTextLocator.occurrences(of: "Here: Signature", in: Self.words).isEmpty, "an anchor does not run across lines")
        #expect(PDFTextLocator.occurrences(of: "   ", in: Self.words).isEmpty)
    }

    @Test func theSearchFindsEveryStartInLinearTime() {
        func starts(_ pattern: String, _ text: String) -> [Int] {
            PDFTextLocator.matches(of: Array(pattern.unicodeScalars), in: Array(text.unicodeScalars))
        }
        #expect(starts("aa", "aaaa") == [0, 1, 2], "every start (the caller keeps the ones that do not overlap)")
        #expect(starts("abab", "xabababx") == [1, 3])
        #expect(starts("abc", "ab").isEmpty && starts("", "abc").isEmpty)
        // The case a naive search makes quadratic: a long run of one letter and an anchor that
        // fails only at its end. Linear here, so this is quick at any size; the result is what counts.
        let text = String(repeating: "a", count: 200_000), pattern = String(repeating: "a", count: 500) + "b"
        #expect(starts(pattern, text).isEmpty)
        #expect(starts(pattern, text + "b") == [200_000 - 500])
        let words = [Self.word(text, line: 0, left: 0, width: 100)]
        #expect(PDFTextLocator.occurrences(of: "aaaa", in: words).count == 50_000, "occurrences do not overlap")
    }

    @Test func pdftotextOutputIsReadStrictly() throws {
        let header = "level\tpage_num\tpar_num\tblock_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
        let good = header + "1\t1\t0\t0\t0\t0\t0\t0\t612\t792\t-1\t###PAGE###\n5\t1\t0\t0\t0\t0\t72.00\t54.77\t50.66\t22.20\t100\tNDA\n"
            + "5\t1\t0\t1\t0\t0\t72.00\t97.95\t32.69\t12.95\t100\tPage\n5\t1\t0\t1\t0\t1\t108.58\t97.95\t7.78\t12.95\t100\t1\n"
        let words = try PDFTextLocator.parse(Array(good.utf8), maxWords: 10)
        #expect(words.map(\.text) == ["NDA", "Page", "1"])
        #expect(words.map(\.line) == [0, 1, 1])
        for bad in [
            "no header\n", header + "5\t1\t0\t0\t0\t0\t72\t54\n", header + "5\t1\t0\t0\t0\t0\tnan\t54\t1\t1\t100\tx\n",
            header + "5\t0\t0\t0\t0\t0\t72\t54\t1\t1\t100\tx\n", header + "5\t1\t0\t0\t0\t0\t72\t54\t-1\t1\t100\tx\n",
            header + "5\t1\t0\t0\t0\t0\t1e300\t54\t1\t1\t100\tx\n",
        ] {
            #expect(throws: PDFTextLocator.Failure.self, "\(bad)") { try PDFTextLocator.parse(Array(bad.utf8), maxWords: 10) }
        }
        #expect(throws: PDFTextLocator.Failure.self) { try PDFTextLocator.parse([0xFF, 0xFE], maxWords: 10) }
        #expect(throws: PDFTextLocator.Failure.self, "more words than allowed") { try PDFTextLocator.parse(Array(good.utf8), maxWords: 2) }
    }

    /// The real tool on the sample PDF: "Page" printed at x 72, baseline 684, 14 pt Helvetica
    /// (ascender 0.718 em) on each of its pages.
    @Test func theRealToolFindsTheSamplePDFsText() async throws {
        let words = try await PDFTextLocator().words(in: SamplePDF.make(pages: 2, title: "NDA"))
        let boxes = PDFTextLocator.occurrences(of: "page", in: words)
        #expect(boxes.map(\.page) == [1, 2])
        for box in boxes {
            #expect(abs(box.left - 72) < 0.1 && abs(box.top - (792 - 684 - 0.718 * 14)) < 0.1, "\(box)")
        }
        await #expect(throws: PDFTextLocator.Failure.self, "not a PDF") { _ = try await PDFTextLocator().words(in: Data("not a pdf".utf8)) }
        let missing = PDFTextLocator(executable: "/nonexistent/pdftotext")
        await #expect(throws: PDFTextLocator.Failure.missing("/nonexistent/pdftotext")) { _ = try await missing.words(in: Data()) }
    }
}
