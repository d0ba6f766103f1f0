import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One seeded fuzz run: its seed (from `SIGNFLEET_SEED`, else fresh) and how many inputs each
/// target gets (a base count times `SIGNFLEET_FUZZ_ITERATIONS`, default 1). The seed is printed
/// at the start, as every seeded test in the repository prints it, so a failure replays with
/// `SIGNFLEET_SEED=<seed> swift test --skip-build --filter <suite>`.
public struct FuzzRun: Sendable {
    /// The name printed with the seed.
    public let name: String
    /// The seed of this run.
    public let seed: UInt64
    /// Multiplies every count (`SIGNFLEET_FUZZ_ITERATIONS`; at least 1).
    public let multiplier: Int

    public init(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.name = name
        seed = environment["SIGNFLEET_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        multiplier = max(1, environment["SIGNFLEET_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 1)
        print("\(name): SIGNFLEET_SEED=\(seed) SIGNFLEET_FUZZ_ITERATIONS=\(multiplier)")
    }

    /// `base` inputs times the multiplier.
    public func count(_ base: Int) -> Int { base.multipliedReportingOverflow(by: multiplier).overflow ? .max : base * multiplier }

    /// Runs a fuzz loop on its own thread and returns what it found. A fuzz loop is seconds of
    /// synchronous work: on the cooperative pool (two threads on a 2-core machine) it would hold up
    /// every other test's tasks. It runs at normal priority: the tests beside it wait on events and
    /// on clocks they move, not on the CPU they get (docs/testing.md), and at nice 19 a loop beside
    /// `make test-loaded`'s stress-ng got about 1.5% of a core and took tens of minutes. Issues
    /// found on that thread are collected in ``FuzzFindings`` and recorded by the caller, in its test.
    public func offPool(_ body: @escaping @Sendable (FuzzFindings) -> Void) async -> FuzzFindings {
        let findings = FuzzFindings(seed: seed)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                body(findings)
                continuation.resume()
            }
            thread.stackSize = 16 << 20  // decoders recurse up to their depth limits
            thread.start()
        }
        return findings
    }

    /// Prints what a target did: inputs, how many were accepted, and the time taken.
    public func report(_ target: String, inputs: Int, accepted: Int, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        print("\(name) \(target): \(inputs) inputs, \(accepted) accepted, \(inputs - accepted) refused, \(elapsed) (SIGNFLEET_SEED=\(seed))")
    }
}

/// What a fuzz loop found, collected on its thread: failures (with the seed and input index) and
/// counts. The test records every failure as an issue once the loop is done.
public final class FuzzFindings: Sendable {
    private let state = Mutex<(failures: [String], accepted: Int)>(([], 0))
    let seed: UInt64

    init(seed: UInt64) { self.seed = seed }

    /// Records a failure of input `index` unless `condition` holds.
    public func check(_ condition: Bool, _ message: @autoclosure () -> String, input index: Int) {
        guard !condition else { return }
        record(message(), input: index)
    }

    /// Records a failure of input `index`.
    public func record(_ message: String, input index: Int) {
        let line = "\(message) (SIGNFLEET_SEED=\(seed), input \(index))"
        state.withLock { if $0.failures.count < 100 { $0.failures.append(line) } }
    }

    /// Counts an accepted input.
    public func accept() { state.withLock { $0.accepted += 1 } }

    /// The failures, at most 100.
    public var failures: [String] { state.withLock { $0.failures } }
    /// Inputs counted as accepted.
    public var accepted: Int { state.withLock { $0.accepted } }
}

