import ArgumentParser
import Coordinator
import FleetProtocol
import Foundation

/// `signfleet admin envelope`: shows a synced envelope, voids it, or acts for one of its
/// recipients, directly in a coordinator store (any account).
struct AdminEnvelopeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "envelope",
        abstract: "Show a synced envelope, void it, or act for a recipient (docs/sync.md, \"After sync\").",
        subcommands: [Show.self, VoidEnvelope.self, Act.self]
    )

    struct Target: ParsableArguments {
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The server's envelope id (env-...).") var id: String

        func service() async throws -> EnvelopeService {
            let storage = try await store.storage()
            return EnvelopeService(storage: storage, auth: AuthService(storage: storage))
        }
    }

    /// The envelope and its recipients, one line each.
    static func describe(_ envelope: EnvelopeQueryReply) -> String {
        func stamp(_ date: Date) -> String {
            ISO8601DateFormatter.string(from: date, timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        }
        var lines = [
            "envelope \(envelope.envelopeID) status=\(envelope.status) transaction=\(envelope.transactionID) device=\(envelope.deviceID) created=\(stamp(envelope.createdAt))"
        ]
        if let voidReason = envelope.voidReason { lines.append("  voided: \(voidReason)") }
        for recipient in envelope.recipients {
            var line = "  recipient \(recipient.recipientID) \(recipient.type) \"\(recipient.name)\" order=\(recipient.routingOrder) status=\(recipient.status)"
            if let changed = recipient.statusChangedAt { line += " changed=\(stamp(changed))" }
            if let reason = recipient.declineReason { line += " declined: \(reason)" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// Runs a service call; a `FleetError` is printed to standard error and exits with status 1.
    static func run(_ body: () async throws -> EnvelopeQueryReply) async throws {
        do {
            print(describe(try await body()))
        } catch let error as FleetError {
            FileHandle.standardError.write(Data("error: \(error.code): \(error.message)\n".utf8))
            throw ExitCode.failure
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show an envelope and its recipients.")
        @OptionGroup var target: Target

        func run() async throws {
            let service = try await target.service()
            try await AdminEnvelopeCommand.run { try await service.envelope(id: target.id) }
        }
    }

    struct VoidEnvelope: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "void", abstract: "Void a sent or delivered envelope.")
        @OptionGroup var target: Target
        @Option(help: "Why the envelope is voided (required).") var reason: String

        func run() async throws {
            let service = try await target.service()
            try await AdminEnvelopeCommand.run { try await service.void(envelopeID: target.id, reason: reason) }
        }
    }

    struct Act: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "act", abstract: "Act for a current recipient (stands in for remote signing).")
        @OptionGroup var target: Target
        @Option(help: "The recipient's id.") var recipient: String
        @Option(help: "deliver, sign or decline.") var action: String
        @Option(help: "Why the recipient declines (required for decline).") var reason: String?

        func validate() throws {
            guard RecipientAction.Action(rawValue: action) != nil else {
                throw ValidationError("--action must be deliver, sign or decline")
            }
        }

        func run() async throws {
            guard let action = RecipientAction.Action(rawValue: action) else {
                throw ValidationError("--action must be deliver, sign or decline")
            }
            let service = try await target.service()
            try await AdminEnvelopeCommand.run {
                try await service.act(envelopeID: target.id, recipientID: recipient, action: action, reason: reason)
            }
        }
    }
}
