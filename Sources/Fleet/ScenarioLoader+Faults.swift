import Foundation
import Yams

/// Reads the `faults:` list. Each entry has one action key (`kill`, `pause`,
/// `offline`, `toxic`, `partition`, `template_edit`, `restore_coordinator`, `restore_node`,
/// `restart_postgres`), its timing (`at` once, or
/// `every` from `from` until `until`; `for` how long it lasts) and its target
/// (`group`, `fraction` or `count` of the group's node processes).
struct FaultReader {
    let scenario: Scenario

    static let actions = ["kill", "pause", "offline", "toxic", "partition", "template_edit", "restore_coordinator", "restore_node", "restart_postgres"]
    static let timingKeys = ["at", "from", "every", "until", "for"]
    static let targetKeys = ["group", "fraction", "count"]
    /// `coordinator: N` names the coordinator a kill or pause of the coordinator hits.
    static let entryKeys = actions + timingKeys + targetKeys + ["coordinator"]

    /// Toxiproxy's toxics and their attributes (all integers: milliseconds, KB/s, bytes,
    /// microseconds for slicer's delay), see https://github.com/Shopify/toxiproxy#toxics.
    static let toxicAttributes: [String: [String]] = [
        "latency": ["latency", "jitter"],
        "bandwidth": ["rate"],
        "slow_close": ["delay"],
        "timeout": ["timeout"],
        "reset_peer": ["timeout"],
        "slicer": ["average_size", "size_variation", "delay"],
        "limit_data": ["bytes"],
    ]
    /// The attribute without which a toxic does nothing.
    static let requiredToxicAttribute: [String: String] = [
        "latency": "latency", "bandwidth": "rate", "slicer": "average_size", "limit_data": "bytes",
    ]
    static var toxicTypes: [String] { toxicAttributes.keys.sorted() }
    static let toxicKeys = ["type", "stream", "toxicity"] + Array(Set(toxicAttributes.values.flatMap { $0 })).sorted()
    static let templateCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")

    func faults(_ value: YAMLValue) throws -> [FaultSpec] {
        let entries = try value.sequence(maximumCount: ScenarioLoader.maximumFaults, expected: "a list of faults")
        var specs: [FaultSpec] = []
        var occurrences = 0
        for entry in entries {
            let spec = try fault(entry)
            occurrences += spec.occurrences(runDuration: scenario.duration).count
            if occurrences > ScenarioLoader.maximumFaultOccurrences {
                throw entry.error("brings the schedule to more than \(ScenarioLoader.maximumFaultOccurrences) fault occurrences; use a longer `every`")
            }
            specs.append(spec)
        }
        try checkCoordinatorOverlaps(specs, entries: entries)
        return specs
    }

