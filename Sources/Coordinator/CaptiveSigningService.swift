import Crypto
import SyncContract
import Envelopes
import FleetProtocol
import Foundation
import Metrics
import Synchronization

/// Time limits of captive signing (docs/captive-signing.md, "Token lifecycle").
public struct CaptiveSigningConfiguration: Sendable, Hashable {
    /// How long a signing URL may wait before it is opened (five minutes, as DocuSign's).
    public var urlLifetime: TimeInterval
    /// How long an opened page may sit without a request before its session ends (`session_timeout`).
    public var inactivityTimeout: TimeInterval

    public init(urlLifetime: TimeInterval = 300, inactivityTimeout: TimeInterval = 1200) {
        self.urlLifetime = urlLifetime
        self.inactivityTimeout = inactivityTimeout
    }
}

/// Where the coordinator's HTTP listener serves signing pages, known once it is bound
/// (port 0 picks a free port), so URLs issued over ZeroMQ point at the real address.
public final class CaptiveSigningLinks: Sendable {
    private let base: Mutex<String?>
    private let secureBase = Mutex<String?>(nil)

    /// - Parameter baseURL: e.g. `http://127.0.0.1:8080`; `nil` until ``publish(baseURL:)``.
    public init(baseURL: String? = nil) {
        base = Mutex(baseURL)
    }

    /// Records the listener's base URL (no trailing slash).
    public func publish(baseURL: String) {
        var url = baseURL
        while url.hasSuffix("/") { url.removeLast() }
        base.withLock { $0 = url }
    }

    /// The base URL, or `nil` while no listener is up.
    public var baseURL: String? { base.withLock { $0 } }

    /// Records the HTTPS listener's base URL (`https://host:port`).
    public func publish(secureBaseURL: String) {
        var url = secureBaseURL
        while url.hasSuffix("/") { url.removeLast() }
        secureBase.withLock { $0 = url }
    }

    /// The HTTPS listener's base URL, or `nil` while it is not up.
    public var secureBaseURL: String? { secureBase.withLock { $0 } }

    /// `host:port` of the HTTPS listener (`secure`) or the plain one: what an OAuth assertion's
    /// `aud` names (the official SDK's `oauth_host_name`); a loopback listener also answers to
    /// `localhost:port`.
    public func authorities(secure: Bool) -> Set<String> {
        var out = Set<String>()
        for url in [secure ? secureBaseURL : baseURL].compactMap({ $0 }) {
            guard let range = url.range(of: "://") else { continue }
            let authority = String(url[range.upperBound...])
            out.insert(authority)
            for loopback in ["127.0.0.1:", "[::1]:"] where authority.hasPrefix(loopback) {
                out.insert("localhost:" + authority.dropFirst(loopback.count))
            }
        }
        return out
    }
}

/// Captive (embedded) signing (shared/DESIGN.md, "Captive (embedded) signing";
/// docs/captive-signing.md): issues single-use signing URLs for embedded recipients
/// (`recipient.view`, `signing.url.create`, `POST /admin/signing-urls`) and runs the browser
/// sessions opened with them (``CaptiveSigningRoutes``).
///
/// A URL carries an opaque random token (256 bits, base64url); only its SHA-256 is stored. It
/// can be opened once, within ``CaptiveSigningConfiguration/urlLifetime`` of its issue; the page
/// it opens is bound to that browser by a session cookie (also stored only as a hash) and ends
/// after ``CaptiveSigningConfiguration/inactivityTimeout`` without a request.
public struct CaptiveSigningService: Sendable {
    /// Which recipient a URL is for.
    public enum RecipientSelection: Sendable, Hashable {
        /// Look the recipient up by client user id (the SDK's first variant); exactly one must match.
        case clientUserID(String)
        /// The recipient named so, with this email and client user id (no lookup by client user id alone).
        case nameAndEmail(name: String, email: String, clientUserID: String)
        /// The recipient with this id (integrators' backends).
        case recipientID(String)
    }

    let store: any CoordinatorStorage
    let auth: AuthService
    let now: @Sendable () -> Date
    public let configuration: CaptiveSigningConfiguration
    public let links: CaptiveSigningLinks
    let metrics: CaptiveSigningMetrics

