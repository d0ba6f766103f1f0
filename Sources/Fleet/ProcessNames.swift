/// Short forms of process lists for the progress line and the report, which must stay readable at
/// 10,000 devices (40 node processes and more): `node-rural-1…16` instead of sixteen names.
enum ProcessNames {
    /// Names that end in `-<number>` and share what comes before it are written as one prefix and
    /// their numbers, in ranges: `[node-rural-1, node-rural-2, node-rural-3, node-rural-7,
    /// node-depot-1]` → `node-rural-{1…3,7}, node-depot-1`. Other names are kept as they are.
    /// Prefixes keep the order in which they first appear.
    static func compact(_ names: [String]) -> String {
        var prefixes: [String] = []
        var numbers: [String: [Int]] = [:]
        var parts: [(prefix: String?, name: String)] = []
        for name in names {
            guard let dash = name.lastIndex(of: "-"), dash != name.startIndex,
                case let digits = name[name.index(after: dash)...], !digits.isEmpty, digits.count <= 9,
                digits.allSatisfy(\.isASCII), let number = Int(digits), String(number) == digits
            else {
                parts.append((nil, name))
                continue
            }
            let prefix = String(name[..<dash])
            if numbers[prefix] == nil {
                prefixes.append(prefix)
                parts.append((prefix, ""))
            }
            numbers[prefix, default: []].append(number)
        }
        return parts.map { part in
            guard let prefix = part.prefix, let list = numbers[prefix] else { return part.name }
            let ranges = Self.ranges(Array(Set(list)).sorted())
            return ranges.count == 1 ? "\(prefix)-\(ranges[0])" : "\(prefix)-{\(ranges.joined(separator: ","))}"
        }.joined(separator: ", ")
    }

    /// Sorted distinct numbers as runs: `[1, 2, 3, 7]` → `["1…3", "7"]`.
    private static func ranges(_ sorted: [Int]) -> [String] {
        var result: [String] = []
        var index = 0
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count, sorted[end + 1] == sorted[end] + 1 { end += 1 }
            result.append(end == index ? "\(sorted[index])" : "\(sorted[index])…\(sorted[end])")
            index = end + 1
        }
        return result
    }
}