    func fault(_ entry: YAMLValue) throws -> FaultSpec {
        let map = try entry.mapping(keys: Self.entryKeys, expected: "a fault like {at: 10s, for: 5s, kill: node}")
        let present = Self.actions.filter { map.has($0) }
        guard present.count == 1, let action = present.first else {
            if present.isEmpty { throw entry.error("needs one action: \(Self.actions.joined(separator: ", "))") }
            throw map.error(at: present[1], "one action per fault; this entry also has `\(present[0])`")
        }
        let actionValue = try map.required(action, "")
        var target = FaultTarget()
        var returnRamp: Double?
        let fault: Fault
        switch action {
        case "kill", "pause":
            let what = try actionValue.choice(["node", "coordinator"])
            switch (action, what) {
            case ("kill", "node"): fault = .killNode
            case ("kill", _): fault = .killCoordinator
            case (_, "node"): fault = .pauseNode
            default: fault = .pauseCoordinator
            }
        case "partition" where Self.namesHost(actionValue):
            fault = .partitionHost(host: try hostPartition(actionValue))
        case "offline", "partition":
            let offline = action == "offline"
            let inner = try actionValue.mapping(
                keys: Self.targetKeys + (offline ? ["return_ramp"] : []),
                expected: offline
                    ? "a target mapping like {group: field, fraction: 0.5, return_ramp: 10s} ({} for all)"
                    : "a target mapping like {group: field, fraction: 0.5} ({} for all)")
            target = try self.target(inner, into: target, outer: map)
            // Phones notice a network that is back at their own moments (radio, reachability, app).
            returnRamp = try inner.optional("return_ramp")?.duration(0...3600, positive: false)
            fault = offline ? .offline : .partition
        case "toxic":
            fault = .toxic(try toxic(actionValue))
        case "restore_coordinator", "restore_node":
            let inner = try actionValue.mapping(keys: ["snapshot"], expected: "a mapping like {snapshot: 10s} (when the copy of the store is taken)")
            let snapshot = try inner.required("snapshot", "when, in the run, the launcher copies the store it later restores, e.g. snapshot: 10s")
                .duration(0...scenario.duration)
            if map.has("every") { throw map.error(at: "every", "a restore happens once; give `at`") }
            if let at = try map.optional("at")?.duration(0...scenario.duration), snapshot >= at {
                throw inner.error(at: "snapshot", "must be before the restore (at: \(DurationText.render(at))): the copy is taken first")
            }
            if action == "restore_node" {
                // The copies are files of the launcher's machine: node processes on a host keep theirs there.
                let group = (try? map.optional("group")?.text(expected: "a group name")) ?? nil
                let remote = scenario.groups.filter { $0.runsDevices && (group == nil || $0.name == group) }
                    .compactMap { group in scenario.host(ofGroup: group.name).map { "\(group.name) (on host \($0.name))" } }
                if !remote.isEmpty {
                    throw map.error(
                        at: action,
                        "copies device stores on the launcher's machine; not supported for groups on node hosts: \(remote.joined(separator: ", ")) (give a group that runs locally)")
                }
                fault = .restoreNode(snapshot: snapshot)
                break
            }
            if scenario.coordinator.store.isPostgres {
                throw map.error(
                    at: action,
                    "restores a copy of a SQLite store; it is not supported with `coordinator: {store: postgres}` (use kill: coordinator or restart_postgres)")
            }
            if let backend = scenario.groups.first(where: { $0.backend != nil }) {
                // Devices resend what a restored store forgot; a REST client does not, so what the
                // backends were told would be contradicted by the fault, not by a fault of the server.
                throw map.error(
                    at: action,
                    "forgets what the backends of `\(backend.name)` were told after the copy, which they cannot resend; not supported with backend groups")
            }
            fault = .restoreCoordinator(snapshot: snapshot)
        case "restart_postgres":
            guard scenario.coordinator.store == .postgres else {
                throw map.error(
                    at: action,
                    scenario.coordinator.store.isPostgres
                        ? "restarts the run's own PostgreSQL; with an external server (store: postgres://…) the launcher does not control it"
                        : "needs `coordinator: {store: postgres}` (the run's own PostgreSQL server)")
            }
            let mode = try actionValue.choice(["kill", "fast"])
            fault = .restartPostgres(crash: mode == "kill")
        default:
            fault = .templateEdit(template: try templateEdit(actionValue))
        }
        target = try self.target(map, into: target, outer: nil)
        if let coordinator = map.optional("coordinator") {
            switch fault {
            case .killCoordinator, .pauseCoordinator:
                let instances = scenario.coordinator.instances
                target.coordinator = try coordinator.int(1...CoordinatorSettings.maximumInstances)
                if let number = target.coordinator, number > instances {
                    throw coordinator.error(
                        "is \(number) but the scenario has \(instances) coordinator\(instances == 1 ? "" : "s") (top-level `coordinators`)")
                }
            default:
                throw coordinator.error("names a coordinator; only `kill: coordinator` and `pause: coordinator` take one")
            }
        }
        try checkTarget(fault, target, map: map, action: action)
        if case .toxic = fault, !scenario.proxy { throw map.error(at: action, "proxy faults need `proxy: true` at the top level of the scenario") }
        if case .partitionHost = fault, map.has("group") || map.has("fraction") || map.has("count") {
            let key = Self.targetKeys.first { map.has($0) } ?? action
            throw map.error(at: key, "a host partition takes every node process of the host; no group, fraction or count")
        }
        if case .partition = fault, !scenario.proxy { throw map.error(at: action, "proxy faults need `proxy: true` at the top level of the scenario") }
        var spec = FaultSpec(fault: fault, at: 0, target: target, returnRamp: returnRamp)
        try timing(map, fault: fault, into: &spec)
        return spec
    }

