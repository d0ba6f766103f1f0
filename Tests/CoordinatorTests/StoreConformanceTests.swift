import CoordinatorPostgres
import DeviceNode
import SignatureCapture
import Envelopes
import FleetTesting
import FleetProtocol
import Foundation
import SyncContract
import Testing

@testable import Coordinator

/// The services of one coordinator on any ``CoordinatorStorage``.
struct StorageServices {
    let accounts: AccountDirectory
    let auth: AuthService
    let devices: DeviceRegistry
    let ingest: SyncIngest
    let envelopes: EnvelopeService
    let templates: TemplateCatalog
    let origins: ReturnOrigins

    init(_ storage: any CoordinatorStorage) {
        accounts = AccountDirectory(storage: storage)
        auth = AuthService(storage: storage)
        devices = DeviceRegistry(storage: storage, auth: auth)
        ingest = SyncIngest(storage: storage, devices: devices)
        envelopes = EnvelopeService(storage: storage, auth: auth)
        templates = TemplateCatalog(storage: storage, auth: auth)
        origins = ReturnOrigins(storage: storage)
    }

    /// Account `acme` with one user, and a token of that user.
    func seed() async throws -> String {
        _ = try await accounts.createAccount(id: "acme", name: "Acme")
        _ = try await accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        return try await auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
    }
}

/// One suite, run against the SQLite store and the PostgreSQL store (docs/storage.md): both must
/// give the same answers to the same requests, refusals included.
@Suite struct StoreConformanceTests {
    /// Integration keys and consent (docs/rest-api.md, "Authentication"): the same on both stores.
    @Test(arguments: StoreBackend.allCases)
    func integrationKeysAndConsent(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        _ = try await services.seed()
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let key = IntegrationKeyRecord(id: "k1", accountID: "acme", name: "Backend", publicKey: "PEM", createdAt: at)
        try await store.storage.insertIntegrationKey(key)
        let missing = await #expect(throws: FleetError.self) {
            try await store.storage.insertIntegrationKey(IntegrationKeyRecord(id: "k2", accountID: "nobody", name: "x", publicKey: "PEM", createdAt: at))
        }
        #expect(missing?.code == .notFound)
        try await store.storage.insertIntegrationKey(IntegrationKeyRecord(id: "k0", accountID: "acme", name: "Later", publicKey: "PEM", createdAt: at.addingTimeInterval(1)))
        #expect(try await store.storage.integrationKey(id: "k1") == key)
        #expect(try await store.storage.integrationKeys(accountID: "acme").map(\.id) == ["k1", "k0"], "oldest first")
        #expect(try await store.storage.integrationKeys(accountID: nil).count == 2)
        #expect(try await store.storage.integrationKeys(accountID: "other").isEmpty)
        let user = try #require(try await services.accounts.users(accountID: "acme").first)
        #expect(try await store.storage.consent(integrationKeyID: "k1", userID: user.id) == nil)
        try await store.storage.grantConsent(ConsentRecord(integrationKeyID: "k1", userID: user.id, scopes: "signature", grantedAt: at))
        try await store.storage.grantConsent(ConsentRecord(integrationKeyID: "k1", userID: user.id, scopes: "impersonation signature", grantedAt: at.addingTimeInterval(5)))
        #expect(try await store.storage.consent(integrationKeyID: "k1", userID: user.id)?.scopes == "impersonation signature", "a renewed consent replaces the old")
        #expect(try await store.storage.revokeIntegrationKey(id: "k1", accountID: "other", at: at) == false, "another account's key")
        #expect(try await store.storage.revokeIntegrationKey(id: "k1", accountID: "acme", at: at.addingTimeInterval(9)) == true)
        #expect(try await store.storage.revokeIntegrationKey(id: "k1", accountID: "acme", at: at) == false, "revoked already")
        #expect(try await store.storage.integrationKey(id: "k1")?.revokedAt == at.addingTimeInterval(9))

