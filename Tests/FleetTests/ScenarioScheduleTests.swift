import Foundation
import Testing

@testable import Fleet

/// Layout and fault schedule: pure functions of (scenario, seed).
@Suite struct ScenarioScheduleTests {
    static let yaml = """
        name: sched
        duration: 60s
        proxy: true
        groups:
          - {name: office, count: 10, processes: 4}
          - {name: field, count: 7, processes: 3}
        faults:
          - {at: 10s, for: 20s, kill: node, group: field, fraction: 0.5}
          - {at: 30s, kill: coordinator, for: 2s}
          - {every: 15s, from: 5s, until: 50s, for: 3s, pause: node, count: 2}
          - {at: 10s, for: 30s, offline: {group: field}}
          - {at: 5s, for: 10s, toxic: {type: latency, latency: 200, jitter: 50}, fraction: 0.5}
          - {at: 20s, partition: {fraction: 0.25}}
          - {at: 25s, template_edit: {template: demo-nda}}
          - {at: 40s, offline: {group: field, count: 1}}
        """

    static func scenario() throws -> Scenario { try ScenarioLoader.parse(yaml: yaml, source: "sched.yaml") }

    @Test func layoutNamesProcessesAndDevicesInContiguousBlocks() throws {
        let layout = FleetLayout(scenario: try Self.scenario(), seed: 1)
        #expect(layout.processNames == ["node-office-1", "node-office-2", "node-office-3", "node-office-4", "node-field-1", "node-field-2", "node-field-3"])
        // 10 over 4: the remainder goes to the first processes.
        #expect(layout.processes(inGroup: "office").map { $0.devices.map(\.id) } == [
            ["office-1", "office-2", "office-3"], ["office-4", "office-5", "office-6"], ["office-7", "office-8"], ["office-9", "office-10"],
        ])
        #expect(layout.processes(inGroup: "field").map(\.devices.count) == [3, 2, 2])
        #expect(layout.deviceCount == 17)
        #expect(Set(layout.devices.map(\.seed)).count == 17)
        #expect(layout.process(hostingDevice: "field-4")?.name == "node-field-2")
        #expect(layout.process(hostingDevice: "field-8") == nil)
        #expect(layout.process(named: "node-office-3")?.index == 3)
    }

    @Test func sameSeedSameLayoutAndScheduleDifferentSeedDifferentTargets() throws {
        let scenario = try Self.scenario()
        let layout = FleetLayout(scenario: scenario, seed: 42)
        let schedule = FaultSchedule(scenario: scenario, layout: layout, seed: 42)
        #expect(FleetLayout(scenario: scenario, seed: 42) == layout)
        #expect(FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 42), seed: 42) == schedule)

        let otherLayout = FleetLayout(scenario: scenario, seed: 43)
        #expect(otherLayout.processNames == layout.processNames)
        #expect(otherLayout.devices.map(\.id) == layout.devices.map(\.id))
        #expect(otherLayout.devices.map(\.seed) != layout.devices.map(\.seed))
        // Over a handful of seeds the drawn targets must vary (a fixed choice would not).
        let targetLists = Set((0..<8).map { seed in
            FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: UInt64(seed)), seed: UInt64(seed)).events.map(\.targets)
        })
        #expect(targetLists.count > 1)
        // Times do not depend on the seed, only targets do.
        let times = FaultSchedule(scenario: scenario, layout: otherLayout, seed: 43).events.map(\.time)
        #expect(times == schedule.events.map(\.time))
    }

    @Test func deviceSeedsDoNotDependOnOtherGroups() throws {
        var scenario = try Self.scenario()
        let before = FleetLayout(scenario: scenario, seed: 9).processes(inGroup: "field").flatMap(\.devices)
        scenario.groups.swapAt(0, 1)
        scenario.groups[1].count = 3
        scenario.groups[1].processes = 1
        let after = FleetLayout(scenario: scenario, seed: 9).processes(inGroup: "field").flatMap(\.devices)
        #expect(before == after)
    }

    @Test(arguments: [UInt64(0), 1, 7, 1234, .max])
    func everyStartHasAStopAtOrBeforeTheEnd(seed: UInt64) throws {
        let scenario = try Self.scenario()
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: seed), seed: seed)
        let starts = schedule.events.filter { $0.phase == .start }
        let stops = schedule.events.filter { $0.phase == .stop }
        #expect(starts.count == stops.count)
        #expect(!starts.isEmpty)
        for start in starts {
            let stop = try #require(stops.first { $0.id == start.id })
            #expect(stop.time > start.time)
            #expect(stop.time <= scenario.duration)
            #expect(stop.targets == start.targets)
            let startIndex = try #require(schedule.events.firstIndex(of: start))
            let stopIndex = try #require(schedule.events.firstIndex(of: stop))
            #expect(startIndex < stopIndex)
        }
        #expect(schedule.events.map(\.time) == schedule.events.map(\.time).sorted())
        #expect(Set(schedule.events.map { "\($0.id)/\($0.phase)" }).count == schedule.events.count)
    }

    @Test func occurrencesTimesAndFinalHeal() throws {
        let scenario = try Self.scenario()
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 5), seed: 5)
        // The pause repeats at 5, 20, 35 (50 is not before until), each 3s.
        let pauses = schedule.windows.filter { $0.fault == .pauseNode }
        #expect(pauses.map(\.start) == [5, 20, 35])
        #expect(pauses.map(\.end) == [8, 23, 38])
        #expect(pauses.map(\.id) == ["f3.1", "f3.2", "f3.3"])
        // A partition without `for` lasts until the final heal at the duration.
        let partition = try #require(schedule.windows.first { $0.fault == .partition })
        #expect(partition.start == 20 && partition.end == 60)
        #expect(partition.targets.count == 2)  // 0.25 of 7 processes, rounded
        
        let edits = schedule.events.filter { $0.phase == .instant }
        #expect(edits.map(\.time) == [25])
        #expect(edits.first?.targets == [])
        let coordinator = try #require(schedule.events.first { $0.fault == .killCoordinator && $0.phase == .start })
        #expect(coordinator.targets == [FaultSchedule.coordinatorProcess])
        #expect(coordinator.label == "kill -9 coordinator")
        // Field kill: half of 3 processes, rounded, all from the field group.
        let kill = try #require(schedule.windows.first { $0.fault == .killNode })
        #expect(kill.targets.count == 2)
        #expect(kill.targets.allSatisfy { $0.hasPrefix("node-field-") })
    }

    @Test func noProcessIsKilledAndPausedAtOnce() throws {
        for seed in UInt64(0)..<20 {
            let scenario = try Self.scenario()
            let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: seed), seed: seed)
            let hits = schedule.windows.filter { $0.fault == .killNode || $0.fault == .pauseNode }
            for (i, a) in hits.enumerated() {
                for b in hits[(i + 1)...] where a.start < b.end && b.start < a.end {
                    #expect(Set(a.targets).isDisjoint(with: b.targets), "seed \(seed): \(a.label) and \(b.label)")
                }
            }
        }
    }

    @Test func aFaultWithNoFreeTargetIsDroppedAndNoted() throws {
        let scenario = try ScenarioLoader.parse(yaml: """
            name: busy
            duration: 30s
            groups: [{name: a, count: 2, processes: 2}]
            faults:
              - {at: 5s, for: 10s, kill: node}
              - {at: 6s, for: 2s, pause: node, count: 1}
            """, source: "busy.yaml")
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 3), seed: 3)
        #expect(schedule.windows.map(\.id) == ["f1.1"])
        #expect(schedule.windows.first?.targets == ["node-a-1", "node-a-2"])
        #expect(schedule.notes.map(\.id) == ["f2.1"])
        #expect(schedule.notes.first?.message.contains("dropped") == true)
        #expect(schedule.events.count == 2)
    }

    @Test func outagesGoToTheTargetedProcessesMerged() throws {
        let scenario = try Self.scenario()
        let layout = FleetLayout(scenario: scenario, seed: 11)
        let schedule = FaultSchedule(scenario: scenario, layout: layout, seed: 11)
        let second = try #require(schedule.windows.first { $0.id == "f8.1" })
        #expect(second.targets.count == 1)
        for process in layout.processes(inGroup: "field") {
            let expected = second.targets.contains(process.name) ? [Outage(start: 10, end: 60)] : [Outage(start: 10, end: 40)]
            #expect(schedule.outages(for: process.name) == expected)
        }
        #expect(schedule.outages(for: "node-office-1") == [])
        let plan = try #require(
            layout.nodePlan(
                process: "node-field-1", scenario: scenario, schedule: schedule, endpoint: "tcp://127.0.0.1:1", dataDirectory: "/d",
                historyFile: "/h", runStart: 100))
        #expect(plan.devices == layout.process(named: "node-field-1")?.devices)
        #expect(plan.outages == schedule.outages(for: "node-field-1"))
        #expect(plan.group == "field" && plan.duration == 60 && plan.runStart == 100)
        #expect(layout.nodePlan(process: "node-x-1", scenario: scenario, schedule: schedule, endpoint: "", dataDirectory: "", historyFile: "", runStart: 0) == nil)
    }

    /// A merged outage's ramp reaches as far as the farthest member's end plus ramp: adding an
    /// outage never brings a device back earlier.
    @Test func mergedOutagesReachAsFarAsTheFarthestReturn() throws {
        let scenario = try ScenarioLoader.parse(yaml: """
            name: ramps
            duration: 100s
            groups: [{name: a, count: 2, processes: 1}]
            faults:
              - {at: 10s, for: 30s, offline: {return_ramp: 5s}}
              - {at: 20s, for: 10s, offline: {return_ramp: 9s}}
              - {at: 35s, for: 25s, offline: {return_ramp: 2s}}
              - {at: 70s, for: 10s, offline: {return_ramp: 1s}}
              - {at: 75s, for: 5s, offline: {return_ramp: 3s}}
              - {at: 90s, for: 5s, offline: {}}
            """, source: "ramps.yaml")
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 1), seed: 1)
        #expect(schedule.windows.map(\.returnRamp) == [5, 9, 2, 1, 3, nil])
        #expect(schedule.windows.first?.label == "offline node-a-1, back over 5s")
        #expect(schedule.windows.last?.label == "offline node-a-1")
        // [10,40)+5 → 45, [20,30)+9 → 39, [35,60)+2 → 62: [10,60) with 2. [70,80)+1 and [75,80)+3: 3.
        #expect(schedule.outages(for: "node-a-1") == [
            Outage(start: 10, end: 60, returnRamp: 2), Outage(start: 70, end: 80, returnRamp: 3), Outage(start: 90, end: 95),
        ])
        // A longer tail of an earlier member is kept: [10,60)+30 → 90 beats [20,61) → 61.
        let tail = try ScenarioLoader.parse(yaml: """
            name: tail
            duration: 100s
            groups: [{name: a, count: 1, processes: 1}]
            faults:
              - {at: 10s, for: 50s, offline: {return_ramp: 30s}}
              - {at: 20s, for: 41s, offline: {}}
            """, source: "tail.yaml")
        let tailSchedule = FaultSchedule(scenario: tail, layout: FleetLayout(scenario: tail, seed: 1), seed: 1)
        #expect(tailSchedule.outages(for: "node-a-1") == [Outage(start: 10, end: 61, returnRamp: 29)])
    }

    @Test func activeWindowsAtATime() throws {
        let scenario = try Self.scenario()
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 2), seed: 2)
        #expect(Set(schedule.activeWindows(at: 6).map(\.id)) == ["f3.1", "f5.1"])
        #expect(Set(schedule.activeWindows(at: 30.5).map(\.id)) == ["f2.1", "f4.1", "f6.1"])
    }
}
