import ArgumentParser

/// The `signfleet` command line. Each subcommand maps its options onto a library
/// configuration and runs it; no logic lives here.
@main
struct SignFleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signfleet",
        abstract: "Simulate a fleet of offline signing devices and the e-signature server they sync with.",
        version: SignFleetVersion.string,
        subcommands: [CoordinatorCommand.self, NodeCommand.self, SignCommand.self, AdminCommand.self, DeviceWorkerCommand.self, ProxyCommand.self]
    )
}

enum SignFleetVersion {
    static let string = "0.1.0"
}
