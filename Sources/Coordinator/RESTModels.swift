import Crypto
import Envelopes
import Foundation
import SyncContract

/// The JSON the eSignature REST API v2.1 speaks (docs/rest-api.md), shaped as DocuSign's published
/// definition and the official SDKs expect: camelCase names, counts and booleans as strings,
/// times as ISO 8601 with seven fractional digits in UTC, fields left out when unknown.
enum REST {
    /// DocuSign's error body: `{"errorCode": "...", "message": "..."}`.
    struct ErrorDetails: Codable, Sendable, Hashable {
        var errorCode: String
        var message: String
    }

    /// `GET /oauth/userinfo`.
    struct UserInfo: Codable, Sendable, Hashable {
        struct Account: Codable, Sendable, Hashable {
            var account_id: String
            var is_default: Bool
            var account_name: String
            /// Where this account's REST API is: the server's own base URL.
            var base_uri: String
        }
        var sub: String
        var name: String
        var email: String
        var accounts: [Account]
    }

    /// `GET /restapi/v2.1/accounts/{accountId}`.
    struct AccountInformation: Codable, Sendable, Hashable {
        var accountIdGuid: String
        var accountName: String
    }

    /// An envelope (`GET …/envelopes/{envelopeId}` and the items of a list).
    struct Envelope: Codable, Sendable, Hashable {
        var envelopeId: String
        var status: String
        var emailSubject: String
        var emailBlurb: String?
        var createdDateTime: String
        var sentDateTime: String?
        var deliveredDateTime: String?
        var completedDateTime: String?
        var declinedDateTime: String?
        var voidedDateTime: String?
        var voidedReason: String?
        var statusChangedDateTime: String
        var envelopeUri: String
        var recipientsUri: String
        var documentsUri: String
        var documentsCombinedUri: String
        var certificateUri: String
        var customFieldsUri: String
        var templatesUri: String
        var signingLocation: String
        var envelopeIdStamping: String
        var is21CFRPart11: String
        var recipients: Recipients?
        /// Only where asked for (a Connect configuration's `includeData` `custom_fields`).
        var customFields: CustomFields?
    }

    /// An envelope's custom fields as DocuSign shows them (`GET …/custom_fields`, Connect's
    /// `envelopeSummary.customFields`): ids are their 1-based positions, booleans strings.
    struct CustomFields: Codable, Sendable, Hashable {
        struct Field: Codable, Sendable, Hashable {
            var fieldId: String
            var name: String
            var value: String
            var required: String
            var show: String
            /// List fields only.
            var listItems: [String]?
        }

        var textCustomFields: [Field] = []
        var listCustomFields: [Field] = []

        init(_ fields: Envelopes.CustomFields) {
            textCustomFields = fields.text.enumerated().map { index, field in
                Field(fieldId: String(index + 1), name: field.name, value: field.value, required: String(field.required), show: String(field.show))
            }
            listCustomFields = fields.list.enumerated().map { index, field in
                Field(
                    fieldId: String(fields.text.count + index + 1), name: field.name, value: field.value, required: String(field.required),
                    show: String(field.show), listItems: field.items)
            }
        }
    }

    /// `GET …/envelopes` (status changes).
    struct EnvelopesInformation: Codable, Sendable, Hashable {
        var envelopes: [Envelope]
        var resultSetSize: String
        var totalSetSize: String
        var startPosition: String
        var endPosition: String
        var nextUri: String
        var previousUri: String
    }

    /// One recipient; the fields of its type only (in-person signers have a host).
    struct Recipient: Codable, Sendable, Hashable {
        var recipientId: String
        var recipientIdGuid: String
        var recipientType: String
        var routingOrder: String
        var status: String
        var name: String?
        var email: String?
        var clientUserId: String?
        var hostName: String?
        var hostEmail: String?
        var signerName: String?
        var sentDateTime: String?
        var deliveredDateTime: String?
        var signedDateTime: String?
        var declinedDateTime: String?
        var declinedReason: String?
        /// With `include_tabs=true`.
        var tabs: RecipientTabs?
        /// A template's role.
        var roleName: String?
    }

