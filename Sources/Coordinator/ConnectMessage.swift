import Crypto
import Foundation

/// One Connect delivery's bytes (docs/webhooks.md, "Messages"): DocuSign's JSON SIM body and the
/// HMAC signatures of exactly those bytes.
enum ConnectMessage {
    struct Body: Encodable, Sendable {
        var event: String
        var apiVersion = "v2.1"
        var uri: String
        var retryCount: Int
        /// A number, as DocuSign sends it.
        var configurationId: Int64
        var generatedDateTime: String
        var data: DataPart
    }

    struct DataPart: Encodable, Sendable {
        var accountId: String
        var userId: String
        var envelopeId: String
        /// Only in `recipient-*` events.
        var recipientId: String?
        var envelopeSummary: REST.Envelope
    }

    /// The envelope as a configuration's messages show it (``body(_:configuration:summary:userID:at:)``).
    static func summary(of aggregate: EnvelopeAggregate, for configuration: ConnectConfigurationRecord) -> REST.Envelope {
        RESTRoutes.envelope(aggregate, account: aggregate.envelope.accountID, withRecipients: configuration.includeDataList.contains("recipients"))
    }

    /// The body of `delivery` for `configuration`, the envelope as `summary` shows it now.
    static func body(
        _ delivery: ConnectDeliveryRecord, configuration: ConnectConfigurationRecord, summary: REST.Envelope, userID: String, at: Date
    ) -> Data {
        var summary = summary
        // The envelope's times as the event knows them: when it happened (a device's time for a
        // recipient who acted offline) and when the coordinator learnt it.
        summary.statusChangedDateTime = REST.time(delivery.occurredAt)
        let body = Body(
            event: delivery.event, uri: "/restapi/v2.1/accounts/\(delivery.accountID)/envelopes/\(delivery.envelopeID)",
            retryCount: delivery.attempts, configurationId: Int64(configuration.id) ?? 0, generatedDateTime: REST.time(at),
            data: DataPart(
                accountId: delivery.accountID, userId: userID, envelopeId: delivery.envelopeID, recipientId: delivery.recipientID,
                envelopeSummary: summary))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(body)) ?? Data("{}".utf8)
    }

    /// `X-DocuSign-Signature-1…N`: base64 HMAC-SHA256 of `body` keyed with the UTF-8 bytes of each
    /// key's secret as shown to the listener (as DocuSign's own verification samples do), in the
    /// keys' order (oldest first).
    static func signatures(of body: Data, keys: [ConnectKeyRecord]) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        for key in keys {
            let secret = SymmetricKey(data: Data(key.secret.utf8))
            let mac = HMAC<SHA256>.authenticationCode(for: body, using: secret)
            headers.append((name: "X-DocuSign-Signature-\(headers.count + 1)", value: Data(mac).base64EncodedString()))
        }
        return headers
    }
}
