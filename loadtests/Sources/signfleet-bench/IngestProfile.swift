import Coordinator
import Foundation

/// `signfleet-bench ingest-profile [--devices D] [--items N] [--batch B] [--skip-apply] [--verification every|payload]`:
/// a fixed amount of ingest work for `valgrind --tool=callgrind` (instruction counts are
/// repeatable where wall-clock rates on a shared machine are not). The same setup runs with and
/// without `--skip-apply`; the difference of the two totals is the cost of applying
/// `D * N` items, which `loadtests/profile-ingest` divides per item.
func ingestProfile(_ arguments: [String]) async throws {
    func option(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    let devices = Int(option("--devices") ?? "10") ?? 10
    let perDevice = Int(option("--items") ?? "200") ?? 200
    let batch = Int(option("--batch") ?? "10") ?? 10
    let skipApply = arguments.contains("--skip-apply")
    let verification = IngestVerification(rawValue: option("--verification") ?? "every") ?? .everySignature
    let root = NSTemporaryDirectory() + "signfleet-bench-profile-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }

    let base = try await IngestBench.realItem(directory: root)
    let rig = try await IngestRig(
        path: "\(root)/profile.sqlite", devices: devices, items: perDevice, base: base, verification: verification)
    let pushes = rig.pushes(batch: batch)
    guard !skipApply else {
        print("setup only: \(devices) devices x \(perDevice) items")
        return
    }
    let applied = try await withThrowingTaskGroup(of: Int.self) { group in
        for (index, devicePushes) in pushes.enumerated() {
            group.addTask {
                var applied = 0
                for push in devicePushes {
                    let ack = try await rig.services.ingest.apply(push, routingID: rig.forgers[index].id)
                    applied += ack.results.filter { $0.outcome == .applied }.count
                }
                return applied
            }
        }
        return try await group.reduce(0, +)
    }
    print("applied \(applied) of \(devices * perDevice) items")
}
