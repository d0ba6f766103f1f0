import FleetProtocol
import Foundation
import Hummingbird

extension REST {
    /// DocuSign's `connectCustomConfiguration`, as read and answered (docs/webhooks.md).
    struct ConnectConfiguration: Codable, Sendable, Hashable {
        struct EventData: Codable, Sendable, Hashable {
            var format: String?
            var version: String?
            var includeData: [String]?
        }

        /// The older form of the event lists (`envelopeEvents: [{envelopeEventStatusCode: "completed"}]`).
        struct LegacyEvent: Codable, Sendable, Hashable {
            var envelopeEventStatusCode: String?
            var recipientEventStatusCode: String?
        }

        var connectId: String?
        var name: String?
        var urlToPublishTo: String?
        var configurationType: String?
        var deliveryMode: String?
        var allowEnvelopePublish: String?
        var allUsers: String?
        var includeHMAC: String?
        var events: [String]?
        var eventData: EventData?
        var envelopeEvents: [LegacyEvent]?
        var recipientEvents: [LegacyEvent]?
        var requireMutualTls: String?
        var useSoapInterface: String?
        var signMessageWithX509Certificate: String?
        var userIds: [String]?

        enum CodingKeys: String, CodingKey {
            case connectId, name, urlToPublishTo, configurationType, deliveryMode, allowEnvelopePublish, allUsers, includeHMAC, events
            case eventData, envelopeEvents, recipientEvents, requireMutualTls, useSoapInterface, signMessageWithX509Certificate, userIds
        }

        /// What is read: the configuration's fields, and an envelope's `eventNotification`'s names
        /// for the same things (`url`, `signMessageWithX509Cert`), so one reader serves both.
        enum ReadKeys: String, CodingKey {
            case connectId, name, urlToPublishTo, configurationType, deliveryMode, allowEnvelopePublish, allUsers, includeHMAC, events
            case eventData, envelopeEvents, recipientEvents, requireMutualTls, useSoapInterface, signMessageWithX509Certificate, userIds
            case url, signMessageWithX509Cert
        }

        init(_ record: ConnectConfigurationRecord) {
            connectId = record.id
            name = record.name
            urlToPublishTo = record.url
            configurationType = "custom"
            deliveryMode = "SIM"
            allowEnvelopePublish = record.enabled ? "true" : "false"
            allUsers = "true"
            includeHMAC = record.includeHMAC ? "true" : "false"
            events = record.eventKinds.map(\.rawValue)
            eventData = EventData(format: "json", version: "restv2.1", includeData: record.includeDataList)
            requireMutualTls = "false"
            useSoapInterface = "false"
            signMessageWithX509Certificate = "false"
        }

