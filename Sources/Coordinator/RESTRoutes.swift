import Envelopes
import FleetProtocol
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization
import SyncContract

/// The eSignature REST API v2.1 subset served under `/restapi` (docs/rest-api.md), over the same
/// envelopes devices sync and captive signers sign: each route maps onto an existing service
/// (``AuthService``, ``EnvelopeService``, ``CaptiveSigningService``, the store's envelope list),
/// with no state of its own.
///
/// | route | answer |
/// |---|---|
/// | `POST /oauth/token` | the JWT bearer grant and the authorization code grant (RESTOAuthRoutes.swift) |
/// | `GET`, `POST /oauth/auth` | the consent page of the authorization code grant |
/// | `GET /oauth/userinfo` | the token's user and account, `base_uri` this server |
/// | `GET /restapi/v2.1/accounts/{accountId}` | the account |
/// | `POST …/envelopes` | creates and sends an envelope (`REST.EnvelopeDefinition`) as the account's REST sender |
/// | `GET …/envelopes?from_date=…` | status changes since `from_date` (`status`, `envelope_ids`, `start_position`, `count`) |
/// | `GET …/envelopes/{envelopeId}` | the envelope (`include=recipients`) |
/// | `PUT …/envelopes/{envelopeId}` | `{"status": "voided", "voidedReason": …}` voids it |
/// | `GET …/envelopes/{envelopeId}/recipients` | its recipients by type (`include_tabs=true`: with their tabs) |
/// | `GET …/envelopes/{envelopeId}/custom_fields` | its custom fields (`REST.CustomFields`) |
/// | `GET …/envelopes/{envelopeId}/documents` | its documents and their pages; `…/{documentId}`, `combined`, `certificate` the PDFs |
/// | `POST …/envelopes/{envelopeId}/views/recipient` | a captive signing URL (`{"url": …}`) |
///
/// Templates, draft edits and the rest: docs/rest-api.md has every route.
///
/// Every route needs `Authorization: Bearer <access token>` (a token from `auth.token`); errors are
/// DocuSign's `{"errorCode", "message"}` bodies.
public struct RESTRoutes: Sendable {
    /// The device id under which envelopes created over REST are stored, in every account: the
    /// coordinator's own REST sender (docs/rest-api.md, "One model"). No device store exists for
    /// it; the checker judges its envelopes by the server-side rules (docs/checker.md).
    public static let senderDeviceID = RESTEnvelopeSender.deviceID

    /// The largest request body, in bytes, but for envelope creation.
    public static let maxBodyBytes = 1 << 20
    /// The largest envelope definition, in bytes (its documents travel in it as base64).
    public static let maxEnvelopeBytes = 32 << 20
    /// The most envelopes one list answers (DocuSign's `count` limit for status changes).
    public static let maxListCount = 1000

    let auth: AuthService
    let envelopes: EnvelopeService
    let captive: CaptiveSigningService
    let store: any CoordinatorStorage
    let sender: RESTEnvelopeSender
    /// The per-account limits devices are held to (one budget per account, whichever way it calls).
    let rateLimiter: RateLimiter
    /// Integration keys, consent and the JWT grant.
    let oauth: OAuthService
    /// The account's templates, the same devices cache.
    let templates: TemplateCatalog
    /// Connect configurations (docs/webhooks.md).
    let connect: ConnectService
    /// Reads documents' text for anchor tabs.
    var textLocator = PDFTextLocator()
    var documents = CompletedDocuments()

    /// The rate-limit headers of the request being answered, set once its account is known.
    @TaskLocal static var rateHeaders: RateHeaders?

    /// DocuSign's rate-limit headers, filled by the account check of a request.
    final class RateHeaders: Sendable {
        let fields = Mutex<[(HTTPField.Name, String)]>([])
    }

    public init(services: CoordinatorServices) {
        self.auth = services.auth
        self.envelopes = services.envelopes
        self.captive = services.captive
        self.store = services.envelopes.store
        self.sender = RESTEnvelopeSender(devices: services.devices, ingest: services.ingest, store: services.envelopes.store)
        self.rateLimiter = services.rateLimiter
        self.oauth = services.oauth
        self.templates = services.templates
        self.connect = services.connect
    }

    /// Where the listeners are (their base URLs once bound).
    var links: CaptiveSigningLinks? { auth.links }

    /// A refusal, as DocuSign shapes it.
    struct Failure: Error {
        var status: HTTPResponse.Status
        var code: String
        var message: String

