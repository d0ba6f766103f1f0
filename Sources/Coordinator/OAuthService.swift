import FleetProtocol
import Foundation
import JWTKit

/// OAuth for the REST API as DocuSign's SDKs use it (docs/rest-api.md, "Authentication"):
/// integration keys of an account with the RSA public keys their assertions are signed with,
/// users' consent to a key acting for them, the JWT bearer grant that turns a signed assertion
/// into an access token of the coordinator's own, and the authorization code grant with its
/// consent page (OAuthAuthorizationCode.swift).
public struct OAuthService: Sendable {
    /// An integration key as operators see it.
    public struct IntegrationKey: Sendable, Hashable, Codable {
        public var id: String
        public var accountID: String
        public var name: String
        public var createdAt: Date
        public var revokedAt: Date?
        /// Where the consent page may send codes (the authorization code grant).
        public var redirectURIs: [String]
        /// Whether it has an RSA public key (the JWT grant) and a client secret (the code grant).
        public var hasPublicKey: Bool
        public var hasSecret: Bool
    }

    /// A key just registered, with its client secret: shown once, kept only as its SHA-256.
    public struct RegisteredKey: Sendable, Hashable {
        public var key: IntegrationKey
        public var secret: String?
    }

    /// A refusal of the token endpoint, as DocuSign's OAuth service words it:
    /// `{"error": …, "error_description": …}`.
    public struct GrantError: Error, Sendable, Equatable, CustomStringConvertible {
        public var status: Int
        public var error: String
        public var errorDescription: String
        public var description: String { "\(error): \(errorDescription)" }

        static func invalidGrant(_ description: String) -> GrantError { GrantError(status: 400, error: "invalid_grant", errorDescription: description) }
        static func invalidRequest(_ description: String) -> GrantError { GrantError(status: 400, error: "invalid_request", errorDescription: description) }
    }

    /// What the token endpoint answers.
    public struct Grant: Sendable, Hashable {
        public var accessToken: String
        public var expiresIn: Int
        public var scope: String
    }

    /// The grant type of the JWT bearer grant (RFC 7523).
    public static let jwtGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// The longest a granted token lives (DocuSign's JWT tokens: one hour).
    static let grantedLifetime: TimeInterval = 3600
    /// The longest an assertion may be valid, `exp` − `iat` (DocuSign: one hour).
    static let maxAssertionLifetime: TimeInterval = 3600
    /// How far `iat` may be in the future (clocks differ).
    static let clockSkew: TimeInterval = 60
    /// The longest assertion read.
    static let maxAssertionBytes = 16 * 1024
    /// The scopes a key may be consented to.
    public static let knownScopes: Set<String> = ["signature", "impersonation", "extended", "openid"]

    let store: any CoordinatorStorage
    let auth: AuthService
    let now: @Sendable () -> Date
    /// Wrong passwords on the consent page (OAuthAuthorizationCode.swift).
    let consentAttempts = ConsentAttempts()

    package init(store: any CoordinatorStorage, auth: AuthService, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.auth = auth
        self.now = now
    }

    // MARK: Integration keys and consent

    /// Registers an integration key of `accountID` with an RSA public key (PEM, at least 2,048 bits).
    /// - Throws: `FleetError` `invalid_request` for a key that is not one, `not_found` for an unknown account.
    public func register(accountID: String, name: String, publicKeyPEM: String) async throws -> IntegrationKey {
        try await register(accountID: accountID, name: name, publicKeyPEM: publicKeyPEM, redirectURIs: [], secret: false).key
    }

