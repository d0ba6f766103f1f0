import Crypto
import FleetProtocol
import FleetTesting
import Foundation
import Testing
import X509
import _CryptoExtras

@testable import Coordinator

/// The REST API's OAuth (docs/rest-api.md, "Authentication", "TLS"): integration keys, consent,
/// the JWT bearer grant over the coordinator's HTTPS listener, through DocuSign's official Python
/// SDK with nothing patched but its OAuth host and the CA it trusts; and hostile assertions.
@Suite struct RESTOAuthTests {
    static let script = SyncPayloadInteropTests.repository.appendingPathComponent("Tests/interop/rest_oauth.py")

    @Test(.timeLimit(.minutes(3))) func theOfficialSDKsJWTGrantOverHTTPSThenItsUserInfoAndAnEnvelopeList() async throws {
        let rig = try await CaptiveRig(https: true)
        let secure = try #require(rig.https), ca = try #require(rig.caCertificate)
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let oauth = rig.services.oauth
        let registered = try await oauth.register(accountID: "acme", name: "backend", publicKeyPEM: key.publicKey.pemRepresentation)
        try await oauth.consent(keyID: registered.id, email: "ann@acme.example", scopes: ["signature", "impersonation"])
        let ann = try #require(try await rig.services.accounts.users(accountID: "acme").first { $0.email == "ann@acme.example" })
        let bob = try await rig.services.accounts.createUser(accountID: "acme", name: "Bob Unconsented", email: "bob@acme.example", secret: "secret-456")
        let keyFile = rig.temporary.directory.appendingPathComponent("key.pem")
        let otherFile = rig.temporary.directory.appendingPathComponent("other.pem")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        try Data(other.pemRepresentation.utf8).write(to: otherFile)
        // The SDK signs its assertion with the wall clock's time; the coordinator's clock follows it.
        rig.clock.followWallClock()
        _ = try await rig.services.accounts.createAccount(id: "rival", name: "Rival")
        let rita = try await rig.services.accounts.createUser(accountID: "rival", name: "Rita", email: "rita@rival.example", secret: "secret-789")

        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let (status, output, errors) = try await ChildProcess.run(
            "/usr/bin/env",
            [
                python, Self.script.path, "--oauth-host", secure, "--ca", ca, "--integration-key", registered.id, "--user-id", ann.id,
                "--private-key", keyFile.path, "--other-private-key", otherFile.path, "--unconsented-user-id", bob.id, "--account", "acme",
                "--other-account-user-id", rita.id, "--plain-host", rig.http,
            ])
        try #require(status == 0, "the SDK run failed (it needs `\(python) -m pip install docusign-esign`): \(errors)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")

        let token = try #require(out["token"] as? [String: Any])
        #expect(token["tokenType"] as? String == "Bearer" && token["hasAccessToken"] as? Bool == true, "\(token)")
        #expect(token["expiresIn"] as? String == "3600" || token["expiresIn"] as? Int == 3600, "an hour, as DocuSign's: \(token)")
        let info = try #require(out["userInfo"] as? [String: Any])
        #expect(info["sub"] as? String == ann.id && info["accountId"] as? String == "acme", "\(info)")
        #expect(info["baseUri"] as? String == "https://\(secure)", "user info over HTTPS names the HTTPS base: \(info)")
        #expect((out["list"] as? [String: Any])?["totalSetSize"] as? String == "0", "the token works on the REST API: \(out)")

        let failures = try #require(out["failures"] as? [String: [String: Any]])
        func refusal(_ name: String) -> (Int?, String?, String?) {
            let body = failures[name]?["body"] as? [String: Any]
            return (failures[name]?["status"] as? Int, body?["error"] as? String, body?["error_description"] as? String)
        }
        #expect(refusal("consent").0 == 400 && refusal("consent").1 == "consent_required", "\(failures["consent"] ?? [:])")
        for name in ["wrongKey", "algNone", "hs256", "hs256WithThePublicKey", "lyingHeader"] {
            #expect(refusal(name).0 == 400 && refusal(name).1 == "invalid_grant" && refusal(name).2 == "no_valid_keys_or_signatures", "\(name): \(failures[name] ?? [:])")
        }
        #expect(refusal("wrongAudience").1 == "invalid_grant" && refusal("wrongAudience").2?.hasPrefix("invalid audience") == true)
        #expect(refusal("expired").1 == "invalid_grant" && refusal("expired").2?.hasPrefix("expired") == true)
        #expect(refusal("tooLong").1 == "invalid_grant")
        #expect(refusal("unknownIssuer").2 == "issuer_not_found" && refusal("otherUser").2 == "user_not_found")
        #expect(refusal("otherAccountUser").2 == "user_not_found", "a real user, of another account")
        #expect(refusal("plainAudience").2?.hasPrefix("invalid audience") == true, "an assertion for the plain listener is refused on TLS")
        #expect(refusal("json").1 == "invalid_request")
        #expect(refusal("tooLong").2 == "the assertion's exp is more than an hour after its iat")
        #expect(refusal("garbage").2?.hasPrefix("the assertion is not a JWT") == true)
        #expect(refusal("noSignatureScope").1 == "invalid_scope")
        #expect(refusal("garbage").0 == 400 && refusal("garbage").1 == "invalid_grant")
        #expect(refusal("grantType").1 == "unsupported_grant_type")

        // Revoked, the key's next assertion is refused.
        try await oauth.revoke(id: registered.id, accountID: "acme")
        let revoked = try await RESTOAuthTests.grant(oauth, key: key, issuer: registered.id, subject: ann.id, audience: secure, now: rig.clock.now())
        #expect(revoked == .invalidGrant("issuer_not_found"))
        await rig.tearDown()
    }

