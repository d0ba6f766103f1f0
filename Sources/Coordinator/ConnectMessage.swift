import Crypto
import Envelopes
import Foundation

/// One Connect delivery's bytes (docs/webhooks.md, "Messages"): DocuSign's JSON SIM body and the
/// HMAC signatures of exactly those bytes.
enum ConnectMessage {
    struct Body<Part: Encodable & Sendable>: Encodable, Sendable {
        var event: String
        var apiVersion = "v2.1"
        var uri: String
        var retryCount: Int
        /// A number, as DocuSign sends it.
        var configurationId: Int64
        var generatedDateTime: String
        var data: Part
    }

    /// A `template-*` event's data: the template, no envelope.
    struct TemplatePart: Encodable, Sendable {
        var accountId: String
        var templateId: String
    }

    struct DataPart: Encodable, Sendable {
        var accountId: String
        var userId: String
        var envelopeId: String
        /// Only in `recipient-*` events.
        var recipientId: String?
        var envelopeSummary: REST.Envelope
    }

    /// The envelope as a configuration's messages show it (``body(_:configuration:summary:userID:at:)``):
    /// its recipients with `recipients`, each with its tabs and their values with `tabs` (which
    /// implies recipients; `captive` holds what captive signers filled in), its custom fields with
    /// `custom_fields`.
    static func summary(of aggregate: EnvelopeAggregate, for configuration: ConnectConfigurationRecord, captive: [CaptiveTabRecord]) -> REST.Envelope {
        let include = Set(configuration.includeDataList)
        let withTabs = include.contains("tabs")
        var summary = RESTRoutes.envelope(
            aggregate, account: aggregate.envelope.accountID, withRecipients: include.contains("recipients") && !withTabs)
        guard withTabs || include.contains("custom_fields") else { return summary }
        let payload = try? CaptiveSigningService.payload(of: aggregate.envelope)
        if withTabs {
            let tabs = payload.map { EnvelopeFill(payload: $0, deviceID: aggregate.envelope.deviceID, captive: captive).tabs } ?? []
            summary.recipients = REST.Recipients(rows: aggregate.recipients, payload: payload, tabs: tabs)
        }
        if include.contains("custom_fields") { summary.customFields = REST.CustomFields(payload?.customFields ?? CustomFields()) }
        return summary
    }

    /// What distinguishes one configuration's summaries from another's (``summary(of:for:captive:)``).
    static func includeKey(_ configuration: ConnectConfigurationRecord) -> String {
        configuration.includeDataList.sorted().joined(separator: ",")
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
        return encode(body)
    }

    /// The body of a `template-*` delivery (its `envelopeID` column holds ``EnvelopeEvent/templateSubject(_:)``).
    static func templateBody(_ delivery: ConnectDeliveryRecord, configuration: ConnectConfigurationRecord, at: Date) -> Data {
        let templateID = EnvelopeEvent.templateID(inSubject: delivery.envelopeID)
        return encode(
            Body(
                event: delivery.event, uri: "/restapi/v2.1/accounts/\(delivery.accountID)/templates/\(templateID)",
                retryCount: delivery.attempts, configurationId: Int64(configuration.id) ?? 0, generatedDateTime: REST.time(at),
                data: TemplatePart(accountId: delivery.accountID, templateId: templateID)))
    }

    private static func encode(_ body: some Encodable) -> Data {
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
