import ArgumentParser
import Fleet
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `signfleet fleet`: run a scenario (launch, break, drain, check, report) or validate one.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Run a fleet scenario or validate a scenario file.",
        subcommands: [Run.self, Validate.self]
    )

    /// A scenario argument: a file, or a name looked up as `scenarios/<name>.yaml`.
    static func scenarioPath(_ argument: String) -> String {
        if FileManager.default.fileExists(atPath: argument) { return argument }
        let named = "scenarios/\(argument).yaml"
        return FileManager.default.fileExists(atPath: named) ? named : argument
    }

    struct Validate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a scenario file; prints OK or the error with its line and field (exit 1).")

        @Argument(help: "A scenario file, or a name in scenarios/ (smoke, flaky-network, …).")
        var scenario: String

        func run() async throws {
            let path = FleetCommand.scenarioPath(scenario)
            do {
                let loaded = try ScenarioLoader.load(path: path)
                let devices = loaded.groups.reduce(0) { $0 + $1.count }
                print("OK \(path): \(loaded.name), \(devices) devices, \(loaded.faults.count) faults, \(Int(loaded.duration)) s")
            } catch {
                FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Launch, break, drain and check a fleet; exit 0 passed, 1 invalid, 2 unknown, 3 checks failed.",
            discussion: """
                Starts the coordinator, the fault proxy (if the scenario uses one) and the node processes, applies \
                the scenario's fault schedule, shows a progress line on standard error, then heals, drains, runs the \
                checker, checks the scenario's checks (verdict, thresholds) and writes runs/<time>/ (runs/latest) \
                with summary.json, check.json, history.jsonl, logs and report.html. See docs/fleet.md.

                Exit codes: 0 the verdict is the expected one (checks.verdict, default valid) and every threshold \
                held; 1 invalid where valid was expected; 2 unknown (could not be vouched for, interrupted, or the \
                run could not start); 3 the checks failed: a threshold failed, or the verdict is not the expected \
                one (e.g. valid where the scenario expects invalid).
                """)

        @Argument(help: "A scenario file, or a name in scenarios/ (smoke, flaky-network, …).")
        var scenario: String

        @Option(help: "Seed of every random choice; overrides the scenario's (default: the scenario's, else random).")
        var seed: UInt64?

        @Option(help: "Where run directories are created.")
        var runs = "runs"

        @Option(help: "Override the scenario's duration, in seconds.")
        var duration: Double?

        @Option(
            help: """
                The nice value (0-19) of the node processes, so the simulated devices never take the \
                coordinator's CPU on this machine; 0 runs them at the launcher's priority.
                """)
        var nodeNice = 19

        func validate() throws {
            guard ProcessPriority.range.contains(nodeNice) else {
                throw ValidationError("--node-nice must be 0 to 19, not \(nodeNice)")
            }
        }

        func run() async throws {
            let path = FleetCommand.scenarioPath(scenario)
            var loaded: Scenario
            do {
                loaded = try ScenarioLoader.load(path: path)
            } catch {
                FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                throw ExitCode(2)
            }
            let chosenSeed = seed ?? loaded.seed ?? UInt64.random(in: 1...UInt64(Int64.max))
            loaded.seed = chosenSeed
            if let duration { loaded.duration = duration }
            let plan = LaunchPlan.make(scenario: loaded, seed: chosenSeed)
            var replay = "signfleet fleet run \(scenario) --seed \(chosenSeed)"
            if let duration { replay += " --duration \(duration)" }
            if nodeNice != 19 { replay += " --node-nice \(nodeNice)" }
            var configuration = LauncherConfiguration(
                executable: FleetCommand.executablePath(), scenario: loaded, seed: chosenSeed,
                scenarioText: loaded.yaml(seed: chosenSeed), plan: plan, runsRoot: runs, replay: replay,
                check: FleetCheck.run)
            configuration.nodeNiceness = nodeNice
            let launcher: Launcher
            do {
                launcher = try Launcher(configuration: configuration)
            } catch {
                FileHandle.standardError.write(Data("error: cannot create the run directory under \(runs): \(error)\n".utf8))
                throw ExitCode(2)
            }
            print("seed \(chosenSeed) (replay: \(replay))")
            print("run directory \(FleetCommand.display(launcher.run.path))")
            // Before the progress on standard error, even when standard output is a pipe.
            fflush(nil)  // every output stream
            // At exit, whatever is still running is killed (the last resort; the run stops its children itself).
            atexit { LiveProcessGroups.shared.killAll() }
            let run = FleetRunService(launcher: launcher)
            try await ShutdownSignals.run([run], logger: Logger(label: "fleet"), finishing: true) {
                // A second SIGINT/SIGTERM: no more waiting for the children to stop.
                LiveProcessGroups.shared.killAll()
                _exit(130)
            }
            guard let result = run.result else { throw ExitCode(2) }
            let s = result.summary
            print(
                "envelopes: composed \(s.counts.composed), signed \(s.counts.signed), synced \(s.counts.synced), pending \(s.counts.pending)"
            )
            if let p50 = s.syncAck.p50, let p99 = s.syncAck.p99 {
                var line = String(format: "sync ack: p50 %.1f ms, p99 %.1f ms (%d syncs)", p50 * 1000, p99 * 1000, s.syncAck.samples)
                if let run = s.syncAckRun?.p99, let drain = s.syncAckDrain?.p99 {
                    line += String(format: "; p99 %.1f ms before the drain, %.1f ms in it", run * 1000, drain * 1000)
                }
                print(line)
            }
            print("faults applied: \(s.faults.count), unexpected restarts: \(s.totalRestarts)")
            for note in s.notes { print("note: \(note)") }
            print("verdict: \(s.verdict) (\(s.anomalies) anomalies)")
            for line in RunChecks.lines(s) { print(line) }
            if result.exitCode == RunChecks.checksFailedExitCode { print("checks failed (exit \(result.exitCode))") }
            print("report: \(FleetCommand.display(result.run.reportFile))")
            if result.exitCode != 0 { throw ExitCode(result.exitCode) }
        }
    }

    /// `path` relative to the current directory when it is inside it.
    static func display(_ path: String) -> String {
        let current = FileManager.default.currentDirectoryPath + "/"
        return path.hasPrefix(current) ? String(path.dropFirst(current.count)) : path
    }

    /// This very binary, so every child runs the same build.
    static func executablePath() -> String {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        return CommandLine.arguments[0]
    }
}

/// The launcher as a service: SIGINT/SIGTERM (the group's graceful shutdown) end the run early but
/// cleanly — the children are stopped and the run directory written; a second signal kills every
/// child group at once and exits (``ShutdownSignals/run(_:logger:finishing:onRepeatedSignal:)``).
final class FleetRunService: Service {
    let launcher: Launcher
    private let outcome = Mutex<LaunchResult?>(nil)

    init(launcher: Launcher) {
        self.launcher = launcher
    }

    /// How the run ended, once ``run()`` has returned.
    var result: LaunchResult? { outcome.withLock { $0 } }

    func run() async {
        let launcher = launcher
        let result = await withGracefulShutdownHandler {
            await launcher.execute()
        } onGracefulShutdown: {
            FileHandle.standardError.write(Data("\nstopping the fleet (again to kill it at once)\n".utf8))
            launcher.interrupt()
        }
        outcome.withLock { $0 = result }
    }
}