    static let codeScript = SyncPayloadInteropTests.repository.appendingPathComponent("Tests/interop/rest_oauth_code.py")

    /// The authorization code grant through the official SDK over HTTPS: its authorization URI,
    /// the consent page answered as a browser without script would, `generate_access_token`.
    @Test(.timeLimit(.minutes(3))) func theOfficialSDKsAuthorizationCodeGrantThroughTheConsentPage() async throws {
        let rig = try await CaptiveRig(https: true)
        let secure = try #require(rig.https), ca = try #require(rig.caCertificate)
        let redirect = "https://app.example/ds/callback"
        let registered = try await rig.services.oauth.register(
            accountID: "acme", name: "Acme <Backend>", publicKeyPEM: nil, redirectURIs: [redirect], secret: true)
        let secret = try #require(registered.secret)
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let (status, output, errors) = try await ChildProcess.run(
            "/usr/bin/env",
            [
                python, Self.codeScript.path, "--oauth-host", secure, "--ca", ca, "--integration-key", registered.key.id, "--secret", secret,
                "--redirect-uri", redirect, "--email", "ann@acme.example", "--password", "secret-123", "--account", "acme",
            ])
        try #require(status == 0, "the SDK run failed: \(errors)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        let allow = try #require(out["allow"] as? [String: Any])
        let page = try #require(allow["page"] as? [String: Any])
        #expect(page["clientName"] as? String == "Acme <Backend>" && page["frameOptions"] as? String == "DENY", "\(page)")
        #expect(allow["status"] as? Int == 303 && allow["toRedirectURI"] as? Bool == true && allow["hasCode"] as? Bool == true, "\(allow)")
        #expect(allow["state"] as? String == "state-42", "the state comes back: \(allow)")
        let token = try #require(out["token"] as? [String: Any])
        #expect(token["tokenType"] as? String == "Bearer" && token["hasAccessToken"] as? Bool == true, "\(token)")
        #expect((out["userInfo"] as? [String: Any])?["email"] as? String == "ann@acme.example", "\(out)")
        #expect((out["list"] as? [String: Any])?["totalSetSize"] as? String == "0", "the token works on the REST API: \(out)")
        let reused = try #require(out["reused"] as? [String: Any])
        #expect(reused["status"] as? Int == 400 && (reused["body"] as? [String: Any])?["error"] as? String == "invalid_grant", "\(reused)")
        let wrongSecret = try #require(out["wrongSecret"] as? [String: Any])
        #expect(wrongSecret["status"] as? Int == 401 && (wrongSecret["wwwAuthenticate"] as? String)?.hasPrefix("Basic") == true, "\(wrongSecret)")
        let wrong = try #require(out["wrongPassword"] as? [String: Any])
        #expect(wrong["status"] as? Int == 401 && wrong["location"] is NSNull && wrong["says"] as? Bool == true, "\(wrong)")
        let deny = try #require(out["deny"] as? [String: Any])
        #expect((deny["location"] as? String)?.hasPrefix(redirect + "?error=access_denied") == true, "\(deny)")
        let ann = try #require(try await rig.services.accounts.users(accountID: "acme").first { $0.email == "ann@acme.example" })
        #expect(try await rig.temporary.store.consent(integrationKeyID: registered.key.id, userID: ann.id)?.scopes == "signature", "consent recorded")
        await rig.tearDown()
    }

