import Coordinator
import CoordinatorPostgres
import Foundation
import FleetTesting
import Logging
import Testing

@testable import Coordinator

/// The two coordinator stores the conformance suite runs against.
enum StoreBackend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// A fresh store of one backend: a SQLite file in a temporary directory, or a new schema on the
/// test PostgreSQL server (``PostgresTestServer``).
struct ConformanceStore {
    let backend: StoreBackend
    let storage: any CoordinatorStorage
    private let cleanup: @Sendable () -> Void

    static func make(_ backend: StoreBackend) async throws -> ConformanceStore {
        switch backend {
        case .sqlite:
            let temporary = try TemporaryStore()
            return ConformanceStore(backend: backend, storage: temporary.store, cleanup: { temporary.remove() })
        case .postgres:
            let store = try await PostgresTestServer.store()
            return ConformanceStore(backend: backend, storage: store, cleanup: { store.close() })
        }
    }

    /// Another handle on the same store: a second SQLite connection pool on the same file, or a
    /// second PostgreSQL client on the same schema (as a second coordinator would open it).
    func reopened() async throws -> any CoordinatorStorage {
        if let sqlite = storage as? CoordinatorStore { return try CoordinatorStore(path: sqlite.path) }
        let postgres = try #require(storage as? PostgresCoordinatorStore)
        return try await PostgresTestServer.store(schema: postgres.schema)
    }

    func remove() { cleanup() }
}

extension PostgresTestServer {
    /// A store in a schema of its own (a new one unless `schema` is given) on the test server.
    static func store(schema: String? = nil) async throws -> PostgresCoordinatorStore {
        let url = try await url()
        let name = schema ?? "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        return try await PostgresCoordinatorStore(url: url, schema: name, logger: Logger(label: "test.postgres"))
    }
}
