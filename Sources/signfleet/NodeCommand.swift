import ArgumentParser

struct NodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "node", abstract: "Run a device node.")
    func run() async throws {}
}
