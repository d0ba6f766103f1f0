import FleetProtocol
import Foundation
import Subprocess
import SystemPackage

/// Runs a PDF command-line tool (poppler's `pdftoppm` and `pdftotext`, `qpdf`) on PDFs as a child
/// process: the PDFs are hostile input, so a crash, a hang or a memory blow-up costs one child,
/// never the coordinator. Each PDF goes in a private temporary file, not a pipe (a child that exits
/// without reading its input would leave a pipe write failing mid-way); standard output is read up
/// to a limit; its address space is limited (`ulimit -v` in a `/bin/sh` that then `exec`s the tool),
/// so a PDF that makes it allocate without end fails it with an allocation error rather than
/// drawing the machine's memory from under the coordinator; after the deadline the child is killed.
enum PDFToolChild {
    /// The address space a tool may use: far above what a page of any real document needs
    /// (pdftoppm's images are bounded by their own pixel limit), far below a machine's memory.
    static let defaultMemoryLimit = 1 << 30

    enum Outcome: Sendable {
        case output([UInt8])
        /// The child exited non-zero, was killed, printed too much, or could not be started.
        case failed(String)
        case timedOut
        case cancelled
    }

    /// Runs `executable` with `arguments(pdfPath)` and returns what it printed.
    static func run(
        _ executable: String, arguments: @Sendable (String) -> [String], pdf: Data, outputLimit: Int, timeout: Duration,
        clock: any FleetClock, memoryLimit: Int = defaultMemoryLimit
    ) async -> Outcome {
        await run(
            executable, arguments: { arguments($0[0]) }, pdfs: [pdf], outputLimit: outputLimit, timeout: timeout, clock: clock,
            memoryLimit: memoryLimit)
    }

    /// Runs `executable` with `arguments(paths)`, the paths of `pdfs` in order, and returns what it printed.
    static func run(
        _ executable: String, arguments: @Sendable ([String]) -> [String], pdfs: [Data], outputLimit: Int, timeout: Duration,
        clock: any FleetClock, memoryLimit: Int = defaultMemoryLimit
    ) async -> Outcome {
        var files: [URL] = []
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        for pdf in pdfs {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-pdf-\(UUID().uuidString).pdf")
            guard FileManager.default.createFile(atPath: file.path, contents: pdf, attributes: [.posixPermissions: 0o600]) else {
                return .failed("a PDF could not be written to \(file.path)")
            }
            files.append(file)
        }
        // `$0` is the tool, `$@` its arguments: nothing of the PDF's reaches the shell's text.
        let kibibytes = max(1, memoryLimit / 1024)
        let arguments = ["-c", "ulimit -v \(kibibytes) && exec \"$0\" \"$@\"", executable] + arguments(files.map(\.path))
        let name = FilePath(executable).lastComponent?.string ?? executable
        let outcome: Outcome? = await withTaskGroup(of: Outcome?.self) { group in
            group.addTask {
                do {
                    let result = try await Subprocess.run(
                        .path(FilePath("/bin/sh")), arguments: Arguments(arguments), environment: .inherit,
                        input: .none, output: .bytes(limit: outputLimit), error: .discarded)
                    guard case .exited(0) = result.terminationStatus else {
                        return .failed("\(name) ended with \(result.terminationStatus)")
                    }
                    return .output(result.standardOutput)
                } catch {
                    return .failed("\(error)")
                }
            }
            group.addTask {
                // Cancelling the run (below) kills the child.
                try? await clock.sleep(for: timeout)
                return Task.isCancelled ? nil : .timedOut
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return outcome ?? .cancelled
    }
}
