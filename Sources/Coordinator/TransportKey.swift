import FleetProtocol
import Foundation
import GRDB
import ZeroMQ

extension CoordinatorStorage {
    /// The coordinator's long-term CURVE key pair, made and stored on first use
    /// (docs/protocol.md, "Security model"). Every coordinator process on this store serves with
    /// it, so devices that pinned its public key trust every restart (and every coordinator
    /// sharing the store).
    package func curveKeyPair() async throws -> CurveKeyPair {
        let secret = try await transportSecretKey { Data(try CurveKeyPair.generate().secretKey) }
        return try CurveKeyPair(secretKey: Array(secret))
    }
}

extension CoordinatorStore {
    /// `curveKeyPair()`, for callers outside an async context.
    public func transportKeyPair() throws -> CurveKeyPair {
        let secret = try database.write { db -> Data in
            if let stored = try Data.fetchOne(db, sql: "SELECT secretKey FROM transportKey WHERE id = 1") { return stored }
            let fresh = try CurveKeyPair.generate()
            try db.execute(
                sql: "INSERT INTO transportKey (id, secretKey, createdAt) VALUES (1, ?, ?)",
                arguments: [Data(fresh.secretKey), WallClock.system.now()])
            return Data(fresh.secretKey)
        }
        return try CurveKeyPair(secretKey: Array(secret))
    }
}
