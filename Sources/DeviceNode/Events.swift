import Foundation
import Synchronization

/// Whether an envelope was composed to sign on the device (offline) or online.
public enum SigningMode: String, Hashable, Sendable, Codable {
    /// Signed on this device; reaches the server by sync.
    case offline
    /// Composed while online; still goes through the outbox, so ordering and crash safety are the same.
    case online
}

/// A device node's notifications, mirroring the SDK's `DSMNotificationCodes` with typed fields.
///
/// Every envelope event carries ``EnvelopeIDs``, naming the local id, the transaction id and
/// (after sync) the server id separately.
///
/// New kinds of event will be added: a `switch` over an event needs a `default` (with Swift 6.2.3
/// or later the compiler asks for `@unknown default` outside this package; docs/embedding.md,
/// "Source stability").
///
/// ```swift
/// let events = node.events()          // subscribe before acting: each subscriber gets every event
/// for await event in events {
///     switch event {
///     case .syncSucceeded(let progress):
///         print("item \(progress.sequence) is on the server as \(progress.envelope.serverId ?? "?")")
///     case .envelopeCacheFailed(let failure):
///         print("not cached: \(failure.envelope?.localId ?? "?"): \(failure.error)")
///     default:
///         break
///     }
/// }
/// ```
#if hasAttribute(nonexhaustive)
@nonexhaustive
#endif
public enum DeviceEvent: Hashable, Sendable {
    /// Every current local signer signed (`DSMSigningCompletedNotification`).
    case signingCompleted(SigningCompleted)
    /// A signer cancelled ("finish later"), declined, or their session expired (`DSMSigningCancelledNotification`).
    case signingCancelled(SigningCancelled)
    /// Caching an envelope started (`DSMEnvelopeCachingStartedNotification`).
    case envelopeCachingStarted(EnvelopeIDs)
    /// An envelope was stored (`DSMEnvelopeCachedNotification`); `isUpdate` after a local signer's progress.
    case envelopeCached(EnvelopeCached)
    /// An envelope left the cache (`DSMEnvelopeUncachedNotification`).
    case envelopeUncached(EnvelopeUncached)
    /// Caching failed (`DSMEnvelopeCachingFailedNotification`).
    case envelopeCacheFailed(EnvelopeFailure)
    /// A template was stored (`DSMEnvelopeCachedNotification` with a template id).
    case templateCached(TemplateCached)
    /// An envelope entered the outbox with its sequence number.
    case envelopeQueuedForSync(EnvelopeQueued)
    /// A sync of one envelope started (`DSMEnvelopeSyncingStartedNotification`).
    case syncStarted(SyncProgress)
    /// The server accepted an envelope (`DSMEnvelopeSyncingSucceededNotification`).
    case syncSucceeded(SyncProgress)
    /// Syncing an envelope failed (`DSMEnvelopeSyncingFailedNotification`).
    case syncFailed(SyncProgress)
    /// A sync pass ended (`DSMEnvelopeSyncingEndedNotification`).
    case syncEnded(SyncSummary)
    /// Saving failed; nothing was half-written (`DSMSaveErrorNotification`-like).
    case saveError(EnvelopeFailure)
    /// Signing failed (`DSMSigningErrorNotification`-like).
    case signingError(EnvelopeFailure)
    /// The server has applied fewer of this device's items than the device holds receipts for (its
    /// store lost them): what the device sends again and what is lost (docs/sync.md).
    case serverBehind(ServerRegression)
    /// This store is behind the server (it lost its last commits): the server applied numbers it has
    /// no item for; new items are numbered after them.
    case storeBehindServer(StoreBehindServer)
    /// Pending items got new numbers, signed again, because the server holds other payloads under the old ones.
    case outboxRenumbered(OutboxRenumbering)
    /// A request the device sent to the server while online, outside the outbox (captive signing's
    /// recipient view and signing page), failed; the reason says why.
    case onlineSendFailed(OnlineSendFailed)

