import Foundation
import MultipartKit
import NIOCore

/// An envelope or template definition sent as `multipart/form-data` (or `multipart/mixed`) with
/// its documents as binary parts, DocuSign's alternative to base64 in JSON (docs/rest-api.md,
/// "Documents as binary parts"): the first part is the JSON definition, each later part one
/// document's bytes, named by `documentid=` in its `Content-Disposition`. The parts are folded
/// back into the definition as `documentBase64`, so everything after reads one shape.
enum RESTMultipart {
    /// At most this many parts: the definition and one per document.
    static let maxParts = 1 + REST.EnvelopeDefinition.maxDocuments

    struct Part {
        var headers: [String: String] = [:]
        var body: [UInt8] = []
    }

    /// The JSON definition with every binary part folded in as its document's `documentBase64`.
    static func definition(from body: Data, contentType: String) throws(RESTRoutes.Failure) -> Data {
        guard let boundary = parameter("boundary", in: contentType), !boundary.isEmpty, boundary.utf8.count <= 200 else {
            throw .badBody("a multipart body needs a boundary in its Content-Type")
        }
        let parts = try split(body, boundary: boundary)
        guard let first = parts.first else { throw .badBody("the multipart body has no parts") }
        let firstType = first.headers["content-type"]?.lowercased() ?? "application/json"
        guard firstType.hasPrefix("application/json") else {
            throw .badBody("the first part of a multipart body must be the JSON definition (application/json); it is \(firstType)")
        }
        guard var definition = (try? JSONSerialization.jsonObject(with: Data(first.body))) as? [String: Any] else {
            throw .badBody("the first part of the multipart body is not a JSON object")
        }
        var documents = definition["documents"] as? [[String: Any]] ?? []
        var given = Set<String>()
        for (index, part) in parts.dropFirst().enumerated() {
            let disposition = part.headers["content-disposition"] ?? ""
            guard let id = parameter("documentid", in: disposition), !id.isEmpty else {
                throw .badBody("part \(index + 2) of the multipart body names no document (Content-Disposition: file; filename=\"…\"; documentid=N)")
            }
            guard given.insert(id).inserted else { throw .badBody("document \(id) is given by two parts") }
            guard let position = documents.firstIndex(where: { "\($0["documentId"] ?? "")" == id }) else {
                throw .badBody("part \(index + 2) is document \(id), which the definition's documents do not list")
            }
            documents[position]["documentBase64"] = Data(part.body).base64EncodedString()
        }
        definition["documents"] = documents
        guard let json = try? JSONSerialization.data(withJSONObject: definition) else { throw .badBody("the definition cannot be read back") }
        return json
    }

    /// The parts of a multipart body, at most ``maxParts``, each part's headers by lower-cased name.
    static func split(_ body: Data, boundary: String) throws(RESTRoutes.Failure) -> [Part] {
        let parser = MultipartParser(boundary: boundary)
        var parts: [Part] = []
        var current = Part()
        var tooMany = false
        parser.onHeader = { name, value in current.headers[name.lowercased()] = value }
        parser.onBody = { buffer in current.body.append(contentsOf: buffer.readableBytesView) }
        parser.onPartComplete = {
            if parts.count < maxParts { parts.append(current) } else { tooMany = true }
            current = Part()
        }
        do {
            try parser.execute(ByteBuffer(bytes: body))
        } catch {
            throw .badBody("the multipart body cannot be read: \(error)")
        }
        guard !tooMany else { throw .badBody("a multipart body holds at most \(maxParts) parts") }
        return parts
    }

    /// A parameter of a header value (`name=value` or `name="value"`, name case-insensitive).
    static func parameter(_ name: String, in header: String) -> String? {
        for piece in header.split(separator: ";").dropFirst() {
            let pair = piece.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == name.lowercased() else { continue }
            var value = pair[1]
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return value
        }
        return nil
    }
}
