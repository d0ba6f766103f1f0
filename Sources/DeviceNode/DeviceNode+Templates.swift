import Envelopes
import Foundation

extension DeviceNode {
    /// Whether a cached template should be downloaded again: the server's `lastModified` is later
    /// than the time the copy was cached (the SDK's auto-update recipe).
    public nonisolated static func shouldRecache(cachedAt: Date, server summary: TemplateSummary) -> Bool {
        summary.isNewer(thanCachedAt: cachedAt)
    }

    /// The server's templates (the SDK's `listTemplatesWithCompletion:`).
    /// - Throws: ``DeviceNodeError/Code/accountNotLoggedIn``, ``DeviceNodeError/Code/templateServiceFailed``.
    public func listTemplates() async throws -> [TemplateSummary] {
        let account = try requireAccount()
        let service = try requireTemplateService()
        do {
            let token = account.accessToken
            return try await withAPITimeout("the template service") { try await service.listTemplates(accessToken: token) }
        } catch {
            throw DeviceNodeError(.templateServiceFailed, "listing templates failed; retry when online", underlying: error)
        }
    }

    /// Downloads a template and caches it (the SDK's `cacheTemplateWithId:`).
    /// - Returns: the cached copy with its cached time.
    @discardableResult
    public func cacheTemplate(id: String) async throws -> CachedTemplate {
        let account = try requireAccount()
        let service = try requireTemplateService()
        let template: EnvelopeTemplate
        do {
            let token = account.accessToken
            template = try await withAPITimeout("the template service") { try await service.fetchTemplate(id: id, accessToken: token) }
        } catch {
            throw DeviceNodeError(.templateServiceFailed, "downloading template '\(id)' failed; retry when online", underlying: error)
        }
        return try await cacheTemplate(template)
    }

    /// Caches a template you already have (for example, received out of band).
    @discardableResult
    public func cacheTemplate(_ template: EnvelopeTemplate) async throws -> CachedTemplate {
        try ensureOpen()
        // Rounded to what the store keeps, so the returned time equals the one listed later.
        let now = Date(timeIntervalSince1970: configuration.clock().timeIntervalSince1970)
        let isUpdate = try await storeCall { try await self.store.upsertTemplate(template, cachedAt: now) }
        publish(.templateCached(TemplateCached(templateId: template.templateId, cachedAt: now, isUpdate: isUpdate)))
        return CachedTemplate(template: template, cachedAt: now)
    }

    /// Cached templates with their cached times, by template id.
    public func cachedTemplates() async throws -> [CachedTemplate] {
        try ensureOpen()
        return try await storeCall { try await self.store.templates() }
    }

    /// Removes a cached template.
    /// - Throws: ``DeviceNodeError/Code/templateNotCached`` when it is not cached.
    public func removeCachedTemplate(id: String) async throws {
        try ensureOpen()
        guard try await storeCall({ try await self.store.deleteTemplate(id: id) }) else {
            throw DeviceNodeError(.templateNotCached, "template '\(id)' is not cached")
        }
    }

    /// Composes an envelope from a cached template with envelope defaults: recipients by role
    /// (unset fields fall back to the role's defaults), tab values by label, subject and blurb.
    ///
    /// - Parameters:
    ///   - templateId: a cached template.
    ///   - composition: roles, tab values, subject, blurb, name.
    ///   - mode: offline or online.
    ///   - transactionId: the envelope's transaction id; pass the same one to retry safely.
    /// - Returns: the local envelope id.
    /// - Throws: ``DeviceNodeError/Code/templateNotCached``, ``DeviceNodeError/Code/invalidEnvelope``,
    ///   and what ``compose(_:mode:)`` throws.
    @discardableResult
    public func compose(
        fromTemplate templateId: String, _ composition: TemplateComposition = TemplateComposition(),
        mode: SigningMode = .offline, transactionId: String = UUID().uuidString
    ) async throws -> String {
        _ = try requireAccount()
        guard let cached = try await cachedTemplates().first(where: { $0.template.templateId == templateId }) else {
            throw DeviceNodeError(.templateNotCached, "template '\(templateId)' is not cached on this device; cache it first (cacheTemplate)")
        }
        let envelope: Envelope
        do {
            envelope = try cached.template.compose(composition, createdAt: configuration.clock(), transactionId: transactionId)
        } catch {
            throw DeviceNodeError(.invalidEnvelope, "composing from template '\(templateId)' failed: \(error)", validationErrors: [error])
        }
        return try await compose(envelope, mode: mode)
    }

    /// Re-caches every cached template whose server copy is newer than the cached one.
    ///
    /// One call lists the server's templates, compares each cached template's cached time with
    /// the server's `lastModified`, and downloads only the newer ones. Failures are reported per
    /// template; the cached copy is kept.
    public func autoUpdateCachedTemplates() async throws -> [TemplateUpdateDecision] {
        let server = Dictionary(try await listTemplates().map { ($0.templateId, $0) }) { first, _ in first }
        var decisions: [TemplateUpdateDecision] = []
        for cached in try await cachedTemplates() {
            let id = cached.template.templateId
            var decision = TemplateUpdateDecision(templateId: id, action: .upToDate, previousCachedAt: cached.cachedAt,
                                                  serverLastModified: server[id]?.lastModified)
            if let summary = server[id] {
                // Also by version: the server's lastModified moved past the copy's own, which
                // catches edits that a device clock running ahead of the server's would hide.
                if Self.shouldRecache(cachedAt: cached.cachedAt, server: summary) || cached.template.lastModified < summary.lastModified {
                    do {
                        try await cacheTemplate(id: id)
                        decision.action = .recached
                    } catch {
                        decision.action = .failed
                        decision.error = String(describing: error)
                    }
                }
            } else {
                decision.action = .missingOnServer
            }
            decisions.append(decision)
        }
        return decisions
    }

    /// The service given at `open`, else the one of the connection online now.
    func requireTemplateService() throws -> any TemplateService {
        if let templateService { return templateService }
        if let online = connectionTemplates.withLock({ $0 }) { return online }
        throw DeviceNodeError(
            .templateServiceFailed,
            "no template service: this node was opened without one and no connection is online; connect(to:credentials:) lists and downloads templates over its connection while it is online")
    }
}
