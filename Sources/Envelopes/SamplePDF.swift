import Foundation

/// Generates small, valid PDFs for tests and simulated devices.
///
/// Each page shows the title and its page number in Helvetica. The cross-reference table carries
/// exact byte offsets, so strict readers (`qpdf --check`, `pdfinfo`) accept the output.
///
/// ```swift
/// let pdf = SamplePDF.make(pages: 2, title: "NDA")
/// ```
public enum SamplePDF {
    /// Makes an N-page PDF.
    ///
    /// - Parameters:
    ///   - pages: The number of pages; negative values give 0 (a PDF with an empty page tree,
    ///     which ``PDFInspector`` rejects — useful for tests).
    ///   - title: Printed on each page and stored as the document title. Non-ASCII characters
    ///     become `?`.
    /// - Returns: The PDF bytes.
    public static func make(pages: Int, title: String = "SignFleet sample") -> Data {
        let pageCount = max(0, pages)
        let safeTitle = escape(title)
        // Objects: 1 catalog, 2 pages, 3 font, 4 info, then a page and its content per page.
        var objects: [String] = []
        let kids = (0..<pageCount).map { "\(5 + 2 * $0) 0 R" }.joined(separator: " ")
        objects.append("<< /Type /Catalog /Pages 2 0 R >>")
        objects.append("<< /Type /Pages /Kids [\(kids)] /Count \(pageCount) /MediaBox [0 0 612 792] >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        objects.append("<< /Title (\(safeTitle)) /Producer (SignFleet SamplePDF) >>")
        for index in 0..<pageCount {
            let contentNumber = 6 + 2 * index
            objects.append(
                "<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> >> /Contents \(contentNumber) 0 R >>")
            let text = "BT /F1 24 Tf 72 720 Td (\(safeTitle)) Tj 0 -36 Td /F1 14 Tf (Page \(index + 1) of \(pageCount)) Tj ET"
            objects.append("<< /Length \(text.utf8.count) >>\nstream\n\(text)\nendstream")
        }

        return PDFWriter.serialize(objects: objects, trailer: "/Root 1 0 R /Info 4 0 R")
    }

    /// Escapes a PDF literal string and keeps it to printable ASCII.
    private static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(200) {
            switch scalar {
            case "(", ")", "\\": out += "\\" + String(scalar)
            case " "..."~": out.unicodeScalars.append(scalar)
            default: out += "?"
            }
        }
        return out
    }
}
