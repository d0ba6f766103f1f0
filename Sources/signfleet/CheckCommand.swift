import ArgumentParser
import Fleet
import Foundation

/// `signfleet check <run dir>`: runs the checker again on a finished run (docs/checker.md).
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a finished run: lost, duplicated or reordered envelopes, bad signatures, routing violations.",
        discussion: """
            Compares the run's history and device stores with its coordinator store, prints a summary, \
            and writes check.json into the run directory. Exit status: 0 valid, 1 invalid, 2 unknown \
            (something could not be decided), 64 when the directory is not a run directory.
            """
    )

    @Argument(help: "The run directory (runs/<time> or runs/latest).")
    var runDirectory: String

    @Option(help: "How many anomalies the summary shows with their witnesses.")
    var show: Int = 10

    func validate() throws {
        guard show >= 0 else { throw ValidationError("--show must be 0 or more") }
    }

    func run() async throws {
        let directory = RunDirectory(path: runDirectory)
        let report: CheckReport
        do {
            report = try await Checker.check(run: directory)
        } catch let error as CheckerError {
            throw ValidationError(error.description)
        }
        print(report.summary(maxAnomalies: show))
        do {
            try report.write(to: directory.checkFile)
        } catch {
            // The verdict stands; only the file is missing.
            FileHandle.standardError.write(Data("warning: cannot write \(directory.checkFile): \(error)\n".utf8))
        }
        throw ExitCode(report.verdict.exitCode)
    }
}
