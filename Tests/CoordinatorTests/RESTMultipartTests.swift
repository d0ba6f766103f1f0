import Envelopes
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Envelope and template definitions with their documents as binary parts (docs/rest-api.md,
/// "Documents as binary parts"), over a real coordinator's HTTP listener.
@Suite struct RESTMultipartTests {
    static func post(_ rig: CaptiveRig, _ path: String, parts: [(headers: [String], body: Data)], contentType: String = "multipart/form-data")
        async throws -> (status: Int, json: [String: Any])
    {
        let boundary = "sf-\(UUID().uuidString)"
        var body = Data()
        for part in parts {
            body.append(Data("--\(boundary)\r\n".utf8))
            for header in part.headers { body.append(Data("\(header)\r\n".utf8)) }
            body.append(Data("\r\n".utf8))
            body.append(part.body)
            body.append(Data("\r\n".utf8))
        }
        body.append(Data("--\(boundary)--\r\n".utf8))
        var request = URLRequest(url: try #require(URL(string: "http://\(rig.http)/restapi/v2.1/accounts/acme\(path)")))
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("\(contentType); boundary=\"\(boundary)\"", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(rig.token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }

    static let definition = #"""
        {"emailSubject": "Binary parts", "status": "sent",
         "documents": [{"documentId": "1", "name": "One"}, {"documentId": "2", "name": "Two"}],
         "recipients": {"signers": [{"recipientId": "1", "name": "Bea", "email": "bea@example.com", "clientUserId": "cu-1",
           "tabs": {"signHereTabs": [{"documentId": "2", "pageNumber": "2", "xPosition": "100", "yPosition": "500"}]}}]}}
        """#

    @Test(.timeLimit(.minutes(2))) func documentsAsBinaryPartsBecomeTheEnvelopesDocuments() async throws {
        let rig = try await CaptiveRig()
        let one = SamplePDF.make(pages: 1, title: "One"), two = SamplePDF.make(pages: 2, title: "Two")
        let json = (headers: ["Content-Type: application/json", "Content-Disposition: form-data"], body: Data(Self.definition.utf8))
        func document(_ id: String, _ pdf: Data) -> (headers: [String], body: Data) {
            (["Content-Type: application/pdf", "Content-Disposition: file; filename=\"\(id).pdf\"; documentid=\(id)"], pdf)
        }
        let created = try await Self.post(rig, "/envelopes", parts: [json, document("2", two), document("1", one)])
        #expect(created.status == 201, "\(created.json)")
        let id = try #require(created.json["envelopeId"] as? String)
        let stored = try #require(try await rig.services.envelopes.store.envelope(id: id, accountID: "acme"))
        let payload = try CaptiveSigningService.payload(of: stored.envelope)
        #expect(payload.documents.map(\.pdf) == [one, two], "each part's bytes, in the definition's order")
        let mixed = try await Self.post(rig, "/envelopes", parts: [json, document("1", one), document("2", two)], contentType: "multipart/mixed")
        #expect(mixed.status == 201, "multipart/mixed too: \(mixed.json)")

        // Refusals name what is wrong.
        for (parts, expected) in [
            ([json, document("3", one)], "which the definition's documents do not list"),
            ([json, (["Content-Type: application/pdf", "Content-Disposition: file; filename=\"x.pdf\""], one)], "names no document"),
            ([document("1", one), json], "must be the JSON definition"),
            ([json, document("1", one), document("1", one)], "given by two parts"),
            ([json, document("1", Data("not a pdf".utf8)), document("2", two)], "PDF"),
            (Array(repeating: json, count: 60), "at most 51 parts"),
        ] as [([(headers: [String], body: Data)], String)] {
            let refused = try await Self.post(rig, "/envelopes", parts: parts)
            #expect(refused.status == 400 && "\(refused.json["message"] ?? "")".contains(expected), "\(expected): \(refused.json)")
        }
        // A template takes binary parts the same way.
        let template = #"{"name": "Binary template", "documents": [{"documentId": "1", "name": "One"}], "recipients": {"signers": [{"recipientId": "1", "roleName": "Client", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "1", "xPosition": "100", "yPosition": "500"}]}}]}}"#
        let madeTemplate = try await Self.post(
            rig, "/templates", parts: [(["Content-Type: application/json"], Data(template.utf8)), document("1", one)])
        #expect(madeTemplate.status == 201 && madeTemplate.json["name"] as? String == "Binary template", "\(madeTemplate.json)")
        await rig.tearDown()
    }
}
