import Coordinator
import Foundation
import FleetProtocol
import Envelopes
import Testing

@testable import Coordinator

/// Connect's outbox on both stores (docs/webhooks.md): events written with the change that made
/// them, one row per configuration that asks; claims that keep an envelope's events in order and
/// never give one row to two claimants at once; outcomes recorded.
@Suite struct ConnectStoreConformanceTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    func configuration(_ id: String, events: [EnvelopeEvent.Kind], enabled: Bool = true, createdAt: Date = at) -> ConnectConfigurationRecord {
        ConnectConfigurationRecord(
            id: id, accountID: "acme", name: "hook \(id)", url: "http://127.0.0.1:9/\(id)", events: events, includeData: ["recipients"],
            enabled: enabled, includeHMAC: true, createdAt: createdAt)
    }

    @Test(arguments: StoreBackend.allCases)
    func eventsAreWrittenWithTheirChangeAndClaimedInOrderPerEnvelope(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        let storage = store.storage

        // Configurations: kept, listed oldest first, replaced, refused for an unknown account.
        try await storage.insertConnectConfiguration(configuration("1001", events: EnvelopeEvent.Kind.allCases))
        try await storage.insertConnectConfiguration(configuration("1002", events: [.envelopeVoided], createdAt: Self.at.addingTimeInterval(1)))
        try await storage.insertConnectConfiguration(configuration("1003", events: EnvelopeEvent.Kind.allCases, enabled: false, createdAt: Self.at.addingTimeInterval(2)))
        #expect(try await storage.connectConfigurations(accountID: "acme").map(\.id) == ["1001", "1002", "1003"])
        #expect(try await storage.connectConfiguration(id: "1002", accountID: "acme")?.eventKinds == [.envelopeVoided])
        #expect(try await storage.connectConfiguration(id: "1002", accountID: "other") == nil)
        var stranger = configuration("2001", events: [.envelopeSent])
        stranger.accountID = "nobody"
        let refused = await #expect(throws: FleetError.self) { try await storage.insertConnectConfiguration(stranger) }
        #expect(refused?.code == .notFound)
        #expect(try await storage.replaceConnectConfiguration(stranger) == false)

        // A synced envelope (an in-person signer who signed on the device, then a remote signer), then
        // voided: its events go to the configurations asking for them.
        let (items, forger) = try await forgedItems(count: 1, remoteSigners: 1)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        let envelopeID = try #require(ack.results.first?.envelopeID)
        _ = try await services.envelopes.void(envelopeID: envelopeID, reason: "wrong amount", accountID: "acme")
        let rows = try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 100).reversed()
        #expect(rows.map { "\($0.configurationID) \($0.event) \($0.recipientID ?? "")" } == [
            "1001 envelope-sent ", "1001 recipient-sent 1", "1001 recipient-delivered 1", "1001 recipient-completed 1", "1001 recipient-sent r1",
            "1001 envelope-voided ", "1002 envelope-voided ",
        ])
        #expect(rows.allSatisfy { $0.envelopeID == envelopeID && $0.attempts == 0 && $0.deliveredAt == nil })
        #expect(try await storage.connectDeliveryCounts() == ConnectDeliveryCounts(pending: 7, failed: 0))

        // A claim gives each (configuration, envelope)'s oldest undelivered event only, and holds it.
        let now = Self.at.addingTimeInterval(86_400 * 365 * 10)
        func claim(_ handle: any CoordinatorStorage, at time: Date, token: String, per: Int = 100, excluding: Set<String> = []) async throws
            -> [ConnectDeliveryRecord]
        {
            try await handle.claimConnectDeliveries(
                now: time, claimUntil: time.addingTimeInterval(60), limit: 10, perConfiguration: per, excluding: excluding, token: token)
        }
        #expect(try await claim(storage, at: now, token: "x", excluding: ["1001", "1002"]).isEmpty, "saturated configurations are left out")
        #expect(try await claim(storage, at: now, token: "x", per: 0).isEmpty, "at most `perConfiguration` of each")
        let first = try await claim(storage, at: now, token: "a")
        #expect(first.map(\.event) == ["envelope-sent", "envelope-voided"])
        #expect(first.map(\.configurationID) == ["1001", "1002"] && first.allSatisfy { $0.claimToken == "a" })
        #expect(try await claim(storage, at: now, token: "b").isEmpty, "claimed rows are held, and the next event of the envelope waits for the first")
        // Another handle on the same store (a second coordinator) sees the claims too.
        let second = try await store.reopened()
        #expect(try await claim(second, at: now, token: "b").isEmpty)
        // A claim that expired is taken over; the lapsed claimant can record nothing any more.
        let later = now.addingTimeInterval(61)
        let takenOver = try await claim(second, at: later, token: "c")
        #expect(takenOver.map(\.id) == first.map(\.id))
        let sent = try #require(takenOver.first { $0.event == "envelope-sent" })
        let voided = try #require(takenOver.first { $0.event == "envelope-voided" })
        #expect(try await storage.finishConnectDelivery(id: sent.id, token: "a", .failed(at: later, error: "late")) == false)
        #expect(try await storage.finishConnectDelivery(id: sent.id, token: "a", .released) == false)
        #expect(try await claim(storage, at: later, token: "d").isEmpty, "the successor's claim still holds")

        // A retry waits for its time; a delivery lets the envelope's next event go.
        #expect(try await storage.finishConnectDelivery(id: sent.id, token: "c", .retry(next: later.addingTimeInterval(30), at: later, error: "HTTP 500")))
        #expect(try await storage.finishConnectDelivery(id: voided.id, token: "c", .delivered(at: later)))
        #expect(try await claim(storage, at: later, token: "e").isEmpty)
        let due = later.addingTimeInterval(30)
        let retried = try await claim(storage, at: due, token: "f")
        #expect(retried.map(\.id) == [sent.id] && retried.first?.attempts == 1 && retried.first?.lastError == "HTTP 500")
        #expect(retried.first?.lastAttemptAt == later)
        #expect(try await storage.finishConnectDelivery(id: sent.id, token: "f", .failed(at: due, error: "HTTP 500")))
        // A failure record does not hold the envelope's later events back.
        let next = try await claim(storage, at: due, token: "g")
        #expect(next.map(\.event) == ["recipient-sent"])
        #expect(try await storage.finishConnectDelivery(id: try #require(next.first).id, token: "g", .released))
        #expect(try await claim(storage, at: due, token: "h").map(\.event) == ["recipient-sent"], "a released claim is free at once")
        let failures = try await storage.connectDeliveries(accountID: "acme", failedOnly: true, limit: 10)
        #expect(failures.map(\.id) == [sent.id] && failures.first?.attempts == 2 && failures.first?.failedAt == due)
        #expect(try await storage.connectDeliveryCounts() == ConnectDeliveryCounts(pending: 5, failed: 1))
        #expect(try await storage.device(accountID: "acme", id: forger.id)?.id == forger.id)
        #expect(try await storage.device(accountID: "other", id: forger.id) == nil)

        // Deleting a configuration drops its rows; keys are kept and revoked per account.
        #expect(try await storage.deleteConnectConfiguration(id: "1001", accountID: "other") == false)
        #expect(try await storage.deleteConnectConfiguration(id: "1001", accountID: "acme"))
        #expect(try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).map(\.configurationID) == ["1002"])
        try await storage.insertConnectKey(ConnectKeyRecord(id: "k1", accountID: "acme", secret: "c2VjcmV0", createdAt: Self.at))
        #expect(try await storage.revokeConnectKey(id: "k1", accountID: "other", at: Self.at) == false)
        #expect(try await storage.revokeConnectKey(id: "k1", accountID: "acme", at: Self.at.addingTimeInterval(5)))
        #expect(try await storage.connectKeys(accountID: "acme").first?.revokedAt == Self.at.addingTimeInterval(5))
    }

    /// Account `acme` with `configurations`, then two envelopes synced by one device (an in-person
    /// signer who signed on it, a remote signer still to sign), then both voided.
    static func syncTwoAndVoidThem(_ storage: any CoordinatorStorage, configurations: [ConnectConfigurationRecord]) async throws {
        let services = StorageServices(storage)
        let token = try await services.seed()
        for configuration in configurations { try await storage.insertConnectConfiguration(configuration) }
        let (items, forger) = try await forgedItems(count: 2, remoteSigners: 1)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        let ack = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        for result in ack.results {
            _ = try await services.envelopes.void(envelopeID: try #require(result.envelopeID), reason: "test", accountID: "acme")
        }
    }

    /// One settling records a batch of outcomes (not a lapsed claimant's), makes each ended row's
    /// successor ready and claims it in the same transaction, and counts what the caller holds.
    @Test(arguments: StoreBackend.allCases)
    func aSettlingRecordsItsOutcomesAndClaimsTheSuccessorsInOneGo(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let storage = store.storage
        try await Self.syncTwoAndVoidThem(storage, configurations: [
            configuration("1001", events: [.envelopeSent, .envelopeVoided]), configuration("1002", events: [.envelopeSent]),
        ])
        let now = Self.at.addingTimeInterval(86_400 * 365 * 10)
        func request(_ token: String, limit: Int = 10, held: [String: Int] = [:]) -> ConnectClaimRequest {
            ConnectClaimRequest(now: now, claimUntil: now.addingTimeInterval(60), limit: limit, perConfiguration: 2, held: held, token: token)
        }
        // Two envelopes' heads for 1001 and two for 1002; 1001 holds one already, so it gets one more.
        let first = try await storage.settleConnectDeliveries([], claim: request("a", held: ["1001": 1])).claimed
        #expect(first.map(\.configurationID) == ["1001", "1002", "1002"], "each configuration up to its room: \(first.map(\.configurationID))")
        #expect(first.allSatisfy { $0.event == "envelope-sent" && $0.claimToken == "a" })
        // Outcomes for all three (one under a token that does not hold it) and a claim, at once:
        // the delivered 1001 row's successor (envelope-voided) is claimed by the same settling.
        let sent1001 = first[0]
        let outcomes = [
            ConnectOutcomeRecord(id: sent1001.id, token: "a", .delivered(at: now)),
            ConnectOutcomeRecord(id: first[1].id, token: "a", .retry(next: now.addingTimeInterval(30), at: now, error: "HTTP 500")),
            ConnectOutcomeRecord(id: first[2].id, token: "stale", .delivered(at: now)),
        ]
        let settled = try await storage.settleConnectDeliveries(outcomes, claim: request("b", held: ["1002": 1]))
        #expect(settled.recorded == [sent1001.id, first[1].id], "a token that does not hold the row records nothing")
        #expect(settled.claimed.map(\.event) == ["envelope-sent", "envelope-voided"], "\(settled.claimed.map(\.event))")
        #expect(settled.claimed.map(\.configurationID) == ["1001", "1001"])
        #expect(settled.claimed.last?.envelopeID == sent1001.envelopeID, "the successor of the delivered row, claimed in the same transaction")
        // An empty settling with no room does nothing; no claim at all records only.
        #expect(try await storage.settleConnectDeliveries([], claim: request("c", limit: 0)).claimed.isEmpty)
        let recordedOnly = try await storage.settleConnectDeliveries([ConnectOutcomeRecord(id: first[2].id, token: "a", .released)], claim: nil)
        #expect(recordedOnly.recorded == [first[2].id] && recordedOnly.claimed.isEmpty)
    }

    /// Ended rows (delivered, failure records) recorded before the cutoff go, oldest first and
    /// at most `limit` a round; pending rows stay however old, and so do rows recorded since.
    @Test(arguments: StoreBackend.allCases)
    func pruningDeletesOnlyEndedRowsPastTheCutoff(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let storage = store.storage
        try await Self.syncTwoAndVoidThem(storage, configurations: [configuration("1001", events: EnvelopeEvent.Kind.allCases)])
        let rows = try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 100)
        #expect(rows.count == 12, "five events per synced envelope and its void: \(rows.count)")
        // The voids were recorded after the sync: their time is the cutoff.
        let cutoff = try #require(rows.filter { $0.event == "envelope-voided" }.map(\.recordedAt).min())
        #expect(rows.filter { $0.recordedAt < cutoff }.count == 10)

        // Two envelopes' first events end (one delivered, one a failure record), then their next ones.
        let now = Self.at.addingTimeInterval(86_400 * 365 * 10)
        var ended: [Int64] = []
        for (round, token) in ["a", "b"].enumerated() {
            let claimed = try await storage.claimConnectDeliveries(
                now: now, claimUntil: now.addingTimeInterval(60), limit: 10, perConfiguration: 10, excluding: [], token: token)
            #expect(claimed.count == 2)
            for (index, row) in claimed.enumerated() {
                let outcome: ConnectAttemptOutcome = round == 0 && index == 1 ? .failed(at: now, error: "HTTP 500") : .delivered(at: now)
                #expect(try await storage.finishConnectDelivery(id: row.id, token: token, outcome))
                ended.append(row.id)
            }
        }
        #expect(try await storage.connectDeliveryCounts() == ConnectDeliveryCounts(pending: 8, failed: 1))

        #expect(try await storage.pruneConnectDeliveries(recordedBefore: .distantPast, limit: 100) == 0, "nothing is that old")
        #expect(try await storage.pruneConnectDeliveries(recordedBefore: cutoff, limit: 1) == 1, "at most `limit` a round")
        let afterOne = Set(try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 100).map(\.id))
        #expect(!afterOne.contains(ended.min()!) && afterOne.count == 11, "the oldest ended row went first")
        #expect(try await storage.pruneConnectDeliveries(recordedBefore: cutoff, limit: 100) == 3)
        #expect(try await storage.pruneConnectDeliveries(recordedBefore: .distantFuture, limit: 100) == 0, "pending rows are never pruned")
        let left = try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 100)
        #expect(left.count == 8 && left.allSatisfy { $0.deliveredAt == nil && $0.failedAt == nil })
        #expect(try await storage.connectDeliveryCounts() == ConnectDeliveryCounts(pending: 8, failed: 0))
    }

    /// A template's change writes `template-modified` with it, happened at its new `lastModified`,
    /// for the configurations asking for it (not an envelope's own, nor one not asking).
    @Test(arguments: StoreBackend.allCases)
    func aTemplatesChangeIsWrittenToTheOutboxWithIt(_ backend: StoreBackend) async throws {
        let store = try await ConformanceStore.make(backend)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        _ = try await services.seed()
        let storage = store.storage
        try await storage.insertConnectConfiguration(configuration("1001", events: [.templateModified]))
        try await storage.insertConnectConfiguration(configuration("1002", events: [.envelopeSent]))
        _ = try await services.templates.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "tpl-1", name: "NDA"))
        #expect(try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).isEmpty, "creating is not modifying")
        let edited = try await services.templates.editTab(accountID: "acme", templateID: "tpl-1", tab: .tabId("company"), change: TabChange(value: "Acme"))
        _ = try await services.templates.replaceDocument(accountID: "acme", templateID: "tpl-1", documentID: "doc1", pdf: SamplePDF.make(pages: 1))
        let rows = try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).reversed()
        #expect(rows.map { "\($0.configurationID) \($0.event) \($0.envelopeID)" } == ["1001 template-modified template:tpl-1", "1001 template-modified template:tpl-1"])
        // PostgreSQL keeps microseconds: the same instant, within one.
        let happened = try #require(rows.first?.occurredAt)
        #expect(abs(happened.timeIntervalSince(edited.summary.lastModified)) < 0.000_01, "\(happened) \(edited.summary.lastModified)")
        #expect(rows.first?.ready == true && rows.last?.ready == false, "in order, one at a time")
        // A change that fails stores nothing, event included.
        await #expect(throws: FleetError.self) {
            try await services.templates.editTab(accountID: "acme", templateID: "tpl-1", tab: .tabId("no-such-tab"), change: TabChange(value: "x"))
        }
        #expect(try await storage.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).count == 2)
    }

    /// Two coordinators claiming at once on one database never both get a row.
    @Test func twoClaimantsNeverShareARowOnPostgreSQL() async throws {
        let store = try await ConformanceStore.make(.postgres)
        defer { store.remove() }
        let services = StorageServices(store.storage)
        let token = try await services.seed()
        try await store.storage.insertConnectConfiguration(configuration("1001", events: EnvelopeEvent.Kind.allCases))
        let (items, forger) = try await forgedItems(count: 20, remoteSigners: 1)
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        _ = try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        let other = try await store.reopened()
        let now = Self.at.addingTimeInterval(86_400 * 365 * 10)
        let claims = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for handle in [store.storage, other, store.storage, other] {
                group.addTask { try await handle.claimConnectDeliveries(now: now, claimUntil: now.addingTimeInterval(60), limit: 7, perConfiguration: 100, excluding: [], token: "c-now").map(\.id) }
            }
            return try await group.reduce(into: [[Int64]]()) { $0.append($1) }
        }
        var all = claims.flatMap { $0 }
        #expect(all.count == Set(all).count, "no row claimed twice: \(claims)")
        // What the racing claims left (they skip the rows another is locking) is claimed after, once.
        while case let more = try await other.claimConnectDeliveries(
            now: now, claimUntil: now.addingTimeInterval(60), limit: 7, perConfiguration: 100, excluding: [], token: "after"
        ).map(\.id), !more.isEmpty {
            all += more
        }
        #expect(all.count == Set(all).count && all.count == 20, "one head per envelope, each claimed once: \(claims) then \(all)")
    }
}

