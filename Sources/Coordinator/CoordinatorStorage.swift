import Crypto
import FleetProtocol
import Foundation

/// What the coordinator keeps, behind one seam (docs/storage.md): ``CoordinatorStore`` on SQLite,
/// the embedded default, and `PostgresCoordinatorStore` (module CoordinatorPostgres) for
/// coordinators that share a database. One conformance suite runs against both.
///
/// Each requirement is one transaction. The rules stay in the services: where a decision needs
/// what the transaction reads (an enrollment, an ingest walk, a template edit), the service passes
/// it as a synchronous closure that the store runs inside its transaction, on what it read, and
/// the store writes what the closure returns. So both stores apply the very same rules and only
/// the SQL differs.
package protocol CoordinatorStorage: AnyObject, Sendable {
    /// Where the store is, for logs and `GET /status` (a file path, or a URL without its password).
    var location: String { get }
    /// Disk faults of the store's writes.
    var faults: StoreFaultMonitor { get }
    /// Devices whose receipts reach further than this store.
    var regressions: StoreRegressionMonitor { get }

    // MARK: Accounts, users, tokens

    /// - Throws: ``StoreRefusal/accountExists(_:)``.
    func insertAccount(_ account: AccountRecord) async throws
    /// - Throws: ``StoreRefusal/noAccount(_:)``, ``StoreRefusal/emailTaken(_:)``.
    func insertUser(_ user: UserRecord) async throws
    func account(id: String) async throws -> AccountRecord?
    /// All accounts, by name.
    func accounts() async throws -> [AccountRecord]
    /// An account's users, by email.
    func users(accountID: String) async throws -> [UserRecord]
    /// Finds the user with `email` (case-insensitive), lets `make` check the secret and make the
    /// token, stores it and drops the tokens that expired before it was issued.
    func issueToken(email: String, _ make: @escaping @Sendable (UserRecord?) throws -> AccessTokenRecord) async throws
    /// The token with this hash, its user and the user's account (nil when any is gone).
    func tokenOwner(tokenHash: Data) async throws -> TokenOwner?

    // MARK: Devices

    /// Reads what an enrollment depends on, lets `decide` rule, and stores its change.
    /// - Returns: the device row as stored.
    func enroll(
        accountID: String, deviceID: String, curveKey: Data?, _ decide: @escaping @Sendable (EnrollmentFacts) throws -> EnrollmentChange
    ) async throws -> DeviceRecord
    /// The device `id` of `accountID`, if any.
    func device(accountID: String, id: String) async throws -> DeviceRecord?
    /// The device bound to this CURVE key, if any.
    func device(curveKey: Data) async throws -> DeviceRecord?
    /// Devices with this id, in any account, at most `limit`, by account.
    func devices(id: String, limit: Int) async throws -> [DeviceRecord]
    /// Revokes the device `id` (of `accountID`, or of the one account that has it) at `at`.
    func revokeDevice(id: String, accountID: String?, at: Date) async throws -> DeviceRevocation

    // MARK: Sync

    /// Applies pushes in one transaction, each in its own savepoint, in order (group commit):
    /// a push sees the effects of the pushes before it; a push that throws changes nothing and
    /// gets its error; if the transaction fails every push gets that error.
    func ingest(_ pushes: [IngestPush]) async throws -> [Result<SyncAck, any Error>]
    /// One page of a device's stored results after `after`: at most `limit` rows, and whether more follow.
    func syncResults(accountID: String, deviceID: String, after: Int64, limit: Int) async throws -> SyncResultsPage

    // MARK: Envelopes

    /// An envelope and its recipients (by routing order, then id); nil when there is none in
    /// `accountID` (any account when nil).
    func envelope(id: String, accountID: String?) async throws -> EnvelopeAggregate?
    /// Loads an envelope and its recipients, lets `change` edit them, stores the envelope's status
    /// and void reason and every recipient's status, reason and change time.
    /// - Throws: ``StoreRefusal/noEnvelope(_:inAccount:)`` when there is no such envelope.
    func updateEnvelope<T: Sendable>(
        id: String, accountID: String?, _ change: @escaping @Sendable (inout EnvelopeAggregate) throws -> T
    ) async throws -> T
    /// One page of the ids of `accountID`'s envelopes created or with a recipient whose status changed
    /// at or after `changedSince`, with one of `statuses` (any when empty), oldest first (by creation,
    /// then id); and how many match in all (the REST API's list of status changes).
    func envelopeIDs(accountID: String, changedSince: Date, statuses: [String], search: String?, start: Int, count: Int) async throws -> (total: Int, page: [String])
    /// Keeps a REST draft. - Throws: ``StoreRefusal/noAccount(_:)`` for an unknown account.
    func insertDraft(_ draft: RESTDraftRecord) async throws
    /// The account's draft with this id, if any.
    func draft(id: String, accountID: String) async throws -> RESTDraftRecord?
    /// Removes the account's draft with this id; false when there was none (another request took it).
    func deleteDraft(id: String, accountID: String) async throws -> Bool
    /// What each enrolled device has synced (envelope sequences, rejected items).
    func envelopeSummaries() async throws -> [DeviceEnvelopeSummary]
    /// Enrolled devices, envelopes and stored results by outcome.
    func counts() async throws -> StoreCounts

    // MARK: Templates

    /// One page of an account's templates matching `filter`, by name (case-insensitive) then id,
    /// without their definitions, and how many match in all.
    func templates(accountID: String, filter: TemplateFilter, start: Int, count: Int) async throws -> (total: Int, page: [TemplateRecord])
    /// - Throws: ``StoreRefusal/noAccount(_:)``, ``StoreRefusal/templateExists(_:)``.
    func insertTemplate(_ template: TemplateRecord) async throws
    func template(accountID: String, id: String) async throws -> TemplateRecord?
    /// Whether any account has a template with this id (ids are unique across accounts).
    func templateExists(id: String) async throws -> Bool
    /// Loads a template, lets `change` edit it and stores it, with a `template-modified` event
    /// in the Connect outbox (in the same transaction: it happened at the new `lastModified`, and
    /// was recorded `at`).
    /// - Returns: nil when the account has no such template (nothing stored).
    func updateTemplate<T: Sendable>(
        accountID: String, id: String, at: Date, _ change: @escaping @Sendable (inout TemplateRecord) throws -> T
    ) async throws -> T?

    // MARK: Captive signing

    /// Loads the envelope (of `accountID`; any account when nil) and its account's allowed return
    /// origins, lets `make` build the session (or refuse), and stores it.
    /// - Throws: ``StoreRefusal/noEnvelope(_:inAccount:)`` when there is no such envelope.
    func insertCaptiveSession(
        envelopeID: String, accountID: String?,
        _ make: @escaping @Sendable (EnvelopeAggregate, _ allowedOrigins: [String]) throws -> CaptiveSessionRecord
    ) async throws -> CaptiveSessionRecord
    /// The session with this token hash and its envelope, or nil.
    func captiveSession(tokenHash: Data) async throws -> CaptiveUnit?
    /// Loads the session with this token hash and its envelope, lets `change` edit both and list
    /// tab values to store, then stores the session, the envelope's lifecycle state and the tabs
    /// (a tab replaces the one of the same envelope and index). `change` gets nil for an unknown
    /// token, and then nothing is stored.
    func updateCaptiveSession<T: Sendable>(tokenHash: Data, _ change: @escaping @Sendable (inout CaptiveUnit?) throws -> T) async throws -> T
    /// The tab values stored for an envelope, by tab index.
    func captiveTabs(envelopeID: String) async throws -> [CaptiveTabRecord]

    // MARK: Return origins, transport key

    /// An account's allowed return-URL origins, sorted.
    func returnOrigins(accountID: String) async throws -> [String]
    /// Adds and removes origins of an account's allow-list; returns the list.
    /// - Throws: ``StoreRefusal/noAccount(_:)``.
    func changeReturnOrigins(accountID: String, add: [String], remove: [String]) async throws -> [String]
    /// The coordinator's CURVE secret key, made by `generate` and stored on first use.
    func transportSecretKey(_ generate: @escaping @Sendable () throws -> Data) async throws -> Data

    // MARK: OAuth integration keys and consent (docs/rest-api.md, "Authentication")

    /// Registers an integration key.
    /// - Throws: ``StoreRefusal/noAccount(_:)``.
    func insertIntegrationKey(_ key: IntegrationKeyRecord) async throws
    /// One integration key, revoked or not.
    func integrationKey(id: String) async throws -> IntegrationKeyRecord?
    /// An account's integration keys (every account's when `nil`), oldest first.
    func integrationKeys(accountID: String?) async throws -> [IntegrationKeyRecord]
    /// Marks a key revoked; `false` when there is no such key in the account (or it was revoked).
    func revokeIntegrationKey(id: String, accountID: String, at: Date) async throws -> Bool
    /// Records (or renews) a user's consent to an integration key acting for them.
    func grantConsent(_ consent: ConsentRecord) async throws
    /// A user's consent to an integration key, if given.
    func consent(integrationKeyID: String, userID: String) async throws -> ConsentRecord?
    /// Keeps an authorization code, first forgetting every code that expired before `purgeBefore`.
    func insertAuthorizationCode(_ code: AuthorizationCodeRecord, purgeBefore: Date) async throws
    /// Takes an authorization code out of the store (expired or not): a code is redeemed at most
    /// once, even by two coordinators on one PostgreSQL racing for it. `nil` when it is not there.
    func redeemAuthorizationCode(codeHash: Data) async throws -> AuthorizationCodeRecord?

    // MARK: Connect (docs/webhooks.md)

    /// - Throws: ``StoreRefusal/noAccount(_:)``.
    func insertConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws
    /// An account's configurations, oldest first (not envelopes' own `eventNotification`s).
    func connectConfigurations(accountID: String) async throws -> [ConnectConfigurationRecord]
    /// One configuration of `accountID` (of any account when nil).
    func connectConfiguration(id: String, accountID: String?) async throws -> ConnectConfigurationRecord?
    /// Replaces a configuration (same id and account); false when there is none.
    func replaceConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws -> Bool
    /// Deletes a configuration and its undelivered events; false when there was none.
    func deleteConnectConfiguration(id: String, accountID: String) async throws -> Bool
    /// - Throws: ``StoreRefusal/noAccount(_:)``.
    func insertConnectKey(_ key: ConnectKeyRecord) async throws
    /// An account's HMAC keys, revoked ones too, oldest first.
    func connectKeys(accountID: String) async throws -> [ConnectKeyRecord]
    /// Marks a key revoked; false when the account has no such active key.
    func revokeConnectKey(id: String, accountID: String, at: Date) async throws -> Bool
    /// Records `outcomes`, each under the claim it names (a lapsed claim's outcome is not
    /// recorded), makes ready the next event of each envelope whose delivery ended, then claims
    /// what `claim` asks for: due deliveries, each the oldest undelivered event of its envelope for
    /// its configuration (an envelope's next event waits for the one before it), not claimed by
    /// anyone until after `claim.now`. All in one write transaction, so a busy publisher pays one
    /// turn of the writer for a batch of outcomes and its next claims. Two coordinators on one
    /// PostgreSQL never claim the same row at once.
    func settleConnectDeliveries(_ outcomes: [ConnectOutcomeRecord], claim: ConnectClaimRequest?) async throws -> ConnectSettlement
    /// Deletes up to `limit` of the oldest ended rows (delivered, or failure records) that were
    /// recorded before `cutoff`, walking the outbox in id order no further than its first row
    /// recorded since (``ConnectPruneBoundary``, found in a read), so a round costs about what it
    /// deletes. Pending rows are never deleted.
    /// - Returns: how many were deleted.
    func pruneConnectDeliveries(recordedBefore cutoff: Date, limit: Int) async throws -> Int
    /// An account's deliveries, newest first, at most `limit`: only failure records when `failedOnly`.
    func connectDeliveries(accountID: String, failedOnly: Bool, limit: Int) async throws -> [ConnectDeliveryRecord]
    /// Deliveries not yet delivered nor failed, and failure records, in every account (`GET /status`).
    func connectDeliveryCounts() async throws -> ConnectDeliveryCounts

    // MARK: The checker's snapshot

    /// What the fleet checker judges, read in one read-only transaction (a consistent cut):
    /// ``CoordinatorSnapshot``. `payloads` is called once per envelope, in
    /// ``CoordinatorSnapshot/envelopes`` order, with its signed bytes, while the store reads them.
    func checkerSnapshot(payloads: @escaping @Sendable (CoordinatorSnapshot.Payload) -> Void) async throws -> CoordinatorSnapshot
}

