import FleetTesting
import Foundation

/// A temporary directory with a coordinator store path, and `signfleet admin` run against it:
/// what the admin CLI's process tests share.
struct AdminStoreDirectory {
    let binary: String
    let directory: URL
    /// The SQLite store's path (made by the first admin command).
    let store: String

    init(_ name: String) throws {
        binary = try signfleetBinary()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = directory.appendingPathComponent("c.sqlite").path
    }

    /// `signfleet admin <arguments> --store <store>`.
    func admin(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
        let run = try await ChildProcess.run(binary, ["admin"] + arguments + ["--store", store])
        return (run.status, run.standardOutput, run.standardError)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}