    /// A recipient's tabs by type, as DocuSign lists them (radio buttons are not listed yet).
    struct RecipientTabs: Codable, Sendable, Hashable {
        var signHereTabs: [TabSummary]?
        var initialHereTabs: [TabSummary]?
        var dateSignedTabs: [TabSummary]?
        var fullNameTabs: [TabSummary]?
        var textTabs: [TabSummary]?
        var checkboxTabs: [TabSummary]?
        var companyTabs: [TabSummary]?
        var titleTabs: [TabSummary]?
        var formulaTabs: [TabSummary]?
    }

    /// One tab: where it is (points from the shown page's top-left corner, which DocuSign calls
    /// pixels) and what it holds; numbers as strings, as DocuSign sends them.
    struct TabSummary: Codable, Sendable, Hashable {
        var tabId: String?
        var tabType: String
        var documentId: String
        var recipientId: String
        var pageNumber: String
        var xPosition: String
        var yPosition: String
        var width: String
        var height: String
        var tabLabel: String?
        var name: String?
        /// Absent for the types whose DocuSign model has no `value` (sign here, initial here,
        /// checkbox: a checkbox says `selected`).
        var value: String?
        /// `"true"`/`"false"` for checkboxes; absent for every other type.
        var selected: String?
        /// Absent for the types whose DocuSign model has no `locked` (sign here, initial here,
        /// date signed, full name).
        var locked: String?
    }

    /// `GET …/envelopes/{envelopeId}/recipients`: recipients grouped by type.
    struct Recipients: Codable, Sendable, Hashable {
        var signers: [Recipient] = []
        var inPersonSigners: [Recipient] = []
        var carbonCopies: [Recipient] = []
        var certifiedDeliveries: [Recipient] = []
        var agents: [Recipient] = []
        var editors: [Recipient] = []
        var intermediaries: [Recipient] = []
        var witnesses: [Recipient] = []
        var recipientCount: String
        var currentRoutingOrder: String?
    }

    /// `POST …/views/recipient`.
    struct RecipientViewRequest: Codable, Sendable, Hashable {
        var returnUrl: String?
        var authenticationMethod: String?
        var userName: String?
        var email: String?
        var clientUserId: String?
        var recipientId: String?
        var locale: String?
    }

    /// The view's URL.
    struct ViewUrl: Codable, Sendable, Hashable {
        var url: String
    }

    /// `PUT …/envelopes/{envelopeId}`: only voiding is served.
    struct EnvelopeUpdate: Codable, Sendable, Hashable {
        var status: String?
        var voidedReason: String?
    }

    /// `PUT …/envelopes/{envelopeId}`'s answer.
    struct EnvelopeUpdateSummary: Codable, Sendable, Hashable {
        var envelopeId: String
    }

    /// DocuSign's time format: `2026-11-29T07:45:00.1230000Z`.
    static func time(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        // A non-finite time (never a stored date) or one outside years 1–9999 shows as the epoch.
        guard var total = Int(exactly: whole), total >= -62_135_596_800, total < 253_402_300_800 else { return time(Date(timeIntervalSince1970: 0)) }
        // To the nearest microsecond, in DocuSign's seven digits (the last one 0): a `Date` of this
        // century holds about 0.1 µs, so a seventh digit would be noise, and a millisecond time
        // (`.123`, not exact in binary) would read `.1229999`. Carried into the next second at the top.
        var ticks = max(Int(((seconds - whole) * 1_000_000).rounded()), 0) * 10
        if ticks >= 10_000_000 {
            // The last instant of year 9999 stays in it.
            if total + 1 < 253_402_300_800 { (total, ticks) = (total + 1, ticks - 10_000_000) } else { ticks = 9_999_999 }
        }
        // The proleptic Gregorian civil date of a day count (H. Hinnant's days-to-civil): exact
        // integer arithmetic, where a Calendar per call cost more than the rest of a Connect message.
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let secondOfDay = total - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func digits(_ value: Int, _ width: Int) -> String {
            let text = String(abs(value))
            return (value < 0 ? "-" : "") + String(repeating: "0", count: max(width - text.count, 0)) + text
        }
        return digits(year, 4) + "-" + digits(month, 2) + "-" + digits(day, 2) + "T" + digits(secondOfDay / 3_600, 2) + ":"
            + digits(secondOfDay / 60 % 60, 2) + ":" + digits(secondOfDay % 60, 2) + "." + digits(ticks, 7) + "Z"
    }

