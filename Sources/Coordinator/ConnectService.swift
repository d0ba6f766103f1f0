import Crypto
import FleetProtocol
import Foundation

/// Connect's account-side rules (docs/webhooks.md): configurations checked and kept, HMAC keys
/// made and revoked, failure records listed. Delivery is ``ConnectPublisher``'s.
public struct ConnectService: Sendable {
    /// An account holds at most this many configurations (DocuSign's limit is of the same order).
    package static let maxConfigurations = 100
    /// At most this many active HMAC keys at once (DocuSign's limit).
    package static let maxActiveKeys = 10
    /// What `eventData.includeData` may ask for today.
    package static let supportedIncludeData: Set<String> = ["recipients", "tabs", "custom_fields"]

    let store: any CoordinatorStorage
    let links: CaptiveSigningLinks
    let now: @Sendable () -> Date

    package init(store: any CoordinatorStorage, links: CaptiveSigningLinks, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.links = links
        self.now = now
    }

    /// What a configuration asks for, as the REST API received it (checked by ``check(_:accountID:)``).
    package struct Request: Sendable {
        package var name: String
        package var url: String
        package var events: [EnvelopeEvent.Kind]
        package var includeData: [String]
        package var enabled: Bool
        package var includeHMAC: Bool

        package init(name: String, url: String, events: [EnvelopeEvent.Kind], includeData: [String], enabled: Bool, includeHMAC: Bool) {
            self.name = name
            self.url = url
            self.events = events
            self.includeData = includeData
            self.enabled = enabled
            self.includeHMAC = includeHMAC
        }
    }

    /// Adds a configuration to an account, as `POST …/connect` does, for an embedder without the
    /// REST API: `events` are Connect's event names (`envelope-completed`, …), `includeData` may
    /// hold `recipients`. - Returns: its `connectId`.
    /// - Throws: `FleetError` `invalid_request` naming what is wrong, `not_found` for an unknown account.
    public func configure(
        accountID: String, name: String, url: String, events: [String], includeData: [String] = [], includeHMAC: Bool = true
    ) async throws -> String {
        var kinds: [EnvelopeEvent.Kind] = []
        for event in events {
            guard let kind = EnvelopeEvent.Kind(rawValue: event) else {
                throw FleetError(.invalidRequest, "\"\(event)\" is not a Connect event SignFleet produces")
            }
            kinds.append(kind)
        }
        let request = Request(name: name, url: url, events: kinds, includeData: includeData, enabled: true, includeHMAC: includeHMAC)
        return try await create(request, accountID: accountID).id
    }

    /// Makes an HMAC key for an account. - Returns: its id and secret (what the listener checks with).
    public func makeKey(accountID: String) async throws -> (id: String, secret: String) {
        let key = try await addKey(accountID: accountID)
        return (key.id, key.secret)
    }

    /// Creates a configuration with a new numeric id (DocuSign's `connectId` is a number); with
    /// `envelopeID`, an envelope's own `eventNotification` (only that envelope's events, not listed).
    /// - Throws: `invalid_request` naming what is wrong with it.
    package func create(_ request: Request, accountID: String, envelopeID: String? = nil) async throws -> ConnectConfigurationRecord {
        try await check(request, accountID: accountID)
        let accountWide = envelopeID == nil ? try await store.connectConfigurations(accountID: accountID).count : 0
        guard accountWide < Self.maxConfigurations else {
            throw FleetError(.invalidRequest, "an account holds at most \(Self.maxConfigurations) Connect configurations; delete one first")
        }
        var generator = SystemRandomNumberGenerator()  // an identifier, not a simulation choice
        for _ in 0..<8 {
            let id = String(UInt64.random(in: 10_000_000...99_999_999, using: &generator))
            guard try await store.connectConfiguration(id: id, accountID: nil) == nil else { continue }
            let record = ConnectConfigurationRecord(
                id: id, accountID: accountID, name: request.name, url: request.url, events: request.events, includeData: request.includeData,
                enabled: request.enabled, includeHMAC: request.includeHMAC, createdAt: now(), envelopeID: envelopeID)
            try await store.insertConnectConfiguration(record)
            return record
        }
        throw FleetError(.internal, "could not draw an unused configuration id", retryable: true)
    }

