import FleetProtocol
import Foundation
import HTTPTypes
import Hummingbird

/// The OAuth routes of the REST API (docs/rest-api.md, "Authentication"): the token endpoint for
/// both grants, and the consent page of the authorization code grant.
extension RESTRoutes {
    struct TokenAnswer: Encodable {
        var access_token: String
        var token_type = "Bearer"
        var expires_in: Int
        var scope: String
    }

    struct TokenRefusal: Encodable {
        var error: String
        var error_description: String
    }

    /// `POST /oauth/token`, form-encoded: `grant_type` `urn:ietf:params:oauth:grant-type:jwt-bearer`
    /// with `assertion`, or `authorization_code` with `code` (client authentication by HTTP Basic
    /// `client_id:client_secret` or the form's `client_id`/`client_secret`, or `code_verifier`),
    /// answered as DocuSign's OAuth service answers: `{"access_token", "token_type": "Bearer",
    /// "expires_in", "scope"}`, or `{"error", "error_description"}`.
    ///
    /// A JWT's `aud` must name the listener the assertion was posted to (an assertion seen on one
    /// cannot be replayed on the other).
    func token(_ request: Request, secure: Bool) async -> Response {
        func refusal(_ error: String, _ description: String, status: HTTPResponse.Status = .badRequest) -> Response {
            Self.json(TokenRefusal(error: error, error_description: description), status: status)
        }
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            return refusal("invalid_request", "the body must be application/x-www-form-urlencoded")
        }
        let form: [String: String]
        do {
            let body = String(decoding: try await body(of: request, upTo: OAuthService.maxAssertionBytes + 1024), as: UTF8.self)
            form = try FormFields.parse(body) ?? URLEncodedFormDecoder().decode([String: String].self, from: body)
        } catch let failure as Failure {
            return refusal("invalid_request", failure.message)
        } catch {
            return refusal("invalid_request", "the body is not form-encoded fields: \(error)")
        }
        let basic = Self.basicCredentials(request.headers[.authorization])
        do throws(OAuthService.GrantError) {
            let grant: OAuthService.Grant
            if form["grant_type"] == "authorization_code" {
                grant = try await oauth.grant(
                    authorizationCode: form["code"], clientID: basic?.user ?? form["client_id"], clientSecret: basic?.password ?? form["client_secret"],
                    codeVerifier: form["code_verifier"], redirectURI: form["redirect_uri"])
            } else {
                grant = try await oauth.grant(grantType: form["grant_type"], assertion: form["assertion"], audiences: links?.authorities(secure: secure) ?? [])
            }
            var response = Self.json(TokenAnswer(access_token: grant.accessToken, expires_in: grant.expiresIn, scope: grant.scope), status: .ok)
            response.headers[HTTPField.Name.cacheControl] = "no-store"
            return response
        } catch {
            var response = refusal(error.error, error.errorDescription, status: .init(code: error.status))
            // RFC 6749 5.2: a client that failed to authenticate with HTTP Basic is told the scheme.
            if error.status == 401, basic != nil, let name = HTTPField.Name("WWW-Authenticate") { response.headers[name] = "Basic realm=\"signfleet\"" }
            return response
        }
    }

    /// `Authorization: Basic base64(user:password)`, or nil.
    static func basicCredentials(_ header: String?) -> (user: String, password: String)? {
        guard let header, header.utf8.count <= 4096, header.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// `GET /oauth/auth?response_type=code&client_id=…&redirect_uri=…&scope=…&state=…`
    /// (`code_challenge`, `code_challenge_method=S256`): the consent page, or where the client is
    /// sent back with an error.
    func consentPage(_ request: Request) async -> Response {
        let query = request.uri.query ?? ""
        guard query.utf8.count <= 16 * 1024 else { return OAuthConsentPage.refusal(.page(status: 400, message: "the link's query is longer than 16 KiB")) }
        let fields: [String: String]
        do {
            fields = try FormFields.parse(query) ?? URLEncodedFormDecoder().decode([String: String].self, from: query)
        } catch {
            return OAuthConsentPage.refusal(
                .page(status: 400, message: "the link's query cannot be read (a parameter given twice, or a % not followed by two hex digits)"))
        }
        let asked = Self.authorizationRequest(fields)
        do throws(OAuthService.AuthorizationRefusal) {
            return OAuthConsentPage.response(try await oauth.consentScreen(asked), problem: nil, status: .ok)
        } catch {
            return OAuthConsentPage.refusal(error)
        }
    }

    /// `POST /oauth/auth`: the consent page's form — the request's fields again, `email`,
    /// `password`, and `decision` `allow` or `deny`.
    func consentAnswer(_ request: Request) async -> Response {
        let fields: [String: String]
        do {
            let body = String(decoding: try await body(of: request, upTo: 64 * 1024), as: UTF8.self)
            fields = try FormFields.parse(body) ?? URLEncodedFormDecoder().decode([String: String].self, from: body)
        } catch {
            return OAuthConsentPage.refusal(.page(status: 400, message: "the form could not be read"))
        }
        let asked = Self.authorizationRequest(fields)
        do {
            if fields["decision"] == "deny" {
                return CaptiveSigningRoutes.redirect(try await oauth.deny(asked))
            }
            guard fields["decision"] == "allow" else { return OAuthConsentPage.refusal(.page(status: 400, message: "decision must be allow or deny")) }
            return CaptiveSigningRoutes.redirect(try await oauth.allow(asked, email: fields["email"] ?? "", password: fields["password"] ?? ""))
        } catch let refusal as OAuthService.AuthorizationRefusal {
            return OAuthConsentPage.refusal(refusal)
        } catch let error as FleetError where error.code == .unauthenticated || error.code == .rateLimited {
            // The page again, saying so; the same words for an unknown email and a wrong password.
            let limited = error.code == .rateLimited
            do throws(OAuthService.AuthorizationRefusal) {
                return OAuthConsentPage.response(
                    try await oauth.consentScreen(asked), problem: limited ? "Too many wrong passwords: \(error.message)." : "Wrong email or password.",
                    status: limited ? .tooManyRequests : .unauthorized)
            } catch {
                return OAuthConsentPage.refusal(error)
            }
        } catch {
            return OAuthConsentPage.refusal(.page(status: 503, message: "the server cannot answer now; try again"))
        }
    }

    static func authorizationRequest(_ fields: [String: String]) -> OAuthService.AuthorizationRequest {
        OAuthService.AuthorizationRequest(
            responseType: fields["response_type"], clientID: fields["client_id"], redirectURI: fields["redirect_uri"], scope: fields["scope"],
            state: fields["state"], codeChallenge: fields["code_challenge"], codeChallengeMethod: fields["code_challenge_method"])
    }
}