        static let invalidToken = Failure(
            status: .unauthorized, code: "AUTHORIZATION_INVALID_TOKEN", message: "The access token provided is expired, revoked or malformed.")
        static let noEnvelope = Failure(
            status: .badRequest, code: "ENVELOPE_DOES_NOT_EXIST", message: "The envelope specified either does not exist or you have no rights to it.")
        static let notMember = Failure(
            status: .badRequest, code: "USER_LACKS_MEMBERSHIP", message: "The UserID does not have a valid membership in this Account.")
        static func unknownRecipient(_ detail: String) -> Failure {
            Failure(
                status: .badRequest, code: "UNKNOWN_ENVELOPE_RECIPIENT",
                message: "The recipient you have identified is not a valid recipient of the specified envelope. \(detail)")
        }
        static func badParameter(_ message: String) -> Failure { Failure(status: .badRequest, code: "INVALID_REQUEST_PARAMETER", message: message) }
        static func badBody(_ message: String) -> Failure { Failure(status: .badRequest, code: "INVALID_REQUEST_BODY", message: message) }
        static func noTemplate(_ id: String) -> Failure {
            Failure(status: .badRequest, code: "TEMPLATE_ID_INVALID", message: "Invalid template ID. No template \"\(id)\" in this account.")
        }
        static func noDocument(_ id: String) -> Failure {
            Failure(status: .badRequest, code: "DOCUMENT_DOES_NOT_EXIST", message: "The document specified was not found. No document \"\(id)\" in the envelope.")
        }
    }