    /// Replaces configuration `id` of the account. - Throws: `not_found`, `invalid_request`.
    package func replace(id: String, with request: Request, accountID: String) async throws -> ConnectConfigurationRecord {
        try await check(request, accountID: accountID)
        guard var record = try await store.connectConfiguration(id: id, accountID: accountID) else {
            throw FleetError(.notFound, "no Connect configuration \"\(id)\" in this account")
        }
        record = ConnectConfigurationRecord(
            id: id, accountID: accountID, name: request.name, url: request.url, events: request.events, includeData: request.includeData,
            enabled: request.enabled, includeHMAC: request.includeHMAC, createdAt: record.createdAt)
        guard try await store.replaceConnectConfiguration(record) else {
            throw FleetError(.notFound, "no Connect configuration \"\(id)\" in this account")
        }
        return record
    }

    /// The rules a configuration meets: a name, events it can get, data it can include, and a
    /// listener URL that is http(s), in the account's allow-list when it has one, and not one of
    /// this coordinator's own listeners.
    func check(_ request: Request, accountID: String) async throws {
        let origin = try ReturnURLPolicy.origin(of: request.url, field: "urlToPublishTo")
        guard !request.name.isEmpty, request.name.utf8.count <= 200 else {
            throw FleetError(.invalidRequest, "name must be 1 to 200 bytes")
        }
        guard request.includeData.count <= Self.supportedIncludeData.count, Set(request.includeData).count == request.includeData.count else {
            throw FleetError(.invalidRequest, "eventData.includeData names each kind of data at most once")
        }
        guard !request.events.isEmpty else {
            throw FleetError(
                .invalidRequest, "events is empty: name at least one of \(EnvelopeEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let unsupported = Set(request.includeData).subtracting(Self.supportedIncludeData)
        guard unsupported.isEmpty else {
            throw FleetError(
                .invalidRequest,
                "eventData.includeData \(unsupported.sorted().joined(separator: ", ")) is not supported; supported: \(Self.supportedIncludeData.sorted().joined(separator: ", "))")
        }
        let allowed = try await store.returnOrigins(accountID: accountID)
        guard allowed.isEmpty || allowed.contains(origin) else {
            throw FleetError(
                .invalidRequest,
                "urlToPublishTo origin \(origin) is not in account \(accountID)'s allowed origins (\(allowed.joined(separator: ", "))); an admin adds it with `signfleet admin return-origins add`")
        }
        if let own = ownListener(request.url) {
            throw FleetError(.invalidRequest, "urlToPublishTo \(request.url) is this coordinator's own listener (\(own)); Connect posts only to other servers")
        }
    }

    /// The coordinator listener `url` points at, if any: one of its listeners' ports, on a host
    /// that is this machine's (resolved, so no spelling of a loopback or local address gets by;
    /// ``LocalAddresses``). Blocking when the port matches: the host is resolved.
    package func ownListener(_ url: String) -> String? {
        guard let target = URLComponents(string: url), let host = target.host?.lowercased() else { return nil }
        let port = target.port ?? (target.scheme?.lowercased() == "https" ? 443 : 80)
        for base in [links.baseURL, links.secureBaseURL].compactMap({ $0 }) {
            guard let own = URLComponents(string: base) else { continue }
            let ownPort = own.port ?? (own.scheme?.lowercased() == "https" ? 443 : 80)
            guard ownPort == port else { continue }
            if host == own.host?.lowercased() || LocalAddresses.reachThisMachine(host) { return base }
        }
        return nil
    }

    // MARK: HMAC keys

    /// Makes a new HMAC key (32 random bytes, base64). - Throws: `invalid_request` past the active limit.
    package func addKey(accountID: String) async throws -> ConnectKeyRecord {
        guard try await store.connectKeys(accountID: accountID).filter({ $0.revokedAt == nil }).count < Self.maxActiveKeys else {
            throw FleetError(.invalidRequest, "an account has at most \(Self.maxActiveKeys) active Connect keys; revoke one first")
        }
        let key = ConnectKeyRecord(
            id: UUID().uuidString.lowercased(), accountID: accountID, secret: Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
                .base64EncodedString(), createdAt: now())
        try await store.insertConnectKey(key)
        return key
    }

    package func revokeKey(id: String, accountID: String) async throws {
        guard try await store.revokeConnectKey(id: id, accountID: accountID, at: now()) else {
            throw FleetError(.notFound, "no active Connect key \"\(id)\" in account \(accountID)")
        }
    }
}
