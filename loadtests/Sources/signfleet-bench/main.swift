// `signfleet-bench <name> [options]`: runs one benchmark and prints JSON lines.
import Foundation
let arguments = Array(CommandLine.arguments.dropFirst())
let benchmarks: [String: ([String]) async throws -> Void] = [
    "codec": codecBenchmark,
    "transport": transportBenchmark,
    "capture": captureBenchmark,
    "device": deviceBenchmark,
    "ingest": ingestBenchmark,
    "proxy": proxyBenchmark,
    "captive": captiveBenchmark,
    "rest": restBenchmark,
    "connect": connectBenchmark,
    "ingest-profile": ingestProfile,
    "ingest-wire": ingestWireBenchmark,
    "flood": floodBenchmark,
    "crowd": crowdBenchmark,
    "ingest-clients": ingestClientsBenchmark,
    "store": storeBenchmark,
]
guard let name = arguments.first, let run = benchmarks[name] else {
    print("usage: signfleet-bench <\(benchmarks.keys.sorted().joined(separator: "|"))> [options]")
    exit(2)
}
do {
    try await run(Array(arguments.dropFirst()))
} catch {
    // A refused option or a failed run says why and exits 1, without a crash report.
    FileHandle.standardError.write(Data("signfleet-bench \(name): \(error)\n".utf8))
    exit(1)
}
