import Envelopes
import Foundation
import SignatureCapture

/// The ink and values of an envelope's filled tabs, drawn as overlay pages for one document.
/// Tabs are placed in points from the top-left corner of the page as a viewer shows it (its
/// CropBox, clipped to the MediaBox, turned by `/Rotate`); each stamp page is drawn in those
/// coordinates (flipped to PDF's bottom-left origin) and mapped into the document page's user
/// space by a `cm` (``PDFPageGeometry/shownToUserSpace``). The stamp page carries the document
/// page's boxes, `/Rotate` and `/UserUnit` as written, so that `qpdf --overlay`, which fits each
/// overlay page's TrimBox (else CropBox, else MediaBox) to the page's and undoes both pages'
/// rotation, places it with the identity.
///
/// What is drawn (docs/rest-api.md, "Completed documents"):
/// - `signHere` / `initialHere` with a signature: its strokes scaled to fit the tab (aspect kept, 5%
///   margin), centred, 1 pt wide, in dark blue; a name typed on the captive page: the name in
///   Helvetica-Oblique;
/// - text-like tabs with a value: the value in Helvetica on one line (`dateSigned` and `fullName`
///   only once their recipient signed);
/// - a selected checkbox: an X across it; a selected radio button: a filled square at its centre.
enum DocumentStamp {
    /// Frames beyond this many points from the page's corner are not drawn (hostile or damaged).
    static let maxCoordinate = 100_000.0

    /// The stamp pages of one document, or nil when nothing is drawn on any of its pages.
    static func pages(for documentID: String, geometry: [PDFPageGeometry], fill: EnvelopeFill) -> [PDFWriter.Page]? {
        var contents = [String](repeating: "", count: geometry.count)
        var drawn = false
        let signers = Set(fill.entries.filter(\.isSigned).map(\.tab.recipientId))
        for entry in fill.entries where entry.tab.documentId == documentID {
            guard entry.tab.pageNumber >= 1, entry.tab.pageNumber <= geometry.count else { continue }
            let index = entry.tab.pageNumber - 1
            // The signing date and name are the signer's act: drawn once they signed, not from a sender's value.
            if entry.tab.type == .dateSigned || entry.tab.type == .fullName, !signers.contains(entry.tab.recipientId) { continue }
            let ops = operators(for: entry, pageHeight: geometry[index].height)
            guard !ops.isEmpty else { continue }
            contents[index] += ops
            drawn = true
        }
        guard drawn else { return nil }
        return zip(geometry, contents).map { page, content in
            let matrix = page.shownToUserSpace.map(PDFWriter.number).joined(separator: " ")
            return PDFWriter.Page(
                mediaBox: page.mediaBox, content: content.isEmpty ? "" : "q \(matrix) cm\n\(content)Q\n", cropBox: page.written.cropBox,
                trimBox: page.written.trimBox, rotation: page.written.rotation, userUnit: page.written.userUnit)
        }
    }