    /// `at` once, or `every` (first at `from`, default one interval in; until `until`,
    /// default the run's end); `for` must fit in the run (repeats are cut at its end).
    func timing(_ map: MappingReader, fault: Fault, into spec: inout FaultSpec) throws {
        let run = scenario.duration
        let runText = DurationText.render(run)
        let instant: Bool
        if case .templateEdit = fault { instant = true } else { instant = false }
        if instant, map.has("for") { throw map.error(at: "for", "a template edit happens at once; it takes no `for`") }
        let length = try map.optional("for")?.duration(0...run, positive: true)
        spec.duration = length
        if let every = map.optional("every") {
            if map.has("at") { throw map.error(at: "at", "with `every`, the first time is `from` (at is for faults that happen once)") }
            let interval = try every.duration(0.1...run, positive: true)
            spec.every = interval
            spec.at = try map.optional("from")?.duration(0...run) ?? interval
            if spec.at >= run {
                throw map.error(at: map.has("from") ? "from" : "every", "the first occurrence (\(DurationText.render(spec.at))) must be before the run's end (\(runText))")
            }
            spec.until = try map.optional("until")?.duration(0...run)
            if let until = spec.until, until <= spec.at {
                throw map.error(at: "until", "must be after from (\(DurationText.render(spec.at)))")
            }
            if !instant {
                guard let length else { throw map.error(at: "every", "a repeating fault needs `for` (how long each occurrence lasts)") }
                if length >= interval {
                    throw map.error(at: "for", "must be shorter than every (\(DurationText.render(interval))) so occurrences do not overlap")
                }
            }
        } else {
            for key in ["from", "until"] where map.has(key) {
                throw map.error(at: key, "only with `every`; a fault that happens once has `at`")
            }
            let at = try map.required("at", "when the fault starts, e.g. at: 10s (or every: 15s to repeat)").duration(0...run)
            if at >= run { throw try map.required("at", "").error("must be before the run's end (\(runText))") }
            spec.at = at
            if let length, at + length > run {
                throw map.error(at: "for", "ends at \(DurationText.render(at + length)), after the run's end (\(runText)); at most \(DurationText.render(run - at)) here")
            }
        }
    }

    /// Reads `group`, `fraction`, `count` from `map` into `target`; a key given both
    /// inside an action mapping and on the entry is an error.
    func target(_ map: MappingReader, into target: FaultTarget, outer: MappingReader?) throws -> FaultTarget {
        var target = target
        for key in Self.targetKeys where map.has(key) && outer?.has(key) == true {
            throw map.error(at: key, "is given twice, here and on the fault entry")
        }
        if let group = map.optional("group") {
            let name = try group.text(expected: "a group name")
            let names = scenario.groups.filter(\.runsDevices).map(\.name)
            if scenario.groups.contains(where: { $0.name == name && !$0.runsDevices }) {
                throw group.error("`\(name)` is a hostile or backend group; faults hit the signing devices' groups (\(names.joined(separator: ", ")))")
            }
            guard names.contains(name) else {
                throw group.error("unknown group `\(name)`; groups are \(names.joined(separator: ", "))\(Suggestion.hint(for: name, in: names))")
            }
            target.group = name
        }
        if let fraction = map.optional("fraction") {
            let value = try fraction.fraction()
            guard value > 0 else { throw fraction.error("must be more than 0 (of the processes); leave the fault out instead") }
            target.fraction = value
        }
        if let count = map.optional("count") { target.count = try count.int(1...ScenarioLoader.maximumProcesses) }
        return target
    }

    func checkTarget(_ fault: Fault, _ target: FaultTarget, map: MappingReader, action: String) throws {
        let targeted = target.group != nil || target.fraction != nil || target.count != nil
        switch fault {
        case .killCoordinator, .pauseCoordinator, .templateEdit, .restoreCoordinator, .restartPostgres:
            if targeted {
                let key = Self.targetKeys.first { map.has($0) } ?? action
                let what = action == "template_edit" ? "a template edit" : action == "restart_postgres" ? "restart_postgres" : "the coordinator"
                throw map.error(at: key, "\(what) takes no group, fraction or count")
            }
        default:
            if target.fraction != nil && target.count != nil {
                throw map.error(at: map.has("count") ? "count" : action, "give fraction or count, not both")
            }
            let processes = scenario.groups.filter { $0.runsDevices && (target.group == nil || $0.name == target.group) }
                .reduce(0) { $0 + $1.processes }
            if let count = target.count, count > processes {
                let key = map.has("count") ? "count" : action
                throw map.error(at: key, "is \(count) but \(target.group.map { "group \($0)" } ?? "the scenario") has \(processes) node process\(processes == 1 ? "" : "es")")
            }
        }
    }

