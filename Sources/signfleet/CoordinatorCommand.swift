import ArgumentParser

struct CoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "coordinator", abstract: "Run the coordinator.")
    func run() async throws {}
}