    /// - Parameter secure: the routes of the HTTPS listener: user info then names its base URL.
    func register(on router: Router<BasicRequestContext>, secure: Bool = false) {
        let routes = self
        router.post("oauth/token") { request, _ in
            await routes.token(request, secure: secure)
        }
        router.get("oauth/auth") { request, _ in
            await routes.consentPage(request)
        }
        router.post("oauth/auth") { request, _ in
            await routes.consentAnswer(request)
        }
        router.get("oauth/userinfo") { request, _ in
            await routes.answer {
                let (user, account) = try await routes.authenticate(request)
                let base = (secure ? routes.links?.secureBaseURL : nil) ?? routes.auth.advertisedHost
                return REST.UserInfo(
                    sub: user.id, name: user.name, email: user.email,
                    accounts: [.init(account_id: account.id, is_default: true, account_name: account.name, base_uri: base)])
            }
        }
        let accounts = router.group("restapi/v2.1/accounts/:accountId")
        accounts.get("") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return REST.AccountInformation(accountIdGuid: account.id, accountName: account.name)
            }
        }
        accounts.get("envelopes") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return try await routes.list(
                    request.uri.queryParameters, account: account.id, search: Self.formValue("search_text", in: request.uri.query))
            }
        }
        accounts.post("envelopes") { request, context in
            await routes.answer(status: .created) {
                let (token, account) = try await routes.tokenAndAccount(request, context)
                let body = try await routes.definitionBody(request)
                let definition = try routes.decode(REST.EnvelopeDefinition.self, from: body)
                let now = routes.auth.now()
                let transactionID = UUID().uuidString.lowercased()
                // Checked in full now, draft or not: a draft that could never be sent is refused at once.
                let envelope = try await routes.envelope(from: definition, transactionID: transactionID, at: now, account: account.id)
                if try definition.creationStatus() == "created" {
                    // A draft's eventNotification is checked now and takes effect when it is sent.
                    if let notification = definition.eventNotification {
                        let request = try notification.request()
                        try await routes.connectFleet { try await routes.connect.check(request, accountID: account.id) }
                    }
                    let id = SyncIngest.serverEnvelopeID(accountID: account.id, transactionID: transactionID)
                    try await routes.store.insertDraft(
                        RESTDraftRecord(id: id, accountID: account.id, transactionID: transactionID, definition: body, createdAt: now))
                    return REST.EnvelopeSummary(envelopeId: id, status: "created", statusDateTime: REST.time(now), uri: "/envelopes/\(id)")
                }
                let id = try await routes.send(
                    envelope, notification: definition.eventNotification, transactionID: transactionID, token: token, account: account.id, at: now)
                return REST.EnvelopeSummary(envelopeId: id, status: "sent", statusDateTime: REST.time(now), uri: "/envelopes/\(id)")
            }
        }
        accounts.get("envelopes/:envelopeId") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let include = (request.uri.queryParameters.get("include") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                return try await routes.envelope(context.parameters.get("envelopeId") ?? "", account: account.id, withRecipients: include.contains("recipients"))
            }
        }
        accounts.put("envelopes/:envelopeId") { request, context in
            await routes.answer {
                let (token, account) = try await routes.tokenAndAccount(request, context)
                let update = try await routes.decode(REST.EnvelopeUpdate.self, from: request)
                let id = context.parameters.get("envelopeId") ?? ""
                if update.status == "sent" {
                    return try await routes.sendDraft(id, token: token, account: account.id)
                }
                guard update.status == "voided" else {
                    throw Failure.badBody(
                        "only {\"status\": \"sent\"} (a draft) and {\"status\": \"voided\", \"voidedReason\": …} are served by this server's envelope update")
                }
                guard let reason = update.voidedReason, !reason.trimmingCharacters(in: .whitespaces).isEmpty else {
                    throw Failure(status: .badRequest, code: "VOIDED_REASON_REQUIRED", message: "A voided reason is required to void an envelope.")
                }
                _ = try await routes.fleet { try await routes.envelopes.void(envelopeID: id, reason: reason, accountID: account.id) }
                return REST.EnvelopeUpdateSummary(envelopeId: id)
            }
        }
        accounts.get("envelopes/:envelopeId/recipients") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("envelopeId") ?? ""
                if let draft = try await routes.store.draft(id: id, accountID: account.id) {
                    return Self.draftRecipients(try routes.decode(REST.EnvelopeDefinition.self, from: draft.definition))
                }
                let aggregate = try await routes.aggregate(id, account: account.id)
                let payload = try? CaptiveSigningService.payload(of: aggregate.envelope)
                let includeTabs = request.uri.queryParameters.get("include_tabs")?.lowercased() == "true"
                return REST.Recipients(
                    rows: aggregate.recipients, payload: payload,
                    tabs: includeTabs ? try await routes.fill(aggregate, payload: payload)?.tabs ?? [] : nil)
            }
        }
        accounts.get("envelopes/:envelopeId/custom_fields") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("envelopeId") ?? ""
                // A draft made over REST has none (the REST definition does not take custom fields yet).
                if try await routes.store.draft(id: id, accountID: account.id) != nil { return REST.CustomFields(CustomFields()) }
                let aggregate = try await routes.aggregate(id, account: account.id)
                return REST.CustomFields(try CaptiveSigningService.payload(of: aggregate.envelope).customFields)
            }
        }
        accounts.get("envelopes/:envelopeId/recipients/:recipientId/tabs") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return try await routes.tabs(
                    envelopeID: context.parameters.get("envelopeId") ?? "", recipientID: context.parameters.get("recipientId") ?? "",
                    account: account.id)
            }
        }
        accounts.get("envelopes/:envelopeId/documents") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("envelopeId") ?? ""
                let documents: [(id: String, name: String, pdf: Data)]
                var sent = false
                if let draft = try await routes.store.draft(id: id, accountID: account.id) {
                    documents = Self.documents(of: try routes.decode(REST.EnvelopeDefinition.self, from: draft.definition))
                } else {
                    let aggregate = try await routes.aggregate(id, account: account.id)
                    let payload = try CaptiveSigningService.payload(of: aggregate.envelope)
                    documents = payload.documents.map { ($0.documentId, $0.name, $0.pdf) }
                    sent = true
                }
                return Self.documents(documents, envelopeID: id, withCertificate: sent)
            }
        }
        accounts.get("envelopes/:envelopeId/documents/:documentId") { request, context in
            await routes.file {
                let account = try await routes.account(request, context)
                return try await routes.document(
                    context.parameters.get("documentId") ?? "", envelopeID: context.parameters.get("envelopeId") ?? "", account: account.id,
                    withCertificate: request.uri.queryParameters.get("certificate")?.lowercased() != "false")
            }
        }
        registerTemplates(on: accounts)
        registerConnect(on: accounts)
        registerDraftEdits(on: accounts)
        accounts.post("envelopes/:envelopeId/views/recipient") { request, context in
            await routes.answer(status: .created) {
                let account = try await routes.account(request, context)
                let view = try await routes.decode(REST.RecipientViewRequest.self, from: request)
                return try await routes.recipientView(view, envelopeID: context.parameters.get("envelopeId") ?? "", account: account.id)
            }
        }
    }

    // MARK: Operations

    /// - Parameter search: `search_text`, read as a form value (`+` is a space, as the SDKs encode it).
    func list(_ query: some QueryParameterLookup, account: String, search rawSearch: String? = nil) async throws -> REST.EnvelopesInformation {
        let ids = query.value("envelope_ids").map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }
        let start = try Self.integer(query.value("start_position"), name: "start_position", default: 0, range: 0...Int(Int32.max))
        let count = try Self.integer(query.value("count"), name: "count", default: Self.maxListCount, range: 1...Self.maxListCount)
        let statuses = (query.value("status") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && $0 != "any" }
        var page: [String]
        var total: Int
        if let ids, ids != ["request_body"] {
            // By id: in the order asked, those of this account (others are not reported).
            var found: [String] = []
            for id in ids.prefix(Self.maxListCount) where try await store.envelope(id: id, accountID: account) != nil { found.append(id) }
            total = found.count
            page = Array(found.dropFirst(start).prefix(count))
        } else {
            guard let text = query.value("from_date") else {
                throw Failure.badParameter("from_date, envelope_ids or transaction_ids is required")
            }
            guard let from = REST.parseTime(text) else { throw Failure.badParameter("from_date \"\(text)\" is not a date") }
            let search = rawSearch?.trimmingCharacters(in: .whitespacesAndNewlines)
            if let search, search.count > 200 { throw Failure.badParameter("search_text is longer than 200 characters") }
            (total, page) = try await store.envelopeIDs(
                accountID: account, changedSince: from, statuses: statuses, search: search?.isEmpty == false ? search : nil, start: start, count: count)
        }
        var items: [REST.Envelope] = []
        for id in page {
            guard let aggregate = try await store.envelope(id: id, accountID: account) else { continue }
            if !statuses.isEmpty, !statuses.contains(aggregate.envelope.status) { continue }
            items.append(Self.envelope(aggregate, account: account, withRecipients: false))
        }
        return REST.EnvelopesInformation(
            envelopes: items, resultSetSize: String(items.count), totalSetSize: String(total), startPosition: String(start),
            endPosition: String(max(start, start + items.count - 1)), nextUri: "", previousUri: "")
    }

    func envelope(_ id: String, account: String, withRecipients: Bool) async throws -> REST.Envelope {
        if let draft = try await store.draft(id: id, accountID: account) { return try Self.envelope(draft: draft, withRecipients: withRecipients) }
        return Self.envelope(try await aggregate(id, account: account), account: account, withRecipients: withRecipients)
    }

    /// Sends a draft: it becomes an envelope with the same id, through the REST sender. The draft
    /// is taken first (a second send of it finds none); if sending fails it is put back.
    func sendDraft(_ id: String, token: String, account: String) async throws -> REST.EnvelopeUpdateSummary {
        guard let draft = try await store.draft(id: id, accountID: account) else {
            if try await store.envelope(id: id, accountID: account) != nil {
                throw Failure.badBody("envelope \(id) is sent already")
            }
            throw Failure.noEnvelope
        }
        guard try await store.deleteDraft(id: id, accountID: account) else { throw Failure.badBody("envelope \(id) is being sent by another request") }
        do {
            let definition = try decode(REST.EnvelopeDefinition.self, from: draft.definition)
            let now = auth.now()
            let envelope = try await envelope(from: definition, transactionID: draft.transactionID, at: now, account: account)
            _ = try await send(envelope, notification: definition.eventNotification, transactionID: draft.transactionID, token: token, account: account, at: now)
            return REST.EnvelopeUpdateSummary(envelopeId: id)
        } catch {
            try? await store.insertDraft(draft)
            throw error
        }
    }

    /// Sends `envelope` as the account's REST sender. Its `eventNotification` becomes the
    /// envelope's own Connect configuration first, so it is in place when the envelope's first
    /// events commit; it is removed again if sending fails.
    func send(
        _ envelope: Envelope, notification: REST.ConnectConfiguration?, transactionID: String, token: String, account: String, at now: Date
    ) async throws -> String {
        var own: ConnectConfigurationRecord?
        if let notification {
            let request = try notification.request()
            let id = SyncIngest.serverEnvelopeID(accountID: account, transactionID: transactionID)
            own = try await connectFleet { try await connect.create(request, accountID: account, envelopeID: id) }
        }
        do {
            return try await fleet { try await sender.send(envelope, accessToken: token, account: account, at: now) }
        } catch {
            if let own { _ = try? await store.deleteConnectConfiguration(id: own.id, accountID: account) }
            throw error
        }
    }

    /// A draft as DocuSign shows one: status `created`, its recipients `created`.
    static func envelope(draft: RESTDraftRecord, withRecipients: Bool) throws -> REST.Envelope {
        let definition = try JSONDecoder().decode(REST.EnvelopeDefinition.self, from: draft.definition)
        let uri = "/envelopes/\(draft.id)"
        var envelope = REST.Envelope(
            envelopeId: draft.id, status: "created", emailSubject: definition.emailSubject ?? "", emailBlurb: definition.emailBlurb,
            createdDateTime: REST.time(draft.createdAt), statusChangedDateTime: REST.time(draft.createdAt), envelopeUri: uri,
            recipientsUri: uri + "/recipients", documentsUri: uri + "/documents", documentsCombinedUri: uri + "/documents/combined",
            certificateUri: uri + "/documents/certificate", customFieldsUri: uri + "/custom_fields", templatesUri: uri + "/templates",
            signingLocation: "online", envelopeIdStamping: "true", is21CFRPart11: "false")
        if withRecipients { envelope.recipients = draftRecipients(definition) }
        return envelope
    }

    /// A draft's recipients, all `created`.
    static func draftRecipients(_ definition: REST.EnvelopeDefinition) -> REST.Recipients {
        var recipients = REST.Recipients(recipientCount: "0")
        let groups = definition.recipients
        for (type, list) in [
            ("signer", groups?.signers), ("inPersonSigner", groups?.inPersonSigners), ("carbonCopy", groups?.carbonCopies),
            ("certifiedDelivery", groups?.certifiedDeliveries),
        ] {
            for given in list ?? [] {
                let id = given.recipientId?.value ?? ""
                var recipient = REST.Recipient(
                    recipientId: id, recipientIdGuid: REST.Recipients.guid("draft", id), recipientType: type,
                    routingOrder: given.routingOrder?.value ?? "1", status: "created", clientUserId: given.clientUserId)
                switch type {
                case "inPersonSigner":
                    (recipient.hostName, recipient.hostEmail, recipient.signerName) = (given.hostName, given.hostEmail, given.signerName ?? given.name)
                    recipients.inPersonSigners.append(recipient)
                case "carbonCopy":
                    (recipient.name, recipient.email) = (given.name, given.email)
                    recipients.carbonCopies.append(recipient)
                case "certifiedDelivery":
                    (recipient.name, recipient.email) = (given.name, given.email)
                    recipients.certifiedDeliveries.append(recipient)
                default:
                    (recipient.name, recipient.email) = (given.name, given.email)
                    recipients.signers.append(recipient)
                }
            }
        }
        recipients.recipientCount = String(
            recipients.signers.count + recipients.inPersonSigners.count + recipients.carbonCopies.count + recipients.certifiedDeliveries.count)
        return recipients
    }

    /// One recipient's tabs (`list_tabs`): a sent envelope's from its signed payload, with the
    /// values its signers gave once the server has them; a draft's as sending it would place them
    /// (anchors resolved against its documents).
    func tabs(envelopeID: String, recipientID: String, account: String) async throws -> REST.RecipientTabs {
        let recipients: [String]
        let tabs: [Tab]
        if let draft = try await store.draft(id: envelopeID, accountID: account) {
            let definition = try decode(REST.EnvelopeDefinition.self, from: draft.definition)
            let envelope = try await envelope(from: definition, transactionID: draft.transactionID, at: auth.now(), account: account)
            (recipients, tabs) = (envelope.recipients.map(\.recipientId), envelope.tabs)
        } else {
            let aggregate = try await aggregate(envelopeID, account: account)
            let payload = try? CaptiveSigningService.payload(of: aggregate.envelope)
            (recipients, tabs) = (aggregate.recipients.map(\.recipientID), try await fill(aggregate, payload: payload)?.tabs ?? [])
        }
        guard recipients.contains(recipientID) else {
            throw Failure.unknownRecipient("No recipient \(recipientID) in envelope \(envelopeID).")
        }
        return REST.RecipientTabs(tabs.filter { $0.recipientId == recipientID })
    }

    /// The envelope a definition describes: from its documents and recipients, or composed from
    /// the account's template `templateId` with its `templateRoles`.
    func envelope(from given: REST.EnvelopeDefinition, transactionID: String, at now: Date, account: String) async throws -> Envelope {
        let composite = try given.flattenedComposite()
        let definition = composite?.definition ?? given
        guard let templateID = definition.templateId else {
            return try definition.envelope(transactionID: transactionID, at: now, anchors: try await anchorWords(definition))
        }
        return try definition.envelope(
            from: try await template(templateID, account: account), replacing: composite?.document, transactionID: transactionID, at: now)
    }

    /// One of the account's templates; another account's does not exist for the caller.
    func template(_ id: String, account: String) async throws -> EnvelopeTemplate {
        do {
            return try await templates.template(accountID: account, id: id)
        } catch let error as FleetError where error.code == .notFound {
            throw Failure.noTemplate(id)
        }
    }

    /// The envelope's tabs with what its signers gave, on devices and in captive sessions.
    func fill(_ aggregate: EnvelopeAggregate, payload: SyncPayload?) async throws -> EnvelopeFill? {
        guard let payload else { return nil }
        return EnvelopeFill(
            payload: payload, deviceID: aggregate.envelope.deviceID, captive: try await store.captiveTabs(envelopeID: aggregate.envelope.id))
    }

    /// `GET …/documents/{documentId}`: one document, `combined` or `certificate`, as a PDF with
    /// its filled tabs drawn. A draft's documents are its originals; it has no certificate yet.
    func document(_ documentID: String, envelopeID: String, account: String, withCertificate: Bool) async throws -> (name: String, pdf: Data) {
        if let draft = try await store.draft(id: envelopeID, accountID: account) {
            let definition = try decode(REST.EnvelopeDefinition.self, from: draft.definition)
            let originals = Self.documents(of: definition)
            if documentID == "certificate" {
                throw Failure(status: .badRequest, code: "ENVELOPE_HAS_NOT_BEEN_SENT", message: "envelope \(envelopeID) is a draft; it has no certificate yet")
            }
            if documentID == "combined" {
                return ("combined", try await completing { try await documents.combined(originals.map { ($0.id, $0.pdf) }, fill: EnvelopeFill(), certificate: nil, account: account) })
            }
            guard let original = originals.first(where: { $0.id == documentID }) else { throw Failure.noDocument(documentID) }
            return (original.name, original.pdf)
        }
        let aggregate = try await aggregate(envelopeID, account: account)
        let payload = try CaptiveSigningService.payload(of: aggregate.envelope)
        guard let fill = try await fill(aggregate, payload: payload) else { throw Failure.noEnvelope }
        switch documentID {
        case "certificate":
            return ("certificate", try await certificate(aggregate, payload: payload, fill: fill).pdf)
        case "combined":
            let summary = withCertificate ? try await certificate(aggregate, payload: payload, fill: fill).pdf : nil
            let all = payload.documents.map { ($0.documentId, $0.pdf) }
            return ("combined", try await completing { try await documents.combined(all, fill: fill, certificate: summary, account: account) })
        default:
            guard let document = payload.documents.first(where: { $0.documentId == documentID }) else { throw Failure.noDocument(documentID) }
            return (document.name, try await completing { try await documents.document((document.documentId, document.pdf), fill: fill, account: account) })
        }
    }

    func certificate(_ aggregate: EnvelopeAggregate, payload: SyncPayload, fill: EnvelopeFill) async throws -> CompletionCertificate {
        let device = try await store.devices(id: aggregate.envelope.deviceID, limit: 64).first { $0.accountID == aggregate.envelope.accountID }
        return CompletionCertificate(aggregate: aggregate, payload: payload, fill: fill, deviceKey: device?.publicKey)
    }

    /// Runs the document tool, its failures as DocuSign-shaped errors.
    func completing(_ body: () async throws -> Data) async throws -> Data {
        do {
            return try await body()
        } catch let failure as CompletedDocuments.Failure {
            switch failure {
            case .missing(let path):
                throw Failure(status: .serviceUnavailable, code: "SERVICE_UNAVAILABLE", message: "the PDF tool \(path) is not installed on this server")
            case .unreadable(let why):
                throw Failure(status: .badRequest, code: "FORMAT_CONVERSION_ERROR", message: "a document of the envelope cannot be read: \(why)")
            case .failed, .timedOut:
                throw Failure(status: .internalServerError, code: "UNSPECIFIED_ERROR", message: failure.description)
            }
        }
    }

    func aggregate(_ id: String, account: String) async throws -> EnvelopeAggregate {
        guard let aggregate = try await store.envelope(id: id, accountID: account) else { throw Failure.noEnvelope }
        return aggregate
    }

    func recipientView(_ view: REST.RecipientViewRequest, envelopeID: String, account: String) async throws -> REST.ViewUrl {
        if try await store.draft(id: envelopeID, accountID: account) != nil {
            throw Failure(status: .badRequest, code: "ENVELOPE_HAS_NOT_BEEN_SENT", message: "envelope \(envelopeID) is a draft; send it first")
        }
        _ = try await aggregate(envelopeID, account: account)
        let selection: CaptiveSigningService.RecipientSelection
        if let recipientID = view.recipientId, !recipientID.isEmpty {
            selection = .recipientID(recipientID)
        } else if let client = view.clientUserId, !client.isEmpty {
            if let name = view.userName, let email = view.email {
                selection = .nameAndEmail(name: name, email: email, clientUserID: client)
            } else {
                selection = .clientUserID(client)
            }
        } else {
            throw Failure.badBody("name the recipient: userName, email and clientUserId (or recipientId)")
        }
        guard let returnURL = view.returnUrl, !returnURL.isEmpty else {
            throw Failure.badBody("returnUrl is required")
        }
        let reply = try await fleet {
            try await captive.issue(
                accountID: account, envelopeID: envelopeID, selection: selection, returnURL: returnURL, locale: view.locale, issuedBy: "rest")
        }
        return REST.ViewUrl(url: reply.url)
    }

    /// The documents list: each document with its pages' shown sizes (read from the PDF).
    /// A draft's documents as its definition gives them.
    static func documents(of definition: REST.EnvelopeDefinition) -> [(id: String, name: String, pdf: Data)] {
        (definition.documents ?? []).map { document in
            (document.documentId?.value ?? "", document.name ?? "",
             document.documentBase64.flatMap { Data(base64Encoded: $0, options: .ignoreUnknownCharacters) } ?? Data())
        }
    }

    /// The documents list; a sent envelope's ends with its certificate of completion (type `summary`).
    static func documents(_ documents: [(id: String, name: String, pdf: Data)], envelopeID: String, withCertificate: Bool) -> REST.EnvelopeDocumentsResult {
        let inspector = PDFInspector()
        var result = REST.EnvelopeDocumentsResult(
            envelopeId: envelopeID,
            envelopeDocuments: documents.enumerated().map { index, document in
                let pages = ((try? inspector.pageGeometry(document.pdf)) ?? []).enumerated().map { number, page in
                    REST.EnvelopeDocumentsResult.Page(
                        pageId: "\(document.id)-\(number + 1)", sequence: String(number + 1), width: Self.points(page.width),
                        height: Self.points(page.height), dpi: "72")
                }
                return REST.EnvelopeDocumentsResult.Document(
                    documentId: document.id, documentIdGuid: REST.Recipients.guid(envelopeID, "document/\(document.id)"), name: document.name,
                    type: "content", uri: "/envelopes/\(envelopeID)/documents/\(document.id)", order: String(index + 1), pages: pages,
                    containsPdfFormFields: "false", display: "inline", includeInDownload: "true", signerMustAcknowledge: "no_interaction",
                    authoritativeCopy: "false")
            })
        if withCertificate {
            result.envelopeDocuments.append(
                REST.EnvelopeDocumentsResult.Document(
                    documentId: "certificate", documentIdGuid: REST.Recipients.guid(envelopeID, "document/certificate"), name: "Summary",
                    type: "summary", uri: "/envelopes/\(envelopeID)/documents/certificate", order: "999", pages: nil,
                    containsPdfFormFields: "false", display: "inline", includeInDownload: "true", signerMustAcknowledge: "no_interaction",
                    authoritativeCopy: "false"))
        }
        return result
    }

    /// A page size read from a client's PDF, in whole points: never a trap, whatever the file says.
    static func points(_ value: Double) -> String {
        String(Int64(clampingFinite: value.rounded()))
    }

    static func envelope(_ aggregate: EnvelopeAggregate, account: String, withRecipients: Bool) -> REST.Envelope {
        let record = aggregate.envelope
        let payload = try? CaptiveSigningService.payload(of: record)
        let uri = "/envelopes/\(record.id)"
        let changes = aggregate.recipients.compactMap(\.statusChangedAt)
        let lastChange = ([record.createdAt] + changes).max() ?? record.createdAt
        var envelope = REST.Envelope(
            envelopeId: record.id, status: record.status, emailSubject: payload?.emailSubject ?? record.name,
            emailBlurb: payload.flatMap { $0.emailMessage.isEmpty ? nil : $0.emailMessage },
            createdDateTime: REST.time(record.createdAt), sentDateTime: REST.time(record.createdAt),
            statusChangedDateTime: REST.time(lastChange), envelopeUri: uri, recipientsUri: uri + "/recipients",
            documentsUri: uri + "/documents", documentsCombinedUri: uri + "/documents/combined",
            certificateUri: uri + "/documents/certificate", customFieldsUri: uri + "/custom_fields", templatesUri: uri + "/templates",
            signingLocation: payload?.recipients.contains { $0.type == "inPersonSigner" } == true ? "inPerson" : "online", envelopeIdStamping: "true", is21CFRPart11: "false")
        switch record.status {
        case "completed": envelope.completedDateTime = REST.time(lastChange)
        case "declined": envelope.declinedDateTime = REST.time(lastChange)
        case "voided":
            envelope.voidedDateTime = REST.time(lastChange)
            envelope.voidedReason = record.voidReason
        case "delivered":
            envelope.deliveredDateTime = REST.time(lastChange)
        default: break
        }
        if withRecipients { envelope.recipients = REST.Recipients(rows: aggregate.recipients, payload: payload) }
        return envelope
    }

    // MARK: Plumbing

    /// The token's user and account.
    func authenticate(_ request: Request) async throws -> (User, Account) {
        let (_, user, account) = try await bearer(request)
        return (user, account)
    }

    /// The bearer token, its user and account.
    func bearer(_ request: Request) async throws -> (String, User, Account) {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else { throw Failure.invalidToken }
        let token = String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
        do {
            let (user, account) = try await auth.authenticate(token)
            return (token, user, account)
        } catch let error as FleetError where [.unauthenticated, .tokenExpired].contains(error.code) {
            throw Failure.invalidToken
        }
    }

    /// The token's account, which must be the one the path names.
    func account(_ request: Request, _ context: BasicRequestContext) async throws -> Account {
        try await tokenAndAccount(request, context).1
    }

    /// The bearer token and its account, which must be the one the path names; the request is
    /// counted against the account's rate limits (and refused past them).
    func tokenAndAccount(_ request: Request, _ context: BasicRequestContext) async throws -> (String, Account) {
        let (token, _, account) = try await bearer(request)
        guard context.parameters.get("accountId") == account.id else { throw Failure.notMember }
        try meter(account)
        return (token, account)
    }

    /// Counts a request of `account` (the same windows as its devices' requests) and sets the
    /// answer's `X-RateLimit-*` and `X-BurstLimit-*` headers; past a limit, DocuSign's `429`.
    func meter(_ account: Account) throws {
        let decision = rateLimiter.admit(accountID: account.id, limits: account.rateLimits)
        if let state = rateLimiter.state(accountID: account.id), let headers = Self.rateHeaders {
            let now = auth.now()
            headers.fields.withLock { $0 = [
                (HTTPField.Name("X-RateLimit-Limit")!, String(state.hourly.limit)),
                (HTTPField.Name("X-RateLimit-Remaining")!, String(state.hourly.remaining)),
                (HTTPField.Name("X-RateLimit-Reset")!, String(Int64(clampingFinite: state.hourly.resetAt(now: now).timeIntervalSince1970))),
                (HTTPField.Name("X-BurstLimit-Limit")!, String(state.burst.limit)),
                (HTTPField.Name("X-BurstLimit-Remaining")!, String(state.burst.remaining)),
            ] }
        }
        guard !decision.allowed else { return }
        if decision.exceeded.contains(.hourly) {
            throw Failure(
                status: .tooManyRequests, code: "HOURLY_APIINVOCATION_LIMIT_EXCEEDED",
                message: "The maximum number of hourly API invocations has been exceeded. Hourly Limit: \(account.rateLimits.hourly)")
        }
        throw Failure(
            status: .tooManyRequests, code: "BURST_APIINVOCATION_LIMIT_EXCEEDED",
            message: "The maximum number of burst API invocations has been exceeded. Burst Limit: \(account.rateLimits.burst)")
    }

    func decode<T: Decodable>(_ type: T.Type, from request: Request, upTo limit: Int = RESTRoutes.maxBodyBytes) async throws -> T {
        try decode(T.self, from: try await body(of: request, upTo: limit))
    }

    /// A query parameter decoded as HTML forms (and DocuSign's SDKs, through urllib's `quote_plus`)
    /// encode it: `+` is a space, then percent escapes. Nil when absent or not decodable.
    static func formValue(_ name: String, in query: String?) -> String? {
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == name else { continue }
            return String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return nil
    }

    /// An envelope or template definition: JSON, or multipart with the documents as binary parts
    /// (`RESTMultipart`), folded back into JSON.
    func definitionBody(_ request: Request) async throws -> Data {
        let body = try await body(of: request, upTo: Self.maxEnvelopeBytes)
        guard let type = request.headers[.contentType], type.lowercased().hasPrefix("multipart/") else { return body }
        return try RESTMultipart.definition(from: body, contentType: type)
    }

    /// The request's body, at most `limit` bytes.
    func body(of request: Request, upTo limit: Int) async throws -> Data {
        do {
            return Data(try await request.body.collect(upTo: limit).readableBytesView)
        } catch {
            throw Failure(status: .contentTooLarge, code: "INVALID_REQUEST_BODY", message: "The request body is larger than \(limit) bytes.")
        }
    }

    /// The words of each document of `definition`, read only when one of its tabs is placed by an
    /// anchor string (a document that is not base64 is left to the envelope's own check to name).
    func anchorWords(_ definition: REST.EnvelopeDefinition) async throws -> [(documentID: String, words: [PDFTextLocator.Word])] {
        guard definition.hasAnchorTabs else { return [] }
        var words: [(documentID: String, words: [PDFTextLocator.Word])] = []
        for document in (definition.documents ?? []).prefix(REST.EnvelopeDefinition.maxDocuments) {
            let id = document.documentId?.value ?? ""
            guard let base64 = document.documentBase64, let pdf = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else { continue }
            do {
                words.append((id, try await textLocator.words(in: pdf)))
            } catch .missing(let path) {
                throw Failure(
                    status: .serviceUnavailable, code: "SERVICE_UNAVAILABLE",
                    message: "anchor tabs need poppler's pdftotext, which is not installed at \(path) (scripts/install-deps.sh)")
            } catch {
                throw Failure(
                    status: .badRequest, code: "FORMAT_CONVERSION_ERROR", message: "document \(id): its text could not be read for anchor tabs: \(error)")
            }
        }
        return words
    }

    /// Throws ``Failure`` only, but is not declared `throws(Failure)`: with the typed throw, Swift
    /// 6.3.1 crashes in release builds (signal 11 in LLVM's CoroSplit,
    /// `emitSetAndGetSwiftErrorValueAround`) splitting the async `views/recipient` route that calls it.
    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw Failure.badBody("The request body is missing or improperly formatted. \(error)")
        }
    }

    /// Runs a service call, turning its `FleetError`s into DocuSign's.
    func fleet<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            switch error.code {
            case .notFound where error.message.contains("recipient"):
                throw Failure.unknownRecipient(error.message)
            case .notFound: throw Failure.noEnvelope
            case .invalidRequest, .invalidBody, .forbidden: throw Failure.badBody(error.message)
            case .unavailable: throw Failure(status: .serviceUnavailable, code: "SERVICE_UNAVAILABLE", message: error.message)
            case .featureDisabled: throw Failure(status: .badRequest, code: "ACCOUNT_LACKS_PERMISSIONS", message: error.message)
            case .rateLimited:
                throw Failure(
                    status: .tooManyRequests, code: "HOURLY_APIINVOCATION_LIMIT_EXCEEDED",
                    message: "The maximum number of hourly API invocations has been exceeded. \(error.message)")
            default: throw error
            }
        }
    }

    static func integer(_ text: String?, name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw Failure.badParameter("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound); got \"\(text)\"")
        }
        return number
    }

    /// `body`'s value as JSON, or DocuSign's error body; with the rate-limit headers once the
    /// request's account was counted.
    func answer(status: HTTPResponse.Status = .ok, _ body: () async throws -> some Encodable) async -> Response {
        await respond { Self.json(try await body(), status: status) }
    }

    /// A PDF answer (`application/pdf`, named by `Content-Disposition` as DocuSign names it).
    func file(_ body: () async throws -> (name: String, pdf: Data)) async -> Response {
        await respond {
            let (name, pdf) = try await body()
            // The file name is the client's text: kept to a safe set of characters, with .pdf once.
            var safe = String(name.unicodeScalars.prefix(120).map { $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || "-_. ".unicodeScalars.contains($0)) ? Character($0) : "_" })
            if safe.isEmpty { safe = "document" }
            if !safe.lowercased().hasSuffix(".pdf") { safe += ".pdf" }
            return Response(
                status: .ok, headers: [.contentType: "application/pdf", .contentDisposition: "file; filename=\"\(safe)\""],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: pdf)))
        }
    }

    /// Runs a route's work: its failures as DocuSign's error bodies, and the rate-limit headers on
    /// every answer.
    func respond(_ body: () async throws -> Response) async -> Response {
        let headers = RateHeaders()
        var response: Response = await Self.$rateHeaders.withValue(headers) {
            do {
                return try await body()
            } catch let failure as Failure {
                return Self.json(REST.ErrorDetails(errorCode: failure.code, message: failure.message), status: failure.status)
            } catch {
                return Self.json(
                    REST.ErrorDetails(errorCode: "UNSPECIFIED_ERROR", message: "The server could not answer: \(error)"), status: .internalServerError)
            }
        }
        for (name, value) in headers.fields.withLock({ $0 }) { response.headers[name] = value }
        return response
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var buffer = ByteBuffer()
        buffer.writeBytes((try? encoder.encode(value)) ?? Data(#"{"errorCode":"UNSPECIFIED_ERROR","message":"unencodable answer"}"#.utf8))
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: buffer))
    }
}

/// Query parameters by name (hummingbird's, and a dictionary in tests).
protocol QueryParameterLookup {
    func value(_ name: String) -> String?
}

extension Hummingbird.Parameters: QueryParameterLookup {
    func value(_ name: String) -> String? { get(name) }
}
