import FleetTesting
import Foundation
import Testing

@testable import Fleet

/// A node plan's `niceness` (`signfleet fleet run --node-nice`): the node process and every thread
/// in it run at that nice value, so simulated devices do not take the coordinator's CPU.
@Suite(.serialized) struct NodePriorityTests {
    @Test func aNicenessOutsideZeroToNineteenIsRefused() throws {
        let directory = try NodeProcessTests.temporaryDirectory("node-nice-refused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/plan.json"
        var plan = NodeProcessTests.plan(directory: directory, endpoint: "tcp://127.0.0.1:1", devices: 1, seed: 1)
        for bad in [-1, 20, Int.max] {
            plan.niceness = bad
            try NodeProcessTests.write(plan, to: path)
            #expect(throws: NodePlanError(path: path, "niceness: must be 0 to 19, not \(bad)")) { try NodePlan.load(path: path) }
        }
        #expect(throws: ProcessPriorityError.outOfRange(20)) { try ProcessPriority.lower(to: 20) }
    }

    /// Also the threads libdispatch starts after the node lowered itself, which it gives the nice
    /// value of their queue's QoS (GRDB's serial queues: -2) whatever their creator's.
    @Test func everyThreadOfANodeRunsAtThePlansNiceness() async throws {
        let unchanged = try await threadNiceness(planned: nil)
        #expect(!unchanged.isEmpty && !unchanged.contains(19), "without a niceness nothing is lowered: \(unchanged)")
        let lowered = try await threadNiceness(planned: 19)
        #expect(lowered.count >= 2 && lowered.allSatisfy { $0 == 19 }, "\(lowered)")
    }

    /// The nice value of each thread of a node started with `planned`, read from
    /// `/proc/<pid>/task/<tid>/stat` once the node has announced itself.
    private func threadNiceness(planned: Int?) async throws -> [Int] {
        let directory = try NodeProcessTests.temporaryDirectory("node-nice")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var plan = NodeProcessTests.plan(directory: directory, endpoint: "tcp://127.0.0.1:1", devices: 2, seed: 7)
        plan.niceness = planned
        let path = directory + "/plan.json"
        try NodeProcessTests.write(plan, to: path)
        let node = try ChildProcess.launch(try NodeProcessTests.binary(), ["node", "--plan", path], name: "node-nice")
        defer { Task { await node.terminate() } }
        try await node.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("node started") }
        // Ten stats lines (0.2 s apart): the node has run a while, its devices have opened their
        // stores (new dispatch threads), and the priority has been applied again since.
        try await node.waitForLines(10, in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("stats ") }
        let taskDirectory = "/proc/\(node.processIdentifier)/task"
        var values: [Int] = []
        for thread in try FileManager.default.contentsOfDirectory(atPath: taskDirectory) {
            guard let stat = try? String(contentsOfFile: "\(taskDirectory)/\(thread)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }  // a thread that ended meanwhile
            // After "pid (comm) ": state is field 3, nice field 19.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 16, let nice = Int(fields[16]) else {
                Issue.record("unreadable stat: \(stat)")
                continue
            }
            values.append(nice)
        }
        return values
    }
}
