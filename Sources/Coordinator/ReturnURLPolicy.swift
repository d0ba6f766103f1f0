import Foundation
import FleetProtocol

/// Where a signing ceremony may send the browser at its end (docs/captive-signing.md, "Return
/// URLs"): an `http` or `https` URL with a host and no user info, and, when the account lists
/// allowed origins, one of those. Checked when a signing URL is requested, so a refused return URL
/// never reaches a browser.
public enum ReturnURLPolicy {
    static var maxLength: Int { CaptiveSigningService.maxReturnURLLength }

    /// `scheme://host[:port]`, lowercased, default ports left out: what an allow-list holds.
    /// `field` names the URL in errors (Connect's `urlToPublishTo` is checked by the same rules).
    public static func origin(of url: String, field: String = "returnURL") throws(FleetError) -> String {
        guard !url.isEmpty, url.utf8.count <= maxLength else {
            throw FleetError(.invalidRequest, "\(field) must be 1 to \(maxLength) bytes")
        }
        // Control characters, spaces, quotes, angle brackets and backslashes have no place in a
        // URL a page redirects to (`https://evil\@app/` is read differently by browsers and parsers).
        guard !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || "<>\"'\\`".unicodeScalars.contains($0) }),
            let components = URLComponents(string: url), let scheme = components.scheme?.lowercased()
        else {
            throw FleetError(.invalidRequest, "\(field) must be an absolute http or https URL such as https://app.example/done; got \"\(url)\"")
        }
        guard scheme == "http" || scheme == "https" else {
            throw FleetError(
                .invalidRequest, "\(field) must use http or https (got \(scheme):); other schemes can run code or open local files in the browser")
        }
        guard components.user == nil, components.password == nil else {
            throw FleetError(.invalidRequest, "\(field) must not carry user info (user@host): it hides the real host; got \"\(url)\"")
        }
        // IDNA's ASCII form (`xn--…`), as browsers send it in `Origin`: a punycode and a Unicode
        // spelling of one host are one origin.
        guard let host = components.encodedHost?.lowercased(), !host.isEmpty else {
            throw FleetError(.invalidRequest, "\(field) \"\(url)\" has no host")
        }
        let port = components.port.flatMap { ($0 == 80 && scheme == "http") || ($0 == 443 && scheme == "https") ? nil : $0 }
        return "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "")
    }

    /// Checks `url` against the rules and `allowed` (empty: any http(s) origin).
    public static func check(_ url: String, allowed: [String], account: String) throws(FleetError) {
        let origin = try origin(of: url)
        guard allowed.isEmpty || allowed.contains(origin) else {
            throw FleetError(
                .invalidRequest,
                "returnURL origin \(origin) is not in account \(account)'s allowed return origins (\(allowed.joined(separator: ", "))); an admin adds it with `signfleet admin return-origins add`")
        }
    }
}

/// The per-account allow-lists of return-URL origins, in the store (table `accountReturnOrigin`).
public struct ReturnOrigins: Sendable {
    let store: any CoordinatorStorage

    public init(store: CoordinatorStore) {
        self.init(storage: store)
    }

    package init(storage: any CoordinatorStorage) {
        self.store = storage
    }

    /// The account's allowed origins, sorted (empty: any http(s) origin).
    public func list(accountID: String) async throws -> [String] {
        try await store.returnOrigins(accountID: accountID)
    }

    /// Adds origins (each normalised; a URL with a path is reduced to its origin) and returns the list.
    public func add(accountID: String, _ origins: [String]) async throws -> [String] {
        try await store.changeReturnOrigins(accountID: accountID, add: try Self.normalised(origins), remove: [])
    }

    /// Removes origins and returns the list.
    public func remove(accountID: String, _ origins: [String]) async throws -> [String] {
        try await store.changeReturnOrigins(accountID: accountID, add: [], remove: try Self.normalised(origins))
    }

    private static func normalised(_ origins: [String]) throws(FleetError) -> [String] {
        try origins.map { (url: String) throws(FleetError) -> String in try ReturnURLPolicy.origin(of: url) }
    }
}
