import Foundation

/// Why a PDF could not be read.
public struct PDFInspectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. Compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code.
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No `%PDF-` header in the first 1024 bytes.
        public static let notPDF = Code("pdf.notPDF")
        /// Larger than ``PDFInspector/Limits/maxBytes``.
        public static let tooLarge = Code("pdf.tooLarge")
        /// No `%%EOF` marker near the end: the file was cut short.
        public static let truncated = Code("pdf.truncated")
        /// Neither the page tree nor any page object could be found.
        public static let unreadablePageTree = Code("pdf.unreadablePageTree")
        /// The page count is zero.
        public static let noPages = Code("pdf.noPages")
        /// The declared page count is negative, above the limit, or impossible for the file's size.
        public static let implausiblePageCount = Code("pdf.implausiblePageCount")
    }

    /// What kind of failure.
    public var code: Code
    /// What was wrong, for people.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [\(code)]" }
}

/// What ``PDFInspector`` learnt about a PDF.
public struct PDFInfo: Hashable, Sendable {
    /// How the page count was found.
    public enum Method: String, Hashable, Sendable {
        /// `/Count` of the root `/Pages` node reached from the trailer's `/Root` (the reliable way).
        case pageTree
        /// The root `/Pages` node was found by scanning objects (the cross-reference data was bad).
        case pageTreeScan
        /// Counted `/Type /Page` objects because no page tree could be resolved.
        case pageObjectScan
    }

    /// The header version, for example `"1.7"`.
    public var version: String
    /// The number of pages.
    public var pageCount: Int
    /// How the count was found.
    public var method: Method
}

/// A small, bounded PDF reader that checks the header and finds the page count.
///
/// It never crashes on hostile input: sizes, nesting, reference chains and scans are all capped.
/// It reads classic cross-reference tables and follows the trailer's `/Root` to the page tree's
/// `/Count`. When that fails (damaged offsets, cross-reference streams) it reconstructs object
/// offsets by scanning for `N G obj` — decompressing Flate object streams (`/Type /ObjStm`), where
/// modern writers keep the page tree — and as a last resort counts `/Type /Page` objects.
/// Encrypted PDFs and streams with other filters or predictors are not decoded.
///
/// ```swift
/// let info = try PDFInspector().inspect(SamplePDF.make(pages: 3))
/// // info.pageCount == 3
/// ```
public struct PDFInspector: Sendable {
    /// Bounds on what the inspector accepts and how hard it looks.
    public struct Limits: Hashable, Sendable {
        /// The largest file accepted.
        public var maxBytes: Int
        /// The largest page count accepted.
        public var maxPages: Int
        /// The most objects the reconstruction scan records.
        public var maxObjects: Int

        /// Creates limits (defaults: 64 MiB, 10,000 pages, 200,000 objects).
        public init(maxBytes: Int = 64 << 20, maxPages: Int = 10_000, maxObjects: Int = 200_000) {
            self.maxBytes = maxBytes
            self.maxPages = maxPages
            self.maxObjects = maxObjects
        }
    }

    /// The bounds in force.
    public var limits: Limits

