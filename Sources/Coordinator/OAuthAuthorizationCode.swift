import Crypto
import FleetProtocol
import Foundation
import Synchronization

/// The authorization code grant (RFC 6749 section 4.1, with PKCE, RFC 7636) as DocuSign serves it
/// (docs/rest-api.md, "The authorization code grant"): the SDK's `get_authorization_uri` sends a
/// user to `GET /oauth/auth`, the consent page; the user signs in and allows; the page sends them
/// to the key's registered redirect URI with a single-use code; `POST /oauth/token` with
/// `grant_type=authorization_code` exchanges it (the key's secret as HTTP Basic, the SDK's
/// `generate_access_token`, or the PKCE verifier) for an access token.
extension OAuthService {
    /// What the consent page was asked: the query of `GET /oauth/auth`, repeated as the form's
    /// hidden fields when the user answers.
    public struct AuthorizationRequest: Sendable, Hashable {
        public var responseType: String?
        public var clientID: String?
        public var redirectURI: String?
        public var scope: String?
        public var state: String?
        public var codeChallenge: String?
        public var codeChallengeMethod: String?

        public init(
            responseType: String?, clientID: String?, redirectURI: String?, scope: String?, state: String?, codeChallenge: String?,
            codeChallengeMethod: String?
        ) {
            self.responseType = responseType
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.scope = scope
            self.state = state
            self.codeChallenge = codeChallenge
            self.codeChallengeMethod = codeChallengeMethod
        }
    }

    /// Why the consent page does not go on. `page`: the client or its redirect URI is not known, so
    /// nothing is sent anywhere (RFC 6749 4.1.2.1): the page says what is wrong. `redirect`: the
    /// client is known; the error goes back to it (`error`, `error_description`, `state`).
    public enum AuthorizationRefusal: Error, Sendable, Equatable {
        case page(status: Int, message: String)
        case redirect(String)
    }

    /// A consent page to show: the key asking, its account and the scopes asked for.
    public struct ConsentScreen: Sendable, Hashable {
        public var keyName: String
        public var accountID: String
        public var scopes: [String]
        public var request: AuthorizationRequest
    }

    /// Wrong passwords on the consent page per account and email within ``ConsentAttempts/window``.
    static let maxConsentFailures = 5
    /// How long a code may wait for its exchange (DocuSign's codes: two minutes).
    static let codeLifetime: TimeInterval = 120
    /// The most redirect URIs a key may register, and the longest one.
    static let maxRedirectURIs = 20
    static let maxRedirectURILength = 2048
    /// The longest `state` carried back to the client.
    static let maxStateLength = 2048

    /// The key and redirect URI the request names, checked before anything is shown or sent.
    func authorizationClient(_ request: AuthorizationRequest) async throws(AuthorizationRefusal) -> (IntegrationKeyRecord, String) {
        guard let clientID = request.clientID, !clientID.isEmpty else {
            throw .page(status: 400, message: "client_id is missing: the link must name an integration key")
        }
        guard clientID.utf8.count <= 200 else { throw .page(status: 400, message: "client_id is longer than 200 bytes") }
        let found: IntegrationKeyRecord?
        do {
            found = try await store.integrationKey(id: clientID)
        } catch {
            throw .page(status: 503, message: "the server cannot answer now; try again")
        }
        guard let key = found, key.revokedAt == nil else { throw .page(status: 400, message: "client_id names no integration key in force") }
        guard let redirect = request.redirectURI, key.redirectURIList.contains(redirect) else {
            throw .page(
                status: 400, message: "redirect_uri is not one of the integration key's registered redirect URIs (signfleet admin integration-keys add --redirect-uri)")
        }
        // Checked before anything is sent back: an over-long state is not carried to the client.
        if let state = request.state, state.utf8.count > Self.maxStateLength {
            throw .page(status: 400, message: "state is longer than \(Self.maxStateLength) bytes")
        }
        return (key, redirect)
    }

