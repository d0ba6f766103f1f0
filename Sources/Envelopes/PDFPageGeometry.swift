import Foundation

/// A rectangle in PDF user space (points), normalised so that `x0 <= x1` and `y0 <= y1`.
public struct PDFRect: Hashable, Sendable {
    public var x0: Double
    public var y0: Double
    public var x1: Double
    public var y1: Double

    /// Creates a rectangle from two opposite corners in any order.
    public init(_ ax: Double, _ ay: Double, _ bx: Double, _ by: Double) {
        x0 = min(ax, bx)
        y0 = min(ay, by)
        x1 = max(ax, bx)
        y1 = max(ay, by)
    }

    public var width: Double { x1 - x0 }
    public var height: Double { y1 - y0 }

    /// The overlap of two rectangles, or `nil` when they do not overlap.
    public func intersection(_ other: PDFRect) -> PDFRect? {
        let r = PDFRect(max(x0, other.x0), max(y0, other.y0), min(x1, other.x1), min(y1, other.y1))
        return x0 < other.x1 && other.x0 < x1 && y0 < other.y1 && other.y0 < y1 ? r : nil
    }
}

/// Where a page is shown: its boxes and rotation, and the size a viewer draws it at.
public struct PDFPageGeometry: Hashable, Sendable {
    /// The page's MediaBox (inherited through the page tree; US Letter when missing or unusable).
    public var mediaBox: PDFRect
    /// The CropBox clipped to the MediaBox: the region a viewer shows (the MediaBox when absent).
    public var cropBox: PDFRect
    /// `/Rotate`, normalised to 0, 90, 180 or 270 (clockwise, as viewers turn the page).
    public var rotation: Int
    /// The page's boxes and rotation as the file writes them (inherited where the PDF inherits
    /// them, nothing clipped or normalised): what another tool that places one page on another
    /// (qpdf's overlay) reads, so that a page made with the same values lines up with this one.
    public var written: Written

    public struct Written: Sendable, Hashable {
        public var cropBox: PDFRect?
        public var trimBox: PDFRect?
        /// `/Rotate` as written (0 when absent).
        public var rotation: Int
        /// `/UserUnit` when the page has one.
        public var userUnit: Double?

        public init(cropBox: PDFRect? = nil, trimBox: PDFRect? = nil, rotation: Int = 0, userUnit: Double? = nil) {
            self.cropBox = cropBox
            self.trimBox = trimBox
            self.rotation = rotation
            self.userUnit = userUnit
        }
    }

    /// The shown width in points (the CropBox's, turned by the rotation).
    public var width: Double { rotation % 180 == 0 ? cropBox.width : cropBox.height }
    /// The shown height in points.
    public var height: Double { rotation % 180 == 0 ? cropBox.height : cropBox.width }

    /// US Letter, upright: what a page without readable boxes is taken to be.
    public static let letter = PDFPageGeometry(mediaBox: PDFRect(0, 0, 612, 792), cropBox: PDFRect(0, 0, 612, 792), rotation: 0)

    public init(mediaBox: PDFRect, cropBox: PDFRect, rotation: Int, written: Written? = nil) {
        self.mediaBox = mediaBox
        self.cropBox = cropBox
        self.rotation = rotation
        self.written = written ?? Written(rotation: rotation)
    }

    /// The matrix `[a b c d e f]` (a content stream's `cm`) that maps the shown page — points from
    /// its bottom-left corner as a viewer shows it, x right, y up — to the page's user space:
    /// the CropBox's origin and `/Rotate` undone.
    public var shownToUserSpace: [Double] {
        let c = cropBox
        switch rotation {
        case 90: return [0, 1, -1, 0, c.x1, c.y0]
        case 180: return [-1, 0, 0, -1, c.x1, c.y1]
        case 270: return [0, -1, 1, 0, c.x0, c.y1]
        default: return [1, 0, 0, 1, c.x0, c.y0]
        }
    }

    /// The PDF's limits on a page side (ISO 32000-1, annex C): anything outside is damaged or hostile.
    static let sides = 3.0...14_400.0
}

extension PDFInspector {
    /// The shown geometry of every page, in page-tree order, read from the page tree with
    /// inheritance of `/MediaBox`, `/CropBox` and `/Rotate` (and each page's own `/TrimBox` and `/UserUnit`).
    ///
    /// Bounded like ``inspect(_:)``: at most ``Limits/maxPages`` pages, a page tree at most 32
    /// levels deep, cycles cut. A box that is missing, malformed or outside 3–14,400 points falls
    /// back to the inherited one (US Letter at the root); a rotation that is not a multiple of 90
    /// counts as 0.
    /// - Throws: ``PDFInspectionError`` when the bytes are not a PDF or have no readable page tree.
    public func pageGeometry(_ data: Data) throws(PDFInspectionError) -> [PDFPageGeometry] {
        guard data.count <= limits.maxBytes else {
            throw PDFInspectionError(code: .tooLarge, message: "the document is \(data.count) bytes, over the \(limits.maxBytes)-byte limit")
        }
        let bytes = [UInt8](data)
        guard Self.find(Array("%PDF-".utf8), in: bytes, from: 0, to: min(bytes.count, 1024)) != nil else {
            throw PDFInspectionError(code: .notPDF, message: "the document does not start with a %PDF- header")
        }
        var reader = Reader(bytes: bytes, limits: limits)
        if let (table, root) = reader.xrefTableAndRoot(), let pages = reader.pageGeometry(root: root, table: table), !pages.isEmpty {
            return pages
        }
        let table = reader.offsets()
        if let pages = reader.pageGeometry(root: reader.scannedRoot(table), table: table), !pages.isEmpty {
            return pages
        }
        throw PDFInspectionError(code: .unreadablePageTree, message: "the document's page tree cannot be read")
    }
}

