import Foundation

/// Reads the code a test file keeps between `// BEGIN EXAMPLE` and `// END EXAMPLE`, and the
/// block docs/embedding.md shows under `<!-- example: NAME -->`, for the tests that compare them.
enum DocExample {
    /// The text strictly between `start` and the next `end`, without surrounding newlines.
    static func between(_ text: String, _ start: String, _ end: String) -> String? {
        guard let a = text.range(of: start), let b = text.range(of: end, range: a.upperBound..<text.endIndex) else { return nil }
        return String(text[a.upperBound..<b.lowerBound]).trimmingCharacters(in: .newlines)
    }

    /// The example code of the test file at `path` (pass `#filePath`).
    static func code(inFile path: String) throws -> String? {
        between(try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8), "// BEGIN EXAMPLE\n", "// END EXAMPLE")
    }

    /// The Swift block docs/embedding.md shows under `<!-- example: name -->`, with its first
    /// `indent` characters of each line removed (a block inside a list item is indented).
    static func shown(_ name: String, indent: Int = 0) throws -> String? {
        let doc = try String(contentsOf: EmbeddingExampleTests.packageRoot.appendingPathComponent("docs/embedding.md"), encoding: .utf8)
        let pad = String(repeating: " ", count: indent)
        guard let block = between(doc, "<!-- example: \(name) -->\n\(pad)```swift\n", "\(pad)```") else { return nil }
        guard indent > 0 else { return block }
        return block.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(pad) ? String($0.dropFirst(indent)) : String($0) }.joined(separator: "\n")
    }
}
