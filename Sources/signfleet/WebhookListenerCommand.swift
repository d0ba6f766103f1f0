import ArgumentParser
import Foundation
import Logging
import WebhookListener

/// `signfleet webhook-listener`: a DocuSign Connect listener for tests (docs/webhooks.md, "A
/// listener for tests").
struct WebhookListenerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook-listener",
        abstract: "Run a Connect listener: checks each message's HMAC, appends a receipt line, answers as told.",
        discussion: """
            Prints `seed <n>`, then `listening http://<host:port>` once it listens (port 0 picks a \
            free port; the line shows the real one). Every POST is a message: its HMAC signatures \
            are checked against the keys of --keys-file (one secret per line), a JSON line is \
            appended to --receipts, then it is answered (200 unless PUT /control/answer said \
            otherwise). Stops cleanly on SIGINT or SIGTERM (exit code 0).
            """
    )

    @Option(help: "host:port to listen on; port 0 picks a free port.")
    var listen: String = "127.0.0.1:0"

    @Option(help: "The receipts file (JSON lines, appended; created when missing).")
    var receipts: String

    @Option(help: "A file of the HMAC secrets to check against, one per line (the account's Connect keys). Without it every signed message is `invalid`.")
    var keysFile: String?

    @Option(help: "Seed of the answers drawn for a fraction of messages; random when omitted, always printed.")
    var seed: UInt64?

    @OptionGroup var logging: LoggingOptions

    func address() throws -> (host: String, port: Int) { try hostAndPort(listen, option: "--listen") }

    func secrets() throws -> [String] {
        guard let keysFile else { return [] }
        guard let text = try? String(contentsOfFile: keysFile, encoding: .utf8) else {
            throw ValidationError("cannot read --keys-file \(keysFile) (a text file, one secret per line)")
        }
        return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func validate() throws {
        _ = try address()
        _ = try secrets()
    }

    func run() async throws {
        let logger = try logging.makeLogger(label: "webhook-listener")
        let (host, port) = try address()
        let seed = self.seed ?? UInt64.random(in: 0...UInt64(Int64.max))
        announce("seed \(seed)")
        let service: WebhookListenerService
        do {
            service = try WebhookListenerService(
                configuration: .init(host: host, port: port, receiptsPath: receipts, secrets: try secrets(), seed: seed), logger: logger,
                onListening: { address in announce("listening http://\(address)") })
        } catch let error as WebhookListenerError {
            throw ValidationError(error.description)
        }
        try await ShutdownSignals.run([service], logger: logger)
        logger.info("webhook listener stopped")
    }
}
