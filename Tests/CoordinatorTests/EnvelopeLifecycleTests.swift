import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import GRDB
import Logging
import SignatureCapture
import Testing
import ZeroMQ

@testable import Coordinator

private typealias Status = EnvelopeLifecycle.Status
private typealias RStatus = RecipientStatus

/// An envelope in `status`: in-person signer 1 done (order 1), remote signers r1 (order 2)
/// and r2 (order 3), and a carbon copy at order 2.
private func lifecycle(in status: Status) -> EnvelopeLifecycle {
    func recipients(r1: RStatus, r2: RStatus, cc: RStatus, reason: String? = nil) -> [EnvelopeLifecycle.Recipient] {
        [
            .init(id: "1", type: "inPersonSigner", routingOrder: 1, status: .signed),
            .init(id: "r1", type: "signer", routingOrder: 2, status: r1, declineReason: reason),
            .init(id: "cc", type: "carbonCopy", routingOrder: 2, status: cc),
            .init(id: "r2", type: "signer", routingOrder: 3, status: r2),
        ]
    }
    switch status {
    case .created: return EnvelopeLifecycle(status: .created, recipients: recipients(r1: .created, r2: .created, cc: .created))
    case .sent: return EnvelopeLifecycle(status: .sent, recipients: recipients(r1: .sent, r2: .created, cc: .completed))
    case .delivered: return EnvelopeLifecycle(status: .delivered, recipients: recipients(r1: .delivered, r2: .created, cc: .completed))
    case .signed, .completed:
        return EnvelopeLifecycle(status: status, recipients: recipients(r1: .signed, r2: .signed, cc: .completed))
    case .declined:
        return EnvelopeLifecycle(status: .declined, recipients: recipients(r1: .declined, r2: .created, cc: .completed, reason: "no"))
    case .voided:
        return EnvelopeLifecycle(status: .voided, recipients: recipients(r1: .sent, r2: .created, cc: .completed), voidReason: "wrong terms")
    }
}

private enum EventKind: String, CaseIterable, CustomTestStringConvertible {
    case synced, delivered, signed, declined, void
    var event: EnvelopeLifecycle.Event {
        switch self {
        case .synced: return .synced
        case .delivered: return .recipientDelivered("r1")
        case .signed: return .recipientSigned("r1")
        case .declined: return .recipientDeclined("r1", reason: "not my signature")
        case .void: return .void(reason: "sent by mistake")
        }
    }
    var testDescription: String { rawValue }
}

/// The whole table: every status × every event, the status after it or `nil` when refused.
private let transitions: [Status: [EventKind: Status]] = [
    .created: [.synced: .sent],
    .sent: [.delivered: .delivered, .signed: .sent, .declined: .declined, .void: .voided],
    .delivered: [.signed: .sent, .declined: .declined, .void: .voided],
    .signed: [:],
    .completed: [:],
    .declined: [:],
    .voided: [:],
]

/// The `FleetError` `body` throws, or nil (recording an issue when it throws something else).
func fleetError(_ body: () async throws -> Void) async -> FleetError? {
    do {
        try await body()
        return nil
    } catch let error as FleetError {
        return error
    } catch {
        Issue.record("expected a FleetError, got \(error)")
        return nil
    }
}

@Suite struct EnvelopeLifecycleTableTests {
    @Test(arguments: Status.allCases, EventKind.allCases)
    fileprivate func everyStatusAndEvent(status: Status, kind: EventKind) {
        var machine = lifecycle(in: status)
        let before = machine
        let expected = transitions[status]?[kind]
        do {
            try machine.apply(kind.event)
            #expect(expected != nil, "\(kind) from \(status) must be refused")
            #expect(machine.status == expected)
        } catch {
            #expect(expected == nil, "\(kind) from \(status) must be allowed: \(error)")
            #expect(error.code == .invalidRequest)
            #expect(machine == before, "a refused event changes nothing")
        }
    }

    @Test func syncedMakesTheFirstOpenRoutingOrderCurrentAndCopiesItsCarbonCopy() throws {
        var machine = lifecycle(in: .created)
        let changed = try machine.apply(.synced)
        #expect(machine.status == .sent)
        #expect(machine.currentRecipientIDs == ["r1"])
        #expect(Set(changed) == ["r1", "cc"])
        #expect(machine.recipients.map(\.status) == [.signed, .sent, .completed, .created])
    }

