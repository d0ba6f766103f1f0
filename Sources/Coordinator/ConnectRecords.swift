import Foundation
import GRDB

// What the coordinator keeps for Connect (docs/webhooks.md): the account's configurations, its
// HMAC keys, and the outbox of deliveries — one row per (event, configuration), written in the
// transaction of the change the event reports.

/// One Connect configuration of an account: where to POST which events, with what data.
package struct ConnectConfigurationRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "connectConfiguration"
    package var id: String
    package var accountID: String
    package var name: String
    /// The listener's URL (http or https, checked against the account's allow-list when set).
    package var url: String
    /// The event names it asks for, each between commas (`,envelope-sent,recipient-completed,`),
    /// so the outbox's fan-out finds one with a substring search in SQL.
    package var events: String
    /// What `data.envelopeSummary` carries besides the envelope itself, comma-separated:
    /// `recipients`, `tabs`, `documents`, `custom_fields`.
    package var includeData: String
    /// `allowEnvelopePublish`: whether events are written for it at all.
    package var enabled: Bool
    /// Whether deliveries are signed with the account's Connect HMAC keys.
    package var includeHMAC: Bool
    package var createdAt: Date
    /// Set for an envelope's own `eventNotification`: only that envelope's events; nil: the account's.
    package var envelopeID: String?

    package init(
        id: String, accountID: String, name: String, url: String, events: [EnvelopeEvent.Kind], includeData: [String], enabled: Bool,
        includeHMAC: Bool, createdAt: Date, envelopeID: String? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.name = name
        self.url = url
        self.events = events.isEmpty ? "" : "," + events.map(\.rawValue).joined(separator: ",") + ","
        self.includeData = includeData.joined(separator: ",")
        self.enabled = enabled
        self.includeHMAC = includeHMAC
        self.createdAt = createdAt
        self.envelopeID = envelopeID
    }

    package var eventKinds: [EnvelopeEvent.Kind] {
        events.split(separator: ",").compactMap { EnvelopeEvent.Kind(rawValue: String($0)) }
    }

    package var includeDataList: [String] { includeData.split(separator: ",").map(String.init) }
}

/// One Connect HMAC key of an account: every delivery of a configuration with HMAC on is signed
/// with each of the account's active keys (`X-DocuSign-Signature-1`, `-2`, …), so a key can be
/// rotated with two active at once.
package struct ConnectKeyRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "connectKey"
    package var id: String
    package var accountID: String
    /// The key as the listener configures it: 32 random bytes, base64.
    package var secret: String
    package var createdAt: Date
    package var revokedAt: Date?

    package init(id: String, accountID: String, secret: String, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.accountID = accountID
        self.secret = secret
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// One event to deliver to one configuration: the Connect outbox's row.
package struct ConnectDeliveryRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "connectDelivery"
    /// Increasing in commit order per envelope: an envelope's events are delivered by it.
    package var id: Int64
    package var configurationID: String
    package var accountID: String
    package var envelopeID: String
    /// An ``EnvelopeEvent/Kind`` raw value.
    package var event: String
    package var recipientID: String?
    package var occurredAt: Date
    package var recordedAt: Date
    /// Whether it is its envelope's oldest undelivered event for its configuration: only such a
    /// row may be claimed. Set when written (no earlier one waits) or when the one before it ends.
    package var ready: Bool
    /// Attempts made so far (the body's `retryCount` is this number at the attempt).
    package var attempts: Int
    /// Not before this time (the back-off after a failed attempt).
    package var nextAttemptAt: Date
    /// A coordinator delivering it holds it until then; after that another may take it over.
    package var claimedUntil: Date?
    /// The claim's own token: an outcome is recorded only by the claim that still holds the row,
    /// so a coordinator whose claim lapsed cannot undo its successor's.
    package var claimToken: String?
    /// When the last attempt ended.
    package var lastAttemptAt: Date?
    package var deliveredAt: Date?
    /// Set when the attempts ran out: a failure record (`GET …/connect/failures`).
    package var failedAt: Date?
    package var lastError: String?

    package init(
        id: Int64, configurationID: String, accountID: String, envelopeID: String, event: String, recipientID: String?, occurredAt: Date,
        recordedAt: Date, ready: Bool = true, attempts: Int, nextAttemptAt: Date, claimedUntil: Date?, claimToken: String? = nil, lastAttemptAt: Date? = nil,
        deliveredAt: Date?, failedAt: Date?, lastError: String?
    ) {
        self.id = id
        self.configurationID = configurationID
        self.accountID = accountID
        self.envelopeID = envelopeID
        self.event = event
        self.recipientID = recipientID
        self.occurredAt = occurredAt
        self.recordedAt = recordedAt
        self.ready = ready
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.claimedUntil = claimedUntil
        self.claimToken = claimToken
        self.lastAttemptAt = lastAttemptAt
        self.deliveredAt = deliveredAt
        self.failedAt = failedAt
        self.lastError = lastError
    }
}