    /// `{type: latency, stream: downstream, toxicity: 1, latency: 200, jitter: 50}`.
    func toxic(_ value: YAMLValue) throws -> ToxicSpec {
        let map = try value.mapping(keys: Self.toxicKeys, expected: "a toxic like {type: latency, latency: 200}")
        let type = try map.required("type", "the toxic's type: \(Self.toxicTypes.joined(separator: ", "))").choice(Self.toxicTypes)
        var spec = ToxicSpec(type: type)
        if let stream = map.optional("stream") { spec.stream = try stream.choice(["upstream", "downstream"]) }
        if let toxicity = map.optional("toxicity") { spec.toxicity = try toxicity.fraction() }
        let allowed = Self.toxicAttributes[type] ?? []
        for key in Self.toxicKeys.dropFirst(3) where map.has(key) {
            guard allowed.contains(key) else {
                throw map.error(at: key, "is not an attribute of \(type); \(type) takes \(allowed.joined(separator: ", "))")
            }
            if let attribute = map.optional(key) {
                spec.attributes[key] = Double(try attribute.int(0...1_000_000_000, what: "a whole number"))
            }
        }
        if let required = Self.requiredToxicAttribute[type], spec.attributes[required] == nil {
            throw value.error("a \(type) toxic needs `\(required)`")
        }
        return spec
    }

    /// Whether a `partition` value is `{host: …}` (a node host's link) rather than proxy targets.
    static func namesHost(_ value: YAMLValue) -> Bool {
        guard case .mapping(let mapping) = value.node else { return false }
        for (key, _) in mapping {
            if case .scalar(let scalar) = key, scalar.string == "host" { return true }
        }
        return false
    }

    /// `{host: a}`: a host of `hosts:` that has `link_down` and `link_up`.
    func hostPartition(_ value: YAMLValue) throws -> String {
        let map = try value.mapping(keys: ["host"], expected: "{host: <name>} (a node host's link)")
        let hostValue = try map.required("host", "the node host whose link goes down")
        let name = try hostValue.text(expected: "a host name")
        let names = scenario.hosts.map(\.name)
        guard let host = scenario.hosts.first(where: { $0.name == name }) else {
            let known = names.isEmpty ? "the scenario has no `hosts`" : "hosts are \(names.joined(separator: ", "))"
            throw hostValue.error("unknown host `\(name)`; \(known)\(Suggestion.hint(for: name, in: names))")
        }
        guard host.linkDown != nil, host.linkUp != nil else {
            throw hostValue.error("host `\(name)` has no link_down and link_up commands (hosts[…].link_down / link_up) to partition it with")
        }
        return name
    }

    /// `{template: demo-nda}` or just the template id.
    func templateEdit(_ value: YAMLValue) throws -> String {
        let idValue: YAMLValue
        if case .mapping = value.node {
            idValue = try value.mapping(keys: ["template"]).required("template", "the id of the template to edit")
        } else {
            idValue = value
        }
        return try idValue.identifier(maximumLength: 100, allowed: Self.templateCharacters, allowedDescription: "A-Z a-z 0-9 - _ . (a template id)")
    }

    /// A coordinator is one process: a kill and a pause (or two kills) of the same coordinator may
    /// not overlap; nor may two restarts of PostgreSQL.
    func checkCoordinatorOverlaps(_ specs: [FaultSpec], entries: [YAMLValue]) throws {
        var windows: [(spec: Int, start: Double, end: Double, hits: Set<String>)] = []
        for (index, spec) in specs.enumerated() where spec.fault.isCoordinatorFault || spec.fault.isPostgresFault {
            let hits = Set(spec.fault.isPostgresFault ? [FaultSchedule.postgresProcess] : scenario.coordinatorTargets(spec.target))
            for occurrence in spec.occurrences(runDuration: scenario.duration) {
                if let other = windows.first(where: {
                    $0.spec != index && $0.start < occurrence.end && occurrence.start < $0.end && !$0.hits.isDisjoint(with: hits)
                }) {
                    let what = spec.fault.isPostgresFault ? "PostgreSQL takes one restart at a time" : "a coordinator takes one kill or pause at a time"
                    throw entries[index].error(
                        "overlaps faults[\(other.spec)] (\(specs[other.spec].fault.label) from \(DurationText.render(other.start)) to \(DurationText.render(other.end))) at \(DurationText.render(occurrence.start)); \(what)")
                }
                windows.append((index, occurrence.start, occurrence.end, hits))
            }
        }
    }
}
