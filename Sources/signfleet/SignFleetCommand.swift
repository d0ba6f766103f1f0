import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

/// The `signfleet` command line. Each subcommand maps its options onto a library
/// configuration and runs it; no logic lives here.
@main
struct SignFleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signfleet",
        abstract: "Simulate a fleet of offline signing devices and the e-signature server they sync with.",
        version: SignFleetVersion.string,
        subcommands: [
            CoordinatorCommand.self, NodeCommand.self, FleetCommand.self, ProxyCommand.self, CheckCommand.self,
            LoadCommand.self, SignCommand.self, AdminCommand.self, DeviceWorkerCommand.self, WebhookListenerCommand.self,
        ]
    )

    /// Arms the parent-death signal before anything else, then parses and runs as usual.
    static func main() async {
        ParentDeath.armIfRequested()
        await main(nil)
    }
}

/// A process started by the fleet launcher dies with it, even when the launcher is
/// killed with SIGKILL and cannot clean up: the launcher sets `SIGNFLEET_PARENT_PID`
/// to its pid, and the child asks the kernel for SIGKILL when its parent goes away.
/// Only when the variable names the actual parent, so a process started by hand
/// (or by a test) with a stale variable in its environment is not affected.
enum ParentDeath {
    static let variable = "SIGNFLEET_PARENT_PID"

    static func armIfRequested() {
        #if os(Linux)
        guard let raw = getenv(variable), let expected = Int32(String(cString: raw)), expected == getppid() else { return }
        // PR_SET_PDEATHSIG fires when the thread that spawned us exits; the launcher
        // spawns from swift-subprocess's one long-lived worker thread.
        guard let prctl = prctlFunction(), prctl(setParentDeathSignal, UInt(SIGKILL), 0, 0, 0) == 0 else { return }
        // The parent may have died between our fork and the prctl: then nobody will signal us.
        if getppid() != expected { _exit(1) }
        #endif
    }

    #if os(Linux)
    /// `PR_SET_PDEATHSIG` from <linux/prctl.h> (a macro Swift does not import).
    private static let setParentDeathSignal: Int32 = 1
    private typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32

    /// glibc's `prctl` is variadic, which Swift cannot call; its integer arguments pass
    /// the same way through this fixed signature.
    private static func prctlFunction() -> Prctl? {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "prctl") else { return nil }
        return unsafeBitCast(symbol, to: Prctl.self)
    }
    #endif
}

enum SignFleetVersion {
    static let string = "0.1.0"
}