extension CoordinatorStorage {
    /// The snapshot without looking at the payloads.
    package func checkerSnapshot() async throws -> CoordinatorSnapshot {
        try await checkerSnapshot(payloads: { _ in })
    }
}

/// The refusals a store itself decides (a key or a unique value taken), worded once for both stores.
package enum StoreRefusal {
    package static func accountExists(_ id: String) -> FleetError {
        FleetError(.alreadyExists, "an account with id \"\(id)\" already exists")
    }
    package static func noAccount(_ id: String) -> FleetError { FleetError(.notFound, "no account \"\(id)\"") }
    package static func emailTaken(_ email: String) -> FleetError {
        FleetError(.alreadyExists, "a user with email \"\(email)\" already exists")
    }
    package static func templateExists(_ id: String) -> FleetError {
        FleetError(.invalidRequest, "a template with id '\(id)' already exists; choose another id")
    }
    package static func noEnvelope(_ id: String, inAccount accountID: String?) -> FleetError {
        FleetError(.notFound, accountID == nil ? "no envelope \"\(id)\"" : "no envelope \"\(id)\" in this account")
    }
}

/// An access token with its user and the user's account, as ``CoordinatorStorage/tokenOwner(tokenHash:)`` reads them.
package struct TokenOwner: Sendable {
    package var token: AccessTokenRecord
    package var user: UserRecord?
    package var account: AccountRecord?

    package init(token: AccessTokenRecord, user: UserRecord?, account: AccountRecord?) {
        self.token = token
        self.user = user
        self.account = account
    }
}