    /// The consent page's refusals over HTTP, and the code exchange's checks on the injected clock:
    /// single use, expiry, the client's secret, PKCE, the redirect URI.
    @Test(.timeLimit(.minutes(2))) func theConsentPageAndTheCodeExchangeRefuseWhatTheyShould() async throws {
        let rig = try await CaptiveRig()
        let oauth = rig.services.oauth
        let redirect = "http://127.0.0.1:9/callback"
        let registered = try await oauth.register(accountID: "acme", name: "app", publicKeyPEM: nil, redirectURIs: [redirect], secret: true)
        let id = registered.key.id, secret = try #require(registered.secret)
        func link(_ extra: String = "", redirectURI: String = redirect, responseType: String = "code") -> String {
            let encoded = redirectURI.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            return "/oauth/auth?response_type=\(responseType)&client_id=\(id)&redirect_uri=\(encoded)&scope=signature&state=s1\(extra)"
        }
        func form(_ fields: [String: String]) -> String {
            fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
        }
        let base = ["response_type": "code", "client_id": id, "redirect_uri": redirect, "scope": "signature", "state": "s1"]
        func allow(_ extra: [String: String] = [:]) async throws -> String {
            let answer = try await rig.request(
                "POST", "/oauth/auth", body: form(base.merging(extra) { $1 }.merging(["email": "ann@acme.example", "password": "secret-123", "decision": "allow"]) { $1 }))
            let location = try #require(answer.headers["location"], "\(answer.status) \(answer.body.prefix(300))")
            return try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value, "\(location)")
        }
        func exchange(_ code: String, secret: String? = nil, verifier: String? = nil, client: String? = nil, redirectURI: String? = nil) async -> OAuthService.GrantError? {
            do {
                _ = try await oauth.grant(authorizationCode: code, clientID: client ?? id, clientSecret: secret, codeVerifier: verifier, redirectURI: redirectURI)
                return nil
            } catch {
                return error
            }
        }

        // Nothing is sent to a redirect URI the key did not register, nor for an unknown key.
        let unregistered = try await rig.request("GET", link(redirectURI: "https://evil.example/steal"))
        #expect(unregistered.status == 400 && unregistered.headers["location"] == nil && unregistered.body.contains("redirect_uri"), "\(unregistered.body)")
        let unknown = try await rig.request("GET", "/oauth/auth?response_type=code&client_id=nobody&redirect_uri=\(redirect)")
        #expect(unknown.status == 400 && unknown.headers["location"] == nil)
        // Errors about the request itself go back to the client, with its state.
        let implicit = try await rig.request("GET", link(responseType: "token"))
        #expect(implicit.status == 303 && implicit.headers["location"]?.contains("error=unsupported_response_type") == true && implicit.headers["location"]?.contains("state=s1") == true)
        let scope = try await rig.request("GET", link().replacingOccurrences(of: "scope=signature", with: "scope=signature%20admin"))
        #expect(scope.headers["location"]?.contains("error=invalid_scope") == true, "\(scope.headers)")
        let plain = try await rig.request("GET", link("&code_challenge=abc&code_challenge_method=plain"))
        #expect(plain.headers["location"]?.contains("error=invalid_request") == true, "only S256: \(plain.headers)")
        let shown = try await rig.request("GET", link())
        #expect(shown.status == 200 && shown.headers["x-frame-options"] == "DENY" && shown.headers["content-security-policy"]?.contains("frame-ancestors 'none'") == true)

