import FleetTesting
import Foundation
import Testing
import ZeroMQ

@testable import LoadGenerator

/// Cancelling the task that runs a load ends all of it: no arrival, ceremony or ticker outlives it.
struct LoadCancellationTests {
    /// Two minutes of arrivals and of drain: a run that ends within the test's limit was cut short.
    static func configuration(drainTimeout: Duration = .seconds(120)) throws -> LoadConfiguration {
        LoadConfiguration(
            profile: try .constant(rate: 20, duration: .seconds(120)), process: .uniform, devices: 2, seed: 7,
            drainTimeout: drainTimeout, interval: .milliseconds(100))
    }

    /// Only guards against a hang: the run's clock stands still after the first second, so its two
    /// minutes and its drain never pass, and only the cancellation can end it.
    let limit = Duration.seconds(120)

    @Test func cancellingTheRunEndsItPromptly() async throws {
        let configuration = try Self.configuration()
        let probe = CeremonyProbe(quick: 1)
        let clock = ManualClock()
        let runner = LoadRunner(configuration: configuration, workload: HangingWorkload(probe: probe), clock: clock)
        let (ended, end) = AsyncStream<Result<LoadRun, any Error>>.makeStream()
        let run = Task {
            do { end.yield(.success(try await runner.run())) } catch { end.yield(.failure(error)) }
        }
        // The run waits for its first arrival and tick; one second of arrivals, then time stops.
        try await withDeadline(limit, "the run to start its schedule") { await clock.sleeping(atLeast: 2) }
        await clock.advance(by: .seconds(1))
        // The first ceremony completed: the run is under way, and every later ceremony hangs.
        _ = try await firstElement(of: probe.completed.stream, within: limit, "the first completed ceremony")
        run.cancel()

        guard let outcome = try? await firstElement(of: ended, within: limit, "the cancelled run's end") else {
            Issue.record("the cancelled run did not end within \(limit)")
            return
        }
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(probe.running == 0, "a ceremony still running after the run ended")
        #expect(probe.closedDevices == configuration.devices, "every device closed")
    }

    /// The same over ZeroMQ: requests that a silent coordinator would leave waiting a minute are
    /// cancelled with the run, and the devices' connections close before it returns.
    @Test func cancellingARunWaitingOnTheNetworkEndsItPromptly() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "silent-server")
        let silent = try await loop.makeSocket(.router, options: SocketOptions())
        let endpoint = try await silent.bind("tcp://127.0.0.1:*")
        let workload = RequestWorkload(endpoint: endpoint, loop: loop, requestTimeout: .seconds(60))
        let clock = ManualClock()
        let runner = LoadRunner(configuration: try Self.configuration(), workload: workload, clock: clock)
        let (progressed, progress) = AsyncStream<LoadProgress>.makeStream()
        let (ended, end) = AsyncStream<Result<LoadRun, any Error>>.makeStream()
        let run = Task {
            do { end.yield(.success(try await runner.run(progress: { progress.yield($0) }))) } catch { end.yield(.failure(error)) }
        }
        try await withDeadline(limit, "the run to start its schedule") { await clock.sleeping(atLeast: 2) }
        await clock.advance(by: .seconds(1))
        // The first progress line: the devices are connected and their first requests are waiting.
        _ = try await firstElement(of: progressed, within: limit, "the first progress line")
        run.cancel()

        let outcome = try? await firstElement(of: ended, within: limit, "the cancelled run's end")
        await silent.close()
        await loop.shutdown()
        context.shutdown()
        guard let outcome else {
            Issue.record("the cancelled run did not end within \(limit)")
            return
        }
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    /// The graceful stop is unchanged: the arrivals end, the hanging ceremonies (and those queued
    /// behind them) are cut off at the drain deadline as unfinished, and the run reports.
    @Test func aStopDrainsUntilTheDeadlineAndReports() async throws {
        let configuration = try Self.configuration(drainTimeout: .milliseconds(300))
        let probe = CeremonyProbe(quick: 1)
        let stop = LoadStop()
        let runner = LoadRunner(configuration: configuration, workload: HangingWorkload(probe: probe))
        let summary = try await runner.run(progress: { if $0.completed >= 1 { stop.stop() } }, stop: stop).summary
        #expect(summary.interrupted && !summary.passed, "\(summary.text)")
        #expect(summary.completed == 1, "\(summary.text)")
        #expect(summary.unfinished == summary.arrivals - summary.dropped - 1, "\(summary.text)")
        #expect(summary.errors == ["unfinished": summary.unfinished], "\(summary.text)")
        #expect(probe.running == 0 && probe.closedDevices == configuration.devices)
    }
}