        /// Decoded leniently: DocuSign's flags are strings, but SDK users pass booleans too.
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: ReadKeys.self)
            func text(_ key: ReadKeys) throws -> String? { try c.decodeIfPresent(RESTText.self, forKey: key)?.value }
            connectId = try text(.connectId)
            name = try text(.name)
            urlToPublishTo = try text(.urlToPublishTo) ?? text(.url)
            configurationType = try text(.configurationType)
            deliveryMode = try text(.deliveryMode)
            allowEnvelopePublish = try text(.allowEnvelopePublish)
            allUsers = try text(.allUsers)
            includeHMAC = try text(.includeHMAC)
            events = try c.decodeIfPresent([String].self, forKey: .events)
            eventData = try c.decodeIfPresent(EventData.self, forKey: .eventData)
            envelopeEvents = try c.decodeIfPresent([LegacyEvent].self, forKey: .envelopeEvents)
            recipientEvents = try c.decodeIfPresent([LegacyEvent].self, forKey: .recipientEvents)
            requireMutualTls = try text(.requireMutualTls)
            useSoapInterface = try text(.useSoapInterface)
            signMessageWithX509Certificate = try text(.signMessageWithX509Certificate) ?? text(.signMessageWithX509Cert)
            userIds = try c.decodeIfPresent([String].self, forKey: .userIds)
        }

        /// What SignFleet keeps of it, or a refusal that names the field.
        func request() throws(RESTRoutes.Failure) -> ConnectService.Request {
            func flag(_ value: String?, _ field: String, default fallback: Bool) throws(RESTRoutes.Failure) -> Bool {
                switch value?.lowercased() {
                case nil, "": return fallback
                case "true": return true
                case "false": return false
                default: throw .badBody("\(field) must be \"true\" or \"false\"; got \"\(value ?? "")\"")
                }
            }
            if try flag(useSoapInterface, "useSoapInterface", default: false) {
                throw .badBody("useSoapInterface: SOAP delivery is not supported; SignFleet's Connect posts JSON (deliveryMode SIM)")
            }
            if try flag(requireMutualTls, "requireMutualTls", default: false) {
                throw .badBody("requireMutualTls: mutual TLS is not supported; sign deliveries with HMAC (includeHMAC) instead")
            }
            if try flag(signMessageWithX509Certificate, "signMessageWithX509Certificate", default: false) {
                throw .badBody("signMessageWithX509Certificate: X.509 message signing is not supported; use includeHMAC")
            }
            if let mode = deliveryMode, !mode.isEmpty, mode.uppercased() != "SIM" {
                throw .badBody("deliveryMode \"\(mode)\" is not supported; only SIM (one message per event) is")
            }
            if let format = eventData?.format, !format.isEmpty, format.lowercased() != "json" {
                throw .badBody("eventData.format \"\(format)\" is not supported; only json is (XML is not)")
            }
            if let version = eventData?.version, !version.isEmpty, version.lowercased() != "restv2.1" {
                throw .badBody("eventData.version \"\(version)\" is not supported; only restv2.1 is")
            }
            if let type = configurationType, !type.isEmpty, type.lowercased() != "custom" {
                throw .badBody("configurationType \"\(type)\" is not supported; only custom is")
            }
            guard try flag(allUsers, "allUsers", default: true), (userIds ?? []).isEmpty else {
                throw .badBody("allUsers: only configurations for all of the account's users are supported (allUsers \"true\", no userIds)")
            }
            guard let url = urlToPublishTo, !url.isEmpty else { throw .badBody("urlToPublishTo (eventNotification: url) is required") }
            var kinds: [EnvelopeEvent.Kind] = []
            for name in events ?? [] {
                guard let kind = EnvelopeEvent.Kind(rawValue: name) else {
                    throw .badBody(
                        "events: \"\(name)\" is not an event SignFleet produces; it produces \(EnvelopeEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                kinds.append(kind)
            }
            for legacy in envelopeEvents ?? [] {
                let code = (legacy.envelopeEventStatusCode ?? "").lowercased()
                guard let kind = EnvelopeEvent.Kind(rawValue: "envelope-\(code)") else {
                    throw .badBody("envelopeEvents: envelopeEventStatusCode \"\(code)\" is not one SignFleet produces (sent, delivered, completed, declined, voided)")
                }
                kinds.append(kind)
            }
            for legacy in recipientEvents ?? [] {
                let code = (legacy.recipientEventStatusCode ?? "").lowercased()
                guard let kind = EnvelopeEvent.Kind(rawValue: "recipient-\(code)") else {
                    throw .badBody("recipientEvents: recipientEventStatusCode \"\(code)\" is not one SignFleet produces (sent, delivered, completed, declined)")
                }
                kinds.append(kind)
            }
            var unique: [EnvelopeEvent.Kind] = []
            for kind in kinds where !unique.contains(kind) { unique.append(kind) }
            return ConnectService.Request(
                name: name ?? URLComponents(string: url)?.host.flatMap { $0.isEmpty ? nil : $0 } ?? "connect", url: url, events: unique, includeData: eventData?.includeData ?? [],
                enabled: try flag(allowEnvelopePublish, "allowEnvelopePublish", default: true), includeHMAC: try flag(includeHMAC, "includeHMAC", default: false))
        }
    }

    struct ConnectConfigResults: Codable, Sendable, Hashable {
        var configurations: [ConnectConfiguration]
        var totalRecords: String
    }

    /// One delivery as DocuSign's `connectLog` shows it (a failure or a log entry).
    struct ConnectLog: Codable, Sendable, Hashable {
        var accountId: String
        var configUrl: String
        var connectId: String
        var created: String
        var envelopeId: String
        var error: String?
        var failureId: String?
        var logId: String?
        var lastTry: String?
        var retryCount: String
        var status: String
        var subject: String
    }

    /// An answer with nothing to say (`DELETE …/connect/{connectId}`).
    struct Empty: Codable, Sendable, Hashable {}

    struct ConnectLogs: Codable, Sendable, Hashable {
        var failures: [ConnectLog]?
        var logs: [ConnectLog]?
        var totalRecords: String
        var type: String
    }
}

