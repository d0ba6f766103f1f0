import Foundation
import Yams

// Typed reading of Yams `Node`s with their place in the file, so every error names
// `source:line:column: field.path`. Only what scenario files need: scalars read as
// text and converted per field (so a quoted "5" and a plain 5 read alike), mappings
// with a closed set of keys, bounded lists.

/// A YAML value with its field path, for error messages.
struct YAMLValue {
    let node: Node
    let path: String
    let source: String

    /// Longest scalar accepted anywhere in a scenario.
    static let maximumScalarLength = 1_000

    func error(_ message: String) -> ScenarioError {
        ScenarioError(source: source, line: node.mark?.line ?? 0, column: node.mark?.column ?? 0, field: path, message: message)
    }

    /// A plain `~`, `null` or nothing at all.
    var isNull: Bool {
        guard case .scalar(let scalar) = node, scalar.style == .plain || scalar.style == .any else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    /// How the value looks, for "expected X, got Y".
    var kindDescription: String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let scalar):
            let text = scalar.string.count > 40 ? String(scalar.string.prefix(40)) + "…" : scalar.string
            return "`\(text)`"
        }
    }

    /// The scalar's text; `expected` says what was wanted if it is not a scalar.
    func text(expected: String) throws -> String {
        guard case .scalar(let scalar) = node, !isNull else {
            throw error("expected \(expected), got \(isNull ? "nothing" : kindDescription)")
        }
        guard scalar.string.count <= YAMLValue.maximumScalarLength else {
            throw error("is longer than \(YAMLValue.maximumScalarLength) characters")
        }
        return scalar.string
    }

    func bool() throws -> Bool {
        switch try text(expected: "true or false").lowercased() {
        case "true": return true
        case "false": return false
        default: throw error("expected true or false, got \(kindDescription)")
        }
    }

    func int(_ range: ClosedRange<Int>, what: String = "a whole number") throws -> Int {
        let raw = try text(expected: "\(what) from \(range.lowerBound) to \(range.upperBound)")
        guard let value = YAMLValue.parseInt(raw) else {
            throw error("expected \(what) from \(range.lowerBound) to \(range.upperBound), got \(kindDescription)")
        }
        guard range.contains(value) else {
            throw error("must be \(range.lowerBound) to \(range.upperBound), got \(value)")
        }
        return value
    }

    /// Decimal or `0x` hexadecimal, 0 to 2^64-1.
    func uint64() throws -> UInt64 {
        let raw = try text(expected: "a whole number from 0 to \(UInt64.max)").replacingOccurrences(of: "_", with: "")
        let value = raw.lowercased().hasPrefix("0x") ? UInt64(raw.dropFirst(2), radix: 16) : UInt64(raw)
        guard let value else {
            throw error("expected a whole number from 0 to \(UInt64.max) (or 0x hexadecimal), got \(kindDescription)")
        }
        return value
    }

    func double(_ range: ClosedRange<Double>, what: String = "a number") throws -> Double {
        let raw = try text(expected: "\(what) from \(YAMLValue.format(range.lowerBound)) to \(YAMLValue.format(range.upperBound))")
        guard let value = YAMLValue.parseDouble(raw) else {
            throw error("expected \(what) from \(YAMLValue.format(range.lowerBound)) to \(YAMLValue.format(range.upperBound)), got \(kindDescription)")
        }
        guard range.contains(value) else {
            throw error("must be \(YAMLValue.format(range.lowerBound)) to \(YAMLValue.format(range.upperBound)), got \(YAMLValue.format(value))")
        }
        return value
    }

    func fraction() throws -> Double { try double(0...1, what: "a fraction") }

    /// "500ms", "10s", "2m", "1h" or a bare number of seconds, within `range` seconds.
    func duration(_ range: ClosedRange<Double>, positive: Bool = false) throws -> Double {
        let allowed = "a duration (500ms, 10s, 2m, 1h) from \(DurationText.render(range.lowerBound)) to \(DurationText.render(range.upperBound))"
        let raw = try text(expected: allowed)
        guard let value = DurationText.parse(raw) else { throw error("expected \(allowed), got \(kindDescription)") }
        if positive && value <= 0 { throw error("must be more than 0s, got \(raw)") }
        guard range.contains(value) else { throw error("must be \(DurationText.render(range.lowerBound)) to \(DurationText.render(range.upperBound)), got \(raw)") }
        return value
    }

    /// `2` or `1..3`, both ends within `range`, lower ≤ upper.
    func intRange(_ range: ClosedRange<Int>) throws -> IntRange {
        let allowed = "a count or a range like 1..3, within \(range.lowerBound)..\(range.upperBound)"
        let raw = try text(expected: allowed)
        let parts = raw.components(separatedBy: "..")
        let values = parts.map { YAMLValue.parseInt($0.trimmingCharacters(in: .whitespaces)) }
        guard (1...2).contains(parts.count), let lower = values.first ?? nil, let upper = values.last ?? nil else {
            throw error("expected \(allowed), got \(kindDescription)")
        }
        guard range.contains(lower), range.contains(upper), lower <= upper else {
            throw error("must be within \(range.lowerBound)..\(range.upperBound) with the lower end first, got \(raw)")
        }
        return IntRange(lower, upper)
    }

    /// `2s` or `1s..5s`, both ends within `range` seconds, lower ≤ upper.
    func span(_ range: ClosedRange<Double>) throws -> ClosedSpan {
        let allowed = "a duration or a range like 1s..5s, within \(DurationText.render(range.lowerBound))..\(DurationText.render(range.upperBound))"
        let raw = try text(expected: allowed)
        let parts = raw.components(separatedBy: "..")
        let values = parts.map { DurationText.parse($0.trimmingCharacters(in: .whitespaces)) }
        guard (1...2).contains(parts.count), let lower = values.first ?? nil, let upper = values.last ?? nil else {
            throw error("expected \(allowed), got \(kindDescription)")
        }
        guard range.contains(lower), range.contains(upper), lower <= upper else {
            throw error("must be within \(DurationText.render(range.lowerBound))..\(DurationText.render(range.upperBound)) with the lower end first, got \(raw)")
        }
        return ClosedSpan(lower, upper)
    }

    /// One of `choices` (error lists them, with a "did you mean").
    func choice(_ choices: [String]) throws -> String {
        let list = choices.joined(separator: ", ")
        let raw = try text(expected: "one of \(list)")
        guard choices.contains(raw) else {
            throw error("must be one of \(list), got \(kindDescription)\(Suggestion.hint(for: raw, in: choices))")
        }
        return raw
    }

    /// A name of 1 to `maximumLength` characters from `allowed` (described as `allowedDescription`).
    func identifier(maximumLength: Int, allowed: CharacterSet, allowedDescription: String) throws -> String {
        let raw = try text(expected: "a name of \(allowedDescription)")
        guard (1...maximumLength).contains(raw.count), raw.unicodeScalars.allSatisfy(allowed.contains) else {
            throw error("must be 1 to \(maximumLength) of \(allowedDescription), got \(kindDescription)")
        }
        return raw
    }

    func mapping(keys: [String], expected: String = "a mapping") throws -> MappingReader {
        guard case .mapping(let mapping) = node else { throw error("expected \(expected), got \(isNull ? "nothing" : kindDescription)") }
        return try MappingReader(mapping: mapping, value: self, keys: keys)
    }

    func sequence(maximumCount: Int, expected: String = "a list") throws -> [YAMLValue] {
        guard case .sequence(let sequence) = node else { throw error("expected \(expected), got \(isNull ? "nothing" : kindDescription)") }
        guard sequence.count <= maximumCount else { throw error("has \(sequence.count) entries; at most \(maximumCount) are allowed") }
        return sequence.enumerated().map { YAMLValue(node: $1, path: "\(path)[\($0)]", source: source) }
    }

    func child(_ key: String, _ node: Node) -> YAMLValue {
        YAMLValue(node: node, path: path.isEmpty ? key : "\(path).\(key)", source: source)
    }

    static func parseInt(_ raw: String) -> Int? {
        let cleaned = raw.replacingOccurrences(of: "_", with: "")
        guard !cleaned.isEmpty, cleaned.unicodeScalars.enumerated().allSatisfy({ index, c in
            CharacterSet.decimalDigits.contains(c) && c.isASCII || (index == 0 && (c == "-" || c == "+"))
        }) else { return nil }
        return Int(cleaned)
    }

    static func parseDouble(_ raw: String) -> Double? {
        let allowed = CharacterSet(charactersIn: "0123456789.eE+-_")
        guard raw.unicodeScalars.allSatisfy(allowed.contains), raw.contains(where: \.isNumber) else { return nil }
        guard let value = Double(raw.replacingOccurrences(of: "_", with: "")), value.isFinite else { return nil }
        return value
    }

    /// Numbers as a scenario file writes them: no ".0" on whole numbers.
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}

