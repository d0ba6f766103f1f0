// `signfleet-bench captive [--signers K] [--envelopes N] [--seconds S] [--render none|first|cached]`:
// captive signing under load (defaults: 8 signers, 1,000 envelopes, 2 s measured, no page images).
//
// A real coordinator in this process: SQLite store, FleetServer (ZeroMQ) for the sender device
// that syncs the envelopes, and its CoordinatorHTTPServer (hummingbird) on 127.0.0.1:0. First N
// envelopes, each with one embedded signer, are composed on a sender device and synced. Then K
// concurrent signers run complete ceremonies over HTTP, as an integrator's backend and a browser
// would: POST /admin/signing-urls (issue) -> GET /signing/<token> (open the page) -> POST the
// form with action=finish and a drawn signature -> 303 to the return URL with
// event=signing_complete. The reference, in the same run and the same server, with the same
// client and concurrency: plain GET /health. Health and ceremonies alternate in halves.
//
// `--render first`: after opening the page each ceremony also fetches every page image the page
// names, as a browser does; each is drawn then by pdftoppm (a cache miss, checked by the
// X-Page-Cache header). `--render cached`: before measuring, every envelope is opened, its page
// images fetched and the session left with Finish Later (the signer comes back); the measured
// ceremonies then get every page image from the cache (a hit, checked).
import Coordinator
import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import GRDB
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import ZeroMQ

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func captiveBenchmark(_ arguments: [String]) async throws {
    let options = BenchOptions(arguments: arguments)
    let signers = try options.integer("--signers", default: 8, range: 1...256)
    let envelopes = try options.integer("--envelopes", default: 1000, range: 1...1_000_000)
    let seconds = try options.number("--seconds", default: 2, range: 0.1...3600)
    let render = arguments.firstIndex(of: "--render").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil } ?? "none"
    let pages: CaptiveBenchClient.PageImages
    switch render {
    case "none": pages = .skip
    case "first": pages = .fetch(expect: "miss")
    case "cached": pages = .fetch(expect: "hit")
    default: throw CaptiveBenchFailure(message: "--render takes none, first or cached, not \(render)")
    }
    // Figures of the default run keep their names; the rendering runs say which they are.
    let prefix = render == "none" ? "ceremonies.k\(signers)" : "ceremonies.k\(signers).render_\(render)"
    let bench = "captive"
    let root = NSTemporaryDirectory() + "signfleet-bench-captive-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }

    let rig = try await CaptiveBenchRig(directory: root)
    let ids = try await rig.syncEnvelopes(envelopes)
    let queue = EnvelopeQueue(ids)
    let signature = try CaptiveBenchClient.signatureJSON()
    let clients = (0..<signers).map { _ in CaptiveBenchClient(base: "http://\(rig.http)") }
    if render == "cached" {
        // Not measured: every envelope viewed once (its pages drawn), then Finish Later.
        let viewing = EnvelopeQueue(ids)
        _ = try await concurrently(clients, seconds: 3600) { client in
            guard let id = viewing.next() else { return false }
            try await client.ceremony(envelopeID: id, signature: signature, pages: .fetch(expect: "miss"), action: "later")
            return true
        }
    }

    // Warm-up: a few health requests and ceremonies per client (connections, caches).
    for client in clients {
        try await client.health()
        if let id = queue.next() { try await client.ceremony(envelopeID: id, signature: signature, pages: pages) }
    }

    // Halves alternate: health, ceremonies, health, ceremonies; the ceremonies stop early when
    // the envelopes run out (the rate counts only completed ceremonies over their own time).
    var health = (done: 0, elapsed: 0.0), ceremonies = (done: 0, elapsed: 0.0)
    for _ in 0..<2 {
        let h = try await concurrently(clients, seconds: seconds / 2) { client in try await client.health(); return true }
        health.done += h.done
        health.elapsed += h.elapsed
        let c = try await concurrently(clients, seconds: seconds / 2) { client in
            guard let id = queue.next() else { return false }
            try await client.ceremony(envelopeID: id, signature: signature, pages: pages)
            return true
        }
        ceremonies.done += c.done
        ceremonies.elapsed += c.elapsed
    }
    let completed = try await rig.completedEnvelopes()
    await rig.tearDown()
    guard ceremonies.done > 0, health.done > 0 else { throw CaptiveBenchFailure(message: "nothing completed") }
    // Every finished ceremony must have completed its envelope on the server (warm-up included).
    guard completed >= ceremonies.done else {
        throw CaptiveBenchFailure(message: "\(ceremonies.done) ceremonies finished but only \(completed) envelopes are completed")
    }
    Report.emit(bench, "\(prefix).per_s", Double(ceremonies.done) / ceremonies.elapsed, "ceremonies/s")
    Report.emit(bench, render == "none" ? "health.k\(signers).per_s" : "health.k\(signers).render_\(render).per_s", Double(health.done) / health.elapsed, "req/s")
    if render == "none" {
        // A ceremony is 3 requests (issue, open, finish): its per-request rate against the bare server.
        Report.emit(bench, "\(prefix).requests_per_s", 3 * Double(ceremonies.done) / ceremonies.elapsed, "req/s")
    }
    Report.emit(bench, "\(prefix).count", Double(ceremonies.done), "ceremonies")
    let mean = render == "none" ? "ceremony.k\(signers).mean_ms" : "ceremony.k\(signers).render_\(render).mean_ms"
    Report.emit(bench, mean, ceremonies.elapsed / Double(ceremonies.done) * Double(signers) * 1000, "ms")
    if ceremonies.done + signers >= envelopes {
        FileHandle.standardError.write(Data("captive: the \(envelopes) envelopes ran out; raise --envelopes for a longer measurement\n".utf8))
    }
}