    /// The content-stream operators that draw one tab's fill, in a `q … Q` of their own; empty when
    /// there is nothing to draw.
    static func operators(for entry: EnvelopeFill.Entry, pageHeight: Double) -> String {
        let frame = entry.tab.frame
        let limit = maxCoordinate
        guard abs(frame.x) <= limit, abs(frame.y) <= limit, frame.width > 0, frame.height > 0, frame.width <= limit, frame.height <= limit else {
            return ""  // also every frame with a NaN, which fails each comparison
        }
        // The tab's rectangle in PDF coordinates (bottom-left origin).
        let left = frame.x, bottom = pageHeight - frame.y - frame.height
        let n = PDFWriter.number
        switch entry.tab.type {
        case .signHere, .initialHere:
            if let bytes = entry.signature, let record = try? ISOSignatureRecord(bytes: bytes) {
                return ink(record.strokes(), left: left, bottom: bottom, width: frame.width, height: frame.height)
            }
            // A typed signature (the captive page's "type your name") is its name, in an oblique face;
            // a value a sender put on a signing tab is no signature and is not drawn.
            guard entry.typed else { return "" }
            return line(entry.tab.value, font: "F3", color: "0.05 0.1 0.45", left: left, bottom: bottom, width: frame.width, height: frame.height)
        case .checkbox:
            guard entry.tab.selected else { return "" }
            let inset = min(frame.width, frame.height) * 0.15
            let (x0, y0, x1, y1) = (left + inset, bottom + inset, left + frame.width - inset, bottom + frame.height - inset)
            return "q 0 0 0 RG 1.2 w 1 J \(n(x0)) \(n(y0)) m \(n(x1)) \(n(y1)) l S \(n(x0)) \(n(y1)) m \(n(x1)) \(n(y0)) l S Q\n"
        case .radio:
            guard entry.tab.selected else { return "" }
            let side = min(frame.width, frame.height) * 0.5
            return "q 0 0 0 rg \(n(left + (frame.width - side) / 2)) \(n(bottom + (frame.height - side) / 2)) \(n(side)) \(n(side)) re f Q\n"
        default:
            return line(entry.tab.value, font: "F1", color: "0 0 0", left: left, bottom: bottom, width: frame.width, height: frame.height)
        }
    }

    /// A value on one line in a rectangle: as tall as 75% of it (at most 12 pt), narrowed until it
    /// fits its width (at least 5 pt), vertically centred.
    static func line(_ value: String?, font: String, color: String, left: Double, bottom: Double, width: Double, height: Double) -> String {
        guard let value = value?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return "" }
        let text = String(value.unicodeScalars.prefix(500).map { CharacterSet.newlines.contains($0) ? " " : Character($0) })
        var size = min(height * 0.75, 12)
        let natural = PDFWriter.helveticaWidth(text, size: size)
        if natural > width - 2, natural > 0 { size = max(5, size * (width - 2) / natural) }
        let baseline = bottom + (height - size) / 2 + size * 0.22
        let n = PDFWriter.number
        return "q \(color) rg BT /\(font) \(n(size)) Tf \(n(left + 1)) \(n(baseline)) Td \(PDFWriter.text(text)) Tj ET Q\n"
    }

    /// Strokes (millimetres, y down) fitted into a rectangle (points, bottom-left origin).
    static func ink(_ strokes: [ISOSignatureRecord.Stroke], left: Double, bottom: Double, width: Double, height: Double) -> String {
        let points = strokes.joined()
        guard let first = points.first else { return "" }
        var (minX, maxX, minY, maxY) = (first.x, first.x, first.y, first.y)
        for p in points {
            minX = min(minX, p.x); maxX = max(maxX, p.x); minY = min(minY, p.y); maxY = max(maxY, p.y)
        }
        let spanX = max(maxX - minX, 0.001), spanY = max(maxY - minY, 0.001)
        let scale = min(width * 0.9 / spanX, height * 0.9 / spanY)
        guard scale.isFinite, scale > 0 else { return "" }
        let offsetX = left + (width - spanX * scale) / 2, offsetY = bottom + (height - spanY * scale) / 2
        let n = PDFWriter.number
        var out = "q 0.05 0.1 0.45 RG 1 w 1 J 1 j\n"
        for stroke in strokes {
            for (i, p) in stroke.enumerated() {
                let x = offsetX + (p.x - minX) * scale
                // The record's y grows downwards; PDF's upwards.
                let y = offsetY + (maxY - p.y) * scale
                out += "\(n(x)) \(n(y)) \(i == 0 ? "m" : "l")\n"
            }
            // A stroke of one point is a dot: a zero-length line with round caps.
            if stroke.count == 1, let p = stroke.first {
                out += "\(n(offsetX + (p.x - minX) * scale)) \(n(offsetY + (maxY - p.y) * scale)) l\n"
            }
            out += "S\n"
        }
        return out + "Q\n"
    }
}
