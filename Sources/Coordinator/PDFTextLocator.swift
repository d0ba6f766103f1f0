import FleetProtocol
import Foundation

/// Finds where text is printed in a PDF, for anchor tabs (docs/rest-api.md, "Anchor tabs"): the
/// words and their boxes come from poppler's `pdftotext -tsv -cropbox` (Debian's `poppler-utils`),
/// run as a child process (`PDFToolChild`) with the same bounds as the page renderer; their
/// output is parsed here, strictly and bounded.
///
/// Coordinates are PDF points (1/72 inch, which DocuSign calls pixels) from the top-left corner of
/// the page as a viewer shows it: the CropBox turned by `/Rotate`, the frame of tab positions.
public struct PDFTextLocator: Sendable {
    /// A word as printed: its page (1-based), its line (words of one line share it) and its box.
    public struct Word: Sendable, Hashable {
        public var page: Int
        public var line: Int
        public var text: String
        public var left: Double
        public var top: Double
        public var width: Double
        public var height: Double
    }

    /// Where one occurrence of a text is printed.
    public struct Box: Sendable, Hashable {
        public var page: Int
        public var left: Double
        public var top: Double
        public var right: Double
        public var bottom: Double
    }

    /// How an anchor string is looked for (DocuSign's `anchorCaseSensitive` and `anchorMatchWholeWord`, both false by default).
    public struct Matching: Sendable, Hashable {
        public var caseSensitive = false
        public var wholeWord = false
        public init(caseSensitive: Bool = false, wholeWord: Bool = false) {
            self.caseSensitive = caseSensitive
            self.wholeWord = wholeWord
        }
    }

    public struct Limits: Sendable, Hashable {
        public var maxPDFBytes = 64 << 20
        /// The largest output accepted from `pdftotext`.
        public var maxOutputBytes = 16 << 20
        /// Words read from one document; past it the document is refused (a PDF made to be slow to search).
        public var maxWords = 200_000
        public var timeout: Duration = .seconds(15)
        public init() {}
    }

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case missing(String)
        case tooLarge(bytes: Int)
        case timedOut(Duration)
        /// `pdftotext` failed, or printed what is not its TSV.
        case failed(String)