    @Test func signingAdvancesRoutingAndTheLastSignatureCompletes() throws {
        var machine = lifecycle(in: .sent)
        try machine.apply(.recipientSigned("r1"))
        #expect(machine.status == .sent)
        #expect(machine.currentRecipientIDs == ["r2"])
        try machine.apply(.recipientDelivered("r2"))
        #expect(machine.status == .delivered)
        try machine.apply(.recipientSigned("r2"))
        #expect(machine.status == .completed)
        #expect(machine.currentRecipientIDs.isEmpty)
        #expect(machine.recipients.allSatisfy { $0.status.isDone })
    }

    @Test func onlyCurrentKnownRecipientsActAndReasonsMustNotBeEmpty() {
        var machine = lifecycle(in: .sent)
        let before = machine
        #expect(throws: FleetError.self) { try machine.apply(.recipientSigned("r2")) }  // not current yet
        #expect(throws: FleetError.self) { try machine.apply(.recipientSigned("cc")) }  // carbon copies never act
        #expect(throws: FleetError.self) { try machine.apply(.recipientSigned("1")) }  // already signed
        do {
            try machine.apply(.recipientSigned("nobody"))
            Issue.record("an unknown recipient must be refused")
        } catch {
            #expect(error.code == .notFound)
        }
        #expect(throws: FleetError.self) { try machine.apply(.void(reason: "  ")) }
        #expect(throws: FleetError.self) { try machine.apply(.recipientDeclined("r1", reason: "")) }
        #expect(machine == before)
        #expect(machine.voidReason == nil)
    }

    @Test func voidingKeepsTheReason() throws {
        var machine = lifecycle(in: .delivered)
        try machine.apply(.void(reason: " wrong terms "))
        #expect(machine.status == .voided)
        #expect(machine.voidReason == "wrong terms")
        #expect(machine.currentRecipientIDs.isEmpty)
    }

    @Test func sameRoutingOrderIsParallelAndDeliveredNeedsEveryCurrentRecipient() throws {
        var machine = EnvelopeLifecycle(recipients: [
            .init(id: "a", type: "signer", routingOrder: 1, status: .created),
            .init(id: "b", type: "signer", routingOrder: 1, status: .created),
            .init(id: "c", type: "signer", routingOrder: 2, status: .created),
        ])
        try machine.apply(.synced)
        #expect(machine.currentRecipientIDs == ["a", "b"])
        try machine.apply(.recipientDelivered("a"))
        #expect(machine.status == .sent)
        try machine.apply(.recipientDelivered("b"))
        #expect(machine.status == .delivered)
        try machine.apply(.recipientSigned("b"))
        #expect(machine.currentRecipientIDs == ["a"], "routing waits for every recipient of the order")
        try machine.apply(.recipientSigned("a"))
        #expect(machine.currentRecipientIDs == ["c"])
    }

    @Test func syncedStartsDeclinedOrCompletedFromTheDevice() throws {
        var declined = EnvelopeLifecycle(recipients: [
            .init(id: "1", type: "inPersonSigner", routingOrder: 1, status: .declined, declineReason: "no"),
            .init(id: "r1", type: "signer", routingOrder: 2, status: .created),
        ])
        try declined.apply(.synced)
        #expect(declined.status == .declined)
        var completed = EnvelopeLifecycle(recipients: [
            .init(id: "1", type: "inPersonSigner", routingOrder: 1, status: .signed),
            .init(id: "cc", type: "carbonCopy", routingOrder: 2, status: .created),
        ])
        try completed.apply(.synced)
        #expect(completed.status == .completed)
        #expect(completed.recipients.map(\.status) == [.signed, .completed])
    }
}

/// Envelopes with one in-person signer (signed on the device) and two remote signers at
/// routing orders 2 and 3, signed by a real DeviceNode.
private func remoteSignerItems(count: Int, directory: URL, deviceID: String) async throws -> (DeviceNode, [SyncItem]) {
    var configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("\(deviceID).sqlite").path)
    configuration.deviceId = deviceID
    let user = UserInfo(accountId: "acme", accountName: "Acme", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
    let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
    try await node.login(accessToken: "t")
    for index in 0..<count {
        let envelope = try SampleEnvelope.inPerson(signers: 1, remoteSigners: 2, transactionId: "\(deviceID)-remote-\(index)")
        let id = try await node.compose(envelope, mode: .offline)
        _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: UInt64(index + 1)))
    }
    return (node, try await node.pendingOutboxItems().compactMap(\.syncItem))
}

@Suite struct EnvelopeLifecycleStoreTests {
    /// Syncs `count` envelopes with remote signers; returns their server ids.
    private func synced(_ fixture: IngestFixture, count: Int = 1) async throws -> (DeviceNode, [String]) {
        let (node, items) = try await remoteSignerItems(count: count, directory: fixture.temporary.directory, deviceID: "tablet-lc")
        try await fixture.enroll(node.deviceId, key: node.publicKey)
        let ack = try await fixture.push(node.deviceId, items)
        #expect(ack.results.map(\.outcome) == Array(repeating: .applied, count: count))
        return (node, ack.results.compactMap(\.envelopeID))
    }