    /// A `from_date` as clients send it: ISO 8601 with or without fractional seconds or a zone
    /// (UTC when none), or a date alone.
    static func parseTime(_ text: String) -> Date? {
        let full = ISO8601DateFormatter()
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = full.date(from: text) { return date }
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        for format in ["yyyy-MM-dd'T'HH:mm:ss.SSSSSSS", "yyyy-MM-dd'T'HH:mm:ss.SSS", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}

extension REST.Recipients {
    /// The recipients of a stored envelope: statuses and times from the server's rows (what
    /// devices, captive signers and the lifecycle changed), names, emails and client user ids
    /// from the signed payload.
    /// `tabs`: each recipient's tabs are listed when given (an envelope's filled tabs, ``EnvelopeFill``).
    init(rows: [EnvelopeRecipientRecord], payload: SyncPayload?, tabs: [Tab]? = nil) {
        let byID = Dictionary((payload?.recipients ?? []).map { ($0.recipientId, $0) }, uniquingKeysWith: { first, _ in first })
        let tabsByRecipient = Dictionary(grouping: tabs ?? [], by: \.recipientId)
        for row in rows {
            let signed = byID[row.recipientID]
            let changed = row.statusChangedAt.map(REST.time)
            var recipient = REST.Recipient(
                recipientId: row.recipientID, recipientIdGuid: Self.guid(row.envelopeID, row.recipientID), recipientType: row.type,
                routingOrder: String(row.routingOrder), status: row.status)
            if row.type == "inPersonSigner" {
                recipient.hostName = signed?.hostName
                recipient.hostEmail = signed?.hostEmail
                recipient.signerName = row.name
            } else {
                recipient.name = row.name
                recipient.email = signed?.email
            }
            recipient.clientUserId = signed?.clientUserId
            if tabs != nil { recipient.tabs = REST.RecipientTabs(tabsByRecipient[row.recipientID] ?? []) }
            switch row.status {
            case "delivered": recipient.deliveredDateTime = changed
            case "signed", "completed": recipient.signedDateTime = changed
            case "declined":
                recipient.declinedDateTime = changed
                recipient.declinedReason = row.declineReason
            case "sent": recipient.sentDateTime = changed
            default: break
            }
            switch row.type {
            case "inPersonSigner": inPersonSigners.append(recipient)
            case "carbonCopy": carbonCopies.append(recipient)
            case "certifiedDelivery": certifiedDeliveries.append(recipient)
            case "agent": agents.append(recipient)
            case "editor": editors.append(recipient)
            case "intermediary": intermediaries.append(recipient)
            case "witness": witnesses.append(recipient)
            default: signers.append(recipient)
            }
        }
        recipientCount = String(rows.count)
        let waiting = rows.filter { ["created", "sent", "delivered"].contains($0.status) }.map(\.routingOrder)
        currentRoutingOrder = waiting.min().map(String.init)
    }

    /// A stable GUID for a recipient (DocuSign gives every recipient one): a name-based UUID of
    /// the envelope and recipient ids.
    static func guid(_ envelopeID: String, _ recipientID: String) -> String {
        let digest = Array(SHA256.hash(data: Data("\(envelopeID)/\(recipientID)".utf8)).prefix(16))
        var bytes = digest
        bytes[6] = (bytes[6] & 0x0F) | 0x50  // version 5-like (name-based)
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }
}

/// A string field a client may send as a JSON string, number or boolean (DocuSign's definition
/// says string; SDK users often pass numbers).
struct RESTText: Decodable, Sendable, Hashable {
    var value: String

    init(_ value: String) { self.value = value }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            value = text
        } else if let number = try? container.decode(Int64.self) {
            value = String(number)
        } else if let number = try? container.decode(Double.self) {
            value = String(number)
        } else if let flag = try? container.decode(Bool.self) {
            value = flag ? "true" : "false"
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected a string, number or boolean")
        }
    }
}