    /// Registers an integration key with an RSA public key (the JWT grant), a client secret made
    /// now (the authorization code grant; `secret`), or both, and the redirect URIs its consent
    /// page may send codes to.
    /// - Throws: `FleetError` `invalid_request` for a key that is not one, neither a key nor a
    ///   secret, or a redirect URI that is not an absolute http(s) URL; `not_found` for an unknown account.
    public func register(accountID: String, name: String, publicKeyPEM: String?, redirectURIs: [String], secret: Bool) async throws -> RegisteredKey {
        if let publicKeyPEM {
            guard publicKeyPEM.utf8.count <= 16 * 1024 else { throw FleetError(.invalidRequest, "the public key is over 16 KiB") }
            do {
                _ = try Insecure.RSA.PublicKey(pem: publicKeyPEM)
            } catch {
                throw FleetError(.invalidRequest, "the public key must be an RSA public key of at least 2048 bits in PEM (-----BEGIN PUBLIC KEY-----): \(error)")
            }
        } else if !secret {
            throw FleetError(.invalidRequest, "a key needs an RSA public key (the JWT grant), a client secret (the authorization code grant), or both")
        }
        guard redirectURIs.count <= Self.maxRedirectURIs else { throw FleetError(.invalidRequest, "at most \(Self.maxRedirectURIs) redirect URIs") }
        guard !secret || !redirectURIs.isEmpty else {
            throw FleetError(.invalidRequest, "a client secret is for the authorization code grant, which needs at least one redirect URI")
        }
        let uris = try redirectURIs.map(Self.checkedRedirectURI)
        let trimmedName = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...200).contains(trimmedName.count) else { throw FleetError(.invalidRequest, "the key's name must be 1 to 200 characters") }
        let clientSecret = secret ? AuthService.makeToken() : nil
        let record = IntegrationKeyRecord(
            id: UUID().uuidString.lowercased(), accountID: accountID, name: trimmedName, publicKey: publicKeyPEM ?? "", createdAt: now(),
            secretHash: clientSecret.map(AuthService.hash), redirectURIs: uris)
        try await store.insertIntegrationKey(record)
        return RegisteredKey(key: Self.key(record), secret: clientSecret)
    }

    /// An account's keys (every account's when `nil`).
    public func keys(accountID: String?) async throws -> [IntegrationKey] {
        try await store.integrationKeys(accountID: accountID).map(Self.key)
    }

    /// Revokes a key: its assertions are refused from now on (tokens it got live out their hour).
    /// - Throws: `FleetError` `not_found` when the account has no such key in force.
    public func revoke(id: String, accountID: String) async throws {
        guard try await store.revokeIntegrationKey(id: id, accountID: accountID, at: now()) else {
            throw FleetError(.notFound, "no integration key \"\(id)\" in force in account \"\(accountID)\"")
        }
    }

    /// Records a user's consent (by email) to a key acting for them with `scopes`.
    /// - Throws: `FleetError` `not_found` for an unknown key or a user not of the key's account,
    ///   `invalid_request` for an unknown scope.
    public func consent(keyID: String, email: String, scopes: [String]) async throws {
        guard let key = try await store.integrationKey(id: keyID), key.revokedAt == nil else {
            throw FleetError(.notFound, "no integration key \"\(keyID)\" in force")
        }
        let unknown = scopes.filter { !Self.knownScopes.contains($0) }
        guard unknown.isEmpty, !scopes.isEmpty else {
            throw FleetError(.invalidRequest, "scopes must be some of \(Self.knownScopes.sorted().joined(separator: ", ")); got \(scopes.joined(separator: " "))")
        }
        guard let user = try await store.users(accountID: key.accountID).first(where: { $0.email.lowercased() == email.lowercased() }) else {
            throw FleetError(.notFound, "no user \"\(email)\" in the key's account")
        }
        try await store.grantConsent(
            ConsentRecord(integrationKeyID: key.id, userID: user.id, scopes: Set(scopes).sorted().joined(separator: " "), grantedAt: now()))
    }

    static func key(_ record: IntegrationKeyRecord) -> IntegrationKey {
        IntegrationKey(
            id: record.id, accountID: record.accountID, name: record.name, createdAt: record.createdAt, revokedAt: record.revokedAt,
            redirectURIs: record.redirectURIList, hasPublicKey: !record.publicKey.isEmpty, hasSecret: record.secretHash != nil)
    }

    // MARK: The JWT bearer grant

    /// The assertion's claims (DocuSign's: `iss` the integration key, `sub` the user id, `aud` the
    /// OAuth host, `iat`, `exp`, `scope`).
    struct Assertion: JWTPayload {
        var iss: IssuerClaim?
        var sub: SubjectClaim?
        var aud: AudienceClaim?
        var iat: IssuedAtClaim?
        var exp: ExpirationClaim?
        var scope: String?

        // Each claim is checked by the grant, against the injected clock, with DocuSign's errors.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// Exchanges a signed assertion for an access token. Checked, in order: the grant type, the
    /// assertion's size and form, `iss` an integration key in force, the RS256 signature with that
    /// key, `aud` one of `audiences`, `iat`/`exp` (not expired, not from the future beyond a minute,
    /// at most an hour apart), `sub` a user of the key's account, `scope` including `signature`,
    /// and the user's consent to every requested scope (`impersonation` aside).
    public func grant(grantType: String?, assertion: String?, audiences: Set<String>) async throws(GrantError) -> Grant {
        guard grantType == Self.jwtGrantType else {
            throw GrantError(status: 400, error: "unsupported_grant_type", errorDescription: "grant_type must be \(Self.jwtGrantType)")
        }
        guard let assertion, !assertion.isEmpty else { throw .invalidRequest("the assertion is missing") }
        guard assertion.utf8.count <= Self.maxAssertionBytes else { throw .invalidRequest("the assertion is over \(Self.maxAssertionBytes) bytes") }
        let unverified: Assertion
        do {
            unverified = try await JWTKeyCollection().unverified(assertion, as: Assertion.self)
        } catch {
            throw .invalidGrant("the assertion is not a JWT: \(error)")
        }
        // DocuSign's assertions are RS256; a header naming anything else is refused whatever it signs.
        guard Self.headerAlgorithm(assertion) == "RS256" else { throw .invalidGrant("no_valid_keys_or_signatures") }
        guard let issuer = unverified.iss?.value, !issuer.isEmpty else { throw .invalidGrant("issuer_not_found") }
        let record: IntegrationKeyRecord
        do {
            guard let found = try await store.integrationKey(id: issuer), found.revokedAt == nil else { throw GrantError.invalidGrant("issuer_not_found") }
            record = found
        } catch let error as GrantError {
            throw error
        } catch {
            throw .unavailable
        }
        let claims: Assertion
        do {
            let keys = JWTKeyCollection()
            await keys.add(rsa: try Insecure.RSA.PublicKey(pem: record.publicKey), digestAlgorithm: .sha256)
            claims = try await keys.verify(assertion, as: Assertion.self)
        } catch {
            throw .invalidGrant("no_valid_keys_or_signatures")
        }
        guard let audience = claims.aud?.value, audience.contains(where: { audiences.contains($0) }) else {
            throw .invalidGrant("invalid audience: aud must name this server's OAuth host (\(audiences.sorted().joined(separator: " or ")))")
        }
        let now = now()
        guard let issuedAt = claims.iat?.value, let expires = claims.exp?.value else { throw .invalidGrant("the assertion needs iat and exp") }
        guard expires > now else { throw .invalidGrant("expired: the assertion's exp has passed") }
        guard issuedAt.timeIntervalSince(now) <= Self.clockSkew else { throw .invalidGrant("the assertion's iat is in the future") }
        guard expires.timeIntervalSince(issuedAt) <= Self.maxAssertionLifetime else {
            throw .invalidGrant("the assertion's exp is more than an hour after its iat")
        }
        guard let subject = claims.sub?.value, !subject.isEmpty else { throw .invalidGrant("user_not_found") }
        let requested = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        do {
            guard let user = try await store.users(accountID: record.accountID).first(where: { $0.id == subject }) else {
                throw GrantError.invalidGrant("user_not_found")
            }
            guard requested.contains("signature") else { throw GrantError(status: 400, error: "invalid_scope", errorDescription: "scope must include signature") }
            let consented = Set((try await store.consent(integrationKeyID: record.id, userID: user.id))?.scopes.split(separator: " ").map(String.init) ?? [])
            guard !consented.isEmpty, requested.subtracting(["impersonation"]).isSubset(of: consented) else {
                throw GrantError(status: 400, error: "consent_required", errorDescription: "the user has not consented to this integration key with these scopes")
            }
            let reply = try await auth.issueToken(for: user, lifetime: Self.grantedLifetime)
            // The token's whole lifetime, as issued (not what is left of it by the time this line runs).
            let lifetime = min(Self.grantedLifetime, Double(auth.tokenLifetime.components.seconds))
            return Grant(accessToken: reply.accessToken, expiresIn: Int(lifetime), scope: requested.sorted().joined(separator: " "))
        } catch let error as GrantError {
            throw error
        } catch {
            throw .unavailable
        }
    }

    /// The `alg` of a compact JWS's header, or nil when the header is not readable JSON.
    static func headerAlgorithm(_ token: String) -> String? {
        guard let encoded = token.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first, encoded.count <= 4096 else { return nil }
        var base64 = encoded.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let header = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return header["alg"] as? String
    }
}

extension OAuthService.GrantError {
    /// The store could not be read: nothing about it is told to an unauthenticated caller.
    static let unavailable = OAuthService.GrantError(status: 503, error: "temporarily_unavailable", errorDescription: "the server cannot answer now; try again")
}