/// A mapping whose keys are all known (unknown keys are an error, with a "did you mean").
struct MappingReader {
    let value: YAMLValue
    private var entries: [String: (key: Node, value: Node)] = [:]

    init(mapping: Node.Mapping, value: YAMLValue, keys: [String]) throws {
        self.value = value
        for (keyNode, valueNode) in mapping {
            let keyValue = YAMLValue(node: keyNode, path: value.path, source: value.source)
            guard case .scalar(let scalar) = keyNode else { throw keyValue.error("keys must be plain names, got \(keyValue.kindDescription)") }
            let key = scalar.string
            guard keys.contains(key) else {
                let field = value.path.isEmpty ? key : "\(value.path).\(key)"
                let allowed = keys.count <= 12 ? "; allowed: \(keys.joined(separator: ", "))" : ""
                throw ScenarioError(
                    source: value.source, line: keyNode.mark?.line ?? 0, column: keyNode.mark?.column ?? 0, field: field,
                    message: "unknown key\(Suggestion.hint(for: key, in: keys))\(allowed)")
            }
            entries[key] = (keyNode, valueNode)
        }
    }

    /// Whether the key is there with a non-null value.
    func has(_ key: String) -> Bool { optional(key) != nil }

    /// The key's value, nil when absent or null.
    func optional(_ key: String) -> YAMLValue? {
        guard let entry = entries[key] else { return nil }
        let child = value.child(key, entry.value)
        return child.isNull ? nil : child
    }