/// Byte-level mutations of valid inputs: bit flips, interesting bytes, truncations, deletions,
/// duplications, splices with other inputs, random insertions, and bytes that read as huge
/// lengths, deep nesting or extreme numbers in MessagePack. Generic over the generator, so a
/// test seeds it (`SeededRandom`).
public enum FuzzMutator {
    /// Byte runs that are edge cases in MessagePack: huge declared lengths (str32, bin32, array32,
    /// map32, ext32), NaN / ±∞ / 1e300 floats, Int64.min/max, UInt64.max, the never-used 0xc1,
    /// timestamps with bad nanoseconds, and negative fixints.
    public static let messagePackTokens: [[UInt8]] = [
        [0xdb, 0xff, 0xff, 0xff, 0xff], [0xc6, 0xff, 0xff, 0xff, 0xff], [0xdd, 0xff, 0xff, 0xff, 0xff],
        [0xdf, 0xff, 0xff, 0xff, 0xff], [0xc9, 0xff, 0xff, 0xff, 0xff, 0x01], [0xdc, 0xff, 0xff], [0xde, 0xff, 0xff],
        [0xda, 0xff, 0xff], [0xd9, 0xff], [0xc4, 0xff],
        [0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0], [0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0], [0xcb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0],
        [0xcb, 0x7e, 0x37, 0xe4, 0x3c, 0x88, 0x00, 0x75, 0x9c], [0xca, 0x7f, 0xc0, 0, 0], [0xca, 0xff, 0x80, 0, 0],
        [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0], [0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], [0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0],
        [0xce, 0xff, 0xff, 0xff, 0xff], [0xd2, 0x80, 0, 0, 0], [0xe0], [0xff], [0xc1], [0xc0], [0xc2], [0xc3],
        [0xd6, 0xff, 0xff, 0xff, 0xff, 0xff], [0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        [0xc7, 0x0c, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0], [0x90], [0x80], [0xa0],
    ]

    /// A mutation of `input`; `corpus` supplies splice partners.
    public static func mutate<G: RandomNumberGenerator>(_ input: [UInt8], corpus: [[UInt8]] = [], using rng: inout G) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            mutateOnce(&bytes, corpus: corpus, using: &rng)
        }
        return bytes
    }

    static func mutateOnce<G: RandomNumberGenerator>(_ bytes: inout [UInt8], corpus: [[UInt8]], using rng: inout G) {
        let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
        switch Int.random(in: 0..<11, using: &rng) {
        case 0 where !bytes.isEmpty:  // bit flip
            bytes[position] ^= 1 << UInt8.random(in: 0...7, using: &rng)
        case 1 where !bytes.isEmpty:  // interesting byte
            bytes[position] = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xc1, 0xdc, 0xdd, 0xde, 0xdf, 0xcb, 0xcf, 0xd3].randomElement(using: &rng)!
        case 2:  // truncation
            bytes = Array(bytes.prefix(position))
        case 3 where !bytes.isEmpty:  // deletion
            let end = min(bytes.count, position + Int.random(in: 1...16, using: &rng))
            bytes.removeSubrange(position..<end)
        case 4 where !bytes.isEmpty:  // duplication
            let end = min(bytes.count, position + Int.random(in: 1...64, using: &rng))
            bytes.insert(contentsOf: bytes[position..<end], at: end)
        case 5:  // splice with another input
            guard let other = corpus.randomElement(using: &rng), !other.isEmpty else { fallthrough }
            let from = Int.random(in: 0..<other.count, using: &rng)
            let taken = other[from..<min(other.count, from + Int.random(in: 1...256, using: &rng))]
            if Bool.random(using: &rng) {
                bytes = Array(bytes.prefix(position)) + taken
            } else {
                bytes.insert(contentsOf: taken, at: position)
            }
        case 6:  // random bytes inserted
            bytes.insert(contentsOf: randomBytes(count: Int.random(in: 1...8, using: &rng), using: &rng), at: position)
        case 7, 8:  // a MessagePack edge-case token, over or before the byte
            let token = messagePackTokens.randomElement(using: &rng)!
            if Bool.random(using: &rng) || bytes.isEmpty {
                bytes.insert(contentsOf: token, at: position)
            } else {
                let end = min(bytes.count, position + token.count)
                bytes.replaceSubrange(position..<end, with: token)
            }
        case 9:  // deep nesting: a run of one-element arrays or maps
            let opener: UInt8 = Bool.random(using: &rng) ? 0x91 : 0x81
            let depth = [33, 65, 513, 5000].randomElement(using: &rng)!
            var run = [UInt8](repeating: opener, count: depth)
            if opener == 0x81 { run = (0..<depth).flatMap { _ in [0x81, 0xa1, 0x6b] } }
            bytes.insert(contentsOf: run, at: position)
        default:  // an integer byte run (big-endian) of an extreme value
            let value: UInt64 = [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0xffff_ffff, UInt64(Int64.max), 1 << 63, .max].randomElement(using: &rng)!
            let width = [1, 2, 4, 8].randomElement(using: &rng)!
            let run = (0..<width).map { UInt8(truncatingIfNeeded: value >> UInt64(8 * (width - 1 - $0))) }
            let end = min(bytes.count, position + width)
            bytes.replaceSubrange(position..<end, with: run)
        }
    }

    /// `count` random bytes.
    public static func randomBytes<G: RandomNumberGenerator>(count: Int, using rng: inout G) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    /// Either a mutation of a random corpus input or (one time in `randomOneIn`) random bytes.
    public static func input<G: RandomNumberGenerator>(from corpus: [[UInt8]], randomOneIn: Int = 8, using rng: inout G) -> [UInt8] {
        if corpus.isEmpty || Int.random(in: 0..<randomOneIn, using: &rng) == 0 {
            return randomBytes(count: Int.random(in: 0...64, using: &rng), using: &rng)
        }
        return mutate(corpus.randomElement(using: &rng)!, corpus: corpus, using: &rng)
    }
}

