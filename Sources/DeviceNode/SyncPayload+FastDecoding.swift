import Envelopes
import Foundation
import MessagePack

// Codable-free decoding of the sync payload (docs/messagepack.md, "Fast path"): the coordinator
// decodes one per ingested envelope, and the Codable path was about 9% of its CPU per item
// (loadtests/NOTES.md). Encoding stays Codable: the canonical bytes are `MessagePackEncoder`'s.
//
// Each reader accepts what the synthesized `Decodable` conformance accepts: keys in any order,
// unknown keys skipped, the first of duplicate keys, optionals absent or nil. The Envelopes types
// are read through private wrappers (Envelopes does not depend on MessagePack).
// Tests/DeviceNodeTests/SyncPayloadFastDecodingTests.swift compares both paths.

extension SyncPayload: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var format: String?, deviceId: String?, sequence: UInt64?, envelopeId: String?, transactionId: String?
        var templateId: String?, seenTemplateId = false
        var signingMode: String?, name: String?, emailSubject: String?, emailMessage: String?
        var createdAtNanos: Int64?
        var completedLocallyAtNanos: Int64?, seenCompleted = false
        var documents: [PayloadDocument]?, recipients: [PayloadRecipient]?, tabs: [Tab]?
        var customFields: CustomFields?, signatures: [PayloadSignature]?
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
            case "tabs" where tabs == nil: tabs = try reader.readArray(of: FastTab.self).map(\.tab)
            case "customFields" where customFields == nil: customFields = try reader.read(FastCustomFields.self).fields
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
        var documentId: String?, name: String?, pageCount: Int?, sha256: [UInt8]?, pdf: Data?
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
        var recipientId: String?, type: String?, name: String?, routingOrder: Int?, status: String?
        var optionals: [String: String?] = [:]
        var statusChangedAtNanos: Int64?, seenStatusChanged = false
        for _ in 0..<(try reader.readMapHeader()) {
            let key = try reader.readKey()
            switch key {
            case "recipientId" where recipientId == nil: recipientId = try reader.readString()
            case "type" where type == nil: type = try reader.readString()
            case "name" where name == nil: name = try reader.readString()
            case "routingOrder" where routingOrder == nil: routingOrder = try reader.readInt()
            case "status" where status == nil: status = try reader.readString()
            case "email", "clientUserId", "hostName", "hostEmail", "declineReason":
                let name = key.description
                guard optionals.index(forKey: name) == nil else {
                    try reader.skipValue()
                    continue
                }
                optionals[name] = .some(try reader.readNil() ? nil : try reader.readString())
            case "statusChangedAtNanos" where !seenStatusChanged:
                seenStatusChanged = true
                if try !reader.readNil() { statusChangedAtNanos = try reader.readInt64() }
            default: try reader.skipValue()
            }
        }
        guard let recipientId else { throw reader.missingKey("recipientId") }
        guard let type else { throw reader.missingKey("type") }
        guard let name else { throw reader.missingKey("name") }
        guard let routingOrder else { throw reader.missingKey("routingOrder") }
        guard let status else { throw reader.missingKey("status") }
        self.init(
            recipientId: recipientId, type: type, name: name, email: optionals["email"] ?? nil, routingOrder: routingOrder,
            clientUserId: optionals["clientUserId"] ?? nil, hostName: optionals["hostName"] ?? nil,
            hostEmail: optionals["hostEmail"] ?? nil, status: status, statusChangedAtNanos: statusChangedAtNanos,
            declineReason: optionals["declineReason"] ?? nil)
    }
}

extension PayloadSignature: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var tabIndex: Int?, recipientId: String?, documentId: String?, fieldId: String?
        var isoRecord: [UInt8]?, binding: [UInt8]?, bindingSignature: [UInt8]?
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
            tabIndex: tabIndex, recipientId: recipientId, documentId: documentId, fieldId: fieldId, isoRecord: isoRecord,
            binding: binding, bindingSignature: bindingSignature)
    }
}

/// Reads an Envelopes `Tab` (its synthesized Codable keys).
private struct FastTab: MessagePackReadable {
    let tab: Tab