    /// Creates an inspector with the given limits.
    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Reads a PDF's version and page count.
    ///
    /// - Parameter data: The file's bytes.
    /// - Returns: The version and page count.
    /// - Throws: ``PDFInspectionError`` when the bytes are not a readable PDF.
    public func inspect(_ data: Data) throws(PDFInspectionError) -> PDFInfo {
        guard data.count <= limits.maxBytes else {
            throw PDFInspectionError(
                code: .tooLarge,
                message: "the document is \(data.count) bytes, over the \(limits.maxBytes)-byte limit; split or compress it")
        }
        let bytes = [UInt8](data)
        guard let headerAt = Self.find(Array("%PDF-".utf8), in: bytes, from: 0, to: min(bytes.count, 1024)) else {
            throw PDFInspectionError(
                code: .notPDF,
                message: "the document does not start with a %PDF- header; only PDF documents can be signed")
        }
        let version = Self.readVersion(bytes, at: headerAt + 5)
        guard !version.isEmpty else {
            throw PDFInspectionError(code: .notPDF, message: "the %PDF- header has no version number; the file is not a PDF")
        }
        // Real files may carry a little junk after %%EOF, but a file without it was cut short.
        let tailStart = max(headerAt, bytes.count - 1024)
        guard Self.findLast(Array("%%EOF".utf8), in: bytes, from: tailStart, to: bytes.count) != nil else {
            throw PDFInspectionError(
                code: .truncated,
                message: "the document has no %%EOF marker at its end; it looks truncated, so re-export or re-download it")
        }

        var reader = Reader(bytes: bytes, limits: limits)
        let count: Int
        let method: PDFInfo.Method
        if let found = reader.pageCountFromXref() {
            (count, method) = (found, .pageTree)
        } else if let found = reader.pageCountFromScannedTree() {
            (count, method) = (found, .pageTreeScan)
        } else if let found = reader.pageObjectCount(), found > 0 {
            (count, method) = (found, .pageObjectScan)
        } else {
            throw PDFInspectionError(
                code: .unreadablePageTree,
                message: "the document's page tree cannot be read (damaged, encrypted or fully compressed); re-save it as a standard PDF")
        }
        guard count > 0 else {
            if count == 0 {
                throw PDFInspectionError(code: .noPages, message: "the document has no pages; add a PDF with at least one page")
            }
            throw PDFInspectionError(code: .implausiblePageCount, message: "the document declares \(count) pages; the file is damaged")
        }
        // Every page needs a page dictionary of a few bytes; a count beyond that is a lie.
        guard count <= limits.maxPages, count <= bytes.count / 8 else {
            throw PDFInspectionError(
                code: .implausiblePageCount,
                message: "the document declares \(count) pages, more than its size allows or over the \(limits.maxPages)-page limit; the file is damaged or hostile")
        }
        return PDFInfo(version: version, pageCount: count, method: method)
    }

    static func readVersion(_ bytes: [UInt8], at start: Int) -> String {
        var end = start
        while end < bytes.count, end - start < 8, bytes[end] == UInt8(ascii: ".") || (bytes[end] >= 0x30 && bytes[end] <= 0x39) {
            end += 1
        }
        guard end > start, bytes[start] >= 0x30, bytes[start] <= 0x39 else { return "" }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int, to: Int) -> Int? {
        guard !needle.isEmpty, from >= 0, to <= bytes.count, to - from >= needle.count else { return nil }
        var i = from
        while i <= to - needle.count {
            if bytes[i] == needle[0] {
                var j = 1
                while j < needle.count, bytes[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }

    static func findLast(_ needle: [UInt8], in bytes: [UInt8], from: Int, to: Int) -> Int? {
        guard !needle.isEmpty, from >= 0, to <= bytes.count, to - from >= needle.count else { return nil }
        var i = to - needle.count
        while i >= from {
            var j = 0
            while j < needle.count, bytes[i + j] == needle[j] { j += 1 }
            if j == needle.count { return i }
            i -= 1
        }
        return nil
    }
}

// MARK: - Objects and lexing

/// A parsed PDF object, as much of it as page counting needs.
enum PDFObject: Equatable {
    case null
    case bool(Bool)
    case int(Int)
    case real(Double)
    case name(String)
    case string
    case array([PDFObject])
    case dict([String: PDFObject])
    case ref(Int, Int)
    case keyword(String)

    var dict: [String: PDFObject]? {
        if case .dict(let d) = self { return d }
        return nil
    }
}

struct ObjectRef: Hashable {
    var number: Int
    var generation: Int
}

struct Reader {
    let bytes: [UInt8]
    let limits: PDFInspector.Limits
    /// Bounds nesting so hostile arrays and dictionaries cannot exhaust the stack.
    static let maxDepth = 32
    static let maxXrefSections = 32
    static let maxRefHops = 16

    /// Where lexing stops. Objects found by scanning are parsed only up to the next object's
    /// start, so a hostile file cannot make every object parse run to the end (quadratic work).
    var end: Int
    private var scannedOffsets: [Int: Int]?
    private var scannedEnds: [Int: Int] = [:]
    /// Decompressed object streams and where each compressed object sits in them.
    private var objectStreams: [[UInt8]] = []
    private var compressed: [Int: (stream: Int, start: Int, end: Int)] = [:]
    /// Caps each decompressed stream, and all of them together.
    static let maxStreamOutput = 16 << 20

    init(bytes: [UInt8], limits: PDFInspector.Limits) {
        self.bytes = bytes
        self.limits = limits
        self.end = bytes.count
    }

    static func isWhitespace(_ b: UInt8) -> Bool {
        b == 0 || b == 9 || b == 10 || b == 12 || b == 13 || b == 32
    }

    static func isDelimiter(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "<"), UInt8(ascii: ">"),
             UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"), UInt8(ascii: "}"),
             UInt8(ascii: "/"), UInt8(ascii: "%"):
            return true
        default:
            return false
        }
    }

