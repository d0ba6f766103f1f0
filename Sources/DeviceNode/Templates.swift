import Envelopes
import Foundation
import Synchronization

/// The seam to the server's template API: list templates and fetch one.
///
/// The fleet's network implementation comes with the sync engine; ``InMemoryTemplateService`` is
/// for tests and simulations.
public protocol TemplateService: Sendable {
    /// Every template the account can use (the SDK's `listTemplatesWithCompletion:`).
    func listTemplates(accessToken: String) async throws -> [TemplateSummary]
    /// One template in full (downloaded for caching).
    func fetchTemplate(id: String, accessToken: String) async throws -> EnvelopeTemplate
}

/// A template cached on the device, with the time it was cached (the SDK's `cachedDateTime`).
public struct CachedTemplate: Hashable, Sendable {
    /// The template.
    public var template: EnvelopeTemplate
    /// When this copy was stored.
    public var cachedAt: Date
}

/// What one auto-update pass decided for a cached template.
public struct TemplateUpdateDecision: Hashable, Sendable {
    /// What was done: an open set of values (compare with `==`; more may be added).
    public struct Action: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable name, e.g. `"recached"`.
        public let rawValue: String
        /// An action by its stable name.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The server's copy is newer than the cached one: it was downloaded again.
        public static let recached = Action(rawValue: "recached")
        /// The cached copy is current.
        public static let upToDate = Action(rawValue: "upToDate")
        /// The server no longer lists the template; the cached copy is kept (remove it explicitly).
        public static let missingOnServer = Action(rawValue: "missingOnServer")
        /// Downloading the newer copy failed; the cached copy is kept.
        public static let failed = Action(rawValue: "failed")
    }

    /// The template.
    public var templateId: String
    /// What was done.
    public var action: Action
    /// The cached time before the pass.
    public var previousCachedAt: Date
    /// The server's last modification time, when listed.
    public var serverLastModified: Date?
    /// Why the download failed, with ``Action/failed``.
    public var error: String?
}

/// A ``TemplateService`` holding templates in memory.
public final class InMemoryTemplateService: TemplateService {
    private let templates: Mutex<[String: EnvelopeTemplate]>

    /// Creates a service with these templates.
    public init(templates: [EnvelopeTemplate] = []) {
        self.templates = Mutex(Dictionary(templates.map { ($0.templateId, $0) }) { _, last in last })
    }

    /// Adds or replaces a template (bump its `lastModified` to simulate an edit on the server).
    public func upsert(_ template: EnvelopeTemplate) {
        templates.withLock { $0[template.templateId] = template }
    }

    public func listTemplates(accessToken: String) async throws -> [TemplateSummary] {
        templates.withLock { $0.values.map(\.summary).sorted { $0.templateId < $1.templateId } }
    }

    public func fetchTemplate(id: String, accessToken: String) async throws -> EnvelopeTemplate {
        guard let template = templates.withLock({ $0[id] }) else {
            throw DeviceNodeError(.templateServiceFailed, "the server has no template '\(id)'")
        }
        return template
    }
}
