import Crypto
import FleetProtocol
import Foundation
import SignatureCapture

/// An enrolled device: its account and its Ed25519 public key.
public struct EnrolledDevice: Sendable, Hashable {
    public var id: String
    public var accountID: String
    public var userID: String
    public var publicKey: [UInt8]
    public var enrolledAt: Date
    public var lastAppliedSequence: UInt64
    /// The CURVE key bound at enrollment (nil: enrolled over plain TCP).
    public var curveKey: [UInt8]? = nil
    /// When an admin revoked its keys (nil while they are valid).
    public var revokedAt: Date? = nil
}

extension EnrolledDevice {
    init(_ record: DeviceRecord) {
        self.init(
            id: record.id, accountID: record.accountID, userID: record.userID, publicKey: Array(record.publicKey),
            enrolledAt: record.enrolledAt, lastAppliedSequence: UInt64(max(0, record.lastAppliedSequence)),
            curveKey: record.curveKey.map(Array.init), revokedAt: record.revokedAt)
    }
}

/// Device enrollment: binds a device id, its account, its Ed25519 signing key and (under CURVE)
/// the transport key it proved, in one step authorised by an access token. Later requests are
/// checked against it with ``authenticate(deviceID:credential:)`` (docs/protocol.md,
/// "Security model").
public struct DeviceRegistry: Sendable {
    let store: any CoordinatorStorage
    let auth: AuthService
    let now: @Sendable () -> Date

    public init(store: CoordinatorStore, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.init(storage: store, auth: auth, now: now)
    }

    package init(storage store: any CoordinatorStorage, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.store = store
        self.auth = auth
        self.now = now
    }

    /// Enrolls a device, or confirms an enrollment (same id, same keys, same account).
    /// - Throws: `FleetError`: the token's errors; `invalid_request` for a key refused by the
    ///   strict Ed25519 rule or (plain TCP) a device id that is not the sender's routing id;
    ///   `forbidden` when the id is enrolled with other keys or under another account (until an
    ///   admin revokes it), or the transport key is another device's.
    public func enroll(_ request: EnrollDevice, credential: PeerCredential) async throws -> EnrollDeviceReply {
        try await enroll(request, credential: credential, meter: { _ in })
    }

    /// Plain TCP: the sender is whoever its routing id says.
    public func enroll(_ request: EnrollDevice, routingID: String) async throws -> EnrollDeviceReply {
        try await enroll(request, credential: .claimedName(routingID))
    }

