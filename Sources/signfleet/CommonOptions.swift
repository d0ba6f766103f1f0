import ArgumentParser
import Foundation
import Logging
import ZeroMQ

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

/// Prints one line to standard output at once (scripts and tests wait for it).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// `host:port` of a listening option (port 0: a free port), or the error naming the option.
func hostAndPort(_ text: String, option: String) throws -> (host: String, port: Int) {
    guard let colon = text.lastIndex(of: ":"), colon != text.startIndex, let port = Int(text[text.index(after: colon)...]),
        (0...65535).contains(port)
    else { throw ValidationError("\(option) must be host:port (for example 127.0.0.1:0), got \"\(text)\"") }
    return (String(text[..<colon]), port)
}

/// How a device-side command secures its connection to the coordinator (docs/protocol.md,
/// "Security model"): CURVE with the coordinator's pinned public key, or plain TCP when asked.
struct TransportOptions: ParsableArguments {
    @Option(help: "The coordinator's CURVE public key (Z85, 40 characters): printed by the coordinator as `curve-public-key`, shown on GET /status. Write --server-key=KEY: a Z85 key may start with '-'.")
    var serverKey: String?

    @Option(help: "A file holding that key (the coordinator's --public-key-file; a fleet run's coordinator.pub).")
    var serverKeyFile: String?

    @Flag(help: "Connect over plain TCP (no transport authentication: a coordinator started with --plaintext).")
    var plaintext = false

    /// The pinned key, or nil for plain TCP.
    /// - Throws: `ValidationError` saying what to pass when nothing or something unreadable was given.
    func serverKeyBytes() throws -> [UInt8]? {
        if plaintext {
            guard serverKey == nil, serverKeyFile == nil else {
                throw ValidationError("--plaintext and --server-key / --server-key-file exclude each other")
            }
            return nil
        }
        var text = serverKey
        if let serverKeyFile {
            guard serverKey == nil else { throw ValidationError("give --server-key or --server-key-file, not both") }
            do {
                text = try String(contentsOfFile: serverKeyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw ValidationError("cannot read --server-key-file \(serverKeyFile): \(error.localizedDescription)")
            }
        }
        guard let text else {
            throw ValidationError(
                "the coordinator's CURVE public key is needed: pass --server-key (the coordinator prints it as `curve-public-key` and shows it on GET /status) or --server-key-file, or --plaintext for a coordinator started with --plaintext")
        }
        guard let key = Z85.decode(text), key.count == 32 else {
            throw ValidationError("--server-key must be a 40-character Z85 CURVE public key; got \(text.count) characters")
        }
        return key
    }
}
