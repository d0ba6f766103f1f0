import SyncContract
import Envelopes
import Foundation
import Hummingbird
import SignatureCapture

/// The signing page's form post (`application/x-www-form-urlencoded`), parsed with bounds.
///
/// Fields: `csrf`; `action` (`finish`, `later`, `decline`); `reason` (decline); `tab-<index>`
/// (text-like tabs; `on` for a ticked checkbox); `radio-<group>` (the chosen radio tab's index);
/// `sig-<index>` (a signature as JSON: `{"pointerType", "width", "height", "points": [[x, y,
/// pressure, timeMs, stroke], …]}`).
struct SigningForm: Sendable {
    /// A post the page must show again with what is wrong.
    struct Invalid: Error {
        var message: String
    }

    /// The most fields one post may carry.
    static let maxFields = 1000
    /// The longest text value.
    static let maxTextLength = 10_000
    /// The longest typed signature (a name), in characters.
    static let maxTypedLength = 100

    var fields: [String: String]

    /// Parses a url-encoded body: flat ASCII fields with `FormFields`, anything else with
    /// Hummingbird's form decoder, which reads the same fields the same way (Foundation's
    /// `removingPercentEncoding` on Linux cost about a tenth of a captive ceremony's CPU for the
    /// percent-encoded signature JSON, loadtests/NOTES.md).
    /// - Throws: ``Invalid`` for too many fields, a repeated field, a field name with brackets,
    ///   or bytes that are not valid percent-encoding.
    init(urlEncoded body: String) throws {
        // Bounded before decoding: fields are separated by `&`.
        let separators = body.utf8.reduce(0) { $1 == UInt8(ascii: "&") ? $0 + 1 : $0 }
        guard separators < Self.maxFields else { throw Invalid(message: "the form has more than \(Self.maxFields) fields") }
        guard !body.isEmpty else {
            self.fields = [:]
            return
        }
        do {
            // Flat ASCII fields, as the page posts them, are read directly; the rest by the decoder.
            self.fields = try FormFields.parse(body) ?? URLEncodedFormDecoder().decode([String: String].self, from: body)
        } catch {
            throw Invalid(message: "the form is not valid URL-encoded data: \(error)")
        }
    }

    init(fields: [String: String]) {
        self.fields = fields
    }

    /// Checks the recipient's tabs against the post and returns what to store.
    /// - Throws: ``Invalid`` naming the first tab that is missing or malformed.
    func tabValues(payload: SyncPayload, recipient: PayloadRecipient, envelopeID: String, at: Date) throws -> [CaptiveTabRecord] {
        var records: [CaptiveTabRecord] = []
        let started = CaptureTimestamp(nanosecondsSinceEpoch: Int64((at.timeIntervalSince1970 * 1e9).rounded()))
        for (index, tab) in payload.tabs.enumerated() where tab.recipientId == recipient.recipientId {
            let label = tab.name ?? tab.tabId ?? "\(tab.type.rawValue) \(index)"
            var record = CaptiveTabRecord(
                envelopeID: envelopeID, tabIndex: index, recipientID: recipient.recipientId, type: tab.type.rawValue, capturedAt: at)
            switch tab.type {
            case .signHere, .initialHere:
                guard let json = fields["sig-\(index)"], !json.isEmpty else {
                    if tab.optional { continue }
                    throw Invalid(message: "sign the field \"\(label)\" before finishing")
                }
                if let typed = try Self.typedSignature(json, label: label) {
                    // Adopted by typing the name (the keyboard alternative to the pad): no strokes, so no ISO record.
                    record.value = typed
                    record.svg = Self.typedSVG(typed)
                    record.pointerType = "typed"
                    record.pointCount = 0
                    records.append(record)
                    continue
                }
                let drawn = try Self.pointerSignature(json, label: label)
                let captured: CapturedSignature
                do {
                    captured = try CapturedSignature(
                        pointer: drawn, fieldID: tab.tabId ?? "tab-\(index)", signerID: recipient.name, startedAt: started)
                } catch let error as CaptureError {
                    throw Invalid(message: "the signature for \"\(label)\" is not usable: \(error.message)")
                }
                guard captured.samples.count >= 2 else {
                    throw Invalid(message: "the signature for \"\(label)\" is a single dot; draw your signature")
                }
                record.isoRecord = Data(captured.isoRecord)
                record.svg = captured.svg()
                record.pointerType = drawn.pointerType
                record.pointCount = drawn.points.count
            case .checkbox:
                record.selected = tab.locked ? tab.selected : fields["tab-\(index)"] == "on"
            case .radio:
                record.selected = tab.locked ? tab.selected : fields["radio-\(tab.groupName ?? "\(index)")"] == "\(index)"
                record.value = tab.value
            case .fullName:
                record.value = recipient.name
            case .dateSigned:
                record.value = ISO8601DateFormatter().string(from: at)
            case .formula:
                record.value = tab.value
            case .text, .company, .title:
                let value = tab.locked ? (tab.value ?? "") : (fields["tab-\(index)"] ?? "")
                guard value.count <= Self.maxTextLength else {
                    throw Invalid(message: "\"\(label)\" is longer than \(Self.maxTextLength) characters")
                }
                if value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, !tab.optional {
                    throw Invalid(message: "fill in \"\(label)\" before finishing")
                }
                record.value = value
            }
            records.append(record)
        }
        return records
    }

