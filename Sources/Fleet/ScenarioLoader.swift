import Foundation
import SignatureCapture
import Yams

/// Reads and validates scenario files (format: docs/scenarios.md).
///
/// It walks Yams' node tree rather than decoding with Codable so that every error
/// names the file, line, column and field path: `smoke.yaml:14:14:
/// groups[0].behaviour.cancel_rate: must be 0 to 1, got 1.5`. Unknown keys, wrong
/// types, values out of range, unknown group names, proxy faults without
/// `proxy: true` and overlapping coordinator faults are all errors; the input is
/// bounded (1 MiB, nesting, node count, no anchors or aliases).
public enum ScenarioLoader {
    /// Most devices in one scenario (all groups together).
    public static let maximumDevices = 20_000
    /// Most node processes in one scenario.
    public static let maximumProcesses = 1_000
    public static let maximumGroups = 100
    public static let maximumFaults = 1_000
    /// Most fault occurrences once `every` is expanded.
    public static let maximumFaultOccurrences = 10_000
    public static let maximumRunDuration: Double = 24 * 3600

    /// Reads and validates the scenario file at `path`.
    public static func load(path: String) throws -> Scenario {
        let url = URL(fileURLWithPath: path)
        let size: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        } catch {
            throw ScenarioError(source: path, line: 0, column: 0, field: "", message: "cannot be read: \(error.localizedDescription)")
        }
        guard size <= ScenarioBounds.maximumBytes else {
            throw ScenarioError(source: path, line: 0, column: 0, field: "", message: "is \(size) bytes; scenario files may have at most \(ScenarioBounds.maximumBytes)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ScenarioError(source: path, line: 0, column: 0, field: "", message: "cannot be read: \(error.localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ScenarioError(source: path, line: 0, column: 0, field: "", message: "is not UTF-8 text")
        }
        return try parse(yaml: text, source: path)
    }

    /// Parses and validates scenario YAML; `source` names it in errors (a file name).
    public static func parse(yaml: String, source: String) throws -> Scenario {
        try ScenarioBounds.checkText(yaml, source: source)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw syntaxError(error, source: source)
        } catch {
            throw ScenarioError(source: source, line: 0, column: 0, field: "", message: "is not valid YAML: \(error)")
        }
        guard let root else {
            throw ScenarioError(source: source, line: 1, column: 1, field: "", message: "is empty; a scenario needs at least name, duration and groups")
        }
        try ScenarioBounds.checkTree(root, source: source)
        return try ScenarioReader.scenario(YAMLValue(node: root, path: "", source: source))
    }

    /// Yams' syntax errors as `ScenarioError`s, with their place.
    static func syntaxError(_ error: YamlError, source: String) -> ScenarioError {
        func make(_ mark: Mark?, _ message: String) -> ScenarioError {
            ScenarioError(source: source, line: mark?.line ?? 0, column: mark?.column ?? 0, field: "", message: message)
        }
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            // libyaml words it as "<context>, but <problem>" ("while parsing a flow sequence", "did not find expected ','").
            guard let context else { return make(mark, "YAML syntax: \(problem)") }
            let trimmed = problem.hasPrefix("but ") ? String(problem.dropFirst(4)) : problem
            return make(mark, "YAML syntax: \(context.text) (line \(context.mark.line)): \(trimmed)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return make(context.mark, "the key `\(duplicates.joined(separator: "`, `"))` appears twice in one mapping")
        case .reader(let problem, _, _, _):
            return make(nil, "cannot be read as YAML: \(problem)")
        default:
            return make(nil, "is not valid YAML: \(error)")
        }
    }
}
