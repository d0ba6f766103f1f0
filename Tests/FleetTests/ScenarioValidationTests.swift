import Foundation
import Testing

@testable import Fleet

/// Every invalid scenario gets an error naming the line, the field and what is allowed.
@Suite struct ScenarioValidationTests {
    static let base = """
        name: v
        duration: 60s
        proxy: true
        groups:
          - name: office
            count: 8
            processes: 4
            behaviour:
              cancel_rate: 0.1
          - name: field
            count: 4
            processes: 2
        """

    struct Case: CustomTestStringConvertible, Sendable {
        let yaml: String
        let line: Int
        let field: String
        let says: String
        var testDescription: String { "\(field): \(says)" }
    }

    /// `base` with `change` applied: a whole-line replacement or extra lines at the end.
    static func with(_ change: (old: String, new: String)? = nil, faults: String? = nil, extra: String = "") -> String {
        var yaml = base
        if let change { yaml = yaml.replacingOccurrences(of: change.old, with: change.new) }
        if let faults { yaml += "\nfaults:\n" + faults }
        return yaml + extra
    }

    static let cases: [Case] = [
        Case(yaml: with(("  - name: office", "  - nmae: office")), line: 5, field: "groups[0].nmae", says: "did you mean `name`"),
        Case(yaml: with(("duration: 60s", "durration: 60s")), line: 2, field: "durration", says: "did you mean `duration`"),
        Case(yaml: with(("    count: 8", "    count: -3")), line: 6, field: "groups[0].count", says: "must be 1 to 20000, got -3"),
        Case(yaml: with(("    count: 8", "    count: 20001")), line: 6, field: "groups[0].count", says: "must be 1 to 20000"),
        Case(yaml: with(("    count: 8", "    count: eight")), line: 6, field: "groups[0].count", says: "expected a whole number"),
        Case(yaml: with(("    count: 8", "    count: [8]")), line: 6, field: "groups[0].count", says: "got a list"),
        Case(yaml: with(("      cancel_rate: 0.1", "      cancel_rate: 1.5")), line: 9, field: "groups[0].behaviour.cancel_rate", says: "must be 0 to 1, got 1.5"),
        Case(yaml: with(("      cancel_rate: 0.1", "      cancel_rte: 0.1")), line: 9, field: "groups[0].behaviour.cancel_rte", says: "did you mean `cancel_rate`"),
        Case(yaml: with(("  - name: field", "  - name: office")), line: 10, field: "groups[1].name", says: "duplicate group name `office` (first at line 5)"),
        Case(yaml: with(("    processes: 2", "    processes: 5")), line: 12, field: "groups[1].processes", says: "at most count (4)"),
        Case(yaml: with(("proxy: true", "proxy: maybe")), line: 3, field: "proxy", says: "expected true or false"),
        Case(yaml: with(("duration: 60s", "duration: 60 seconds")), line: 2, field: "duration", says: "expected a duration (500ms, 10s, 2m, 1h)"),
        Case(yaml: with(("duration: 60s", "duration: 0s")), line: 2, field: "duration", says: "must be more than 0s"),
        Case(yaml: with(("    count: 8", "    count: 8\n    pens: {quill: 1}")), line: 7, field: "groups[0].pens", says: "unknown pen `quill`"),
        Case(yaml: with(extra: "\ncoordinator: {rate_limit_burst: 5}"), line: 13, field: "coordinator.rate_limit_burst", says: "needs rate_limit_hourly"),
        Case(yaml: with(extra: "\nchecks: {verdict: fine}"), line: 13, field: "checks.verdict", says: "must be one of valid, invalid, unknown"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"lost is zero\"]}"), line: 13, field: "checks.thresholds[0]", says: "has no comparison; write METRIC OP VALUE"),
        Case(yaml: with(extra: "\nchecks:\n  thresholds:\n    - lost == 0\n    - pending == 0\n    - synced.p99 < 1s"), line: 17, field: "checks.thresholds[2]", says: "unknown metric \"synced.p99\"; known: composed, signed, synced, pending"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"syncAck.p95 < 1s\"]}"), line: 13, field: "checks.thresholds[0]", says: "(did you mean `syncAck.p99`?)"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"duplicates == 0\"]}"), line: 13, field: "checks.thresholds[0]", says: "(did you mean `duplicate`?)"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"pending == none\"]}"), line: 13, field: "checks.thresholds[0]", says: "\"none\" is not a count"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"syncAck.p99 < soon\"]}"), line: 13, field: "checks.thresholds[0]", says: "\"soon\" is not a duration"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"lost = 0\"]}"), line: 13, field: "checks.thresholds[0]", says: "unknown comparison (OP: <, <=, >, >=, ==, !=)"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"lost == 0 abortOnFail\"]}"), line: 13, field: "checks.thresholds[0]", says: "abortOnFail is for signfleet load"),
        Case(yaml: with(extra: "\nchecks: {thresholds: [\"lost == 0 1\"]}"), line: 13, field: "checks.thresholds[0]", says: "expected one value after \"==\""),
        Case(yaml: with(("      cancel_rate: 0.1", "      in_person_signers: 0")), line: 9, field: "groups[0].behaviour.in_person_signers", says: "needs a signer"),
        Case(yaml: with(("      cancel_rate: 0.1", "      in_person_signers: 3..1")), line: 9, field: "groups[0].behaviour.in_person_signers", says: "lower end first"),
        Case(yaml: with(("      cancel_rate: 0.1", "      sync: sometimes")), line: 9, field: "groups[0].behaviour.sync", says: "one of when_online, manual"),
        Case(yaml: with(("    processes: 2", "    processes: 2\n    connectivity: {online_mean: 5s}")), line: 13, field: "groups[1].connectivity.online_mean", says: "only to model: gilbert_elliott"),
        Case(yaml: with(("    processes: 2", "    processes: 2\n    connectivity: {model: gilbert_elliott, online_mean: 5s}")), line: 13, field: "groups[1].connectivity.offline_mean", says: "is missing"),
        // Faults.
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: node, group: feild}"), line: 14, field: "faults[0].group", says: "unknown group `feild`; groups are office, field (did you mean `field`?)"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: node}\n  - {at: 50s, for: 20s, pause: node}"), line: 15, field: "faults[1].for", says: "ends at 70s, after the run's end (60s); at most 10s here"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: latency, latency: 100}, fraction: 1.5}"), line: 14, field: "faults[0].fraction", says: "must be 0 to 1"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: latency, latency: 100, toxicity: 2}}"), line: 14, field: "faults[0].toxic.toxicity", says: "must be 0 to 1, got 2"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: jitter, latency: 100}}"), line: 14, field: "faults[0].toxic.type", says: "must be one of bandwidth, latency, limit_data, reset_peer, slicer, slow_close, timeout"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: bandwidth, rate: 10, jitter: 5}}"), line: 14, field: "faults[0].toxic.jitter", says: "is not an attribute of bandwidth; bandwidth takes rate"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: latency, latncy: 5}}"), line: 14, field: "faults[0].toxic.latncy", says: "did you mean `latency`"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, toxic: {type: latency, jitter: 5}}"), line: 14, field: "faults[0].toxic", says: "needs `latency`"),
        Case(yaml: with(("proxy: true", "proxy: false"), faults: "  - {at: 10s, for: 5s, partition: {fraction: 0.5}}"), line: 14, field: "faults[0].partition", says: "need `proxy: true`"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: coordinator, group: office}"), line: 14, field: "faults[0].group", says: "the coordinator takes no group"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: everything}"), line: 14, field: "faults[0].kill", says: "must be one of node, coordinator"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s}"), line: 14, field: "faults[0]", says: "needs one action: kill, pause, offline, toxic, partition, template_edit"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: node, pause: node}"), line: 14, field: "faults[0].pause", says: "one action per fault"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: node, count: 3, group: field}"), line: 14, field: "faults[0].count", says: "is 3 but group field has 2 node processes"),
        Case(yaml: with(faults: "  - {at: 10s, for: 5s, kill: node, count: 1, fraction: 0.5}"), line: 14, field: "faults[0].count", says: "fraction or count, not both"),
        Case(yaml: with(faults: "  - {every: 10s, for: 10s, pause: node}"), line: 14, field: "faults[0].for", says: "shorter than every (10s)"),
        Case(yaml: with(faults: "  - {every: 10s, pause: node}"), line: 14, field: "faults[0].every", says: "needs `for`"),
        Case(yaml: with(faults: "  - {at: 5s, every: 10s, for: 1s, pause: node}"), line: 14, field: "faults[0].at", says: "the first time is `from`"),
        Case(yaml: with(faults: "  - {at: 5s, until: 10s, for: 1s, pause: node}"), line: 14, field: "faults[0].until", says: "only with `every`"),
        Case(yaml: with(faults: "  - {at: 60s, for: 1s, pause: node}"), line: 14, field: "faults[0].at", says: "before the run's end"),
        Case(yaml: with(faults: "  - {for: 1s, pause: node}"), line: 14, field: "faults[0].at", says: "is missing"),
        Case(yaml: with(faults: "  - {at: 5s, for: 1s, template_edit: {template: demo-nda}}"), line: 14, field: "faults[0].for", says: "takes no `for`"),
        Case(yaml: with(faults: "  - {at: 5s, template_edit: {template: \"no spaces\"}}"), line: 14, field: "faults[0].template_edit.template", says: "a template id"),
        Case(yaml: with(faults: "  - {at: 5s, for: 5s, offline: {group: field}, group: office}"), line: 14, field: "faults[0].offline.group", says: "given twice"),
        Case(yaml: with(faults: "  - {at: 5s, for: 1s, pause: node, fraction: 0}"), line: 14, field: "faults[0].fraction", says: "more than 0"),
        Case(
            yaml: with(faults: "  - {every: 10s, from: 5s, for: 3s, kill: coordinator}\n  - {at: 26s, for: 1s, pause: coordinator}"),
            line: 15, field: "faults[1]", says: "overlaps faults[0] (kill coordinator from 25s to 28s)"),
        Case(
            yaml: "name: v\nduration: 20m\ngroups: [{name: a, count: 1}]\nfaults:\n  - {every: 100ms, from: 0s, for: 50ms, pause: node}",
            line: 5, field: "faults[0]", says: "more than 10000 fault occurrences"),
        // Document-level problems.
        Case(yaml: "name: v\nduration: 60s\ngroups: []", line: 3, field: "groups", says: "needs at least one device group"),
        Case(yaml: "name: v\ngroups: [{name: a, count: 1}]", line: 1, field: "duration", says: "is missing; how long devices generate work"),
        Case(yaml: "- just\n- a list", line: 1, field: "", says: "expected a mapping of scenario settings"),
        Case(yaml: "name: v\nname: w\nduration: 1s\ngroups: [{name: a, count: 1}]", line: 1, field: "", says: "the key `name` appears twice"),
        Case(yaml: "name: v\nduration: [1s\ngroups: x", line: 3, field: "", says: "YAML syntax"),
        Case(yaml: "name: &n v\nduration: 1s\ngroups: [{name: *n, count: 1}]", line: 1, field: "", says: "anchors and aliases"),
        Case(yaml: "name: v\nduration: 1s\ngroups: [{name: a, count: 1}]\nchecks: {thresholds: [" + String(repeating: "[", count: 40) + "]}", line: 4, field: "", says: "brackets deep"),
        Case(yaml: "", line: 1, field: "", says: "is empty"),
    ]

    @Test(arguments: cases)
    func errorNamesLineAndField(_ testCase: Case) {
        do {
            let scenario = try ScenarioLoader.parse(yaml: testCase.yaml, source: "bad.yaml")
            Issue.record("accepted: \(scenario)")
        } catch let error as ScenarioError {
            #expect(error.source == "bad.yaml")
            #expect(error.line == testCase.line, "\(error)")
            #expect(error.field == testCase.field, "\(error)")
            #expect(error.description.contains(testCase.says), "\(error)")
            #expect(error.description.hasPrefix("bad.yaml:\(testCase.line):\(error.column): "), "\(error)")
        } catch {
            Issue.record("not a ScenarioError: \(error)")
        }
    }

    @Test func columnsPointAtTheValue() {
        let yaml = Self.with(("    count: 8", "    count: 0"))
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "c.yaml") }
        #expect(error?.description == "c.yaml:6:12: groups[0].count: must be 1 to 20000, got 0")
    }

    @Test func tooManyDevicesInAllGroups() {
        let yaml = """
            name: big
            duration: 1m
            groups:
              - {name: a, count: 15000, processes: 100}
              - {name: b, count: 5001, processes: 100}
            """
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "big.yaml") }
        #expect(error?.line == 5)
        #expect(error?.field == "groups[1].count")
        #expect(error?.message.contains("20001 devices; at most 20000") == true)
    }

    @Test func oversizedInputIsRefusedBeforeParsing() {
        let yaml = Self.base + "\n#" + String(repeating: "x", count: 1 << 20)
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "huge.yaml") }
        #expect(error?.message.contains("at most 1048576") == true)
    }

    @Test func billionLaughsIsRefused() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...9 { yaml += "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]\n" }
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "laughs.yaml") }
        #expect(error?.line == 1)
        #expect(error?.message.contains("anchors and aliases") == true)
    }

    @Test func deepBlockNestingIsRefused() {
        var yaml = "name: v\nduration: 1s\ngroups: [{name: a, count: 1}]\nchecks:\n"
        for depth in 1...30 { yaml += String(repeating: " ", count: depth * 2) + "k\(depth):\n" }
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "deep.yaml") }
        #expect(error?.message.contains("nests more than") == true)
    }

    @Test func anAsteriskInsideTextIsNotAnAlias() throws {
        let yaml = "name: v\nduration: 1s\ngroups: [{name: a, count: 1}]\nchecks: {thresholds: ['synced >= 2', \"syncAck.p99 < 1s\"]} # *c &d"
        let scenario = try ScenarioLoader.parse(yaml: yaml, source: "star.yaml")
        #expect(scenario.checks.thresholds == ["synced >= 2", "syncAck.p99 < 1s"])
        // Inside a quoted threshold, `*` is text: the threshold's value is refused, not an alias.
        let starred = "name: v\nduration: 1s\ngroups: [{name: a, count: 1}]\nchecks: {thresholds: ['synced >= 2*x', \"lost < *b\"]}"
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: starred, source: "star.yaml") }
        #expect(error?.message.contains("\"2*x\" is not a count") == true, "\(String(describing: error))")
    }
}

