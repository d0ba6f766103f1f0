import FleetTesting
import Foundation
import Testing
import Yams

/// deploy/: the Kubernetes manifests parse, and every `signfleet` command line in them and in the
/// systemd units is one the built binary accepts: its subcommands exist, each `--flag` is listed
/// in that subcommand's `--help`, options that take a value have one, flags do not, and the
/// positional arguments are as many as the subcommand declares. The units also pass
/// `systemd-analyze verify` where it is installed. See deploy/README.md.
@Suite struct DeployManifestTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let kubernetes = repository.appendingPathComponent("deploy/kubernetes")
    static let systemd = repository.appendingPathComponent("deploy/systemd")
    /// Secrets the manifests refer to but an operator creates by hand (documented in nodes.yaml).
    static let createdByHand: Set<String> = ["signfleet-coordinator-key"]

    // MARK: The checks themselves must be able to fail

    @Test func aMisspelledFlagIsRejected() async throws {
        let cli = CLIHelp(binary: try signfleetBinary())
        let good = try await cli.problems(["coordinator", "--store", "x.sqlite", "--seed-demo"])
        #expect(good.isEmpty, "\(good)")
        for (argv, mentions) in [
            (["coordinator", "--stor", "x.sqlite"], "--stor"),
            (["node", "--devices"], "needs a value"),
            (["coordinator", "--seed-demo=yes"], "takes no value"),
            (["nod", "--devices", "3"], "positional"),
            (["fleet", "run"], "positional"),
            (["fleet", "run", "a.yaml", "b.yaml"], "positional"),
        ] {
            let problems = try await cli.problems(argv)
            #expect(problems.contains { $0.contains(mentions) }, "\(argv): \(problems)")
        }
    }

    // MARK: Kubernetes

    @Test func kubernetesManifestsParseAndInvokeRealCommands() async throws {
        let files = try Self.yamlFiles(in: Self.kubernetes)
        #expect(files.count >= 4, "expected postgres, coordinator, nodes and fleet-run manifests, found \(files)")
        var objects: [K8sObject] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for document in try Yams.load_all(yaml: text) {
                guard let map = document as? [String: Any] else {
                    Issue.record("\(file.lastPathComponent): a document that is not a mapping")
                    continue
                }
                let object = K8sObject(file: file.lastPathComponent, map: map)
                #expect(object.map["apiVersion"] is String, "\(object): no apiVersion")
                #expect(!object.kind.isEmpty && !object.name.isEmpty, "\(object): no kind or metadata.name")
                objects.append(object)
            }
        }
        let cli = CLIHelp(binary: try signfleetBinary())
        var invocations = 0
        for object in objects {
            for container in object.containers where (container["image"] as? String ?? "").contains("signfleet") {
                let where_ = "\(object) container \(container["name"] ?? "?")"
                var argv: [String] = []
                for value in (container["command"] as? [Any] ?? []) + (container["args"] as? [Any] ?? []) {
                    guard let string = value as? String else {
                        Issue.record("\(where_): argument \(value) is not a string (quote it: Kubernetes takes strings only)")
                        continue
                    }
                    argv.append(string)
                }
                if let first = argv.first, first.hasSuffix("/signfleet") || first == "signfleet" { argv.removeFirst() }
                for problem in try await cli.problems(argv) { Issue.record("\(where_): \(argv.joined(separator: " ")): \(problem)") }
                // $(VAR) is expanded by Kubernetes only for variables the container defines;
                // anything else is passed on verbatim.
                let defined = Set((container["env"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
                for variable in argv.flatMap(Self.references) where !defined.contains(variable) {
                    Issue.record("\(where_): $(\(variable)) is not in the container's env")
                }
                for reference in Self.keyReferences(container) {
                    guard let target = objects.first(where: { $0.kind == reference.kind && $0.name == reference.name }) else {
                        if !(reference.kind == "Secret" && Self.createdByHand.contains(reference.name)) {
                            Issue.record("\(where_): refers to \(reference.kind) \(reference.name), which no manifest defines")
                        }
                        continue
                    }
                    let keys = (target.map["data"] as? [String: Any] ?? [:]).merging(target.map["stringData"] as? [String: Any] ?? [:]) { a, _ in a }
                    #expect(keys[reference.key] != nil, "\(where_): \(reference.kind) \(reference.name) has no key \(reference.key)")
                }
                invocations += 1
            }
        }
        #expect(invocations >= 4, "expected coordinator, node, fleet validate and fleet run invocations, found \(invocations)")

        // The shapes deploy/README.md and docs/deploy.md describe.
        let coordinator = try #require(objects.first { $0.kind == "Deployment" && $0.name == "signfleet-coordinator" })
        #expect((coordinator.spec["replicas"] as? Int ?? 0) >= 2, "the coordinator runs as several replicas")
        let coordinatorArgs = coordinator.containers.first?["args"] as? [String] ?? []
        #expect(Self.value(of: "--store", in: coordinatorArgs)?.hasPrefix("postgres://") == true, "replicas share one PostgreSQL store")
        // Probes go to the probe listener (answered whatever the main listener holds), on a port it binds.
        let container = try #require(coordinator.containers.first)
        let namedPorts = (container["ports"] as? [[String: Any]] ?? []).reduce(into: [String: Int]()) { ports, port in
            if let name = port["name"] as? String, let number = port["containerPort"] as? Int { ports[name] = number }
        }
        let probeAddress = try #require(Self.value(of: "--probe-http", in: coordinatorArgs), "the coordinator runs a probe listener")
        for probe in ["readinessProbe", "livenessProbe"] {
            let port = ((container[probe] as? [String: Any])?["httpGet"] as? [String: Any])?["port"] as? String
            #expect(port.flatMap { namedPorts[$0] }.map { probeAddress.hasSuffix(":\($0)") } == true, "\(probe) asks port \(port ?? "none"), not \(probeAddress)")
        }
        let nodes = try #require(objects.first { $0.kind == "Job" && $0.name == "signfleet-nodes" })
        #expect(nodes.spec["completionMode"] as? String == "Indexed")
        let node = try #require(nodes.containers.first)
        let nodeArgs = node["args"] as? [String] ?? []
        let prefix = try #require(Self.value(of: "--device-prefix", in: nodeArgs))
        let indexVariables = (node["env"] as? [[String: Any]] ?? []).filter { entry in
            let path = ((entry["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any])?["fieldPath"] as? String ?? ""
            return path.contains("job-completion-index")
        }.compactMap { $0["name"] as? String } + ["JOB_COMPLETION_INDEX"]
        #expect(Self.references(prefix).contains { indexVariables.contains($0) }, "the device prefix \(prefix) does not use the completion index")
        let devices = Int(Self.value(of: "--devices", in: nodeArgs) ?? "") ?? 0
        let completions = nodes.spec["completions"] as? Int ?? 0
        #expect(devices * completions == 100_000, "nodes.yaml runs \(completions) × \(devices) devices; docs/deploy.md sizes 100,000")
        // The node hosts reach the coordinator through a Service port the manifests define.
        let connect = try #require(Self.value(of: "--connect", in: nodeArgs))
        let hostPort = connect.replacingOccurrences(of: "tcp://", with: "").split(separator: ":").map(String.init)
        let service = objects.first { $0.kind == "Service" && $0.name == hostPort.first }
        let ports = (service?.spec["ports"] as? [[String: Any]] ?? []).compactMap { $0["port"] as? Int }
        #expect(hostPort.count == 2 && ports.contains(Int(hostPort[1]) ?? -1), "\(connect) is not a port of a Service in the manifests")
        // The audit expects what the node Job produces, on the coordinators' store.
        let audit = try #require(objects.first { $0.kind == "Job" && $0.name == "signfleet-audit" })
        let auditArgs = audit.containers.first?["args"] as? [String] ?? []
        #expect(Array(auditArgs.prefix(2)) == ["admin", "envelopes"])
        #expect(Self.value(of: "--store", in: auditArgs) == Self.value(of: "--store", in: coordinatorArgs), "the audit reads another store")
        #expect(Self.value(of: "--expect-devices", in: auditArgs) == String(devices * completions))
        #expect(Self.value(of: "--expect-per-device", in: auditArgs) == Self.value(of: "--envelopes", in: nodeArgs))

        // The fleet run's scenario is one `signfleet fleet validate` accepts.
        let scenarios = objects.filter { $0.kind == "ConfigMap" }.flatMap { object in
            (object.map["data"] as? [String: Any] ?? [:]).filter { $0.key.hasSuffix(".yaml") }.map { (object.name + "/" + $0.key, $0.value as? String ?? "") }
        }
        #expect(!scenarios.isEmpty, "no scenario ConfigMap")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-scenarios-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (index, (name, text)) in scenarios.enumerated() {
            let path = directory.appendingPathComponent("\(index).yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let validate = try ChildProcess.launch(try signfleetBinary(), ["fleet", "validate", path])
            #expect(try await validate.waitForExit(timeout: .seconds(30)) == 0, "\(name): \(validate.output)")
        }
    }

    // MARK: systemd

    @Test func systemdUnitsInvokeRealCommandsAndVerify() async throws {
        let units = try FileManager.default.contentsOfDirectory(at: Self.systemd, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "service" }.sorted { $0.path < $1.path }
        #expect(units.map(\.lastPathComponent).contains("signfleet-coordinator.service"))
        #expect(units.map(\.lastPathComponent).contains("signfleet-node@.service"))
        let binary = try signfleetBinary()
        let cli = CLIHelp(binary: binary)
        for unit in units {
            let text = try String(contentsOf: unit, encoding: .utf8)
            let commands = Self.execStarts(text)
            #expect(!commands.isEmpty, "\(unit.lastPathComponent): no ExecStart")
            for command in commands {
                var argv = Self.words(command)
                #expect(argv.first == "/usr/local/bin/signfleet", "\(unit.lastPathComponent): \(command)")
                argv.removeFirst()
                for problem in try await cli.problems(argv) { Issue.record("\(unit.lastPathComponent): \(command): \(problem)") }
            }
        }

        let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let analyze else {
            print("DeployManifestTests: systemd-analyze is not installed; skipping `systemd-analyze verify` of deploy/systemd (the flag checks above ran)")
            return
        }
        // verify refuses an ExecStart whose program is missing: point the copies at the built binary.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var copies: [String] = []
        for unit in units {
            let text = try String(contentsOf: unit, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/signfleet", with: binary)
            let copy = directory.appendingPathComponent(unit.lastPathComponent)
            try text.write(to: copy, atomically: true, encoding: .utf8)
            copies.append(copy.path)
        }
        let verify = try ChildProcess.launch(analyze, ["verify", "--man=no"] + copies)
        let status = try await verify.waitForExit(timeout: .seconds(60))
        // Unknown keys and bad values are warnings (exit 0) but are printed: any output fails.
        let said = verify.lines(.standardOutput) + verify.lines(.standardError)
        #expect(status == 0 && said.isEmpty, "systemd-analyze verify exit \(status):\n\(said.joined(separator: "\n"))")
    }

    // MARK: Helpers

    static func yamlFiles(in directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { ["yaml", "yml"].contains($0.pathExtension) }.sorted { $0.path < $1.path }
    }

    /// The names in `$(NAME)` references of a Kubernetes argument.
    static func references(_ argument: String) -> [String] {
        var names: [String] = []
        var rest = Substring(argument)
        while let start = rest.range(of: "$(") {
            guard let end = rest[start.upperBound...].firstIndex(of: ")") else { break }
            names.append(String(rest[start.upperBound..<end]))
            rest = rest[rest.index(after: end)...]
        }
        return names
    }

    /// Every `secretKeyRef` / `configMapKeyRef` in a container's env.
    static func keyReferences(_ container: [String: Any]) -> [(kind: String, name: String, key: String)] {
        (container["env"] as? [[String: Any]] ?? []).compactMap { entry in
            guard let from = entry["valueFrom"] as? [String: Any] else { return nil }
            for (field, kind) in [("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")] {
                if let reference = from[field] as? [String: Any], let name = reference["name"] as? String, let key = reference["key"] as? String {
                    return (kind, name, key)
                }
            }
            return nil
        }
    }

    static func value(of option: String, in argv: [String]) -> String? {
        for (index, word) in argv.enumerated() {
            if word == option, index + 1 < argv.count { return argv[index + 1] }
            if word.hasPrefix(option + "=") { return String(word.dropFirst(option.count + 1)) }
        }
        return nil
    }

    /// The `ExecStart=` lines of a unit, backslash continuations joined, comments skipped.
    static func execStarts(_ unit: String) -> [String] {
        var logical: [String] = []
        var current = ""
        for line in unit.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current.isEmpty, trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasSuffix("\\") {
                current += trimmed.dropLast() + " "
            } else {
                logical.append(current + trimmed)
                current = ""
            }
        }
        return logical.compactMap { line in
            guard line.hasPrefix("ExecStart=") else { return nil }
            // Prefixes such as `-` or `@` before the path are not used by our units.
            return String(line.dropFirst("ExecStart=".count))
        }
    }

    /// Splits a command line at whitespace, honouring single and double quotes (as systemd does).
    static func words(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character.isWhitespace {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }
}

/// A Kubernetes object from a manifest.
struct K8sObject: CustomStringConvertible, @unchecked Sendable {
    var file: String
    var map: [String: Any]
    var kind: String { map["kind"] as? String ?? "" }
    var name: String { (map["metadata"] as? [String: Any])?["name"] as? String ?? "" }
    var spec: [String: Any] { map["spec"] as? [String: Any] ?? [:] }
    var description: String { "\(file): \(kind) \(name)" }

    /// The containers and init containers of its pod template, if it has one.
    var containers: [[String: Any]] {
        var pod: [String: Any]?
        switch kind {
        case "Pod": pod = spec
        case "CronJob":
            pod = (((spec["jobTemplate"] as? [String: Any])?["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any]
        default: pod = (spec["template"] as? [String: Any])?["spec"] as? [String: Any]
        }
        guard let pod else { return [] }
        return (pod["initContainers"] as? [[String: Any]] ?? []) + (pod["containers"] as? [[String: Any]] ?? [])
    }
}

/// What `signfleet <subcommand> --help` (ArgumentParser's help) says a command line may contain.
actor CLIHelp {
    struct Command {
        var subcommands: Set<String>
        /// Option and flag names (`--name`), each with whether it takes a value.
        var options: [String: Bool]
        var arguments: Int
    }

    let binary: String
    private var cache: [[String]: Command] = [:]

    init(binary: String) { self.binary = binary }

    func command(_ path: [String]) async throws -> Command {
        if let known = cache[path] { return known }
        let child = try ChildProcess.launch(binary, path + ["--help"])
        let status = try await child.waitForExit(timeout: .seconds(30))
        guard status == 0 else { throw CLITestError("signfleet \(path.joined(separator: " ")) --help exited \(status): \(child.output)") }
        let command = Self.parse(child.lines(.standardOutput))
        cache[path] = command
        return command
    }

    static func parse(_ lines: [String]) -> Command {
        var section = ""
        var command = Command(subcommands: [], options: [:], arguments: 0)
        for line in lines {
            if let first = line.first, !first.isWhitespace, line.hasSuffix(":") || line.contains(": ") {
                section = String(line.prefix { $0 != ":" })
                continue
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard line.hasPrefix("  "), !trimmed.isEmpty else { continue }
            // Entry lines start two spaces in; their wrapped help text much further.
            guard !line.hasPrefix("   ") else { continue }
            switch section {
            case "SUBCOMMANDS" where !trimmed.hasPrefix("See "):
                command.subcommands.insert(String(trimmed.prefix { !$0.isWhitespace }))
            case "ARGUMENTS" where trimmed.hasPrefix("<"):
                command.arguments += 1
            case "OPTIONS" where trimmed.hasPrefix("-"):
                // `-h, --help`, `--store <store>`, `--seed-demo/--no-seed-demo`, then the help text
                // after two or more spaces.
                let head = trimmed.components(separatedBy: "  ").first ?? trimmed
                let takesValue = head.contains("<")
                for part in head.split(whereSeparator: { $0 == "," || $0 == "/" || $0 == " " }) where part.hasPrefix("-") {
                    command.options[String(part)] = takesValue
                }
            default: break
            }
        }
        return command
    }

    /// What is wrong with `signfleet <argv>`; empty when the command line is a real invocation.
    func problems(_ argv: [String]) async throws -> [String] {
        var path: [String] = []
        var command = try await command(path)
        var index = 0
        while index < argv.count, command.subcommands.contains(argv[index]) {
            path.append(argv[index])
            command = try await self.command(path)
            index += 1
        }
        var problems: [String] = []
        var positionals: [String] = []
        while index < argv.count {
            let word = argv[index]
            index += 1
            guard word.hasPrefix("-"), word.count > 1 else {
                positionals.append(word)
                continue
            }
            let name = String(word.prefix { $0 != "=" })
            guard let takesValue = command.options[name] else {
                problems.append("\(name) is not an option of `signfleet \(path.joined(separator: " "))` (see its --help)")
                continue
            }
            if takesValue {
                if name == word {
                    if index < argv.count { index += 1 } else { problems.append("\(name) needs a value") }
                }
            } else if name != word {
                problems.append("\(name) is a flag and takes no value")
            }
        }
        if positionals.count != command.arguments {
            problems.append(
                "`signfleet \(path.joined(separator: " "))` takes \(command.arguments) positional argument(s), given \(positionals.count): \(positionals)")
        }
        return problems
    }
}