        // Single use: a second exchange of a code fails, even with the right secret.
        let first = try await allow()
        #expect(await exchange(first, secret: secret) == nil)
        #expect(await exchange(first, secret: secret) == .invalidGrant("the authorization code is unknown or was already used"))
        // A wrong secret fails and spends the code.
        let second = try await allow()
        #expect(await exchange(second, secret: "wrong")?.error == "invalid_client")
        #expect(await exchange(second, secret: secret)?.error == "invalid_grant")
        // Another client's id, another redirect URI.
        #expect(await exchange(try await allow(), secret: secret, client: "other-key")?.error == "invalid_client")
        #expect(await exchange(try await allow(), secret: secret, redirectURI: "http://127.0.0.1:9/other")?.error == "invalid_grant")
        // Two minutes on the injected clock.
        let late = try await allow()
        rig.clock.advance(121)
        #expect(await exchange(late, secret: secret) == .invalidGrant("the authorization code expired"))
        // PKCE: the verifier is required when the code was asked for with a challenge (and, the key
        // having a secret, the secret too); a verifier for a code asked without one is refused.
        let verifier = String(repeating: "v", count: 43) + "-._~0123456789"
        let challenge = OAuthService.s256(verifier)
        let pkce = try await allow(["code_challenge": challenge, "code_challenge_method": "S256"])
        #expect(await exchange(pkce, secret: secret, verifier: String(repeating: "w", count: 43))?.error == "invalid_grant")
        #expect(await exchange(try await allow(["code_challenge": challenge, "code_challenge_method": "S256"]), secret: secret)?.error == "invalid_grant",
            "no verifier for a code with a challenge")
        #expect(await exchange(try await allow(["code_challenge": challenge, "code_challenge_method": "S256"]), verifier: verifier)?.error == "invalid_client",
            "the key has a secret: it is required")
        #expect(await exchange(try await allow(), secret: secret, verifier: verifier)?.error == "invalid_grant", "a verifier for a code without a challenge")
        #expect(await exchange(try await allow(["code_challenge": challenge, "code_challenge_method": "S256"]), secret: secret, verifier: verifier) == nil)
        #expect(await exchange("", secret: secret)?.error == "invalid_request")
        let anonymous = try await allow()
        do {
            _ = try await oauth.grant(authorizationCode: anonymous, clientID: nil, clientSecret: secret, codeVerifier: nil, redirectURI: nil)
            Issue.record("a code exchanged without client_id")
        } catch {
            #expect(error.error == "invalid_request")
        }

        // Over HTTP: the form's client_id and client_secret (a failed HTTP Basic attempt, the SDK's, is in rest_oauth_code.py).
        let viaForm = try await rig.request("POST", "/oauth/token", body: form(["grant_type": "authorization_code", "code": try await allow(), "client_id": id, "client_secret": secret]))
        #expect(viaForm.status == 200 && viaForm.body.contains("\"access_token\""), "\(viaForm.body)")
        let badSecret = try await rig.request("POST", "/oauth/token", body: form(["grant_type": "authorization_code", "code": try await allow(), "client_id": id, "client_secret": "x"]))
        #expect(badSecret.status == 401 && badSecret.body.contains("invalid_client"), "\(badSecret)")

        // The state comes back exactly; an over-long one is not carried; a query read two ways is refused.
        let odd = "a b&c+d%e/é"
        let stated = try await rig.request("POST", "/oauth/auth", body: form(base.merging(["state": odd, "email": "ann@acme.example", "password": "secret-123", "decision": "allow"]) { $1 }))
        #expect(URLComponents(string: stated.headers["location"] ?? "")?.queryItems?.first { $0.name == "state" }?.value == odd, "\(stated.headers)")
        let long = try await rig.request("GET", link().replacingOccurrences(of: "state=s1", with: "state=" + String(repeating: "x", count: 2049)))
        #expect(long.status == 400 && long.headers["location"] == nil && long.body.contains("state"))
        let twice = try await rig.request("GET", link() + "&client_id=other")
        #expect(twice.status == 400 && twice.headers["location"] == nil && twice.body.contains("query"), "\(twice.body)")
        // The form's hidden redirect_uri is checked again: changed to another, nothing is sent.
        let tampered = try await rig.request("POST", "/oauth/auth", body: form(base.merging(["redirect_uri": "https://evil.example/", "email": "ann@acme.example", "password": "secret-123", "decision": "allow"]) { $1 }))
        #expect(tampered.status == 400 && tampered.headers["location"] == nil)

        // A public client (no secret): PKCE is required at the consent page, and is enough.
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let publicClient = try await oauth.register(accountID: "acme", name: "spa", publicKeyPEM: rsa.publicKey.pemRepresentation, redirectURIs: [redirect], secret: false)
        let noChallenge = try await rig.request("GET", link().replacingOccurrences(of: id, with: publicClient.key.id))
        #expect(noChallenge.headers["location"]?.contains("error=invalid_request") == true, "\(noChallenge.headers)")
        let publicCode = try await allow(["client_id": publicClient.key.id, "code_challenge": challenge, "code_challenge_method": "S256"])
        #expect(await exchange(publicCode, verifier: verifier, client: publicClient.key.id) == nil)

        // Guessing: five wrong passwords, then even the right one waits out the window (injected clock).
        for _ in 0..<5 {
            let wrong = try await rig.request("POST", "/oauth/auth", body: form(base.merging(["email": "ann@acme.example", "password": "guess", "decision": "allow"]) { $1 }))
            #expect(wrong.status == 401 && wrong.headers["location"] == nil)
        }
        let blocked = try await rig.request("POST", "/oauth/auth", body: form(base.merging(["email": "Ann@acme.example", "password": "secret-123", "decision": "allow"]) { $1 }))
        #expect(blocked.status == 429 && blocked.headers["location"] == nil && blocked.body.contains("Too many"), "\(blocked.status)")
        rig.clock.advance(15 * 60 + 1)
        _ = try await allow()
        // A revoked key's link is a page.
        try await oauth.revoke(id: id, accountID: "acme")
        let revoked = try await rig.request("GET", link())
        #expect(revoked.status == 400 && revoked.headers["location"] == nil)

        // Registration: a key needs a public key or a secret; redirect URIs are absolute http(s).
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "x", publicKeyPEM: nil, redirectURIs: [], secret: false) }
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "x", publicKeyPEM: nil, redirectURIs: ["javascript:alert(1)"], secret: true) }
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "x", publicKeyPEM: nil, redirectURIs: ["/relative"], secret: true) }
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "x", publicKeyPEM: nil, redirectURIs: ["http://app.example/cb"], secret: true) }
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "x", publicKeyPEM: nil, redirectURIs: [], secret: true) }
        await rig.tearDown()
    }

    /// An RS256 assertion made here (the grant's checks on the injected clock, without the SDK).
    static func assertion(key: _RSA.Signing.PrivateKey, claims: [String: Any]) throws -> String {
        func b64(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = b64(try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT"]))
        let payload = b64(try JSONSerialization.data(withJSONObject: claims))
        let signature = try key.signature(for: Data("\(header).\(payload)".utf8), padding: .insecurePKCS1v1_5)
        return "\(header).\(payload).\(b64(signature.rawRepresentation))"
    }

    static func grant(
        _ oauth: OAuthService, key: _RSA.Signing.PrivateKey, issuer: String, subject: String, audience: String, now: Date,
        iat: TimeInterval = 0, exp: TimeInterval = 3600
    ) async throws -> OAuthService.GrantError? {
        let claims: [String: Any] = [
            "iss": issuer, "sub": subject, "aud": audience, "iat": Int(now.timeIntervalSince1970 + iat),
            "exp": Int(now.timeIntervalSince1970 + exp), "scope": "signature impersonation",
        ]
        let token = try assertion(key: key, claims: claims)
        do {
            _ = try await oauth.grant(grantType: OAuthService.jwtGrantType, assertion: token, audiences: [audience])
            return nil
        } catch {
            return error
        }
    }

    /// The grant's clock checks on the injected clock: an assertion from the future, one past its
    /// `exp`, and the same one a second before.
    @Test func assertionsAreJudgedOnTheInjectedClock() async throws {
        let rig = try await CaptiveRig()
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let oauth = rig.services.oauth
        let registered = try await oauth.register(accountID: "acme", name: "clock", publicKeyPEM: key.publicKey.pemRepresentation)
        try await oauth.consent(keyID: registered.id, email: "ann@acme.example", scopes: ["signature"])
        let ann = try #require(try await rig.services.accounts.users(accountID: "acme").first)
        let now = rig.clock.now()
        #expect(try await Self.grant(oauth, key: key, issuer: registered.id, subject: ann.id, audience: "a:1", now: now) == nil)
        #expect(try await Self.grant(oauth, key: key, issuer: registered.id, subject: ann.id, audience: "a:1", now: now, iat: 120, exp: 600)
            == .invalidGrant("the assertion's iat is in the future"))
        let issued = now
        rig.clock.advance(3599)
        #expect(try await Self.grant(oauth, key: key, issuer: registered.id, subject: ann.id, audience: "a:1", now: issued) == nil, "a second before exp")
        rig.clock.advance(1)
        #expect(try await Self.grant(oauth, key: key, issuer: registered.id, subject: ann.id, audience: "a:1", now: issued)
            == .invalidGrant("expired: the assertion's exp has passed"))
        // Keys that are not RSA public keys of 2048 bits or more are refused at registration.
        let small = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024))
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "small", publicKeyPEM: small.publicKey.pemRepresentation) }
        await expectFleetError(.invalidRequest) { _ = try await oauth.register(accountID: "acme", name: "junk", publicKeyPEM: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----") }
        await expectFleetError(.notFound) { _ = try await oauth.register(accountID: "nobody", name: "x", publicKeyPEM: key.publicKey.pemRepresentation) }
        await expectFleetError(.notFound) { try await oauth.consent(keyID: registered.id, email: "stranger@else.example", scopes: ["signature"]) }
        await expectFleetError(.invalidRequest) { try await oauth.consent(keyID: registered.id, email: "ann@acme.example", scopes: ["admin"]) }
        await rig.tearDown()
    }
}