extension ConnectDeliveryRecord {
    /// Read by column, not through `Decodable`: a claim reads hundreds of rows a second, and
    /// GRDB's keyed decoding of each cost more than the claim's SQL (loadtests/NOTES.md).
    package init(row: Row) throws {
        self.init(
            id: try row.decode(forColumn: "id"), configurationID: try row.decode(forColumn: "configurationID"),
            accountID: try row.decode(forColumn: "accountID"), envelopeID: try row.decode(forColumn: "envelopeID"),
            event: try row.decode(forColumn: "event"), recipientID: try row.decode(forColumn: "recipientID"),
            occurredAt: try row.decode(forColumn: "occurredAt"), recordedAt: try row.decode(forColumn: "recordedAt"),
            ready: try row.decode(forColumn: "ready"), attempts: try row.decode(forColumn: "attempts"),
            nextAttemptAt: try row.decode(forColumn: "nextAttemptAt"), claimedUntil: try row.decode(forColumn: "claimedUntil"),
            claimToken: try row.decode(forColumn: "claimToken"), lastAttemptAt: try row.decode(forColumn: "lastAttemptAt"),
            deliveredAt: try row.decode(forColumn: "deliveredAt"), failedAt: try row.decode(forColumn: "failedAt"),
            lastError: try row.decode(forColumn: "lastError"))
    }
}

/// Connect deliveries not yet delivered and failure records, in every account (`GET /status`).
public struct ConnectDeliveryCounts: Sendable, Hashable, Codable {
    /// Events waiting for a 2xx (due now, backing off, or in flight).
    public var pending: Int
    /// Failure records: events whose attempts ran out.
    public var failed: Int

    public init(pending: Int, failed: Int) {
        self.pending = pending
        self.failed = failed
    }
}

/// How one delivery attempt ended.
package enum ConnectAttemptOutcome: Sendable, Hashable {
    /// The listener answered 2xx.
    case delivered(at: Date)
    /// The attempt ended at `at` without a 2xx; try again at `next` (back-off). `error` says what went wrong.
    case retry(next: Date, at: Date, error: String)
    /// Attempts exhausted (or the configuration is gone): a failure record.
    case failed(at: Date, error: String)
    /// Not attempted: the claim is given back (the listener had its share in flight).
    case released

    /// Whether the row is done with (delivered or a failure record): its envelope's next event may go.
    package var ends: Bool {
        switch self {
        case .delivered, .failed: true
        case .retry, .released: false
        }
    }
}

/// One attempt's outcome to record under the claim it was made under.
package struct ConnectOutcomeRecord: Sendable, Hashable {
    package var id: Int64
    package var token: String
    package var outcome: ConnectAttemptOutcome
    /// Until when the claim holds the row (the publisher's bookkeeping; the store ignores it).
    package var heldUntil: Date?

    package init(id: Int64, token: String, _ outcome: ConnectAttemptOutcome, heldUntil: Date? = nil) {
        self.id = id
        self.token = token
        self.outcome = outcome
        self.heldUntil = heldUntil
    }
}

