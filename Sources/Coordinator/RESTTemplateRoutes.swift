import Envelopes
import FleetProtocol
import Foundation
import Hummingbird

/// The REST API's templates (docs/rest-api.md, "Templates"): the account's templates — the same
/// ones devices cache (``TemplateCatalog``) — created, listed, read and given a new document.
extension RESTRoutes {
    func registerTemplates(on accounts: RouterGroup<BasicRequestContext>) {
        let routes = self
        accounts.post("templates") { request, context in
            await routes.answer(status: .created) {
                let account = try await routes.account(request, context)
                let definition = try routes.decode(REST.EnvelopeDefinition.self, from: try await routes.definitionBody(request))
                let id = UUID().uuidString.lowercased()
                let template = try definition.template(id: id, anchors: try await routes.anchorWords(definition))
                let summary = try await routes.catalog { try await routes.templates.create(accountID: account.id, template: template) }
                return REST.TemplateSummary(templateId: summary.templateID, name: summary.name, uri: "/templates/\(summary.templateID)")
            }
        }
        accounts.get("templates") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return try await routes.listTemplates(request.uri.queryParameters, account: account.id)
            }
        }
        accounts.get("templates/:templateId") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return Self.template(try await routes.template(context.parameters.get("templateId") ?? "", account: account.id))
            }
        }
        accounts.put("templates/:templateId/documents/:documentId") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let templateID = context.parameters.get("templateId") ?? "", documentID = context.parameters.get("documentId") ?? ""
                let definition = try routes.decode(REST.EnvelopeDefinition.self, from: try await routes.body(of: request, upTo: Self.maxEnvelopeBytes))
                guard let given = definition.documents?.first, definition.documents?.count == 1 else {
                    throw Failure.badBody("give the new document as documents: [{documentBase64, name}] (exactly one)")
                }
                guard let base64 = given.documentBase64, let pdf = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
                    throw Failure.badBody("documents[0]: documentBase64 is missing or not base64")
                }
                guard try await routes.template(templateID, account: account.id).documents.contains(where: { $0.documentId == documentID }) else {
                    throw Failure.noDocument(documentID)
                }
                _ = try await routes.catalog {
                    try await routes.templates.replaceDocument(accountID: account.id, templateID: templateID, documentID: documentID, pdf: pdf, name: given.name)
                }
                // Answered as DocuSign's EnvelopeDocument: the document with its pages' sizes.
                let updated = try await routes.template(templateID, account: account.id)
                guard let index = updated.documents.firstIndex(where: { $0.documentId == documentID }) else { throw Failure.noDocument(documentID) }
                let document = updated.documents[index]
                guard var answer = Self.documents([(document.documentId, document.name, document.pdfBytes)], envelopeID: templateID, withCertificate: false)
                    .envelopeDocuments.first
                else { throw Failure.noDocument(documentID) }
                answer.uri = "/templates/\(templateID)/documents/\(documentID)"
                answer.order = String(index + 1)
                return answer
            }
        }
    }

    /// `GET …/templates`: `search_text` (in the name), `folder` (exactly), `start_position`, `count` (1 to 100, default 100).
    func listTemplates(_ query: some QueryParameterLookup, account: String) async throws -> REST.EnvelopeTemplateResults {
        let start = try Self.integer(query.value("start_position"), name: "start_position", default: 0, range: 0...Int(Int32.max))
        let count = try Self.integer(
            query.value("count"), name: "count", default: Int(TemplateCatalog.maxPageSize), range: 1...Int(TemplateCatalog.maxPageSize))
        let page = try await catalog {
            try await templates.list(
                accountID: account, searchText: query.value("search_text"), folder: query.value("folder"), start: UInt32(start), count: UInt32(count))
        }
        // From the summaries alone: a page of the list decodes no template (their documents stay in the store).
        let items = page.templates.map { summary in
            REST.EnvelopeTemplate(
                templateId: summary.templateID, name: summary.name, folderName: summary.folder, lastModified: REST.time(summary.lastModified),
                uri: "/templates/\(summary.templateID)")
        }
        return REST.EnvelopeTemplateResults(
            envelopeTemplates: items, resultSetSize: String(items.count), totalSetSize: String(page.total), startPosition: String(start),
            endPosition: String(max(start, start + items.count - 1)), nextUri: "", previousUri: "")
    }

    /// A template as DocuSign's EnvelopeTemplate shows it: its documents and, as recipients, its
    /// roles with their tabs.
    static func template(_ template: EnvelopeTemplate) -> REST.EnvelopeTemplate {
        let uri = "/templates/\(template.templateId)"
        var recipients = REST.Recipients(recipientCount: String(template.roles.count))
        for role in template.roles {
            var recipient = REST.Recipient(
                recipientId: role.recipientId, recipientIdGuid: REST.Recipients.guid(template.templateId, role.recipientId),
                recipientType: role.type.rawValue, routingOrder: String(role.routingOrder), status: "created",
                name: role.defaultName, email: role.defaultEmail)
            recipient.roleName = role.roleName
            recipient.tabs = REST.RecipientTabs(template.tabs.filter { $0.recipientId == role.recipientId })
            switch role.type {
            case .carbonCopy: recipients.carbonCopies.append(recipient)
            case .certifiedDelivery: recipients.certifiedDeliveries.append(recipient)
            case .inPersonSigner: recipients.inPersonSigners.append(recipient)
            case .agent: recipients.agents.append(recipient)
            case .editor: recipients.editors.append(recipient)
            case .intermediary: recipients.intermediaries.append(recipient)
            default: recipients.signers.append(recipient)
            }
        }
        return REST.EnvelopeTemplate(
            templateId: template.templateId, name: template.name, emailSubject: template.emailSubject, emailBlurb: template.emailMessage,
            folderName: template.folder, lastModified: REST.time(template.lastModified), uri: uri,
            pageCount: String(template.documents.reduce(0) { $0 + $1.pageCount }),
            documents: template.documents.enumerated().map { index, document in
                REST.TemplateDocument(
                    documentId: document.documentId, name: document.name, uri: "\(uri)/documents/\(document.documentId)",
                    order: String(index + 1), pages: String(document.pageCount))
            },
            recipients: recipients)
    }

    /// The catalog's refusals as DocuSign words them.
    func catalog<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            switch error.code {
            case .notFound: throw Failure(status: .badRequest, code: "TEMPLATE_ID_INVALID", message: error.message)
            case .invalidRequest: throw Failure.badBody(error.message)
            default: throw error
            }
        }
    }
}

extension REST {
    /// `POST …/templates`'s answer.
    struct TemplateSummary: Codable, Sendable, Hashable {
        var templateId: String
        var name: String
        var uri: String
    }

    /// A template's document, as DocuSign's Document model in an EnvelopeTemplate.
    struct TemplateDocument: Codable, Sendable, Hashable {
        var documentId: String
        var name: String
        var uri: String
        var order: String
        var pages: String?
    }

    /// `GET …/templates/{templateId}`; in a list, only its id, name, folder, time and uri.
    struct EnvelopeTemplate: Codable, Sendable, Hashable {
        var templateId: String
        var name: String
        var emailSubject: String?
        var emailBlurb: String?
        var folderName: String?
        var lastModified: String
        var uri: String
        var pageCount: String?
        var documents: [TemplateDocument]?
        var recipients: Recipients?
    }

    /// `GET …/templates`.
    struct EnvelopeTemplateResults: Codable, Sendable, Hashable {
        var envelopeTemplates: [EnvelopeTemplate]
        var resultSetSize: String
        var totalSetSize: String
        var startPosition: String
        var endPosition: String
        var nextUri: String
        var previousUri: String
    }
}
