import ArgumentParser
import Foundation
import Logging

/// Options every long-running subcommand shares.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func makeLogger(label: String) throws -> Logger {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("unknown log level \"\(logLevel)\"; use one of trace, debug, info, notice, warning, error, critical")
        }
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// Runs `body` until it returns or SIGINT/SIGTERM arrives, which cancels it
/// so that sockets close cleanly (LINGER 0) before the process exits.
func runUntilSignalled(_ body: @escaping @Sendable () async throws -> Void) async throws {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { number in
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        return source
    }
    defer { sources.forEach { $0.cancel() } }
    try await task.value
}

/// Prints one line to standard output at once (scripts and tests wait for it).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
