import Foundation

extension Scenario {
    /// The scenario as a scenario file, every setting written out (defaults too), with
    /// `seed` (when given) in place of the file's: what the launcher writes as the run
    /// directory's `scenario.yaml`. `ScenarioLoader.parse` reads it back to an equal
    /// `Scenario`.
    public func yaml(seed: UInt64? = nil) -> String {
        var out = ScenarioYAMLWriter()
        out.comment("Scenario file (format: docs/scenarios.md).")
        out.line("name: \(ScenarioYAMLWriter.quote(name))")
        if let seed = seed ?? self.seed { out.line("seed: \(seed)") }
        out.line("duration: \(DurationText.render(duration))")
        out.line("drain_timeout: \(DurationText.render(drainTimeout))")
        out.line("drain_ramp: \(DurationText.render(drainRamp))")
        if startRamp > 0 { out.line("start_ramp: \(DurationText.render(startRamp))") }
        out.line("proxy: \(proxy)")
        out.line("coordinator:")
        out.line("  heartbeat: \(DurationText.render(coordinator.heartbeat))")
        if let hourly = coordinator.rateLimitHourly { out.line("  rate_limit_hourly: \(hourly)") }
        if let burst = coordinator.rateLimitBurst { out.line("  rate_limit_burst: \(burst)") }
        out.line("  restart_budget: \(coordinator.restartBudget)")
        switch coordinator.store {
        case .sqlite: out.line("  store: sqlite")
        case .postgres: out.line("  store: postgres")
        case .postgresURL(let url): out.line("  store: \(ScenarioYAMLWriter.doubleQuoted(url))")
        }
        out.line("coordinators: \(coordinator.instances)")
        out.line("groups:")
        for group in groups { out.group(group) }
        out.hosts(hosts)
        if faults.isEmpty {
            out.line("faults: []")
        } else {
            out.line("faults:")
            for fault in faults { out.line("  - \(ScenarioYAMLWriter.flow(fault))") }
        }
        out.line("checks:")
        out.line("  verdict: \(checks.verdict)")
        if checks.thresholds.isEmpty {
            out.line("  thresholds: []")
        } else {
            out.line("  thresholds:")
            for threshold in checks.thresholds { out.line("    - \(ScenarioYAMLWriter.doubleQuoted(threshold))") }
        }
        return out.text
    }
}

/// Writes scenario YAML line by line; flow mappings for compact entries.
struct ScenarioYAMLWriter {
    private(set) var text = ""

    mutating func line(_ line: String) { text += line + "\n" }
    mutating func comment(_ comment: String) { line("# \(comment)") }

    mutating func group(_ group: DeviceGroup) {
        line("  - name: \(Self.quote(group.name))")
        line("    count: \(group.count)")
        line("    processes: \(group.processes)")
        line("    restart_budget: \(group.restartBudget)")
        if let hostile = group.hostile {
            let behaviours = hostile.behaviours.map(\.rawValue).joined(separator: ", ")
            line("    hostile: {target: \(Self.quote(hostile.target)), behaviours: [\(behaviours)], every: \(DurationText.render(hostile.every)), slow_reader_messages: \(hostile.slowReaderMessages)}")
            return
        }
        if let backend = group.backend {
            line("    backend: {envelopes_per_minute: \(Self.number(backend.envelopesPerMinute)), decline_rate: \(Self.number(backend.declineRate)), void_rate: \(Self.number(backend.voidRate))}")
            return
        }
        let pens = group.pens.sorted { $0.key < $1.key }.map { "\(Self.quote($0.key)): \(Self.number($0.value))" }
        line("    pens: {\(pens.joined(separator: ", "))}")
        let b = group.behaviour
        line("    behaviour:")
        line("      envelopes_per_minute: \(Self.number(b.envelopesPerMinute))")
        line("      template_fraction: \(Self.number(b.templateFraction))")
        line("      in_person_signers: \(Self.range(b.inPersonSigners))")
        line("      remote_signers: \(Self.range(b.remoteSigners))")
        line("      embedded_fraction: \(Self.number(b.embeddedFraction))")
        line("      signing_duration: \(Self.span(b.signingDuration))")
        line("      cancel_rate: \(Self.number(b.cancelRate))")
        line("      decline_rate: \(Self.number(b.declineRate))")
        switch b.sync {
        case .whenOnline: line("      sync: when_online")
        case .manual: line("      sync: manual")
        case .every(let interval): line("      sync: {every: \(DurationText.render(interval))}")
        }
        if let max = b.maxEnvelopes { line("      max_envelopes: \(max)") }
        let c = group.connectivity
        switch c.model {
        case .alwaysOnline:
            line("    connectivity: {model: always_online, start_offline: \(Self.number(c.startOffline))}")
        case .gilbertElliott(let online, let offline):
            line("    connectivity: {model: gilbert_elliott, online_mean: \(DurationText.render(online)), offline_mean: \(DurationText.render(offline)), start_offline: \(Self.number(c.startOffline))}")
        }
    }

