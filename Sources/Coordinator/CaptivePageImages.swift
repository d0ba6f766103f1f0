import Envelopes
import Foundation

/// The page images of the captive signing page (`GET /signing/{token}/documents/{id}/pages/{n}`):
/// each page drawn once by ``PDFPageRenderer`` and then served from `PageImageCache`, keyed
/// by (envelope, document, page, scale). A document of a synced envelope never changes, so an
/// image never goes stale; only the browser that holds the session may read it.
public struct CaptivePageImages: Sendable {
    /// What the route answers.
    enum Answer: Sendable {
        case image([UInt8], cached: Bool)
        case notFound
        case forbidden
        /// The renderer is missing or failed: the page shows its fallback.
        case unavailable(String)
    }

    /// The scales a page may be asked at (1 = 96 dpi; 2 for high-density screens).
    static let scales = 1...2

    let renderer: PDFPageRenderer
    let cache: PageImageCache

    public init(renderer: PDFPageRenderer = PDFPageRenderer(), cacheBytes: Int = 128 << 20) {
        self.renderer = renderer
        self.cache = PageImageCache(maxBytes: cacheBytes, clock: renderer.clock)
    }

    /// Whether pages can be drawn at all (else the signing page says so and shows its text layer).
    var isAvailable: Bool { renderer.isAvailable }

    func image(service: CaptiveSigningService, token: String, session: String?, documentID: String, page: Int, scale: Int) async throws
        -> Answer
    {
        guard Self.scales.contains(scale), (1...PDFInspector.Limits().maxPages).contains(page) else { return .notFound }
        guard let tokenHash = CaptiveSigningService.hashIfWellFormed(token) else { return .notFound }
        // The session is checked on every request, cached or not.
        let access: (envelopeID: String, accountID: String?)?
        if let unit = try await service.store.captiveSession(tokenHash: tokenHash) {
            let record = unit.session
            let open = record.outcome == nil && session.map { CaptiveSigningService.hash($0) == record.sessionHash } == true
            access = open ? (record.envelopeID, record.accountID) : ("", nil)
        } else {
            access = nil
        }
        guard let access else { return .notFound }
        guard !access.envelopeID.isEmpty else { return .forbidden }
        let key = PageImageCache.Key(envelopeID: access.envelopeID, documentID: documentID, page: page, scale: scale)
        let renderer = self.renderer
        let (image, cached) = await cache.image(key, account: access.accountID ?? "") { () async throws(PDFPageRenderer.Failure) -> [UInt8] in
            let pdf: Data?
            do {
                guard let envelope = try await service.store.envelope(id: access.envelopeID, accountID: access.accountID) else {
                    throw StoreRefusal.noEnvelope(access.envelopeID, inAccount: access.accountID)
                }
                pdf = try CaptiveSigningService.payload(of: envelope.envelope).documents.first { $0.documentId == documentID }?.pdf
            } catch {
                throw .transient("the document could not be read: \(error)")
            }
            guard let pdf else { throw .noSuchPage(page) }
            let pages = (try? PDFInspector().pageGeometry(pdf)) ?? []
            if !pages.isEmpty, page > pages.count { throw .noSuchPage(page) }
            let geometry = page <= pages.count ? pages[page - 1] : PDFPageGeometry.letter
            return try await renderer.render(pdf: pdf, page: page, geometry: geometry, scale: scale)
        }
        switch image {
        case .success(let bytes): return .image(bytes, cached: cached)
        case .failure(.noSuchPage): return .notFound
        case .failure(let failure): return .unavailable(failure.description)
        }
    }
}