extension REST {
    /// `POST …/envelopes`: what is read of DocuSign's EnvelopeDefinition (docs/rest-api.md).
    struct EnvelopeDefinition: Decodable, Sendable {
        struct Document: Decodable, Sendable {
            var documentId: RESTText?
            var name: String?
            var documentBase64: String?
            var fileExtension: String?
            var remoteUrl: String?
        }
        struct TabDefinition: Decodable, Sendable {
            var documentId: RESTText?
            var pageNumber: RESTText?
            var xPosition: RESTText?
            var yPosition: RESTText?
            var width: RESTText?
            var height: RESTText?
            var anchorString: String?
            var anchorXOffset: RESTText?
            var anchorYOffset: RESTText?
            var anchorUnits: String?
            var anchorIgnoreIfNotPresent: RESTText?
            var anchorCaseSensitive: RESTText?
            var anchorMatchWholeWord: RESTText?
            var anchorHorizontalAlignment: String?
            var tabLabel: String?
            var tabId: String?
            var name: String?
            var value: String?
            var optional: RESTText?
            var required: RESTText?
            var locked: RESTText?
            var selected: RESTText?
        }
        struct Tabs: Decodable, Sendable {
            var signHereTabs: [TabDefinition]?
            var initialHereTabs: [TabDefinition]?
            var dateSignedTabs: [TabDefinition]?
            var fullNameTabs: [TabDefinition]?
            var textTabs: [TabDefinition]?
            var checkboxTabs: [TabDefinition]?
            var companyTabs: [TabDefinition]?
            var titleTabs: [TabDefinition]?

            /// Each list with the tab type it holds (absent lists empty).
            var byType: [(TabType, [TabDefinition])] {
                [
                    (.signHere, signHereTabs), (.initialHere, initialHereTabs), (.dateSigned, dateSignedTabs), (.fullName, fullNameTabs),
                    (.text, textTabs), (.checkbox, checkboxTabs), (.company, companyTabs), (.title, titleTabs),
                ].map { ($0, $1 ?? []) }
            }
        }
        struct RecipientDefinition: Decodable, Sendable {
            var recipientId: RESTText?
            var name: String?
            var email: String?
            var routingOrder: RESTText?
            var clientUserId: String?
            var tabs: Tabs?
            /// A template's role (templates only).
            var roleName: String?
            /// In-person signers: the host who hands over the device, and the signer's name and email.
            var hostName: String?
            var hostEmail: String?
            var signerName: String?
            var signerEmail: String?
        }
        /// Who fills a template's role in an envelope made from it (`templateRoles`).
        struct TemplateRoleDefinition: Decodable, Sendable {
            var roleName: String?
            var name: String?
            var email: String?
            var clientUserId: String?
            /// Values for the template's tabs, found by `tabLabel`.
            var tabs: Tabs?
        }
        struct RecipientGroups: Decodable, Sendable {
            var signers: [RecipientDefinition]?
            var carbonCopies: [RecipientDefinition]?
            var certifiedDeliveries: [RecipientDefinition]?
            var inPersonSigners: [RecipientDefinition]?
            var agents: [RecipientDefinition]?
            var editors: [RecipientDefinition]?
            var intermediaries: [RecipientDefinition]?
            var witnesses: [RecipientDefinition]?
        }
        var emailSubject: String?
        var emailBlurb: String?
        var status: String?
        var documents: [Document]?
        var recipients: RecipientGroups?
        var templateId: String?
        var templateRoles: [TemplateRoleDefinition]?
        var compositeTemplates: [CompositeTemplate]?
        /// The envelope's own Connect configuration (docs/webhooks.md, "An envelope's own eventNotification").
        var eventNotification: ConnectConfiguration?
        /// A template's name, description and folder (`POST …/templates`, whose EnvelopeTemplate
        /// carries the envelope definition's fields too).
        var name: String?
        var description: String?
        var folderName: String?

