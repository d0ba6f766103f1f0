import Foundation

/// One POST the listener read, as a line of its receipts file (docs/webhooks.md, "A listener for
/// tests"). Written before the answer is sent: a message the sender saw answered is always there.
public struct WebhookReceipt: Codable, Sendable, Hashable {
    /// When it was read, seconds since 1970.
    public var received: Double
    /// The request's path (the configuration's `urlToPublishTo` path).
    public var path: String
    /// From the JSON body, when it is a Connect message: `event`, `data.envelopeId`,
    /// `data.templateId`, `configurationId`, `retryCount`, `generatedDateTime`.
    public var event: String?
    public var envelopeId: String?
    public var templateId: String?
    public var configurationId: String?
    public var retryCount: Int?
    public var generatedDateTime: String?
    /// What the `X-DocuSign-Signature-N` headers showed.
    public var hmac: HMACCheck
    /// Lower-case hex SHA-256 of the body's exact bytes (empty when the body was too large to read).
    public var bodySHA256: String
    /// The body's length in bytes (what `Content-Length` said when too large to read).
    public var bytes: Int
    /// The status the listener answered.
    public var answered: Int
    /// The `X-DocuSign-Signature-N` values, in N order (a re-check needs them and the body).
    public var signatures: [String]
    /// The body's exact bytes, base64, when at most ``WebhookReceipt/maxBodyKept`` bytes long.
    public var body: String?

    /// Bodies up to this length are kept in the receipt (Connect messages without documents are
    /// a few KiB); longer ones only by their hash.
    public static let maxBodyKept = 48 * 1024

    public init(
        received: Double, path: String, event: String? = nil, envelopeId: String? = nil, templateId: String? = nil,
        configurationId: String? = nil, retryCount: Int? = nil, generatedDateTime: String? = nil, hmac: HMACCheck,
        bodySHA256: String, bytes: Int, answered: Int, signatures: [String] = [], body: String? = nil
    ) {
        self.received = received
        self.path = path
        self.event = event
        self.envelopeId = envelopeId
        self.templateId = templateId
        self.configurationId = configurationId
        self.retryCount = retryCount
        self.generatedDateTime = generatedDateTime
        self.hmac = hmac
        self.bodySHA256 = bodySHA256
        self.bytes = bytes
        self.answered = answered
        self.signatures = signatures
        self.body = body
    }
}

/// The outcome of checking a message's HMAC signatures against the listener's keys.
public enum HMACCheck: String, Codable, Sendable, Hashable {
    /// At least one `X-DocuSign-Signature-N` is the HMAC of the body with one of the keys.
    case valid
    /// Signatures came, and none matches any key (or one is not base64).
    case invalid
    /// No signature header came.
    case unsigned
    /// The body was too large to read, so nothing was checked.
    case unchecked
}

/// Reading a receipts file.
public enum WebhookReceipts {
    /// Every whole line of a receipts file, in order; a last line without its newline (a listener
    /// killed mid-write) or one that is not a receipt is skipped.
    public static func read(path: String) throws -> [WebhookReceipt] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let decoder = JSONDecoder()
        var receipts: [WebhookReceipt] = []
        var start = data.startIndex
        while let end = data[start...].firstIndex(of: 0x0A) {
            if let receipt = try? decoder.decode(WebhookReceipt.self, from: data[start..<end]) { receipts.append(receipt) }
            start = data.index(after: end)
        }
        return receipts
    }
}
