import Foundation

/// Writes small PDFs from page content streams: the sample documents, the ink and values drawn
/// over a completed document's pages, and certificates of completion.
///
/// Output is PDF 1.4 with a classic cross-reference table of exact offsets (`qpdf --check`
/// accepts it), uncompressed content streams, and three standard fonts that need no embedding:
/// `/F1` Helvetica, `/F2` Helvetica-Bold and `/F3` Helvetica-Oblique, in WinAnsiEncoding (`text(_:)`).
public enum PDFWriter {
    /// One page: its boxes and its content stream (PDF operators in the page's user space).
    public struct Page: Sendable, Hashable {
        public var mediaBox: PDFRect
        public var content: String
        /// `/CropBox`, `/TrimBox`, `/Rotate` and `/UserUnit`, when the page must carry them (an
        /// overlay that mirrors another page's boxes).
        public var cropBox: PDFRect?
        public var trimBox: PDFRect?
        public var rotation: Int?
        public var userUnit: Double?

        /// A page of `width` × `height` points, origin bottom-left.
        public init(width: Double, height: Double, content: String) {
            self.mediaBox = PDFRect(0, 0, width, height)
            self.content = content
        }

        public init(mediaBox: PDFRect, content: String, cropBox: PDFRect? = nil, trimBox: PDFRect? = nil, rotation: Int? = nil, userUnit: Double? = nil) {
            self.mediaBox = mediaBox
            self.content = content
            self.cropBox = cropBox
            self.trimBox = trimBox
            self.rotation = rotation
            self.userUnit = userUnit
        }
    }

    /// A document of `pages` (at least one page is up to the caller; none makes an empty page tree).
    public static func document(pages: [Page], title: String? = nil, producer: String = "SignFleet") -> Data {
        // Objects: 1 catalog, 2 pages, 3 to 5 fonts, 6 info, then a page and its content per page.
        var objects: [String] = []
        let kids = (0..<pages.count).map { "\(7 + 2 * $0) 0 R" }.joined(separator: " ")
        objects.append("<< /Type /Catalog /Pages 2 0 R >>")
        objects.append("<< /Type /Pages /Kids [\(kids)] /Count \(pages.count) >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Oblique /Encoding /WinAnsiEncoding >>")
        objects.append("<< /Title \(text(title ?? "")) /Producer \(text(producer)) >>")
        for (index, page) in pages.enumerated() {
            var boxes = "/MediaBox \(box(page.mediaBox))"
            if let crop = page.cropBox { boxes += " /CropBox \(box(crop))" }
            if let trim = page.trimBox { boxes += " /TrimBox \(box(trim))" }
            if let rotation = page.rotation { boxes += " /Rotate \(rotation)" }
            if let unit = page.userUnit { boxes += " /UserUnit \(number(unit))" }
            objects.append(
                "<< /Type /Page /Parent 2 0 R \(boxes) "
                    + "/Resources << /Font << /F1 3 0 R /F2 4 0 R /F3 5 0 R >> >> /Contents \(8 + 2 * index) 0 R >>")
            objects.append("<< /Length \(page.content.utf8.count) >>\nstream\n\(page.content)\nendstream")
        }
        return serialize(objects: objects, trailer: "/Root 1 0 R /Info 6 0 R")
    }

    /// A PDF of `objects` (numbered from 1, generation 0) with a cross-reference table of their
    /// exact offsets; `trailer` is the trailer dictionary's entries besides `/Size`.
    public static func serialize(objects: [String], trailer: String) -> Data {
        var out = Data()
        // The comment with high bytes tells transfer tools the file is binary.
        out.append(contentsOf: Array("%PDF-1.4\n%".utf8) + [0xE2, 0xE3, 0xCF, 0xD3, 0x0A])
        var offsets: [Int] = []
        for (index, body) in objects.enumerated() {
            offsets.append(out.count)
            out.append(contentsOf: Array("\(index + 1) 0 obj\n\(body)\nendobj\n".utf8))
        }
        let xrefOffset = out.count
        var xref = "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets {
            let digits = String(offset)
            xref += String(repeating: "0", count: max(0, 10 - digits.count)) + digits + " 00000 n \n"
        }
        xref += "trailer\n<< /Size \(objects.count + 1) \(trailer) >>\nstartxref\n\(xrefOffset)\n%%EOF\n"
        out.append(contentsOf: Array(xref.utf8))
        return out
    }

    /// A PDF literal string for the WinAnsi-encoded fonts: printable ASCII as it is (with `(`, `)`
    /// and `\` escaped), Latin-1 letters and signs as octal escapes, anything else (other scripts,
    /// control characters) as `?`. At most `limit` characters.
    public static func text(_ value: String, limit: Int = 500) -> String {
        var out = "("
        for scalar in value.unicodeScalars.prefix(limit) {
            switch scalar.value {
            case 0x28, 0x29, 0x5C: out += "\\" + String(scalar)
            case 0x20...0x7E: out.unicodeScalars.append(scalar)
            case 0xA0...0xFF: out += "\\" + String(scalar.value, radix: 8)
            default: out += "?"
            }
        }
        return out + ")"
    }

    /// A number as content streams want it: at most three decimals, no exponent, within ±10⁹
    /// (larger values are clamped; not a number is 0).
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return value.isNaN ? "0" : (value > 0 ? "1000000000" : "-1000000000") }
        let rounded = (min(max(value, -1e9), 1e9) * 1000).rounded() / 1000
        if rounded == rounded.rounded() { return String(Int(rounded)) }
        return String(format: "%.3f", rounded)
    }

    /// A rectangle as `[x0 y0 x1 y1]`.
    public static func box(_ rect: PDFRect) -> String {
        "[\(number(rect.x0)) \(number(rect.y0)) \(number(rect.x1)) \(number(rect.y1))]"
    }

    /// Helvetica's advance widths (per 1,000 units of the font size) for printable ASCII, from
    /// Adobe's core-14 metrics; other characters are taken as 556 (a digit's width).
    public static func helveticaWidth(_ value: String, size: Double) -> Double {
        var units = 0
        for scalar in value.unicodeScalars {
            let v = Int(scalar.value)
            units += (32...126).contains(v) ? helveticaWidths[v - 32] : 556
        }
        return Double(units) * size / 1000
    }

    private static let helveticaWidths: [Int] = [
        278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,  // space … /
        556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,  // 0 … ?
        1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,  // @ … O
        667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,  // P … _
        333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,  // ` … o
        556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,  // p … ~
    ]
}
