import Foundation
import Testing

@testable import Fleet

/// Parsing: every syntax the format offers reads into the model it should.
@Suite struct ScenarioLoaderTests {
    static let minimal = """
        name: tiny
        duration: 30s
        groups:
          - {name: a, count: 3}
        """

    @Test func aMinimalScenarioGetsTheDefaults() throws {
        let scenario = try ScenarioLoader.parse(yaml: Self.minimal, source: "tiny.yaml")
        #expect(scenario == Scenario(name: "tiny", duration: 30, groups: [DeviceGroup(name: "a", count: 3)]))
        #expect(scenario.seed == nil)
        #expect(scenario.drainTimeout == 60)
        #expect(scenario.coordinator == CoordinatorSettings())
    }

    @Test(arguments: [
        ("500ms", 0.5), ("10s", 10), ("2m", 120), ("1h", 3600), ("7", 7), ("1.5s", 1.5), ("0.25", 0.25), ("100ms", 0.1),
    ])
    func durations(text: String, seconds: Double) throws {
        #expect(DurationText.parse(text) == seconds)
        let scenario = try ScenarioLoader.parse(yaml: "name: d\nduration: 2h\ndrain_timeout: \(text)\ngroups: [{name: a, count: 1}]", source: "d.yaml")
        #expect(scenario.drainTimeout == seconds)
    }