    static func isRegular(_ b: UInt8) -> Bool { !isWhitespace(b) && !isDelimiter(b) }

    func skipSpace(_ pos: inout Int) {
        while pos < end {
            let b = bytes[pos]
            if Self.isWhitespace(b) {
                pos += 1
            } else if b == UInt8(ascii: "%") {
                while pos < end, bytes[pos] != 10, bytes[pos] != 13 { pos += 1 }
            } else {
                return
            }
        }
    }

    /// Reads a run of regular characters (a number or keyword).
    func readRegular(_ pos: inout Int) -> String? {
        let start = pos
        while pos < end, Self.isRegular(bytes[pos]), pos - start < 64 { pos += 1 }
        guard pos > start else { return nil }
        return String(decoding: bytes[start..<pos], as: UTF8.self)
    }

    /// Parses one object at `pos`. Integers followed by `G R` become references.
    func parseObject(_ pos: inout Int, depth: Int = 0) -> PDFObject? {
        guard depth < Self.maxDepth else { return nil }
        skipSpace(&pos)
        guard pos < end else { return nil }
        let b = bytes[pos]
        switch b {
        case UInt8(ascii: "/"):
            pos += 1
            let start = pos
            while pos < end, Self.isRegular(bytes[pos]), pos - start < 128 { pos += 1 }
            return .name(Self.decodeName(bytes[start..<pos]))
        case UInt8(ascii: "("):
            return skipLiteralString(&pos) ? .string : nil
        case UInt8(ascii: "<"):
            if pos + 1 < end, bytes[pos + 1] == UInt8(ascii: "<") {
                pos += 2
                return parseDict(&pos, depth: depth)
            }
            // Hex string.
            pos += 1
            while pos < end, bytes[pos] != UInt8(ascii: ">") { pos += 1 }
            guard pos < end else { return nil }
            pos += 1
            return .string
        case UInt8(ascii: "["):
            pos += 1
            var items: [PDFObject] = []
            while true {
                skipSpace(&pos)
                guard pos < end else { return nil }
                if bytes[pos] == UInt8(ascii: "]") {
                    pos += 1
                    return .array(items)
                }
                guard items.count < 100_000, let item = parseObject(&pos, depth: depth + 1) else { return nil }
                items.append(item)
            }
        default:
            guard Self.isRegular(b), let token = readRegular(&pos) else { return nil }
            if let n = Int(token) {
                // Look ahead for "G R" to recognise an indirect reference.
                var look = pos
                skipSpace(&look)
                if let g = readRegular(&look), let gen = Int(g), gen >= 0 {
                    skipSpace(&look)
                    if look < end, bytes[look] == UInt8(ascii: "R"),
                       look + 1 >= end || !Self.isRegular(bytes[look + 1]) {
                        pos = look + 1
                        return n >= 0 ? .ref(n, gen) : .null
                    }
                }
                return .int(n)
            }
            if let value = Double(token), value.isFinite { return .real(value) }
            if Double(token) != nil { return .null }
            switch token {
            case "true": return .bool(true)
            case "false": return .bool(false)
            case "null": return .null
            default: return .keyword(token)
            }
        }
    }

    func parseDict(_ pos: inout Int, depth: Int) -> PDFObject? {
        var dict: [String: PDFObject] = [:]
        while true {
            skipSpace(&pos)
            guard pos < end else { return nil }
            if bytes[pos] == UInt8(ascii: ">") {
                guard pos + 1 < end, bytes[pos + 1] == UInt8(ascii: ">") else { return nil }
                pos += 2
                return .dict(dict)
            }
            guard case .name(let key)? = parseObject(&pos, depth: depth + 1),
                  dict.count < 10_000,
                  let value = parseObject(&pos, depth: depth + 1)
            else { return nil }
            dict[key] = value
        }
    }

    func skipLiteralString(_ pos: inout Int) -> Bool {
        var nesting = 0
        while pos < end {
            let b = bytes[pos]
            pos += 1
            switch b {
            case UInt8(ascii: "\\"): pos += 1
            case UInt8(ascii: "("): nesting += 1
            case UInt8(ascii: ")"):
                nesting -= 1
                if nesting == 0 { return true }
            default: break
            }
        }
        return false
    }