    /// Checks a request to the consent page and what it shows.
    public func consentScreen(_ request: AuthorizationRequest) async throws(AuthorizationRefusal) -> ConsentScreen {
        let (key, redirect) = try await authorizationClient(request)
        let scopes = try Self.requestedScopes(request, redirect: redirect)
        _ = try Self.challenge(request, key: key, redirect: redirect)
        return ConsentScreen(keyName: key.name, accountID: key.accountID, scopes: scopes, request: request)
    }

    /// The user allowed, with their email and password: records their consent to the scopes asked
    /// for and answers where to send them (the redirect URI with `code` and `state`).
    /// - Throws: `FleetError` `unauthenticated` for a wrong email or password (the page is shown
    ///   again), or a refusal.
    public func allow(_ request: AuthorizationRequest, email: String, password: String) async throws -> String {
        let (key, redirect) = try await authorizationClient(request)
        let scopes = try Self.requestedScopes(request, redirect: redirect)
        let challenge = try Self.challenge(request, key: key, redirect: redirect)
        let now = now()
        // Guessing is bounded per account and email (ConsentAttempts), before the password is looked at.
        let who = ConsentAttempts.Key(account: key.accountID, email: email.lowercased())
        if let until = consentAttempts.blockedUntil(who, at: now) {
            throw FleetError(.rateLimited, "too many wrong passwords for this email; try again after \(REST.time(until))")
        }
        let user = try await store.users(accountID: key.accountID).first { $0.email.lowercased() == email.lowercased() }
        guard let user, SecretHash.matches(password, salt: user.secretSalt, hash: user.secretHash) else {
            consentAttempts.failed(who, at: now)
            throw FleetError(.unauthenticated, "wrong email or password")
        }
        consentAttempts.succeeded(who)
        // Consent adds to what the user allowed before (DocuSign keeps consent per key and user).
        let earlier = try await store.consent(integrationKeyID: key.id, userID: user.id)?.scopes.split(separator: " ").map(String.init) ?? []
        try await store.grantConsent(
            ConsentRecord(integrationKeyID: key.id, userID: user.id, scopes: Set(earlier + scopes).sorted().joined(separator: " "), grantedAt: now))
        let code = AuthService.makeToken()
        try await store.insertAuthorizationCode(
            AuthorizationCodeRecord(
                codeHash: AuthService.hash(code), integrationKeyID: key.id, userID: user.id, scopes: scopes.joined(separator: " "),
                redirectURI: redirect, codeChallenge: challenge, expiresAt: now.addingTimeInterval(Self.codeLifetime)),
            purgeBefore: now)
        return Self.redirect(redirect, ["code": code, "state": request.state])
    }

    /// The user declined: where to send them (`error=access_denied`).
    public func deny(_ request: AuthorizationRequest) async throws(AuthorizationRefusal) -> String {
        let (_, redirect) = try await authorizationClient(request)
        return Self.redirect(redirect, ["error": "access_denied", "error_description": "the user declined", "state": request.state])
    }

