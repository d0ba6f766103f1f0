import Envelopes
import FleetProtocol
import Foundation
import SyncContract

/// An envelope's documents as DocuSign serves them: each with every signature and tab value drawn
/// on its pages, all of them in one PDF (`combined`, with the certificate of completion after them
/// unless asked not to), and the certificate alone (docs/rest-api.md, "Completed documents").
///
/// The drawing is a stamp PDF of SignFleet's own (``DocumentStamp``) laid over the documents by
/// `qpdf --overlay` (Debian's `qpdf`), run as a child process (`PDFToolChild`): the documents
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
        var maxOutputBytes = 128 << 20
        /// After this the child is killed.
        var timeout: Duration = .seconds(30)
        /// qpdf runs at once, shared fairly between accounts; more wait their turn.
        var concurrentRuns = 2
        /// Each qpdf run's address space (`PDFToolChild`).
        var maxMemoryBytes = PDFToolChild.defaultMemoryLimit
    }

    /// The `qpdf` executable: `SIGNFLEET_QPDF` when set, else Debian's path.
    var executable = ProcessInfo.processInfo.environment["SIGNFLEET_QPDF"] ?? "/usr/bin/qpdf"
    var limits = Limits()
    var clock: any FleetClock = ContinuousClock()
    /// Shared by every copy of this value: the bound on qpdf runs at once.
    let slots: ToolSlots

    init(limits: Limits = Limits()) {
        self.limits = limits
        slots = ToolSlots(capacity: limits.concurrentRuns)
    }

    /// A document of the envelope: its id (what tabs name) and bytes.
    typealias Document = (id: String, pdf: Data)

    /// One document with its tabs drawn; `account` shares the qpdf runs fairly.
    func document(_ document: Document, fill: EnvelopeFill, account: String = "") async throws(Failure) -> Data {
        guard let stamp = try DocumentStamp.pages(for: document.id, geometry: geometry(document.pdf), fill: fill) else {
            return document.pdf
        }
        // The stamp's pages go on the document's first pages, as many as there are: a page
        // tree qpdf counts otherwise (a page listed twice) cannot make qpdf refuse the overlay.
        return try await qpdf(inputs: [document.pdf, PDFWriter.document(pages: stamp)], account: account) { paths in
            Self.options + [paths[0], "--overlay", paths[1], "--", "-"]
        }
    }

    /// Every document in envelope order with its tabs drawn, then `certificate` when given. Each
    /// document is drawn on by itself first, so one document's page count (as qpdf reads it)
    /// never shifts another's ink.
    func combined(_ documents: [Document], fill: EnvelopeFill, certificate: Data?, account: String = "") async throws(Failure) -> Data {
        if documents.count == 1, let document = documents.first {
            guard let certificate else { return try await self.document(document, fill: fill, account: account) }
            if let joined = try await drawnAndJoined(document, fill: fill, certificate: certificate, account: account) { return joined }
        }
        var inputs: [Data] = []
        for document in documents { inputs.append(try await self.document(document, fill: fill, account: account)) }
        if let certificate { inputs.append(certificate) }
        return try await qpdf(inputs: inputs, account: account) { paths in
            Self.options + ["--empty", "--pages"] + paths + ["--", "-"]
        }
    }

    /// One document drawn on and joined with the certificate in one qpdf run (the overlay's pages
    /// cover the document's, `--to=1-N`). Kept only when the result has exactly the document's
    /// pages as this process counts them plus the certificate's: a page tree qpdf counts otherwise
    /// could have put ink on the wrong page, and the caller then takes two runs. Nil then, or when
    /// nothing is drawn.
    func drawnAndJoined(_ document: Document, fill: EnvelopeFill, certificate: Data, account: String) async throws(Failure) -> Data? {
        let pages = try geometry(document.pdf)
        guard let stamp = DocumentStamp.pages(for: document.id, geometry: pages, fill: fill) else { return nil }
        let certificatePages = try geometry(certificate).count
        let count = stamp.count
        let joined = try await qpdf(inputs: [document.pdf, certificate, PDFWriter.document(pages: stamp)], account: account) { paths in
            Self.options + ["--empty", "--pages", paths[0], paths[1], "--", "--overlay", paths[2], "--to=1-\(count)", "--", "-"]
        }
        return (try? PDFInspector().pageGeometry(joined).count) == count + certificatePages ? joined : nil
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

    func qpdf(inputs: [Data], account: String, arguments: @escaping @Sendable ([String]) -> [String]) async throws(Failure) -> Data {
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw .missing(executable) }
        await slots.acquire(account: account)
        let outcome = await PDFToolChild.run(
            executable, arguments: arguments, pdfs: inputs, outputLimit: limits.maxOutputBytes, timeout: limits.timeout, clock: clock,
            memoryLimit: limits.maxMemoryBytes)
        await slots.release(account: account)
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

/// Runs of a child tool at once, shared fairly between accounts (``FairRenderSlots``).
actor ToolSlots {
    private var slots: FairRenderSlots

    init(capacity: Int) { slots = FairRenderSlots(capacity: capacity) }

    func acquire(account: String) async {
        if slots.tryAcquire(account: account) { return }
        await withCheckedContinuation { slots.enqueue($0, account: account) }
    }

    func release(account: String) {
        slots.release(account: account)?.resume()
    }
}
