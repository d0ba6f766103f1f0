import Crypto
import SyncContract
import Envelopes
import FleetProtocol
import Foundation

/// What the HTTP routes answer for a signing URL (``CaptiveSigningRoutes`` turns it into a response).
enum CaptiveResponse: Sendable {
    /// The signing page; `session` is a new session id to set as the cookie.
    case page(SigningPageModel, session: String?, status: Int)
    /// Signing ended: go to the return URL (with `event=` added).
    case redirect(String, SigningViewEvent)
    /// Unknown (or malformed) token: nothing is said about why.
    case notFound
    /// A post without this page's session cookie or CSRF token.
    case forbidden
    /// A document's PDF bytes.
    case document(Data)
}

/// The page's tab and what it holds now.
struct PageTab: Sendable {
    var index: Int
    var tab: Tab
}

/// Everything the signing page shows (rendered by ``SigningPage``).
struct SigningPageModel: Sendable {
    struct DocumentInfo: Sendable {
        var id: String
        var name: String
        var pageCount: Int
        /// The text layer of each page (best effort; see ``PDFTextPreview``).
        var text: [[PDFTextPreview.Run]] = []
        /// Each page's shown size and boxes (US Letter for a page whose tree cannot be read).
        var pages: [PDFPageGeometry] = []
    }
    var token: String
    var csrf: String
    var locale: String?
    var envelopeID: String
    var transactionID: String
    var envelopeName: String
    var emailSubject: String
    var emailMessage: String
    var recipientID: String
    var recipientName: String
    var recipientEmail: String?
    var documents: [DocumentInfo]
    var tabs: [PageTab]
    var returnURL: String
    /// Why the last post was refused (missing tab values, empty decline reason).
    var error: String?
}

extension CaptiveSigningService {
    /// The session cookie's name.
    static let sessionCookie = "sf_session"

    /// `GET /signing/<token>`: opens the URL (once), or re-renders the page for the browser that
    /// opened it, or says how the session ended.
    func open(token: String, session presented: String?) async throws -> CaptiveResponse {
        guard let tokenHash = Self.hashIfWellFormed(token) else { return .notFound }
        let at = now()
        let inactivity = configuration.inactivityTimeout
        return try await store.updateCaptiveSession(tokenHash: tokenHash) { found in
            guard var unit = found else { return .notFound }
            defer { found = unit }
            if let outcome = unit.session.outcome {
                // Single use: a finished URL only ever says so.
                let event: SigningViewEvent = outcome == SigningViewEvent.ttlExpired.rawValue ? .ttlExpired : .viewingComplete
                return .redirect(Self.redirect(unit.session.returnURL, event), event)
            }
            if unit.session.openedAt != nil {
                guard let presented, Self.hash(presented) == unit.session.sessionHash else {
                    // Single use, as DocuSign: another browser is sent back with ttl_expired (the app
                    // learns it must ask for a new URL); the session of the browser that opened it goes on.
                    return .redirect(Self.redirect(unit.session.returnURL, .ttlExpired), .ttlExpired)
                }
                if let last = unit.session.lastActivityAt, at.timeIntervalSince(last) > inactivity {
                    return Self.finish(&unit.session, .sessionTimeout, at: at)
                }
                unit.session.lastActivityAt = at
                // The cookie slides with the session: each page it serves sets it again.
                return .page(try Self.model(unit, token: token, sessionID: presented), session: presented, status: 200)
            }
            guard at < unit.session.expiresAt else { return Self.finish(&unit.session, .ttlExpired, at: at) }
            var envelope = try unit.requireEnvelope()
            let (record, recipients) = (envelope.envelope, envelope.recipients)
            let payload = try Self.payload(of: record)
            guard let recipient = payload.recipients.first(where: { $0.recipientId == unit.session.recipientID }) else {
                return Self.finish(&unit.session, .exception, at: at)
            }
            do {
                try Self.checkSignable(record, recipients, recipient: recipient)
            } catch {
                let done = recipients.first { $0.recipientID == recipient.recipientId }.flatMap { RecipientStatus(rawValue: $0.status) }?.isDone ?? false
                return Self.finish(&unit.session, done ? .viewingComplete : .exception, at: at)
            }
            if recipients.first(where: { $0.recipientID == recipient.recipientId })?.status == RecipientStatus.sent.rawValue {
                _ = try EnvelopeService.apply(.recipientDelivered(recipient.recipientId), to: &envelope, at: at)
                unit.envelope = envelope
            }
            let sessionID = Self.randomToken()
            unit.session.openedAt = at
            unit.session.sessionHash = Self.hash(sessionID)
            unit.session.lastActivityAt = at
            return .page(try Self.model(unit, token: token, sessionID: sessionID), session: sessionID, status: 200)
        }
    }

