import FleetProtocol
import Foundation
import Hummingbird

/// The coordinator's HTTP admin endpoints: create accounts and users, list them, seed demo data.
///
/// | route | body | answer |
/// |---|---|---|
/// | `POST /admin/accounts` | ``AccountRequest`` | `201` and the ``Account`` |
/// | `GET /admin/accounts` | — | `200` and `{"accounts": [``AccountWithUsers``]}` |
/// | `POST /admin/accounts/{id}/users` | ``UserRequest`` | `201` and the ``User`` (never the secret) |
/// | `POST /admin/seed-demo` | — | `200` and ``SeededDemo`` |
///
/// Every request needs `Authorization: Bearer <token>`; a missing or wrong token answers `401`.
/// Refusals answer a JSON ``Failure`` (`{"code": …, "message": …}`): `400` for
/// `invalid_request`, `404` for `not_found`, `409` for `already_exists`; bodies larger than
/// ``maxBodyBytes`` answer `413`. Without an admin token the coordinator registers none of these
/// routes, so they answer `404`.
public struct CoordinatorAdminRoutes: Sendable {
    /// The largest accepted request body, in bytes.
    public static let maxBodyBytes = 64 * 1024

    /// `POST /admin/accounts`: `name` is required, the rest default as in ``AccountDirectory/createAccount(id:name:offlineSigning:rateLimits:)``.
    public struct AccountRequest: Sendable, Hashable, Codable {
        public var id: String?
        public var name: String
        public var offlineSigning: Bool?
        public var hourlyLimit: Int?
        public var burstLimit: Int?
        public var burstWindowSeconds: Int?

        public init(
            id: String? = nil, name: String, offlineSigning: Bool? = nil, hourlyLimit: Int? = nil, burstLimit: Int? = nil,
            burstWindowSeconds: Int? = nil
        ) {
            self.id = id
            self.name = name
            self.offlineSigning = offlineSigning
            self.hourlyLimit = hourlyLimit
            self.burstLimit = burstLimit
            self.burstWindowSeconds = burstWindowSeconds
        }
    }

    /// `POST /admin/accounts/{id}/users`.
    public struct UserRequest: Sendable, Hashable, Codable {
        public var name: String
        public var email: String
        public var secret: String

        public init(name: String, email: String, secret: String) {
            self.name = name
            self.email = email
            self.secret = secret
        }
    }

    /// An account and its users, as `GET /admin/accounts` lists them.
    public struct AccountWithUsers: Sendable, Hashable, Codable {
        public var id: String
        public var name: String
        public var offlineSigning: Bool
        public var rateLimits: RateLimits
        public var users: [User]
    }

    /// The `GET /admin/accounts` body.
    public struct AccountList: Sendable, Hashable, Codable {
        public var accounts: [AccountWithUsers]
    }

    /// The `POST /admin/seed-demo` body.
    public struct SeededDemo: Sendable, Hashable, Codable {
        public var account: Account
        public var users: [User]
    }

    /// The `POST /admin/devices/{id}/revoke` body.
    public struct RevokedDevice: Sendable, Hashable, Codable {
        public var deviceID: String
        public var revoked: Bool
    }

    /// `POST /admin/accounts/{id}/return-origins`: origins to add and to remove (URLs are reduced to
    /// their origin, `scheme://host[:port]`).
    public struct ReturnOriginsChange: Sendable, Hashable, Codable {
        public var add: [String]?
        public var remove: [String]?

        public init(add: [String]? = nil, remove: [String]? = nil) {
            self.add = add
            self.remove = remove
        }
    }

    /// The account's allowed return origins (empty: any http or https origin).
    public struct ReturnOriginsList: Sendable, Hashable, Codable {
        public var accountID: String
        public var origins: [String]
    }

    /// `POST /admin/accounts/{id}/templates/{template}/tab`: one tab of a template changed, as
    /// `signfleet admin templates set-tab` does on a store file (here through the running coordinator).
    public struct TabEdit: Sendable, Hashable, Codable {
        /// The tab's `tabId`, or instead
        public var tabId: String?
        /// its 0-based index.
        public var index: Int?
        public var value: String?
        public var label: String?
        public var page: Int?
        public var x: Double?
        public var y: Double?