/// The HTTPS listener's local CA and certificate (docs/rest-api.md, "TLS").
@Suite struct LocalTLSIdentityTests {
    @Test func madeOnceKeptAndRemadeWhenItNoLongerFits() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["127.0.0.1"], now: now)
        let ca = try String(contentsOfFile: first.caCertificatePath, encoding: .utf8)
        let again = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["127.0.0.1", "localhost"], now: now.addingTimeInterval(60))
        #expect(again.certificateChainPEM == first.certificateChainPEM && again.privateKeyPEM == first.privateKeyPEM, "kept")
        let named = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["signfleet.test"], now: now)
        #expect(named.certificateChainPEM != first.certificateChainPEM && named.certificateChainPEM.hasSuffix(ca + "\n"), "a new name: a new certificate, the same CA")
        // Two coordinators on two hosts sharing the directory: the names gather, so neither's start
        // makes the certificate again for the other.
        let other = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["b.signfleet.test"], now: now)
        let names = try Certificate(pemEncoded: other.certificateChainPEM.components(separatedBy: "-----END CERTIFICATE-----").first! + "-----END CERTIFICATE-----")
            .extensions.subjectAlternativeNames
        #expect(names?.contains(.dnsName("b.signfleet.test")) == true && names?.contains(.dnsName("signfleet.test")) == true, "\(String(describing: names))")
        let back = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["signfleet.test"], now: now)
        #expect(back.certificateChainPEM == other.certificateChainPEM, "the first host's restart keeps the gathered certificate")
        let late = try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["signfleet.test"], now: now.addingTimeInterval(397 * 86_400))
        #expect(late.certificateChainPEM != back.certificateChainPEM, "about to expire: made again")
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("server-key.pem").path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(throws: FleetError.self) { try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["not a host name!"], now: now) }
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int
        #expect(directoryMode == 0o700)
        // A CA key that is not the CA's: refused, nothing made.
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: directory.appendingPathComponent("ca-key.pem"))
        #expect(throws: FleetError.self) { try LocalTLSIdentity.loadOrCreate(directory: directory, names: ["127.0.0.1"], now: now) }
    }
}
