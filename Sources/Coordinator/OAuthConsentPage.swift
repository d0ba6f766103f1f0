import Foundation
import HTTPTypes
import Hummingbird

/// The consent page of the authorization code grant (docs/rest-api.md, "The authorization code
/// grant"): who asks (the integration key's name), for which account and scopes; the user's
/// email and password; Allow or Deny. No script; the request's fields travel as hidden inputs and
/// are checked again when the form comes back. Not to be framed (clickjacking).
enum OAuthConsentPage {
    static let policy = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"

    static let scopeWords: [String: String] = [
        "signature": "create, send and sign envelopes in your account",
        "impersonation": "act for you without you present",
        "extended": "keep access past one session",
        "openid": "read who you are",
    ]

    static func response(_ screen: OAuthService.ConsentScreen, problem: String?, status: HTTPResponse.Status) -> Response {
        CaptiveSigningRoutes.html(render(screen, problem: problem), status: status, policy: policy)
    }

    /// A refusal: a page saying what is wrong (no client to send it to), or the client's redirect.
    static func refusal(_ refusal: OAuthService.AuthorizationRefusal) -> Response {
        switch refusal {
        case .redirect(let url):
            return CaptiveSigningRoutes.redirect(url)
        case .page(let status, let message):
            let page = """
                <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Cannot authorize</title></head>
                <body><main><h1>This authorization link cannot be used</h1><p id="problem">\(SigningPage.escape(message))</p></main></body></html>
                """
            return CaptiveSigningRoutes.html(page, status: .init(code: status), policy: policy)
        }
    }

    static func render(_ screen: OAuthService.ConsentScreen, problem: String?) -> String {
        let e = SigningPage.escape
        let request = screen.request
        let hidden: [(String, String?)] = [
            ("response_type", request.responseType), ("client_id", request.clientID), ("redirect_uri", request.redirectURI),
            ("scope", screen.scopes.joined(separator: " ")), ("state", request.state), ("code_challenge", request.codeChallenge),
            ("code_challenge_method", request.codeChallengeMethod),
        ]
        let inputs = hidden.compactMap { name, value in value.map { "<input type=\"hidden\" name=\"\(name)\" value=\"\(e($0))\">" } }
        let scopes = screen.scopes.map { "<li><code>\(e($0))</code>: \(e(scopeWords[$0] ?? $0))</li>" }
        let alert = problem.map { "<p id=\"problem\" role=\"alert\">\(e($0))</p>" } ?? ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Allow \(e(screen.keyName))?</title>
            <style>body{font-family:sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem}label{display:block;margin-top:1rem}
            input[type=email],input[type=password]{width:100%;padding:.5rem;font-size:1rem}button{margin:1.5rem .5rem 0 0;padding:.6rem 1.2rem;font-size:1rem}
            #problem{color:#a00000;font-weight:bold}</style></head>
            <body><main>
            <h1>Allow <span id="client-name">\(e(screen.keyName))</span> to use your SignFleet account?</h1>
            <p>Account <code id="account">\(e(screen.accountID))</code>. It asks to:</p>
            <ul id="scopes">\(scopes.joined())</ul>
            \(alert)
            <form method="post" action="/oauth/auth">
            \(inputs.joined(separator: "\n"))
            <label for="email">Email</label><input id="email" name="email" type="email" autocomplete="email" required>
            <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
            <button id="allow" type="submit" name="decision" value="allow">Allow</button>
            <button id="deny" type="submit" name="decision" value="deny" formnovalidate>Deny</button>
            </form>
            </main></body></html>
            """
    }
}