/// The events one change makes, derived from the envelope before and after it.
@Suite struct EnvelopeEventTests {
    let at = Date(timeIntervalSince1970: 1_800_000_000)
    let device = Date(timeIntervalSince1970: 1_799_999_000)

    func aggregate(_ status: String, _ recipients: [(String, String, Date?)]) -> EnvelopeAggregate {
        EnvelopeAggregate(
            envelope: EnvelopeRecord(
                id: "e", accountID: "a", deviceID: "d", sequence: 1, transactionID: "t", localEnvelopeID: "l", name: "n", status: status,
                payload: Data(), deviceSignature: Data(), createdAt: at),
            recipients: recipients.enumerated().map { index, r in
                EnvelopeRecipientRecord(
                    envelopeID: "e", recipientID: r.0, type: "signer", name: "R", routingOrder: index + 1, status: r.1, statusChangedAt: r.2,
                    declineReason: nil)
            })
    }

    @Test func anEnvelopeSignedOfflineReportsEveryStepWithTheDevicesTime() {
        let events = EnvelopeEvent.between(nil, aggregate("completed", [("1", "completed", device), ("2", "signed", device)]), at: at)
        #expect(events.map(\.kind.rawValue) == [
            "envelope-sent", "recipient-sent", "recipient-delivered", "recipient-completed", "recipient-sent", "recipient-delivered",
            "recipient-completed", "envelope-completed",
        ])
        #expect(events.filter { $0.recipientID != nil }.allSatisfy { $0.occurredAt == device && $0.recordedAt == at })
        #expect(events.filter { $0.recipientID == nil }.allSatisfy { $0.occurredAt == at })
    }

    @Test func recipientsAreReportedByRoutingOrderWhateverTheirRowsOrder() {
        var synced = aggregate("completed", [("b", "completed", device), ("a", "completed", device)])
        synced.recipients[0].routingOrder = 2
        synced.recipients[1].routingOrder = 1
        #expect(EnvelopeEvent.between(nil, synced, at: at).compactMap(\.recipientID) == ["a", "a", "a", "b", "b", "b"])
    }

    /// Any spelling of this machine on one of the coordinator's ports is its own listener; another
    /// port, or another machine, is not.
    @Test func everySpellingOfThisMachineOnAnOwnPortIsRefused() throws {
        let links = CaptiveSigningLinks(baseURL: "http://127.0.0.1:48123")
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let connect = ConnectService(store: temporary.store, links: links, now: WallClock.system.now)
        for url in [
            "http://127.0.0.1:48123/x", "http://localhost:48123/x", "http://2130706433:48123/", "http://0x7f.0.0.1:48123/",
            "http://127.1.2.3:48123/", "http://[::1]:48123/", "http://[::ffff:127.0.0.1]:48123/", "http://[0:0:0:0:0:0:0:1]:48123/",
            "http://0.0.0.0:48123/",
        ] {
            #expect(connect.ownListener(url) != nil, "\(url)")
        }
        for address in LocalAddresses.interfaceAddresses() where address.count == 4 {
            let url = "http://\(address.map(String.init).joined(separator: ".")):48123/"
            #expect(connect.ownListener(url) != nil, "this machine's interface address \(url)")
        }
        for url in ["http://127.0.0.1:48124/x", "http://192.0.2.1:48123/x", "http://[2001:db8::1]:48123/"] {
            #expect(connect.ownListener(url) == nil, "\(url)")
        }
    }

    @Test func routingAndEndsReportOnlyWhatChanged() {
        let sent = aggregate("sent", [("1", "sent", at), ("2", "created", nil)])
        #expect(EnvelopeEvent.between(nil, sent, at: at).map(\.kind.rawValue) == ["envelope-sent", "recipient-sent"])
        let signedFirst = aggregate("sent", [("1", "completed", at), ("2", "sent", at)])
        #expect(EnvelopeEvent.between(sent, signedFirst, at: at).map { "\($0.kind.rawValue) \($0.recipientID ?? "")" } == [
            "recipient-delivered 1", "recipient-completed 1", "recipient-sent 2",
        ])
        let declined = aggregate("declined", [("1", "completed", at), ("2", "declined", at)])
        #expect(EnvelopeEvent.between(signedFirst, declined, at: at).map(\.kind.rawValue) == ["recipient-declined", "envelope-declined"])
        let voided = aggregate("voided", [("1", "sent", at), ("2", "created", nil)])
        #expect(EnvelopeEvent.between(sent, voided, at: at).map(\.kind.rawValue) == ["envelope-voided"])
        #expect(EnvelopeEvent.between(sent, sent, at: at).isEmpty)
        let future = at.addingTimeInterval(3600)
        let clockAhead = aggregate("sent", [("1", "delivered", future), ("2", "created", nil)])
        #expect(EnvelopeEvent.between(sent, clockAhead, at: at).map(\.occurredAt) == [at], "a device clock ahead of the server's is clamped")
    }
}