/// The REST API's Connect routes (docs/webhooks.md): configurations, and the deliveries' logs and failures.
extension RESTRoutes {
    /// The most log or failure entries one answer lists.
    static let maxConnectLogEntries = 500

    func registerConnect(on accounts: RouterGroup<BasicRequestContext>) {
        let routes = self
        accounts.post("connect") { request, context in
            await routes.answer(status: .created) {
                let account = try await routes.account(request, context)
                let given = try await routes.decode(REST.ConnectConfiguration.self, from: request)
                let record = try await routes.connectFleet { try await routes.connect.create(try given.request(), accountID: account.id) }
                return REST.ConnectConfiguration(record)
            }
        }
        accounts.put("connect") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let given = try await routes.decode(REST.ConnectConfiguration.self, from: request)
                guard let id = given.connectId, !id.isEmpty else { throw Failure.badBody("connectId is required to update a configuration") }
                let record = try await routes.connectFleet { try await routes.connect.replace(id: id, with: try given.request(), accountID: account.id) }
                return REST.ConnectConfiguration(record)
            }
        }
        accounts.get("connect") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let all = try await routes.store.connectConfigurations(accountID: account.id).map(REST.ConnectConfiguration.init)
                return REST.ConnectConfigResults(configurations: all, totalRecords: String(all.count))
            }
        }
        accounts.get("connect/failures") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return try await routes.connectLogs(account: account.id, failures: true)
            }
        }
        accounts.get("connect/logs") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                return try await routes.connectLogs(account: account.id, failures: false)
            }
        }
        accounts.get("connect/:connectId") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("connectId") ?? ""
                guard let record = try await routes.store.connectConfiguration(id: id, accountID: account.id) else { throw Failure.noConnect(id) }
                return REST.ConnectConfigResults(configurations: [REST.ConnectConfiguration(record)], totalRecords: "1")
            }
        }
        accounts.delete("connect/:connectId") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("connectId") ?? ""
                guard try await routes.store.deleteConnectConfiguration(id: id, accountID: account.id) else { throw Failure.noConnect(id) }
                return REST.Empty()
            }
        }
    }

    /// A service call whose `not_found` is Connect's own error.
    func connectFleet<T>(_ body: () async throws -> T) async throws -> T {
        try await fleet {
            do {
                return try await body()
            } catch let error as FleetError where error.code == .notFound {
                throw Failure(status: .badRequest, code: "INVALID_CONNECT_CONFIGURATION", message: error.message)
            }
        }
    }

    func connectLogs(account: String, failures: Bool) async throws -> REST.ConnectLogs {
        let rows = try await store.connectDeliveries(accountID: account, failedOnly: failures, limit: Self.maxConnectLogEntries)
        var urls: [String: String] = [:]
        for configuration in try await store.connectConfigurations(accountID: account) { urls[configuration.id] = configuration.url }
        let entries = rows.map { row in
            REST.ConnectLog(
                accountId: row.accountID, configUrl: urls[row.configurationID] ?? "", connectId: row.configurationID,
                created: REST.time(row.recordedAt), envelopeId: row.envelopeID, error: row.lastError,
                failureId: failures ? String(row.id) : nil, logId: failures ? nil : String(row.id),
                lastTry: row.lastAttemptAt.map(REST.time),
                retryCount: String(max(0, row.attempts - 1)),
                status: row.deliveredAt != nil ? "delivered" : row.failedAt != nil ? "failed" : "pending", subject: row.event)
        }
        return failures
            ? REST.ConnectLogs(failures: entries, logs: nil, totalRecords: String(entries.count), type: "failures")
            : REST.ConnectLogs(failures: nil, logs: entries, totalRecords: String(entries.count), type: "logs")
    }
}

extension RESTRoutes.Failure {
    static func noConnect(_ id: String) -> Self {
        Self(status: .badRequest, code: "INVALID_CONNECT_CONFIGURATION", message: "No Connect configuration \"\(id)\" in this account.")
    }
}
