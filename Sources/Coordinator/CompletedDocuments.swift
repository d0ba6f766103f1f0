import Envelopes
import FleetProtocol
import Foundation
import SyncContract

/// An envelope's documents as DocuSign serves them: each with every signature and tab value drawn
/// on its pages, all of them in one PDF (`combined`, with the certificate of completion after them
/// unless asked not to), and the certificate alone (docs/rest-api.md, "Completed documents").
///
/// The drawing is a stamp PDF of SignFleet's own (``DocumentStamp``) laid over the documents by
/// `qpdf --overlay` (Debian's `qpdf`), run as a child process (``PDFToolChild``): the documents
/// are hostile input, and qpdf reads every PDF variant (object streams, encryption with an empty
/// user password, damaged cross-references) without this process parsing more than page boxes.
/// A document with nothing drawn on it is served as the bytes the envelope holds.
struct CompletedDocuments: Sendable {
    enum Failure: Error, Sendable, CustomStringConvertible {
        case missing(String)
        case unreadable(String)
        case failed(String)
        case timedOut(Duration)

        var description: String {
            switch self {
            case .missing(let path): "the PDF tool \(path) is not installed (run scripts/install-deps.sh)"
            case .unreadable(let why): "a document's pages cannot be read: \(why)"
            case .failed(let why): "the documents could not be put together: \(why)"
            case .timedOut(let limit): "putting the documents together took longer than \(limit)"
            }
        }
    }

    struct Limits: Sendable {
        /// The largest PDF written back.
        var maxOutputBytes = 256 << 20
        /// After this the child is killed.
        var timeout: Duration = .seconds(30)
    }

    /// The `qpdf` executable: `SIGNFLEET_QPDF` when set, else Debian's path.
    var executable = ProcessInfo.processInfo.environment["SIGNFLEET_QPDF"] ?? "/usr/bin/qpdf"
    var limits = Limits()
    var clock: any FleetClock = ContinuousClock()

    /// A document of the envelope: its id (what tabs name) and bytes.
    typealias Document = (id: String, pdf: Data)

    /// One document with its tabs drawn.
    func document(_ document: Document, fill: EnvelopeFill) async throws(Failure) -> Data {
        guard let stamp = try DocumentStamp.pages(for: document.id, geometry: geometry(document.pdf), fill: fill) else {
            return document.pdf
        }
        return try await qpdf(inputs: [document.pdf, PDFWriter.document(pages: stamp)]) { paths in
            Self.options + [paths[0], "--overlay", paths[1], "--", "-"]
        }
    }

    /// Every document in envelope order with its tabs drawn, then `certificate` when given.
    func combined(_ documents: [Document], fill: EnvelopeFill, certificate: Data?) async throws(Failure) -> Data {
        var inputs = documents.map(\.pdf)
        var stamp: [PDFWriter.Page] = []
        var drawn = false
        for document in documents {
            let pages = try geometry(document.pdf)
            if let drawing = DocumentStamp.pages(for: document.id, geometry: pages, fill: fill) {
                stamp += drawing
                drawn = true
            } else {
                stamp += DocumentStamp.blank(pages)
            }
        }
        if let certificate { inputs.append(certificate) }
        let count = inputs.count
        if drawn { inputs.append(PDFWriter.document(pages: stamp)) }
        let (overlay, stampPages) = (drawn, stamp.count)
        return try await qpdf(inputs: inputs) { paths in
            // The stamp's pages cover the documents' and stop there: the certificate gets none.
            Self.options + ["--empty", "--pages"] + paths.prefix(count) + ["--"]
                + (overlay ? ["--overlay", paths[count], "--to=1-\(stampPages)", "--"] : []) + ["-"]
        }
    }

    /// Output that is the same for the same input (`--deterministic-id`), never encrypted.
    static let options = ["--warning-exit-0", "--no-warn", "--deterministic-id", "--decrypt"]

    func geometry(_ pdf: Data) throws(Failure) -> [PDFPageGeometry] {
        do {
            return try PDFInspector().pageGeometry(pdf)
        } catch {
            throw .unreadable(error.description)
        }
    }

    func qpdf(inputs: [Data], arguments: @escaping @Sendable ([String]) -> [String]) async throws(Failure) -> Data {
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw .missing(executable) }
        let outcome = await PDFToolChild.run(
            executable, arguments: arguments, pdfs: inputs, outputLimit: limits.maxOutputBytes, timeout: limits.timeout, clock: clock)
        switch outcome {
        case .output(let bytes):
            guard bytes.starts(with: Array("%PDF-".utf8)) else { throw .failed("qpdf wrote no PDF") }
            return Data(bytes)
        case .failed(let why): throw .failed(why)
        case .timedOut: throw .timedOut(limits.timeout)
        case .cancelled: throw .failed("cancelled")
        }
    }
}
