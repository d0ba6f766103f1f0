import Foundation

/// The user logged in on the device; signers with this email sign locally ("self" signers).
public struct SigningUser: Hashable, Sendable, Codable {
    /// The user's email; signers with it are local.
    public var email: String
    /// The user's name.
    public var name: String?

    /// Creates a user.
    public init(email: String, name: String? = nil) {
        self.email = email
        self.name = name
    }
}

/// Where a recipient acts.
public enum RecipientLocality: String, Hashable, Sendable, Codable {
    /// An in-person signer, signing on this device in front of the host.
    case inPerson
    /// A signer whose email is the logged-in user's: they sign on this device.
    case selfSigner
    /// Everyone else: they act through the server after sync.
    case remote

    /// Whether the recipient acts on this device.
    public var isLocal: Bool { self != .remote }
}

/// Recipients that share a routing order and so are routed in parallel.
public struct RoutingGroup: Hashable, Sendable {
    /// The shared routing order.
    public var routingOrder: Int
    /// The recipients at this order, in envelope order.
    public var recipients: [Recipient]
}

/// Who acts next, and who acts here, for an envelope's recipients.
///
/// Routing goes by ascending routing order; recipients with the same order act in parallel. The
/// **current** order is the lowest one that still has a recipient who has not finished
/// (signed or completed). Carbon copies never hold routing up: they get their copy when routing
/// reaches them. A decline stops routing: nothing is current afterwards.
///
/// ```swift
/// let plan = RoutingPlan(envelope: envelope, user: SigningUser(email: "host@example.com"))
/// if let signer = plan.nextLocalSigner { /* present signing for signer */ }
/// ```
public struct RoutingPlan: Hashable, Sendable {
    /// The recipients, sorted by routing order (stable, so envelope order breaks ties).
    public let recipients: [Recipient]
    /// The logged-in user, if any.
    public let user: SigningUser?

    /// Plans routing for `recipients` as seen by `user`.
    public init(recipients: [Recipient], user: SigningUser?) {
        self.recipients = recipients.enumerated()
            .sorted { ($0.element.routingOrder, $0.offset) < ($1.element.routingOrder, $1.offset) }
            .map(\.element)
        self.user = user
    }

    /// Plans routing for an envelope's recipients as seen by `user`.
    public init(envelope: Envelope, user: SigningUser?) {
        self.init(recipients: envelope.recipients, user: user)
    }

    /// Where `recipient` acts.
    public func locality(of recipient: Recipient) -> RecipientLocality {
        switch recipient.type {
        case .inPersonSigner:
            return .inPerson
        case .signer:
            guard let user, let email = recipient.email, Self.sameEmail(email, user.email) else { return .remote }
            return .selfSigner
        default:
            return .remote
        }
    }

    static func sameEmail(_ a: String, _ b: String) -> Bool {
        let clean = { (s: String) in s.trimmingCharacters(in: .whitespaces).lowercased() }
        return !clean(a).isEmpty && clean(a) == clean(b)
    }

    /// Whether `recipient` still has to act before routing can pass their order.
    static func isPending(_ recipient: Recipient) -> Bool {
        recipient.type.blocksRouting && !recipient.status.isDone
    }

    /// The routing groups in ascending order.
    public var groups: [RoutingGroup] {
        var result: [RoutingGroup] = []
        for recipient in recipients {
            if result.last?.routingOrder == recipient.routingOrder {
                result[result.count - 1].recipients.append(recipient)
            } else {
                result.append(RoutingGroup(routingOrder: recipient.routingOrder, recipients: [recipient]))
            }
        }
        return result
    }

    /// Whether a recipient declined (routing stopped).
    public var isDeclined: Bool { recipients.contains { $0.status == .declined } }

    /// Whether every recipient who must act has finished and nobody declined.
    public var isComplete: Bool { !isDeclined && !recipients.contains(where: Self.isPending) }

    /// The routing order whose recipients act now; `nil` when complete or declined.
    public var currentRoutingOrder: Int? {
        guard !isDeclined else { return nil }
        return recipients.first(where: Self.isPending)?.routingOrder
    }

    /// The recipients who act now (in parallel): those at the current order who have not finished.
    public var currentRecipients: [Recipient] {
        guard let order = currentRoutingOrder else { return [] }
        return recipients.filter { $0.routingOrder == order && Self.isPending($0) }
    }

    /// The local signers who act now, in envelope order.
    public var currentLocalSigners: [Recipient] {
        currentRecipients.filter { locality(of: $0).isLocal }
    }

    /// The remote recipients who act now.
    public var currentRemoteRecipients: [Recipient] {
        currentRecipients.filter { !locality(of: $0).isLocal }
    }

    /// The local signer to present next, or `nil` when no local signer can sign now.
    ///
    /// `nil` right after composing an envelope whose first routing order is all remote: that
    /// envelope is ready for sync (see ``syncEligibility(state:)``), not for signing.
    public var nextLocalSigner: Recipient? { currentLocalSigners.first }

    /// Whether any recipient signs on this device.
    public var hasLocalSigners: Bool { recipients.contains { locality(of: $0).isLocal } }

    /// Whether a local signer has already signed.
    public var localSignerHasSigned: Bool {
        recipients.contains { locality(of: $0).isLocal && $0.status.isDone }
    }
}

