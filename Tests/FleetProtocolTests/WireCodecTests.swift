import Foundation
import MessagePack
import Testing

@testable import FleetProtocol

private func hex(_ text: String) -> [UInt8] {
    text.split(whereSeparator: \.isWhitespace).map { UInt8($0, radix: 16)! }
}

@Suite struct ProtocolDocumentExampleTests {
    // The bytes below are copied from docs/protocol.md section 8 (computed
    // there with Python's msgpack), so the document and the code cannot drift.
    let sentAt = Date(timeIntervalSince1970: 1_795_262_400.25)

    @Test func helloHeaderMatchesTheDocument() throws {
        let header = MessageHeader(type: Hello.messageType, id: 1, sentAt: sentAt)
        let bytes = try WireCodec().encodeHeader(header)
        #expect(
            bytes == hex("84 a1 76 92 01 00 a1 74 a5 68 65 6c 6c 6f a2 69 64 01 a2 61 74 d7 ff 3b 9a ca 00 6b 01 87 c0"))
    }

    @Test func helloBodyMatchesTheDocument() throws {
        let body = try WireCodec().encodeBody(Hello(deviceID: "device-1", client: "signfleet-node/0.1.0"))
        #expect(
            body == hex(
                """
                83 a8 64 65 76 69 63 65 49 44 a8 64 65 76 69 63 65 2d 31 a6 63 6c 69 65 6e 74
                b4 73 69 67 6e 66 6c 65 65 74 2d 6e 6f 64 65 2f 30 2e 31 2e 30
                b6 73 75 70 70 6f 72 74 65 64 4d 61 6a 6f 72 56 65 72 73 69 6f 6e 73 91 01
                """))
    }

    @Test func errorBodyMatchesTheDocument() throws {
        let body = try WireCodec().encodeBody(FleetError(.unknownMessageType, "unknown message type \"teleport\""))
        #expect(
            body == hex(
                """
                83 a4 63 6f 64 65 b4 75 6e 6b 6e 6f 77 6e 5f 6d 65 73 73 61 67 65 5f 74 79 70 65
                a7 6d 65 73 73 61 67 65 bf 75 6e 6b 6e 6f 77 6e 20 6d 65 73 73 61 67 65 20 74 79 70 65
                20 22 74 65 6c 65 70 6f 72 74 22 a9 72 65 74 72 79 61 62 6c 65 c2
                """))
    }

    @Test func replyHeaderFromTheDocumentDecodes() throws {
        let bytes = hex(
            "85 a1 76 92 01 00 a1 74 ab 68 65 6c 6c 6f 2e 72 65 70 6c 79 a2 69 64 07 a2 72 65 01 a2 61 74 d7 ff 3b d7 d3 00 6b 01 87 c0"
        )
        let message = try WireCodec().decode([bytes, try WireCodec().encodeBody(HeartbeatReply(serverInstance: "x"))])
        #expect(message.header.type == HelloReply.messageType)
        #expect(message.header.id == 7)
        #expect(message.header.replyTo == 1)
        #expect(abs(message.header.sentAt.timeIntervalSince1970 - 1_795_262_400.251) < 1e-6)
    }
}

@Suite struct WireCodecTests {
    let codec = WireCodec()

    func roundTrip<Body: FleetMessageBody & Equatable>(_ body: Body, replyTo: UInt64? = nil) throws {
        let header = MessageHeader(type: Body.messageType, id: 42, replyTo: replyTo, sentAt: Date(timeIntervalSince1970: 1_700_000_000.5))
        let frames = try codec.encode(body, header: header)
        #expect(frames.count == 2)
        let message = try codec.decode(frames)
        #expect(message.header == header)
        #expect(try codec.decodeBody(Body.self, from: message) == body)
    }