    /// Decodes `#xx` escapes in a name (`/Pa#67e` is `/Page`).
    static func decodeName(_ raw: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        var i = raw.startIndex
        while i < raw.endIndex {
            if raw[i] == UInt8(ascii: "#"), i + 2 < raw.endIndex,
               let v = UInt8(String(decoding: raw[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) {
                out.append(v)
                i += 3
            } else {
                out.append(raw[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Indirect objects

    /// Parses `N G obj <object>` at `offset`, checking the object number when given.
    func parseIndirect(at offset: Int, expecting number: Int?) -> PDFObject? {
        var pos = offset
        return parseIndirect(&pos, expecting: number)
    }

    /// Parses `N G obj <object>` at `pos`, leaving `pos` after the object.
    func parseIndirect(_ pos: inout Int, expecting number: Int?) -> PDFObject? {
        guard pos >= 0, pos < end else { return nil }
        skipSpace(&pos)
        guard let n = readRegular(&pos).flatMap({ Int($0) }) else { return nil }
        if let number, n != number { return nil }
        skipSpace(&pos)
        guard readRegular(&pos).flatMap({ Int($0) }) != nil else { return nil }
        skipSpace(&pos)
        guard readRegular(&pos) == "obj" else { return nil }
        return parseObject(&pos)
    }

    /// The decoded data of the stream whose dictionary ends at `pos`, or `nil` when absent,
    /// malformed, too large or encoded with anything but plain Flate.
    func streamData(_ dict: [String: PDFObject], after pos: Int, table: [Int: Int], budget: Int) -> [UInt8]? {
        var p = pos
        skipSpace(&p)
        guard readRegular(&p) == "stream" else { return nil }
        if p < end, bytes[p] == 13 { p += 1 }
        if p < end, bytes[p] == 10 { p += 1 }
        var raw: ArraySlice<UInt8>
        if case .int(let length)? = resolve(dict["Length"], in: table), length >= 0, length <= end - p {
            raw = bytes[p..<(p + length)]
        } else if let stop = PDFInspector.find(Array("endstream".utf8), in: bytes, from: p, to: end) {
            raw = bytes[p..<stop]
        } else {
            return nil
        }
        switch dict["Filter"] {
        case nil:
            return raw.count <= budget ? Array(raw) : nil
        case .name("FlateDecode")?, .array([.name("FlateDecode")])?:
            if case .dict(let parms)? = dict["DecodeParms"], let predictor = parms["Predictor"], predictor != .int(1) {
                return nil
            }
            // A trailing end-of-line before `endstream` is not part of the data; inflate ignores it.
            if raw.last == 10 { raw = raw.dropLast() }
            return Inflater.inflateZlib(Array(raw), maxOutput: min(budget, Self.maxStreamOutput))
        default:
            return nil
        }
    }

    /// Decompresses every `/Type /ObjStm` and records where its objects sit.
    mutating func loadObjectStreams(table: [Int: Int]) {
        var budget = limits.maxBytes
        for (n, offset) in table.sorted(by: { $0.value < $1.value }) {
            var bounded = self
            bounded.end = scannedEnds[offset] ?? bytes.count
            var pos = offset
            guard budget > 0, case .dict(let dict)? = bounded.parseIndirect(&pos, expecting: n),
                  dict["Type"] == .name("ObjStm"),
                  case .int(let count)? = dict["N"], case .int(let first)? = dict["First"],
                  count > 0, count <= limits.maxObjects, first >= 0,
                  let data = bounded.streamData(dict, after: pos, table: table, budget: budget),
                  first <= data.count
            else { continue }
            budget -= data.count
            let stream = Reader(bytes: data, limits: limits)
            var header = 0
            var entries: [(number: Int, start: Int)] = []
            for _ in 0..<count {
                stream.skipSpace(&header)
                guard let number = stream.readRegular(&header).flatMap({ Int($0) }), number >= 0 else { break }
                stream.skipSpace(&header)
                guard let relative = stream.readRegular(&header).flatMap({ Int($0) }), relative >= 0,
                      relative <= data.count - first else { break }
                entries.append((number, first + relative))
            }
            let index = objectStreams.count
            objectStreams.append(data)
            let starts = entries.map(\.start).sorted()
            for entry in entries where table[entry.number] == nil && compressed[entry.number] == nil {
                let stop = starts.first(where: { $0 > entry.start }) ?? data.count
                compressed[entry.number] = (index, entry.start, stop)
                if compressed.count >= limits.maxObjects { return }
            }
        }
    }

    /// Object `n`: from `table` (file offsets), or else from a decompressed object stream.
    func object(_ n: Int, in table: [Int: Int]) -> PDFObject? {
        if let offset = table[n] { return parseBounded(at: offset, expecting: n) }
        guard let location = compressed[n] else { return nil }
        var stream = Reader(bytes: objectStreams[location.stream], limits: limits)
        stream.end = location.end
        var pos = location.start
        return stream.parseObject(&pos)
    }

    /// Every object number the reader can reach (uncompressed and compressed).
    func allObjectNumbers(in table: [Int: Int]) -> [Int] {
        Array(Set(table.keys).union(compressed.keys))
    }

    mutating func offsets() -> [Int: Int] {
        if let scannedOffsets { return scannedOffsets }
        let scanned = scanObjects()
        scannedOffsets = scanned
        let starts = Set(scanned.values).sorted()
        for (index, start) in starts.enumerated() {
            scannedEnds[start] = index + 1 < starts.count ? starts[index + 1] : bytes.count
        }
        loadObjectStreams(table: scanned)
        return scanned
    }

    /// Parses an indirect object, bounded by the next scanned object's start when known.
    func parseBounded(at offset: Int, expecting number: Int?) -> PDFObject? {
        var bounded = self
        bounded.end = scannedEnds[offset] ?? bytes.count
        return bounded.parseIndirect(at: offset, expecting: number)
    }

    /// Finds every `N G obj` by scanning, keeping the last definition of each number (as
    /// incremental updates do).
    func scanObjects() -> [Int: Int] {
        var result: [Int: Int] = [:]
        let obj = Array("obj".utf8)
        var i = 0
        while let at = PDFInspector.find(obj, in: bytes, from: i, to: bytes.count) {
            i = at + 3
            if at + 3 < bytes.count, Self.isRegular(bytes[at + 3]) { continue }
            // Walk back over "G" and "N" with whitespace between.
            var p = at - 1
            guard p >= 0, Self.isWhitespace(bytes[p]) else { continue }
            while p >= 0, Self.isWhitespace(bytes[p]) { p -= 1 }
            let genEnd = p + 1
            while p >= 0, bytes[p] >= 0x30, bytes[p] <= 0x39, genEnd - p <= 10 { p -= 1 }
            guard p + 1 < genEnd, p >= 0, Self.isWhitespace(bytes[p]) else { continue }
            while p >= 0, Self.isWhitespace(bytes[p]) { p -= 1 }
            let numEnd = p + 1
            while p >= 0, bytes[p] >= 0x30, bytes[p] <= 0x39, numEnd - p <= 12 { p -= 1 }
            let numStart = p + 1
            guard numStart < numEnd, p < 0 || !Self.isRegular(bytes[p]),
                  let n = Int(String(decoding: bytes[numStart..<numEnd], as: UTF8.self))
            else { continue }
            result[n] = numStart
            if result.count >= limits.maxObjects { break }
        }
        return result
    }

    /// Resolves a reference (following reference chains a bounded number of times).
    func resolve(_ start: PDFObject?, in table: [Int: Int]) -> PDFObject? {
        var current = start
        var hops = 0
        while case .ref(let n, _)? = current {
            hops += 1
            guard hops <= Self.maxRefHops else { return nil }
            current = self.object(n, in: table)
        }
        return current
    }

    /// Reads `/Count` of the `/Pages` node that `/Root` names.
    func pageCount(root: PDFObject?, table: [Int: Int]) -> Int? {
        guard let catalog = resolve(root, in: table)?.dict,
              let pages = resolve(catalog["Pages"], in: table)?.dict,
              pages["Type"] == nil || pages["Type"] == .name("Pages"),
              case .int(let count)? = resolve(pages["Count"], in: table)
        else { return nil }
        return count
    }

    // MARK: Strategy 1: cross-reference tables

    mutating func pageCountFromXref() -> Int? {
        guard let (table, root) = xrefTableAndRoot() else { return nil }
        return pageCount(root: root, table: table)
    }

    /// The object offsets of the classic cross-reference sections and the trailer's `/Root`.
    func xrefTableAndRoot() -> ([Int: Int], PDFObject)? {
        guard let startxref = PDFInspector.findLast(
            Array("startxref".utf8), in: bytes, from: max(0, bytes.count - 2048), to: bytes.count)
        else { return nil }
        var pos = startxref + 9
        skipSpace(&pos)
        guard var offset = readRegular(&pos).flatMap({ Int($0) }) else { return nil }
        var table: [Int: Int] = [:]
        var root: PDFObject?
        var seen: Set<Int> = []
        // Newest section first; older sections (/Prev) only fill in what is missing.
        for _ in 0..<Self.maxXrefSections {
            guard !seen.contains(offset), let (entries, trailer) = parseXrefSection(at: offset) else { break }
            seen.insert(offset)
            for (n, o) in entries where table[n] == nil { table[n] = o }
            if root == nil { root = trailer["Root"] }
            guard case .int(let prev)? = trailer["Prev"] else { break }
            offset = prev
        }
        guard let root else { return nil }
        return (table, root)
    }

    /// Parses `xref` subsections and the `trailer` dictionary at `offset`.
    func parseXrefSection(at offset: Int) -> ([Int: Int], [String: PDFObject])? {
        guard offset >= 0, offset < bytes.count else { return nil }
        var pos = offset
        skipSpace(&pos)
        guard readRegular(&pos) == "xref" else { return nil }
        var entries: [Int: Int] = [:]
        while true {
            skipSpace(&pos)
            let save = pos
            guard let first = readRegular(&pos) else { return nil }
            if first == "trailer" { break }
            guard let start = Int(first), start >= 0, start <= limits.maxObjects * 16 else { return nil }
            skipSpace(&pos)
            guard let count = readRegular(&pos).flatMap({ Int($0) }), count >= 0,
                  count <= limits.maxObjects, count <= (bytes.count - pos) / 18 + 1
            else { return nil }
            for index in 0..<count {
                skipSpace(&pos)
                guard let o = readRegular(&pos).flatMap({ Int($0) }) else { return nil }
                skipSpace(&pos)
                guard readRegular(&pos).flatMap({ Int($0) }) != nil else { return nil }
                skipSpace(&pos)
                let kind = readRegular(&pos)
                if kind == "n" {
                    entries[start + index] = o
                } else if kind != "f" {
                    return nil
                }
            }
            guard pos > save else { return nil }
        }
        guard case .dict(let trailer)? = parseObject(&pos) else { return nil }
        return (entries, trailer)
    }

    // MARK: Strategy 2: reconstructed offsets

    mutating func pageCountFromScannedTree() -> Int? {
        let table = offsets()
        guard !table.isEmpty else { return nil }
        if let count = pageCount(root: scannedRoot(table), table: table) { return count }
        // No usable root: take the /Pages node without a /Parent.
        for n in allObjectNumbers(in: table).sorted() {
            if let dict = object(n, in: table)?.dict,
               dict["Type"] == .name("Pages"), dict["Parent"] == nil,
               case .int(let count)? = resolve(dict["Count"], in: table) {
                return count
            }
        }
        return nil
    }

    /// The `/Root` named by the last trailer or cross-reference stream (or the catalog itself),
    /// for a table of scanned offsets.
    func scannedRoot(_ table: [Int: Int]) -> PDFObject? {
        // The last trailer (or cross-reference stream dictionary) names the root.
        var root: PDFObject?
        if let at = PDFInspector.findLast(Array("trailer".utf8), in: bytes, from: 0, to: bytes.count) {
            var pos = at + 7
            root = parseObject(&pos)?.dict?["Root"]
        }
        if root == nil {
            for (n, offset) in table.sorted(by: { $0.value > $1.value }) {
                if let dict = parseBounded(at: offset, expecting: n)?.dict,
                   dict["Type"] == .name("XRef") || dict["Type"] == .name("Catalog") {
                    root = dict["Type"] == .name("Catalog") ? .ref(n, 0) : dict["Root"]
                    if root != nil { break }
                }
            }
        }
        return root
    }

    // MARK: Strategy 3: counting page objects

    mutating func pageObjectCount() -> Int? {
        let table = offsets()
        var count = 0
        for n in allObjectNumbers(in: table) where object(n, in: table)?.dict?["Type"] == .name("Page") {
            count += 1
        }
        return count
    }
}