    /// `POST /signing/<token>`: Finish, Finish Later or Decline from the page.
    func submit(token: String, session presented: String?, form: SigningForm) async throws -> CaptiveResponse {
        guard let tokenHash = Self.hashIfWellFormed(token) else { return .notFound }
        let at = now()
        let inactivity = configuration.inactivityTimeout
        return try await store.updateCaptiveSession(tokenHash: tokenHash) { found in
            guard var unit = found else { return .notFound }
            defer { found = unit }
            guard unit.session.openedAt != nil else { return .forbidden }
            guard let presented, Self.hash(presented) == unit.session.sessionHash else {
                // No session cookie (it expired with the browser's idea of the session) or another
                // browser's: the ceremony's end still reaches the app as an event. A session idle past
                // its timeout has ended by the rules anyway; otherwise nothing changes for the
                // browser that holds it, and this one is sent back as a second browser is on open.
                if unit.session.outcome != nil { return .redirect(Self.redirect(unit.session.returnURL, .viewingComplete), .viewingComplete) }
                if let last = unit.session.lastActivityAt, at.timeIntervalSince(last) > inactivity {
                    return Self.finish(&unit.session, .sessionTimeout, at: at)
                }
                return .redirect(Self.redirect(unit.session.returnURL, .ttlExpired), .ttlExpired)
            }
            guard let csrf = form.fields["csrf"], Self.constantTimeEqual(csrf, Self.csrf(sessionID: presented, tokenHash: tokenHash))
            else { return .forbidden }
            if unit.session.outcome != nil { return .redirect(Self.redirect(unit.session.returnURL, .viewingComplete), .viewingComplete) }
            if let last = unit.session.lastActivityAt, at.timeIntervalSince(last) > inactivity {
                return Self.finish(&unit.session, .sessionTimeout, at: at)
            }
            unit.session.lastActivityAt = at
            switch form.fields["action"] {
            case "later":
                return Self.finish(&unit.session, .cancel, at: at)
            case "decline":
                let reason = (form.fields["reason"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
                do {
                    try EnvelopeService.checkReason(reason)
                } catch let error as FleetError {
                    return try Self.refused(unit, token: token, sessionID: presented, error.message)
                }
                var envelope = try unit.requireEnvelope()
                do {
                    _ = try EnvelopeService.apply(.recipientDeclined(unit.session.recipientID, reason: reason), to: &envelope, at: at)
                } catch is FleetError {
                    return Self.finish(&unit.session, .exception, at: at)
                }
                unit.envelope = envelope
                return Self.finish(&unit.session, .decline, at: at)
            case "finish":
                var envelope = try unit.requireEnvelope()
                let payload = try Self.payload(of: envelope.envelope)
                guard let recipient = payload.recipients.first(where: { $0.recipientId == unit.session.recipientID }) else {
                    return Self.finish(&unit.session, .exception, at: at)
                }
                let values: [CaptiveTabRecord]
                do {
                    values = try form.tabValues(payload: payload, recipient: recipient, envelopeID: envelope.envelope.id, at: at)
                } catch let error as SigningForm.Invalid {
                    return try Self.refused(unit, token: token, sessionID: presented, error.message)
                }
                do {
                    _ = try EnvelopeService.apply(.recipientSigned(unit.session.recipientID), to: &envelope, at: at)
                } catch is FleetError {
                    return Self.finish(&unit.session, .exception, at: at)
                }
                unit.envelope = envelope
                unit.newTabs = values
                return Self.finish(&unit.session, .signingComplete, at: at)
            default:
                return try Self.refused(unit, token: token, sessionID: presented, "choose Finish, Finish Later or Decline")
            }
        }
    }

    /// `GET /signing/<token>/documents/<id>`: a document's PDF, for the browser that opened the URL.
    func document(token: String, session presented: String?, documentID: String) async throws -> CaptiveResponse {
        guard let tokenHash = Self.hashIfWellFormed(token), let unit = try await store.captiveSession(tokenHash: tokenHash) else {
            return .notFound
        }
        guard unit.session.outcome == nil, let presented, Self.hash(presented) == unit.session.sessionHash else { return .forbidden }
        guard let document = try Self.payload(of: try unit.requireEnvelope().envelope).documents.first(where: { $0.documentId == documentID }) else {
            return .notFound
        }
        return .document(document.pdf)
    }

    // MARK: Helpers

    /// Ends the session with `event` and answers with the redirect to the return URL.
    static func finish(_ session: inout CaptiveSessionRecord, _ event: SigningViewEvent, at: Date) -> CaptiveResponse {
        session.finishedAt = at
        session.outcome = event.rawValue
        return .redirect(redirect(session.returnURL, event), event)
    }

    /// The page again, with what was wrong (`422`).
    static func refused(_ unit: CaptiveUnit, token: String, sessionID: String, _ message: String) throws -> CaptiveResponse {
        var model = try model(unit, token: token, sessionID: sessionID)
        model.error = message
        return .page(model, session: sessionID, status: 422)
    }

    static func model(_ unit: CaptiveUnit, token: String, sessionID: String) throws -> SigningPageModel {
        let session = unit.session
        let record = try unit.requireEnvelope().envelope
        let payload = try payload(of: record)
        let recipient = payload.recipients.first { $0.recipientId == session.recipientID }
        return SigningPageModel(
            token: token, csrf: csrf(sessionID: sessionID, tokenHash: session.tokenHash), locale: session.locale,
            envelopeID: record.id, transactionID: record.transactionID, envelopeName: payload.name,
            emailSubject: payload.emailSubject, emailMessage: payload.emailMessage, recipientID: session.recipientID,
            recipientName: recipient?.name ?? "", recipientEmail: recipient?.email,
            documents: payload.documents.map {
                .init(
                    id: $0.documentId, name: $0.name, pageCount: $0.pageCount, text: PDFTextPreview.pages($0.pdf),
                    pages: (try? PDFInspector().pageGeometry($0.pdf)) ?? [])
            },
            tabs: payload.tabs.enumerated().filter { $0.element.recipientId == session.recipientID }.map { PageTab(index: $0.offset, tab: $0.element) },
            returnURL: session.returnURL)
    }

    /// The CSRF token of a session: an HMAC of the URL's token hash keyed by the session id, so it
    /// is bound to this browser's cookie and this URL and needs no storage.
    static func csrf(sessionID: String, tokenHash: Data) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("csrf:".utf8) + tokenHash, using: SymmetricKey(data: Data(sessionID.utf8)))
        return base64URL(Array(mac))
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// `returnURL` with `event=<value>` added to its query (before any fragment).
    static func redirect(_ returnURL: String, _ event: SigningViewEvent) -> String {
        var base = returnURL
        var fragment = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = String(base[hash...])
            base = String(base[..<hash])
        }
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return "\(base)\(separator)event=\(event.rawValue)\(fragment)"
    }
}
