import Envelopes
import FleetProtocol
import Foundation

/// The server-side lifecycle of one synced envelope (docs/sync.md, "After sync"): a pure
/// state machine over the envelope's status and its recipients' statuses.
///
/// - `synced` (only from `created`): recipients already done on the device stay done; the
///   recipients who must act and are not done, at the lowest routing order, become current
///   (`sent`). The envelope is `declined` when a recipient declined on the device, `completed`
///   when nobody is left to act, otherwise `sent`.
/// - `recipientDelivered` / `recipientSigned` / `recipientDeclined` (only while `sent` or
///   `delivered`, only for a current recipient): a signature advances routing to the next
///   routing order, and completes the envelope once every recipient who must act is done; a
///   decline ends it (`declined`).
/// - `void` (only from `sent` or `delivered`, with a non-empty reason): `voided`.
///
/// Carbon copies never block routing: they become `completed` when routing reaches their
/// order (or the envelope completes). Recipients with the same routing order act in parallel.
public struct EnvelopeLifecycle: Sendable, Hashable {
    /// The envelope's status on the server: `Envelopes.EnvelopeStatus`, the one declaration.
    public typealias Status = EnvelopeStatus

    /// One recipient, as the lifecycle sees it.
    public struct Recipient: Sendable, Hashable {
        public var id: String
        /// The raw `RecipientType` (`signer`, `inPersonSigner`, `carbonCopy`, ...).
        public var type: String
        public var routingOrder: Int
        /// The recipient's status on the server: the one `Envelopes.RecipientStatus` the device uses too
        /// (`created` here means routing has not reached them; `autoResponded` counts as not done).
        public var status: RecipientStatus
        public var declineReason: String?

        public init(id: String, type: String, routingOrder: Int, status: RecipientStatus, declineReason: String? = nil) {
            self.id = id
            self.type = type
            self.routingOrder = routingOrder
            self.status = status
            self.declineReason = declineReason
        }

        /// Carbon copies receive a copy and never block routing; every other type must act.
        public var mustAct: Bool { type != "carbonCopy" }
    }

    /// What can happen to an envelope.
    public enum Event: Sendable, Hashable {
        /// The device's payload was applied by the sync ingest.
        case synced
        /// A current recipient opened the envelope.
        case recipientDelivered(String)
        /// A current recipient signed (or, for a non-signing role, finished their part).
        case recipientSigned(String)
        /// A current recipient declined, with a reason.
        case recipientDeclined(String, reason: String)
        /// The envelope is voided, with a reason.
        case void(reason: String)
    }

    public private(set) var status: Status
    public private(set) var recipients: [Recipient]
    public private(set) var voidReason: String?

    /// - Parameters:
    ///   - status: the current status (`created` for an envelope about to be synced).
    ///   - recipients: the recipients with their current statuses.
    ///   - voidReason: why it was voided, for a voided envelope.
    public init(status: Status = .created, recipients: [Recipient], voidReason: String? = nil) {
        self.status = status
        self.recipients = recipients
        self.voidReason = voidReason
    }

    /// The routing order whose recipients are current: the lowest order with a recipient who
    /// must act and is not done; `nil` when nobody is left to act.
    public var currentRoutingOrder: Int? {
        recipients.filter { $0.mustAct && !$0.status.isDone && $0.status != .declined }.map(\.routingOrder).min()
    }

    /// The ids of the recipients who must act now (same routing order = in parallel).
    public var currentRecipientIDs: [String] {
        guard status == .sent || status == .delivered, let order = currentRoutingOrder else { return [] }
        return recipients.filter { $0.mustAct && $0.routingOrder == order && !$0.status.isDone }.map(\.id)
    }

    /// Applies `event` if it is legal from the current state.
    /// - Returns: the ids of the recipients whose status changed.
    /// - Throws: `FleetError` `invalid_request` for an illegal transition or an empty reason,
    ///   `not_found` for an unknown recipient id. Nothing changes when it throws.
    @discardableResult
    public mutating func apply(_ event: Event) throws(FleetError) -> [String] {
        let before = recipients
        switch event {
        case .synced:
            guard status == .created else { throw illegal("synced", "only a created envelope can be synced") }
            if recipients.contains(where: { $0.status == .declined }) {
                status = .declined
            } else {
                // Routing on the server starts here: whoever is not done waits for their turn.
                for index in recipients.indices where !recipients[index].status.isDone {
                    recipients[index].status = .created
                }
                route()
            }
        case .recipientDelivered(let id):
            let index = try currentRecipient(id, "recipientDelivered")
            guard recipients[index].status == .sent else {
                throw illegal("recipientDelivered", "recipient \(id) is \(recipients[index].status.rawValue); only a sent recipient can be delivered")
            }
            // Certified delivery is done once opened; everyone else still has to act.
            recipients[index].status = recipients[index].type == "certifiedDelivery" ? .completed : .delivered
            route()
        case .recipientSigned(let id):
            let index = try currentRecipient(id, "recipientSigned")
            let signing = recipients[index].type == "signer" || recipients[index].type == "inPersonSigner"
            recipients[index].status = signing ? .signed : .completed
            route()
        case .recipientDeclined(let id, let reason):
            let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { throw FleetError(.invalidRequest, "a decline needs a non-empty reason") }
            let index = try currentRecipient(id, "recipientDeclined")
            recipients[index].status = .declined
            recipients[index].declineReason = trimmed
            status = .declined
        case .void(let reason):
            guard status == .sent || status == .delivered else {
                throw illegal("void", "only a sent or delivered envelope can be voided")
            }
            let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { throw FleetError(.invalidRequest, "voiding an envelope needs a non-empty reason") }
            status = .voided
            voidReason = trimmed
        }
        return zip(before, recipients).filter { $0.0 != $0.1 }.map { $0.1.id }
    }

    /// Moves routing forward: completes the envelope when nobody must act any more, otherwise
    /// makes the lowest open routing order current and sets `sent` / `delivered`.
    private mutating func route() {
        guard let order = currentRoutingOrder else {
            for index in recipients.indices where !recipients[index].mustAct && !recipients[index].status.isDone {
                recipients[index].status = .completed
            }
            status = .completed
            return
        }
        for index in recipients.indices where recipients[index].routingOrder <= order {
            if !recipients[index].mustAct {
                if !recipients[index].status.isDone { recipients[index].status = .completed }
            } else if recipients[index].status == .created || recipients[index].status == .autoResponded {
                recipients[index].status = .sent
            }
        }
        let current = recipients.filter { $0.mustAct && $0.routingOrder == order && !$0.status.isDone }
        status = current.allSatisfy { $0.status == .delivered } ? .delivered : .sent
    }

    private func currentRecipient(_ id: String, _ event: String) throws(FleetError) -> Int {
        guard let index = recipients.firstIndex(where: { $0.id == id }) else {
            throw FleetError(.notFound, "the envelope has no recipient \"\(id)\"")
        }
        guard status == .sent || status == .delivered else {
            throw illegal(event, "recipients can act only while the envelope is sent or delivered")
        }
        guard currentRecipientIDs.contains(id) else {
            throw illegal(event, "recipient \(id) is \(recipients[index].status.rawValue) and not current (current: \(currentRecipientIDs.joined(separator: ", ")))")
        }
        return index
    }

    private func illegal(_ event: String, _ rule: String) -> FleetError {
        FleetError(.invalidRequest, "\(event) is not allowed: the envelope is \(status.rawValue); \(rule)")
    }
}
