import Crypto
import FleetProtocol
import Foundation
import GRDB
import SignatureCapture

/// An enrolled device: its account and its Ed25519 public key.
public struct EnrolledDevice: Sendable, Hashable {
    public var id: String
    public var accountID: String
    public var userID: String
    public var publicKey: [UInt8]
    public var enrolledAt: Date
    public var lastAppliedSequence: UInt64
}

/// Device enrollment: binds a device id to a public key under an account.
/// Later requests are checked against it with ``authenticate(deviceID:routingID:)``.
public struct DeviceRegistry: Sendable {
    let store: CoordinatorStore
    let auth: AuthService
    let now: @Sendable () -> Date

    public init(store: CoordinatorStore, auth: AuthService, now: @escaping @Sendable () -> Date = Date.init) {
        self.store = store
        self.auth = auth
        self.now = now
    }

    /// Enrolls a device, or confirms an enrollment (same id, same key, same account).
    /// - Throws: ``FleetError``: the token's errors; `invalid_request` for a key that is not a
    ///   32-byte Ed25519 public key or a device id that is not the sender's routing id;
    ///   `forbidden` when the id is enrolled with another key or under another account.
    public func enroll(_ request: EnrollDevice, routingID: String) async throws -> EnrollDeviceReply {
        try await enroll(request, routingID: routingID, meter: { _ in })
    }

    /// `enroll(_:routingID:)`, with `meter` called once the account is known (rate limits).
    func enroll(_ request: EnrollDevice, routingID: String, meter: (Account) throws -> Void) async throws -> EnrollDeviceReply {
        let (user, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        guard request.deviceID == routingID else {
            throw FleetError(
                .invalidRequest, "device id \"\(request.deviceID)\" is not the socket's routing id \"\(routingID)\"")
        }
        guard (1...255).contains(request.deviceID.utf8.count) else {
            throw FleetError(.invalidRequest, "a device id is 1 to 255 bytes")
        }
        if case .failure(let problem) = StrictEd25519.publicKey(request.publicKey) {
            throw FleetError(.invalidRequest, "publicKey is refused: \(problem) (docs/protocol.md, \"Strict Ed25519\")")
        }
        let now = now()
        let record = try await store.database.write { db -> DeviceRecord in
            if let existing = try DeviceRecord.fetchOne(db, key: request.deviceID) {
                guard existing.accountID == account.id, existing.publicKey == Data(request.publicKey) else {
                    throw FleetError(
                        .forbidden, "device \"\(request.deviceID)\" is already enrolled with another key or account")
                }
                return existing  // a retried enrollment is answered the same way
            }
            try DeviceRecord(
                id: request.deviceID, accountID: account.id, userID: user.id, publicKey: Data(request.publicKey),
                enrolledAt: now, lastAppliedSequence: 0
            ).insert(db)
            // Answer from the stored row (dates round to SQLite's precision), so a
            // retried enrollment gets exactly the same reply.
            guard let stored = try DeviceRecord.fetchOne(db, key: request.deviceID) else {
                throw FleetError(.internal, "enrolled device \"\(request.deviceID)\" vanished", retryable: true)
            }
            return stored
        }
        return EnrollDeviceReply(
            deviceID: record.id, accountID: record.accountID, enrolledAt: record.enrolledAt,
            lastAppliedSequence: UInt64(record.lastAppliedSequence))
    }

    /// The enrolled device a request comes from; the request's device id must be the
    /// sender's routing id, so one device cannot speak for another.
    /// - Throws: ``FleetError`` `forbidden` for a mismatch, `unauthenticated` for an unknown device.
    public func authenticate(deviceID: String, routingID: String) async throws -> EnrolledDevice {
        guard deviceID == routingID else {
            throw FleetError(.forbidden, "device \"\(routingID)\" cannot act for device \"\(deviceID)\"")
        }
        guard let device = try await device(id: deviceID) else {
            throw FleetError(.unauthenticated, "device \"\(deviceID)\" is not enrolled; send device.enroll first")
        }
        return device
    }

    public func device(id: String) async throws -> EnrolledDevice? {
        try await store.database.read { db in try DeviceRecord.fetchOne(db, key: id) }.map {
            EnrolledDevice(
                id: $0.id, accountID: $0.accountID, userID: $0.userID, publicKey: Array($0.publicKey),
                enrolledAt: $0.enrolledAt, lastAppliedSequence: UInt64($0.lastAppliedSequence))
        }
    }
}
