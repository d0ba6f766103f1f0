import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SignatureCapture
import Synchronization

/// A Connect listener for tests and fleets (docs/webhooks.md, "A listener for tests"): reads every
/// POST, checks its HMAC signatures against the keys it was given, appends a ``WebhookReceipt`` to
/// its receipts file and then answers as its ``WebhookAnswerPolicy`` says. `/control/…` sets the
/// policy and reports counts. One `Service`: run it in the application's service group.
public struct WebhookListenerService: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// `0` picks a free port; `onListening` reports the real one.
        public var port: Int
        public var receiptsPath: String
        public var secrets: [String]
        public var seed: UInt64
        /// Bodies longer than this are answered `413` unread (Connect messages are at most 1 MiB).
        public var maxBodyBytes: Int

        public init(host: String = "127.0.0.1", port: Int = 0, receiptsPath: String, secrets: [String], seed: UInt64, maxBodyBytes: Int = 2 << 20) {
            self.host = host
            self.port = port
            self.receiptsPath = receiptsPath
            self.secrets = secrets
            self.seed = seed
            self.maxBodyBytes = maxBodyBytes
        }
    }

    let configuration: Configuration
    let logger: Logger
    let onListening: @Sendable (String) async -> Void
    private let state: ListenerState

    /// Opens the receipts file (throws when it cannot); serving starts in ``run()``.
    public init(configuration: Configuration, logger: Logger, onListening: @escaping @Sendable (String) async -> Void = { _ in }) throws {
        self.configuration = configuration
        self.logger = logger
        self.onListening = onListening
        state = ListenerState(
            log: try ReceiptLog(path: configuration.receiptsPath), check: ConnectSignatureCheck(secrets: configuration.secrets),
            seed: configuration.seed)
    }

    public func run() async throws {
        let host = configuration.host
        let onListening = self.onListening
        let application = Application(
            router: makeRouter(),
            configuration: ApplicationConfiguration(address: .hostname(host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onListening("\(host):\(channel.localAddress?.port ?? 0)") },
            logger: logger)
        try await application.run()
    }

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        let state = self.state
        let maxBody = configuration.maxBodyBytes
        let logger = self.logger
        router.get("control/answer") { _, _ in try Self.json(state.policy) }
        router.put("control/answer") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 64 * 1024)
            guard let policy = try? JSONDecoder().decode(WebhookAnswerPolicy.self, from: Data(buffer: body)) else {
                return try Self.json(["error": "the body must be a JSON object {\"status\": 500, \"fraction\": 0.5} (fraction optional, 1 by default)"], status: .badRequest)
            }
            if let problem = policy.problem { return try Self.json(["error": problem], status: .badRequest) }
            state.setPolicy(policy)
            logger.info("answer policy", metadata: ["status": "\(policy.status)", "fraction": "\(policy.fraction)"])
            return try Self.json(policy)
        }
        router.delete("control/answer") { _, _ in
            state.setPolicy(WebhookAnswerPolicy())
            return try Self.json(WebhookAnswerPolicy())
        }
        router.get("control/stats") { _, _ in try Self.json(state.stats) }
        let receive: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            try await Self.receive(request, state: state, maxBody: maxBody, logger: logger)
        }
        router.post("/", use: receive)
        router.post("**", use: receive)
        return router
    }

    /// Reads one message (a body over the cap: `413`, its receipt `unchecked` with `bytes` what
    /// `Content-Length` said, or the cap plus one for a chunked body), records it, answers.
    static func receive(_ request: Request, state: ListenerState, maxBody: Int, logger: Logger) async throws -> Response {
        let received = Date().timeIntervalSince1970
        let path = request.uri.path
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        var body: ByteBuffer?
        if (declared ?? 0) <= maxBody {
            do {
                body = try await request.body.collect(upTo: maxBody)
            } catch is NIOTooManyBytesError {
                body = nil
            }
            // Any other error (the sender went away mid-body) is no message: no receipt, no answer.
        }
        guard let body else {
            let receipt = WebhookReceipt(
                received: received, path: path, hmac: .unchecked, bodySHA256: "", bytes: declared ?? maxBody + 1, answered: 413)
            try state.record(receipt)
            return Response(status: .contentTooLarge)
        }
        let bytes = Array(buffer: body)
        let headers = request.headers.map { (name: $0.name.rawName, value: $0.value) }
        let signatures = ConnectSignatureCheck.signatureHeaders(headers)
        let hmac = state.check.check(body: bytes, signatures: signatures)
        let status = state.nextAnswer()
        var receipt = WebhookReceipt(
            received: received, path: path, hmac: hmac, bodySHA256: SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined(),
            bytes: bytes.count, answered: status, signatures: signatures,
            body: bytes.count <= WebhookReceipt.maxBodyKept ? Data(bytes).base64EncodedString() : nil)
        if let message = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] {
            let data = message["data"] as? [String: Any]
            receipt.event = message["event"] as? String
            receipt.envelopeId = data?["envelopeId"] as? String
            receipt.templateId = data?["templateId"] as? String
            receipt.configurationId = (message["configurationId"] as? String) ?? (message["configurationId"] as? Int).map(String.init)
            receipt.retryCount = (message["retryCount"] as? Int) ?? (message["retryCount"] as? String).flatMap { Int($0) }
            receipt.generatedDateTime = message["generatedDateTime"] as? String
        }
        // Recorded before the answer goes out: what the sender saw answered is in the file.
        try state.record(receipt)
        if hmac == .invalid { logger.warning("a message whose signatures match no key", metadata: ["path": "\(path)"]) }
        return Response(status: HTTPResponse.Status(code: status))
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Response(
            status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}

/// Counts since the listener started (`GET /control/stats`).
public struct WebhookListenerStats: Codable, Sendable, Hashable {
    public var received = 0
    /// By ``HMACCheck`` raw value.
    public var hmac: [String: Int] = [:]
    /// By status answered.
    public var answered: [String: Int] = [:]
}

/// The listener's shared state: its receipts file, keys, policy, generator and counts.
final class ListenerState: Sendable {
    let log: ReceiptLog
    let check: ConnectSignatureCheck
    private let mutable: Mutex<(policy: WebhookAnswerPolicy, random: SeededRandom, stats: WebhookListenerStats)>

    init(log: ReceiptLog, check: ConnectSignatureCheck, seed: UInt64) {
        self.log = log
        self.check = check
        mutable = Mutex((WebhookAnswerPolicy(), SeededRandom(seed: seed), WebhookListenerStats()))
    }

    var policy: WebhookAnswerPolicy { mutable.withLock { $0.policy } }
    var stats: WebhookListenerStats { mutable.withLock { $0.stats } }
    func setPolicy(_ policy: WebhookAnswerPolicy) { mutable.withLock { $0.policy = policy } }

    func nextAnswer() -> Int {
        mutable.withLock { state in state.policy.answer(using: &state.random) }
    }

    func record(_ receipt: WebhookReceipt) throws {
        try log.append(receipt)
        mutable.withLock { state in
            state.stats.received += 1
            state.stats.hmac[receipt.hmac.rawValue, default: 0] += 1
            state.stats.answered[String(receipt.answered), default: 0] += 1
        }
    }
}