/// What an enrollment's decision reads, in its transaction.
package struct EnrollmentFacts: Sendable {
    /// The device already bound to the request's CURVE key (nil under plain TCP or when unbound).
    package var keyHolder: DeviceRecord?
    /// Whether another account has a device with this id.
    package var idInOtherAccount: Bool
    /// The device with this id in this account.
    package var existing: DeviceRecord?

    package init(keyHolder: DeviceRecord?, idInOtherAccount: Bool, existing: DeviceRecord?) {
        self.keyHolder = keyHolder
        self.idInOtherAccount = idInOtherAccount
        self.existing = existing
    }
}

/// What an enrollment's decision stores.
package enum EnrollmentChange: Sendable {
    /// A new device row.
    case insert(DeviceRecord)
    /// The existing row with new keys (after a revocation).
    case replace(DeviceRecord)
    /// Nothing: the enrollment is confirmed as it is.
    case keep(DeviceRecord)
}

/// What ``CoordinatorStorage/revokeDevice(id:accountID:at:)`` did.
package enum DeviceRevocation: Sendable, Equatable {
    /// Revoked (or already revoked) in this account.
    case revoked(accountID: String)
    case notFound
    /// Several accounts have the id and none was named.
    case ambiguous(accounts: [String])
}

/// A page of ``CoordinatorStorage/syncResults(accountID:deviceID:after:limit:)``.
package struct SyncResultsPage: Sendable {
    /// The device's last applied sequence, read in the same transaction.
    package var lastApplied: Int64
    package var rows: [Row]
    /// Whether results follow the page.
    package var more: Bool

    package struct Row: Sendable, Equatable {
        package var sequence: Int64
        package var outcome: String
        package var envelopeID: String?
        package var reason: String?
        /// The envelope's transaction id, when the row names an envelope.
        package var transactionID: String?
        /// The envelope's sequence, when that envelope came from this same device.
        package var envelopeSequence: Int64?

        package init(
            sequence: Int64, outcome: String, envelopeID: String?, reason: String?, transactionID: String?, envelopeSequence: Int64?
        ) {
            self.sequence = sequence
            self.outcome = outcome
            self.envelopeID = envelopeID
            self.reason = reason
            self.transactionID = transactionID
            self.envelopeSequence = envelopeSequence
        }
    }

    package init(lastApplied: Int64, rows: [Row], more: Bool) {
        self.lastApplied = lastApplied
        self.rows = rows
        self.more = more
    }
}