/// Whether an envelope should go to the server now, and why.
public struct SyncEligibility: Hashable, Sendable {
    /// Why the envelope is (or is not) ready for sync.
    public enum Reason: String, Hashable, Sendable, Codable, CaseIterable {
        /// Ready: local signers have signed and none is pending now; remote recipients are next.
        case localSignersDone
        /// Ready: no local signer is pending now — only remote recipients (for example right after
        /// composing an envelope without local signers).
        case onlyRemoteSignersPending
        /// Ready: every recipient has finished on this device.
        case allRecipientsDone
        /// Ready: a recipient declined; the server must record it.
        case declined
        /// Ready: already in the outbox (pending, in flight or failed and awaiting retry).
        case queued
        /// Not ready: a local signer can sign now.
        case localSignerPending
        /// Not ready: still a draft.
        case notComposed
        /// Not ready: a local signer is signing now.
        case signingInProgress
        /// Not ready: already on the server.
        case alreadySynced
        /// Not ready: the envelope has no recipients.
        case noRecipients
    }

    /// Whether the envelope should be (or already is) queued for sync.
    public var isReadyForSync: Bool
    /// Why.
    public var reason: Reason
    /// The local signer who can sign now, when ``reason`` is ``Reason/localSignerPending``.
    public var nextLocalSigner: Recipient?

    /// Creates a decision.
    public init(isReadyForSync: Bool, reason: Reason, nextLocalSigner: Recipient? = nil) {
        self.isReadyForSync = isReadyForSync
        self.reason = reason
        self.nextLocalSigner = nextLocalSigner
    }

    /// The answer in words, for people.
    public var message: String {
        switch reason {
        case .localSignersDone: return "ready for sync: local signers have signed; remote recipients act next on the server"
        case .onlyRemoteSignersPending: return "ready for sync: nobody signs on this device now, only remote recipients are pending"
        case .allRecipientsDone: return "ready for sync: every recipient has finished on this device"
        case .declined: return "ready for sync: a recipient declined; sync so the server records it"
        case .queued: return "ready for sync: already queued; run a sync"
        case .localSignerPending:
            return "not ready for sync: \(nextLocalSigner.map { "'\($0.name)' (\($0.recipientId))" } ?? "a local signer") can sign on this device now; resume signing"
        case .notComposed: return "not ready for sync: the envelope is still a draft; compose it"
        case .signingInProgress: return "not ready for sync: a local signer is signing now"
        case .alreadySynced: return "not ready for sync: already on the server"
        case .noRecipients: return "not ready for sync: the envelope has no recipients"
        }
    }
}

/// What resuming an envelope should do.
public enum ResumeDecision: Hashable, Sendable {
    /// Present signing for this local signer.
    case sign(Recipient)
    /// Nobody signs here now; sync instead (the SDK's "resume right after compose" trap, answered).
    case readyForSync(SyncEligibility)
    /// Resuming makes no sense in this state (draft, signing now, synced).
    case notResumable(SyncEligibility)
}

extension RoutingPlan {
    /// The SDK's sync-eligibility rules, applied to an envelope in `state`.
    ///
    /// A cached envelope is ready when (a) its local signers have signed and none is pending now,
    /// with only remote recipients next (or nobody), or (b) only remote recipients are pending now.
    /// A declined envelope is ready so the server records the decline. Queued states are ready.
    ///
    /// - Parameter state: The envelope's local state.
    /// - Returns: The decision and its reason.
    public func syncEligibility(state: EnvelopeLocalState) -> SyncEligibility {
        switch state {
        case .draft: return SyncEligibility(isReadyForSync: false, reason: .notComposed)
        case .signing: return SyncEligibility(isReadyForSync: false, reason: .signingInProgress)
        case .pendingSync, .syncing, .syncFailed: return SyncEligibility(isReadyForSync: true, reason: .queued)
        case .synced: return SyncEligibility(isReadyForSync: false, reason: .alreadySynced)
        case .cached: break
        }
        if recipients.isEmpty { return SyncEligibility(isReadyForSync: false, reason: .noRecipients) }
        if isDeclined { return SyncEligibility(isReadyForSync: true, reason: .declined) }
        if let signer = nextLocalSigner {
            return SyncEligibility(isReadyForSync: false, reason: .localSignerPending, nextLocalSigner: signer)
        }
        if isComplete { return SyncEligibility(isReadyForSync: true, reason: .allRecipientsDone) }
        return SyncEligibility(isReadyForSync: true, reason: localSignerHasSigned ? .localSignersDone : .onlyRemoteSignersPending)
    }

    /// What resuming an envelope in `state` should do.
    ///
    /// - Parameter state: The envelope's local state.
    /// - Returns: ``ResumeDecision/sign(_:)`` with the next local signer, or why there is none.
    public func resumeDecision(state: EnvelopeLocalState) -> ResumeDecision {
        let eligibility = syncEligibility(state: state)
        if let signer = eligibility.nextLocalSigner { return .sign(signer) }
        return eligibility.isReadyForSync ? .readyForSync(eligibility) : .notResumable(eligibility)
    }
}

extension Envelope {
    /// Moves ``localState`` by `event`, stamping ``lastModifiedAt``.
    ///
    /// - Parameters:
    ///   - event: What happened.
    ///   - time: When it happened.
    /// - Throws: ``LocalStateTransitionError`` when `event` is not allowed now (nothing changes).
    public mutating func apply(_ event: EnvelopeLocalEvent, at time: Date) throws(LocalStateTransitionError) {
        localState = try localState.apply(event)
        lastModifiedAt = time
    }

    /// Sync eligibility of this envelope in its current ``localState``, as seen by `user`.
    public func syncEligibility(user: SigningUser?) -> SyncEligibility {
        RoutingPlan(envelope: self, user: user).syncEligibility(state: localState)
    }

    /// What resuming this envelope should do, as seen by `user`.
    public func resumeDecision(user: SigningUser?) -> ResumeDecision {
        RoutingPlan(envelope: self, user: user).resumeDecision(state: localState)
    }
}