    /// Exchanges an authorization code. `client_id` is required. A key with a client secret must
    /// send it (HTTP Basic `client_id:client_secret`, or the form's `client_secret`); a code asked
    /// for with a PKCE challenge needs its `code_verifier`, and a verifier sent for a code asked for
    /// without one is refused. A code is taken out of the store on the first attempt, right or wrong.
    public func grant(
        authorizationCode code: String?, clientID: String?, clientSecret: String?, codeVerifier: String?, redirectURI: String?
    ) async throws(GrantError) -> Grant {
        guard let code, !code.isEmpty, code.utf8.count <= 256 else { throw .invalidRequest("code is missing") }
        let record: AuthorizationCodeRecord
        let key: IntegrationKeyRecord
        let user: UserRecord
        do {
            guard let found = try await store.redeemAuthorizationCode(codeHash: AuthService.hash(code)) else {
                throw GrantError.invalidGrant("the authorization code is unknown or was already used")
            }
            record = found
            guard let foundKey = try await store.integrationKey(id: record.integrationKeyID), foundKey.revokedAt == nil else {
                throw GrantError(status: 401, error: "invalid_client", errorDescription: "the integration key is not in force")
            }
            key = foundKey
            guard let foundUser = try await store.users(accountID: key.accountID).first(where: { $0.id == record.userID }) else {
                throw GrantError.invalidGrant("user_not_found")
            }
            user = foundUser
        } catch let error as GrantError {
            throw error
        } catch {
            throw .unavailable
        }
        guard record.expiresAt > now() else { throw .invalidGrant("the authorization code expired") }
        let invalidClient = { (why: String) in GrantError(status: 401, error: "invalid_client", errorDescription: why) }
        guard let clientID else { throw .invalidRequest("client_id is missing (HTTP Basic or the form's client_id)") }
        guard clientID == key.id else { throw invalidClient("the code was issued to another integration key") }
        if let redirectURI, redirectURI != record.redirectURI { throw .invalidGrant("redirect_uri differs from the authorization request's") }
        // A key with a secret is a confidential client: its secret is always required.
        if let secretHash = key.secretHash {
            guard let clientSecret, Self.constantTimeEqual(AuthService.hash(clientSecret), secretHash) else {
                throw invalidClient("the client_id and client_secret do not match")
            }
        }
        // PKCE both ways: a code asked for with a challenge needs its verifier; a verifier sent for a
        // code asked for without one means the code is not the one this client asked for (RFC 9700 2.1.1).
        switch (record.codeChallenge, codeVerifier) {
        case (let challenge?, let verifier?):
            guard Self.isVerifier(verifier), Self.s256(verifier) == challenge else { throw .invalidGrant("code_verifier does not match the code_challenge") }
        case (.some, nil):
            throw .invalidGrant("code_verifier is missing: the code was asked for with a code_challenge")
        case (nil, .some):
            throw .invalidGrant("code_verifier was sent for a code asked for without a code_challenge")
        case (nil, nil):
            guard key.secretHash != nil else { throw invalidClient("the key has no client secret and the code no code_challenge") }
        }
        do {
            let reply = try await auth.issueToken(for: user, lifetime: Self.grantedLifetime)
            let lifetime = min(Self.grantedLifetime, Double(auth.tokenLifetime.components.seconds))
            return Grant(accessToken: reply.accessToken, expiresIn: Int(lifetime), scope: record.scopes)
        } catch {
            throw .unavailable
        }
    }

    // MARK: Parts

