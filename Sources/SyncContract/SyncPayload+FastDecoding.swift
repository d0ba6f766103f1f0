import Envelopes
import Foundation
import MessagePack

// Codable-free decoding of the sync payload (docs/messagepack.md, "Fast path"): the
// coordinator decodes one per ingested item (`SyncPayload(canonicalBytes:)`), and the
// Codable path was about 9% of its CPU per item (loadtests/NOTES.md). The Envelopes types it
// embeds read themselves (Sources/Envelopes/Model+FastDecoding.swift). Each conformance
// reads exactly what the synthesized `Decodable` conformance reads
// (keys in any order, unknown keys skipped,
// the first of duplicate keys, optionals absent or nil, every other key required).
// Encoding stays Codable, so the canonical (signed) bytes do not change.
// Tests/DeviceNodeTests/PayloadFastDecodingTests.swift compares both paths.

extension SyncPayload: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var format: String?
        var deviceId: String?
        var sequence: UInt64?
        var envelopeId: String?
        var transactionId: String?
        var templateId: String?, seenTemplateId = false
        var signingMode: String?
        var name: String?
        var emailSubject: String?
        var emailMessage: String?
        var createdAtNanos: Int64?
        var completedLocallyAtNanos: Int64?, seenCompleted = false
        var documents: [PayloadDocument]?
        var recipients: [PayloadRecipient]?
        var tabs: [Tab]?
        var customFields: CustomFields?
        var signatures: [PayloadSignature]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "format" where format == nil: format = try reader.readString()
            case "deviceId" where deviceId == nil: deviceId = try reader.readString()
            case "sequence" where sequence == nil: sequence = try reader.readUInt64()
            case "envelopeId" where envelopeId == nil: envelopeId = try reader.readString()
            case "transactionId" where transactionId == nil: transactionId = try reader.readString()
            case "templateId" where !seenTemplateId:
                seenTemplateId = true
                if try !reader.readNil() { templateId = try reader.readString() }
            case "signingMode" where signingMode == nil: signingMode = try reader.readString()
            case "name" where name == nil: name = try reader.readString()
            case "emailSubject" where emailSubject == nil: emailSubject = try reader.readString()
            case "emailMessage" where emailMessage == nil: emailMessage = try reader.readString()
            case "createdAtNanos" where createdAtNanos == nil: createdAtNanos = try reader.readInt64()
            case "completedLocallyAtNanos" where !seenCompleted:
                seenCompleted = true
                if try !reader.readNil() { completedLocallyAtNanos = try reader.readInt64() }
            case "documents" where documents == nil: documents = try reader.readArray(of: PayloadDocument.self)
            case "recipients" where recipients == nil: recipients = try reader.readArray(of: PayloadRecipient.self)
            case "tabs" where tabs == nil: tabs = try reader.readArray(of: Tab.self)
            case "customFields" where customFields == nil: customFields = try reader.read(CustomFields.self)
            case "signatures" where signatures == nil: signatures = try reader.readArray(of: PayloadSignature.self)
            default: try reader.skipValue()
            }
        }
        guard let format else { throw reader.missingKey("format") }
        guard let deviceId else { throw reader.missingKey("deviceId") }
        guard let sequence else { throw reader.missingKey("sequence") }
        guard let envelopeId else { throw reader.missingKey("envelopeId") }
        guard let transactionId else { throw reader.missingKey("transactionId") }
        guard let signingMode else { throw reader.missingKey("signingMode") }
        guard let name else { throw reader.missingKey("name") }
        guard let emailSubject else { throw reader.missingKey("emailSubject") }
        guard let emailMessage else { throw reader.missingKey("emailMessage") }
        guard let createdAtNanos else { throw reader.missingKey("createdAtNanos") }
        guard let documents else { throw reader.missingKey("documents") }
        guard let recipients else { throw reader.missingKey("recipients") }
        guard let tabs else { throw reader.missingKey("tabs") }
        guard let customFields else { throw reader.missingKey("customFields") }
        guard let signatures else { throw reader.missingKey("signatures") }
        self.init(
            format: format, deviceId: deviceId, sequence: sequence, envelopeId: envelopeId, transactionId: transactionId,
            templateId: templateId, signingMode: signingMode, name: name, emailSubject: emailSubject,
            emailMessage: emailMessage, createdAtNanos: createdAtNanos, completedLocallyAtNanos: completedLocallyAtNanos,
            documents: documents, recipients: recipients, tabs: tabs, customFields: customFields, signatures: signatures)
    }
}

extension PayloadDocument: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var documentId: String?
        var name: String?
        var pageCount: Int?
        var sha256: [UInt8]?
        var pdf: Data?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "documentId" where documentId == nil: documentId = try reader.readString()
            case "name" where name == nil: name = try reader.readString()
            case "pageCount" where pageCount == nil: pageCount = try reader.readInt()
            case "sha256" where sha256 == nil: sha256 = try reader.readBinary()
            case "pdf" where pdf == nil: pdf = try reader.readData()
            default: try reader.skipValue()
            }
        }
        guard let documentId else { throw reader.missingKey("documentId") }
        guard let name else { throw reader.missingKey("name") }
        guard let pageCount else { throw reader.missingKey("pageCount") }
        guard let sha256 else { throw reader.missingKey("sha256") }
        guard let pdf else { throw reader.missingKey("pdf") }
        self.init(documentId: documentId, name: name, pageCount: pageCount, sha256: sha256, pdf: pdf)
    }
}