        // A key of the code grant: its secret's hash and redirect URIs; its codes, taken once.
        let coded = IntegrationKeyRecord(
            id: "k3", accountID: "acme", name: "App", publicKey: "", createdAt: at, secretHash: Data([1, 2, 3]),
            redirectURIs: ["https://app.example/cb", "http://127.0.0.1:8080/cb"])
        try await store.storage.insertIntegrationKey(coded)
        #expect(try await store.storage.integrationKey(id: "k3") == coded)
        #expect(try await store.storage.integrationKey(id: "k3")?.redirectURIList == ["https://app.example/cb", "http://127.0.0.1:8080/cb"])
        func code(_ byte: UInt8, expires: TimeInterval, challenge: String? = nil) -> AuthorizationCodeRecord {
            AuthorizationCodeRecord(
                codeHash: Data(repeating: byte, count: 32), integrationKeyID: "k3", userID: user.id, scopes: "signature",
                redirectURI: "https://app.example/cb", codeChallenge: challenge, expiresAt: at.addingTimeInterval(expires))
        }
        try await store.storage.insertAuthorizationCode(code(1, expires: 60, challenge: "c"), purgeBefore: at)
        try await store.storage.insertAuthorizationCode(code(2, expires: 10), purgeBefore: at)
        #expect(try await store.storage.redeemAuthorizationCode(codeHash: Data(repeating: 1, count: 32)) == code(1, expires: 60, challenge: "c"))
        #expect(try await store.storage.redeemAuthorizationCode(codeHash: Data(repeating: 1, count: 32)) == nil, "taken once")
        // Inserting purges what expired before `purgeBefore`: code 2 (at + 10) goes, code 3 stays.
        try await store.storage.insertAuthorizationCode(code(3, expires: 120), purgeBefore: at.addingTimeInterval(30))
        #expect(try await store.storage.redeemAuthorizationCode(codeHash: Data(repeating: 2, count: 32)) == nil, "purged")
        #expect(try await store.storage.redeemAuthorizationCode(codeHash: Data(repeating: 3, count: 32))?.expiresAt == at.addingTimeInterval(120))
    }

    @Test(arguments: StoreBackend.allCases)
    func accountsUsersAndTokens(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        _ = try await services.accounts.createAccount(id: "b", name: "Beta")
        _ = try await services.accounts.createAccount(id: "a", name: "Alpha", offlineSigning: false, rateLimits: RateLimits(hourly: 7, burst: 3, burstWindowSeconds: 9))
        let duplicate = await #expect(throws: FleetError.self) { try await services.accounts.createAccount(id: "a", name: "Again") }
        #expect(duplicate?.code == .alreadyExists)
        #expect(try await services.accounts.accounts().map(\.id) == ["a", "b"])
        let alpha = try #require(try await services.accounts.account(id: "a"))
        #expect(alpha.offlineSigning == false && alpha.rateLimits == RateLimits(hourly: 7, burst: 3, burstWindowSeconds: 9))
        #expect(try await services.accounts.account(id: "zz") == nil)

        _ = try await services.accounts.createUser(accountID: "a", name: "Zed", email: "zed@a.example", secret: "secret-123")
        _ = try await services.accounts.createUser(accountID: "a", name: "Amy", email: "amy@a.example", secret: "secret-456")
        let taken = await #expect(throws: FleetError.self) {
            try await services.accounts.createUser(accountID: "b", name: "Z", email: "ZED@a.example", secret: "secret-789")
        }
        #expect(taken?.code == .alreadyExists, "emails are unique without regard to case")
        let noAccount = await #expect(throws: FleetError.self) {
            try await services.accounts.createUser(accountID: "nope", name: "N", email: "n@x.example", secret: "secret-123")
        }
        #expect(noAccount?.code == .notFound)
        #expect(try await services.accounts.users(accountID: "a").map(\.email) == ["amy@a.example", "zed@a.example"])

        let token = try await services.auth.issueToken(email: "zed@a.example", secret: "secret-123")
        let (user, account) = try await services.auth.authenticate(token.accessToken)
        #expect(user.email == "zed@a.example" && account.id == "a")
        let wrong = await #expect(throws: FleetError.self) { try await services.auth.issueToken(email: "zed@a.example", secret: "wrong-secret") }
        #expect(wrong?.code == .unauthenticated)
        let unknown = await #expect(throws: FleetError.self) { try await services.auth.authenticate("not-a-token") }
        #expect(unknown?.code == .unauthenticated)
    }

    @Test(arguments: StoreBackend.allCases)
    func expiredTokensAreRefusedAndDropped(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let clock = TestClock()
        let services = StorageServices(store.storage)
        _ = try await services.seed()
        let auth = AuthService(storage: store.storage, tokenLifetime: .seconds(60), now: clock.now)
        let old = try await auth.issueToken(email: "ann@acme.example", secret: "secret-123")
        clock.advance(120)
        let expired = await #expect(throws: FleetError.self) { try await auth.authenticate(old.accessToken) }
        #expect(expired?.code == .tokenExpired)
        // Issuing a new token drops the expired one: it is then unknown.
        _ = try await auth.issueToken(email: "ann@acme.example", secret: "secret-123")
        let dropped = await #expect(throws: FleetError.self) { try await auth.authenticate(old.accessToken) }
        #expect(dropped?.code == .unauthenticated)
    }

    @Test(arguments: StoreBackend.allCases)
    func enrollmentRules(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let key = Forger(id: "d1").publicKey
        let curve = [UInt8](repeating: 7, count: 32)
        let first = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "d1", publicKey: key), credential: .curveKey(curve))
        let again = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "d1", publicKey: key), credential: .curveKey(curve))
        #expect(first == again, "a retried enrollment is answered the same way")
        let otherKey = await #expect(throws: FleetError.self) {
            try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "d1", publicKey: Forger(id: "x").publicKey), credential: .curveKey(curve))
        }
        #expect(otherKey?.code == .forbidden)
        let keyTaken = await #expect(throws: FleetError.self) {
            try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "d2", publicKey: Forger(id: "d2").publicKey), credential: .curveKey(curve))
        }
        #expect(keyTaken?.code == .forbidden, "one CURVE key, one device")
        #expect(try await services.devices.authenticate(deviceID: "d1", credential: .curveKey(curve)).id == "d1")
        // An unknown key hears the same whether the id it names exists or not: no list of ids.
        let impostor = await #expect(throws: FleetError.self) {
            try await services.devices.authenticate(deviceID: "d1", credential: .curveKey([UInt8](repeating: 8, count: 32)))
        }
        let nobody = await #expect(throws: FleetError.self) {
            try await services.devices.authenticate(deviceID: "no-such-device", credential: .curveKey([UInt8](repeating: 8, count: 32)))
        }
        #expect(impostor?.code == .unauthenticated && impostor == nobody, "\(String(describing: impostor)) / \(String(describing: nobody))")
        // An enrolled key naming another device is forbidden, whether that device exists or not.
        let other = await #expect(throws: FleetError.self) { try await services.devices.authenticate(deviceID: "d9", credential: .curveKey(curve)) }
        #expect(other?.code == .forbidden)

        #expect(try await services.devices.revoke(deviceID: "d1"))
        #expect(try await services.devices.revoke(deviceID: "missing") == false)
        let revoked = await #expect(throws: FleetError.self) { try await services.devices.authenticate(deviceID: "d1", credential: .curveKey(curve)) }
        #expect(revoked?.code == .forbidden)
        let newKey = Forger(id: "d1b").publicKey
        let renewed = try await services.devices.enroll(
            EnrollDevice(accessToken: token, deviceID: "d1", publicKey: newKey), credential: .curveKey([UInt8](repeating: 9, count: 32)))
        #expect(renewed.enrolledAt == first.enrolledAt, "re-enrolling after a revocation keeps the device's history")
        #expect(try await services.devices.device(id: "d1")?.publicKey == newKey)
    }

    @Test(arguments: StoreBackend.allCases)
    func ingestIsExactlyOnceAndOrdered(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let (items, forger) = try await forgedItems(count: 4)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        func push(_ items: [SyncItem]) async throws -> SyncAck {
            try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        }

        let gap = try await push([items[1]])
        #expect(gap.status == .gap && gap.expectedSequence == 1 && gap.lastApplied == 0)
        let applied = try await push(Array(items[0...1]))
        #expect(applied.status == .ok && applied.lastApplied == 2 && applied.results.map(\.outcome) == [.applied, .applied])
        let again = try await push(Array(items[0...2]))
        #expect(again.results.map(\.outcome) == [.duplicate, .duplicate, .applied])
        #expect(again.results[0].envelopeID == applied.results[0].envelopeID)

        // The same sequence with another payload is a conflict: nothing changes.
        let other = try forger.item(from: items[3], sequence: 2, transaction: "tx-other")
        let conflict = try await push([other])
        #expect(conflict.status == .refused && conflict.results.map(\.outcome) == [.conflict] && conflict.lastApplied == 3)
        // A forged signature uses up no sequence number.
        var forged = items[3]
        forged.signature[0] ^= 0xFF
        let bad = try await push([forged])
        #expect(bad.status == .refused && bad.results.map(\.outcome) == [.badSignature] && bad.lastApplied == 3)
        // A second item with an applied transaction id is its duplicate, never a second envelope.
        let replay = try forger.item(from: items[3], sequence: 4, transaction: "tx-0")
        let duplicateTransaction = try await push([replay])
        #expect(duplicateTransaction.results.map(\.outcome) == [.duplicate] && duplicateTransaction.lastApplied == 4)
        #expect(duplicateTransaction.results[0].envelopeID == applied.results[0].envelopeID)
        // Another envelope (another local envelope id: a store that went back in time and counted
        // its transaction ids again) under an applied transaction id is a transaction conflict:
        // settled, nothing stored, and the item after it goes on.
        let reused = try forger.item(from: items[3], sequence: 5, transaction: "tx-1") { $0.envelopeId = "signed-after-the-store-went-back" }
        let next = try forger.item(from: items[3], sequence: 6, transaction: "tx-5")
        let conflicted = try await push([reused, next])
        #expect(conflicted.status == .ok && conflicted.lastApplied == 6)
        #expect(conflicted.results.map(\.outcome) == [.transactionConflict, .applied])
        #expect(conflicted.results[0].envelopeID == nil)
        #expect(conflicted.results[0].reason?.contains("already names another envelope") == true, "\(conflicted.results[0])")
        let resent = try await push([reused])
        #expect(resent.results.map(\.outcome) == [.transactionConflict], "a resend hears the same answer, never duplicate")
        #expect(resent.status == .ok && resent.lastApplied == 6)

        let counts = try await store.storage.counts()
        #expect(counts.envelopes == 4 && counts.devicesEnrolled == 1)
        #expect(
            counts.syncOutcomes == ["applied": 4, "duplicate": 1, "transaction_conflict": 1],
            "an item repeating an applied transaction is stored as its duplicate; another envelope under it as a conflict")
        let summaries = try await store.storage.envelopeSummaries()
        #expect(summaries.map(\.sequences) == [[1, 2, 3, 6]] && summaries.first?.lastAppliedSequence == 6)

        // sync.results pages through what was stored.
        let page = try await services.ingest.results(SyncResultsQuery(deviceID: forger.id, after: 0, limit: 3), routingID: forger.id)
        #expect(page.results.map(\.sequence) == [1, 2, 3] && page.nextAfter == 3 && page.lastApplied == 6)
        #expect(page.results[0].transactionID == "tx-0" && page.results[0].envelopeSequence == 1)
        let rest = try await services.ingest.results(SyncResultsQuery(deviceID: forger.id, after: 3, limit: 3), routingID: forger.id)
        #expect(rest.results.map(\.sequence) == [4, 5, 6] && rest.nextAfter == nil)
        #expect(rest.results[0].envelopeSequence == 1, "item 4 names the envelope item 1 made")
    }

    @Test(arguments: StoreBackend.allCases)
    func envelopeLifecycleAfterSync(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let (items, forger) = try await forgedItems(count: 1, remoteSigners: 1)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        let envelopeID = try #require(ack.results.first?.envelopeID)
        let synced = try await services.envelopes.envelope(id: envelopeID, accountID: "acme")
        #expect(synced.status == "sent")
        let missing = await #expect(throws: FleetError.self) { try await services.envelopes.envelope(id: envelopeID, accountID: "other") }
        #expect(missing?.code == .notFound)
        let voided = try await services.envelopes.void(envelopeID: envelopeID, reason: "changed my mind", accountID: "acme")
        #expect(voided.status == "voided" && voided.voidReason == "changed my mind")
        #expect(try await services.envelopes.envelope(id: envelopeID).status == "voided")
        let twice = await #expect(throws: FleetError.self) { try await services.envelopes.void(envelopeID: envelopeID, reason: "again") }
        #expect(twice?.code == .invalidRequest)
    }

    /// The REST API's list of status changes (docs/rest-api.md): by account, window, status and page.
    @Test(arguments: StoreBackend.allCases)
    func envelopeStatusChangesAreListedByWindowStatusAndPage(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let (items, forger) = try await forgedItems(count: 3, remoteSigners: 3)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        let ids = ack.results.compactMap(\.envelopeID)
        try #require(ids.count == 3)
        let past = Date(timeIntervalSince1970: 0)
        let all = try await store.storage.envelopeIDs(accountID: "acme", changedSince: past, statuses: [], search: nil, start: 0, count: 100)
        #expect(all.total == 3 && Set(all.page) == Set(ids))
        let second = try await store.storage.envelopeIDs(accountID: "acme", changedSince: past, statuses: [], search: nil, start: 1, count: 1)
        #expect(second.total == 3 && second.page == [all.page[1]], "pages follow one order")
        _ = try await services.envelopes.void(envelopeID: ids[0], reason: "wrong amount", accountID: "acme")
        let voided = try await store.storage.envelopeIDs(accountID: "acme", changedSince: past, statuses: ["voided"], search: nil, start: 0, count: 100)
        #expect(voided.total == 1 && voided.page == [ids[0]])
        let either = try await store.storage.envelopeIDs(accountID: "acme", changedSince: past, statuses: ["voided", "sent"], search: nil, start: 0, count: 100)
        #expect(either.total == 3)
        let future = try await store.storage.envelopeIDs(
            accountID: "acme", changedSince: Date().addingTimeInterval(3600), statuses: [], search: nil, start: 0, count: 100)
        #expect(future.total == 0 && future.page.isEmpty)
        let other = try await store.storage.envelopeIDs(accountID: "other", changedSince: past, statuses: [], search: nil, start: 0, count: 100)
        #expect(other.total == 0, "another account's envelopes are not listed")
        // search_text: in the envelope's name or a recipient's, ASCII case folded, wildcards literal.
        let named = try #require(try await store.storage.envelope(id: ids[1], accountID: "acme"))
        let recipient = try #require(named.recipients.first?.name)
        let byRecipient = try await store.storage.envelopeIDs(
            accountID: "acme", changedSince: past, statuses: [], search: String(recipient.uppercased().dropFirst()), start: 0, count: 100)
        #expect(byRecipient.page.contains(ids[1]), "\(recipient)")
        let byName = try await store.storage.envelopeIDs(
            accountID: "acme", changedSince: past, statuses: [], search: String(named.envelope.name.lowercased().prefix(5)), start: 0, count: 100)
        #expect(byName.page.contains(ids[1]), "\(named.envelope.name)")
        for wildcard in ["%", "_", "\\", "no such name"] {
            let none = try await store.storage.envelopeIDs(accountID: "acme", changedSince: past, statuses: [], search: wildcard, start: 0, count: 100)
            #expect(none.total == 0 && none.page.isEmpty, "\(wildcard) matches only itself")
        }
    }

    /// REST drafts (docs/rest-api.md): kept per account, taken once.
    @Test(arguments: StoreBackend.allCases)
    func restDraftsAreKeptPerAccountAndTakenOnce(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        _ = try await StorageServices(store.storage).seed()
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let draft = RESTDraftRecord(id: "env-draft", accountID: "acme", transactionID: "tx-1", definition: Data(#"{"status":"created"}"#.utf8), createdAt: at)
        try await store.storage.insertDraft(draft)
        #expect(try await store.storage.draft(id: "env-draft", accountID: "acme") == draft)
        #expect(try await store.storage.draft(id: "env-draft", accountID: "other") == nil, "another account does not see it")
        let orphan = await #expect(throws: FleetError.self) {
            try await store.storage.insertDraft(RESTDraftRecord(id: "x", accountID: "nobody", transactionID: "t", definition: Data(), createdAt: at))
        }
        #expect(orphan?.code == .notFound, "\(String(describing: orphan))")
        #expect(try await store.storage.deleteDraft(id: "env-draft", accountID: "other") == false)
        #expect(try await store.storage.deleteDraft(id: "env-draft", accountID: "acme") == true)
        #expect(try await store.storage.deleteDraft(id: "env-draft", accountID: "acme") == false, "taken once")
        #expect(try await store.storage.draft(id: "env-draft", accountID: "acme") == nil)
    }

    @Test(arguments: StoreBackend.allCases)
    func templatesAndReturnOrigins(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        _ = try await services.seed()
        for (id, name, folder) in [("t1", "Mutual NDA", "Legal"), ("t2", "nda addendum", "legal"), ("t3", "Onboarding 100%", "HR")] {
            try await services.templates.create(
                accountID: "acme", template: TemplateCatalog.sampleTemplate(id: id, name: name, folder: folder, pages: 1))
        }
        let exists = await #expect(throws: FleetError.self) {
            try await services.templates.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t1", name: "x", folder: nil, pages: 1))
        }
        #expect(exists?.code == .invalidRequest)
        let noAccount = await #expect(throws: FleetError.self) {
            try await services.templates.create(accountID: "nobody", template: TemplateCatalog.sampleTemplate(id: "t9", name: "x", folder: nil, pages: 1))
        }
        #expect(noAccount?.code == .notFound)

        let all = try await services.templates.list(accountID: "acme")
        #expect(all.templates.map(\.templateID) == ["t1", "t2", "t3"] && all.total == 3, "by name without regard to case")
        #expect(try await services.templates.list(accountID: "acme", searchText: "NDA").templates.map(\.templateID) == ["t1", "t2"])
        #expect(try await services.templates.list(accountID: "acme", searchText: "nda", nameMatch: .prefix).templates.map(\.templateID) == ["t2"])
        #expect(try await services.templates.list(accountID: "acme", searchText: "mutual nda", nameMatch: .exact).templates.map(\.templateID) == ["t1"])
        #expect(try await services.templates.list(accountID: "acme", searchText: "100%", nameMatch: .suffix).templates.map(\.templateID) == ["t3"])
        #expect(try await services.templates.list(accountID: "acme", searchText: "0_", nameMatch: .contains).templates.isEmpty, "LIKE wildcards are literal")
        #expect(try await services.templates.list(accountID: "acme", folder: "LEGAL").total == 2)
        let paged = try await services.templates.list(accountID: "acme", start: 1, count: 1)
        #expect(paged.templates.map(\.templateID) == ["t2"] && paged.nextStart == 2)

        let before = try await services.templates.template(accountID: "acme", id: "t1")
        let edited = try await services.templates.editTab(accountID: "acme", templateID: "t1", tab: .tabId("company"), change: TabChange(value: "Initech"))
        #expect(edited.summary.lastModified > before.lastModified)
        #expect(try await services.templates.template(accountID: "acme", id: "t1").tabs.first { $0.tabId == "company" }?.value == "Initech")
        let elsewhere = await #expect(throws: FleetError.self) { try await services.templates.template(accountID: "other", id: "t1") }
        #expect(elsewhere?.code == .notFound)

        #expect(try await services.origins.list(accountID: "acme").isEmpty)
        #expect(try await services.origins.add(accountID: "acme", ["https://App.example/done", "http://b.example:8080"]) == ["http://b.example:8080", "https://app.example"])
        #expect(try await services.origins.add(accountID: "acme", ["https://app.example"]) == ["http://b.example:8080", "https://app.example"])
        #expect(try await services.origins.remove(accountID: "acme", ["http://b.example:8080/x"]) == ["https://app.example"])
        let unknown = await #expect(throws: FleetError.self) { try await services.origins.add(accountID: "nobody", ["https://a.example"]) }
        #expect(unknown?.code == .notFound)
    }

    @Test(arguments: StoreBackend.allCases)
    func reopeningKeepsEverythingAndMigratesNothingTwice(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let key = try await store.storage.curveKeyPair()
        let second = try await store.reopened()
        #expect(try await second.curveKeyPair().publicKey == key.publicKey, "every coordinator on a store serves with its one CURVE key")
        #expect(try await StorageServices(second).auth.authenticate(token).1.id == "acme")
        #expect(try await second.accounts().map(\.id) == ["acme"])
    }
}

