import Foundation

/// Named points where a test can make the coordinator fail on purpose, so that crash
/// cases happen at an exact moment instead of by luck.
///
/// Armed from the environment: `SIGNFLEET_FAILPOINTS=sync.after-commit=kill` kills the
/// process with SIGKILL right after a sync push's transaction committed and before its
/// reply is sent — the "applied, but the reply was lost" case. Unset, every point is inert.
public struct Failpoints: Sendable {
    public enum Action: String, Sendable {
        /// SIGKILL the process at once: no cleanup, no reply.
        case kill
    }

    /// After a `sync.push` committed, before its reply.
    public static let syncAfterCommit = "sync.after-commit"

    private let armed: [String: Action]

    public init(armed: [String: Action] = [:]) {
        self.armed = armed
    }

    /// Reads `SIGNFLEET_FAILPOINTS` (`name=action`, comma-separated); unknown actions are ignored.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Failpoints {
        var armed: [String: Action] = [:]
        for entry in (environment["SIGNFLEET_FAILPOINTS"] ?? "").split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, let action = Action(rawValue: parts[1]) {
                armed[parts[0]] = action
            }
        }
        return Failpoints(armed: armed)
    }

    public var isEmpty: Bool { armed.isEmpty }

    /// Runs the action armed at `name`, if any.
    public func hit(_ name: String) {
        switch armed[name] {
        case .kill?:
            kill(getpid(), SIGKILL)
        case nil:
            return
        }
    }
}