        public init(tabId: String? = nil, index: Int? = nil, value: String? = nil, label: String? = nil, page: Int? = nil, x: Double? = nil, y: Double? = nil) {
            self.tabId = tabId
            self.index = index
            self.value = value
            self.label = label
            self.page = page
            self.x = x
            self.y = y
        }
    }

    /// The body of a refused admin request.
    public struct Failure: Sendable, Hashable, Codable {
        public var code: String
        public var message: String
    }

    let directory: AccountDirectory
    let token: String

    /// - Parameters:
    ///   - directory: where accounts and users are created.
    ///   - token: the bearer token every admin request must carry.
    public init(directory: AccountDirectory, token: String) {
        self.directory = directory
        self.token = token
    }

    /// Adds the admin routes to `router`.
    func register(on router: Router<BasicRequestContext>, refusals: HTTPRefusals? = nil) {
        let directory = self.directory
        let group = router.group("admin")
        group.post("accounts") { request, _ -> Response in
            try await self.handle(request, refusals: refusals) {
                let body = try await Self.decode(AccountRequest.self, from: request)
                let defaults = RateLimits()
                let limits = RateLimits(
                    hourly: body.hourlyLimit ?? defaults.hourly, burst: body.burstLimit ?? defaults.burst,
                    burstWindowSeconds: body.burstWindowSeconds ?? defaults.burstWindowSeconds)
                let account = try await directory.createAccount(
                    id: body.id ?? UUID().uuidString, name: body.name, offlineSigning: body.offlineSigning ?? true,
                    rateLimits: limits)
                return try Self.json(account, status: .created)
            }
        }
        group.get("accounts") { request, _ -> Response in
            try await self.handle(request, refusals: refusals) {
                var listed: [AccountWithUsers] = []
                for account in try await directory.accounts() {
                    listed.append(
                        AccountWithUsers(
                            id: account.id, name: account.name, offlineSigning: account.offlineSigning,
                            rateLimits: account.rateLimits, users: try await directory.users(accountID: account.id)))
                }
                return try Self.json(AccountList(accounts: listed), status: .ok)
            }
        }
        group.post("accounts/:id/users") { request, context -> Response in
            try await self.handle(request, refusals: refusals) {
                let accountID = try context.parameters.require("id")
                let body = try await Self.decode(UserRequest.self, from: request)
                let user = try await directory.createUser(
                    accountID: accountID, name: body.name, email: body.email, secret: body.secret)
                return try Self.json(user, status: .created)
            }
        }
        // The account is `:id` as in every route under accounts/ (the router requires one name per level).
        group.post("accounts/:id/templates/:template/tab") { request, context -> Response in
            try await self.handle(request, refusals: refusals) {
                let accountID = try context.parameters.require("id")
                let templateID = try context.parameters.require("template")
                let body = try await Self.decode(TabEdit.self, from: request)
                let reference: TabReference
                switch (body.tabId, body.index) {
                case (let id?, nil): reference = .tabId(id)
                case (nil, let position?): reference = .index(position)
                default: throw FleetError(.invalidRequest, "give exactly one of tabId or index")
                }
                let catalog = TemplateCatalog(storage: directory.storage, auth: AuthService(storage: directory.storage))
                let result = try await catalog.editTab(
                    accountID: accountID, templateID: templateID, tab: reference,
                    change: TabChange(value: body.value, label: body.label, pageNumber: body.page, x: body.x, y: body.y))
                return try Self.json(result.summary, status: .ok)
            }
        }
        group.get("accounts/:id/return-origins") { request, context -> Response in
            try await self.handle(request, refusals: refusals) {
                let accountID = try context.parameters.require("id")
                guard try await directory.account(id: accountID) != nil else { throw FleetError(.notFound, "no account \"\(accountID)\"") }
                let origins = try await ReturnOrigins(storage: directory.storage).list(accountID: accountID)
                return try Self.json(ReturnOriginsList(accountID: accountID, origins: origins), status: .ok)
            }
        }
        group.post("accounts/:id/return-origins") { request, context -> Response in
            try await self.handle(request, refusals: refusals) {
                let accountID = try context.parameters.require("id")
                let body = try await Self.decode(ReturnOriginsChange.self, from: request)
                let origins = ReturnOrigins(storage: directory.storage)
                _ = try await origins.add(accountID: accountID, body.add ?? [])
                let list = try await origins.remove(accountID: accountID, body.remove ?? [])
                return try Self.json(ReturnOriginsList(accountID: accountID, origins: list), status: .ok)
            }
        }
        group.post("devices/:id/revoke") { request, context -> Response in
            try await self.handle(request, refusals: refusals) {
                let deviceID = try context.parameters.require("id")
                let devices = DeviceRegistry(storage: directory.storage, auth: AuthService(storage: directory.storage))
                let account = request.uri.queryParameters.get("account")
                guard try await devices.revoke(deviceID: deviceID, accountID: account) else {
                    throw FleetError(.notFound, "no device \"\(deviceID)\" is enrolled")
                }
                return try Self.json(RevokedDevice(deviceID: deviceID, revoked: true), status: .ok)
            }
        }
        group.post("seed-demo") { request, _ -> Response in
            try await self.handle(request, refusals: refusals) {
                let (account, users) = try await directory.seedDemo()
                return try Self.json(SeededDemo(account: account, users: users), status: .ok)
            }
        }
    }