        /// A composite template: a server template whose roles inline templates fill (the part served).
        struct CompositeTemplate: Decodable, Sendable {
            struct ServerTemplate: Decodable, Sendable {
                var templateId: String?
                var sequence: RESTText?
            }
            struct InlineTemplate: Decodable, Sendable {
                var sequence: RESTText?
                var recipients: RecipientGroups?
                var documents: [Document]?
            }
            var compositeTemplateId: String?
            var serverTemplates: [ServerTemplate]?
            var inlineTemplates: [InlineTemplate]?
            var document: Document?
        }
    }

    /// `POST …/envelopes`'s answer.
    struct EnvelopeSummary: Codable, Sendable, Hashable {
        var envelopeId: String
        var status: String
        var statusDateTime: String
        var uri: String
    }
}

extension REST {
    /// `GET …/envelopes/{envelopeId}/documents`: the envelope's documents, described.
    struct EnvelopeDocumentsResult: Codable, Sendable, Hashable {
        struct Page: Codable, Sendable, Hashable {
            var pageId: String
            var sequence: String
            /// In points (1/72 inch), as shown (CropBox, /Rotate applied); `dpi` says so.
            var width: String
            var height: String
            var dpi: String
        }
        struct Document: Codable, Sendable, Hashable {
            var documentId: String
            var documentIdGuid: String
            var name: String
            var type: String
            var uri: String
            var order: String
            var pages: [Page]?
            var containsPdfFormFields: String
            var display: String
            var includeInDownload: String
            var signerMustAcknowledge: String
            var authoritativeCopy: String
        }
        var envelopeId: String
        var envelopeDocuments: [Document]
    }
}


extension REST.RecipientTabs {
    /// `tabs` (one recipient's) grouped by type, each list absent when empty.
    init(_ tabs: [Tab]) {
        func list(_ type: TabType) -> [REST.TabSummary]? {
            let summaries = tabs.filter { $0.type == type }.map(REST.TabSummary.init)
            return summaries.isEmpty ? nil : summaries
        }
        self.init(
            signHereTabs: list(.signHere), initialHereTabs: list(.initialHere), dateSignedTabs: list(.dateSigned),
            fullNameTabs: list(.fullName), textTabs: list(.text), checkboxTabs: list(.checkbox), companyTabs: list(.company),
            titleTabs: list(.title), formulaTabs: list(.formula))
    }
}

extension REST.TabSummary {
    /// A tab with the fields DocuSign's model of its type has (the official SDK's models, generated
    /// from DocuSign's OpenAPI definition, are the check: `Tests/interop/rest_sdk.py`).
    init(_ tab: Tab) {
        let signing: Set<TabType> = [.signHere, .initialHere]
        let valueless = signing.union([.checkbox]), lockless = signing.union([.dateSigned, .fullName])
        self.init(
            tabId: tab.tabId, tabType: tab.type.rawValue, documentId: tab.documentId, recipientId: tab.recipientId,
            pageNumber: String(tab.pageNumber), xPosition: Self.points(tab.frame.x), yPosition: Self.points(tab.frame.y),
            width: Self.points(tab.frame.width), height: Self.points(tab.frame.height), tabLabel: tab.label, name: tab.name,
            value: valueless.contains(tab.type) ? nil : tab.value, selected: tab.type == .checkbox ? (tab.selected ? "true" : "false") : nil,
            locked: lockless.contains(tab.type) ? nil : (tab.locked ? "true" : "false"))
    }

    /// A position in points: whole numbers as DocuSign writes them (`"72"`), others to two decimals.
    static func points(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let rounded = (value * 100).rounded() / 100
        if rounded == rounded.rounded(), abs(rounded) < 1e15 { return String(Int64(rounded)) }
        return String(format: "%.2f", rounded)
    }
}