    func required(_ key: String, _ what: String) throws -> YAMLValue {
        guard let child = optional(key) else {
            throw ScenarioError(
                source: value.source, line: value.node.mark?.line ?? 0, column: value.node.mark?.column ?? 0,
                field: value.path.isEmpty ? key : "\(value.path).\(key)", message: "is missing; \(what)")
        }
        return child
    }

    /// An error placed at the key itself (for conflicts between keys).
    func error(at key: String, _ message: String) -> ScenarioError {
        let node = entries[key]?.key ?? value.node
        return ScenarioError(
            source: value.source, line: node.mark?.line ?? 0, column: node.mark?.column ?? 0,
            field: value.path.isEmpty ? key : "\(value.path).\(key)", message: message)
    }

}

/// Durations as scenario files write them: "500ms", "10s", "2m", "1h", or a bare number of seconds.
public enum DurationText {
    /// Seconds, or nil if `text` is not a non-negative duration.
    public static func parse(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = factor
            break
        }
        let digits = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(digits.count), digits.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let value = Double(number), value.isFinite
        else { return nil }
        // Division for milliseconds: 100ms is exactly the double nearest 0.1, as "0.1s" is.
        return scale == 0.001 ? value / 1000 : value * scale
    }

    /// The first of "2h", "5m", "10s", "500ms", "0.25s" that fits and parses back to exactly `seconds`.
    public static func render(_ seconds: Double) -> String {
        var candidates: [String] = []
        // Hours and minutes only from two of them: "60s" reads better than "1m".
        if seconds >= 7200, (seconds / 3600).rounded() == seconds / 3600 { candidates.append("\(Int64(seconds / 3600))h") }
        if seconds >= 120, (seconds / 60).rounded() == seconds / 60 { candidates.append("\(Int64(seconds / 60))m") }
        if seconds.rounded() == seconds, seconds < 1e15 { candidates.append("\(Int64(seconds))s") }
        let milliseconds = (seconds * 1000).rounded()
        if milliseconds < 1e15 { candidates.append("\(Int64(milliseconds))ms") }
        candidates.append("\(plainDecimal(seconds))s")
        return candidates.first { parse($0) == seconds } ?? "\(plainDecimal(seconds))s"
    }

    /// Swift's shortest round-trip digits without an exponent ("1e-05" → "0.00001").
    static func plainDecimal(_ value: Double) -> String {
        let text = "\(value)"
        guard let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }), let exponent = Int(text[text.index(after: e)...]) else {
            return text
        }
        let mantissa = text[..<e]
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        let integer = String(parts[0]), fraction = parts.count > 1 ? String(parts[1]) : ""
        let digits = integer + fraction
        let point = integer.count + exponent
        if point <= 0 { return "0." + String(repeating: "0", count: -point) + digits }
        if point >= digits.count { return digits + String(repeating: "0", count: point - digits.count) }
        return String(digits.prefix(point)) + "." + String(digits.dropFirst(point))
    }
}