/// A JSON value for fuzzing: built from valid inputs, mutated at the value level (extreme
/// numbers, type changes, deep nesting, huge strings and arrays, dropped and duplicated keys),
/// rendered as text, possibly invalid JSON (`raw` tokens such as `NaN` are written as they are).
public indirect enum FuzzJSON: Sendable, Hashable {
    case raw(String)
    case string(String)
    case array([FuzzJSON])
    case members([Member])

    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: FuzzJSON
        public init(_ key: String, _ value: FuzzJSON) {
            self.key = key
            self.value = value
        }
    }

    /// A number token.
    public static func number(_ value: some Numeric & CustomStringConvertible) -> FuzzJSON { .raw(value.description) }
    /// An object from key-value pairs in order.
    public static func object(_ pairs: KeyValuePairs<String, FuzzJSON>) -> FuzzJSON { .members(pairs.map { Member($0.key, $0.value) }) }

    /// Tokens at the edges of every number type, and values of other types.
    public static let extremeTokens: [String] = [
        "NaN", "Infinity", "-Infinity", "1e300", "-1e300", "1e400", "-1e400", "1e-400", "-0", "0.5", "-0.5", "1.5", "0", "-1",
        "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1e19", "-1e19",
        "9.3e18", "99999999999999999999999999999999", "true", "false", "null", "\"\"", "\"x\"", "[]", "{}", "[1e300]", "{\"\":0}",
    ]

    /// The value as JSON text.
    public func rendered() -> String {
        var out = ""
        render(into: &out)
        return out
    }

    private func render(into out: inout String) {
        switch self {
        case .raw(let token): out += token
        case .string(let text): out += Self.quoted(text)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.render(into: &out)
            }
            out += "]"
        case .members(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                out += Self.quoted(member.key) + ":"
                member.value.render(into: &out)
            }
            out += "}"
        }
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Every value in the tree, counted (the root is 0).
    var nodeCount: Int {
        switch self {
        case .raw, .string: 1
        case .array(let items): 1 + items.reduce(0) { $0 + $1.nodeCount }
        case .members(let members): 1 + members.reduce(0) { $0 + $1.value.nodeCount }
        }
    }

    /// A copy with 1–3 value-level mutations.
    public func mutated<G: RandomNumberGenerator>(using rng: inout G) -> FuzzJSON {
        var value = self
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let target = Int.random(in: 0..<value.nodeCount, using: &rng)
            var counter = 0
            value = value.replacing(node: target, counter: &counter) { node in node.mutation(using: &rng) }
        }
        return value
    }

    /// The tree with its `target`-th value (pre-order) replaced by `change(value)`.
    private func replacing(node target: Int, counter: inout Int, _ change: (FuzzJSON) -> FuzzJSON) -> FuzzJSON {
        let mine = counter
        counter += 1
        if mine == target { return change(self) }
        switch self {
        case .raw, .string:
            return self
        case .array(var items):
            for i in items.indices { items[i] = items[i].replacing(node: target, counter: &counter, change) }
            return .array(items)
        case .members(var members):
            for i in members.indices { members[i].value = members[i].value.replacing(node: target, counter: &counter, change) }
            return .members(members)
        }
    }

    private func mutation<G: RandomNumberGenerator>(using rng: inout G) -> FuzzJSON {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0, 1, 2:
            return .raw(Self.extremeTokens.randomElement(using: &rng)!)
        case 3:  // deep nesting around the value
            let depth = [10, 100, 600].randomElement(using: &rng)!
            return .raw(String(repeating: "[", count: depth) + rendered() + String(repeating: "]", count: depth))
        case 4:  // a long string or a long array
            if Bool.random(using: &rng) {
                // Mostly short; now and then past the HTTP APIs' 64 KiB body limit.
                return .string(String(repeating: "ä", count: [1, 100, 3_000, 40_000].randomElement(using: &rng)!))
            }
            return .array(Array(repeating: self, count: Int.random(in: 2...300, using: &rng)))
        case 5:  // drop or duplicate a member, or an unknown one
            guard case .members(var members) = self, !members.isEmpty else { return .raw("null") }
            let i = Int.random(in: 0..<members.count, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: members.remove(at: i)
            case 1: members.append(members[i])
            default: members.append(Member("unknown\(i)", .raw("1")))
            }
            return .members(members)
        case 6:  // a string of odd characters
            return .string(["", " ", "\u{0}", "../../etc", "%zz", "<script>", "\u{FFFF}", "x:y", "[::1]:99999", "127.0.0.1:-1"].randomElement(using: &rng)!)
        default:  // a type change
            switch self {
            case .raw(let token): return .string(token)
            case .string(let text): return .array([.string(text)])
            case .array(let items): return .members(items.enumerated().map { Member("\($0.offset)", $0.element) })
            case .members: return .array([])
            }
        }
    }
}