    /// Checks the bearer token, runs `body`, and turns ``FleetError``s into JSON refusals.
    func handle(_ request: Request, refusals: HTTPRefusals? = nil, _ body: () async throws -> Response) async throws -> Response {
        guard authorized(request.headers[.authorization]) else {
            refusals?.note(.adminToken)
            var response = try Self.json(
                Failure(code: FleetErrorCode.unauthenticated.rawValue, message: "admin requests need Authorization: Bearer <admin token>"),
                status: .unauthorized)
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        do {
            return try await body()
        } catch let error as FleetError {
            if error.code == .invalidRequest || error.code == .invalidBody { refusals?.note(.adminBody) }
            let status: HTTPResponse.Status =
                switch error.code {
                case .notFound: .notFound
                case .alreadyExists: .conflict
                case .invalidRequest, .invalidBody: .badRequest
                default: .internalServerError
                }
            return try Self.json(Failure(code: error.code.rawValue, message: error.message), status: status)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            // An over-long body answers 413 with the JSON refusal every other refusal has.
            refusals?.note(.adminBody)
            return try Self.json(
                Failure(code: FleetErrorCode.messageTooLarge.rawValue, message: "the body is over \(Self.maxBodyBytes) bytes"),
                status: .contentTooLarge)
        } catch {
            // A full or failing disk: retryable, and said so (anything else stays a 500).
            guard let refusal = StoreFaultKind.of(error)?.refusal else { throw error }
            return try Self.json(Failure(code: refusal.code.rawValue, message: refusal.message), status: .serviceUnavailable)
        }
    }

    /// Compares the presented token with the configured one in time independent of where they differ.
    func authorized(_ header: String?) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let presented = Array(header.dropFirst("Bearer ".count).utf8)
        let expected = Array(token.utf8)
        guard presented.count == expected.count else { return false }
        return zip(presented, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// Reads at most ``maxBodyBytes`` (hummingbird answers `413` beyond) and decodes JSON.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        let buffer = try await request.body.collect(upTo: maxBodyBytes)
        return try decode(T.self, from: Data(buffer.readableBytesView))
    }

    /// Decodes a body already read; a refusal is a ``FleetError`` `invalid_request` (400).
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(FleetError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw FleetError(.invalidRequest, "the body is not the expected JSON: \(error)")
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status) throws -> Response {
        var response = try CoordinatorHTTPServer.json(value)
        response.status = status
        return response
    }
}