    init(from reader: inout MessagePackReader) throws {
        var type: TabType?, documentId: String?, recipientId: String?, pageNumber: Int?, frame: TabFrame?
        var scale: Double?, locked: Bool?, optional: Bool?, selected: Bool?
        var optionals: [String: String?] = [:]
        for _ in 0..<(try reader.readMapHeader()) {
            let key = try reader.readKey()
            switch key {
            case "type" where type == nil:
                let raw = try reader.readString()
                guard let value = TabType(rawValue: raw) else { throw reader.invalidValue("unknown tab type \"\(raw)\"") }
                type = value
            case "documentId" where documentId == nil: documentId = try reader.readString()
            case "recipientId" where recipientId == nil: recipientId = try reader.readString()
            case "pageNumber" where pageNumber == nil: pageNumber = try reader.readInt()
            case "frame" where frame == nil: frame = try reader.read(FastTabFrame.self).frame
            case "scale" where scale == nil: scale = try reader.readDouble()
            case "locked" where locked == nil: locked = try reader.readBool()
            case "optional" where optional == nil: optional = try reader.readBool()
            case "selected" where selected == nil: selected = try reader.readBool()
            case "tabId", "label", "name", "value", "groupName":
                let name = key.description
                guard optionals.index(forKey: name) == nil else {
                    try reader.skipValue()
                    continue
                }
                optionals[name] = .some(try reader.readNil() ? nil : try reader.readString())
            default: try reader.skipValue()
            }
        }
        guard let type else { throw reader.missingKey("type") }
        guard let documentId else { throw reader.missingKey("documentId") }
        guard let recipientId else { throw reader.missingKey("recipientId") }
        guard let pageNumber else { throw reader.missingKey("pageNumber") }
        guard let frame else { throw reader.missingKey("frame") }
        guard let scale else { throw reader.missingKey("scale") }
        guard let locked else { throw reader.missingKey("locked") }
        guard let optional else { throw reader.missingKey("optional") }
        guard let selected else { throw reader.missingKey("selected") }
        tab = Tab(
            type: type, tabId: optionals["tabId"] ?? nil, documentId: documentId, recipientId: recipientId,
            pageNumber: pageNumber, frame: frame, label: optionals["label"] ?? nil, name: optionals["name"] ?? nil,
            value: optionals["value"] ?? nil, groupName: optionals["groupName"] ?? nil, scale: scale, locked: locked,
            optional: optional, selected: selected)
    }
}

private struct FastTabFrame: MessagePackReadable {
    let frame: TabFrame

    init(from reader: inout MessagePackReader) throws {
        var x: Double?, y: Double?, width: Double?, height: Double?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "x" where x == nil: x = try reader.readDouble()
            case "y" where y == nil: y = try reader.readDouble()
            case "width" where width == nil: width = try reader.readDouble()
            case "height" where height == nil: height = try reader.readDouble()
            default: try reader.skipValue()
            }
        }
        guard let x else { throw reader.missingKey("x") }
        guard let y else { throw reader.missingKey("y") }
        guard let width else { throw reader.missingKey("width") }
        guard let height else { throw reader.missingKey("height") }
        frame = TabFrame(x: x, y: y, width: width, height: height)
    }
}

private struct FastCustomFields: MessagePackReadable {
    let fields: CustomFields

    init(from reader: inout MessagePackReader) throws {
        var text: [TextCustomField]?, list: [ListCustomField]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "text" where text == nil: text = try reader.readArray(of: FastTextField.self).map(\.field)
            case "list" where list == nil: list = try reader.readArray(of: FastListField.self).map(\.field)
            default: try reader.skipValue()
            }
        }
        guard let text else { throw reader.missingKey("text") }
        guard let list else { throw reader.missingKey("list") }
        fields = CustomFields(text: text, list: list)
    }
}

private struct FastTextField: MessagePackReadable {
    let field: TextCustomField

    init(from reader: inout MessagePackReader) throws {
        var name: String?, value: String?, required: Bool?, show: Bool?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "name" where name == nil: name = try reader.readString()
            case "value" where value == nil: value = try reader.readString()
            case "required" where required == nil: required = try reader.readBool()
            case "show" where show == nil: show = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let name else { throw reader.missingKey("name") }
        guard let value else { throw reader.missingKey("value") }
        guard let required else { throw reader.missingKey("required") }
        guard let show else { throw reader.missingKey("show") }
        field = TextCustomField(name: name, value: value, required: required, show: show)
    }
}

private struct FastListField: MessagePackReadable {
    let field: ListCustomField

    init(from reader: inout MessagePackReader) throws {
        var name: String?, value: String?, items: [String]?, required: Bool?, show: Bool?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "name" where name == nil: name = try reader.readString()
            case "value" where value == nil: value = try reader.readString()
            case "items" where items == nil: items = try reader.readArray(of: FastString.self).map(\.value)
            case "required" where required == nil: required = try reader.readBool()
            case "show" where show == nil: show = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let name else { throw reader.missingKey("name") }
        guard let value else { throw reader.missingKey("value") }
        guard let items else { throw reader.missingKey("items") }
        guard let required else { throw reader.missingKey("required") }
        guard let show else { throw reader.missingKey("show") }
        field = ListCustomField(name: name, value: value, items: items, required: required, show: show)
    }
}

private struct FastString: MessagePackReadable {
    let value: String

    init(from reader: inout MessagePackReader) throws {
        value = try reader.readString()
    }
}

// Memberwise initializers for the readers (the types' own initializers take model values).
extension SyncPayload {
    init(
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

extension PayloadRecipient {
    init(
        recipientId: String, type: String, name: String, email: String?, routingOrder: Int, clientUserId: String?,
        hostName: String?, hostEmail: String?, status: String, statusChangedAtNanos: Int64?, declineReason: String?
    ) {
        self.recipientId = recipientId
        self.type = type
        self.name = name
        self.email = email
        self.routingOrder = routingOrder
        self.clientUserId = clientUserId
        self.hostName = hostName
        self.hostEmail = hostEmail
        self.status = status
        self.statusChangedAtNanos = statusChangedAtNanos
        self.declineReason = declineReason
    }
}