    @Test func ingestStoresTheRecipientsAndRoutesToTheFirstRemoteSigner() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture)
        let envelope = try await fixture.services.envelopes.envelope(id: ids[0], accountID: "acme")
        #expect(envelope.status == "sent")
        #expect(envelope.deviceID == "tablet-lc")
        #expect(envelope.voidReason == nil)
        #expect(envelope.recipients.map(\.recipientID) == ["1", "r1", "r2"])
        #expect(envelope.recipients.map(\.routingOrder) == [1, 2, 3])
        #expect(envelope.recipients.map(\.type) == ["inPersonSigner", "signer", "signer"])
        #expect(envelope.recipients.map(\.status) == ["signed", "sent", "created"])
        #expect(envelope.recipients[1].statusChangedAt != nil)
        #expect(envelope.recipients[1].name == "Remote Signer 1")
        try await node.close()
    }

    @Test func actionsAdvanceRoutingAndComplete() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture)
        let service = fixture.services.envelopes
        var envelope = try await service.act(envelopeID: ids[0], recipientID: "r1", action: .deliver)
        #expect(envelope.status == "delivered")
        let early = await fleetError { _ = try await service.act(envelopeID: ids[0], recipientID: "r2", action: .sign) }
        #expect(early?.code == .invalidRequest, "r2 is not current before r1 signed")
        envelope = try await service.act(envelopeID: ids[0], recipientID: "r1", action: .sign)
        #expect(envelope.status == "sent")
        #expect(envelope.recipients.map(\.status) == ["signed", "signed", "sent"])
        envelope = try await service.act(envelopeID: ids[0], recipientID: "r2", action: .sign)
        #expect(envelope.status == "completed")
        #expect(envelope.recipients.map(\.status) == ["signed", "signed", "signed"])
        let void = await fleetError { _ = try await service.void(envelopeID: ids[0], reason: "too late") }
        #expect(void?.code == .invalidRequest, "a completed envelope cannot be voided")
        // Stored, not just replied.
        #expect(try await service.envelope(id: ids[0]).status == "completed")
        try await node.close()
    }

    @Test func aDeclineEndsTheEnvelope() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture)
        let service = fixture.services.envelopes
        let noReason = await fleetError { _ = try await service.act(envelopeID: ids[0], recipientID: "r1", action: .decline) }
        #expect(noReason?.code == .invalidRequest)
        let envelope = try await service.act(envelopeID: ids[0], recipientID: "r1", action: .decline, reason: "wrong amount")
        #expect(envelope.status == "declined")
        #expect(envelope.recipients[1].status == "declined")
        #expect(envelope.recipients[1].declineReason == "wrong amount")
        let after = await fleetError { _ = try await service.act(envelopeID: ids[0], recipientID: "r1", action: .sign) }
        #expect(after?.code == .invalidRequest)
        let void = await fleetError { _ = try await service.void(envelopeID: ids[0], reason: "x") }
        #expect(void?.code == .invalidRequest)
        try await node.close()
    }

    @Test func voidNeedsAReasonAndASentOrDeliveredEnvelope() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture, count: 2)
        let service = fixture.services.envelopes
        let empty = await fleetError { _ = try await service.void(envelopeID: ids[0], reason: " ") }
        #expect(empty?.code == .invalidRequest)
        let long = await fleetError { _ = try await service.void(envelopeID: ids[0], reason: String(repeating: "x", count: 501)) }
        #expect(long?.code == .invalidRequest)
        // From sent.
        var envelope = try await service.void(envelopeID: ids[0], reason: "sent by mistake")
        #expect(envelope.status == "voided")
        #expect(envelope.voidReason == "sent by mistake")
        let twice = await fleetError { _ = try await service.void(envelopeID: ids[0], reason: "again") }
        #expect(twice?.code == .invalidRequest)
        // From delivered.
        _ = try await service.act(envelopeID: ids[1], recipientID: "r1", action: .deliver)
        envelope = try await service.void(envelopeID: ids[1], reason: "wrong terms")
        #expect(envelope.status == "voided")
        let acting = await fleetError { _ = try await service.act(envelopeID: ids[1], recipientID: "r1", action: .sign) }
        #expect(acting?.code == .invalidRequest)
        let missing = await fleetError { _ = try await service.void(envelopeID: "env-none", reason: "x") }
        #expect(missing?.code == .notFound)
        try await node.close()
    }

    @Test func theWireQueriesVoidsAndActsWithinTheTokensAccount() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture)
        _ = try await fixture.services.accounts.createAccount(id: "globex", name: "Globex", offlineSigning: true)
        _ = try await fixture.services.accounts.createUser(accountID: "globex", name: "Gus", email: "gus@globex.example", secret: "secret-456")
        let otherToken = try await fixture.services.auth.issueToken(email: "gus@globex.example", secret: "secret-456").accessToken

        var router = RequestRouter()
        fixture.services.register(in: &router)
        var logger = Logger(label: "lifecycle-wire")
        logger.logLevel = .critical
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "lifecycle-wire")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: "tablet-lc", requestTimeout: .seconds(5), maxAttempts: 1),
            loop: loop, logger: logger, clock: ManualClock())
        let connection = Task { await client.run() }

        do {
            let envelope = try await client.request(EnvelopeQuery(accessToken: fixture.token, envelopeID: ids[0]))
            #expect(envelope.envelopeID == ids[0])
            #expect(envelope.status == "sent")
            #expect(envelope.recipients.map(\.status) == ["signed", "sent", "created"])
            #expect(envelope.transactionID == "tablet-lc-remote-0")
            #expect(await client.lastRateLimit != nil, "envelope requests are metered")

            for request in [
                { _ = try await client.request(EnvelopeQuery(accessToken: otherToken, envelopeID: ids[0])) },
                { _ = try await client.request(EnvelopeVoid(accessToken: otherToken, envelopeID: ids[0], reason: "mine")) },
                { _ = try await client.request(RecipientAction(accessToken: otherToken, envelopeID: ids[0], recipientID: "r1", action: .sign)) },
            ] as [@Sendable () async throws -> Void] {
                let error = await fleetError(request)
                #expect(error?.code == .notFound, "another account's envelope does not exist for it")
            }
            let badToken = await fleetError { _ = try await client.request(EnvelopeQuery(accessToken: "nope", envelopeID: ids[0])) }
            #expect(badToken?.code == .unauthenticated)

            let acted = try await client.request(RecipientAction(accessToken: fixture.token, envelopeID: ids[0], recipientID: "r1", action: .sign))
            #expect(acted.status == "sent")
            #expect(acted.recipients.map(\.status) == ["signed", "signed", "sent"])
            let notCurrent = await fleetError {
                _ = try await client.request(RecipientAction(accessToken: fixture.token, envelopeID: ids[0], recipientID: "r1", action: .sign))
            }
            #expect(notCurrent?.code == .invalidRequest)
            let voided = try await client.request(EnvelopeVoid(accessToken: fixture.token, envelopeID: ids[0], reason: "replaced"))
            #expect(voided.status == "voided")
            #expect(voided.voidReason == "replaced")
            let again = try await client.request(EnvelopeQuery(accessToken: fixture.token, envelopeID: ids[0]))
            #expect(again == voided)
        } catch {
            Issue.record("unexpected: \(error)")
        }

        try? await node.close()
        connection.cancel()
        await connection.value
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
    }

    @Test func theAdminCommandShowsActsAndVoids() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, ids) = try await synced(fixture)
        try await node.close()
        let binary = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"]
            ?? FileManager.default.currentDirectoryPath + "/.build/debug/signfleet"
        try #require(FileManager.default.isExecutableFile(atPath: binary), "signfleet not built at \(binary)")
        let store = fixture.temporary.store.path
        func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            let (status, output, errors) = try await ChildProcess.run(binary, ["admin", "envelope"] + arguments + ["--store", store])
            return (status, output + "\n" + errors)
        }
        let shown = try await run(["show", "--id", ids[0]])
        #expect(shown.status == 0)
        #expect(shown.output.contains("status=sent"))
        #expect(shown.output.contains("recipient r1 signer \"Remote Signer 1\" order=2 status=sent"))
        let acted = try await run(["act", "--id", ids[0], "--recipient", "r1", "--action", "sign"])
        #expect(acted.status == 0)
        #expect(acted.output.contains("recipient r2 signer \"Remote Signer 2\" order=3 status=sent"))
        let refused = try await run(["void", "--id", ids[0], "--reason", " "])
        #expect(refused.status == 1)
        #expect(refused.output.contains("invalid_request"))
        let voided = try await run(["void", "--id", ids[0], "--reason", "replaced"])
        #expect(voided.status == 0)
        #expect(voided.output.contains("status=voided"))
        #expect(voided.output.contains("voided: replaced"))
        let missing = try await run(["show", "--id", "env-none"])
        #expect(missing.status == 1)
        #expect(missing.output.contains("not_found"))
        #expect(try await fixture.services.envelopes.envelope(id: ids[0]).status == "voided")
    }
}