@Suite struct ScenarioSuggestionTests {
    @Test func closeWordsAreSuggestedFarOnesAreNot() {
        #expect(Suggestion.closest(to: "nmae", in: ["name", "count"]) == "name")
        #expect(Suggestion.closest(to: "envelopes_per_min", in: ScenarioReader.behaviourKeys) == "envelopes_per_minute")
        #expect(Suggestion.closest(to: "speed", in: ScenarioReader.behaviourKeys) == nil)
        #expect(Suggestion.closest(to: "envelope_per_minute", in: ScenarioReader.behaviourKeys) == "envelopes_per_minute")
        #expect(Suggestion.closest(to: "b", in: ["a"]) == nil)
        #expect(Suggestion.closest(to: "Duration", in: ScenarioReader.topKeys) == "duration")
        #expect(Suggestion.editDistance("kitten", "sitting") == 3)
        #expect(Suggestion.editDistance("ab", "ba") == 1)
    }

    @Test func aSecondDocumentIsASyntaxErrorAtItsLine() {
        let error = #expect(throws: ScenarioError.self) {
            try ScenarioLoader.parse(yaml: "name: x\n---\nname: y", source: "two.yaml")
        }
        #expect(error?.line == 2)
        #expect(error?.message == "YAML syntax: expected a single document in the stream (line 1): found another document")
    }
}