    @Test func everyMessageTypeRoundTrips() throws {
        let when = Date(timeIntervalSince1970: 1_800_000_000)
        let summary = TemplateSummary(templateID: "t-1", name: "NDA", folder: "Legal", lastModified: when)
        try roundTrip(Hello(deviceID: "d-1", client: "test"))
        try roundTrip(
            HelloReply(server: "s", heartbeatIntervalMs: 500, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: "i"),
            replyTo: 1)
        try roundTrip(Heartbeat())
        try roundTrip(HeartbeatReply(serverInstance: "i"), replyTo: 1)
        try roundTrip(AccessTokenRequest(email: "a@example.com", secret: "s3cret"))
        try roundTrip(AccessTokenReply(accessToken: "tok", expiresAt: when), replyTo: 1)
        try roundTrip(UserInfoRequest(accessToken: "tok"))
        try roundTrip(
            UserInfoReply(
                accountID: "acc", accountName: "Acme", userID: "u", userName: "Ada", email: "ada@example.com",
                host: "http://127.0.0.1:8080", offlineSigningEnabled: true), replyTo: 1)
        try roundTrip(EnrollDevice(accessToken: "tok", deviceID: "d-1", publicKey: Array(repeating: 7, count: 32)))
        try roundTrip(EnrollDeviceReply(deviceID: "d-1", accountID: "acc", enrolledAt: when, lastAppliedSequence: 9))
        try roundTrip(
            SyncPush(
                deviceID: "d-1",
                items: (1...3).map {
                    SyncItem(sequence: $0, transactionID: "tx-\($0)", payload: Array(repeating: UInt8($0), count: 6000), signature: Array(repeating: 1, count: 64))
                }))
        try roundTrip(
            SyncAck(
                status: .gap, lastApplied: 3, expectedSequence: 4,
                results: [
                    SyncItemResult(sequence: 2, outcome: .duplicate, envelopeID: "e-2"),
                    SyncItemResult(sequence: 3, outcome: .rejected, reason: "bad signature"),
                ]), replyTo: 1)
        try roundTrip(SyncResultsQuery(deviceID: "tablet-1", after: 500, limit: 250))
        try roundTrip(
            SyncResultsReply(
                lastApplied: 3,
                results: [
                    SyncStoredResult(sequence: 1, outcome: .applied, envelopeID: "env-1", transactionID: "tx-1", envelopeSequence: 1),
                    SyncStoredResult(sequence: 2, outcome: .rejected, reason: "bad signature"),
                    SyncStoredResult(sequence: 3, outcome: .duplicate, envelopeID: "env-1", transactionID: "tx-1", envelopeSequence: 1),
                ], nextAfter: 3), replyTo: 1)
        try roundTrip(TemplateListRequest(accessToken: "tok", searchText: "nda", nameMatch: .prefix, folder: "Legal", start: 20, count: 10))
        try roundTrip(TemplateListReply(templates: [summary], total: 1, nextStart: nil), replyTo: 1)
        try roundTrip(TemplateFetchRequest(accessToken: "tok", templateID: "t-1"))
        try roundTrip(TemplateFetchReply(summary: summary, definition: [1, 2, 3]), replyTo: 1)
        try roundTrip(
            RecipientViewRequest(
                accessToken: "tok", envelopeID: "e-1", clientUserID: "c-1", name: "Ada", email: "ada@example.com",
                returnURL: "http://app/return", locale: "de-CH"))
        try roundTrip(RecipientViewReply(url: "http://127.0.0.1:8080/signing/abc", expiresAt: when), replyTo: 1)
        try roundTrip(FleetError(.rateLimited, "slow down", retryable: true, retryAfterMs: 1500), replyTo: 1)
    }

    @Test func catalogListsEveryRequestOnce() {
        #expect(FleetMessageCatalog.requestTypes.count == FleetMessageCatalog.requests.count)
        #expect(FleetMessageCatalog.requestTypes.isDisjoint(with: FleetMessageCatalog.replyTypes))
    }

