import FleetProtocol
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The captive-signing HTTP routes of the coordinator's listener (docs/captive-signing.md).
///
/// | route | answer |
/// |---|---|
/// | `GET /signing/{token}` | the signing page (first open sets the session cookie); `303` to the return URL with `event=` once the session has ended, the URL expired, or the recipient cannot sign any more; `404` for an unknown token; `303` with `event=ttl_expired` when another browser opened it (single use) |
/// | `POST /signing/{token}` | the page's form (Finish, Finish Later, Decline): `303` to the return URL with `event=`, `422` with the page and what is missing, `403` with the session cookie but not its CSRF token (without the cookie: `303` with `session_timeout`, `viewing_complete` or `ttl_expired`) |
/// | `GET /signing/{token}/documents/{documentID}` | the document's PDF, for the browser holding the session |
/// | `GET /signing/{token}/documents/{documentID}/pages/{n}?scale=1\|2` | page `n` drawn as a PNG (``CaptivePageImages``), for the browser holding the session |
/// | `GET /signing-return?event=…` | a plain landing page that shows the event (a return URL for tests and demos) |
/// | `POST /admin/signing-urls` | with the admin token: an integrator's backend creates a signing URL (``AdminSigningURLRequest``) |
public struct CaptiveSigningRoutes: Sendable {
    /// The largest form post, in bytes (signatures travel as JSON point lists).
    public static let maxFormBytes = 4 * 1024 * 1024

    /// `POST /admin/signing-urls`: a recipient by id, by client user id, or by name, email and client user id.
    public struct AdminSigningURLRequest: Sendable, Hashable, Codable {
        public var envelopeID: String
        public var recipientID: String?
        public var clientUserID: String?
        public var name: String?
        public var email: String?
        /// Optional: without it, the coordinator's `/signing-return` page.
        public var returnURL: String?
        public var locale: String?

        public init(
            envelopeID: String, recipientID: String? = nil, clientUserID: String? = nil, name: String? = nil, email: String? = nil,
            returnURL: String? = nil, locale: String? = nil
        ) {
            self.envelopeID = envelopeID
            self.recipientID = recipientID
            self.clientUserID = clientUserID
            self.name = name
            self.email = email
            self.returnURL = returnURL
            self.locale = locale
        }
    }

    /// The `POST /admin/signing-urls` answer.
    public struct AdminSigningURL: Sendable, Hashable, Codable {
        public var url: String
        public var expiresAt: Date
        public var recipientID: String?
    }

    let service: CaptiveSigningService
    let logger: Logger
    let pages: CaptivePageImages

    public init(
        service: CaptiveSigningService, logger: Logger = Logger(label: "signfleet.captive"), pages: CaptivePageImages = CaptivePageImages()
    ) {
        self.service = service
        self.logger = logger
        self.pages = pages
    }