    /// The envelope ids the event concerns, if any.
    public var envelope: EnvelopeIDs? {
        switch self {
        case .signingCompleted(let e): return e.envelope
        case .signingCancelled(let e): return e.envelope
        case .envelopeCachingStarted(let ids): return ids
        case .envelopeCached(let e): return e.envelope
        case .envelopeUncached(let e): return e.envelope
        case .envelopeCacheFailed(let e), .saveError(let e), .signingError(let e): return e.envelope
        case .envelopeQueuedForSync(let e): return e.envelope
        case .syncStarted(let e), .syncSucceeded(let e), .syncFailed(let e): return e.envelope
        case .onlineSendFailed(let e): return e.envelope
        case .templateCached, .syncEnded, .serverBehind, .storeBehindServer, .outboxRenumbered: return nil
        }
    }
}

/// Fields of ``DeviceEvent/signingCompleted(_:)``.
public struct SigningCompleted: Hashable, Sendable {
    /// Creates the event fields.
    public init(envelope: EnvelopeIDs, recipientIds: [String], signingMode: SigningMode, sequence: UInt64?) {
        self.envelope = envelope
        self.recipientIds = recipientIds
        self.signingMode = signingMode
        self.sequence = sequence
    }

    /// The envelope.
    public var envelope: EnvelopeIDs
    /// The recipients who signed in this session, in order.
    public var recipientIds: [String]
    /// How the envelope was composed.
    public var signingMode: SigningMode
    /// The outbox sequence, when the envelope is now ready for sync.
    public var sequence: UInt64?
}

/// Fields of ``DeviceEvent/signingCancelled(_:)``.
public struct SigningCancelled: Hashable, Sendable {
    /// Creates the event fields.
    public init(
        envelope: EnvelopeIDs, recipientId: String, exitReason: SigningExitReason, signingMode: SigningMode, declineReason: String? = nil,
        details: String? = nil
    ) {
        self.envelope = envelope
        self.recipientId = recipientId
        self.exitReason = exitReason
        self.signingMode = signingMode
        self.declineReason = declineReason
        self.details = details
    }

    /// The envelope.
    public var envelope: EnvelopeIDs
    /// The recipient who stopped.
    public var recipientId: String
    /// Cancel ("finish later"), decline or token expired.
    public var exitReason: SigningExitReason
    /// How the envelope was composed.
    public var signingMode: SigningMode
    /// The decline reason, with ``SigningExitReason/decline``.
    public var declineReason: String?
    /// What went wrong, with ``SigningExitReason/exception`` (the SDK's additional details), e.g.
    /// that no unique recipient has the client user id.
    public var details: String?
}

/// Fields of ``DeviceEvent/envelopeCached(_:)``.
public struct EnvelopeCached: Hashable, Sendable {
    /// Creates the event fields.
    public init(envelope: EnvelopeIDs, isUpdate: Bool, templateId: String? = nil) {
        self.envelope = envelope
        self.isUpdate = isUpdate
        self.templateId = templateId
    }

    /// The envelope.
    public var envelope: EnvelopeIDs
    /// `false` on compose; `true` when a local signer's progress was saved.
    public var isUpdate: Bool
    /// The template it was composed from.
    public var templateId: String?
}

/// Fields of ``DeviceEvent/envelopeUncached(_:)``.
public struct EnvelopeUncached: Hashable, Sendable {
    /// Creates the event fields.
    public init(envelope: EnvelopeIDs, reason: Reason) {
        self.envelope = envelope
        self.reason = reason
    }

    /// Why the envelope left the cache: an open set of values (compare with `==`; more may be added).
    public struct Reason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable name, e.g. `"synced"`.
        public let rawValue: String
        /// A reason by its stable name.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Removed by the integrator.
        public static let removed = Reason(rawValue: "removed")
        /// Synced: the server has it; a receipt is kept.
        public static let synced = Reason(rawValue: "synced")
        /// The server rejected it for good; the outbox item keeps its payload for inspection.
        public static let rejected = Reason(rawValue: "rejected")
        /// Dropped by a forced logout.
        public static let logout = Reason(rawValue: "logout")
    }
    /// The envelope.
    public var envelope: EnvelopeIDs
    /// Why.
    public var reason: Reason
}

