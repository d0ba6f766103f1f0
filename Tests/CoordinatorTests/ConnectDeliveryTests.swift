import Crypto
import DeviceNode
import Envelopes
import FleetProtocol
import FleetTesting
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization
import Testing

@testable import Coordinator

/// A Connect listener on a real socket (port 0): records every POST it reads and answers what
/// the test says — a status, or no answer at all (a hang).
final class ConnectListener: Sendable {
    struct Received: Sendable {
        var path: String
        var body: Data
        /// By lower-case name.
        var headers: [String: String]
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
        var event: String { json["event"] as? String ?? "" }
    }

    enum Answer: Sendable {
        case status(Int), hang
        /// A status with a body of this many bytes.
        case body(Int, bytes: Int)
        /// A redirect to this URL.
        case redirect(String)
    }

    let received: AsyncStream<Received>
    private let record: AsyncStream<Received>.Continuation
    private let answers: Mutex<[String: [Answer]]>
    private let running: Mutex<Task<Void, any Error>?> = Mutex(nil)
    /// The requests held unanswered (`.hang`), answered when the listener stops.
    private let held = Mutex<[CheckedContinuation<Void, Never>]>([])

    /// - Parameter answers: per path, the answers to give in turn; past them, 200.
    init(answers: [String: [Answer]] = [:]) {
        (received, record) = AsyncStream<Received>.makeStream()
        self.answers = Mutex(answers)
    }

    func start() async throws -> String {
        let router = Router()
        router.post("**") { [self] request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let path = request.uri.path
            record.yield(Received(path: path, body: Data(buffer: body), headers: headers))
            let answer = answers.withLock { queued -> Answer in
                guard var list = queued[path], !list.isEmpty else { return .status(200) }
                let first = list.removeFirst()
                queued[path] = list
                return first
            }
            switch answer {
            case .status(let code): return Response(status: HTTPResponse.Status(code: code))
            case .body(let code, let bytes):
                return Response(status: HTTPResponse.Status(code: code), body: ResponseBody(byteBuffer: ByteBuffer(repeating: 0x61, count: bytes)))
            case .redirect(let location):
                return Response(status: .found, headers: [.location: location])
            case .hang:
                await withCheckedContinuation { continuation in held.withLock { $0.append(continuation) } }
                return Response(status: .ok)
            }
        }
        let (ports, announce) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "connect-listener")
        logger.logLevel = .critical
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in announce.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        running.withLock { $0 = Task { try await application.runService() } }
        let port = try await firstElement(of: ports, "the listener's port")
        return "http://127.0.0.1:\(port)"
    }

    func stop() async {
        for request in held.withLock({ list in defer { list = [] }; return list }) { request.resume() }
        let task = running.withLock { $0 }
        task?.cancel()
        _ = try? await task?.value
        record.finish()
    }
}

