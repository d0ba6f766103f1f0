import Envelopes
import Foundation
import Hummingbird

/// Changing a draft's recipients and tab values over REST (docs/rest-api.md, "Editing a draft"):
/// `PUT …/recipients` and `PUT …/recipients/{recipientId}/tabs`. A draft is its definition JSON, so
/// an edit rewrites that JSON and checks it in full as sending it would; a sent envelope's
/// recipients and tabs are in the payload its sender signed and change only by signing.
extension RESTRoutes {
    static let recipientGroups = ["signers", "inPersonSigners", "carbonCopies", "certifiedDeliveries"]
    static let editableRecipientFields = ["name", "email", "clientUserId", "routingOrder", "hostName", "hostEmail", "signerName", "signerEmail"]
    static let tabGroups = [
        "signHereTabs", "initialHereTabs", "dateSignedTabs", "fullNameTabs", "textTabs", "checkboxTabs", "companyTabs", "titleTabs",
    ]
    static let editableTabFields = ["value", "selected", "locked", "tabLabel", "name"]

    func registerDraftEdits(on accounts: RouterGroup<BasicRequestContext>) {
        let routes = self
        accounts.put("envelopes/:envelopeId/recipients") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("envelopeId") ?? ""
                let changes = try routes.object(try await routes.body(of: request, upTo: Self.maxBodyBytes))
                var changed: [String] = []
                try await routes.editDraft(id, account: account.id) { definition in
                    changed = try Self.updateRecipients(&definition, with: changes)
                }
                return REST.RecipientsUpdateSummary(recipientUpdateResults: changed.map { .init(recipientId: $0) })
            }
        }
        accounts.put("envelopes/:envelopeId/recipients/:recipientId/tabs") { request, context in
            await routes.answer {
                let account = try await routes.account(request, context)
                let id = context.parameters.get("envelopeId") ?? "", recipientID = context.parameters.get("recipientId") ?? ""
                let changes = try routes.object(try await routes.body(of: request, upTo: Self.maxBodyBytes))
                try await routes.editDraft(id, account: account.id) { definition in
                    try Self.updateTabs(&definition, recipientID: recipientID, with: changes)
                }
                return try await routes.tabs(envelopeID: id, recipientID: recipientID, account: account.id)
            }
        }
    }

    /// A JSON object body.
    func object(_ body: Data) throws -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            throw Failure.badBody("the body is not a JSON object")
        }
        return object
    }

    /// Applies `change` to a draft's definition, checks the result as sending would, and keeps it.
    func editDraft(_ id: String, account: String, _ change: (inout [String: Any]) throws -> Void) async throws {
        guard let draft = try await store.draft(id: id, accountID: account) else {
            if try await store.envelope(id: id, accountID: account) != nil {
                throw Failure.badBody(
                    "envelope \(id) is sent: its recipients and tabs are in the payload its sender signed and change only by signing (correcting a sent envelope is not served)")
            }
            throw Failure.noEnvelope
        }
        var definition = try object(draft.definition)
        try change(&definition)
        guard let json = try? JSONSerialization.data(withJSONObject: definition) else { throw Failure.badBody("the draft cannot be written back") }
        let edited = try decode(REST.EnvelopeDefinition.self, from: json)
        _ = try await envelope(from: edited, transactionID: draft.transactionID, at: auth.now(), account: account)
        guard try await store.deleteDraft(id: id, accountID: account) else { throw Failure.badBody("envelope \(id) is being sent by another request") }
        var replaced = draft
        replaced.definition = json
        do {
            try await store.insertDraft(replaced)
        } catch {
            try? await store.insertDraft(draft)  // never lose the draft: the old one goes back
            throw error
        }
    }

    /// Sets the given fields of each recipient named by `recipientId` in `changes`' groups.
    static func updateRecipients(_ definition: inout [String: Any], with changes: [String: Any]) throws -> [String] {
        var recipients = definition["recipients"] as? [String: Any] ?? [:]
        var changed: [String] = []
        for group in recipientGroups {
            for given in changes[group] as? [[String: Any]] ?? [] {
                guard let id = given["recipientId"].map({ "\($0)" }), !id.isEmpty else { throw Failure.badBody("\(group): a recipient without recipientId") }
                var found = false
                for candidate in recipientGroups {
                    var list = recipients[candidate] as? [[String: Any]] ?? []
                    guard let index = list.firstIndex(where: { "\($0["recipientId"] ?? "")" == id }) else { continue }
                    for field in editableRecipientFields { if let value = given[field] { list[index][field] = value } }
                    recipients[candidate] = list
                    found = true
                }
                guard found else { throw Failure.unknownRecipient("No recipient \(id) in the draft; adding recipients is not served.") }
                changed.append(id)
            }
        }
        for group in changes.keys where !recipientGroups.contains(group) && group != "recipientCount" {
            throw Failure.unsupported("\(group) cannot be updated; \(recipientGroups.joined(separator: ", ")) can")
        }
        definition["recipients"] = recipients
        return changed
    }

    /// Sets the given fields of one recipient's tabs, each named by `tabId`.
    static func updateTabs(_ definition: inout [String: Any], recipientID: String, with changes: [String: Any]) throws {
        var recipients = definition["recipients"] as? [String: Any] ?? [:]
        guard let group = recipientGroups.first(where: { group in
            (recipients[group] as? [[String: Any]] ?? []).contains { "\($0["recipientId"] ?? "")" == recipientID }
        }), var list = recipients[group] as? [[String: Any]], let index = list.firstIndex(where: { "\($0["recipientId"] ?? "")" == recipientID })
        else { throw Failure.unknownRecipient("No recipient \(recipientID) in the draft.") }
        var tabs = list[index]["tabs"] as? [String: Any] ?? [:]
        for kind in changes.keys {
            guard tabGroups.contains(kind) else { throw Failure.unsupported("\(kind) cannot be updated; \(tabGroups.joined(separator: ", ")) can") }
            for given in changes[kind] as? [[String: Any]] ?? [] {
                // By tabId; a draft's tab given without one is found by its tabLabel (one tab must have it).
                let key = given["tabId"] != nil ? "tabId" : "tabLabel"
                guard let wanted = given[key].map({ "\($0)" }), !wanted.isEmpty else { throw Failure.badBody("\(kind): a tab without tabId or tabLabel") }
                var existing = tabs[kind] as? [[String: Any]] ?? []
                let matches = existing.indices.filter { "\(existing[$0][key] ?? "")" == wanted }
                guard matches.count == 1, let position = matches.first else {
                    throw Failure.badBody("recipient \(recipientID) has \(matches.count) \(kind) tabs with \(key) \"\(wanted)\"; name exactly one")
                }
                for field in editableTabFields where field != key { if let value = given[field] { existing[position][field] = value } }
                tabs[kind] = existing
            }
        }
        list[index]["tabs"] = tabs
        recipients[group] = list
        definition["recipients"] = recipients
    }
}

extension REST {
    /// `PUT …/recipients`'s answer.
    struct RecipientsUpdateSummary: Codable, Sendable, Hashable {
        struct Result: Codable, Sendable, Hashable {
            var recipientId: String
        }
        var recipientUpdateResults: [Result]
    }
}
