import Foundation

/// Reads the top-level `hosts:` list (docs/scenarios.md, "`hosts`"): node hosts on other
/// machines or in other network namespaces. Every command is an argv list; the parts the
/// launcher adds (directories, the executable) are restricted to characters no shell reads
/// specially, since `ssh` joins its arguments into a line for the remote shell.
extension ScenarioReader {
    static let hostKeys = ["name", "launch", "coordinator_address", "directory", "groups", "executable", "signals", "link_down", "link_up"]
    static let maximumHosts = 32
    static let maximumArgvCount = 32
    /// Host names are parts of fault labels; the same alphabet as group names.
    static let hostNameCharacters = groupNameCharacters
    /// Paths the launcher passes to a host's commands: safe as they are on a remote shell's line.
    static let remotePathCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-")
    static let addressCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:")

    static func hosts(_ value: YAMLValue, groups: [DeviceGroup]) throws -> [FleetHost] {
        let entries = try value.sequence(maximumCount: maximumHosts, expected: "a list of node hosts")
        var hosts: [FleetHost] = []
        var placed: [String: String] = [:]
        for entry in entries {
            let host = try self.host(entry, groups: groups)
            let map = try entry.mapping(keys: hostKeys)
            if hosts.contains(where: { $0.name == host.name }) {
                throw try map.required("name", "").error("duplicate host name `\(host.name)`")
            }
            for group in host.groups {
                if let other = placed[group] {
                    throw try map.required("groups", "").error("group `\(group)` already runs on host `\(other)`; a group runs on one host")
                }
                placed[group] = host.name
            }
            hosts.append(host)
        }
        return hosts
    }

    static func host(_ value: YAMLValue, groups: [DeviceGroup]) throws -> FleetHost {
        let map = try value.mapping(keys: hostKeys, expected: "a node host (name, launch, coordinator_address, directory, groups)")
        let name = try map.required("name", "name the host (lowercase letters, digits, '_')").identifier(
            maximumLength: 32, allowed: hostNameCharacters, allowedDescription: "lowercase letters, digits and '_'")
        let launch = try argv(map.required("launch", "the command prefix that runs a command there, e.g. [ssh, fleet@10.0.0.7] or [ip, netns, exec, sf-a]"))
        let addressValue = try map.required("coordinator_address", "the address the coordinator is reached at from that host, e.g. 10.0.0.1")
        let address = try addressValue.text(expected: "a host name or an IP address")
        guard (1...253).contains(address.count), address.unicodeScalars.allSatisfy(addressCharacters.contains), !address.hasPrefix("-") else {
            throw addressValue.error("must be a host name or an IP address (1 to 253 of A-Z a-z 0-9 . - :), got \(addressValue.kindDescription)")
        }
        let directory = try remotePath(map.required("directory", "an absolute directory on that host for the run's files, e.g. /var/tmp/signfleet"))
        let groupsValue = try map.required("groups", "the groups whose node processes run there")
        let groupEntries = try groupsValue.sequence(maximumCount: ScenarioLoader.maximumGroups, expected: "a list of group names")
        guard !groupEntries.isEmpty else { throw groupsValue.error("needs at least one group") }
        var names: [String] = []
        let honest = groups.filter(\.runsDevices).map(\.name)
        for entry in groupEntries {
            let group = try entry.text(expected: "a group name")
            if groups.contains(where: { $0.name == group && !$0.runsDevices }) {
                throw entry.error("`\(group)` is a hostile or backend group; those run on the launcher's machine")
            }
            guard honest.contains(group) else {
                throw entry.error("unknown group `\(group)`; groups are \(honest.joined(separator: ", "))\(Suggestion.hint(for: group, in: honest))")
            }
            guard !names.contains(group) else { throw entry.error("names the group `\(group)` twice") }
            if let attacker = groups.first(where: { $0.hostile?.target == group }) {
                throw entry.error("`\(group)` is attacked by the hostile group `\(attacker.name)`, which reads its stores on the launcher's machine; keep it there")
            }
            names.append(group)
        }
        var host = FleetHost(name: name, launch: launch, coordinatorAddress: address, directory: directory, groups: names)
        if let executable = map.optional("executable") { host.executable = try remotePath(executable) }
        if let signals = map.optional("signals") {
            host.signals = try signals.choice(["local", "remote"]) == "remote" ? .remote : .local
        }
        let down = map.optional("link_down"), up = map.optional("link_up")
        if let down, let up {
            host.linkDown = try argv(down)
            host.linkUp = try argv(up)
        } else if down != nil {
            throw map.error(at: "link_down", "needs link_up too (the command that brings the link back)")
        } else if up != nil {
            throw map.error(at: "link_up", "needs link_down too (the command that takes the link down)")
        }
        return host
    }

    /// A command as a list of 1 to 32 arguments, each 1 to 1,000 characters without NUL or line breaks.
    static func argv(_ value: YAMLValue) throws -> [String] {
        let entries = try value.sequence(maximumCount: maximumArgvCount, expected: "a command as a list of arguments, e.g. [ip, netns, exec, sf-a]")
        guard !entries.isEmpty else { throw value.error("needs at least the program to run") }
        return try entries.map { entry in
            let argument = try entry.text(expected: "an argument")
            guard !argument.isEmpty, !argument.contains(where: { $0 == "\0" || $0 == "\n" || $0 == "\r" }) else {
                throw entry.error("must be a non-empty argument without NUL or line breaks")
            }
            return argument
        }
    }

    /// An absolute path of A-Z a-z 0-9 / . _ - without `..`, at most 500 characters.
    static func remotePath(_ value: YAMLValue) throws -> String {
        let path = try value.text(expected: "an absolute path")
        guard path.hasPrefix("/"), path.count <= 500, path.unicodeScalars.allSatisfy(remotePathCharacters.contains),
            !path.split(separator: "/").contains("..")
        else {
            throw value.error("must be an absolute path of A-Z a-z 0-9 / . _ - (no `..`, at most 500 characters), got \(value.kindDescription)")
        }
        return path
    }
}

extension ScenarioYAMLWriter {
    /// The `hosts:` list, one flow mapping per host (nothing without hosts).
    mutating func hosts(_ hosts: [FleetHost]) {
        guard !hosts.isEmpty else { return }
        func list(_ items: [String]) -> String { "[" + items.map(Self.doubleQuoted).joined(separator: ", ") + "]" }
        line("hosts:")
        for host in hosts {
            var parts = [
                "name: \(Self.quote(host.name))", "launch: \(list(host.launch))",
                "coordinator_address: \(Self.doubleQuoted(host.coordinatorAddress))", "directory: \(Self.doubleQuoted(host.directory))",
                "groups: \(list(host.groups))",
            ]
            if let executable = host.executable { parts.append("executable: \(Self.doubleQuoted(executable))") }
            parts.append("signals: \(host.signals.rawValue)")
            if let down = host.linkDown, let up = host.linkUp {
                parts.append("link_down: \(list(down))")
                parts.append("link_up: \(list(up))")
            }
            line("  - {\(parts.joined(separator: ", "))}")
        }
    }
}