    private func expectFailure(_ frames: [[UInt8]], code: FleetErrorCode, codec: WireCodec = WireCodec(), headerID: UInt64? = nil) {
        do {
            _ = try codec.decode(frames)
            Issue.record("expected \(code), but the message decoded")
        } catch {
            #expect(error.error.code == code, "\(error.error)")
            if let headerID { #expect(error.header?.id == headerID) }
        }
    }

    @Test func unknownMajorVersionIsRefusedWithTheTypedError() throws {
        let header = MessageHeader(version: ProtocolVersion(major: 2, minor: 0), type: Heartbeat.messageType, id: 5)
        expectFailure(try codec.encode(Heartbeat(), header: header), code: .unsupportedVersion, headerID: 5)
    }

    @Test func headerOfAnotherShapeFromAnotherMajorVersionIsStillUnsupportedVersion() throws {
        struct FutureHeader: Encodable { var v = [3, 1]; var kind = "x" }
        let frames = [try MessagePackEncoder().encode(FutureHeader()), try codec.encodeBody(Heartbeat())]
        expectFailure(frames, code: .unsupportedVersion)
    }

    @Test func newerMinorVersionIsAccepted() throws {
        let header = MessageHeader(version: ProtocolVersion(major: 1, minor: 9), type: Heartbeat.messageType, id: 5)
        let message = try codec.decode(try codec.encode(Heartbeat(), header: header))
        #expect(message.header.version.minor == 9)
    }

    @Test func unknownTypeIsRefusedWithTheTypedError() throws {
        let frames = try codec.encode(Heartbeat(), header: MessageHeader(type: "teleport", id: 9))
        expectFailure(frames, code: .unknownMessageType, headerID: 9)
    }

    @Test func wrongFrameCountIsMalformed() throws {
        let frames = try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 1))
        expectFailure([frames[0]], code: .malformedMessage)
        expectFailure(frames + [[0xc0]], code: .malformedMessage)
        expectFailure([], code: .malformedMessage)
        // A readable header still names the request the error answers (docs/protocol.md: `re`).
        for wrong in [[frames[0]], frames + [[0xc0]]] {
            do {
                _ = try codec.decode(wrong)
                Issue.record("decoded \(wrong.count) frames")
            } catch {
                #expect(error.header?.id == 1, "\(wrong.count) frames")
            }
        }
    }

    @Test func garbageHeaderIsMalformed() {
        expectFailure([[0xff, 0x00, 0x13], [0x80]], code: .malformedMessage)
        expectFailure([[0x93, 0x01, 0x02, 0x03], [0x80]], code: .malformedMessage)
        expectFailure([[], [0x80]], code: .malformedMessage)
    }

    @Test func oversizedFrameIsRefused() throws {
        let small = WireCodec(limits: WireLimits(maxMessageSize: 1024))
        let frames = try small.encode(
            SyncPush(deviceID: "d", items: [SyncItem(sequence: 1, transactionID: "t", payload: Array(repeating: 0, count: 2000), signature: [])]),
            header: MessageHeader(type: SyncPush.messageType, id: 1))
        expectFailure(frames, code: .messageTooLarge, codec: small)
    }

    @Test func bodyOfTheWrongShapeIsInvalidBodyNamingTheField() throws {
        struct WrongPush: Encodable { var deviceID = "d"; var items = "not an array" }
        let frames = [
            try codec.encodeHeader(MessageHeader(type: SyncPush.messageType, id: 3)),
            try MessagePackEncoder().encode(WrongPush()),
        ]
        let message = try codec.decode(frames)
        #expect(throws: FleetError.self) { try codec.decodeBody(SyncPush.self, from: message) }
        do {
            _ = try codec.decodeBody(SyncPush.self, from: message)
        } catch {
            #expect(error.code == .invalidBody)
            #expect(error.message.contains("items"), "\(error.message)")
        }
    }
}
