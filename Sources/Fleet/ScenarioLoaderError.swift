import Foundation

/// A scenario file that cannot be run: where (file, line, column), which field
/// (a path such as `groups[1].behaviour.cancel_rate`) and what is wrong and allowed.
///
/// `description` reads `smoke.yaml:12:17: groups[0].count: must be 1 to 20000, got 0`.
public struct ScenarioError: Error, CustomStringConvertible, Sendable, Hashable {
    /// The file name (or whatever `parse(yaml:source:)` was told).
    public var source: String
    /// 1-based; 0 when the problem has no place in the file (it cannot be read).
    public var line: Int
    public var column: Int
    /// The field path, empty for the whole document.
    public var field: String
    public var message: String

    public init(source: String, line: Int, column: Int, field: String, message: String) {
        self.source = source
        self.line = line
        self.column = column
        self.field = field
        self.message = message
    }

    public var description: String {
        let place = line > 0 ? "\(source):\(line):\(column)" : source
        return field.isEmpty ? "\(place): \(message)" : "\(place): \(field): \(message)"
    }
}

/// "did you mean" for unknown keys and names: the closest candidate within a small
/// edit distance, if any.
enum Suggestion {
    static func closest(to word: String, in candidates: [String]) -> String? {
        let lowered = word.lowercased()
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(lowered, candidate.lowercased())
            // Close, and not just as far as the words are long ("b" is not a typo of "a").
            if distance <= max(1, candidate.count / 3), distance < min(lowered.count, candidate.count),
               distance < (best?.1 ?? Int.max) {
                best = (candidate, distance)
            }
        }
        return best?.0
    }

    /// " (did you mean `x`?)" or "".
    static func hint(for word: String, in candidates: [String]) -> String {
        closest(to: word, in: candidates).map { " (did you mean `\($0)`?)" } ?? ""
    }

    /// Edit distance counting a swap of two neighbours as one edit (optimal string
    /// alignment), so `nmae` is one edit from `name`. Inputs are cut to 64 characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.prefix(64)), b = Array(b.prefix(64))
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