    /// `enroll(_:credential:)`, with `meter` called once the account is known (rate limits).
    func enroll(_ request: EnrollDevice, credential: PeerCredential, meter: (Account) throws -> Void) async throws -> EnrollDeviceReply {
        let (user, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        let curveKey: Data?
        switch credential {
        case .claimedName(let routingID):
            guard request.deviceID == routingID else {
                throw FleetError(
                    .invalidRequest, "device id \"\(request.deviceID)\" is not the socket's routing id \"\(routingID)\"")
            }
            curveKey = nil
        case .curveKey(let key):
            curveKey = Data(key)
        }
        guard (1...255).contains(request.deviceID.utf8.count) else {
            throw FleetError(.invalidRequest, "a device id is 1 to 255 bytes")
        }
        if case .failure(let problem) = StrictEd25519.enrollableKey(request.publicKey) {
            throw FleetError(.invalidRequest, "publicKey is refused: \(problem) (docs/protocol.md, \"Strict Ed25519\")")
        }
        let now = now()
        let deviceID = request.deviceID
        let publicKey = Data(request.publicKey)
        let record = try await store.enroll(accountID: account.id, deviceID: deviceID, curveKey: curveKey) { facts in
            try Self.decide(facts, deviceID: deviceID, publicKey: publicKey, curveKey: curveKey, accountID: account.id, userID: user.id, now: now)
        }
        store.regressions.observe(
            accountID: record.accountID, deviceID: record.id, lastApplied: UInt64(clamping: record.lastAppliedSequence),
            acknowledgedThrough: request.acknowledgedThrough)
        return EnrollDeviceReply(
            deviceID: record.id, accountID: record.accountID, enrolledAt: record.enrolledAt,
            lastAppliedSequence: UInt64(clamping: record.lastAppliedSequence))
    }

    /// The enrollment rules, on what the store read in the enrollment's transaction.
    static func decide(
        _ facts: EnrollmentFacts, deviceID: String, publicKey: Data, curveKey: Data?, accountID: String, userID: String, now: Date
    ) throws -> EnrollmentChange {
        if curveKey != nil, let holder = facts.keyHolder, holder.id != deviceID || holder.accountID != accountID {
            throw FleetError(.forbidden, "this connection's CURVE key is already bound to another device; each device has its own key")
        }
        if curveKey == nil, facts.idInOtherAccount {
            // Device ids are per account, but over plain TCP the id is all that names a device.
            throw FleetError(
                .forbidden, "device id \"\(deviceID)\" is enrolled in another account; over plain TCP ids must be unique, use CURVE")
        }
        guard var existing = facts.existing else {
            return .insert(
                DeviceRecord(
                    id: deviceID, accountID: accountID, userID: userID, publicKey: publicKey, enrolledAt: now, lastAppliedSequence: 0,
                    curveKey: curveKey))
        }
        if existing.revokedAt != nil {
            // Revoked by an admin: new keys take its place; its history stays. The old keys
            // may be in the wrong hands: they cannot undo the revocation.
            guard existing.publicKey != publicKey, curveKey == nil || existing.curveKey != curveKey else {
                throw FleetError(.forbidden, "device \"\(deviceID)\" was revoked: it enrolls again only with new signing and transport keys")
            }
            existing.publicKey = publicKey
            existing.curveKey = curveKey
            existing.revokedAt = nil
            existing.userID = userID
            return .replace(existing)
        }
        guard existing.accountID == accountID, existing.publicKey == publicKey else {
            throw FleetError(
                .forbidden,
                "device \"\(deviceID)\" is already enrolled with another key; an admin of its account must revoke it first (signfleet admin devices revoke)")
        }
        switch (existing.curveKey, curveKey) {
        case (nil, nil):
            break
        case (nil, _?):
            // Enrolled over plain TCP: its signing key was sent in the clear, so it proves
            // nothing; binding a transport key to the device needs an admin's revocation first.
            throw FleetError(
                .forbidden,
                "device \"\(deviceID)\" was enrolled over plain TCP; an admin must revoke it before it enrolls with CURVE keys (signfleet admin devices revoke)")
        case (let bound?, let key?) where bound == key:
            break
        case (_?, nil):
            throw FleetError(.forbidden, "device \"\(deviceID)\" is bound to a CURVE key; connect with CURVE")
        case (_?, _?):
            throw FleetError(
                .forbidden,
                "device \"\(deviceID)\" is enrolled with another CURVE key; an admin must revoke it first (signfleet admin devices revoke)")
        }
        return .keep(existing)  // a retried enrollment is answered the same way
    }

    /// The enrolled device a request comes from. Under CURVE the sender's proven key must be the
    /// one bound to `deviceID`; under plain TCP its routing id must be `deviceID` (and the device
    /// must not be bound to a CURVE key).
    /// - Throws: `FleetError` `forbidden` for a mismatch or a revoked device, `unauthenticated`
    ///   for an unknown device.
    public func authenticate(deviceID: String, credential: PeerCredential) async throws -> EnrolledDevice {
        let record = try await lookUp(deviceID: deviceID, credential: credential)
        return try Self.admit(record, deviceID: deviceID, credential: credential)
    }

    /// The device row a request from `credential` naming `deviceID` refers to. Device ids are
    /// unique per account only: under CURVE the key finds the row (its account included); under
    /// plain TCP the id must name a single device.
    /// - Throws: ``FleetError`` `forbidden` when plain TCP cannot tell two accounts' devices apart,
    ///   or the CURVE key is another device's; `unauthenticated` when the CURVE key is no device's.
    func lookUp(deviceID: String, credential: PeerCredential) async throws -> DeviceRecord? {
        switch credential {
        case .curveKey(let key):
            // Only the key's own row is ever looked at: whether another key's device of that id
            // exists must not show in the answer, or any peer could list the ids of every account.
            // A key bound to no device is `unauthenticated`, one bound to another device `forbidden`,
            // both whatever `deviceID` names.
            guard let bound = try await store.device(curveKey: Data(key)) else {
                throw FleetError(.unauthenticated, "no device is enrolled with this connection's CURVE key; send device.enroll first")
            }
            guard bound.id == deviceID else {
                throw FleetError(.forbidden, "this connection's CURVE key is enrolled for device \"\(bound.id)\"; it acts for no other")
            }
            return bound
        case .claimedName:
            let rows = try await store.devices(id: deviceID, limit: 2)
            guard rows.count <= 1 else {
                throw FleetError(
                    .forbidden, "device id \"\(deviceID)\" is enrolled in several accounts; plain TCP cannot tell them apart, use CURVE")
            }
            return rows.first
        }
    }

    /// Plain TCP: the sender is whoever its routing id says.
    public func authenticate(deviceID: String, routingID: String) async throws -> EnrolledDevice {
        try await authenticate(deviceID: deviceID, credential: .claimedName(routingID))
    }

    /// The identity rule shared by every request that acts for a device.
    static func admit(_ record: DeviceRecord?, deviceID: String, credential: PeerCredential) throws -> EnrolledDevice {
        if case .claimedName(let name) = credential, name != deviceID {
            throw FleetError(.forbidden, "device \"\(name)\" cannot act for device \"\(deviceID)\"")
        }
        guard let record else {
            throw FleetError(.unauthenticated, "device \"\(deviceID)\" is not enrolled; send device.enroll first")
        }
        if record.revokedAt != nil {
            throw FleetError(.forbidden, "device \"\(deviceID)\" was revoked by an admin; enroll it again with new keys")
        }
        switch (credential, record.curveKey) {
        case (.claimedName, nil):
            break
        case (.claimedName, _?):
            throw FleetError(.forbidden, "device \"\(deviceID)\" is bound to a CURVE key; connect with CURVE")
        case (.curveKey(let key), let bound?) where bound == Data(key):
            break
        case (.curveKey, _):
            throw FleetError(.forbidden, "this connection's CURVE key is not the one enrolled for device \"\(deviceID)\"")
        }
        return EnrolledDevice(record)
    }

    /// Revokes a device's keys (an admin's act): it can do nothing until it enrolls again, with
    /// new keys, under the same account. Its envelopes and sequence history stay.
    /// - Parameters:
    ///   - deviceID: the device to revoke.
    ///   - accountID: the device's account; needed only when several accounts have a
    ///     device with this id.
    /// - Returns: false when no such device is enrolled.
    /// - Throws: `FleetError` `invalid_request` when the id is ambiguous and no account is given.
    public func revoke(deviceID: String, accountID: String? = nil) async throws -> Bool {
        switch try await store.revokeDevice(id: deviceID, accountID: accountID, at: now()) {
        case .revoked: return true
        case .notFound: return false
        case .ambiguous(let accounts):
            throw FleetError(
                .invalidRequest, "device id \"\(deviceID)\" is enrolled in accounts \(accounts.joined(separator: ", ")); name the account")
        }
    }

    /// The device `id` of `accountID`, or of whichever account comes first when none is given.
    public func device(id: String, accountID: String? = nil) async throws -> EnrolledDevice? {
        try await store.devices(id: id, limit: accountID == nil ? 1 : Int.max).first { accountID == nil || $0.accountID == accountID }
            .map(EnrolledDevice.init)
    }
}
