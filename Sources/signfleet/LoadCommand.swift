import FleetProtocol
import ArgumentParser
import DeviceNode
import FleetTesting
import Foundation
import LoadGenerator
import Logging
import ServiceLifecycle
import Synchronization
import ZeroMQ

/// `signfleet load`: open-loop signing ceremonies at a target arrival rate, with latencies
/// corrected for coordinated omission, thresholds that set the exit code, and a JSON summary,
/// an HdrHistogram interval log and an HTML report in the output directory. See docs/load-testing.md.
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Offer open-loop signing load to a coordinator and report corrected latencies.",
        discussion: """
            Each arrival is one ceremony on a virtual device: compose, capture, sign and commit to the \
            outbox, push and wait for the coordinator's ack. Latency is measured from each ceremony's \
            intended start (corrected for coordinated omission) and, beside it, from its actual start. \
            Without --connect a coordinator is started as a child process on a temporary store. \
            Load: --rate R --duration D, or stages such as --stage 10s:0-500 --stage 20s:500 (ramp, plateau). \
            Thresholds: --threshold 'syncAck.p99 < 200ms' --threshold 'errors.rate < 0.1%' \
            --threshold 'throughput > 100/s' (append abortOnFail to stop early when it fails). \
            After the run, unless --no-audit, every device's outbox is compared with what the coordinator \
            holds for it (sync.results): anything lost, duplicated, reordered or mismatched fails the run. \
            SIGINT or SIGTERM stops the arrivals early (the run drains, audits and reports; a second one exits \
            at once). Exit code 0 when every threshold and the audit passed, 1 when a threshold or the audit failed \
            or the run was stopped early, 2 when the load could not run (e.g. the coordinator did not answer).
            """)

    @Option(help: "Coordinator endpoint to load (default: start one as a child process).")
    var connect: String?

    @Option(
        help: """
            What each virtual device does: ceremony (a device composes, signs offline and syncs over ZeroMQ) or rest-ceremony \
            (a backend creates an envelope over the REST API, opens its recipient view, signs in the page and fetches the \
            combined document; docs/load-testing.md).
            """)
    var workload: String = "ceremony"

    @Option(help: "rest-ceremony: the REST server's base URL, e.g. http://127.0.0.1:8080 (default: start a coordinator as a child process).")
    var baseUrl: String?

    @Option(help: "rest-ceremony with --base-url: a bearer token of the account to load (default: issued for --email on the child's store).")
    var token: String?

    @Option(help: "Arrivals per second (with --duration).")
    var rate: Double?

    @Option(help: "Duration at --rate, e.g. 30s, 2m.")
    var duration: String?

    @Option(help: "A stage DURATION:RATE or DURATION:FROM-TO, e.g. 10s:0-500 then 20s:500; repeat for more.")
    var stage: [String] = []

    @Option(help: "Virtual devices (each runs one ceremony at a time).")
    var devices: Int = 20

    @Option(help: "Ceremonies a device may have outstanding before an arrival for it is dropped (and counted).")
    var maxOutstanding: Int = 16

    @Option(help: "Arrival process: poisson or uniform.")
    var arrivals: String = "poisson"

    @Option(help: "Seed of the arrival schedule and the devices (default: random, printed).")
    var seed: UInt64?

    @Option(help: "A threshold such as 'syncAck.p99 < 200ms' (append abortOnFail to stop early); repeat for more.")
    var threshold: [String] = []

    @Flag(help: "Stop early when any threshold fails (as if each ended in abortOnFail).")
    var abortOnFail = false

    @Flag(help: "Skip the end-of-run integrity audit (devices' outboxes against the coordinator's records); latency only.")
    var noAudit = false

    @Option(help: "Output directory (default runs/load-<time>).")
    var out: String?

    @Option(help: "After the last arrival, how long outstanding ceremonies may take before they count as unfinished.")
    var drainTimeout: String = "10s"

    @Option(help: "Length of the plots' and interval log's intervals.")
    var interval: String = "1s"

    @Option(help: "Per-attempt timeout of a device's requests.")
    var requestTimeout: String = "5s"

    @Option(help: "Device store durability: powerLoss (fsync per commit) or processCrash (WAL, no fsync per commit).")
    var durability: String = "powerLoss"

    @Option(help: "User the devices log in as.")
    var email: String = "user1@demo.example"

    @Option(help: "That user's secret.")
    var secret: String = "demo-secret"

    @OptionGroup var logging: LoggingOptions

    @OptionGroup var transport: TransportOptions

    struct Plan {
        var configuration: LoadConfiguration
        var requestTimeout: Duration
        var durability: DeviceConfiguration.Durability
        /// `rest-ceremony` rather than the device ceremony.
        var rest: Bool
    }

    /// Turns the options into a load configuration, naming the option at fault.
    func plan() throws -> Plan {
        do {
            let profile: LoadProfile
            switch (rate, duration, stage.isEmpty) {
            case (let rate?, let duration?, true):
                profile = try LoadProfile.constant(rate: rate, duration: try LoadProfile.parseDuration(duration))
            case (nil, nil, false):
                profile = try LoadProfile.parse(stages: stage)
            case (_, _, false):
                throw ValidationError("use either --stage or --rate with --duration, not both")
            default:
                throw ValidationError("give the load as --rate R --duration D (e.g. --rate 200 --duration 30s) or as --stage specs")
            }
            guard devices >= 1 else { throw ValidationError("--devices must be at least 1") }
            guard maxOutstanding >= 1 else { throw ValidationError("--max-outstanding must be at least 1") }
            guard let process = ArrivalProcess(rawValue: arrivals) else {
                throw ValidationError("--arrivals must be poisson or uniform, not \"\(arrivals)\"")
            }
            guard let durability = DeviceConfiguration.Durability(rawValue: durability) else {
                throw ValidationError("--durability must be powerLoss or processCrash, not \"\(durability)\"")
            }
            guard workload == "ceremony" || workload == "rest-ceremony" else {
                throw ValidationError("--workload must be ceremony or rest-ceremony, not \"\(workload)\"")
            }
            let rest = workload == "rest-ceremony"
            if rest, connect != nil { throw ValidationError("--connect names a ZeroMQ endpoint; give the REST server as --base-url") }
            if !rest, baseUrl != nil || token != nil { throw ValidationError("--base-url and --token are for --workload rest-ceremony") }
            if baseUrl != nil, token == nil { throw ValidationError("--base-url needs --token (a bearer token of the account to load)") }
            let stepNames = rest ? RESTCeremonyWorkload.stepNames : SigningCeremonyWorkload.stepNames
            var thresholds = try threshold.map { try Threshold.parse($0, steps: stepNames) }
            if abortOnFail { for index in thresholds.indices { thresholds[index].abortOnFail = true } }
            let configuration = LoadConfiguration(
                profile: profile, process: process, devices: devices, maxOutstandingPerDevice: maxOutstanding,
                seed: seed ?? UInt64.random(in: 1...UInt64(UInt32.max)), thresholds: thresholds,
                drainTimeout: try LoadProfile.parseDuration(drainTimeout), interval: try LoadProfile.parseDuration(interval),
                // The REST ceremony has no device outbox to audit against the coordinator.
                audit: !noAudit && !rest)
            return Plan(configuration: configuration, requestTimeout: try LoadProfile.parseDuration(requestTimeout), durability: durability, rest: rest)
        } catch let error as LoadProfileError {
            throw ValidationError(error.message)
        } catch let error as ThresholdError {
            throw ValidationError(error.message)
        }
    }

    func validate() throws {
        _ = try plan()
    }

    func run() async throws {
        let plan = try plan()
        var options = logging
        if options.logLevel == "info" { options.logLevel = "warning" }  // the progress line is the output
        let logger = try options.makeLogger(label: "load")
        let stop = LoadStop()
        let coordinator = ChildPid()
        // SIGINT/SIGTERM stop the arrivals; the run drains, audits and reports (exit 1). A second
        // signal gives up waiting: the coordinator child is killed and the command exits at once.
        let load = LoadService(stop: stop) { try await self.execute(plan: plan, logger: logger, stop: stop, coordinatorPid: coordinator) }
        try await ShutdownSignals.run([load], logger: logger, finishing: true) {
            if let pid = coordinator.value { kill(pid, SIGKILL) }
            _exit(130)
        }
    }

    /// The whole load: a coordinator child unless --connect, the run, the reports.
    private func execute(plan: Plan, logger: Logger, stop: LoadStop, coordinatorPid: ChildPid) async throws {
        let outDirectory = out ?? "runs/load-\(Self.timestamp())"
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-load-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }

        announce("seed \(plan.configuration.seed)")
        var coordinator: ChildProcess?
        if plan.rest {
            let base: String, bearer: String
            if let baseUrl, let token {
                (base, bearer) = (baseUrl, token)
            } else {
                let child: (process: ChildProcess, http: String, token: String)
                do {
                    child = try await Self.startRESTCoordinator(store: scratch + "/coordinator.sqlite", email: email, secret: secret)
                } catch {
                    FileHandle.standardError.write(Data("error: could not start a coordinator: \(error)\n".utf8))
                    throw ExitCode(2)
                }
                coordinator = child.process
                coordinatorPid.value = child.process.processIdentifier
                (base, bearer) = ("http://\(child.http)", child.token)
                announce("coordinator http://\(child.http) (child process \(child.process.processIdentifier))")
            }
            let workload = RESTCeremonyWorkload(configuration: RESTCeremonyConfiguration(baseURL: base, token: bearer, requestTimeout: plan.requestTimeout))
            try await report(LoadRunner(configuration: plan.configuration, workload: workload, logger: logger), to: outDirectory, stop: stop) {
                await coordinator?.terminate()
                coordinatorPid.value = nil
            }
            return
        }
        let endpoint: String
        let serverKey: [UInt8]?
        if let connect {
            endpoint = connect
            serverKey = try transport.serverKeyBytes()
        } else {
            let child: (process: ChildProcess, endpoint: String, serverKey: [UInt8]?)
            do {
                child = try await Self.startCoordinator(store: scratch + "/coordinator.sqlite", plaintext: transport.plaintext)
            } catch {
                FileHandle.standardError.write(Data("error: could not start a coordinator: \(error)\n".utf8))
                throw ExitCode(2)
            }
            coordinator = child.process
            coordinatorPid.value = child.process.processIdentifier
            endpoint = child.endpoint
            serverKey = child.serverKey
            announce("coordinator \(endpoint) (child process \(child.process.processIdentifier), \(serverKey == nil ? "plain TCP" : "CURVE"))")
        }
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "load-io")
        let workload = SigningCeremonyWorkload(
            configuration: SigningCeremonyConfiguration(
                endpoint: endpoint, email: email, secret: secret, storeDirectory: scratch, requestTimeout: plan.requestTimeout,
                durability: plan.durability, serverKey: serverKey),
            loop: loop, logger: logger)
        let runner = LoadRunner(configuration: plan.configuration, workload: workload, logger: logger)
        try await report(runner, to: outDirectory, stop: stop) {
            await loop.shutdown()
            context.shutdown()
            await coordinator?.terminate()
            coordinatorPid.value = nil
        }
    }

    /// Runs the load with its progress line, then `cleanUp`, then writes the reports.
    private func report(
        _ runner: LoadRunner, to outDirectory: String, stop: LoadStop, cleanUp: () async -> Void
    ) async throws {
        let tty = isatty(STDERR_FILENO) == 1
        let result: Result<LoadRun, any Error>
        do {
            result = .success(
                try await runner.run(
                    progress: { progress in
                        let line = tty ? "\r\u{1B}[K" + progress.line : progress.line + "\n"
                        FileHandle.standardError.write(Data(line.utf8))
                    }, stop: stop))
        } catch {
            result = .failure(error)
        }
        if tty { FileHandle.standardError.write(Data("\n".utf8)) }
        await cleanUp()
        let run: LoadRun
        do {
            run = try result.get()
        } catch {
            // Not a verdict on the system under test: the load could not be run at all.
            FileHandle.standardError.write(Data("error: the load could not run: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let command = (["signfleet"] + CommandLine.arguments.dropFirst()).joined(separator: " ")
        try LoadReportWriter.write(run, to: outDirectory, command: command)
        announce(run.summary.text)
        announce("wrote \(outDirectory)/summary.json, latency.hlog, report.html")
        if !run.summary.passed { throw ExitCode(1) }
    }

    /// Starts `signfleet coordinator --seed-demo` with an HTTP listener on a fresh store, waits for
    /// its `http` line, and issues a token for `email` with `signfleet admin token` on that store.
    static func startRESTCoordinator(store: String, email: String, secret: String) async throws -> (process: ChildProcess, http: String, token: String) {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let child = try ChildProcess.launch(
            executable,
            ["coordinator", "--seed-demo", "--store", store, "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--log-level", "warning"],
            name: "coordinator", ownProcessGroup: true)
        do {
            let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("http ") }
            let issued = try await ChildProcess.run(
                executable, ["admin", "token", "--store", store, "--email", email, "--secret", secret], timeout: .seconds(30))
            guard issued.status == 0,
                let token = issued.standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("access-token ") })?.dropFirst("access-token ".count)
            else { throw ValidationError("signfleet admin token failed: \(issued.standardError)") }
            return (child, String(line.dropFirst("http ".count)), String(token))
        } catch {
            await child.terminate()
            throw error
        }
    }

    /// Starts `signfleet coordinator --seed-demo` on a fresh store and waits for its endpoint and
    /// (unless `plaintext`) its CURVE public key, which it prints first.
    static func startCoordinator(store: String, plaintext: Bool) async throws -> (process: ChildProcess, endpoint: String, serverKey: [UInt8]?) {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let child = try ChildProcess.launch(
            executable,
            ["coordinator", "--seed-demo", "--store", store, "--bind", "tcp://127.0.0.1:*", "--http", "off", "--log-level", "warning"]
                + (plaintext ? ["--plaintext"] : []),
            // A terminal's Ctrl-C reaches the load only: its coordinator serves the drain and the audit.
            name: "coordinator", ownProcessGroup: true)
        do {
            var serverKey: [UInt8]?
            if !plaintext {
                let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("curve-public-key ") }
                serverKey = Z85.decode(String(line.dropFirst("curve-public-key ".count)))
            }
            let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
            return (child, String(line.dropFirst("listening ".count)), serverKey)
        } catch {
            await child.terminate()
            throw error
        }
    }

    static func timestamp() -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: WallClock.system.now())
    }
}

/// A load run as a service: graceful shutdown (SIGINT/SIGTERM) stops its arrivals through
/// ``LoadStop``; the run itself goes on to drain, audit and report.
struct LoadService: Service {
    let stop: LoadStop
    let body: @Sendable () async throws -> Void

    func run() async throws {
        let stop = stop
        try await withGracefulShutdownHandler {
            try await body()
        } onGracefulShutdown: {
            stop.stop()
        }
    }
}

/// The pid of the load's coordinator child while it runs, for the last-resort kill on a second signal.
final class ChildPid: Sendable {
    private let pid = Mutex<Int32?>(nil)

    var value: Int32? {
        get { pid.withLock { $0 } }
        set { pid.withLock { $0 = newValue } }
    }
}
