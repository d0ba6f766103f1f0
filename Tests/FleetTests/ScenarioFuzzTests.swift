import FleetTesting
import Foundation
import SignatureCapture
import Testing

@testable import Fleet

/// Seeded fuzzing of scenario YAML (issue #14 part 2): every mutated shipped scenario either
/// loads (and then renders, lays out and schedules, as the launcher does) or is refused with a
/// ``ScenarioError`` that has a message. `SIGNFLEET_SEED` replays, `SIGNFLEET_FUZZ_ITERATIONS`
/// multiplies the count.
@Suite struct ScenarioFuzzTests {
    /// Values at the edges of what YAML and the scenario grammar read.
    static let tokens: [String] = [
        ".nan", ".inf", "-.inf", "1e300", "-1e300", "1.7976931348623157e308", "9223372036854775807", "9223372036854775808",
        "-9223372036854775809", "18446744073709551615", "18446744073709551616", "0x", "0xffffffffffffffffff", "-0", "0", "-1",
        "99999999999999999999s", "9223372036854775807ms", "1e300s", "9223372036854775807h", "0.0000000001s", "1..9223372036854775807",
        "9223372036854775807..1", "-5..-1", "1s..9223372036854775807s", "1_", "_1", "1__0", "~", "\"\"", "[]", "{}", "[1, 2]",
        "{a: 1}", "&a x", "*a", "!!binary aGk=", "!!int 3", "? x", "|", ">", "'", "\"", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1",
        String(repeating: "x", count: 300), "lost == 9223372036854775808", "syncAck.p99 < 1e300s", "synced >= -1",
    ]

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scenarios")

    static func corpus() throws -> [String] {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".yaml") }.sorted()
        return try files.map { try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) }
    }

    /// Line-level mutations: a value replaced by an extreme token, a line dropped, duplicated or
    /// re-indented, lines of two scenarios spliced; sometimes bytes mutated as well.
    static func mutated(_ corpus: [String], using rng: inout SeededRandom) -> String {
        var lines = corpus.randomElement(using: &rng)!.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            guard !lines.isEmpty else { break }
            let at = Int.random(in: 0..<lines.count, using: &rng)
            switch Int.random(in: 0..<8, using: &rng) {
            case 0, 1, 2, 3:
                let token = tokens.randomElement(using: &rng)!
                let line = lines[at]
                if let colon = line.firstIndex(of: ":") {
                    lines[at] = line[...colon] + " " + token
                } else if let comma = line.firstIndex(of: ",") {
                    lines[at] = line[..<comma] + ", " + token + line[comma...]
                } else {
                    lines[at] = line + token
                }
            case 4: lines.remove(at: at)
            case 5: lines.insert(lines[at], at: at)
            case 6: lines[at] = String(repeating: " ", count: Int.random(in: 0...9, using: &rng)) + lines[at].drop { $0 == " " }
            default:
                let other = corpus.randomElement(using: &rng)!.split(separator: "\n").map(String.init)
                if !other.isEmpty { lines.insert(other[Int.random(in: 0..<other.count, using: &rng)], at: at) }
            }
        }
        var text = lines.joined(separator: "\n")
        if Int.random(in: 0..<6, using: &rng) == 0 {
            text = String(decoding: FuzzMutator.mutate(Array(text.utf8), using: &rng), as: UTF8.self)
        }
        return text
    }

    @Test func scenarioYAMLLoadsOrIsRefusedWithAScenarioError() async throws {
        let run = FuzzRun("fuzz scenario yaml")
        let corpus = try Self.corpus()
        #expect(corpus.count >= 4)
        let start = ContinuousClock.now
        let inputs = run.count(2_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let yaml = Self.mutated(corpus, using: &rng)
                do {
                    let scenario = try ScenarioLoader.parse(yaml: yaml, source: "fuzz.yaml")
                    findings.accept()
                    _ = scenario.yaml(seed: 1)
                    if scenario.groups.reduce(0, { $0 + $1.count }) <= 2_000 {
                        let layout = FleetLayout(scenario: scenario, seed: run.seed)
                        _ = FaultSchedule(scenario: scenario, layout: layout, seed: run.seed)
                    }
                } catch let error as ScenarioError {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
            }
        }
        run.report("ScenarioLoader.parse", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }
}