        public var description: String {
            switch self {
            case .missing(let path): "the text locator \(path) is not installed (run scripts/install-deps.sh)"
            case .tooLarge(let bytes): "the PDF is \(bytes) bytes, over the text locator's limit"
            case .timedOut(let limit): "reading the document's text took longer than \(limit)"
            case .failed(let why): "the document's text could not be read: \(why)"
            }
        }
    }

    public var executable: String
    public var limits: Limits
    public var clock: any FleetClock

    public init(executable: String = PDFTextLocator.defaultExecutable, limits: Limits = Limits(), clock: any FleetClock = ContinuousClock()) {
        self.executable = executable
        self.limits = limits
        self.clock = clock
    }

    /// `SIGNFLEET_PDFTOTEXT` when set, else Debian's path.
    public static var defaultExecutable: String {
        ProcessInfo.processInfo.environment["SIGNFLEET_PDFTOTEXT"] ?? "/usr/bin/pdftotext"
    }

    /// Every word of `pdf`, in reading order.
    public func words(in pdf: Data) async throws(Failure) -> [Word] {
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw .missing(executable) }
        guard pdf.count <= limits.maxPDFBytes else { throw .tooLarge(bytes: pdf.count) }
        let outcome = await PDFToolChild.run(
            executable, arguments: { ["-q", "-tsv", "-cropbox", $0, "-"] }, pdf: pdf, outputLimit: limits.maxOutputBytes,
            timeout: limits.timeout, clock: clock)
        switch outcome {
        case .output(let tsv): return try Self.parse(tsv, maxWords: limits.maxWords)
        case .failed(let why): throw .failed(why)
        case .timedOut: throw .timedOut(limits.timeout)
        case .cancelled: throw .failed("cancelled")
        }
    }

    /// The words of `pdftotext -tsv` output: rows of 12 tab-separated columns (`level page_num
    /// par_num block_num line_num word_num left top width height conf text`) under a header; level
    /// 5 rows are words. Anything else — a short row, a number that is not one, a box off any
    /// sensible page — is refused, not guessed at.
    static func parse(_ tsv: [UInt8], maxWords: Int) throws(Failure) -> [Word] {
        guard let text = String(validating: tsv, as: UTF8.self) else { throw .failed("pdftotext printed text that is not UTF-8") }
        var words: [Word] = []
        var lineNumbers: [[Substring]: Int] = [:]
        for (index, row) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            let columns = row.split(separator: "\t", maxSplits: 11, omittingEmptySubsequences: false)
            if index == 0 {
                guard columns.first == "level" else { throw .failed("pdftotext printed no TSV header") }
                continue
            }
            guard columns.count == 12 else { throw .failed("row \(index + 1) has \(columns.count) columns, not 12") }
            guard columns[0] == "5" else { continue }
            guard let page = Int(columns[1]), page >= 1, page <= 100_000 else { throw .failed("row \(index + 1): page \(columns[1])") }
            var box: [Double] = []
            for column in columns[6...9] {
                guard let value = Double(column), value.isFinite, abs(value) <= 1_000_000 else {
                    throw .failed("row \(index + 1): \"\(column)\" is not a coordinate")
                }
                box.append(value)
            }
            guard box[2] >= 0, box[3] >= 0 else { throw .failed("row \(index + 1): a negative size") }
            let key = Array(columns[1...4])
            let line = lineNumbers[key] ?? lineNumbers.count
            lineNumbers[key] = line
            words.append(Word(page: page, line: line, text: String(columns[11]), left: box[0], top: box[1], width: box[2], height: box[3]))
            guard words.count <= maxWords else { throw .failed("more than \(maxWords) words") }
        }
        return words
    }

    /// Every occurrence of `anchor` in `words`, left to right, line by line. An anchor is found
    /// within one line (its words joined by single spaces; runs of white space in the anchor count
    /// as one space); a whole-word match must not have a letter or digit just before or after it.
    /// An occurrence that starts or ends inside a word gets that part of the word's box, in
    /// proportion to its characters (Unicode scalars).
    public static func occurrences(of anchor: String, in words: [Word], matching: Matching = Matching()) -> [Box] {
        let wanted = normalise(anchor.split(whereSeparator: \.isWhitespace).joined(separator: " "), matching)
        guard !wanted.isEmpty else { return [] }
        var boxes: [Box] = []
        var start = 0
        while start < words.count {
            var end = start
            while end < words.count, words[end].line == words[start].line { end += 1 }
            boxes += occurrences(of: wanted, inLine: words[start..<end], matching: matching)
            start = end
        }
        return boxes
    }

    private static func occurrences(of wanted: [Unicode.Scalar], inLine line: ArraySlice<Word>, matching: Matching) -> [Box] {
        // The line's characters, and for each the word it belongs to (nil: the space between two).
        var characters: [Unicode.Scalar] = []
        var owner: [(word: Int, offset: Int, count: Int)?] = []
        for (index, word) in zip(line.indices, line) {
            if !characters.isEmpty {
                characters.append(" ")
                owner.append(nil)
            }
            let letters = normalise(word.text, matching)
            for (offset, letter) in letters.enumerated() {
                characters.append(letter)
                owner.append((index, offset, letters.count))
            }
        }
        var boxes: [Box] = []
        var nextFree = 0  // occurrences do not overlap: the next may start here
        for from in Self.matches(of: wanted, in: characters) where from >= nextFree {
            let last = from + wanted.count - 1
            if matching.wholeWord {
                let before: Unicode.Scalar = from > 0 ? characters[from - 1] : " "
                let after: Unicode.Scalar = last + 1 < characters.count ? characters[last + 1] : " "
                if Self.isWordCharacter(before) || Self.isWordCharacter(after) { continue }
            }
            if let first = owner[from], let end = owner[last] {
                let a = line[first.word], b = line[end.word]
                let left = a.left + a.width * Double(first.offset) / Double(max(1, first.count))
                let right = b.left + b.width * Double(end.offset + 1) / Double(max(1, end.count))
                let covered = line[first.word...end.word]
                boxes.append(
                    Box(
                        page: a.page, left: left, top: covered.map(\.top).min() ?? a.top, right: right,
                        bottom: covered.map { $0.top + $0.height }.max() ?? a.top + a.height))
            }
            nextFree = last + 1
        }
        return boxes
    }

    /// Where `pattern` starts in `text`, every position, in time linear in both (Knuth–Morris–Pratt):
    /// the document and the anchor are both the caller's, and a naive search of a long line for a
    /// long anchor would be theirs to make slow.
    static func matches(of pattern: [Unicode.Scalar], in text: [Unicode.Scalar]) -> [Int] {
        guard !pattern.isEmpty, pattern.count <= text.count else { return [] }
        var border = [0] + [Int](repeating: 0, count: pattern.count - 1)
        var length = 0
        for index in 1..<pattern.count {
            while length > 0, pattern[index] != pattern[length] { length = border[length - 1] }
            if pattern[index] == pattern[length] { length += 1 }
            border[index] = length
        }
        var starts: [Int] = []
        var matched = 0
        for (index, character) in text.enumerated() {
            while matched > 0, character != pattern[matched] { matched = border[matched - 1] }
            if character == pattern[matched] { matched += 1 }
            if matched == pattern.count {
                starts.append(index - pattern.count + 1)
                matched = border[matched - 1]
            }
        }
        return starts
    }

    /// The text as Unicode scalars (4 bytes each: a line of a hostile PDF can be long), each
    /// lower-cased unless matching is case-sensitive; a scalar whose lower case is more than one
    /// (`İ`) is compared as it is.
    private static func normalise(_ text: String, _ matching: Matching) -> [Unicode.Scalar] {
        guard !matching.caseSensitive else { return Array(text.unicodeScalars) }
        return text.unicodeScalars.map { scalar in
            let lower = scalar.properties.lowercaseMapping.unicodeScalars
            return lower.count == 1 ? lower.first ?? scalar : scalar
        }
    }

    private static func isWordCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isAlphabetic || scalar.properties.numericType != nil
    }
}