/// Runs `body` on every client concurrently, each in a loop, for `seconds` or until `body`
/// returns false: (operations completed, seconds elapsed).
func concurrently<Client: Sendable>(
    _ clients: [Client], seconds: Double, _ body: @escaping @Sendable (Client) async throws -> Bool
) async throws -> (done: Int, elapsed: Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    let done = try await withThrowingTaskGroup(of: Int.self) { group in
        for client in clients {
            group.addTask {
                var count = 0
                while clock.now < end {
                    guard try await body(client) else { break }
                    count += 1
                }
                return count
            }
        }
        return try await group.reduce(0, +)
    }
    let (whole, atto) = start.duration(to: clock.now).components
    return (done, Double(whole) + Double(atto) / 1e18)
}

/// The envelope ids not yet signed, handed out once each.
final class EnvelopeQueue: Sendable {
    private let ids: Mutex<[String]>
    init(_ ids: [String]) { self.ids = Mutex(Array(ids.reversed())) }
    func next() -> String? { ids.withLock { $0.popLast() } }
}

/// A coordinator with its HTTP listener (admin, captive signing and the REST API) and a logged-in
/// sender device (as the captive tests' rig).
final class CaptiveBenchRig: Sendable {
    static let adminToken = "bench-admin-token-0123456789"
    let services: CoordinatorServices
    let store: CoordinatorStore
    let token: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let serving: Task<Void, Never>
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let http: String
    let node: DeviceNode
    let client: FleetClient
    let connection: Task<Void, Never>

    init(directory: String) async throws {
        var logger = Logger(label: "captive-bench")
        logger.logLevel = .critical
        let registry = PrometheusCollectorRegistry()
        store = try CoordinatorStore(path: "\(directory)/coordinator.sqlite")
        let services = CoordinatorServices(store: store, metricsFactory: PrometheusMetricsFactory(registry: registry))
        self.services = services
        // Limits far above what the bench sends: it measures signing, not the rate limiter.
        _ = try await services.accounts.createAccount(
            id: "acme", name: "Acme", offlineSigning: true,
            rateLimits: RateLimits(hourly: 100_000_000, burst: 10_000_000, burstWindowSeconds: 1))
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann Sender", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken

        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "captive-bench")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        let endpoint = try await server.bind()
        serving = Task { try? await server.run() }