/// An envelope with its recipients: the unit ``EnvelopeLifecycle`` events change.
package struct EnvelopeAggregate: Sendable {
    package var envelope: EnvelopeRecord
    /// By routing order, then recipient id.
    package var recipients: [EnvelopeRecipientRecord]
    /// What this change did to the envelope (``EnvelopeEvent/between(_:_:at:)``), appended by the
    /// service that made it; the store writes them to the Connect outbox in the same transaction.
    package var events: [EnvelopeEvent] = []

    package init(envelope: EnvelopeRecord, recipients: [EnvelopeRecipientRecord]) {
        self.envelope = envelope
        self.recipients = recipients
    }
}

/// A signing URL's session with its envelope: what a captive-signing step reads and changes.
package struct CaptiveUnit: Sendable {
    package var session: CaptiveSessionRecord
    /// Nil when the envelope is gone (deleting an envelope deletes its sessions, so only a damaged store has this).
    package var envelope: EnvelopeAggregate?
    /// Tab values to store with this step.
    package var newTabs: [CaptiveTabRecord] = []

    package init(session: CaptiveSessionRecord, envelope: EnvelopeAggregate?) {
        self.session = session
        self.envelope = envelope
    }

    /// The envelope, or the refusal for a session whose envelope is gone.
    package func requireEnvelope() throws -> EnvelopeAggregate {
        guard let envelope else { throw StoreRefusal.noEnvelope(session.envelopeID, inAccount: session.accountID) }
        return envelope
    }
}

/// How `templates.list` matches names; both stores compare case-insensitively (ASCII letters).
package struct TemplateFilter: Sendable, Hashable {
    /// Empty: any name.
    package var text: String
    package var match: NameMatch
    /// Nil: any folder; otherwise the folder, case-insensitive.
    package var folder: String?

    package init(text: String, match: NameMatch, folder: String?) {
        self.text = text
        self.match = match
        self.folder = folder
    }

    /// The SQL `LIKE` pattern for the name (with `\` as the escape character), or nil for an exact match or no text.
    package var likePattern: String? {
        guard !text.isEmpty, match != .exact else { return nil }
        return Self.likePattern(containing: text, match: match)
    }

    /// `text` as a LIKE pattern with `\` escaping `%`, `_` and `\` (for `ESCAPE '\'`).
    package static func likePattern(containing text: String, match: NameMatch = .contains) -> String? {
        var escaped = ""
        for character in text {
            if character == "%" || character == "_" || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        switch match {
        case .exact: return nil
        case .contains: return "%\(escaped)%"
        case .prefix: return "\(escaped)%"
        case .suffix: return "%\(escaped)"
        }
    }
}
