import Foundation
import Testing
@testable import Envelopes

@Suite("Templates")
struct TemplateTests {
    static let modified = Date(timeIntervalSince1970: 1_800_000_500)

    static func template() -> EnvelopeTemplate {
        func tab(_ type: TabType, _ role: String, label: String? = nil, group: String? = nil, value: String? = nil) -> Tab {
            Tab(type: type, documentId: "d1", recipientId: role, pageNumber: 1,
                frame: TabFrame(x: 10, y: 10, width: 20, height: 20), label: label, value: value, groupName: group)
        }
        return EnvelopeTemplate(
            templateId: "tpl-1", name: "Lease", folder: "Real estate", lastModified: modified,
            emailSubject: "Please sign the lease", emailMessage: "Thanks",
            documents: [Fixture.document()],
            roles: [
                TemplateRole(roleName: "Tenant", recipientId: "1", type: .inPersonSigner, routingOrder: 1,
                             defaultHostName: "Agent", defaultHostEmail: "agent@example.com"),
                TemplateRole(roleName: "Landlord", recipientId: "2", type: .signer, routingOrder: 2,
                             defaultName: "Lana Lord", defaultEmail: "lana@example.com"),
                TemplateRole(roleName: "Guarantor", recipientId: "3", type: .signer, routingOrder: 2),
            ],
            tabs: [
                tab(.signHere, "1"), tab(.text, "1", label: "rent"), tab(.checkbox, "1", label: "pets"),
                tab(.radio, "1", group: "term", value: "12"), tab(.radio, "1", group: "term", value: "24"),
                tab(.signHere, "2"), tab(.signHere, "3"),
            ])
    }

    @Test func composesWithAssignmentsDefaultsAndTabValues() throws {
        let envelope = try Self.template().compose(
            TemplateComposition(
                roles: ["Tenant": RoleAssignment(name: "Tom Tenant")],
                tabValues: ["rent": "1200", "pets": "Yes", "term": "24"],
                emailMessage: "Hi Tom"),
            envelopeId: "e1", createdAt: Fixture.created, transactionId: "tx")
        #expect(envelope.templateId == "tpl-1")
        #expect(envelope.name == "Lease")
        #expect(envelope.emailSubject == "Please sign the lease")
        #expect(envelope.emailMessage == "Hi Tom")
        // The guarantor had no assignment and no defaults: dropped with their tab.
        #expect(envelope.recipients.map(\.recipientId) == ["1", "2"])
        #expect(envelope.recipients[0].name == "Tom Tenant")
        #expect(envelope.recipients[0].hostEmail == "agent@example.com")
        #expect(envelope.recipients[1].email == "lana@example.com")
        #expect(envelope.tabs.count == 6)
        #expect(envelope.tabs[1].value == "1200")
        #expect(envelope.tabs[2].selected)
        #expect(!envelope.tabs[3].selected && envelope.tabs[4].selected)
        #expect(envelope.validate() == [])
    }

    @Test func unknownRolesAndLabelsAreNamed() {
        let role = #expect(throws: EnvelopeValidationError.self) {
            try Self.template().compose(TemplateComposition(roles: ["Buyer": RoleAssignment(name: "B")]))
        }
        #expect(role?.code == .unknownTemplateRole)
        #expect(role?.field == "roles[\"Buyer\"]")
        let label = #expect(throws: EnvelopeValidationError.self) {
            try Self.template().compose(TemplateComposition(roles: ["Tenant": RoleAssignment(name: "T")], tabValues: ["deposit": "1"]))
        }
        #expect(label?.code == .unknownTemplateTabLabel)
        #expect(label?.field == "tabValues[\"deposit\"]")
    }

    @Test func composedEnvelopesStillPassEveryRule() {
        // The tenant role has no default name, so leaving it out drops the only local signer;
        // a bad email given for the guarantor is reported at its recipient index.
        let error = #expect(throws: EnvelopeValidationError.self) {
            try Self.template().compose(TemplateComposition(roles: ["Guarantor": RoleAssignment(name: "G", email: "nope")]))
        }
        #expect(error?.code == .invalidEmail)
        #expect(error?.field == "recipients[1].email")
    }

    @Test func summaryAndRefreshRule() {
        let summary = Self.template().summary
        #expect(summary == TemplateSummary(templateId: "tpl-1", name: "Lease", folder: "Real estate", lastModified: Self.modified))
        #expect(summary.isNewer(thanCachedAt: Self.modified.addingTimeInterval(-1)))
        #expect(!summary.isNewer(thanCachedAt: Self.modified))
        #expect(!summary.isNewer(thanCachedAt: Self.modified.addingTimeInterval(1)))
    }
}
