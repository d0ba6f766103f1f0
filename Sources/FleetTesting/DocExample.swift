import Foundation

/// The Swift examples of the docs (`docs/*.md`) and the test code each one must equal
/// (docs/testing.md, "Examples in the docs").
///
/// A test file keeps an example's code between a `// BEGIN EXAMPLE name` line and the next
/// `// END EXAMPLE` line, so it compiles as part of the test target and a test runs it; the doc
/// shows it in the ` ```swift ` block right under an `<!-- example: name -->` line; a test
/// compares the two with `compare(_:in:file:)`. Indentation is not part of the comparison: the
/// code loses the indentation of its `BEGIN` line (an example inside a function's body), the
/// block the indentation of its fence (a block inside a list item).
public enum DocExample {
    /// The package's root directory (this file is `Sources/FleetTesting/DocExample.swift`).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// One ` ```swift ` block of a doc.
    public struct Block: Sendable, Hashable, CustomStringConvertible {
        /// The doc, relative to the package root (`docs/embedding.md`).
        public var doc: String
        /// The line of the opening fence, from 1.
        public var line: Int
        /// The name of the `<!-- example: name -->` line right above the fence; nil without one.
        public var name: String?
        /// The block's text between its fences, without the fence's indentation.
        public var code: String

        public var description: String { "\(doc):\(line)" + (name.map { " (example \($0))" } ?? "") }
    }

    /// What a doc and a test file hold for one example, to compare with `==`.
    public struct Comparison: Sendable, Hashable {
        /// The doc's block.
        public var shown: String
        /// The test file's code, preceded by the block's leading `import` lines when the test file
        /// has each of them (its imports are at its top, for all its examples).
        public var code: String
    }

    /// A doc without the block, or a test file without the code, an example names.
    public struct Missing: Error, CustomStringConvertible {
        public var description: String
    }

    /// Every ` ```swift ` block of the docs (`docs/*.md`), by doc and line.
    public static func blocks(root: URL = packageRoot) throws -> [Block] {
        let directory = root.appendingPathComponent("docs")
        let docs = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".md") }.sorted()
        return try docs.flatMap { try blocks(in: "docs/\($0)", root: root) }
    }

    /// The ` ```swift ` blocks of one doc (`docs/checker.md`), in order.
    public static func blocks(in doc: String, root: URL = packageRoot) throws -> [Block] {
        let lines = lines(of: try String(contentsOf: root.appendingPathComponent(doc), encoding: .utf8))
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let indent = line.prefix { $0 == " " }.count
            guard line.dropFirst(indent).trimmingCharacters(in: .whitespaces) == "```swift" else {
                index += 1
                continue
            }
            let fence = String(repeating: " ", count: indent) + "```"
            let end = lines[(index + 1)...].firstIndex { $0.trimmingCharacters(in: .whitespaces) == "```" && $0.hasPrefix(fence) } ?? lines.count
            let code = lines[(index + 1)..<end].map { dropIndent($0, indent) }.joined(separator: "\n")
            let name = index > 0 ? exampleName(lines[index - 1]) : nil
            blocks.append(Block(doc: doc, line: index + 1, name: name, code: code))
            index = end + 1
        }
        return blocks
    }

    /// The block `doc` shows under `<!-- example: name -->`, or nil.
    public static func shown(_ name: String, in doc: String, root: URL = packageRoot) throws -> String? {
        try blocks(in: doc, root: root).first { $0.name == name }?.code
    }

    /// The code of the test file at `path` (pass `#filePath`) between `// BEGIN EXAMPLE name` and
    /// the next `// END EXAMPLE`, without the `BEGIN` line's indentation, or nil.
    public static func code(_ name: String, inFile path: String) throws -> String? {
        let lines = lines(of: try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8))
        guard let begin = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "// BEGIN EXAMPLE \(name)" }),
              let end = lines[(begin + 1)...].firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "// END EXAMPLE" })
        else { return nil }
        let indent = lines[begin].prefix { $0 == " " }.count
        return lines[(begin + 1)..<end].map { dropIndent($0, indent) }.joined(separator: "\n")
    }

    /// The example `name` as `doc` shows it and as the test file at `file` (pass `#filePath`) has it.
    /// - Throws: ``Missing`` when the doc has no such block or the file no such code.
    public static func compare(_ name: String, in doc: String, file: String, root: URL = packageRoot) throws -> Comparison {
        guard let shown = try shown(name, in: doc, root: root) else {
            throw Missing(description: "\(doc) has no ```swift block under <!-- example: \(name) -->")
        }
        guard var code = try code(name, inFile: file) else {
            throw Missing(description: "\(file) has no code between // BEGIN EXAMPLE \(name) and // END EXAMPLE")
        }
        let fileLines = Set(lines(of: try String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8)))
        let imports = lines(of: shown).prefix { $0.hasPrefix("import ") }
        if !imports.isEmpty, imports.allSatisfy(fileLines.contains) {
            code = imports.joined(separator: "\n") + "\n\n" + code
        }
        return Comparison(shown: shown, code: code)
    }

    /// The name of an `<!-- example: name -->` line.
    static func exampleName(_ line: String) -> String? {
        let text = line.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("<!-- example: "), text.hasSuffix(" -->") else { return nil }
        let name = text.dropFirst("<!-- example: ".count).dropLast(" -->".count).trimmingCharacters(in: .whitespaces)
        return name.isEmpty ? nil : name
    }

    static func lines(of text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// `line` without its first `indent` spaces (a blank line may be shorter).
    static func dropIndent(_ line: String, _ indent: Int) -> String {
        let spaces = line.prefix { $0 == " " }.count
        return spaces >= indent ? String(line.dropFirst(indent)) : (line.trimmingCharacters(in: .whitespaces).isEmpty ? "" : line)
    }
}