/// Connect end to end (docs/webhooks.md): a configuration made over REST, envelopes changed over
/// REST, the publisher delivering to a real listener — signed, in order per envelope, retried
/// after a 500 with the attempt counted, a failure record when the attempts run out, and a
/// hanging listener costing only its own deliveries.
@Suite(.timeLimit(.minutes(3))) struct ConnectDeliveryTests {
    static let pdf = SamplePDF.make(pages: 1).base64EncodedString()

    static func envelope(subject: String) -> String {
        #"{"emailSubject": "\#(subject)", "status": "sent", "documents": [{"documentId": "1", "name": "x", "documentBase64": "\#(pdf)"}], "recipients": {"signers": [{"recipientId": "1", "name": "A", "email": "a@example.com", "clientUserId": "c", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "1", "xPosition": "10", "yPosition": "10"}]}}]}}"#
    }

    /// A publisher on the rig's store whose waits are on `clock` (moved by the test) and whose stamps are the rig's.
    static func publisher(
        _ rig: CaptiveRig, clock: ManualClock, attempts: Int = 8, maxInFlight: Int = 16, retention: Duration? = ConnectPublisherConfiguration().retention
    ) -> ConnectPublisher {
        var configuration = ConnectPublisherConfiguration()
        configuration.retention = retention
        configuration.maxAttempts = attempts
        configuration.maxInFlight = maxInFlight
        configuration.jitterSeed = 7
        configuration.maxInFlightPerListener = 2
        let stamp = rig.clock
        return ConnectPublisher(
            store: rig.services.envelopes.store, connect: rig.services.connect, configuration: configuration, clock: clock,
            wall: WallClock { stamp.now() }, transport: HTTPConnectTransport(), logger: Logger(label: "connect-test"))
    }

    static func configure(_ rig: CaptiveRig, url: String, events: [String], hmac: Bool = true, includeData: [String] = ["recipients"]) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: [
            "name": "backend", "urlToPublishTo": url, "allowEnvelopePublish": "true", "allUsers": "true", "includeHMAC": hmac ? "true" : "false",
            "deliveryMode": "SIM", "events": events, "eventData": ["format": "json", "version": "restv2.1", "includeData": includeData],
        ])
        let answer = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/connect", token: rig.token, body: String(decoding: body, as: UTF8.self))
        #expect(answer.status == 201, "\(answer.json)")
        return try #require(answer.json["connectId"] as? String)
    }

    @Test func deliveriesAreSignedOrderedPerEnvelopeAndRetriedAfterA500() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener(answers: ["/hooks": [.status(500)]])
        let base = try await listener.start()
        let keys = [try await rig.services.connect.addKey(accountID: "acme"), try await rig.services.connect.addKey(accountID: "acme")]
        let connectID = try await Self.configure(rig, url: base + "/hooks", events: ["envelope-sent", "recipient-sent", "envelope-voided"])

        let created = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: Self.envelope(subject: "one"))
        let envelopeID = try #require(created.json["envelopeId"] as? String)
        let voided = try await RESTAPITests.call(
            rig, "PUT", "/restapi/v2.1/accounts/acme/envelopes/\(envelopeID)", token: rig.token, body: #"{"status": "voided", "voidedReason": "wrong"}"#)
        #expect(voided.status == 200)

        let clock = ManualClock()
        let publisher = Self.publisher(rig, clock: clock)
        let running = Task { try await publisher.run() }
        var arrivals = listener.received.makeAsyncIterator()
        // The first attempt at envelope-sent gets a 500: nothing else of the envelope is sent meanwhile.
        let first = try #require(await arrivals.next())
        #expect(first.event == "envelope-sent" && first.json["retryCount"] as? Int == 0)
        // Once its retry is recorded, it is due within the back-off's first ceiling (2 s): move the stamps past it.
        try await connectEventually(publisher) {
            try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).contains { $0.attempts == 1 }
        }
        rig.clock.advance(3)
        publisher.nudge()
        var delivered: [ConnectListener.Received] = []
        while delivered.count < 3, let next = await arrivals.next() {
            delivered.append(next)
            publisher.nudge()
        }
        #expect(delivered.map(\.event) == ["envelope-sent", "recipient-sent", "envelope-voided"], "in order, after the retry")
        #expect(delivered[0].json["retryCount"] as? Int == 1, "the second attempt says so")
        for message in [first] + delivered {
            // Each active key signs the exact bytes (oldest first; these two were made in the same instant).
            let macs = Set(keys.map { key in
                Data(HMAC<SHA256>.authenticationCode(for: message.body, using: SymmetricKey(data: Data(key.secret.utf8)))).base64EncodedString()
            })
            let signatures = Set([message.headers["x-docusign-signature-1"], message.headers["x-docusign-signature-2"]].compactMap { $0 })
            #expect(signatures == macs)
            #expect(message.headers["x-docusign-signature-3"] == nil)
            let data = try #require(message.json["data"] as? [String: Any])
            #expect(data["envelopeId"] as? String == envelopeID && data["accountId"] as? String == "acme")
            #expect(message.json["configurationId"] as? Int == Int(connectID))
            #expect(message.json["apiVersion"] as? String == "v2.1")
        }
        let recipientData = try #require(delivered[1].json["data"] as? [String: Any])
        #expect(recipientData["recipientId"] as? String == "1")
        let summary = try #require((delivered[2].json["data"] as? [String: Any])?["envelopeSummary"] as? [String: Any])
        #expect(summary["status"] as? String == "voided" && summary["voidedReason"] as? String == "wrong")
        #expect(summary["recipients"] != nil, "includeData recipients")

        // The log shows all three delivered, the first after two attempts; nothing failed.
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().pending == 0 }
        let logs = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect/logs", token: rig.token)
        let entries = try #require(logs.json["logs"] as? [[String: Any]])
        #expect(entries.count == 3 && entries.allSatisfy { $0["status"] as? String == "delivered" })
        let failures = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect/failures", token: rig.token)
        #expect((failures.json["failures"] as? [[String: Any]])?.isEmpty == true)
        running.cancel()
        _ = try? await running.value
        await listener.stop()
        await rig.tearDown()
    }

    /// A hanging listener holds its share of the slots, never more, and never the others' turn;
    /// its attempts time out on the publisher's clock; stopping the publisher gives its claims back
    /// without counting an attempt.
    @Test func aHangingListenerCostsOnlyItsOwnQueueAndShutdownCountsNoAttempt() async throws {
        let rig = try await CaptiveRig()
        let stuck = ConnectListener(answers: ["/stuck": [.hang, .hang, .hang, .hang]])
        let healthy = ConnectListener()
        let stuckBase = try await stuck.start(), healthyBase = try await healthy.start()
        let stuckID = try await Self.configure(rig, url: stuckBase + "/stuck", events: ["envelope-sent"], hmac: false)
        _ = try await Self.configure(rig, url: healthyBase + "/fine", events: ["envelope-sent"], hmac: false)
        var ids: [String] = []
        for index in 0..<6 {
            let created = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: Self.envelope(subject: "e\(index)"))
            ids.append(try #require(created.json["envelopeId"] as? String))
        }
        let clock = ManualClock()
        // Four slots in all, two per listener: the stuck listener's six rows come first by id and must not take them all.
        let publisher = Self.publisher(rig, clock: clock, attempts: 1, maxInFlight: 4)
        let running = Task { try await publisher.run() }
        var fine = healthy.received.makeAsyncIterator()
        var seen: Set<String> = []
        while seen.count < 6, let message = await fine.next() {
            seen.insert((message.json["data"] as? [String: Any])?["envelopeId"] as? String ?? "")
        }
        #expect(seen == Set(ids), "the healthy listener gets every event while the stuck one hangs")
        // Its deliveries recorded (an arrival is seen before its answer is read) before time moves.
        try await connectEventually(publisher) {
            try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 20)
                .filter { $0.configurationID != stuckID && $0.deliveredAt != nil }.count == 6
        }
        // The stuck one's two attempts time out on the publisher's clock; with one attempt allowed, each is a failure record.
        var held = stuck.received.makeAsyncIterator()
        _ = await held.next()
        _ = await held.next()
        await clock.waitForSleepers { $0.filter { $0 >= .seconds(10) }.count >= 2 }
        await clock.advance(by: .seconds(10))
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().failed >= 2 }
        let failures = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect/failures", token: rig.token)
        let entries = try #require(failures.json["failures"] as? [[String: Any]])
        #expect(entries.count == 2 && entries.allSatisfy { ($0["error"] as? String)?.contains("no answer within") == true }, "\(entries)")
        // The next two hang; stopping the publisher now gives them back, attempts uncounted.
        _ = await held.next()
        _ = await held.next()
        running.cancel()
        _ = try? await running.value
        let rows = try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 20).filter { $0.configurationID == stuckID }
        #expect(rows.filter { $0.failedAt != nil }.count == 2)
        #expect(rows.filter { $0.failedAt == nil }.allSatisfy { $0.attempts == 0 && $0.claimToken == nil && $0.deliveredAt == nil }, "\(rows)")
        #expect(try await rig.services.envelopes.store.connectDeliveryCounts() == ConnectDeliveryCounts(pending: 4, failed: 2))
        await stuck.stop()
        await healthy.stop()
        await rig.tearDown()
    }

    /// What a listener answers past its status is read only so far; a redirect is not followed.
    @Test func a2xxWithAHugeBodyIsDeliveredAndARedirectIsNotFollowed() async throws {
        let rig = try await CaptiveRig()
        let target = ConnectListener()
        let targetBase = try await target.start()
        let listener = ConnectListener(answers: ["/big": [.body(200, bytes: 4 << 20)], "/moved": [.redirect(targetBase + "/elsewhere")]])
        let base = try await listener.start()
        _ = try await Self.configure(rig, url: base + "/big", events: ["envelope-sent"], hmac: false)
        _ = try await Self.configure(rig, url: base + "/moved", events: ["envelope-sent"], hmac: false)
        _ = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: Self.envelope(subject: "x"))
        let publisher = Self.publisher(rig, clock: ManualClock(), attempts: 1)
        let running = Task { try await publisher.run() }
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().pending == 0 }
        let rows = try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10)
        let configurations = try await rig.services.envelopes.store.connectConfigurations(accountID: "acme")
        let big = try #require(configurations.first { $0.url.hasSuffix("/big") }), moved = try #require(configurations.first { $0.url.hasSuffix("/moved") })
        #expect(rows.first { $0.configurationID == big.id }?.deliveredAt != nil, "a 2xx is delivered whatever follows it")
        let redirected = try #require(rows.first { $0.configurationID == moved.id })
        #expect(redirected.failedAt != nil && redirected.lastError == "the listener answered HTTP 302", "\(redirected)")
        running.cancel()
        _ = try? await running.value
        var nothing = target.received.makeAsyncIterator()
        await target.stop()
        #expect(await nothing.next() == nil, "the redirect's target got nothing")
        await listener.stop()
        await rig.tearDown()
    }

    /// `includeData` `tabs` and `custom_fields`: the message shows each recipient's tabs with what
    /// was filled in, and the envelope's custom fields as `GET …/custom_fields` answers them; a
    /// configuration without them shows neither.
    @Test func includeDataShowsTabsWithTheirValuesAndCustomFields() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener()
        let base = try await listener.start()
        _ = try await Self.configure(rig, url: base + "/full", events: ["envelope-completed"], hmac: false, includeData: ["tabs", "custom_fields"])
        _ = try await Self.configure(rig, url: base + "/plain", events: ["envelope-completed"], hmac: false, includeData: [])
        let document = try DocumentBuilder().documentId("doc1").name("NDA").pdfBytes(SamplePDF.make(pages: 1, title: "NDA")).build()
        let walkIn = try RecipientBuilder(type: .inPersonSigner).recipientId("1").hostName("Ann Host").hostEmail("ann@acme.example")
            .signerName("Bob Walkin").build()
        let sign = try TabBuilder(type: .signHere).tabId("sign").documentId("doc1").recipientId("1").pageNumber(1)
            .frame(x: 100, y: 500, width: 160, height: 50).build()
        let city = try TabBuilder(type: .text).tabId("city").documentId("doc1").recipientId("1").label("city").pageNumber(1)
            .frame(x: 100, y: 300, width: 160, height: 24).build()
        let fields = try CustomFieldsBuilder().addText(name: "matter", value: "M-42").addList(name: "region", value: "EU", items: ["EU", "US"]).build()
        let id = try await rig.sync(
            EnvelopeBuilder().envelopeName("NDA").emailSubject("NDA").addDocument(document).addRecipient(walkIn, tabs: [sign, city])
                .customFields(fields).transactionId(UUID().uuidString).build(), mode: .offline)
        let publisher = Self.publisher(rig, clock: ManualClock())
        let running = Task { try await publisher.run() }
        var arrivals = listener.received.makeAsyncIterator()
        var byPath: [String: [String: Any]] = [:]
        while byPath.count < 2, let message = await arrivals.next() { byPath[message.path] = message.json }
        let full = try #require((byPath["/full"]?["data"] as? [String: Any])?["envelopeSummary"] as? [String: Any])
        let plain = try #require((byPath["/plain"]?["data"] as? [String: Any])?["envelopeSummary"] as? [String: Any])
        #expect(plain["recipients"] == nil && plain["customFields"] == nil, "\(plain.keys.sorted())")

        let custom = try #require(full["customFields"] as? [String: Any])
        let text = try #require((custom["textCustomFields"] as? [[String: Any]])?.first)
        #expect(text["name"] as? String == "matter" && text["value"] as? String == "M-42" && text["fieldId"] as? String == "1")
        #expect(text["show"] as? String == "true" && text["required"] as? String == "false")
        let list = try #require((custom["listCustomFields"] as? [[String: Any]])?.first)
        #expect(list["name"] as? String == "region" && list["listItems"] as? [String] == ["EU", "US"] && list["fieldId"] as? String == "2")
        let signer = try #require(((full["recipients"] as? [String: Any])?["inPersonSigners"] as? [[String: Any]])?.first)
        let tabs = try #require(signer["tabs"] as? [String: Any])
        #expect((tabs["signHereTabs"] as? [[String: Any]])?.count == 1, "\(tabs)")
        let typed = try #require((tabs["textTabs"] as? [[String: Any]])?.first)
        #expect(typed["tabLabel"] as? String == "city" && !((typed["value"] as? String) ?? "").isEmpty, "what the signer typed: \(typed)")

        // The REST API answers the same custom fields.
        let answer = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/envelopes/\(id)/custom_fields", token: rig.token)
        #expect(answer.status == 200)
        #expect(NSDictionary(dictionary: answer.json).isEqual(to: custom), "\(answer.json)")
        running.cancel()
        _ = try? await running.value
        await listener.stop()
        await rig.tearDown()
    }

    /// A message past the size limit (an envelope whose custom field runs to over a megabyte,
    /// shown to a configuration that includes custom fields) is not posted: a failure record at
    /// once, saying why; the same envelope's small message to another configuration goes.
    @Test func aMessagePastTheSizeLimitBecomesAFailureRecordUnposted() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener()
        let base = try await listener.start()
        let huge = try await Self.configure(rig, url: base + "/huge", events: ["envelope-completed"], hmac: false, includeData: ["custom_fields"])
        _ = try await Self.configure(rig, url: base + "/small", events: ["envelope-completed"], hmac: false, includeData: [])
        let document = try DocumentBuilder().documentId("doc1").name("NDA").pdfBytes(SamplePDF.make(pages: 1, title: "NDA")).build()
        let walkIn = try RecipientBuilder(type: .inPersonSigner).recipientId("1").hostName("Ann Host").hostEmail("ann@acme.example")
            .signerName("Bob Walkin").build()
        let sign = try TabBuilder(type: .signHere).tabId("sign").documentId("doc1").recipientId("1").pageNumber(1)
            .frame(x: 100, y: 500, width: 160, height: 50).build()
        let fields = try CustomFieldsBuilder().addText(name: "notes", value: String(repeating: "n", count: 1_200_000)).build()
        _ = try await rig.sync(
            EnvelopeBuilder().envelopeName("NDA").emailSubject("NDA").addDocument(document).addRecipient(walkIn, tabs: [sign])
                .customFields(fields).transactionId(UUID().uuidString).build(), mode: .offline)
        let publisher = Self.publisher(rig, clock: ManualClock())
        let running = Task { try await publisher.run() }
        let store = rig.services.envelopes.store
        try await connectEventually(publisher) { try await store.connectDeliveryCounts().pending == 0 }
        let rows = try await store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10)
        let failed = try #require(rows.first { $0.configurationID == huge })
        #expect(failed.failedAt != nil && failed.attempts == 1, "\(failed)")
        #expect(failed.lastError?.hasPrefix("the message would be ") == true && failed.lastError?.hasSuffix("more than the 1048576 a message may have") == true)
        #expect(rows.first { $0.configurationID != huge }?.deliveredAt != nil, "the small message goes")
        running.cancel()
        _ = try? await running.value
        var arrivals = listener.received.makeAsyncIterator()
        await listener.stop()
        var paths: [String] = []
        while let message = await arrivals.next() { paths.append(message.path) }
        #expect(paths == ["/small"], "nothing was posted to /huge: \(paths)")
        await rig.tearDown()
    }

    /// A template changed over REST reaches a listener asking for `template-modified`: signed, its
    /// `data` the account and the template, its `uri` the template's; nothing about an envelope.
    @Test func aTemplateChangedOverRESTIsDeliveredAsTemplateModified() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener()
        let base = try await listener.start()
        let key = try await rig.services.connect.addKey(accountID: "acme")
        let connectID = try await Self.configure(rig, url: base + "/templates", events: ["template-modified"])
        _ = try await rig.services.templates.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "tpl-nda", name: "NDA"))
        let pdf = SamplePDF.make(pages: 1, title: "NDA v2").base64EncodedString()
        let replaced = try await RESTAPITests.call(
            rig, "PUT", "/restapi/v2.1/accounts/acme/templates/tpl-nda/documents/doc1", token: rig.token,
            body: #"{"documents": [{"documentId": "doc1", "name": "NDA v2", "documentBase64": "\#(pdf)"}]}"#)
        #expect(replaced.status == 200, "\(replaced.json)")
        let publisher = Self.publisher(rig, clock: ManualClock())
        let running = Task { try await publisher.run() }
        let message = try await withDeadline(.seconds(60), "the template-modified message") {
            var arrivals = listener.received.makeAsyncIterator()
            return await arrivals.next()
        }
        let arrived = try #require(message)
        #expect(arrived.event == "template-modified")
        #expect(arrived.json["uri"] as? String == "/restapi/v2.1/accounts/acme/templates/tpl-nda")
        #expect(arrived.json["configurationId"] as? Int == Int(connectID) && arrived.json["retryCount"] as? Int == 0)
        let data = try #require(arrived.json["data"] as? [String: Any])
        #expect(NSDictionary(dictionary: data).isEqual(to: ["accountId": "acme", "templateId": "tpl-nda"]), "\(data)")
        let mac = Data(HMAC<SHA256>.authenticationCode(for: arrived.body, using: SymmetricKey(data: Data(key.secret.utf8)))).base64EncodedString()
        #expect(arrived.headers["x-docusign-signature-1"] == mac)
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().pending == 0 }
        running.cancel()
        _ = try? await running.value
        await listener.stop()
        await rig.tearDown()
    }

    /// Ended rows go once they are older than the retention, on the publisher's own clock: a
    /// delivered event is kept while it is young, and pruned by the first round after it is not.
    @Test func deliveredEventsArePrunedPastTheRetention() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener()
        let base = try await listener.start()
        _ = try await Self.configure(rig, url: base + "/hooks", events: ["envelope-sent"], hmac: false)
        _ = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: Self.envelope(subject: "x"))
        let clock = ManualClock()
        let publisher = Self.publisher(rig, clock: clock, retention: .seconds(86_400))
        let running = Task { try await publisher.run() }
        let store = rig.services.envelopes.store
        try await connectEventually(publisher) { try await store.connectDeliveryCounts().pending == 0 }
        let interval = ConnectPublisherConfiguration().pruneInterval
        /// One pruning round: the pruner is asleep, time passes, and it is asleep again (the round is over).
        func pruningRound() async throws {
            try await withDeadline(.seconds(60), "the pruner's sleep") { await clock.sleeping(atLeast: interval) }
            await clock.advance(by: interval)
            try await withDeadline(.seconds(60), "the pruner's next sleep") { await clock.sleeping(atLeast: interval) }
        }
        try await pruningRound()
        #expect(try await store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).count == 1, "a day old at most: kept")
        rig.clock.advance(2 * 86_400)
        try await pruningRound()
        #expect(try await store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).isEmpty, "two days old: pruned")
        running.cancel()
        _ = try? await running.value
        await listener.stop()
        await rig.tearDown()
    }

    /// An envelope's own `eventNotification` (DocuSign's EventNotification on envelope create):
    /// its events go to its URL, other envelopes' do not, and it is not one of the account's configurations.
    @Test func anEnvelopesOwnEventNotificationGetsOnlyItsEvents() async throws {
        let rig = try await CaptiveRig()
        let listener = ConnectListener()
        let base = try await listener.start()
        let pdf = Self.pdf
        let withHook = #"{"emailSubject": "hooked", "status": "sent", "eventNotification": {"url": "\#(base)/own", "includeHMAC": "false", "envelopeEvents": [{"envelopeEventStatusCode": "sent"}], "events": ["recipient-sent"]}, "documents": [{"documentId": "1", "name": "x", "documentBase64": "\#(pdf)"}], "recipients": {"signers": [{"recipientId": "1", "name": "A", "email": "a@example.com", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "1", "xPosition": "10", "yPosition": "10"}]}}]}}"#
        let refused = try await RESTAPITests.call(
            rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token,
            body: withHook.replacingOccurrences(of: #""url": "\#(base)/own""#, with: #""url": "gopher://x""#))
        #expect(refused.status == 400 && (refused.json["message"] as? String)?.contains("http or https") == true, "\(refused.json)")
        let hooked = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: withHook)
        let hookedID = try #require(hooked.json["envelopeId"] as? String, "\(hooked.json)")
        _ = try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: Self.envelope(subject: "plain"))
        let listed = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect", token: rig.token)
        #expect(listed.json["totalRecords"] as? String == "0", "an envelope's own configuration is not the account's: \(listed.json)")

        let publisher = Self.publisher(rig, clock: ManualClock())
        let running = Task { try await publisher.run() }
        var arrivals = listener.received.makeAsyncIterator()
        var got: [ConnectListener.Received] = []
        while got.count < 2, let next = await arrivals.next() { got.append(next) }
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().pending == 0 }
        #expect(got.map(\.event) == ["envelope-sent", "recipient-sent"] && got.allSatisfy { $0.path == "/own" })
        #expect(got.allSatisfy { ($0.json["data"] as? [String: Any])?["envelopeId"] as? String == hookedID })
        #expect(got.allSatisfy { $0.headers["x-docusign-signature-1"] == nil }, "includeHMAC false")
        #expect(try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).count == 2, "nothing for the other envelope")
        running.cancel()
        _ = try? await running.value
        await listener.stop()
        await rig.tearDown()
    }

    @Test func configurationsAreCheckedAndWhatIsNotSupportedIsRefused() async throws {
        let rig = try await CaptiveRig()
        func post(_ fields: [String: Any]) async throws -> (status: Int, json: [String: Any]) {
            var body: [String: Any] = ["urlToPublishTo": "http://127.0.0.1:9/hook", "events": ["envelope-sent"]]
            body.merge(fields) { $1 }
            let data = try JSONSerialization.data(withJSONObject: body)
            return try await RESTAPITests.call(rig, "POST", "/restapi/v2.1/accounts/acme/connect", token: rig.token, body: String(decoding: data, as: UTF8.self))
        }
        for (fields, words) in [
            (["useSoapInterface": "true"], "SOAP"), (["requireMutualTls": "true"], "mutual TLS"), (["deliveryMode": "aggregate"], "SIM"),
            (["eventData": ["format": "xml"]], "XML"), (["events": ["envelope-exploded"]], "envelope-exploded"),
            (["urlToPublishTo": "file:///etc/passwd"], "http or https"), (["urlToPublishTo": "http://\(rig.http)/status"], "own listener"),
            (["eventData": ["includeData": ["documents"]]], "not supported"), (["allUsers": "false"], "allUsers"), (["events": []], "events is empty"),
        ] as [([String: Any], String)] {
            let answer = try await post(fields)
            #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY", "\(fields): \(answer.json)")
            #expect((answer.json["message"] as? String)?.contains(words) == true, "\(fields): \(answer.json)")
        }
        // Legacy event lists map onto the event names; update and delete by id; another account sees nothing.
        let made = try await post(["envelopeEvents": [["envelopeEventStatusCode": "Completed"]], "recipientEvents": [["recipientEventStatusCode": "Declined"]], "events": NSNull()])
        #expect(made.status == 201 && made.json["events"] as? [String] == ["envelope-completed", "recipient-declined"], "\(made.json)")
        let id = try #require(made.json["connectId"] as? String)
        let updated = try await RESTAPITests.call(
            rig, "PUT", "/restapi/v2.1/accounts/acme/connect", token: rig.token,
            body: #"{"connectId": "\#(id)", "urlToPublishTo": "http://127.0.0.1:9/other", "events": ["envelope-voided"], "allowEnvelopePublish": false}"#)
        #expect(updated.status == 200 && updated.json["allowEnvelopePublish"] as? String == "false" && updated.json["urlToPublishTo"] as? String == "http://127.0.0.1:9/other")
        let one = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect/\(id)", token: rig.token)
        #expect((one.json["configurations"] as? [[String: Any]])?.first?["events"] as? [String] == ["envelope-voided"])
        // Another account reaches none of it, by its own path or by acme's.
        _ = try await rig.services.accounts.createAccount(id: "rival", name: "Rival", offlineSigning: true)
        _ = try await rig.services.accounts.createUser(accountID: "rival", name: "Rex", email: "rex@rival.example", secret: "secret-456")
        let rival = try await rig.services.auth.issueToken(email: "rex@rival.example", secret: "secret-456").accessToken
        for (method, path, body) in [
            ("GET", "/restapi/v2.1/accounts/rival/connect/\(id)", nil), ("DELETE", "/restapi/v2.1/accounts/rival/connect/\(id)", nil),
            ("PUT", "/restapi/v2.1/accounts/rival/connect", #"{"connectId": "\#(id)", "urlToPublishTo": "http://127.0.0.1:9/x", "events": ["envelope-sent"]}"#),
        ] as [(String, String, String?)] {
            let answer = try await RESTAPITests.call(rig, method, path, token: rival, body: body)
            #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_CONNECT_CONFIGURATION", "\(method) \(path): \(answer.json)")
        }
        for path in ["/restapi/v2.1/accounts/acme/connect/\(id)", "/restapi/v2.1/accounts/acme/connect", "/restapi/v2.1/accounts/acme/connect/logs"] {
            let answer = try await RESTAPITests.call(rig, "GET", path, token: rival)
            #expect(answer.json["errorCode"] as? String == "USER_LACKS_MEMBERSHIP", "\(path): \(answer.json)")
        }
        let rivalList = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/rival/connect", token: rival)
        #expect(rivalList.json["totalRecords"] as? String == "0")
        #expect(try await rig.services.envelopes.store.connectConfiguration(id: id, accountID: "acme")?.url == "http://127.0.0.1:9/other", "unchanged by the rival")
        let deleted = try await RESTAPITests.call(rig, "DELETE", "/restapi/v2.1/accounts/acme/connect/\(id)", token: rig.token)
        #expect(deleted.status == 200)
        let gone = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect/\(id)", token: rig.token)
        #expect(gone.status == 400 && gone.json["errorCode"] as? String == "INVALID_CONNECT_CONFIGURATION")
        let anonymous = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/acme/connect", token: nil)
        #expect(anonymous.status == 401)
        // An account holds at most 100 configurations (envelopes' own are not counted).
        for index in 0..<ConnectService.maxConfigurations {
            _ = try await rig.services.connect.configure(accountID: "acme", name: "c\(index)", url: "http://127.0.0.1:9/\(index)", events: ["envelope-sent"])
        }
        let past = try await post(["name": "one too many"])
        #expect(past.status == 400 && (past.json["message"] as? String)?.contains("at most 100") == true, "\(past.json)")
        await rig.tearDown()
    }
}

/// Waits until `condition` (a store read) holds: checked now, then each time `publisher` records
/// an outcome; the deadline only guards against a hang.
func connectEventually(
    _ publisher: ConnectPublisher, _ what: String = "the outbox to reach the expected state", _ condition: @escaping @Sendable () async throws -> Bool
) async throws {
    let outcomes = publisher.outcomesRecorded()  // before the first check: no outcome is missed between them
    try await withDeadline(.seconds(120), what) {
        if try await condition() { return }
        for await _ in outcomes where try await condition() { return }
        throw FleetError(.internal, "the publisher stopped before \(what)")
    }
}

/// docs/webhooks.md from the outside: a listener written from the doc alone (Python's standard
/// library verifying the HMAC, the official SDK's ConnectApi for the configuration) receives
/// every event of a REST envelope signed in a captive ceremony and of a device envelope signed
/// offline, each validly signed, in order, its first message twice (a 500, then retryCount 1).
@Suite(.timeLimit(.minutes(3))) struct ConnectInteropTests {
    static let script = SyncPayloadInteropTests.repository.appendingPathComponent("Tests/interop/connect_listener.py")

    struct Line: Decodable {
        var event: String
        var envelopeId: String
        var recipientId: String?
        var retryCount: Int
        var status: Int
        var hmac: String
    }

    @Test func aListenerWrittenFromTheDocVerifiesEveryEventOfARESTCaptiveAndOfflineFlow() async throws {
        let rig = try await CaptiveRig()
        let key = try await rig.services.connect.addKey(accountID: "acme")
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let listener = try ChildProcess.launch(
            "/usr/bin/env",
            [python, Self.script.path, "--host", "http://\(rig.http)/restapi", "--token=\(rig.token)", "--account", "acme", "--secret=\(key.secret)"],
            name: "connect-listener")
        try await listener.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("configured ") }

        let clock = ManualClock()
        let publisher = ConnectDeliveryTests.publisher(rig, clock: clock)
        let running = Task { try await publisher.run() }

        // A REST envelope with an embedded signer, signed through the captive pages.
        let created = try await RESTAPITests.call(
            rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: ConnectDeliveryTests.envelope(subject: "captive"))
        let captive = try #require(created.json["envelopeId"] as? String)
        publisher.nudge()  // its poll is on the manual clock, which this test does not move
        // The first message (envelope-sent) is answered 500; once its retry is recorded, move the stamps past its back-off.
        try await listener.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.contains("\"status\": 500") }
        try await connectEventually(publisher) {
            try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 10).contains { $0.attempts == 1 }
        }
        rig.clock.advance(3)
        publisher.nudge()
        let url = try await rig.url(captive, .recipientID("1"), returnURL: "https://app.example/done")
        let signer = try await rig.anonymousDevice("kiosk")
        try await signer.presentCaptiveSigning(signingURL: url.url, envelopeId: captive, recipientId: "1", signer: CaptiveSigner(seed: 3))
        publisher.nudge()

        // A device envelope signed offline by an in-person signer, synced afterwards.
        let document = try DocumentBuilder().documentId("doc1").name("NDA").pdfBytes(SamplePDF.make(pages: 1, title: "NDA")).build()
        let walkIn = try RecipientBuilder(type: .inPersonSigner).recipientId("1").hostName("Ann Host").hostEmail("ann@acme.example")
            .signerName("Bob Walkin").build()
        let tab = try TabBuilder(type: .signHere).tabId("sign").documentId("doc1").recipientId("1").pageNumber(1)
            .frame(x: 100, y: 500, width: 160, height: 50).build()
        let offline = try await rig.sync(
            EnvelopeBuilder().envelopeName("NDA").emailSubject("NDA").addDocument(document).addRecipient(walkIn, tabs: [tab])
                .transactionId(UUID().uuidString).build(), mode: .offline)
        publisher.nudge()

        // Every event the outbox holds arrives, validly signed; the listener's order per envelope is the outbox's.
        try await connectEventually(publisher) { try await rig.services.envelopes.store.connectDeliveryCounts().pending == 0 }
        let outbox = try await rig.services.envelopes.store.connectDeliveries(accountID: "acme", failedOnly: false, limit: 100).reversed()
        let expected = outbox.count
        try await listener.waitForLines(expected + 1, in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("{") }
        let lines = try listener.lines(.standardOutput).filter { $0.hasPrefix("{") }.map { try JSONDecoder().decode(Line.self, from: Data($0.utf8)) }
        #expect(lines.allSatisfy { $0.hmac == "valid" }, "\(lines.map(\.hmac))")
        let accepted = lines.filter { $0.status == 200 }
        for envelope in [captive, offline] {
            #expect(
                accepted.filter { $0.envelopeId == envelope }.map { "\($0.event) \($0.recipientId ?? "")" }
                    == outbox.filter { $0.envelopeID == envelope }.map { "\($0.event) \($0.recipientID ?? "")" }, "\(envelope): \(accepted)")
        }
        #expect(accepted.filter { $0.envelopeId == captive }.map(\.event).suffix(1) == ["envelope-completed"])
        #expect(accepted.filter { $0.envelopeId == offline }.map(\.event) == [
            "envelope-sent", "recipient-sent", "recipient-delivered", "recipient-completed", "envelope-completed",
        ])
        #expect(lines.first?.status == 500 && lines.first?.retryCount == 0 && accepted.first?.retryCount == 1 && accepted.first?.event == lines.first?.event)
        running.cancel()
        _ = try? await running.value
        await listener.terminate()
        await rig.tearDown()
    }
}