/// What a claim asks for: up to `limit` due deliveries at `now`, each held until `claimUntil`
/// under `token`; at most `perConfiguration` of one configuration counting the `held` ones the
/// caller already has of it (a configuration with its share held is left out).
package struct ConnectClaimRequest: Sendable {
    package var now: Date
    package var claimUntil: Date
    package var limit: Int
    package var perConfiguration: Int
    package var held: [String: Int]
    package var token: String

    package init(now: Date, claimUntil: Date, limit: Int, perConfiguration: Int, held: [String: Int] = [:], token: String) {
        self.now = now
        self.claimUntil = claimUntil
        self.limit = limit
        self.perConfiguration = perConfiguration
        self.held = held
        self.token = token
    }

    /// The configurations with no room left: the claim's query skips them.
    package var full: [String] { held.filter { $0.value >= perConfiguration }.keys.sorted() }

    /// The due `rows` (id order) this claim takes: each configuration up to its room, `limit` in all.
    package func take(_ rows: [ConnectDeliveryRecord]) -> [ConnectDeliveryRecord] {
        var counts = held
        var out: [ConnectDeliveryRecord] = []
        for row in rows where out.count < limit && counts[row.configurationID, default: 0] < perConfiguration {
            counts[row.configurationID, default: 0] += 1
            out.append(row)
        }
        return out
    }
}

/// Where pruning stops: the first outbox id whose row was recorded at or after the cutoff, found
/// by a binary search over ids (which grow with time) — a few probes, each "the first row from
/// this id on", however long the outbox. Ids only roughly follow the clock (several coordinators,
/// a clock that jumped), so the prune checks each row's time as well; this bounds its walk.
package struct ConnectPruneBoundary: Sendable {
    let cutoff: Date
    private var low: Int64
    private var high: Int64

    /// - Parameter maxID: the outbox's highest id (nil when it is empty).
    package init(cutoff: Date, maxID: Int64?) {
        self.cutoff = cutoff
        low = 0
        high = (maxID ?? -1) + 1
    }

    /// The id to probe next (the first row from it on); nil once the search is done.
    package var probe: Int64? { low < high ? low + (high - low) / 2 : nil }

    /// What the probe found: the time of the first row from ``probe`` on, nil when none.
    package mutating func found(_ recordedAt: Date?) {
        guard let middle = probe else { return }
        if let recordedAt, recordedAt < cutoff { low = middle + 1 } else { high = middle }
    }

    /// Rows below this id may be pruned (each still checked against the cutoff).
    package var boundary: Int64 { low }
}

/// What one settling transaction did: the outcomes it recorded (a lapsed claim's is not) and
/// the deliveries it claimed.
package struct ConnectSettlement: Sendable {
    package var recorded: Set<Int64> = []
    package var claimed: [ConnectDeliveryRecord] = []

    package init(recorded: Set<Int64> = [], claimed: [ConnectDeliveryRecord] = []) {
        self.recorded = recorded
        self.claimed = claimed
    }
}

extension CoordinatorStorage {
    /// Claims due deliveries alone (``settleConnectDeliveries(_:claim:)`` with no outcomes).
    package func claimConnectDeliveries(
        now: Date, claimUntil: Date, limit: Int, perConfiguration: Int, excluding: Set<String>, token: String
    ) async throws -> [ConnectDeliveryRecord] {
        let held = Dictionary(uniqueKeysWithValues: excluding.map { ($0, perConfiguration) })
        let request = ConnectClaimRequest(
            now: now, claimUntil: claimUntil, limit: limit, perConfiguration: perConfiguration, held: held, token: token)
        return try await settleConnectDeliveries([], claim: request).claimed
    }

    /// Records one outcome alone (``settleConnectDeliveries(_:claim:)`` with no claim).
    /// - Returns: false when the claim no longer holds the row (it lapsed and another took it over): nothing recorded.
    @discardableResult
    package func finishConnectDelivery(id: Int64, token: String, _ outcome: ConnectAttemptOutcome) async throws -> Bool {
        try await settleConnectDeliveries([ConnectOutcomeRecord(id: id, token: token, outcome)], claim: nil).recorded.contains(id)
    }
}