extension StoreConformanceTests {
    @Test(arguments: StoreBackend.allCases)
    func captiveSessionsAndTheirTabs(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let (items, forger) = try await forgedItems(count: 1, remoteSigners: 1, embedded: ["app-user-1"])
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        let envelopeID = try #require(ack.results.first?.envelopeID)
        let clock = TestClock()
        let captive = CaptiveSigningService(
            storage: store.storage, auth: services.auth, links: CaptiveSigningLinks(baseURL: "http://127.0.0.1:9"), now: clock.now)

        _ = try await services.origins.add(accountID: "acme", ["https://app.example"])
        let refused = await #expect(throws: FleetError.self) {
            try await captive.issue(
                accountID: "acme", envelopeID: envelopeID, selection: .clientUserID("app-user-1"), returnURL: "https://evil.example/x",
                locale: nil, issuedBy: "admin")
        }
        #expect(refused?.code == .invalidRequest, "a return URL outside the account's allow-list")
        let issued = try await captive.issue(
            accountID: "acme", envelopeID: envelopeID, selection: .clientUserID("app-user-1"), returnURL: "https://app.example/done",
            locale: nil, issuedBy: "admin")
        let url = try #require(URL(string: issued.url))
        let urlToken = url.lastPathComponent

        guard case .page(let model, let session?, 200) = try await captive.open(token: urlToken, session: nil) else {
            Issue.record("the first open shows the page with a new session")
            return
        }
        #expect(model.recipientID == issued.recipientID)
        #expect(try await services.envelopes.envelope(id: envelopeID).recipients.first { $0.recipientID == issued.recipientID }?.status == "delivered")
        guard case .redirect(_, .ttlExpired) = try await captive.open(token: urlToken, session: "another-browser") else {
            Issue.record("a second browser is sent back with ttl_expired")
            return
        }
        let form = try SigningForm(urlEncoded: "csrf=\(Self.formEncoded(model.csrf))&action=decline&reason=not+today")
        guard case .redirect(let to, .decline) = try await captive.submit(token: urlToken, session: session, form: form) else {
            Issue.record("declining ends the session with event=decline")
            return
        }
        #expect(to == "https://app.example/done?event=decline")
        #expect(try await services.envelopes.envelope(id: envelopeID).status == "declined")
        guard case .redirect(_, .viewingComplete) = try await captive.open(token: urlToken, session: session) else {
            Issue.record("a finished URL only ever says so")
            return
        }

