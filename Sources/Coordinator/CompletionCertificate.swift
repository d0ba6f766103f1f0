import Crypto
import Envelopes
import Foundation
import SyncContract

/// An envelope's certificate of completion as a PDF (docs/rest-api.md, "Completed documents"):
/// the envelope, its documents with their SHA-256, and each recipient with when they were sent the
/// envelope and when their status last changed, where they signed (the device and its enrolled
/// key's fingerprint, or the captive signing page) and the SHA-256 of each signature record.
/// US Letter pages of Helvetica text, as many as it takes.
struct CompletionCertificate {
    struct Line: Equatable {
        var text: String
        var bold = false
        var indent = 0.0
    }

    var aggregate: EnvelopeAggregate
    var payload: SyncPayload
    var fill: EnvelopeFill
    /// The enrolled Ed25519 public key of the device that composed the envelope, when it is known.
    var deviceKey: Data?

    var lines: [Line] {
        let envelope = aggregate.envelope
        var out: [Line] = [
            Line(text: "Certificate of Completion", bold: true),
            Line(text: ""),
            Line(text: "Envelope \(envelope.id)"),
            Line(text: "Subject: \(payload.emailSubject.isEmpty ? payload.name : payload.emailSubject)"),
            Line(text: "Status: \(envelope.status)\(envelope.voidReason.map { " (\($0))" } ?? "")"),
            Line(text: "Composed on device \(envelope.deviceID) at \(REST.time(Self.date(nanos: payload.createdAtNanos)))"),
            Line(text: "Sent (received by the server) at \(REST.time(envelope.createdAt))"),
            Line(text: ""),
            Line(text: "Documents", bold: true),
        ]
        for document in payload.documents {
            out.append(Line(text: "\(document.documentId): \(document.name), \(document.pageCount) page(s)", indent: 12))
            out.append(Line(text: "SHA-256 \(Self.hex(document.sha256))", indent: 24))
        }
        out.append(Line(text: ""))
        out.append(Line(text: "Recipients", bold: true))
        let given = Dictionary(payload.recipients.map { ($0.recipientId, $0) }, uniquingKeysWith: { first, _ in first })
        let signedByRecipient = Dictionary(grouping: fill.entries.filter(\.isSigned), by: \.tab.recipientId)
        for recipient in aggregate.recipients {
            let email = given[recipient.recipientID]?.email.map { " <\($0)>" } ?? ""
            out.append(Line(text: "\(recipient.recipientID): \(recipient.name)\(email), \(recipient.type), routing order \(recipient.routingOrder)", indent: 12))
            out.append(Line(text: "Sent \(REST.time(envelope.createdAt))", indent: 24))
            let when = recipient.statusChangedAt.map { " at \(REST.time($0))" } ?? ""
            out.append(Line(text: "Status \(recipient.status)\(when)\(recipient.declineReason.map { ", reason: \($0)" } ?? "")", indent: 24))
            for entry in signedByRecipient[recipient.recipientID] ?? [] {
                let tab = entry.tab
                let place: String
                switch entry.source {
                case .device(let id):
                    place = "on device \(id)" + (deviceKey.map { ", enrolled key SHA-256 \(Self.hex(Array(SHA256.hash(data: $0))))" } ?? "")
                case .captive(let at): place = "on the captive signing page at \(REST.time(at))"
                case .none: place = "(source unknown)"
                }
                out.append(Line(text: "\(tab.type.rawValue) \(tab.tabId ?? "") on \(tab.documentId) page \(tab.pageNumber), signed \(place)", indent: 24))
                if let record = entry.signature {
                    out.append(Line(text: "signature record SHA-256 \(Self.hex(Array(SHA256.hash(data: record))))", indent: 36))
                } else {
                    out.append(Line(text: "typed signature: \(entry.tab.value ?? "")", indent: 36))
                }
            }
        }
        return out
    }

    /// The certificate's pages.
    var pages: [PDFWriter.Page] {
        let (width, height, margin, leading) = (612.0, 792.0, 54.0, 13.0)
        let perPage = Int((height - 2 * margin) / leading)
        let all = lines.flatMap { Self.wrap($0, width: width - 2 * margin) }
        return stride(from: 0, to: max(all.count, 1), by: perPage).map { start in
            var content = "q 0 0 0 rg BT\n"
            for (row, line) in all[start..<min(start + perPage, all.count)].enumerated() {
                let y = height - margin - Double(row + 1) * leading
                content += "/\(line.bold ? "F2" : "F1") \(line.bold ? 12 : 9) Tf 1 0 0 1 \(PDFWriter.number(margin + line.indent)) \(PDFWriter.number(y)) Tm \(PDFWriter.text(line.text)) Tj\n"
            }
            return PDFWriter.Page(width: width, height: height, content: content + "ET Q\n")
        }
    }

    var pdf: Data { PDFWriter.document(pages: pages, title: "Certificate of Completion \(aggregate.envelope.id)") }

    /// A line broken at spaces (or anywhere, for one long word) to fit `width` at its font size;
    /// at most 50 lines of one (the rest of a hostile name is dropped).
    static func wrap(_ line: Line, width: Double) -> [Line] {
        let size = line.bold ? 12.0 : 9.0
        let room = width - line.indent
        var out: [Line] = []
        var current = "", currentWidth = 0.0
        var lastSpace: String.Index?
        for character in line.text {
            let step = PDFWriter.helveticaWidth(String(character), size: size)
            if currentWidth + step > room, !current.isEmpty {
                guard out.count < 49 else { break }
                if let space = lastSpace {
                    out.append(Line(text: String(current[..<space]), bold: line.bold, indent: line.indent))
                    current = String(current[current.index(after: space)...])
                } else {
                    out.append(Line(text: current, bold: line.bold, indent: line.indent))
                    current = ""
                }
                currentWidth = PDFWriter.helveticaWidth(current, size: size)
                lastSpace = nil
            }
            if character == " " { lastSpace = current.endIndex }
            current.append(character)
            currentWidth += step
        }
        out.append(Line(text: current, bold: line.bold, indent: line.indent))
        return out
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func date(nanos: Int64) -> Date { Date(timeIntervalSince1970: Double(nanos) / 1e9) }
}
