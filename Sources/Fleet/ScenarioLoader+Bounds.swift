import Foundation
import Yams

// Bounds on the input before and after Yams composes it: the size of the file, the
// length of its lines, how deeply it nests, how many nodes it has, and no anchors
// or aliases (`&a` / `*a`), which would let a small file expand into a huge tree
// ("billion laughs") — scenario files never need them.

enum ScenarioBounds {
    static let maximumBytes = 1 << 20
    static let maximumLineLength = 4_096
    static let maximumIndentation = 256
    static let maximumFlowDepth = 32
    static let maximumDepth = 24
    static let maximumNodes = 200_000

    /// Checks the raw text: size, line length, indentation, flow nesting, anchors and aliases.
    static func checkText(_ yaml: String, source: String) throws {
        let size = yaml.utf8.count
        guard size <= maximumBytes else {
            throw ScenarioError(source: source, line: 0, column: 0, field: "", message: "is \(size) bytes; scenario files may have at most \(maximumBytes)")
        }
        var scanner = TextScanner(source: source)
        for (index, line) in yaml.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            try scanner.scan(line: line, number: index + 1)
        }
    }

    /// Checks the composed tree: depth and node count (aliases never get this far).
    static func checkTree(_ node: Node, source: String) throws {
        var count = 0
        try walk(node, depth: 1, count: &count, source: source)
    }

    private static func walk(_ node: Node, depth: Int, count: inout Int, source: String) throws {
        count += 1
        func fail(_ message: String) -> ScenarioError {
            ScenarioError(source: source, line: node.mark?.line ?? 0, column: node.mark?.column ?? 0, field: "", message: message)
        }
        guard count <= maximumNodes else { throw fail("has more than \(maximumNodes) values") }
        guard depth <= maximumDepth else { throw fail("nests more than \(maximumDepth) levels deep") }
        if node.anchor != nil { throw fail("anchors and aliases (&name, *name) are not supported in scenario files") }
        switch node {
        case .scalar: break
        case .alias: throw fail("anchors and aliases (&name, *name) are not supported in scenario files")
        case .sequence(let sequence):
            for child in sequence { try walk(child, depth: depth + 1, count: &count, source: source) }
        case .mapping(let mapping):
            for (key, value) in mapping {
                try walk(key, depth: depth + 1, count: &count, source: source)
                try walk(value, depth: depth + 1, count: &count, source: source)
            }
        }
    }

    /// A small YAML lexer, just enough to find where a node starts (line start, after
    /// `- `, `? `, `: `, `[`, `{`, `,`), skip quoted text and comments, and count flow
    /// brackets. It runs before Yams so that a hostile file cannot make the composer
    /// recurse or expand without bound.
    struct TextScanner {
        let source: String
        var flowDepth = 0
        /// Inside a quoted scalar that continues on the next line: its quote character.
        var openQuote: Character?

        init(source: String) { self.source = source }

        mutating func scan(line: Substring, number: Int) throws {
            func fail(_ column: Int, _ message: String) -> ScenarioError {
                ScenarioError(source: source, line: number, column: column, field: "", message: message)
            }
            let characters = Array(line)
            guard characters.count <= maximumLineLength else {
                throw fail(maximumLineLength, "line is longer than \(maximumLineLength) characters")
            }
            var index = 0
            var atNodeStart = true
            if let quote = openQuote {
                guard let end = TextScanner.closingQuote(characters, from: 0, quote: quote) else { return }
                openQuote = nil
                index = end + 1
                atNodeStart = false
            } else {
                while index < characters.count, characters[index] == " " { index += 1 }
                guard index <= maximumIndentation else { throw fail(index, "indented more than \(maximumIndentation) spaces") }
            }
            var blockIndicators = 0
            while index < characters.count {
                let c = characters[index]
                let next: Character? = index + 1 < characters.count ? characters[index + 1] : nil
                let column = index + 1
                let endsToken = next == nil || next == " " || next == "\t"
                if c == " " || c == "\t" || c == "\r" {
                    // Whitespace keeps whatever state the previous token left.
                } else if c == "#" && (index == 0 || characters[index - 1] == " " || characters[index - 1] == "\t") {
                    return
                } else if (c == "&" || c == "*") && atNodeStart && !endsToken {
                    throw fail(column, "anchors and aliases (&name, *name) are not supported in scenario files")
                } else if (c == "\"" || c == "'") && atNodeStart {
                    guard let end = TextScanner.closingQuote(characters, from: index + 1, quote: c) else {
                        openQuote = c
                        return
                    }
                    index = end
                    atNodeStart = false
                } else if (c == "[" || c == "{") && (atNodeStart || flowDepth > 0) {
                    flowDepth += 1
                    guard flowDepth <= maximumFlowDepth else { throw fail(column, "nests more than \(maximumFlowDepth) brackets deep") }
                    atNodeStart = true
                } else if (c == "]" || c == "}") && flowDepth > 0 {
                    flowDepth -= 1
                    atNodeStart = false
                } else if c == "," && flowDepth > 0 {
                    atNodeStart = true
                } else if (c == "-" || c == "?") && atNodeStart && endsToken {
                    blockIndicators += 1
                    guard blockIndicators <= 8 else { throw fail(column, "starts more than 8 nested entries on one line") }
                    atNodeStart = true
                } else if c == ":" && (endsToken || (flowDepth > 0 && ",[]{}".contains(next ?? " "))) {
                    atNodeStart = true
                } else {
                    atNodeStart = false
                }
                index += 1
            }
        }

        /// Index of the quote that closes a scalar opened before `from` ('' and \" escape).
        static func closingQuote(_ characters: [Character], from start: Int, quote: Character) -> Int? {
            var index = start
            while index < characters.count {
                let c = characters[index]
                if quote == "\"" && c == "\\" {
                    index += 2
                    continue
                }
                if c == quote {
                    if quote == "'" && index + 1 < characters.count && characters[index + 1] == "'" {
                        index += 2
                        continue
                    }
                    return index
                }
                index += 1
            }
            return nil
        }
    }
}
