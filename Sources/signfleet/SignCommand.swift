import ArgumentParser

// Placeholder: replaced by the signature-capture work (issue 3).
struct SignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sign", abstract: "Capture one synthetic signature and write ISO, SVG and PNG files.")
    func run() async throws {
        throw ValidationError("signature capture is not built yet")
    }
}