        let (addresses, announced) = AsyncStream<String>.makeStream()
        let httpServer = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: registry, instance: "captive-bench",
            status: { throw CancellationError() }, logger: logger,
            admin: CoordinatorAdminRoutes(directory: services.accounts, token: Self.adminToken),
            captive: CaptiveSigningRoutes(service: services.captive, logger: logger),
            rest: RESTRoutes(services: services),
            onListening: { announced.yield($0) })
        group = ServiceGroup(services: [httpServer], logger: logger)
        let group = self.group
        running = Task { try await group.run() }
        var first: String?
        for await address in addresses {
            first = address
            break
        }
        guard let first else { throw CaptiveBenchFailure(message: "the HTTP listener did not start") }
        http = first

        var configuration = DeviceConfiguration(storePath: "\(directory)/sender.sqlite")
        configuration.deviceId = "bench-sender"
        client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: "bench-sender", requestTimeout: .seconds(30), maxAttempts: 3),
            loop: loop, logger: logger)
        let client = self.client
        connection = Task { await client.run() }
        node = try await DeviceNode.open(configuration: configuration, accountService: RemoteAccountService(client: client))
        try await node.login(accessToken: token)
    }

    /// Composes `count` envelopes (one embedded signer each: a sign-here and a text tab) and syncs them.
    func syncEnvelopes(_ count: Int) async throws -> [String] {
        let pdf = SamplePDF.make(pages: 2, title: "Lease")
        var ids: [String] = []
        for index in 0..<count {
            let transaction = "captive-bench-\(index)-\(UUID().uuidString.prefix(8))"
            let document = try DocumentBuilder().documentId("doc1").name("Lease").pdfBytes(pdf).build()
            let recipient = try RecipientBuilder(type: .signer).recipientId("r1").name("Bea Buyer").email("bea@example.com")
                .routingOrder(1).clientUserId("cu-\(index)").build()
            let tabs = [
                try TabBuilder(type: .signHere).tabId("sign-r1").documentId("doc1").recipientId("r1").pageNumber(2)
                    .frame(x: 72, y: 520, width: 200, height: 60).build(),
                try TabBuilder(type: .text).tabId("city-r1").name("City").documentId("doc1").recipientId("r1")
                    .pageNumber(1).frame(x: 72, y: 220, width: 200, height: 26).build(),
            ]
            let envelope = try EnvelopeBuilder().envelopeName("Lease \(index)").emailSubject("Please sign the lease")
                .addDocument(document).transactionId(transaction).addRecipient(recipient, tabs: tabs).build()
            let id = try await node.compose(envelope, mode: .online)
            _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
            ids.append(SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: transaction))
        }
        let summary = try await SyncEngine(node: node, client: client, accessToken: token).syncAll()
        guard summary.failed == 0 else { throw CaptiveBenchFailure(message: "\(summary.failed) envelopes failed to sync") }
        return ids
    }

    func completedEnvelopes() async throws -> Int {
        // A second connection on the store's file: what the server committed, not what it answered.
        var configuration = Configuration()
        configuration.readonly = true
        let database = try DatabaseQueue(path: store.path, configuration: configuration)
        return try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM envelope WHERE status = 'completed'") ?? 0
        }
    }

    func tearDown() async {
        try? await node.close()
        connection.cancel()
        serving.cancel()
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await loop.shutdown()
        context.shutdown()
    }
}

/// One signer's HTTP client: its own URLSession (kept-alive connection), redirects returned
/// rather than followed, cookies handled by hand. Used alike for ceremonies and `/health`.
final class CaptiveBenchClient: Sendable {
    struct Reply {
        var status: Int
        var body: String
        var headers: [String: String]
    }

    let base: String
    let session: URLSession
    let delegate = NoRedirectDelegate()