        // Tab values: stored with a step, a later value for the same tab replaces it.
        let hash = CaptiveSigningService.hash(urlToken)
        for value in ["first", "second"] {
            try await store.storage.updateCaptiveSession(tokenHash: hash) { unit in
                unit?.newTabs = [
                    CaptiveTabRecord(envelopeID: envelopeID, tabIndex: 3, recipientID: issued.recipientID ?? "r1", type: "text", value: value, capturedAt: Date())
                ]
            }
        }
        let tabs = try await captive.storedTabs(envelopeID: envelopeID)
        #expect(tabs.map(\.value) == ["second"] && tabs.first?.tabIndex == 3)
        #expect(try await store.storage.captiveSession(tokenHash: Data(repeating: 0, count: 32)) == nil)
    }

    static func formEncoded(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
    }
}

/// `count` items signed by a real device, re-signed by a ``Forger`` (whose key the test enrolls),
/// with transaction ids `tx-0`, `tx-1`… (`transactionPrefix` instead of `tx`)
func forgedItems(count: Int, remoteSigners: Int = 0, embedded: [String?] = [], transactionPrefix: String = "tx") async throws -> ([SyncItem], Forger) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("base.sqlite").path)
    configuration.deviceId = "base"
    let user = UserInfo(accountId: "acme", accountName: "Acme", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
    let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
    try await node.login(accessToken: "t")
    let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, remoteSigners: remoteSigners, transactionId: "base-tx", remoteClientUserIds: embedded), mode: .offline)
    _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
    let base = try await node.pendingOutboxItems().compactMap(\.syncItem)
    let forger = Forger(id: "dev-\(UUID().uuidString.prefix(8).lowercased())")
    let items = try (0..<count).map { index in try forger.item(from: base[0], sequence: UInt64(index + 1), transaction: "\(transactionPrefix)-\(index)") }
    return (items, forger)
}