    /// `response_type=code` and the scopes asked for (known ones, `signature` among them).
    static func requestedScopes(_ request: AuthorizationRequest, redirect: String) throws(AuthorizationRefusal) -> [String] {
        func refuse(_ error: String, _ description: String) -> AuthorizationRefusal {
            .redirect(Self.redirect(redirect, ["error": error, "error_description": description, "state": request.state]))
        }
        guard request.responseType == "code" else {
            throw refuse("unsupported_response_type", "response_type must be code (the implicit grant is not served)")
        }
        let scopes = Set((request.scope ?? "signature").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init))
        guard scopes.isSubset(of: knownScopes), scopes.contains("signature") else {
            throw refuse("invalid_scope", "scope must include signature and only \(knownScopes.sorted().joined(separator: ", "))")
        }
        return scopes.sorted()
    }

    /// The PKCE challenge to keep with the code, if any (only `S256`: `plain` would let a code
    /// seen on its way back be exchanged by whoever saw it). A key without a client secret (a
    /// public client) must send one: its codes could not be exchanged otherwise.
    static func challenge(_ request: AuthorizationRequest, key: IntegrationKeyRecord, redirect: String) throws(AuthorizationRefusal) -> String? {
        func refuse(_ description: String) -> AuthorizationRefusal {
            .redirect(Self.redirect(redirect, ["error": "invalid_request", "error_description": description, "state": request.state]))
        }
        guard let challenge = request.codeChallenge else {
            guard request.codeChallengeMethod == nil else { throw refuse("code_challenge_method without code_challenge") }
            guard key.secretHash != nil else { throw refuse("code_challenge is required: the integration key has no client secret") }
            return nil
        }
        guard request.codeChallengeMethod == "S256", challenge.utf8.count == 43, challenge.utf8.allSatisfy(isBase64URL) else {
            throw refuse("code_challenge must be 43 base64url characters with code_challenge_method=S256")
        }
        return challenge
    }

    /// `uri` with `parameters` added to its query (those that are nil left out), each name and
    /// value percent-encoded but for RFC 3986's unreserved characters; the URI's own query and
    /// everything else of it are kept byte for byte.
    static func redirect(_ uri: String, _ parameters: KeyValuePairs<String, String?>) -> String {
        var unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        unreserved.insert(charactersIn: "-._~")
        let added = parameters.compactMap { name, value in
            value.map { "\(name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")=\($0.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")" }
        }.joined(separator: "&")
        guard !added.isEmpty else { return uri }
        // Registered URIs have no fragment (``checkedRedirectURI``).
        return uri + (uri.contains("?") ? (uri.hasSuffix("?") || uri.hasSuffix("&") ? "" : "&") : "?") + added
    }

    /// RFC 7636: 43 to 128 characters of `[A-Za-z0-9-._~]`.
    static func isVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && verifier.utf8.allSatisfy { isBase64URL($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
        default: false
        }
    }

    /// base64url (no padding) of the SHA-256 of `verifier`: the S256 challenge.
    static func s256(_ verifier: String) -> String {
        Data(SHA256.hash(data: Data(verifier.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func constantTimeEqual(_ a: Data, _ b: Data) -> Bool {
        a.count == b.count && zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// A redirect URI a key may register: absolute `https`, or `http` to a loopback host (the
    /// code travels in it), with a host, no fragment, no user info (RFC 6749 3.1.2, RFC 8252 7.3).
    static func checkedRedirectURI(_ uri: String) throws -> String {
        guard uri.utf8.count <= maxRedirectURILength, !uri.contains("\n"), let parts = URLComponents(string: uri),
            let scheme = parts.scheme?.lowercased(), scheme == "https" || scheme == "http", let host = parts.host, !host.isEmpty,
            parts.fragment == nil, parts.user == nil, parts.password == nil
        else {
            throw FleetError(.invalidRequest, "redirect URI \"\(uri.prefix(200))\" must be an absolute http(s) URL with a host, no fragment and no user info")
        }
        guard scheme == "https" || ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased()) else {
            throw FleetError(.invalidRequest, "redirect URI \"\(uri.prefix(200))\" must be https (http only to 127.0.0.1, ::1 or localhost): the code travels in it")
        }
        return uri
    }
}

/// Wrong passwords on the consent page, per account and email, in this process: after
/// ``OAuthService/maxConsentFailures`` within ``window`` the email is refused until the window of
/// its first failure has passed, whatever password is sent. A right password clears the count.
/// At most ``capacity`` emails are tracked (the oldest windows are dropped first).
final class ConsentAttempts: Sendable {
    struct Key: Hashable, Sendable {
        var account: String
        var email: String
    }

    static let window: TimeInterval = 15 * 60
    static let capacity = 10_000
    private let failures = Mutex<[Key: (first: Date, count: Int)]>([:])

    /// When the email may try again, if it is refused now.
    func blockedUntil(_ key: Key, at now: Date) -> Date? {
        failures.withLock { entries in
            guard let entry = entries[key] else { return nil }
            let end = entry.first.addingTimeInterval(Self.window)
            guard end > now else {
                entries[key] = nil
                return nil
            }
            return entry.count >= OAuthService.maxConsentFailures ? end : nil
        }
    }

    func failed(_ key: Key, at now: Date) {
        failures.withLock { entries in
            if var entry = entries[key], entry.first.addingTimeInterval(Self.window) > now {
                entry.count += 1
                entries[key] = entry
                return
            }
            if entries.count >= Self.capacity {
                entries = entries.filter { $0.value.first.addingTimeInterval(Self.window) > now }
                while entries.count >= Self.capacity, let oldest = entries.min(by: { $0.value.first < $1.value.first })?.key { entries[oldest] = nil }
            }
            entries[key] = (now, 1)
        }
    }

    func succeeded(_ key: Key) {
        failures.withLock { $0[key] = nil }
    }
}