    init(base: String) {
        self.base = base
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.timeoutIntervalForRequest = 30
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    func health() async throws {
        let reply = try await send("GET", "\(base)/health")
        guard reply.status == 200, reply.body.contains("\"ok\"") else {
            throw CaptiveBenchFailure(message: "GET /health answered \(reply.status)")
        }
    }

    /// Whether a ceremony fetches the page images the page names, and the `X-Page-Cache` each must have.
    enum PageImages: Sendable {
        case skip
        case fetch(expect: String)
    }

    /// Issue -> open (-> page images) -> finish (or Finish Later) -> redirect with the event.
    func ceremony(envelopeID: String, signature: String, pages: PageImages = .skip, action: String = "finish") async throws {
        let issued = try await send(
            "POST", "\(base)/admin/signing-urls", body: "{\"envelopeID\":\"\(envelopeID)\",\"recipientID\":\"r1\"}",
            headers: ["Authorization": "Bearer \(CaptiveBenchRig.adminToken)", "Content-Type": "application/json"])
        guard issued.status == 201, let url = Self.jsonString("url", in: issued.body) else {
            throw CaptiveBenchFailure(message: "issuing a signing URL answered \(issued.status): \(issued.body.prefix(200))")
        }
        let page = try await send("GET", url)
        guard page.status == 200, let csrf = Self.hiddenValue("csrf", in: page.body) else {
            throw CaptiveBenchFailure(message: "opening the signing page answered \(page.status): \(page.body.prefix(200))")
        }
        let cookie = page.headers["set-cookie"].flatMap { $0.split(separator: ";").first.map(String.init) }
        if case .fetch(let expected) = pages {
            let images = Self.pageImages(page.body)
            guard !images.isEmpty else { throw CaptiveBenchFailure(message: "the signing page names no page images (is pdftoppm installed?)") }
            for image in images {
                let reply = try await sendBytes("GET", "\(base)\(image)", headers: cookie.map { ["Cookie": $0] } ?? [:])
                guard reply.status == 200, reply.headers["content-type"] == "image/png", reply.bytes > 100 else {
                    throw CaptiveBenchFailure(message: "\(image) answered \(reply.status) \(reply.headers["content-type"] ?? "")")
                }
                guard reply.headers["x-page-cache"] == expected else {
                    throw CaptiveBenchFailure(message: "\(image) was a cache \(reply.headers["x-page-cache"] ?? "?"), expected \(expected)")
                }
            }
        }
        var form = [("csrf", csrf), ("action", action)]
        for (index, type) in try Self.tabs(page.body) {
            switch type {
            case "signHere", "initialHere": form.append(("sig-\(index)", signature))
            case "text": form.append(("tab-\(index)", "Zurich"))
            default: break
            }
        }
        let body = form.map { "\(Self.formEncode($0.0))=\(Self.formEncode($0.1))" }.joined(separator: "&")
        var headers = ["Content-Type": "application/x-www-form-urlencoded"]
        if let cookie { headers["Cookie"] = cookie }
        let finished = try await send("POST", url, body: body, headers: headers)
        let event = action == "later" ? "event=cancel" : "event=signing_complete"
        guard finished.status == 303, let location = finished.headers["location"], location.contains(event) else {
            throw CaptiveBenchFailure(message: "finishing answered \(finished.status) \(finished.headers["location"] ?? ""): \(finished.body.prefix(300))")
        }
    }

    /// The page image URLs (`src` of each `img.page-image`) of a signing page, in page order.
    static func pageImages(_ html: String) -> [String] {
        html.components(separatedBy: "<img class=\"page-image\" src=\"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
    }

    /// A request whose body is only counted (page images).
    func sendBytes(_ method: String, _ url: String, headers: [String: String] = [:]) async throws -> (status: Int, bytes: Int, headers: [String: String]) {
        let reply = try await send(method, url, headers: headers)
        return (reply.status, reply.body.utf8.count, reply.headers)
    }

    func send(_ method: String, _ url: String, body: String? = nil, headers: [String: String] = [:]) async throws -> Reply {
        guard let target = URL(string: url) else { throw CaptiveBenchFailure(message: "not a URL: \(url)") }
        var request = URLRequest(url: target)
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body { request.httpBody = Data(body.utf8) }
        let (data, response) = try await delegate.run(request, in: session)
        guard let http = response as? HTTPURLResponse else { throw CaptiveBenchFailure(message: "not an HTTP response") }
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { fields[key.lowercased()] = value }
        }
        return Reply(status: http.statusCode, body: String(decoding: data, as: UTF8.self), headers: fields)
    }

    /// A drawn signature as the page's script posts it (drawn once: the client's drawing is not the server's cost).
    static func signatureJSON() throws -> String {
        let drawn = try CaptiveSigner(seed: 7, pen: .applePencil).pointerSignature(
            signerName: "Bea Buyer", fieldID: "tab-0", signing: 1, width: 600, height: 200)
        func number(_ value: Double) -> String { String(format: "%.3f", value) }
        let points = drawn.points.map { "[\(number($0.x)),\(number($0.y)),\(number($0.pressure)),\(number($0.time)),\($0.stroke)]" }
        return "{\"pointerType\":\"\(drawn.pointerType)\",\"width\":\(number(drawn.canvasWidth)),\"height\":\(number(drawn.canvasHeight)),\"points\":[\(points.joined(separator: ","))]}"
    }

    /// (index, type) of each unlocked tab in the page's `sf-data` block.
    static func tabs(_ html: String) throws -> [(Int, String)] {
        struct PageData: Decodable {
            struct Tab: Decodable {
                var index: Int
                var type: String
                var locked: Bool
            }
            var tabs: [Tab]
        }
        guard let start = html.range(of: "<script type=\"application/json\" id=\"sf-data\">"),
            let end = html.range(of: "</script>", range: start.upperBound..<html.endIndex)
        else { throw CaptiveBenchFailure(message: "the signing page has no data block") }
        let page = try JSONDecoder().decode(PageData.self, from: Data(html[start.upperBound..<end.lowerBound].utf8))
        return page.tabs.filter { !$0.locked }.map { ($0.index, $0.type) }
    }

    static func hiddenValue(_ name: String, in html: String) -> String? {
        guard let start = html.range(of: "name=\"\(name)\" value=\"") else { return nil }
        guard let end = html[start.upperBound...].firstIndex(of: "\"") else { return nil }
        return String(html[start.upperBound..<end])
    }

    static func jsonString(_ key: String, in json: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return nil }
        return object[key] as? String
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

struct CaptiveBenchFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
