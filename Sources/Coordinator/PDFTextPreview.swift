import Foundation

/// A best-effort text layer of a PDF's pages for the signing page, so the recipient sees the
/// document's words where they stand: the literal strings shown by `Tj`/`TJ` in uncompressed
/// content streams, placed by `Td`/`Tm` and sized by `Tf`. Anything else (compressed streams,
/// fonts with custom encodings, graphics) is left out — the full PDF is one link away.
///
/// Bounded: at most ``maxRunsPerPage`` runs per page and ``maxStreamBytes`` per content stream;
/// malformed input gives fewer runs, never a failure.
enum PDFTextPreview {
    /// A piece of text at a position, in PDF points from the page's top-left corner.
    struct Run: Sendable, Hashable {
        var x: Double
        var top: Double
        var size: Double
        var text: String
    }

    static let maxRunsPerPage = 200
    /// The page height `pages(_:)` measures `top` from unless told otherwise.
    static let defaultPageHeight = 792.0
    static let maxStreamBytes = 256 * 1024

    /// The runs of each page, in page-tree order as far as the file lists page objects in order.
    static func pages(_ pdf: Data, pageHeight: Double = defaultPageHeight) -> [[Run]] {
        let bytes = [UInt8](pdf)
        var pages: [[Run]] = []
        var searchFrom = 0
        while let type = find(Array("/Type".utf8), in: bytes, from: searchFrom) {
            var after = type + 5
            while after < bytes.count, bytes[after] == 0x20 || bytes[after] == 0x0A || bytes[after] == 0x0D { after += 1 }
            searchFrom = after
            let page = Array("/Page".utf8)
            // `/Type /Pages` is the page tree, not a page.
            guard after + page.count < bytes.count, Array(bytes[after..<after + page.count]) == page,
                bytes[after + page.count] != UInt8(ascii: "s")
            else { continue }
            let found = type
            let objectEnd = find(Array("endobj".utf8), in: bytes, from: found) ?? bytes.count
            guard let contents = find(Array("/Contents".utf8), in: bytes, from: found), contents < objectEnd,
                let number = leadingInteger(bytes, from: contents + 9), let stream = streamOfObject(number, in: bytes)
            else {
                pages.append([])
                continue
            }
            pages.append(runs(stream, pageHeight: pageHeight))
            if pages.count >= 10_000 { break }
        }
        return pages
    }

    /// The bytes of object `number`'s stream when it is not compressed.
    static func streamOfObject(_ number: Int, in bytes: [UInt8]) -> [UInt8]? {
        let header = Array("\n\(number) 0 obj".utf8)
        guard let start = find(header, in: bytes, from: 0) ?? (bytes.starts(with: header.dropFirst()) ? 0 : nil),
            let open = find(Array("stream".utf8), in: bytes, from: start), let close = find(Array("endstream".utf8), in: bytes, from: open)
        else { return nil }
        let dictionary = String(decoding: bytes[start..<open], as: UTF8.self)
        guard !dictionary.contains("/Filter") else { return nil }
        var begin = open + 6
        if begin < bytes.count, bytes[begin] == 0x0D { begin += 1 }
        if begin < bytes.count, bytes[begin] == 0x0A { begin += 1 }
        guard begin <= close, close - begin <= maxStreamBytes else { return nil }
        return Array(bytes[begin..<close])
    }

    /// Interprets the text operators of a content stream.
    static func runs(_ content: [UInt8], pageHeight: Double) -> [Run] {
        var runs: [Run] = []
        var operands: [String] = []
        var strings: [String] = []
        var size = 12.0
        var lineX = 0.0, lineY = 0.0
        var index = 0
        func number(_ back: Int) -> Double? {
            operands.count >= back ? Double(operands[operands.count - back]) : nil
        }
        while index < content.count, runs.count < maxRunsPerPage {
            let byte = content[index]
            switch byte {
            case UInt8(ascii: "("):
                let (text, next) = literal(content, from: index + 1)
                strings.append(text)
                index = next
                continue
            case UInt8(ascii: "["), UInt8(ascii: "]"):
                index += 1
                continue
            case 0x20, 0x0A, 0x0D, 0x09, 0x0C, 0x00:
                index += 1
                continue
            default:
                var end = index
                while end < content.count, ![0x20, 0x0A, 0x0D, 0x09, 0x0C, 0x00, UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "]")].contains(content[end]) {
                    end += 1
                }
                let token = String(decoding: content[index..<end], as: UTF8.self)
                index = max(end, index + 1)
                switch token {
                case "BT":
                    lineX = 0
                    lineY = 0
                case "Tf":
                    size = number(1).map { min(max($0, 1), 200) } ?? size
                case "Td", "TD":
                    if let tx = number(2), let ty = number(1) {
                        lineX += tx
                        lineY += ty
                    }
                case "Tm":
                    if let e = number(2), let f = number(1) {
                        lineX = e
                        lineY = f
                    }
                case "Tj", "TJ", "'", "\"":
                    let text = strings.joined()
                    if !text.trimmingCharacters(in: .whitespaces).isEmpty {
                        runs.append(Run(x: lineX, top: pageHeight - lineY - size, size: size, text: text))
                    }
                default:
                    if Double(token) != nil || token.hasPrefix("/") {
                        operands.append(token)
                        if operands.count > 16 { operands.removeFirst(operands.count - 16) }
                        continue
                    }
                }
                operands.removeAll()
                strings.removeAll()
            }
        }
        return runs
    }

    /// A PDF literal string starting after its `(`: balanced parentheses and backslash escapes;
    /// returns the text (Latin-1) and the index after the closing `)`.
    static func literal(_ content: [UInt8], from start: Int) -> (String, Int) {
        var depth = 1
        var out: [UInt8] = []
        var index = start
        while index < content.count {
            let byte = content[index]
            if byte == UInt8(ascii: "\\"), index + 1 < content.count {
                let next = content[index + 1]
                switch next {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"), UInt8(ascii: "b"), UInt8(ascii: "f"): break
                default: out.append(next)
                }
                index += 2
                continue
            }
            if byte == UInt8(ascii: "(") { depth += 1 }
            if byte == UInt8(ascii: ")") {
                depth -= 1
                if depth == 0 { return (String(out.map { Character(Unicode.Scalar($0)) }), index + 1) }
            }
            out.append(byte)
            index += 1
            if out.count > 4096 { break }
        }
        return (String(out.map { Character(Unicode.Scalar($0)) }), index)
    }

    static func leadingInteger(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D { index += 1 }
        var value = 0
        var digits = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39, digits < 9 {
            value = value * 10 + Int(bytes[index] - 0x30)
            digits += 1
            index += 1
        }
        return digits > 0 ? value : nil
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start >= 0, bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        let last = bytes.count - needle.count
        while index <= last {
            if bytes[index] == needle[0] {
                var match = true
                for offset in 1..<needle.count where bytes[index + offset] != needle[offset] {
                    match = false
                    break
                }
                if match { return index }
            }
            index += 1
        }
        return nil
    }
}
