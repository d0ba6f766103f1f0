import Crypto
import Envelopes
import Foundation
import GRDB
import Logging
import SignatureCapture
import Synchronization
import ZeroMQ

/// An offline signing device: what an integrator embeds (the SDK's `DSMManager`,
/// `DSMEnvelopesManager` and `DSMTemplatesManager` in one actor).
///
/// Methods are grouped as the SDK groups them:
/// - **Setup and account**: ``open(configuration:accountService:templateService:logger:)``,
///   ``login(accessToken:)``, ``loginOffline()``, ``logout(force:)``, ``currentAccount``.
/// - **Envelopes** (`EnvelopesManager`): ``compose(_:mode:)``, drafts (``saveDraft(_:replacingExisting:)``,
///   ``hasCachedDraft()``, ``composeDraft(mode:)``, ``discardDraft()``), ``resumeSigning(envelopeId:driver:)``,
///   ``canResume(envelopeId:)``, ``cachedEnvelopes()``, ``cacheState(envelopeId:)``,
///   ``removeCachedEnvelope(envelopeId:)``, ``removeCachedEnvelopes(_:)``.
/// - **Templates** (`TemplatesManager`): ``listTemplates()``, ``cacheTemplate(id:)``, ``cachedTemplates()``,
///   ``compose(fromTemplate:_:mode:transactionId:)``, ``autoUpdateCachedTemplates()``,
///   ``removeCachedTemplate(id:)``.
/// - **Outbox**: ``pendingOutboxItems(after:limit:)``, ``outboxItems()``, ``lastSequence()``; only the
///   sync engine records what the server answered.
/// - **Connection**: ``connect(to:credentials:configuration:logger:)`` returns a ``DeviceConnection`` that
///   keeps the coordinator session, syncs by policy, goes offline and back, and shuts down.
/// - **Events**: ``events()`` — one `AsyncStream` per subscriber.
///
/// ```swift
/// let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: path),
///                                      accountService: accounts, logger: logger)
/// try await node.login(accessToken: token)
/// let id = try await node.compose(envelope, mode: .offline)
/// let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 7))
/// ```
public actor DeviceNode {
    /// The configuration the node was opened with.
    public nonisolated let configuration: DeviceConfiguration
    /// This device's id (persisted in the store).
    public nonisolated let deviceId: String
    /// This device's Ed25519 public key, raw 32 bytes (what the server enrolls).
    public nonisolated let publicKey: [UInt8]
    /// This device's CURVE key pair (kept in its store): under CURVE, what the coordinator knows
    /// it by. Enrollment binds its public key to the device id.
    public nonisolated let transportKeys: CurveKeyPair

    let store: DeviceStore
    let accountService: any AccountService
    let templateService: (any TemplateService)?
    /// The template service of the connection online now (``connect(to:credentials:configuration:logger:)``):
    /// used when the node was opened without one. Set and cleared by the connection's sessions.
    nonisolated let connectionTemplates = Mutex<(any TemplateService)?>(nil)
    let logger: Logger
    let broadcaster: EventBroadcaster
    var account: AccountInfo?
    /// Envelopes with a signing session running now (the actor is re-entered while a driver acts).
    var activeSessions: Set<String> = []
    var closed = false

    private init(configuration: DeviceConfiguration, store: DeviceStore, accountService: any AccountService,
                 templateService: (any TemplateService)?, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.deviceId = store.deviceId
        self.publicKey = store.publicKey
        self.transportKeys = store.transportKeys
        self.accountService = accountService
        self.templateService = templateService
        self.logger = logger
        self.broadcaster = EventBroadcaster(bufferLimit: configuration.eventBufferLimit)
    }

    /// Opens (or creates) the device's store and sets the node up (the SDK's `setup`).
    ///
    /// The first open creates the device id (unless configured) and its Ed25519 key; later opens
    /// find everything a previous run committed. Work interrupted by a crash resumes from the last
    /// committed state (`syncing` becomes `pendingSync`). Nobody is logged in after opening:
    /// call ``login(accessToken:)`` or ``loginOffline()``.
    ///
    /// - Parameters:
    ///   - configuration: store path and setup keys.
    ///   - accountService: resolves access tokens (``InMemoryAccountService`` in tests).
    ///   - templateService: lists and fetches server templates; `nil` when the node has none.
    ///   - logger: where the node logs; the node never bootstraps logging.
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/storeFailure`` when the store cannot be
    ///   opened or migrated; ``DeviceNodeError/Code/invalidConfiguration`` when the store belongs to another device id.
    public static func open(
        configuration: DeviceConfiguration,
        accountService: any AccountService,
        templateService: (any TemplateService)? = nil,
        logger: Logger = Logger(label: "signfleet.device")
    ) async throws -> DeviceNode {
        let store: DeviceStore
        do {
            store = try DeviceStore.open(path: configuration.storePath, deviceId: configuration.deviceId,
                                         durability: configuration.durability, footprint: configuration.storeFootprint,
                                         clock: configuration.clock, logger: logger,
                                         retainsSynced: configuration.retainSynced != nil)
        } catch let error as DeviceNodeError {
            throw error
        } catch {
            throw DeviceNodeError(.storeFailure, "cannot open the device store at \(configuration.storePath)", underlying: error)
        }
        var logger = logger
        logger[metadataKey: "device"] = "\(store.deviceId)"
        return DeviceNode(configuration: configuration, store: store, accountService: accountService,
                          templateService: templateService, logger: logger)
    }

    /// Closes the store and ends every event stream. Later calls fail with ``DeviceNodeError/Code/storeFailure``.
    public func close() throws {
        guard !closed else { return }
        closed = true
        broadcaster.finish()
        try store.close()
    }

    /// Frees the store's memory caches (its prepared statements and cached pages), as GRDB does on
    /// iOS when the app goes to the background or gets a memory warning. Nothing is lost; the
    /// caches refill as the node is used. A process holding thousands of nodes calls it for each
    /// one that goes idle, so that only busy devices hold caches (docs/performance.md).
    public func releaseMemory() async throws {
        try await storeCall { try await store.releaseMemory() }
    }

    // MARK: Events

    /// A new subscription to the node's events, starting now.
    ///
    /// Each call returns its own stream; every subscriber receives every event, in order.
    /// Stop iterating (or drop the stream) to unsubscribe.
    public nonisolated func events() -> AsyncStream<DeviceEvent> {
        broadcaster.subscribe()
    }

    func publish(_ event: DeviceEvent) {
        broadcaster.publish(event)
    }

    // MARK: Account

    /// The logged-in account, or `nil`.
    public var currentAccount: AccountInfo? { account }

    /// Logs in with an access token (the SDK's `loginWithAccessToken`): asks the account service
    /// who owns it and persists that account for offline logins.
    ///
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/loginFailed`` when the service refuses or
    ///   cannot be reached (then try ``loginOffline()``).
    @discardableResult
    public func login(accessToken: String) async throws -> AccountInfo {
        try await login(accessToken: accessToken, using: accountService)
    }

    /// ``login(accessToken:)`` asking `service` (a ``DeviceConnection`` asks its coordinator).
    func login(accessToken: String, using service: any AccountService) async throws -> AccountInfo {
        try ensureOpen()
        let user: UserInfo
        do {
            user = try await withAPITimeout("the account service") { try await service.userInfo(accessToken: accessToken) }
        } catch {
            throw DeviceNodeError(.loginFailed, "login with the access token failed; check the token, or log in offline with the persisted account", underlying: error)
        }
        let now = configuration.clock()
        try await storeCall { try await self.store.saveAccount(user, accessToken: accessToken, at: now) }
        let info = AccountInfo(user: user, accessToken: accessToken, loggedInAt: now, isOffline: false)
        account = info
        logger.debug("logged in", metadata: ["account": "\(user.accountId)", "user": "\(user.email)"])
        return info
    }

    /// Logs in with the account persisted by the last online login, without the network.
    ///
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/noPersistedAccount`` when nobody has logged in
    ///   online on this device (or after a logout).
    @discardableResult
    public func loginOffline() async throws -> AccountInfo {
        try ensureOpen()
        guard let info = try await storeCall({ try await self.store.account() }) else {
            throw DeviceNodeError(.noPersistedAccount, "no account is persisted on this device; log in online once with an access token")
        }
        account = info
        return info
    }

    /// What a logout removed.
    public struct LogoutReport: Hashable, Sendable {
        /// Envelopes removed with work the server had not received (signed, declined or queued):
        /// lost. Only a forced logout drops any.
        public var droppedEnvelopes: [EnvelopeIDs]
        /// Envelopes removed with nothing unsynced: composed and not yet signed, or already synced
        /// (the server has what they hold).
        public var clearedEnvelopes: [EnvelopeIDs]
        /// Outbox items removed (never pushed; the tail of the outbox).
        public var droppedSequences: [UInt64]
        /// Outbox items kept because a push already carried them (the server may have them); their
        /// acknowledgement still settles them after the next login.
        public var keptInFlight: [UInt64]
    }

    /// Logs out and clears local data: cached envelopes, drafts, templates and the persisted account.
    ///
    /// Unlike the SDK, which silently loses envelopes signed offline but not yet synced, this
    /// refuses while such envelopes exist, unless `force` is `true`; the report says what was dropped.
    ///
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/unsyncedEnvelopes`` listing the envelopes
    ///   (sync them first, or pass `force: true`).
    @discardableResult
    public func logout(force: Bool = false) async throws -> LogoutReport {
        try ensureOpen()
        if !force {
            let unsynced = try await storeCall { try await self.store.unsynced() }
            if !unsynced.isEmpty {
                throw DeviceNodeError(.unsyncedEnvelopes,
                    "\(unsynced.count) signed envelope(s) have not reached the server (\(unsynced.map(\.localId).joined(separator: ", "))); sync them first, or log out with force: true to drop them")
            }
        }
        guard activeSessions.isEmpty else {
            throw DeviceNodeError(.signingInProgress, "a signing session is running; finish or cancel it before logging out")
        }
        let write = try await storeCall { try await self.store.logout() }
        account = nil
        for ids in write.droppedEnvelopes + write.clearedEnvelopes {
            publish(.envelopeUncached(EnvelopeUncached(envelope: ids, reason: .logout)))
        }
        if !write.droppedEnvelopes.isEmpty || !write.droppedSequences.isEmpty {
            logger.warning("forced logout dropped unsynced work", metadata: [
                "envelopes": "\(write.droppedEnvelopes.map(\.localId))", "sequences": "\(write.droppedSequences)"])
        }
        return LogoutReport(droppedEnvelopes: write.droppedEnvelopes, clearedEnvelopes: write.clearedEnvelopes, droppedSequences: write.droppedSequences,
                            keptInFlight: write.keptInFlight)
    }

    func requireAccount() throws -> AccountInfo {
        try ensureOpen()
        guard let account else {
            throw DeviceNodeError(.accountNotLoggedIn, "nobody is logged in; call login(accessToken:) or loginOffline() first")
        }
        return account
    }

    var signingUser: SigningUser? {
        account.map { SigningUser(email: $0.user.email, name: $0.user.userName) }
    }

    func ensureOpen() throws {
        if closed { throw DeviceNodeError(.storeFailure, "the device node is closed; open it again") }
    }

    /// A server call that did not answer within ``DeviceConfiguration/apiTimeout``.
    struct APITimeout: Error, CustomStringConvertible {
        var what: String
        var seconds: Double
        var description: String { "\(what) did not answer within \(Int(seconds)) s (apiTimeout)" }
    }

    /// Runs a call to a server seam, giving up after the configured API timeout.
    func withAPITimeout<T: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let seconds = configuration.apiTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask { [clock = configuration.timeoutClock] in
                try await clock.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw APITimeout(what: what, seconds: seconds) }
            return value
        }
    }

    /// Runs a store operation, turning unexpected errors into ``DeviceNodeError/Code/storeFailure``.
    func storeCall<T: Sendable>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch let error as DeviceNodeError {
            throw error
        } catch is CancellationError {
            // The caller's task was cancelled (a sync pass stopped by going offline): not a store failure.
            throw CancellationError()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT && Task.isCancelled {
            // GRDB interrupts a statement whose task is cancelled.
            throw CancellationError()
        } catch {
            throw DeviceNodeError(.storeFailure, "the device store failed; nothing was half-written, retry", underlying: error)
        }
    }
}
