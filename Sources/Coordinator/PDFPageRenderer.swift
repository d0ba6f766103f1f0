import Envelopes
import FleetProtocol
import Foundation

/// Draws one PDF page as a PNG with poppler's `pdftoppm` (Debian's `poppler-utils`), run as a
/// child process (`PDFToolChild`). Bounded by the PDF's size, the image's pixels, the output's
/// bytes and a deadline after which the child is killed.
public struct PDFPageRenderer: Sendable {
    /// Why a page was not drawn.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// No `pdftoppm` where it was looked for.
        case missing(String)
        case tooLarge(bytes: Int)
        case noSuchPage(Int)
        case timedOut(Duration)
        /// `pdftoppm` exited non-zero, was killed, or produced too much or no PNG.
        case failed(String)
        /// Something around the render that may pass (the store could not be read).
        case transient(String)

        public var description: String {
            switch self {
            case .missing(let path): "the page renderer \(path) is not installed (run scripts/install-deps.sh)"
            case .tooLarge(let bytes): "the PDF is \(bytes) bytes, over the renderer's limit"
            case .noSuchPage(let page): "the document has no page \(page)"
            case .timedOut(let limit): "drawing the page took longer than \(limit)"
            case .failed(let why): "the page could not be drawn: \(why)"
            case .transient(let why): "the page could not be drawn now: \(why)"
            }
        }
    }

    /// The bounds of one render.
    public struct Limits: Sendable, Hashable {
        /// The largest PDF handed to the renderer.
        public var maxPDFBytes = 64 << 20
        /// The longest side of an image, in pixels: a page's resolution is lowered to fit.
        public var maxSide = 4096
        /// The largest PNG accepted back.
        public var maxOutputBytes = 32 << 20
        /// After this the child is killed.
        public var timeout: Duration = .seconds(15)
        public init() {}
    }

    /// The `pdftoppm` executable.
    public var executable: String
    public var limits: Limits
    /// What ``Limits/timeout`` is measured on.
    public var clock: any FleetClock

    public init(executable: String = PDFPageRenderer.defaultExecutable, limits: Limits = Limits(), clock: any FleetClock = ContinuousClock()) {
        self.executable = executable
        self.limits = limits
        self.clock = clock
    }

    /// `SIGNFLEET_PDFTOPPM` when set (tests point it at a missing file to see the fallback), else Debian's path.
    public static var defaultExecutable: String {
        ProcessInfo.processInfo.environment["SIGNFLEET_PDFTOPPM"] ?? "/usr/bin/pdftoppm"
    }

    /// Whether the renderer can run at all.
    public var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// The resolution for a page at `scale` (1 = 96 dpi, a CSS pixel per image pixel), lowered so
    /// that neither side passes ``Limits/maxSide``.
    func dpi(for geometry: PDFPageGeometry, scale: Int) -> Double {
        let wanted = 96.0 * Double(scale)
        let longest = max(geometry.width, geometry.height)
        return min(wanted, Double(limits.maxSide) * 72 / longest).rounded(.down)
    }

    /// Draws page `page` (1-based) of `pdf`, whose page geometry is `geometry`, as a PNG showing
    /// the CropBox turned by `/Rotate` (what a viewer shows).
    public func render(pdf: Data, page: Int, geometry: PDFPageGeometry, scale: Int) async throws(Failure) -> [UInt8] {
        guard isAvailable else { throw .missing(executable) }
        guard pdf.count <= limits.maxPDFBytes else { throw .tooLarge(bytes: pdf.count) }
        guard page >= 1 else { throw .noSuchPage(page) }
        let dpi = String(format: "%.0f", dpi(for: geometry, scale: scale))
        let outcome = await PDFToolChild.run(
            executable, arguments: { ["-q", "-png", "-cropbox", "-singlefile", "-f", "\(page)", "-l", "\(page)", "-r", dpi, $0] },
            pdf: pdf, outputLimit: limits.maxOutputBytes, timeout: limits.timeout, clock: clock)
        switch outcome {
        case .output(let png):
            guard png.starts(with: [0x89, 0x50, 0x4E, 0x47]) else {
                // pdftoppm exits 0 with no image for a page past the end.
                throw png.isEmpty ? .noSuchPage(page) : .failed("the output is not a PNG")
            }
            return png
        case .failed(let why): throw .failed(why)
        case .timedOut: throw .timedOut(limits.timeout)
        case .cancelled: throw .failed("the render was cancelled")
        }
    }
}
