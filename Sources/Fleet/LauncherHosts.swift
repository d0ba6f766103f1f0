import Foundation

/// Fleets across hosts (docs/fleet.md, "Fleets across hosts"): node processes of the groups a
/// scenario's `hosts:` places elsewhere are started through the host's launch prefix, with
/// their plan copied there first; their histories and device stores are gathered back into
/// the run directory before the checker runs; `partition: {host: …}` runs the host's
/// `link_down` / `link_up` commands. Every command is an argv list (``HostCommand``).
extension Launcher {
    /// Where the coordinator binds: every interface when node hosts must reach it, else loopback only.
    var coordinatorBind: String { configuration.scenario.hosts.isEmpty ? "tcp://127.0.0.1:*" : "tcp://0.0.0.0:*" }

    /// The endpoint the launcher's own processes use for a coordinator bound on every interface.
    static func localEndpoint(_ endpoint: String) -> String {
        endpoint.hasPrefix("tcp://0.0.0.0:") ? "tcp://127.0.0.1:" + endpoint.dropFirst("tcp://0.0.0.0:".count) : endpoint
    }

    /// `endpoint` with its address replaced by the one `host` reaches the coordinator at (same port).
    static func endpoint(_ endpoint: String, reachedFrom host: FleetHost) -> String {
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":"), colon > endpoint.index(endpoint.startIndex, offsetBy: 5)
        else { return endpoint }
        let address = host.coordinatorAddress.contains(":") ? "[\(host.coordinatorAddress)]" : host.coordinatorAddress
        return "tcp://\(address)\(endpoint[colon...])"
    }

    func host(of node: LaunchPlan.NodeProcess) -> FleetHost? {
        guard let name = node.host else { return nil }
        return configuration.scenario.hosts.first { $0.name == name }
    }

    /// This run's directory on `host`: `<directory>/<run directory's name>`.
    func remoteRunDirectory(_ host: FleetHost) -> String {
        let base = host.directory.hasSuffix("/") ? String(host.directory.dropLast()) : host.directory
        return "\(base)/\(URL(fileURLWithPath: run.path).lastPathComponent)"
    }

    /// The node plan's paths on its host (devices, history) when it runs on one.
    func placeOnHost(_ plan: inout NodePlan, node: LaunchPlan.NodeProcess) {
        guard let host = self.host(of: node) else { return }
        let directory = remoteRunDirectory(host)
        plan.dataDirectory = "\(directory)/devices"
        plan.historyFile = "\(directory)/history/\(node.process).jsonl"
    }

    /// Creates this run's directory on every host (`nodes/`, `history/`, `devices/`).
    func prepareHosts() async throws {
        let used = Set(configuration.plan.nodes.compactMap(\.host))
        for host in configuration.scenario.hosts where used.contains(host.name) {
            let directory = remoteRunDirectory(host)
            let outcome = await HostCommand(
                argv: host.launch + ["mkdir", "-p", "\(directory)/nodes", "\(directory)/history", "\(directory)/devices"], timeout: .seconds(60)
            ).run()
            guard outcome.succeeded else {
                throw HostSetupError("creating \(directory) on host \(host.name): \(outcome)")
            }
            message("host \(host.name): run directory \(directory)")
        }
    }

    /// The child spec of a node process: local, or through its host's launch prefix with its plan
    /// copied there first (`launch + [tee, <remote plan>]`, the plan on standard input).
    func nodeChildSpec(_ node: LaunchPlan.NodeProcess, planFile: String) async throws -> ChildSpec {
        guard let host = self.host(of: node) else {
            return ChildSpec(name: node.process, arguments: ["node", "--plan", planFile], restartBudget: node.restartBudget)
        }
        let remotePlan = "\(remoteRunDirectory(host))/nodes/\(node.process).json"
        let outcome = await HostCommand(argv: host.launch + ["tee", remotePlan], input: planFile, timeout: .seconds(60)).run()
        guard outcome.succeeded else {
            throw HostSetupError("copying the plan of \(node.process) to \(remotePlan) on host \(host.name): \(outcome)")
        }
        var spec = ChildSpec(name: node.process, arguments: ["node", "--plan", remotePlan], restartBudget: node.restartBudget)
        spec.launchPrefix = host.launch
        spec.executable = host.executable
        spec.remoteSignals = host.signals == .remote
        return spec
    }

    /// Brings every host's histories and device stores into the run directory, after every node
    /// stopped: `launch + [tar, -C, <remote run dir>, -cf, -, history, devices]` into
    /// `hosts/<host>.tar`, unpacked here (only `history/` and `devices/`), then removed. Returns
    /// what failed (the checker then misses those devices, and says so).
    func gatherHosts() async -> [String] {
        let used = Set(configuration.plan.nodes.compactMap(\.host))
        let hosts = configuration.scenario.hosts.filter { used.contains($0.name) }
        guard !hosts.isEmpty else { return [] }
        try? FileManager.default.createDirectory(atPath: run.hostsDirectory, withIntermediateDirectories: true)
        var notes: [String] = []
        for host in hosts {
            let archive = URL(fileURLWithPath: run.hostsDirectory).appendingPathComponent("\(host.name).tar").path
            let pulled = await HostCommand(
                argv: host.launch + ["tar", "-C", remoteRunDirectory(host), "-cf", "-", "history", "devices"], output: archive,
                timeout: .seconds(600)
            ).run()
            guard pulled.succeeded else {
                notes.append("gathering host \(host.name) failed: \(pulled)")
                record(.fail, .stop, error: "gather: \(pulled)", details: ["host": host.name, "phase": "gather"])
                continue
            }
            let unpacked = await HostCommand(
                argv: ["tar", "-C", run.path, "--no-same-owner", "--no-overwrite-dir", "-xf", archive, "history", "devices"],
                timeout: .seconds(600)
            ).run()
            guard unpacked.succeeded else {
                notes.append("unpacking what host \(host.name) sent (\(archive)) failed: \(unpacked)")
                record(.fail, .stop, error: "gather: \(unpacked)", details: ["host": host.name, "phase": "gather"])
                continue
            }
            try? FileManager.default.removeItem(atPath: archive)
            record(.ok, .stop, details: ["host": host.name, "phase": "gather", "from": remoteRunDirectory(host)])
            message("host \(host.name): histories and device stores gathered from \(remoteRunDirectory(host))")
        }
        if (try? FileManager.default.contentsOfDirectory(atPath: run.hostsDirectory))?.isEmpty == true {
            try? FileManager.default.removeItem(atPath: run.hostsDirectory)
        }
        return notes
    }

    /// `partition: {host: …}`: the host's `link_down` at the start, `link_up` at the stop, run here.
    func partitionHost(_ name: String, isStart: Bool) async -> [String] {
        guard let host = configuration.scenario.hosts.first(where: { $0.name == name }),
            let command = isStart ? host.linkDown : host.linkUp
        else { return ["host \(name) has no link_down / link_up"] }
        let outcome = await HostCommand(argv: command, timeout: .seconds(30)).run()
        return outcome.succeeded ? [] : ["host \(name): `\(command.joined(separator: " "))` \(outcome)"]
    }
}

/// A node host could not be prepared: its run directory or a node plan could not be made there.
public struct HostSetupError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "node host setup failed: \(message)" }
}
