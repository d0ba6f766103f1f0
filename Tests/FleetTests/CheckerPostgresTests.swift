import CoordinatorPostgres
import FleetTesting
import Foundation
import Testing

@testable import Fleet

/// The checker reads a PostgreSQL coordinator store through the same read-only snapshot as a
/// SQLite one (docs/checker.md, "The coordinator's snapshot"): the same run gives the same
/// verdict and counts, and a server that is not there is unreadable input, said at once.
@Suite struct CheckerPostgresTests {
    /// A fresh schema on the test server, as a `store: postgres` run's `coordinator.json` names it.
    static func storeURL() async throws -> String {
        let url = try await PostgresTestServer.url()
        return url + "?schema=t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    @Test func aRunOnPostgresGetsTheSameVerdictAndCountsAsOnSQLite() async throws {
        let onPostgres = try await CheckerRun.make(postgres: try await Self.storeURL())
        defer { onPostgres.remove() }
        let onSQLite = try await CheckerRun.make()
        defer { onSQLite.remove() }
        #expect(!FileManager.default.fileExists(atPath: onPostgres.run.coordinatorStore), "no coordinator.sqlite: the run's store is PostgreSQL")
        let postgres = try await Checker.check(run: onPostgres.run)
        let sqlite = try await Checker.check(run: onSQLite.run)
        #expect(postgres.verdict == .valid, "\(postgres.summary())")
        #expect(postgres.counts.serverEnvelopes == 6 && postgres.counts.serverRecipients == 12)
        #expect(postgres.counts.serverEnvelopes == sqlite.counts.serverEnvelopes && postgres.counts.signed == sqlite.counts.signed)
        #expect(postgres.counts.acknowledged == sqlite.counts.acknowledged && postgres.counts.serverRecipients == sqlite.counts.serverRecipients)
    }

    @Test func anUnsyncedItemOnPostgresIsWitnessedByTheStoreItsURLNames() async throws {
        let url = try await Self.storeURL()
        let fixture = try await CheckerRun.make(unsynced: ["a-1": 1], postgres: url)
        defer { fixture.remove() }
        let report = try await Checker.check(run: fixture.run)
        #expect(report.verdict == .unknown, "\(report.summary())")
        let unsynced = try #require(report.anomalies(.unsynced).first)
        #expect(unsynced.device == "a-1" && unsynced.sequence == 3)
        let schema = try #require(url.split(separator: "=").last)
        #expect(unsynced.witness.rows.contains { $0.store.hasPrefix("postgres://signfleet@") && $0.store.hasSuffix("schema \(schema)") }, "\(unsynced.witness.rows)")
    }

    @Test func aPostgresServerThatIsNotThereIsUnreadableInputAtOnce() async throws {
        let fixture = try await CheckerRun.make(postgres: try await Self.storeURL())
        defer { fixture.remove() }
        let refusing = try RefusingPort()
        let gone = "postgres://signfleet@127.0.0.1:\(refusing.port)/signfleet?schema=fleet"
        try JSONSerialization.data(withJSONObject: ["store": gone]).write(to: URL(fileURLWithPath: fixture.run.coordinatorConfigFile))
        let report = try await Checker.check(run: fixture.run)
        #expect(report.verdict == .unknown)
        let unreadable = try #require(report.anomalies(.unreadableInput).first)
        // "At once": the reader's one probe connection was refused, and that is the error reported;
        // the pool's circuit breaker (about a minute of retries) would say "cannot be reached".
        #expect(unreadable.message.contains("PostgreSQL connection failed"), "the reader asked once: \(unreadable.message)")
        #expect(unreadable.message.contains("cannot read the coordinator store postgres://signfleet@127.0.0.1:\(refusing.port)/signfleet schema fleet"), "\(unreadable.message)")
        // No cluster of the run's own (`<run>/postgres/data`): no hint to resume one.
        #expect(!unreadable.message.contains("scripts/postgres-cluster.sh resume"), "\(unreadable.message)")
        // With one, stopped, the hint says how to start it again.
        try FileManager.default.createDirectory(atPath: fixture.run.path + "/postgres/data", withIntermediateDirectories: true)
        let again = try await Checker.check(run: fixture.run)
        let hinted = try #require(again.anomalies(.unreadableInput).first)
        #expect(hinted.message.contains("scripts/postgres-cluster.sh resume"), "\(hinted.message)")
    }

    @Test func aSchemaWithoutAStoreIsNotCreatedByTheChecker() async throws {
        let fixture = try await CheckerRun.make(postgres: try await Self.storeURL())
        defer { fixture.remove() }
        let empty = try await Self.storeURL()
        try JSONSerialization.data(withJSONObject: ["store": empty]).write(to: URL(fileURLWithPath: fixture.run.coordinatorConfigFile))
        let report = try await Checker.check(run: fixture.run)
        #expect(report.anomalies(.unreadableInput).first?.message.contains("holds no coordinator store") == true, "\(report.summary())")
        // Still none: the reader created nothing.
        let again = try await Checker.check(run: fixture.run)
        #expect(again.anomalies(.unreadableInput).first?.message.contains("holds no coordinator store") == true)
    }
}