/// Several coordinators on one PostgreSQL (issue #15 part 2's core): the same device's pushes
/// reaching two coordinators at once are still applied exactly once and in order.
@Suite struct SharedPostgresStoreTests {
    @Test func twoCoordinatorsApplyTheSameDevicesPushesExactlyOnce() async throws {
        let seed = testSeed("StoreConformanceTests")
        print("shared-store race seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)
        let first = try await ConformanceStore.make(.postgres)
        defer { first.remove() }
        let second = try await first.reopened()
        let a = StorageServices(first.storage), b = StorageServices(second)
        let token = try await a.seed()
        let devices = try await [forgedItems(count: 12, transactionPrefix: "a"), forgedItems(count: 12, transactionPrefix: "b")]
        for (_, forger) in devices {
            _ = try await b.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        }
        // Rounds of pushes: each round sends every device's items from a random start to a random
        // end to both coordinators at once; a resend or an overlap is answered, never re-applied.
        var envelopeOf: [String: [UInt64: String]] = [:]
        for _ in 0..<25 {
            var jobs: [(SyncIngest, SyncPush)] = []
            for (items, forger) in devices {
                let start = random.below(items.count), end = start + random.below(items.count - start)
                let push = SyncPush(deviceID: forger.id, items: Array(items[start...end]))
                jobs.append((a.ingest, push))
                jobs.append((b.ingest, push))
            }
            let acks = try await withThrowingTaskGroup(of: (String, SyncAck).self) { group in
                for (ingest, push) in jobs {
                    group.addTask { (push.deviceID, try await ingest.apply(push, routingID: push.deviceID)) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for (device, ack) in acks {
                for result in ack.results where result.outcome == .applied || result.outcome == .duplicate {
                    let known = envelopeOf[device]?[result.sequence]
                    #expect(known == nil || known == result.envelopeID, "sequence \(result.sequence) of \(device) named two envelopes (seed \(seed))")
                    envelopeOf[device, default: [:]][result.sequence] = result.envelopeID
                }
            }
        }
        // Then every item, in order, through the second coordinator: everything is applied once.
        for (items, forger) in devices {
            _ = try await b.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        }
        let summaries = try await second.envelopeSummaries()
        #expect(summaries.map(\.sequences) == [Array(1...12), Array(1...12)], "seed \(seed)")
        #expect(try await first.storage.counts().syncOutcomes == ["applied": 24], "seed \(seed)")
    }

    @Test func aSigningURLIssuedByOneCoordinatorOpensOnAnother() async throws {
        let first = try await ConformanceStore.make(.postgres)
        defer { first.remove() }
        let second = try await first.reopened()
        let services = StorageServices(first.storage)
        let token = try await services.seed()
        let (items, forger) = try await forgedItems(count: 1, remoteSigners: 1, embedded: ["app-user-1"])
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let envelopeID = try #require(try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id).results.first?.envelopeID)
        func captive(_ storage: any CoordinatorStorage) -> CaptiveSigningService {
            CaptiveSigningService(storage: storage, auth: AuthService(storage: storage), links: CaptiveSigningLinks(baseURL: "http://127.0.0.1:9"))
        }
        let issued = try await captive(first.storage).issue(
            accountID: "acme", envelopeID: envelopeID, selection: .clientUserID("app-user-1"), returnURL: "", locale: nil, issuedBy: "admin")
        let urlToken = try #require(URL(string: issued.url)).lastPathComponent
        guard case .page(_, let session?, 200) = try await captive(second).open(token: urlToken, session: nil) else {
            Issue.record("the other coordinator opens the URL")
            return
        }
        // Single use across the cluster: the first coordinator now sends a second browser back.
        guard case .redirect(_, .ttlExpired) = try await captive(first.storage).open(token: urlToken, session: nil) else {
            Issue.record("a URL opened on one coordinator is used on all")
            return
        }
        guard case .page = try await captive(first.storage).open(token: urlToken, session: session) else {
            Issue.record("the browser that opened it goes on through any coordinator")
            return
        }
    }
}

/// PostgreSQL going away is a store fault, not an internal error: refused as retryable
/// `unavailable`, and reported on `GET /health` until a write succeeds again.
@Suite struct PostgresUnreachableTests {
    @Test func aStoppedServerIsAnUnreachableStoreEpisode() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres-cluster.sh").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-unreachable-\(UUID().uuidString)").path
        let started = try await ChildProcess.run("/bin/bash", [script, "start", directory])
        try #require(started.status == 0, "\(started.standardError)")
        do {
            try await stopServerMidway(url: started.standardOutput, script: script, directory: directory)
        } catch {
            _ = try? await ChildProcess.run("/bin/bash", [script, "stop", directory])
            throw error
        }
    }

    func stopServerMidway(url: String, script: String, directory: String) async throws {
        let store = try await PostgresCoordinatorStore(url: url, schema: "unreachable")
        defer { store.close() }
        let accounts = AccountDirectory(storage: store)
        _ = try await accounts.createAccount(id: "before", name: "Before")

        // Stopping removes the data directory too: the server is gone for good.
        let stopped = try await ChildProcess.run("/bin/bash", [script, "stop", directory])
        try #require(stopped.status == 0)
        do {
            _ = try await accounts.createAccount(id: "after", name: "After")
            Issue.record("a write succeeded with the server stopped")
        } catch {
            #expect(StoreFaultKind.of(error) == .unreachable, "\(String(reflecting: error))")
            #expect(StoreFaultKind.of(error)?.refusal.code == .unavailable)
        }
        #expect(store.faults.episode?.kind == .unreachable)
        #expect(store.faults.healthReasons == ["store_unreachable"])
    }
}