    @Test func aDrainRampIsReadWrittenBackAndMustEndBeforeTheDrainTimeout() throws {
        let base = "name: d\nduration: 1m\ngroups: [{name: a, count: 1}]\n"
        #expect(try ScenarioLoader.parse(yaml: base, source: "d.yaml").drainRamp == 0, "all at once by default")
        let ramped = try ScenarioLoader.parse(yaml: base + "drain_timeout: 2m\ndrain_ramp: 30s", source: "d.yaml")
        #expect(ramped.drainRamp == 30)
        #expect(try ScenarioLoader.parse(yaml: ramped.yaml(), source: "run.yaml") == ramped)
        let late = #expect(throws: ScenarioError.self) {
            try ScenarioLoader.parse(yaml: base + "drain_timeout: 20s\ndrain_ramp: 20s", source: "d.yaml")
        }
        #expect(late?.description.contains("drain_ramp (20s) must be shorter than drain_timeout (20s)") == true, "\(String(describing: late))")
        let negative = #expect(throws: ScenarioError.self) {
            try ScenarioLoader.parse(yaml: base + "drain_ramp: -5s", source: "d.yaml")
        }
        #expect(negative?.description.contains("drain_ramp") == true, "\(String(describing: negative))")
    }

    @Test func aStartRampIsReadWrittenBackAndMustEndBeforeTheRun() throws {
        let base = "name: d\nduration: 1m\ngroups: [{name: a, count: 1}]\n"
        #expect(try ScenarioLoader.parse(yaml: base, source: "d.yaml").startRamp == 0)
        let ramped = try ScenarioLoader.parse(yaml: base + "start_ramp: 20s", source: "d.yaml")
        #expect(ramped.startRamp == 20)
        #expect(try ScenarioLoader.parse(yaml: ramped.yaml(), source: "run.yaml") == ramped)
        let late = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: base + "start_ramp: 1m", source: "d.yaml") }
        #expect(late?.description.contains("must be shorter than duration") == true, "\(String(describing: late))")
        #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: base + "start_ramp: -1s", source: "d.yaml") }
    }

    /// With a start ramp the fleet's devices start spread over all of it (each at its seeded
    /// moment), whatever the number of devices per node process; without one, over 2 ms apiece.
    @Test func devicesStartSpreadOverTheStartRamp() throws {
        var plan = NodePlan(
            process: "node-a-1", group: "a", endpoint: "tcp://127.0.0.1:1", dataDirectory: "/tmp/d", historyFile: "/tmp/h",
            runStart: 1_000, duration: 120, devices: (1...250).map { DevicePlan(id: "a-\($0)", seed: UInt64($0) &* 7919) }, behaviour: Behaviour(),
            connectivity: Connectivity(), pens: ["applePencil": 1])
        let unramped = plan.devices.map { SimulatedDeviceConfiguration(plan: plan, device: $0).startDelay }
        #expect(unramped.allSatisfy { $0 >= 0 && $0 < 0.5 } && unramped.max()! > 0.4)
        plan.startRamp = 50
        try plan.validate()
        let delays = plan.devices.map { SimulatedDeviceConfiguration(plan: plan, device: $0).startDelay }
        #expect(delays.allSatisfy { $0 >= 0 && $0 < 50 })
        let tenths = Set(delays.map { Int($0 / 5) })
        #expect(tenths.count == 10, "every tenth of the ramp has devices starting: \(tenths.sorted())")
        #expect(delays == plan.devices.map { SimulatedDeviceConfiguration(plan: plan, device: $0).startDelay }, "seeded: the same again")
        plan.startRamp = .infinity
        #expect(throws: NodePlanError.self) { try plan.validate() }
    }

    @Test(arguments: ["", "-1s", "10 s", "1e3s", "s", "1.s", ".5s", "10x", "nan", "inf", "0x10"])
    func badDurations(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test(arguments: [0.5, 0.1, 10, 120, 3600, 0.001, 1.25, 90, 0.30000000000000004, 1e-05, 12345.678])
    func durationsRenderToTextThatParsesBackExactly(seconds: Double) {
        #expect(DurationText.parse(DurationText.render(seconds)) == seconds)
    }

    @Test func everyFieldOfAGroup() throws {
        let yaml = """
            name: full
            seed: 0x2A
            duration: 2m
            drain_timeout: 30s
            proxy: true
            coordinator:
              heartbeat: 250ms
              rate_limit_hourly: 1000
              rate_limit_burst: 20
              restart_budget: 2
            groups:
              - name: field_1
                count: 10
                processes: 3
                restart_budget: 7
                pens: {pencil: 3, finger: 1}
                behaviour:
                  envelopes_per_minute: 2.5
                  template_fraction: 0.5
                  in_person_signers: 1..3
                  remote_signers: 2
                  embedded_fraction: 0.25
                  signing_duration: 1s..5s
                  cancel_rate: 0.1
                  decline_rate: 0.05
                  sync: {every: 10s}
                  max_envelopes: 20_000
                connectivity:
                  model: gilbert_elliott
                  online_mean: 30s
                  offline_mean: 10s
                  start_offline: 0.2
              - name: desk
                count: 1
                pens: [signaturePad, wacom]
                behaviour: {sync: manual}
                connectivity: always_online
            checks:
              verdict: invalid
              thresholds: ["pending == 0", "syncAck.p99 < 2s"]
            """
        let scenario = try ScenarioLoader.parse(yaml: yaml, source: "full.yaml")
        #expect(scenario.seed == 42)
        #expect(scenario.duration == 120)
        #expect(scenario.drainTimeout == 30)
        #expect(scenario.proxy)
        #expect(scenario.coordinator == CoordinatorSettings(heartbeat: 0.25, rateLimitHourly: 1000, rateLimitBurst: 20, restartBudget: 2))
        let field = scenario.groups[0]
        #expect(field.name == "field_1" && field.count == 10 && field.processes == 3 && field.restartBudget == 7)
        #expect(field.pens == ["applePencil": 3, "finger": 1])
        #expect(
            field.behaviour
                == Behaviour(
                    envelopesPerMinute: 2.5, templateFraction: 0.5, inPersonSigners: IntRange(1, 3), remoteSigners: IntRange(2, 2),
                    embeddedFraction: 0.25, signingDuration: ClosedSpan(1, 5), cancelRate: 0.1, declineRate: 0.05, sync: .every(10),
                    maxEnvelopes: 20_000))
        #expect(field.connectivity == Connectivity(model: .gilbertElliott(onlineMean: 30, offlineMean: 10), startOffline: 0.2))
        let desk = scenario.groups[1]
        #expect(desk.pens == ["signaturePad": 1, "wacomBluetooth": 1])
        #expect(desk.behaviour.sync == .manual)
        #expect(desk.connectivity == Connectivity())
        #expect(scenario.checks == Checks(verdict: .invalid, thresholds: ["pending == 0", "syncAck.p99 < 2s"]))
    }

    static func faults(_ lines: String, proxy: Bool = true) throws -> [FaultSpec] {
        let yaml = """
            name: f
            duration: 60s
            proxy: \(proxy)
            groups:
              - {name: office, count: 8, processes: 4}
              - {name: field, count: 4, processes: 2}
            faults:
            \(lines)
            """
        return try ScenarioLoader.parse(yaml: yaml, source: "f.yaml").faults
    }

    @Test func everyFaultSyntax() throws {
        let faults = try Self.faults("""
              - {at: 10s, for: 20s, kill: node, group: field, fraction: 0.5}
              - {at: 30s, kill: coordinator, for: 2s}
              - {every: 15s, from: 5s, until: 50s, for: 3s, pause: node, count: 1}
              - {at: 10s, for: 30s, offline: {group: field}}
              - {at: 5s, for: 10s, toxic: {type: latency, stream: downstream, toxicity: 1, latency: 200, jitter: 50}, fraction: 0.5}
              - {at: 20s, for: 5s, partition: {fraction: 0.25}}
              - {at: 25s, template_edit: {template: demo-nda}}
              - {at: 40s, pause: coordinator, for: 1s}
              - {at: 45s, template_edit: demo-onboarding}
              - {at: 50s, kill: node}
              - {every: 20s, template_edit: {template: demo-nda}}
              - at: 1s
                for: 1s
                offline: {}
                group: office
                count: 2
              - {at: 30s, for: 10s, offline: {group: field, return_ramp: 5s}}
            """)
        #expect(faults == [
            FaultSpec(fault: .killNode, at: 10, duration: 20, target: FaultTarget(group: "field", fraction: 0.5)),
            FaultSpec(fault: .killCoordinator, at: 30, duration: 2),
            FaultSpec(fault: .pauseNode, at: 5, duration: 3, every: 15, until: 50, target: FaultTarget(count: 1)),
            FaultSpec(fault: .offline, at: 10, duration: 30, target: FaultTarget(group: "field")),
            FaultSpec(
                fault: .toxic(ToxicSpec(type: "latency", stream: "downstream", toxicity: 1, attributes: ["latency": 200, "jitter": 50])),
                at: 5, duration: 10, target: FaultTarget(fraction: 0.5)),
            FaultSpec(fault: .partition, at: 20, duration: 5, target: FaultTarget(fraction: 0.25)),
            FaultSpec(fault: .templateEdit(template: "demo-nda"), at: 25),
            FaultSpec(fault: .pauseCoordinator, at: 40, duration: 1),
            FaultSpec(fault: .templateEdit(template: "demo-onboarding"), at: 45),
            FaultSpec(fault: .killNode, at: 50),
            FaultSpec(fault: .templateEdit(template: "demo-nda"), at: 20, every: 20),
            FaultSpec(fault: .offline, at: 1, duration: 1, target: FaultTarget(group: "office", count: 2)),
            FaultSpec(fault: .offline, at: 30, duration: 10, target: FaultTarget(group: "field"), returnRamp: 5),
        ])
    }

    /// `return_ramp` belongs to `offline` (devices notice the network back); a partition's devices
    /// reconnect on their own backoff, so it takes none. Out of bounds is an error naming the key.
    @Test func aReturnRampIsAnOfflineFaultsOnly() throws {
        for (entry, expected) in [
            ("{at: 1s, for: 1s, partition: {return_ramp: 5s}}", "return_ramp"),
            ("{at: 1s, for: 1s, offline: {return_ramp: -1s}}", "return_ramp"),
            ("{at: 1s, for: 1s, offline: {return_ramp: 2h}}", "return_ramp"),
            ("{at: 1s, for: 1s, return_ramp: 5s, offline: {}}", "return_ramp"),
        ] {
            let error = #expect(throws: ScenarioError.self) { try Self.faults("  - \(entry)") }
            #expect(error?.description.contains(expected) == true, "\(entry): \(String(describing: error))")
        }
        let zero = try Self.faults("  - {at: 1s, for: 1s, offline: {return_ramp: 0s}}")
        #expect(zero.first?.returnRamp == nil, "0 is all at once, as without the key")
    }

    @Test(arguments: ["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"])
    func everyToxiproxyToxicType(type: String) throws {
        let attributes: [String: String] = [
            "latency": "latency: 100, jitter: 10", "bandwidth": "rate: 16", "slow_close": "delay: 100", "timeout": "timeout: 0",
            "reset_peer": "timeout: 500", "slicer": "average_size: 32, size_variation: 8, delay: 100", "limit_data": "bytes: 1024",
        ]
        let faults = try Self.faults("  - {at: 1s, for: 1s, toxic: {type: \(type), stream: upstream, toxicity: 0.5, \(attributes[type] ?? "")}}")
        guard case .toxic(let toxic) = faults.first?.fault else {
            Issue.record("not a toxic: \(faults)")
            return
        }
        #expect(toxic.type == type)
        #expect(toxic.stream == "upstream")
        #expect(toxic.toxicity == 0.5)
        #expect(Set(toxic.attributes.keys) == Set(FaultReader.toxicAttributes[type] ?? []).intersection(toxic.attributes.keys))
        #expect(!toxic.attributes.isEmpty)
    }

    @Test func renderedScenariosParseBackEqual() throws {
        var scenario = try ScenarioLoader.parse(yaml: """
            name: "round-trip"
            duration: 90s
            proxy: true
            coordinator: {heartbeat: 100ms, rate_limit_hourly: 3600}
            groups:
              - name: a
                count: 7
                processes: 3
                pens: {applePencil: 0.3, finger: 0.7}
                behaviour: {envelopes_per_minute: 0.1, in_person_signers: 0..2, remote_signers: 1..4, signing_duration: 1.25s, sync: {every: 1.5s}, max_envelopes: 3}
                connectivity: {model: gilbert_elliott, online_mean: 1.5m, offline_mean: 333ms, start_offline: 0.333}
              - {name: b, count: 2}
            faults:
              - {every: 7s, from: 3s, until: 80s, for: 1.5s, pause: node, group: a, count: 2}
              - {at: 10s, for: 30s, offline: {group: b, return_ramp: 2.5s}}
              - {at: 5s, for: 10s, toxic: {type: slicer, average_size: 10, size_variation: 5, delay: 20}, fraction: 0.5}
              - {at: 20s, for: 5s, partition: {fraction: 0.25}}
              - {at: 25s, template_edit: {template: demo-nda}}
              - {at: 30s, kill: coordinator}
            checks: {thresholds: ["pending == 0", 'durations.drain <= 1.5s']}
            """, source: "rt.yaml")
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "rendered.yaml") == scenario)

        let rendered = scenario.yaml(seed: 987_654_321)
        scenario.seed = 987_654_321
        #expect(try ScenarioLoader.parse(yaml: rendered, source: "rendered.yaml") == scenario)
        #expect(rendered.contains("seed: 987654321\n"))

        // Values that need quoting or exact digits survive too.
        var odd = scenario
        odd.name = "null"
        odd.duration = 0.1 + 0.2
        odd.groups[0].behaviour.cancelRate = 1e-05
        odd.checks.thresholds = ["synced != 0", "  syncAck.p99 <= 1.5s"]
        odd.faults = []
        #expect(try ScenarioLoader.parse(yaml: odd.yaml(), source: "odd.yaml") == odd)
    }

    @Test func loadReadsAFileAndNamesItInErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good.yaml").path
        try Self.minimal.write(toFile: good, atomically: true, encoding: .utf8)
        #expect(try ScenarioLoader.load(path: good).name == "tiny")

        let bad = directory.appendingPathComponent("bad.yaml").path
        try (Self.minimal + "\nseed: -1\n").write(toFile: bad, atomically: true, encoding: .utf8)
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.load(path: bad) }
        #expect(error?.description.hasPrefix("\(bad):5:7: seed: ") == true)

        let missing = directory.appendingPathComponent("missing.yaml").path
        let missingError = #expect(throws: ScenarioError.self) { try ScenarioLoader.load(path: missing) }
        #expect(missingError?.description.hasPrefix("\(missing): cannot be read") == true)
    }
}
