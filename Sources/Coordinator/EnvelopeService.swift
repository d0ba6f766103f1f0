import Envelopes
import SyncContract
import FleetProtocol
import Foundation

/// Serves the envelope lifecycle after sync (docs/sync.md, "After sync"): `envelope.get`,
/// `envelope.void` and the `envelope.recipient.action` simulation hook, scoped to the
/// token's account; and the same operations for administrators, across accounts.
///
/// Every change is one write transaction: load the envelope and its recipients, apply one
/// ``EnvelopeLifecycle`` event, store what changed.
public struct EnvelopeService: Sendable {
    let store: any CoordinatorStorage
    let auth: AuthService
    let now: @Sendable () -> Date

    /// The longest void or decline reason, in characters (after trimming).
    public static let maxReasonLength = 500

    public init(store: CoordinatorStore, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.init(storage: store, auth: auth, now: now)
    }

    package init(storage store: any CoordinatorStorage, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.store = store
        self.auth = auth
        self.now = now
    }

    // MARK: Device requests

    /// Serves `envelope.get`.
    /// - Throws: `FleetError` `unauthenticated` / `token_expired`; `not_found` when the
    ///   account has no such envelope (also for another account's envelope).
    public func query(_ request: EnvelopeQuery, meter: (Account) throws -> Void = { _ in }) async throws -> EnvelopeQueryReply {
        let (_, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        return try await envelope(id: request.envelopeID, accountID: account.id)
    }

    /// Serves `envelope.void`.
    /// - Throws: `FleetError` as ``query(_:meter:)``; `invalid_request` when the envelope is
    ///   not `sent` or `delivered`, or the reason is empty or too long.
    public func void(_ request: EnvelopeVoid, meter: (Account) throws -> Void = { _ in }) async throws -> EnvelopeQueryReply {
        let (_, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        return try await void(envelopeID: request.envelopeID, reason: request.reason, accountID: account.id)
    }

    /// Serves `envelope.recipient.action`.
    /// - Throws: `FleetError` as ``query(_:meter:)``; `not_found` for an unknown recipient;
    ///   `invalid_request` when the recipient is not current, the envelope is not `sent` or
    ///   `delivered`, or a decline has no reason.
    public func act(_ request: RecipientAction, meter: (Account) throws -> Void = { _ in }) async throws -> EnvelopeQueryReply {
        let (_, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        return try await act(
            envelopeID: request.envelopeID, recipientID: request.recipientID, action: request.action, reason: request.reason,
            accountID: account.id)
    }

    // MARK: Operations (accountID nil: any account, for administrators)

    /// An envelope and its recipients.
    /// - Throws: `FleetError` `not_found` when there is no such envelope (in `accountID`, when given).
    public func envelope(id: String, accountID: String? = nil) async throws -> EnvelopeQueryReply {
        guard let aggregate = try await store.envelope(id: id, accountID: accountID) else {
            throw StoreRefusal.noEnvelope(id, inAccount: accountID)
        }
        return Self.reply(aggregate.envelope, aggregate.recipients)
    }

    /// Voids a `sent` or `delivered` envelope.
    /// - Throws: `FleetError` `not_found`, or `invalid_request` for an illegal transition or a bad reason.
    public func void(envelopeID: String, reason: String, accountID: String? = nil) async throws -> EnvelopeQueryReply {
        try Self.checkReason(reason)
        return try await change(envelopeID: envelopeID, accountID: accountID, event: .void(reason: reason))
    }

    /// Acts for a current recipient: delivers, signs, or declines (with a reason).
    /// - Throws: `FleetError` `not_found`, or `invalid_request` for an illegal transition or a bad reason.
    public func act(
        envelopeID: String, recipientID: String, action: RecipientAction.Action, reason: String? = nil, accountID: String? = nil
    ) async throws -> EnvelopeQueryReply {
        let event: EnvelopeLifecycle.Event
        switch action {
        case .deliver: event = .recipientDelivered(recipientID)
        case .sign: event = .recipientSigned(recipientID)
        case .decline:
            try Self.checkReason(reason ?? "")
            event = .recipientDeclined(recipientID, reason: reason ?? "")
        }
        return try await change(envelopeID: envelopeID, accountID: accountID, event: event)
    }

    private func change(envelopeID: String, accountID: String?, event: EnvelopeLifecycle.Event) async throws -> EnvelopeQueryReply {
        let at = now()
        return try await store.updateEnvelope(id: envelopeID, accountID: accountID) { aggregate in
            try Self.apply(event, to: &aggregate, at: at)
        }
    }

    /// Applies one lifecycle event to an envelope and its recipients; recipients the event
    /// changed get `at` as their change time.
    /// The change's Connect events are appended to the aggregate's ``EnvelopeAggregate/events``.
    static func apply(_ event: EnvelopeLifecycle.Event, to aggregate: inout EnvelopeAggregate, at: Date) throws -> EnvelopeQueryReply {
        let before = aggregate
        defer { aggregate.events += EnvelopeEvent.between(before, aggregate, at: at) }
        var lifecycle = try Self.lifecycle(aggregate.envelope, aggregate.recipients)
        let changed = try lifecycle.apply(event)
        aggregate.envelope.status = lifecycle.status.rawValue
        aggregate.envelope.voidReason = lifecycle.voidReason
        let states = Dictionary(lifecycle.recipients.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for index in aggregate.recipients.indices where changed.contains(aggregate.recipients[index].recipientID) {
            guard let state = states[aggregate.recipients[index].recipientID] else { continue }
            aggregate.recipients[index].status = state.status.rawValue
            aggregate.recipients[index].declineReason = state.declineReason
            aggregate.recipients[index].statusChangedAt = at
        }
        return Self.reply(aggregate.envelope, aggregate.recipients)
    }

    // MARK: Store helpers

    /// A just-synced envelope's recipients with their statuses after `synced` (the rows
    /// ``SyncIngest`` stores). Recipients the event changed get `at` as their change time; the
    /// others keep the device's.
    static func syncedRecipients(
        envelopeID: String, payload: SyncPayload, lifecycle: EnvelopeLifecycle, routed: [String], at: Date
    ) -> [EnvelopeRecipientRecord] {
        zip(payload.recipients, lifecycle.recipients).map { recipient, state in
            let deviceTime = recipient.statusChangedAtNanos.map { Date(timeIntervalSince1970: Double($0) / 1_000_000_000) }
            return EnvelopeRecipientRecord(
                envelopeID: envelopeID, recipientID: recipient.recipientId, type: recipient.type, name: recipient.name,
                routingOrder: recipient.routingOrder, status: state.status.rawValue,
                statusChangedAt: routed.contains(recipient.recipientId) ? at : deviceTime, declineReason: state.declineReason)
        }
    }

    static func lifecycle(_ record: EnvelopeRecord, _ recipients: [EnvelopeRecipientRecord]) throws(FleetError) -> EnvelopeLifecycle {
        guard let status = EnvelopeLifecycle.Status(rawValue: record.status) else {
            throw FleetError(.internal, "envelope \(record.id) has unknown status \"\(record.status)\"")
        }
        var states: [EnvelopeLifecycle.Recipient] = []
        for recipient in recipients {
            guard let recipientStatus = RecipientStatus(rawValue: recipient.status) else {
                throw FleetError(.internal, "recipient \(recipient.recipientID) of envelope \(record.id) has unknown status \"\(recipient.status)\"")
            }
            states.append(
                EnvelopeLifecycle.Recipient(
                    id: recipient.recipientID, type: recipient.type, routingOrder: recipient.routingOrder, status: recipientStatus,
                    declineReason: recipient.declineReason))
        }
        return EnvelopeLifecycle(status: status, recipients: states, voidReason: record.voidReason)
    }

    static func reply(_ record: EnvelopeRecord, _ recipients: [EnvelopeRecipientRecord]) -> EnvelopeQueryReply {
        EnvelopeQueryReply(
            envelopeID: record.id, status: record.status, transactionID: record.transactionID, deviceID: record.deviceID,
            createdAt: record.createdAt, voidReason: record.voidReason,
            recipients: recipients.map {
                EnvelopeQueryReply.Recipient(
                    recipientID: $0.recipientID, type: $0.type, name: $0.name, routingOrder: $0.routingOrder, status: $0.status,
                    statusChangedAt: $0.statusChangedAt, declineReason: $0.declineReason)
            })
    }

    static func checkReason(_ reason: String) throws(FleetError) {
        let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw FleetError(.invalidRequest, "a reason is required and must not be empty") }
        guard trimmed.count <= maxReasonLength else {
            throw FleetError(.invalidRequest, "a reason has at most \(maxReasonLength) characters; this one has \(trimmed.count)")
        }
    }
}

extension EnvelopeLifecycle {
    /// An envelope about to be synced (`created`), with the payload's recipients and the
    /// statuses the device gave them (an unknown status counts as `created`).
    public init(payload: SyncPayload) {
        self.init(
            status: .created,
            recipients: payload.recipients.map {
                Recipient(
                    id: $0.recipientId, type: $0.type, routingOrder: $0.routingOrder,
                    status: RecipientStatus(rawValue: $0.status) ?? .created, declineReason: $0.declineReason)
            })
    }
}