/// Fields of failure events.
public struct EnvelopeFailure: Hashable, Sendable {
    /// Creates the event fields.
    public init(envelope: EnvelopeIDs?, recipientId: String? = nil, signingMode: SigningMode? = nil, error: DeviceNodeError) {
        self.envelope = envelope
        self.recipientId = recipientId
        self.signingMode = signingMode
        self.error = error
    }

    /// The envelope, when the failure concerns one.
    public var envelope: EnvelopeIDs?
    /// The recipient, when the failure concerns one.
    public var recipientId: String?
    /// How the envelope was composed, when known.
    public var signingMode: SigningMode?
    /// The error.
    public var error: DeviceNodeError
}

/// Fields of ``DeviceEvent/templateCached(_:)``.
public struct TemplateCached: Hashable, Sendable {
    /// Creates the event fields.
    public init(templateId: String, cachedAt: Date, isUpdate: Bool) {
        self.templateId = templateId
        self.cachedAt = cachedAt
        self.isUpdate = isUpdate
    }

    /// The template id.
    public var templateId: String
    /// When it was cached.
    public var cachedAt: Date
    /// Whether it replaced an older cached copy.
    public var isUpdate: Bool
}

/// Fields of ``DeviceEvent/envelopeQueuedForSync(_:)``.
public struct EnvelopeQueued: Hashable, Sendable {
    /// Creates the event fields.
    public init(envelope: EnvelopeIDs, sequence: UInt64) {
        self.envelope = envelope
        self.sequence = sequence
    }

    /// The envelope.
    public var envelope: EnvelopeIDs
    /// Its outbox sequence number.
    public var sequence: UInt64
}

/// Fields of the per-envelope sync events.
public struct SyncProgress: Hashable, Sendable {
    /// The envelope; ``EnvelopeIDs/serverId`` is set on success.
    public var envelope: EnvelopeIDs
    /// The outbox sequence number.
    public var sequence: UInt64
    /// The failure, with ``DeviceEvent/syncFailed(_:)``.
    public var error: String?
    /// With ``DeviceEvent/syncFailed(_:)``: whether the item stays queued and will be retried
    /// (`false` when the server rejected it for good).
    public var willRetry: Bool

    /// Creates sync progress.
    public init(envelope: EnvelopeIDs, sequence: UInt64, error: String? = nil, willRetry: Bool = false) {
        self.envelope = envelope
        self.sequence = sequence
        self.error = error
        self.willRetry = willRetry
    }
}

/// Fields of ``DeviceEvent/syncEnded(_:)``.
public struct SyncSummary: Hashable, Sendable {
    /// Items pushed in the pass.
    public var attempted: Int
    /// Items the server applied (or had applied before).
    public var succeeded: Int
    /// Items that failed or were rejected.
    public var failed: Int
    /// Items still queued after the pass.
    public var remaining: Int

    /// Creates a summary.
    public init(attempted: Int, succeeded: Int, failed: Int, remaining: Int) {
        self.attempted = attempted
        self.succeeded = succeeded
        self.failed = failed
        self.remaining = remaining
    }
}

/// Hands every event to every subscriber, each through its own `AsyncStream`.
///
/// A subscriber sees the events published after it subscribed, in order. Ending iteration (or
/// dropping the stream) unsubscribes.
final class EventBroadcaster: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<DeviceEvent>.Continuation] = [:]
        var nextId: UInt64 = 0
        var finished = false
    }
    private let state = Mutex(State())
    private let bufferLimit: Int

    init(bufferLimit: Int) {
        self.bufferLimit = bufferLimit
    }

    func subscribe() -> AsyncStream<DeviceEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DeviceEvent.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            state.nextId += 1
            state.subscribers[state.nextId] = continuation
            return state.nextId
        }
        guard let id else {
            // Subscribing to a closed node: the stream ends at once.
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ event: DeviceEvent) {
        // Yield outside the lock: onTermination may run synchronously and take it.
        let targets = state.withLock { Array($0.subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
