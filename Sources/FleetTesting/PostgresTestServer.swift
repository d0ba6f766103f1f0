import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL server the tests use: `SIGNFLEET_POSTGRES_URL` when set (scripts/test.sh starts
/// one for the whole run), otherwise a throwaway cluster started on first use with
/// scripts/postgres-cluster.sh and stopped when the test process exits.
public actor PostgresTestServer {
    private static let shared = PostgresTestServer()
    private var started: Task<String, any Error>?

    /// The server's URL (`postgres://signfleet@127.0.0.1:PORT/signfleet`), starting it on first use.
    public static func url() async throws -> String { try await shared.start() }

    private func start() async throws -> String {
        if let started { return try await started.value }
        let task = Task<String, any Error> {
            if let url = ProcessInfo.processInfo.environment["SIGNFLEET_POSTGRES_URL"], !url.isEmpty { return url }
            return try await Self.startCluster()
        }
        started = task
        return try await task.value
    }

    private static func startCluster() async throws -> String {
        // This file is Sources/FleetTesting/PostgresTestServer.swift in the package.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/postgres-cluster.sh").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-pg-\(UUID().uuidString)").path
        // The script's output goes to files, not pipes: the server it starts could keep a pipe open
        // (descriptors leak into children on Linux) and a reader would wait for ever.
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let log = directory + ".log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let status = try await runToExit(["/bin/bash", script, "start", directory], output: log)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0, let url = output.split(separator: "\n").last(where: { $0.hasPrefix("postgres://") }).map(String.init) else {
            throw PostgresTestServerError(
                message: "could not start a test PostgreSQL (\(script) start): \(output) — run scripts/install-deps.sh, or set SIGNFLEET_POSTGRES_URL")
        }
        clusterToStop.withLock { $0 = (script, directory) }
        atexit {
            guard let (script, directory) = PostgresTestServer.clusterToStop.withLock({ $0 }) else { return }
            let stop = Process()
            stop.executableURL = URL(fileURLWithPath: "/bin/bash")
            stop.arguments = [script, "stop", directory]
            try? stop.run()
            stop.waitUntilExit()
        }
        return url
    }

    static let clusterToStop = Mutex<(String, String)?>(nil)

    /// Runs `arguments` with its output appended to the file `output` and waits for it on a thread
    /// of its own (`waitpid` on its pid, not on the cooperative pool).
    private static func runToExit(_ arguments: [String], output: String) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_APPEND | O_CREAT, 0o644)
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
                var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
                defer { for pointer in argv { free(pointer) } }
                var pid: pid_t = 0
                let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
                guard spawned == 0 else {
                    continuation.resume(throwing: PostgresTestServerError(message: "cannot start \(arguments[0]): errno \(spawned)"))
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                // WIFEXITED / WEXITSTATUS by hand: the C macros are not imported.
                continuation.resume(returning: status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
            }
            thread.start()
        }
    }
}

public struct PostgresTestServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