    /// The name of a typed signature (`{"typed": "Jane Doe"}`), or `nil` when the field holds a drawn one.
    static func typedSignature(_ json: String, label: String) throws -> String? {
        struct Typed: Decodable { var typed: String }
        guard json.utf8.count <= 8 * maxTypedLength + 64, let typed = try? JSONDecoder().decode(Typed.self, from: Data(json.utf8)) else {
            return nil
        }
        let name = typed.typed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.count <= maxTypedLength, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw Invalid(message: "the typed signature for \"\(label)\" must be a name of 1 to \(maxTypedLength) characters")
        }
        return name
    }

    /// A typed signature as SVG: the name in an italic serif face (escaped).
    static func typedSVG(_ name: String) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 600 200\"><text x=\"300\" y=\"110\" text-anchor=\"middle\" "
            + "font-family=\"Georgia,serif\" font-style=\"italic\" font-size=\"80\" fill=\"#0a2a8a\">\(SigningPage.escape(name))</text></svg>"
    }

    static func pointerSignature(_ json: String, label: String) throws -> PointerSignature {
        guard json.utf8.count <= 2 * 1024 * 1024 else { throw Invalid(message: "the signature for \"\(label)\" is too large") }
        let drawn: DrawingJSON.Drawing
        do {
            // The page's own shape is read directly; anything else goes through JSONDecoder.
            drawn = try DrawingJSON.parse(json) ?? JSONDecoder().decode(DrawingJSON.Drawing.self, from: Data(json.utf8))
        } catch {
            throw Invalid(message: "the signature for \"\(label)\" is not readable; draw it again")
        }
        guard drawn.points.count <= PointerSignature.maxPoints else {
            throw Invalid(message: "the signature for \"\(label)\" has more than \(PointerSignature.maxPoints) points")
        }
        var points: [PointerPoint] = []
        points.reserveCapacity(drawn.points.count)
        for point in drawn.points {
            // A range, not `abs(stroke) < 100_000`: abs(Int.min) traps, and -9.3e18 rounds to Int.min.
            guard point.count == 5, let stroke = Int(exactly: point[4].rounded()), (-99_999...99_999).contains(stroke) else {
                throw Invalid(message: "the signature for \"\(label)\" has a malformed point; draw it again")
            }
            points.append(PointerPoint(x: point[0], y: point[1], pressure: point[2], time: point[3], stroke: stroke))
        }
        let type = ["mouse", "pen", "touch"].contains(drawn.pointerType) ? drawn.pointerType : "mouse"
        return PointerSignature(pointerType: type, canvasWidth: drawn.width, canvasHeight: drawn.height, points: points)
    }
}