    /// The longest return URL accepted, in bytes.
    public static let maxReturnURLLength = 2048

    public init(
        store: CoordinatorStore, auth: AuthService, configuration: CaptiveSigningConfiguration = CaptiveSigningConfiguration(),
        links: CaptiveSigningLinks = CaptiveSigningLinks(), metricsFactory: any MetricsFactory = MetricsSystem.factory,
        now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.init(storage: store, auth: auth, configuration: configuration, links: links, metricsFactory: metricsFactory, now: now)
    }

    package init(
        storage store: any CoordinatorStorage, auth: AuthService, configuration: CaptiveSigningConfiguration = CaptiveSigningConfiguration(),
        links: CaptiveSigningLinks = CaptiveSigningLinks(), metricsFactory: any MetricsFactory = MetricsSystem.factory,
        now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.metrics = CaptiveSigningMetrics(factory: metricsFactory)
        self.store = store
        self.auth = auth
        self.configuration = configuration
        self.links = links
        self.now = now
    }

    // MARK: Issuing URLs

    /// Serves `recipient.view`: a logged-in sender asks for a signing URL for an embedded
    /// recipient, by client user id alone (lookup) or with the recipient's name and email.
    /// - Throws: `FleetError`: `unauthenticated` / `token_expired`; `not_found` for an unknown
    ///   envelope (or another account's) or when no recipient matches; `invalid_request` when
    ///   several match, the recipient is not embedded or not a signer, it is not their turn, the
    ///   envelope is not `sent` or `delivered`, or the return URL or locale is malformed;
    ///   `unavailable` when the HTTP listener is off.
    public func recipientView(_ request: RecipientViewRequest, meter: (Account) throws -> Void = { _ in }) async throws
        -> RecipientViewReply
    {
        let (user, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        let selection: RecipientSelection
        switch (request.name, request.email) {
        case (nil, nil):
            selection = .clientUserID(request.clientUserID)
        case (let name?, let email?):
            selection = .nameAndEmail(name: name, email: email, clientUserID: request.clientUserID)
        default:
            throw FleetError(
                .invalidRequest,
                "give both the recipient's name and email, or neither (then the recipient is looked up by clientUserID)")
        }
        return try await issue(
            accountID: account.id, envelopeID: request.envelopeID, selection: selection, returnURL: request.returnURL,
            locale: request.locale, issuedBy: "recipient.view:\(user.id)")
    }

    /// Serves `signing.url.create`: an integrator's backend asks for a URL by recipient id.
    /// - Throws: as ``recipientView(_:meter:)``.
    public func signingURL(_ request: SigningURLRequest, meter: (Account) throws -> Void = { _ in }) async throws -> RecipientViewReply {
        let (user, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        return try await issue(
            accountID: account.id, envelopeID: request.envelopeID, selection: .recipientID(request.recipientID),
            returnURL: request.returnURL, locale: request.locale, issuedBy: "signing.url.create:\(user.id)")
    }

    /// Issues a signing URL.
    /// - Parameters:
    ///   - accountID: the envelope's account; `nil` for administrators (any account).
    ///   - envelopeID: the envelope to sign.
    ///   - selection: which of the envelope's recipients signs; it must be embedded (have a client user id).
    ///   - returnURL: where the browser goes at the end; empty for the coordinator's `/signing-return` page.
    ///   - locale: the signing page's language tag (such as `fr` or `pt-BR`); `nil` for the default.
    ///   - issuedBy: who asked, recorded with the session (such as `recipient.view:<user id>`).
    /// - Throws: as ``recipientView(_:meter:)``.
    public func issue(
        accountID: String?, envelopeID: String, selection: RecipientSelection, returnURL: String, locale: String?,
        issuedBy: String
    ) async throws -> RecipientViewReply {
        guard let base = links.baseURL else {
            throw FleetError(
                .unavailable, "the coordinator's HTTP listener is not running; captive signing pages need it (--http host:port)",
                retryable: true)
        }
        // No return URL: the coordinator's own landing page, which shows the event (always allowed).
        let ownPage = returnURL.isEmpty
        let returnURL = ownPage ? "\(base)/signing-return" : returnURL
        try Self.checkLocale(locale)
        let token = Self.randomToken()
        let at = now()
        let expiresAt = at.addingTimeInterval(configuration.urlLifetime)
        let recipientID = try await store.insertCaptiveSession(envelopeID: envelopeID, accountID: accountID) { envelope, allowed in
            let (record, recipients) = (envelope.envelope, envelope.recipients)
            if ownPage {
                _ = try ReturnURLPolicy.origin(of: returnURL)
            } else {
                try ReturnURLPolicy.check(returnURL, allowed: allowed, account: record.accountID)
            }
            let payload = try Self.payload(of: record)
            let recipient = try Self.select(selection, in: payload, envelopeID: envelopeID)
            try Self.checkSignable(record, recipients, recipient: recipient)
            return CaptiveSessionRecord(
                tokenHash: Self.hash(token), accountID: record.accountID, envelopeID: record.id,
                recipientID: recipient.recipientId, returnURL: returnURL, locale: locale, issuedBy: issuedBy, issuedAt: at,
                expiresAt: expiresAt)
        }.recipientID
        metrics.issued.increment()
        return RecipientViewReply(url: "\(base)/signing/\(token)", expiresAt: expiresAt, recipientID: recipientID)
    }

    /// The tab values a captive session stored for an envelope, by tab index.
    public func storedTabs(envelopeID: String) async throws -> [CaptiveTabValue] {
        try await store.captiveTabs(envelopeID: envelopeID).map {
            CaptiveTabValue(
                tabIndex: $0.tabIndex, recipientID: $0.recipientID, type: $0.type, value: $0.value, selected: $0.selected,
                isoRecord: $0.isoRecord.map { Array($0) }, svg: $0.svg, pointerType: $0.pointerType, pointCount: $0.pointCount)
        }
    }

    // MARK: Rules

    /// Finds the recipient `selection` names.
    static func select(_ selection: RecipientSelection, in payload: SyncPayload, envelopeID: String) throws -> PayloadRecipient {
        func unique(_ matches: [PayloadRecipient], _ what: String, hint: String) throws -> PayloadRecipient {
            guard let first = matches.first else {
                throw FleetError(.notFound, "envelope \(envelopeID) has no recipient \(what)")
            }
            guard matches.count == 1 else {
                throw FleetError(
                    .invalidRequest,
                    "\(matches.count) recipients of envelope \(envelopeID) (\(matches.map(\.recipientId).joined(separator: ", "))) are \(what); \(hint)")
            }
            return first
        }
        switch selection {
        case .clientUserID(let clientUserID):
            guard !clientUserID.isEmpty else { throw FleetError(.invalidRequest, "clientUserID must not be empty") }
            return try unique(
                payload.recipients.filter { $0.clientUserId == clientUserID }, "with clientUserId \"\(clientUserID)\"",
                hint: "give the recipient's name and email to choose one")
        case .nameAndEmail(let name, let email, let clientUserID):
            // An in-person signer's view is asked for by its host (DocuSign's userName and email
            // are the host's), an other recipient's by its own name and email.
            let named = payload.recipients.filter {
                ($0.name == name && $0.email?.lowercased() == email.lowercased())
                    || ($0.type == "inPersonSigner" && $0.hostName == name && $0.hostEmail?.lowercased() == email.lowercased())
            }
            guard !named.isEmpty else {
                throw FleetError(.notFound, "envelope \(envelopeID) has no recipient named \"\(name)\" with email \"\(email)\"")
            }
            let embedded = named.filter { $0.clientUserId == clientUserID }
            if embedded.isEmpty {
                if let plain = named.first(where: { $0.clientUserId == nil }) {
                    throw FleetError(
                        .invalidRequest,
                        "recipient \(plain.recipientId) of envelope \(envelopeID) is not embedded (it has no clientUserId); only embedded recipients sign in a captive view")
                }
                throw FleetError(
                    .invalidRequest,
                    "recipient \"\(name)\" of envelope \(envelopeID) has another clientUserId than \"\(clientUserID)\"")
            }
            return try unique(embedded, "named \"\(name)\" with this email and clientUserId", hint: "ask by recipient id")
        case .recipientID(let recipientID):
            guard let recipient = payload.recipients.first(where: { $0.recipientId == recipientID }) else {
                throw FleetError(.notFound, "envelope \(envelopeID) has no recipient \"\(recipientID)\"")
            }
            guard recipient.clientUserId != nil else {
                throw FleetError(
                    .invalidRequest,
                    "recipient \(recipientID) of envelope \(envelopeID) is not embedded (it has no clientUserId); only embedded recipients sign in a captive view")
            }
            return recipient
        }
    }

    /// Whether `recipient` may sign now: a signer, not done, current in routing, on a `sent` or
    /// `delivered` envelope.
    static func checkSignable(_ record: EnvelopeRecord, _ recipients: [EnvelopeRecipientRecord], recipient: PayloadRecipient) throws {
        let lifecycle = try EnvelopeService.lifecycle(record, recipients)
        guard lifecycle.status == .sent || lifecycle.status == .delivered else {
            throw FleetError(
                .invalidRequest,
                "envelope \(record.id) is \(record.status); a recipient can sign only while it is sent or delivered")
        }
        // An in-person signer signs on the host's screen: the view its host asked for.
        guard recipient.type == RecipientType.signer.rawValue || recipient.type == RecipientType.inPersonSigner.rawValue else {
            throw FleetError(
                .invalidRequest, "recipient \(recipient.recipientId) is a \(recipient.type); only signers and in-person signers sign in a captive view")
        }
        guard let state = lifecycle.recipients.first(where: { $0.id == recipient.recipientId }) else {
            throw FleetError(.internal, "envelope \(record.id) has no stored status for recipient \(recipient.recipientId)")
        }
        guard !state.status.isDone else {
            throw FleetError(.invalidRequest, "recipient \(recipient.recipientId) of envelope \(record.id) has already signed")
        }
        guard lifecycle.currentRecipientIDs.contains(recipient.recipientId) else {
            let current = lifecycle.currentRoutingOrder.map { "routing order \($0) is current (\(lifecycle.currentRecipientIDs.joined(separator: ", ")))" }
                ?? "nobody is current"
            throw FleetError(
                .invalidRequest,
                "it is not recipient \(recipient.recipientId)'s turn: \(current); recipient \(recipient.recipientId) signs at routing order \(recipient.routingOrder)")
        }
    }

    static func payload(of record: EnvelopeRecord) throws -> SyncPayload {
        do {
            return try SyncPayload(canonicalBytes: Array(record.payload))
        } catch {
            throw FleetError(.internal, "the stored payload of envelope \(record.id) is unreadable: \(error)", retryable: false)
        }
    }

    /// A BCP 47 tag: letters, then `-` and letters or digits (e.g. `en`, `de-CH`, `zh-Hant-TW`).
    static func checkLocale(_ locale: String?) throws {
        guard let locale else { return }
        let parts = locale.split(separator: "-", omittingEmptySubsequences: false)
        let valid =
            locale.utf8.count <= 35 && parts.count >= 1 && (2...8).contains(parts[0].count)
            && parts[0].allSatisfy { $0.isASCII && $0.isLetter }
            && parts.dropFirst().allSatisfy { (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
        guard valid else {
            throw FleetError(.invalidRequest, "locale must be a BCP 47 language tag such as en or de-CH; got \"\(locale)\"")
        }
    }

    // MARK: Tokens

    /// 256 random bits from the system's secure generator, base64url without padding (43 characters).
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(32)
        for _ in 0..<4 {
            var word = generator.next() as UInt64
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return base64URL(bytes)
    }

    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func hash(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }

    /// The stored hash of a token presented in a URL, or `nil` when it cannot be one of ours
    /// (wrong length or alphabet), so malformed tokens never reach the store.
    static func hashIfWellFormed(_ token: String) -> Data? {
        guard token.utf8.count == 43,
            token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F })
        else { return nil }
        return hash(token)
    }
}
