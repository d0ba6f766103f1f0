import FleetTesting
import Foundation
import Testing

/// The rule of docs/testing.md, "Examples in the docs": every ```swift block of docs/*.md is an
/// example a test compiles and runs (or checks against the source), so none can go unchecked.
@Suite("docs/*.md: every Swift block is a checked example")
struct DocExamplesTests {
    /// Every Swift file under Tests/, by path.
    static func testSources() throws -> [(path: String, text: String)] {
        let tests = DocExample.packageRoot.appendingPathComponent("Tests")
        let paths = (FileManager.default.enumerator(atPath: tests.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".swift") }.sorted()
        return try paths.map { ("Tests/\($0)", try String(contentsOf: tests.appendingPathComponent($0), encoding: .utf8)) }
    }

    @Test("every ```swift block in docs/*.md has an <!-- example: NAME --> line right above it")
    func everyBlockIsMarked() throws {
        let blocks = try DocExample.blocks()
        #expect(blocks.count > 10, "the docs hold \(blocks.count) Swift blocks: is the scan broken?")
        let unmarked = blocks.filter { $0.name == nil }
        #expect(unmarked.isEmpty, "Swift blocks without <!-- example: NAME --> (and so without a test): \(unmarked)")
    }

    @Test("example names are unique, and each is checked by a test")
    func everyExampleHasATest() throws {
        let named = try DocExample.blocks().filter { $0.name != nil }
        let names = named.compactMap(\.name)
        let repeated = Dictionary(grouping: named) { $0.name ?? "" }.filter { $0.value.count > 1 }
        #expect(repeated.isEmpty, "example names used more than once: \(repeated.values.flatMap { $0 })")
        let sources = try Self.testSources()
        for block in named {
            let name = block.name ?? ""
            let claimed = sources.contains { source in
                source.text.contains("// BEGIN EXAMPLE \(name)\n") || source.text.contains("DocExample.compare(\"\(name)\"")
                    || source.text.contains("DocExample.shown(\"\(name)\"")
            }
            #expect(claimed, "no test compares or reads example \(name) (\(block)): add one (docs/testing.md)")
        }
        // And no test file keeps code for an example no doc shows.
        let begins = sources.flatMap { source in
            source.text.split(separator: "\n").compactMap { line -> (String, String)? in
                let text = line.trimmingCharacters(in: .whitespaces)
                guard text.hasPrefix("// BEGIN EXAMPLE ") else { return nil }
                return (source.path, String(text.dropFirst("// BEGIN EXAMPLE ".count)))
            }
        }
        for (path, name) in begins {
            #expect(names.contains(name), "\(path) keeps example \(name), which no doc shows")
        }
    }

    @Test("blocks are read with their marker, indentation and fences")
    func readsBlocks() throws {
        let root = try TempDirectory()
        try FileManager.default.createDirectory(atPath: root.path + "/docs", withIntermediateDirectories: true)
        let doc = """
            # A doc

            ```swift
            let unmarked = 1
            ```

            - a list item:

              <!-- example: nested -->
              ```swift
              struct S {
                  var x = 1
              }
              ```

            ```sh
            echo not swift
            ```
            """
        try doc.write(toFile: root.path + "/docs/a.md", atomically: true, encoding: .utf8)
        let blocks = try DocExample.blocks(root: URL(fileURLWithPath: root.path))
        #expect(blocks.map(\.line) == [3, 10])
        #expect(blocks.map(\.name) == [nil, "nested"])
        #expect(blocks.map(\.code) == ["let unmarked = 1", "struct S {\n    var x = 1\n}"])
        #expect(try DocExample.shown("nested", in: "docs/a.md", root: URL(fileURLWithPath: root.path)) == "struct S {\n    var x = 1\n}")
    }
}