extension PayloadRecipient: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var recipientId: String?
        var type: String?
        var name: String?
        var email: String?, seenEmail = false
        var routingOrder: Int?
        var clientUserId: String?, seenClientUserId = false
        var hostName: String?, seenHostName = false
        var hostEmail: String?, seenHostEmail = false
        var status: String?
        var statusChangedAtNanos: Int64?, seenStatusChanged = false
        var declineReason: String?, seenDeclineReason = false
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "recipientId" where recipientId == nil: recipientId = try reader.readString()
            case "type" where type == nil: type = try reader.readString()
            case "name" where name == nil: name = try reader.readString()
            case "email" where !seenEmail:
                seenEmail = true
                if try !reader.readNil() { email = try reader.readString() }
            case "routingOrder" where routingOrder == nil: routingOrder = try reader.readInt()
            case "clientUserId" where !seenClientUserId:
                seenClientUserId = true
                if try !reader.readNil() { clientUserId = try reader.readString() }
            case "hostName" where !seenHostName:
                seenHostName = true
                if try !reader.readNil() { hostName = try reader.readString() }
            case "hostEmail" where !seenHostEmail:
                seenHostEmail = true
                if try !reader.readNil() { hostEmail = try reader.readString() }
            case "status" where status == nil: status = try reader.readString()
            case "statusChangedAtNanos" where !seenStatusChanged:
                seenStatusChanged = true
                if try !reader.readNil() { statusChangedAtNanos = try reader.readInt64() }
            case "declineReason" where !seenDeclineReason:
                seenDeclineReason = true
                if try !reader.readNil() { declineReason = try reader.readString() }
            default: try reader.skipValue()
            }
        }
        guard let recipientId else { throw reader.missingKey("recipientId") }
        guard let type else { throw reader.missingKey("type") }
        guard let name else { throw reader.missingKey("name") }
        guard let routingOrder else { throw reader.missingKey("routingOrder") }
        guard let status else { throw reader.missingKey("status") }
        self.init(
            recipientId: recipientId, type: type, name: name, email: email, routingOrder: routingOrder,
            clientUserId: clientUserId, hostName: hostName, hostEmail: hostEmail, status: status,
            statusChangedAtNanos: statusChangedAtNanos, declineReason: declineReason)
    }
}

extension PayloadSignature: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var tabIndex: Int?
        var recipientId: String?
        var documentId: String?
        var fieldId: String?
        var isoRecord: [UInt8]?
        var binding: [UInt8]?
        var bindingSignature: [UInt8]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "tabIndex" where tabIndex == nil: tabIndex = try reader.readInt()
            case "recipientId" where recipientId == nil: recipientId = try reader.readString()
            case "documentId" where documentId == nil: documentId = try reader.readString()
            case "fieldId" where fieldId == nil: fieldId = try reader.readString()
            case "isoRecord" where isoRecord == nil: isoRecord = try reader.readBinary()
            case "binding" where binding == nil: binding = try reader.readBinary()
            case "bindingSignature" where bindingSignature == nil: bindingSignature = try reader.readBinary()
            default: try reader.skipValue()
            }
        }
        guard let tabIndex else { throw reader.missingKey("tabIndex") }
        guard let recipientId else { throw reader.missingKey("recipientId") }
        guard let documentId else { throw reader.missingKey("documentId") }
        guard let fieldId else { throw reader.missingKey("fieldId") }
        guard let isoRecord else { throw reader.missingKey("isoRecord") }
        guard let binding else { throw reader.missingKey("binding") }
        guard let bindingSignature else { throw reader.missingKey("bindingSignature") }
        self.init(
            tabIndex: tabIndex, recipientId: recipientId, documentId: documentId, fieldId: fieldId,
            isoRecord: isoRecord, binding: binding, bindingSignature: bindingSignature)
    }
}

// The memberwise initializer, public: the device builds payloads from its model with it.
extension SyncPayload {
    public init(
        format: String, deviceId: String, sequence: UInt64, envelopeId: String, transactionId: String, templateId: String?,
        signingMode: String, name: String, emailSubject: String, emailMessage: String, createdAtNanos: Int64,
        completedLocallyAtNanos: Int64?, documents: [PayloadDocument], recipients: [PayloadRecipient], tabs: [Tab],
        customFields: CustomFields, signatures: [PayloadSignature]
    ) {
        self.format = format
        self.deviceId = deviceId
        self.sequence = sequence
        self.envelopeId = envelopeId
        self.transactionId = transactionId
        self.templateId = templateId
        self.signingMode = signingMode
        self.name = name
        self.emailSubject = emailSubject
        self.emailMessage = emailMessage
        self.createdAtNanos = createdAtNanos
        self.completedLocallyAtNanos = completedLocallyAtNanos
        self.documents = documents
        self.recipients = recipients
        self.tabs = tabs
        self.customFields = customFields
        self.signatures = signatures
    }
}
