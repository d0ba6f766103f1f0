import CoordinatorPostgres
import FleetProtocol
import Foundation
import SignatureCapture
import Thresholds
import Yams

/// Reads each part of a scenario from its YAML value (keys are snake_case; the
/// allowed keys of every mapping are listed here and in docs/scenarios.md).
enum ScenarioReader {
    static let topKeys = ["name", "seed", "duration", "drain_timeout", "drain_ramp", "start_ramp", "proxy", "coordinator", "coordinators", "groups", "hosts", "faults", "checks"]
    static let coordinatorKeys = ["heartbeat", "rate_limit_hourly", "rate_limit_burst", "restart_budget", "store"]
    static let groupKeys = ["name", "count", "processes", "restart_budget", "pens", "behaviour", "connectivity", "hostile", "backend"]
    static let backendKeys = ["envelopes_per_minute", "decline_rate", "void_rate"]
    static let hostileKeys = ["target", "behaviours", "every", "slow_reader_messages"]
    static let behaviourKeys = [
        "envelopes_per_minute", "template_fraction", "in_person_signers", "remote_signers", "embedded_fraction",
        "signing_duration", "cancel_rate", "decline_rate", "sync", "max_envelopes",
    ]
    static let connectivityKeys = ["model", "online_mean", "offline_mean", "start_offline"]
    static let checksKeys = ["verdict", "thresholds"]
    static let verdicts = CheckVerdict.allCases.map(\.rawValue)

    static let scenarioNameCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    /// Group names become parts of process and device ids (`node-<group>-<n>`, `<group>-<n>`), so no '-'.
    static let groupNameCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789_")

    static func scenario(_ root: YAMLValue) throws -> Scenario {
        let map = try root.mapping(keys: topKeys, expected: "a mapping of scenario settings (name, duration, groups, …)")
        let name = try map.required("name", "give the scenario a name").identifier(
            maximumLength: 64, allowed: scenarioNameCharacters, allowedDescription: "letters, digits, '-', '_' and '.'")
        let seed = try map.optional("seed")?.uint64()
        let duration = try map.required("duration", "how long devices generate work, e.g. 60s")
            .duration(0...ScenarioLoader.maximumRunDuration, positive: true)
        let drainTimeout = try map.optional("drain_timeout")?.duration(0...3600, positive: true) ?? 60
        let drainRamp = try map.optional("drain_ramp")?.duration(0...3600, positive: false) ?? 0
        if drainRamp >= drainTimeout, let value = map.optional("drain_ramp") {
            throw value.error(
                "drain_ramp (\(DurationText.render(drainRamp))) must be shorter than drain_timeout (\(DurationText.render(drainTimeout))): the last device would start draining after the launcher stopped waiting")
        }
        let startRamp = try map.optional("start_ramp")?.duration(0...3600, positive: false) ?? 0
        if startRamp >= duration, let value = map.optional("start_ramp") {
            throw value.error(
                "start_ramp (\(DurationText.render(startRamp))) must be shorter than duration (\(DurationText.render(duration))): the last device would start after the run ended")
        }
        let proxy = try map.optional("proxy")?.bool() ?? false
        var coordinator = try map.optional("coordinator").map(coordinatorSettings) ?? CoordinatorSettings()
        if let instances = map.optional("coordinators") {
            coordinator.instances = try instances.int(1...CoordinatorSettings.maximumInstances)
            if coordinator.instances > 1 && !coordinator.store.isPostgres {
                throw instances.error(
                    "\(coordinator.instances) coordinators need a shared store: set `coordinator: {store: postgres}` (SQLite serves one coordinator)")
            }
            if coordinator.instances > 1 && proxy {
                throw instances.error(
                    "several coordinators with `proxy: true` is not supported yet (each node process has one proxy, to one coordinator); set proxy: false")
            }
        }
        let groups = try deviceGroups(map.required("groups", "list at least one device group"))
        let checks = try map.optional("checks").map(checks) ?? Checks()
        var scenario = Scenario(
            name: name, seed: seed, duration: duration, drainTimeout: drainTimeout, coordinator: coordinator, proxy: proxy,
            groups: groups, checks: checks)
        scenario.drainRamp = drainRamp
        scenario.startRamp = startRamp
        if let hosts = map.optional("hosts") {
            scenario.hosts = try self.hosts(hosts, groups: groups)
            if proxy, !scenario.hosts.isEmpty {
                throw map.error(at: "hosts", "node hosts with `proxy: true` are not supported yet (the proxies listen on the launcher's loopback); set proxy: false")
            }
        }
        if let faults = map.optional("faults") {
            scenario.faults = try FaultReader(scenario: scenario).faults(faults)
        }
        return scenario
    }

