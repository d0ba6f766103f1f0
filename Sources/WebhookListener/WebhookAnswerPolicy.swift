import SignatureCapture

/// What the listener answers a message (docs/webhooks.md, "A listener for tests"): `status` for a
/// `fraction` of messages, chosen by the listener's seeded generator, `200` for the rest. The
/// default answers every message `200`.
public struct WebhookAnswerPolicy: Codable, Sendable, Hashable {
    public var status: Int
    public var fraction: Double

    public init(status: Int = 200, fraction: Double = 1) {
        self.status = status
        self.fraction = fraction
    }

    /// `fraction` may be left out (1).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        status = try container.decode(Int.self, forKey: .status)
        fraction = try container.decodeIfPresent(Double.self, forKey: .fraction) ?? 1
    }

    /// Why the policy cannot be used, or nil.
    public var problem: String? {
        guard (200...599).contains(status) else { return "status must be an HTTP status from 200 to 599, got \(status)" }
        guard fraction.isFinite, fraction > 0, fraction <= 1 else { return "fraction must be more than 0 and at most 1, got \(fraction)" }
        return nil
    }

    /// The status for the next message.
    func answer(using random: inout SeededRandom) -> Int {
        guard status != 200, fraction < 1 else { return status }
        return Double.random(in: 0..<1, using: &random) < fraction ? status : 200
    }
}