extension Reader {
    static let maxTreeDepth = 32

    /// What a page-tree node passes down to its kids.
    private struct Inherited {
        var media = PDFPageGeometry.letter.mediaBox
        var crop: PDFRect?
        var rotation = 0
        var writtenCrop: PDFRect?
        var writtenRotation = 0
    }

    /// Walks the page tree under the catalog `root` names, depth first.
    func pageGeometry(root: PDFObject?, table: [Int: Int]) -> [PDFPageGeometry]? {
        guard let catalog = resolve(root, in: table)?.dict, let top = catalog["Pages"] else { return nil }
        var pages: [PDFPageGeometry] = []
        var visited: Set<Int> = []
        walk(top, Inherited(), depth: 0, table: table, visited: &visited, into: &pages)
        return pages
    }

    private func walk(
        _ node: PDFObject, _ inherited: Inherited, depth: Int, table: [Int: Int], visited: inout Set<Int>,
        into pages: inout [PDFPageGeometry]
    ) {
        guard depth < Self.maxTreeDepth, pages.count < limits.maxPages else { return }
        if case .ref(let number, _) = node {
            // A node reached twice is a cycle or a shared kid: both are damage, so it is drawn once.
            guard visited.insert(number).inserted else { return }
        }
        guard let dict = resolve(node, in: table)?.dict else { return }
        var here = inherited
        if let media = rect(dict["MediaBox"], table: table) { here.media = media }
        if let crop = rect(dict["CropBox"], table: table) { here.crop = crop }
        if let crop = rect(dict["CropBox"], table: table, anySize: true) { here.writtenCrop = crop }
        if case .int(let rotate)? = resolve(dict["Rotate"], in: table) {
            here.writtenRotation = rotate
            here.rotation = rotate % 90 == 0 ? ((rotate % 360) + 360) % 360 : 0
        }
        if dict["Type"] == .name("Page") || (dict["Type"] == nil && dict["Kids"] == nil) {
            // A CropBox never reaches past the MediaBox; one that misses it entirely is ignored.
            var crop = here.crop.flatMap { $0.intersection(here.media) } ?? here.media
            if !PDFPageGeometry.sides.contains(crop.width) || !PDFPageGeometry.sides.contains(crop.height) { crop = here.media }
            let userUnit: Double? =
                switch resolve(dict["UserUnit"], in: table) {
                case .int(let value)?: Double(value)
                case .real(let value)?: value.isFinite ? value : nil
                default: nil
                }
            let written = PDFPageGeometry.Written(
                cropBox: here.writtenCrop, trimBox: rect(dict["TrimBox"], table: table, anySize: true), rotation: here.writtenRotation,
                userUnit: userUnit)
            pages.append(PDFPageGeometry(mediaBox: here.media, cropBox: crop, rotation: here.rotation, written: written))
            return
        }
        guard case .array(let kids)? = resolve(dict["Kids"], in: table) else { return }
        for kid in kids {
            walk(kid, here, depth: depth + 1, table: table, visited: &visited, into: &pages)
            if pages.count >= limits.maxPages { return }
        }
    }

    /// A rectangle from a four-number array, or `nil` when it is not one or is implausibly sized.
    /// With `anySize`, any four finite numbers under a million in size (what the file says, for
    /// ``PDFPageGeometry/written``).
    func rect(_ object: PDFObject?, table: [Int: Int], anySize: Bool = false) -> PDFRect? {
        guard case .array(let items)? = resolve(object, in: table), items.count == 4 else { return nil }
        var numbers: [Double] = []
        for item in items {
            switch resolve(item, in: table) {
            case .int(let value)?: numbers.append(Double(value))
            case .real(let value)?: numbers.append(value)
            default: return nil
            }
        }
        let box = PDFRect(numbers[0], numbers[1], numbers[2], numbers[3])
        if anySize { return numbers.allSatisfy({ $0.isFinite && abs($0) < 1e6 }) ? box : nil }
        guard PDFPageGeometry.sides.contains(box.width), PDFPageGeometry.sides.contains(box.height),
            abs(box.x0) < 1e6, abs(box.y0) < 1e6
        else { return nil }
        return box
    }
}
