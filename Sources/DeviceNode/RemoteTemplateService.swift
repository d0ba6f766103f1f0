import Envelopes
import FleetProtocol
import Foundation
import MessagePack

/// The ``TemplateService`` of a device talking to a real coordinator: `templates.list` and
/// `templates.fetch` over the wire.
///
/// Listing walks every page (100 templates each, at most ``maxPages`` pages); fetching decodes
/// the reply's definition bytes (MessagePack of `EnvelopeTemplate`) and checks that they describe
/// the template asked for.
public struct RemoteTemplateService: TemplateService {
    private let client: any ClientTransport

    /// The most pages one ``listTemplates(accessToken:)`` reads (10,000 templates).
    public static let maxPages = 100

    /// Creates the service over a connected client.
    public init(client: any ClientTransport) {
        self.client = client
    }

    /// Every template of the token's account, in the server's order (name, then id).
    /// - Throws: the server's `FleetError` (for example `unauthenticated`), or
    ///   ``DeviceNodeError/Code/templateServiceFailed`` when the server pages past ``maxPages``.
    public func listTemplates(accessToken: String) async throws -> [Envelopes.TemplateSummary] {
        var summaries: [Envelopes.TemplateSummary] = []
        var start: UInt32 = 0
        for _ in 0..<Self.maxPages {
            let reply = try await client.request(TemplateListRequest(accessToken: accessToken, start: start, count: 100))
            summaries += reply.templates.map {
                Envelopes.TemplateSummary(templateId: $0.templateID, name: $0.name, folder: $0.folder, lastModified: $0.lastModified)
            }
            guard let next = reply.nextStart else { return summaries }
            guard next > start else {
                throw DeviceNodeError(.templateServiceFailed, "the server's next page starts at \(next), not after \(start); stopping the listing")
            }
            start = next
        }
        throw DeviceNodeError(.templateServiceFailed, "the account has more than \(Self.maxPages * 100) templates; this device lists at most that many")
    }

    /// One template in full, with its documents' PDF bytes.
    /// - Throws: the server's `FleetError` (`not_found` for an unknown id), or
    ///   ``DeviceNodeError/Code/templateServiceFailed`` when the definition is unreadable or
    ///   describes another template.
    public func fetchTemplate(id: String, accessToken: String) async throws -> EnvelopeTemplate {
        let reply = try await client.request(TemplateFetchRequest(accessToken: accessToken, templateID: id))
        let template: EnvelopeTemplate
        do {
            template = try MessagePackDecoder().decode(EnvelopeTemplate.self, from: reply.definition)
        } catch {
            throw DeviceNodeError(.templateServiceFailed, "the server's definition of template '\(id)' is unreadable (\(error)); report it to the administrator", underlying: error)
        }
        guard template.templateId == id else {
            throw DeviceNodeError(.templateServiceFailed, "asked for template '\(id)' but the server sent '\(template.templateId)'")
        }
        return template
    }
}
