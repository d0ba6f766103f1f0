import FleetTesting
import Foundation
import GRDB
import Testing

@testable import Coordinator
@testable import Fleet

/// docs/checker.md's "API" (the doc shows this function's body): checks the run directory at
/// `path`, writes its check.json and prints the summary.
func checkerExample(path: String) async throws -> (verdict: CheckVerdict, lost: [CheckAnomaly]) {
    // BEGIN EXAMPLE checker
    let run = RunDirectory(path: path)                  // runs/latest, say
    let report = try await Checker.check(run: run)      // or await Checker.check(Checker.Inputs(...))
    let verdict = report.verdict                        // .valid / .invalid / .unknown; verdict.exitCode 0 / 1 / 2
    let lost = report.anomalies(.lost)                  // [CheckAnomaly] with kind, device, transaction, sequence, serverEnvelope, message, witness
    try report.write(to: run.checkFile)
    print(report.summary(maxAnomalies: 10))
    // END EXAMPLE
    return (verdict, lost)
}

@Suite("docs/checker.md: the API")
struct CheckerExampleTests {
    @Test("the API example in docs/checker.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("checker", in: "docs/checker.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    /// The verdict written to a run's check.json.
    static func writtenVerdict(_ run: RunDirectory) throws -> String? {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: run.checkFile))) as? [String: Any]
        return json?["verdict"] as? String
    }

    @Test("the example checks a clean run valid, and one with a server row deleted invalid with the lost envelope")
    func runs() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let clean = try await checkerExample(path: fixture.run.path)
        #expect(clean.verdict == .valid && clean.verdict.exitCode == 0)
        #expect(clean.lost.isEmpty)
        #expect(try Self.writtenVerdict(fixture.run) == "valid")

        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["a-1"]?[1])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [transaction])
        }
        let checked = try await checkerExample(path: broken.path)
        #expect(checked.verdict == .invalid && checked.verdict.exitCode == 1)
        #expect(checked.lost.map(\.transaction) == [transaction])
        #expect(checked.lost.first?.device == "a-1")
        #expect(try Self.writtenVerdict(broken) == "invalid")
    }
}