    func register(on router: Router<BasicRequestContext>, admin: CoordinatorAdminRoutes?, refusals: HTTPRefusals? = nil) {
        let service = self.service
        let logger = self.logger
        let pages = self.pages
        router.get("signing-return") { request, _ -> Response in
            let event = request.uri.queryParameters.get("event") ?? ""
            return Self.html(Self.notice(title: "Signing ended", text: "event=\(event)", id: "event"), status: .ok)
        }
        router.get("signing/:token") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            return await Self.answer(token: token, service: service, logger: logger, refusals: refusals, pages: pages) {
                try await service.open(token: token, session: Self.sessionCookie(request))
            }
        }
        router.post("signing/:token") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            let buffer = try await request.body.collect(upTo: Self.maxFormBytes)
            let form: SigningForm
            do {
                form = try SigningForm(urlEncoded: String(decoding: buffer.readableBytesView, as: UTF8.self))
            } catch {
                refusals?.note(.signingForm)
                return Self.html(Self.notice(title: "Bad request", text: "The form could not be read."), status: .badRequest)
            }
            return await Self.answer(token: token, service: service, logger: logger, refusals: refusals, pages: pages) {
                try await service.submit(token: token, session: Self.sessionCookie(request), form: form)
            }
        }
        router.get("signing/:token/documents/:document") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            let document = context.parameters.get("document") ?? ""
            return await Self.answer(token: token, service: service, logger: logger, refusals: refusals, pages: pages) {
                try await service.document(token: token, session: Self.sessionCookie(request), documentID: document)
            }
        }
        router.get("signing/:token/documents/:document/pages/:page") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            let document = context.parameters.get("document") ?? ""
            let page = context.parameters.get("page").flatMap { Int($0) } ?? 0
            let scale = request.uri.queryParameters.get("scale").map { Int($0) ?? 0 } ?? 1
            do {
                let answer = try await pages.image(
                    service: service, token: token, session: Self.sessionCookie(request), documentID: document, page: page, scale: scale)
                return Self.pageImageResponse(answer, refusals: refusals)
            } catch {
                logger.error("captive page image failed", metadata: ["error": "\(error)"])
                return Self.html(Self.notice(title: "Something went wrong", text: "The page could not be read."), status: .internalServerError)
            }
        }
        if let admin {
            router.group("admin").post("signing-urls") { request, _ -> Response in
                try await admin.handle(request, refusals: refusals) {
                    let body = try await CoordinatorAdminRoutes.decode(AdminSigningURLRequest.self, from: request)
                    let selection: CaptiveSigningService.RecipientSelection
                    if let recipientID = body.recipientID {
                        selection = .recipientID(recipientID)
                    } else if let clientUserID = body.clientUserID {
                        if let name = body.name, let email = body.email {
                            selection = .nameAndEmail(name: name, email: email, clientUserID: clientUserID)
                        } else {
                            selection = .clientUserID(clientUserID)
                        }
                    } else {
                        throw FleetError(.invalidRequest, "name the recipient: recipientID, or clientUserID (with name and email, optionally)")
                    }
                    let reply = try await service.issue(
                        accountID: nil, envelopeID: body.envelopeID, selection: selection, returnURL: body.returnURL ?? "",
                        locale: body.locale, issuedBy: "admin")
                    return try CoordinatorAdminRoutes.json(
                        AdminSigningURL(url: reply.url, expiresAt: reply.expiresAt, recipientID: reply.recipientID), status: .created)
                }
            }
        }
    }

    /// Runs `body` and turns its ``CaptiveResponse`` into HTTP; a failure inside the server
    /// sends the browser to the return URL with `event=exception` when the URL is known.
    static func answer(
        token: String, service: CaptiveSigningService, logger: Logger, refusals: HTTPRefusals? = nil, pages: CaptivePageImages? = nil,
        _ body: () async throws -> CaptiveResponse
    ) async -> Response {
        let result: CaptiveResponse
        do {
            result = try await body()
        } catch {
            // A full or failing disk is logged once per episode by the store's monitor, not per page.
            if StoreFaultKind.of(error) == nil {
                logger.error("captive signing failed", metadata: ["error": "\(error)"])
            }
            if let returnURL = try? await service.returnURL(token: token) {
                service.metrics.redirected(.exception)
                return redirect(CaptiveSigningService.redirect(returnURL, .exception))
            }
            return html(notice(title: "Something went wrong", text: "The signing service failed. Ask for a new signing link."),
                        status: .internalServerError)
        }
        switch result {
        case .page(let model, let session, let status):
            let nonce = CaptiveSigningService.randomToken()
            var response = html(
                SigningPage.render(model, nonce: nonce, pageImages: pages?.isAvailable ?? false), status: HTTPResponse.Status(code: status),
                policy: SigningPage.contentSecurityPolicy(nonce: nonce, returnURL: model.returnURL))
            if let session {
                // Sliding: set again on every page of the session, so it lives as long as the
                // server's inactivity rule lets the session live (an active signer keeps it).
                let maxAge = Int64(clampingFinite: service.configuration.inactivityTimeout)
                response.headers[.setCookie] =
                    "\(CaptiveSigningService.sessionCookie)=\(session); Path=/signing/\(model.token); Max-Age=\(maxAge); HttpOnly; SameSite=Strict"
            }
            return response
        case .redirect(let url, let event):
            service.metrics.redirected(event)
            return redirect(url)
        case .notFound:
            refusals?.note(.signingLink)
            return html(notice(title: "Not found", text: "This signing link is not valid."), status: .notFound)
        case .forbidden:
            refusals?.note(.signingSession)
            return html(notice(title: "Not allowed", text: "This request does not belong to an open signing session."), status: .forbidden)
        case .document(let bytes):
            var buffer = ByteBuffer()
            buffer.writeBytes(bytes)
            var response = Response(status: .ok, headers: securityHeaders(policy: "default-src 'none'"), body: ResponseBody(byteBuffer: buffer))
            response.headers[.contentType] = "application/pdf"
            return response
        }
    }

    /// A page image (cacheable by this browser only: the URL holds the signing token), or why not.
    static func pageImageResponse(_ answer: CaptivePageImages.Answer, refusals: HTTPRefusals?) -> Response {
        switch answer {
        case .image(let bytes, let cached):
            var buffer = ByteBuffer()
            buffer.writeBytes(bytes)
            var headers = securityHeaders(policy: "default-src 'none'")
            headers[.contentType] = "image/png"
            headers[.cacheControl] = "private, max-age=3600, immutable"
            if let name = HTTPField.Name("X-Page-Cache") { headers[name] = cached ? "hit" : "miss" }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: buffer))
        case .notFound:
            refusals?.note(.signingLink)
            return html(notice(title: "Not found", text: "There is no such page."), status: .notFound)
        case .forbidden:
            refusals?.note(.signingSession)
            return html(notice(title: "Not allowed", text: "This request does not belong to an open signing session."), status: .forbidden)
        case .unavailable(let why):
            return html(notice(title: "Page not drawn", text: why), status: .serviceUnavailable)
        }
    }

    /// The value of the session cookie in the request, if any.
    static func sessionCookie(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == CaptiveSigningService.sessionCookie { return String(parts[1]) }
            }
        }
        return nil
    }

    static func securityHeaders(policy: String) -> HTTPFields {
        var headers: HTTPFields = [
            .contentSecurityPolicy: policy, .xContentTypeOptions: "nosniff", .cacheControl: "no-store",
        ]
        if let referrer = HTTPField.Name("Referrer-Policy") { headers[referrer] = "no-referrer" }
        if let frames = HTTPField.Name("X-Frame-Options") { headers[frames] = "DENY" }
        return headers
    }

    static func html(_ text: String, status: HTTPResponse.Status, policy: String = "default-src 'none'; style-src 'unsafe-inline'") -> Response {
        var headers = securityHeaders(policy: policy)
        headers[.contentType] = "text/html; charset=utf-8"
        var buffer = ByteBuffer()
        buffer.writeString(text)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    static func redirect(_ url: String) -> Response {
        var headers = securityHeaders(policy: "default-src 'none'")
        headers[.location] = url
        return Response(status: .seeOther, headers: headers)
    }

    /// A small page with a title and one line of text (escaped).
    static func notice(title: String, text: String, id: String = "notice") -> String {
        """
        <!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>\(SigningPage.escape(title))</title></head>
        <body style="font-family:system-ui,sans-serif;margin:40px"><h1>\(SigningPage.escape(title))</h1>
        <p id="\(id)">\(SigningPage.escape(text))</p></body></html>
        """
    }
}

extension CaptiveSigningService {
    /// The return URL of a signing URL, for reporting a failure to the browser.
    func returnURL(token: String) async throws -> String? {
        guard let hash = Self.hashIfWellFormed(token) else { return nil }
        return try await store.captiveSession(tokenHash: hash)?.session.returnURL
    }
}