    static func coordinatorSettings(_ value: YAMLValue) throws -> CoordinatorSettings {
        let map = try value.mapping(keys: coordinatorKeys)
        var settings = CoordinatorSettings()
        if let heartbeat = map.optional("heartbeat") { settings.heartbeat = try heartbeat.duration(0.01...60, positive: true) }
        settings.rateLimitHourly = try map.optional("rate_limit_hourly")?.int(1...100_000_000)
        settings.rateLimitBurst = try map.optional("rate_limit_burst")?.int(1...1_000_000)
        if settings.rateLimitBurst != nil && settings.rateLimitHourly == nil {
            throw map.error(at: "rate_limit_burst", "needs rate_limit_hourly (the burst is of that budget)")
        }
        if let budget = map.optional("restart_budget") { settings.restartBudget = try budget.int(0...1_000) }
        if let store = map.optional("store") { settings.store = try coordinatorStore(store) }
        return settings
    }

    /// `sqlite` (the default), `postgres` (a throwaway cluster in the run directory) or an
    /// existing server's `postgres://user[:password]@host[:port]/database` (the run makes its own schema there).
    static func coordinatorStore(_ value: YAMLValue) throws -> CoordinatorStoreChoice {
        let text = try value.text(expected: "sqlite, postgres, or a postgres://user@host:port/database URL")
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            guard text.utf8.count <= 1024 else { throw value.error("is \(text.utf8.count) bytes; a PostgreSQL URL here has at most 1024") }
            // No query and no fragment at all: the launcher adds the run's own `schema`, and an
            // option such as `sslmode` would be ignored (the store connects without TLS).
            guard !text.contains("?"), !text.contains("#") else {
                throw value.error(
                    "has a query or a fragment; give only postgres://user[:password]@host[:port]/database (each run makes a schema of its own; connection options are not supported)")
            }
            let schema: String?
            do {
                schema = try PostgresCoordinatorStore.checkURL(text)
            } catch let error as FleetError {
                throw value.error(error.message)
            }
            if schema != nil {
                throw value.error("names a schema; leave `?schema=` out: each run makes a fresh schema of its own on that server")
            }
            return .postgresURL(text)
        }
        switch try value.choice(["sqlite", "postgres"]) {
        case "postgres": return .postgres
        default: return .sqlite
        }
    }

    static func deviceGroups(_ value: YAMLValue) throws -> [DeviceGroup] {
        let entries = try value.sequence(maximumCount: ScenarioLoader.maximumGroups, expected: "a list of device groups")
        guard !entries.isEmpty else { throw value.error("needs at least one device group") }
        var groups: [DeviceGroup] = []
        var firstLine: [String: Int] = [:]
        var devices = 0, processes = 0
        for entry in entries {
            let group = try deviceGroup(entry)
            let map = try entry.mapping(keys: groupKeys)
            if let line = firstLine[group.name] {
                throw try map.required("name", "").error("duplicate group name `\(group.name)` (first at line \(line))")
            }
            firstLine[group.name] = entry.node.mark?.line ?? 0
            devices += group.count
            processes += group.processes
            if devices > ScenarioLoader.maximumDevices {
                throw try map.required("count", "").error(
                    "brings the scenario to \(devices) devices; at most \(ScenarioLoader.maximumDevices) in all groups together")
            }
            if processes > ScenarioLoader.maximumProcesses {
                throw try map.required("count", "").error(
                    "brings the scenario to \(processes) node processes; at most \(ScenarioLoader.maximumProcesses) in all groups together")
            }
            groups.append(group)
        }
        try checkHostileTargets(groups, entries: entries)
        return groups
    }

    /// A hostile group attacks an honest group of the same scenario.
    static func checkHostileTargets(_ groups: [DeviceGroup], entries: [YAMLValue]) throws {
        let honest = groups.filter(\.runsDevices).map(\.name)
        guard !honest.isEmpty else {
            throw entries[0].error("no group runs signing devices (every group is hostile or a backend); a scenario needs at least one")
        }
        for (group, entry) in zip(groups, entries) {
            guard let hostile = group.hostile else { continue }
            guard honest.contains(hostile.target) else {
                let map = try entry.mapping(keys: groupKeys)
                let target = try map.required("hostile", "").mapping(keys: hostileKeys).required("target", "")
                throw target.error(
                    "`\(hostile.target)` is not an honest group of this scenario; honest groups are \(honest.joined(separator: ", "))"
                        + Suggestion.hint(for: hostile.target, in: honest))
            }
        }
    }

    /// `backend: {envelopes_per_minute: 12, decline_rate: 0.1, void_rate: 0.1}`.
    static func backendSettings(_ value: YAMLValue) throws -> BackendSettings {
        let map = try value.mapping(keys: backendKeys, expected: "a mapping (envelopes_per_minute, decline_rate, void_rate)")
        var settings = BackendSettings()
        if let rate = map.optional("envelopes_per_minute") { settings.envelopesPerMinute = try rate.double(0...600) }
        if let decline = map.optional("decline_rate") { settings.declineRate = try decline.fraction() }
        if let void = map.optional("void_rate") {
            settings.voidRate = try void.fraction()
            guard settings.voidRate + settings.declineRate <= 1 else {
                throw void.error("void_rate plus decline_rate is at most 1 (one draw per ceremony picks void, decline or sign); got \(settings.voidRate) + \(settings.declineRate)")
            }
        }
        return settings
    }

    /// `hostile: {target: office, behaviours: [impersonate, junk_push], every: 1s, slow_reader_messages: 20000}`.
    static func hostileSettings(_ value: YAMLValue, count: Int) throws -> HostileSettings {
        let map = try value.mapping(keys: hostileKeys, expected: "a mapping (target, behaviours, every, slow_reader_messages)")
        let target = try map.required("target", "name the honest group this group attacks").text(expected: "a group name")
        var settings = HostileSettings(target: target)
        if let list = map.optional("behaviours") {
            let names = HostileBehaviour.allCases.map(\.rawValue)
            let entries = try list.sequence(maximumCount: names.count, expected: "a list of behaviours (\(names.joined(separator: ", ")))")
            guard !entries.isEmpty else { throw list.error("needs at least one of \(names.joined(separator: ", "))") }
            settings.behaviours = try entries.map { entry in
                let name = try entry.choice(names)
                return HostileBehaviour(rawValue: name) ?? .impersonate
            }
            if Set(settings.behaviours).count != settings.behaviours.count { throw list.error("names a behaviour twice") }
        }
        if count < settings.behaviours.count {
            throw value.error("has \(settings.behaviours.count) behaviours but the group has \(count) devices; each behaviour needs a device")
        }
        if let every = map.optional("every") { settings.every = try every.duration(0.05...3600, positive: true) }
        if let messages = map.optional("slow_reader_messages") { settings.slowReaderMessages = try messages.int(1...10_000_000) }
        return settings
    }

    static func deviceGroup(_ value: YAMLValue) throws -> DeviceGroup {
        let map = try value.mapping(keys: groupKeys, expected: "a device group (name, count, …)")
        let name = try map.required("name", "name the group (lowercase letters, digits, '_')").identifier(
            maximumLength: 32, allowed: groupNameCharacters, allowedDescription: "lowercase letters, digits and '_'")
        let count = try map.required("count", "how many devices the group has").int(1...ScenarioLoader.maximumDevices)
        var group = DeviceGroup(name: name, count: count)
        if let processes = map.optional("processes") {
            group.processes = try processes.int(1...ScenarioLoader.maximumProcesses)
            if group.processes > count {
                throw processes.error("must be at most count (\(count)): every node process hosts at least one device")
            }
        }
        if let budget = map.optional("restart_budget") { group.restartBudget = try budget.int(0...1_000) }
        if let pens = map.optional("pens") { group.pens = try self.pens(pens) }
        if let behaviour = map.optional("behaviour") { group.behaviour = try self.behaviour(behaviour) }
        if let connectivity = map.optional("connectivity") { group.connectivity = try self.connectivity(connectivity) }
        if let hostile = map.optional("hostile") {
            for key in ["behaviour", "connectivity", "pens"] where map.has(key) {
                throw map.error(at: key, "a hostile group signs nothing; it takes no \(key)")
            }
            group.hostile = try hostileSettings(hostile, count: count)
        }
        if let backend = map.optional("backend") {
            for key in ["behaviour", "connectivity", "pens", "hostile"] where map.has(key) {
                throw map.error(at: key, "a backend group drives the REST API, it runs no devices; it takes no \(key)")
            }
            group.backend = try backendSettings(backend)
        }
        return group
    }

    /// `{applePencil: 3, finger: 1}` or `[applePencil, finger]` (equal weights); aliases
    /// such as `pencil` become the pen's identifier.
    static func pens(_ value: YAMLValue) throws -> [String: Double] {
        let known = PenKind.allKinds.map(\.identifier)
        var pens: [String: Double] = [:]
        func add(_ nameValue: YAMLValue, _ name: String, weight: Double) throws {
            guard let kind = PenKind(name: name) else {
                throw nameValue.error("unknown pen `\(name)`; pens are \(known.joined(separator: ", "))\(Suggestion.hint(for: name, in: known))")
            }
            guard pens[kind.identifier] == nil else { throw nameValue.error("names the pen \(kind.identifier) twice") }
            pens[kind.identifier] = weight
        }
        switch value.node {
        case .sequence:
            for entry in try value.sequence(maximumCount: 16) { try add(entry, try entry.text(expected: "a pen name"), weight: 1) }
        case .mapping(let mapping):
            guard mapping.count <= 16 else { throw value.error("has \(mapping.count) pens; at most 16") }
            for (key, weightNode) in mapping {
                let keyValue = YAMLValue(node: key, path: value.path, source: value.source)
                let name = try keyValue.text(expected: "a pen name")
                let weight = try value.child(name, weightNode).double(0...1_000_000, what: "a relative weight")
                guard weight > 0 else { throw value.child(name, weightNode).error("must be more than 0 (leave the pen out instead)") }
                try add(keyValue, name, weight: weight)
            }
        default:
            throw value.error("expected pens as a mapping {applePencil: 3, finger: 1} or a list [applePencil, finger], got \(value.kindDescription)")
        }
        guard !pens.isEmpty else { throw value.error("needs at least one pen: \(known.joined(separator: ", "))") }
        return pens
    }

    static func behaviour(_ value: YAMLValue) throws -> Behaviour {
        let map = try value.mapping(keys: behaviourKeys)
        var behaviour = Behaviour()
        if let v = map.optional("envelopes_per_minute") { behaviour.envelopesPerMinute = try v.double(0...600) }
        if let v = map.optional("template_fraction") { behaviour.templateFraction = try v.fraction() }
        if let v = map.optional("in_person_signers") { behaviour.inPersonSigners = try v.intRange(0...10) }
        if let v = map.optional("remote_signers") { behaviour.remoteSigners = try v.intRange(0...10) }
        if behaviour.inPersonSigners.lower + behaviour.remoteSigners.lower < 1 {
            let key = map.has("remote_signers") ? "remote_signers" : "in_person_signers"
            throw map.error(at: key, "every envelope needs a signer: in_person_signers and remote_signers may not both start at 0")
        }
        if let v = map.optional("embedded_fraction") { behaviour.embeddedFraction = try v.fraction() }
        if let v = map.optional("signing_duration") { behaviour.signingDuration = try v.span(0...3600) }
        if let v = map.optional("cancel_rate") { behaviour.cancelRate = try v.fraction() }
        if let v = map.optional("decline_rate") { behaviour.declineRate = try v.fraction() }
        if let v = map.optional("sync") { behaviour.sync = try syncPolicy(v) }
        behaviour.maxEnvelopes = try map.optional("max_envelopes")?.int(0...1_000_000)
        return behaviour
    }

    /// `when_online`, `manual` or `{every: 10s}`.
    static func syncPolicy(_ value: YAMLValue) throws -> SyncPolicy {
        if case .mapping = value.node {
            let map = try value.mapping(keys: ["every"])
            return .every(try map.required("every", "how often to sync, e.g. {every: 10s}").duration(0.1...3600, positive: true))
        }
        switch try value.choice(["when_online", "manual"]) {
        case "manual": return .manual
        default: return .whenOnline
        }
    }

    /// `always_online`, or a mapping `{model: gilbert_elliott, online_mean: 30s, offline_mean: 10s, start_offline: 0.2}`.
    static func connectivity(_ value: YAMLValue) throws -> Connectivity {
        let models = ["always_online", "gilbert_elliott"]
        if case .scalar = value.node {
            guard try value.choice(models) == "always_online" else {
                throw value.error("gilbert_elliott needs its means: {model: gilbert_elliott, online_mean: 30s, offline_mean: 10s}")
            }
            return Connectivity()
        }
        let map = try value.mapping(keys: connectivityKeys, expected: "always_online or a mapping with model")
        let model = try map.optional("model")?.choice(models) ?? "always_online"
        var connectivity = Connectivity()
        switch model {
        case "gilbert_elliott":
            let online = try map.required("online_mean", "the mean time a device stays online, e.g. 30s").duration(0.001...86400, positive: true)
            let offline = try map.required("offline_mean", "the mean time a device stays offline, e.g. 10s").duration(0.001...86400, positive: true)
            connectivity.model = .gilbertElliott(onlineMean: online, offlineMean: offline)
        default:
            for key in ["online_mean", "offline_mean"] where map.has(key) {
                throw map.error(at: key, "applies only to model: gilbert_elliott (the model here is always_online)")
            }
        }
        if let v = map.optional("start_offline") { connectivity.startOffline = try v.fraction() }
        return connectivity
    }

    static func checks(_ value: YAMLValue) throws -> Checks {
        let map = try value.mapping(keys: checksKeys)
        var checks = Checks()
        if let v = map.optional("verdict"), let verdict = CheckVerdict(rawValue: try v.choice(verdicts)) { checks.verdict = verdict }
        if let v = map.optional("thresholds") {
            checks.thresholds = try v.sequence(maximumCount: 100, expected: "a list of thresholds like \"pending == 0\"").map(threshold)
        }
        return checks
    }

    /// `METRIC OP VALUE` on the summary (``FleetThreshold``): parsed here so an unknown
    /// metric or a bad value is refused at validation, with its line.
    static func threshold(_ value: YAMLValue) throws -> String {
        let text = try value.text(expected: "a threshold like \"pending == 0\"")
        do throws(ThresholdError) {
            _ = try FleetThreshold.parse(text)
        } catch {
            throw value.error(error.message)
        }
        return text
    }
}