    /// One fault entry as a flow mapping: timing, action, target.
    static func flow(_ spec: FaultSpec) -> String {
        var parts: [String] = []
        if let every = spec.every {
            parts.append("every: \(DurationText.render(every))")
            parts.append("from: \(DurationText.render(spec.at))")
            if let until = spec.until { parts.append("until: \(DurationText.render(until))") }
        } else {
            parts.append("at: \(DurationText.render(spec.at))")
        }
        if let length = spec.duration { parts.append("for: \(DurationText.render(length))") }
        var targetParts: [String] = []
        if let group = spec.target.group { targetParts.append("group: \(quote(group))") }
        if let fraction = spec.target.fraction { targetParts.append("fraction: \(number(fraction))") }
        if let count = spec.target.count { targetParts.append("count: \(count)") }
        switch spec.fault {
        case .killNode: parts.append("kill: node")
        case .killCoordinator: parts.append("kill: coordinator")
        case .pauseNode: parts.append("pause: node")
        case .pauseCoordinator: parts.append("pause: coordinator")
        case .offline, .partition:
            if spec.fault == .offline, let ramp = spec.returnRamp { targetParts.append("return_ramp: \(DurationText.render(ramp))") }
            parts.append("\(spec.fault == .offline ? "offline" : "partition"): {\(targetParts.joined(separator: ", "))}")
            targetParts = []
        case .toxic(let toxic):
            var toxicParts = ["type: \(toxic.type)", "stream: \(toxic.stream)", "toxicity: \(number(toxic.toxicity))"]
            toxicParts += toxic.attributes.sorted { $0.key < $1.key }.map { "\($0.key): \(number($0.value))" }
            parts.append("toxic: {\(toxicParts.joined(separator: ", "))}")
        case .templateEdit(let template):
            parts.append("template_edit: {template: \(quote(template))}")
        case .restoreCoordinator(let snapshot):
            parts.append("restore_coordinator: {snapshot: \(DurationText.render(snapshot))}")
        case .restoreNode(let snapshot):
            parts.append("restore_node: {snapshot: \(DurationText.render(snapshot))}")
        case .restartPostgres(let crash):
            parts.append("restart_postgres: \(crash ? "kill" : "fast")")
        case .partitionHost(let host):
            parts.append("partition: {host: \(quote(host))}")
        }
        if let coordinator = spec.target.coordinator { targetParts.append("coordinator: \(coordinator)") }
        parts += targetParts
        return "{\(parts.joined(separator: ", "))}"
    }

    static func number(_ value: Double) -> String { YAMLValue.format(value) }
    static func range(_ range: IntRange) -> String { range.lower == range.upper ? "\(range.lower)" : "\(range.lower)..\(range.upper)" }
    static func span(_ span: ClosedSpan) -> String {
        span.lower == span.upper ? DurationText.render(span.lower) : "\(DurationText.render(span.lower))..\(DurationText.render(span.upper))"
    }

    /// Plain when the text is a simple name YAML would not read as something else.
    static func quote(_ text: String) -> String {
        let plain = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        let reserved = ["", "~", "null", "true", "false", "yes", "no", "on", "off"]
        if text.unicodeScalars.allSatisfy(plain.contains), text.first?.isLetter == true, !reserved.contains(text.lowercased()) {
            return text
        }
        return doubleQuoted(text)
    }

    static func doubleQuoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += String(format: "\\u%04X", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
