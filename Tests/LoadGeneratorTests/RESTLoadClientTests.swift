import FleetTesting
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization
import Testing

@testable import LoadGenerator

/// A small HTTP server on a real socket (port 0) for the REST client: `/ping` answers at once,
/// `/see-other` answers `303`, `/trickle` sends its body a byte at a time for a minute, `/hang`
/// answers only when the server stops (and says it was reached).
final class PingServer: Sendable {
    let reached: AsyncStream<Void>
    private let reach: AsyncStream<Void>.Continuation
    private let running = Mutex<Task<Void, any Error>?>(nil)
    private let held = Mutex<[CheckedContinuation<Void, Never>]>([])

    init() { (reached, reach) = AsyncStream<Void>.makeStream() }

    func start() async throws -> String {
        let router = Router()
        router.get("/ping") { _, _ in "pong" }
        router.post("/see-other") { _, _ in
            Response(status: .seeOther, headers: [.location: "http://127.0.0.1/back?event=signing_complete"])
        }
        // A body that trickles in, a byte every 100 ms for a minute: each silence is short, the whole is not.
        router.get("/trickle") { _, _ -> Response in
            Response(
                status: .ok,
                body: ResponseBody { writer in
                    for _ in 0..<600 {
                        try await writer.write(ByteBuffer(string: "x"))
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    try await writer.finish(nil)
                })
        }
        router.get("/hang") { _, _ -> Response in
            await withCheckedContinuation { continuation in
                self.held.withLock { $0.append(continuation) }
                self.reach.yield()
            }
            return Response(status: .ok)
        }
        let (ports, announce) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "ping-server")
        logger.logLevel = .critical
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in announce.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        running.withLock { $0 = Task { try await application.runService() } }
        return "http://127.0.0.1:\(try await firstElement(of: ports, "the server's port"))"
    }

    func stop() async {
        for request in held.withLock({ list in defer { list = [] }; return list }) { request.resume() }
        let task = running.withLock { $0 }
        task?.cancel()
        _ = try? await task?.value
    }
}

/// The REST client that backends and the REST load workload use: answers as they are (redirects
/// not followed), and a cancelled request always ends — the drain of a fleet's backend cancels
/// its ceremony in flight and waits for it.
@Suite(.timeLimit(.minutes(5))) struct RESTLoadClientTests {
    @Test func aRedirectIsTheAnswerWithItsHeadersByLowerCaseName() async throws {
        let server = PingServer()
        let base = try await server.start()
        let client = RESTLoadClient(configuration: RESTCeremonyConfiguration(baseURL: base, token: "t"))
        defer { client.close() }
        let answer = try await client.raw("POST", "/see-other", form: "a=b")
        #expect(answer.status == 303)
        #expect(answer.headers["location"] == "http://127.0.0.1/back?event=signing_complete", "\(answer.headers)")
        let pong = try await client.raw("GET", "/ping")
        #expect(pong.status == 200 && pong.body == Array("pong".utf8))
        await server.stop()
    }

    /// A body that keeps coming, each silence shorter than the timeout: the request still ends
    /// with an error, within three timeouts of its start (AsyncHTTPClient's own deadline stops at
    /// the response head; the client reads the body against it).
    @Test func aBodyThatTricklesForeverStillEnds() async throws {
        let server = PingServer()
        let base = try await server.start()
        let client = RESTLoadClient(configuration: RESTCeremonyConfiguration(baseURL: base, token: "t", requestTimeout: .seconds(2)))
        defer { client.close() }
        await #expect(throws: (any Error).self) { _ = try await client.raw("GET", "/trickle") }
        await server.stop()
    }

    /// The request has reached a server that will never answer: cancelling it ends it with
    /// `CancellationError`. Its timeout is an hour, so a cancel that did nothing would run into
    /// the suite's time limit instead of passing as a timeout.
    @Test func cancellingARequestTheServerHoldsEndsItWithCancellation() async throws {
        let server = PingServer()
        let base = try await server.start()
        let client = RESTLoadClient(configuration: RESTCeremonyConfiguration(baseURL: base, token: "t", requestTimeout: .seconds(3600)))
        defer { client.close() }
        let request = Task { try await client.raw("GET", "/hang") }
        try await firstElement(of: server.reached, "the request at the server")
        request.cancel()
        let result = await request.result
        #expect(throws: CancellationError.self) { try result.get() }
        await server.stop()
    }

    /// Cancellation racing completion, many times: each request ends, answered or cancelled. The
    /// URLSession client this replaces deadlocked here on Linux now and then (the cancellation
    /// handler waited on the session's queue while that queue resumed the task), and a fleet's
    /// drain hung on it. Each cancel comes after a seeded random delay of up to twice a request's
    /// length, measured first; requests go 16 at a time, so the test's length is about 35 request
    /// lengths whatever the machine's speed (on a loaded machine a local request took 1.2 s; the
    /// suite's limit, 5 minutes, only guards against a hang).
    @Test func aRequestCancelledAsItCompletesStillEnds() async throws {
        let server = PingServer()
        let base = try await server.start()
        // An hour's timeout: a cancel that did nothing would hang into the time limit, not pass.
        let client = RESTLoadClient(configuration: RESTCeremonyConfiguration(baseURL: base, token: "t", requestTimeout: .seconds(3600)))
        defer { client.close() }
        let seed = testSeed("aRequestCancelledAsItCompletesStillEnds")
        var random = SeededGenerator(seed: seed)
        let (rounds, width) = (16, 16)
        // How long a request takes here, `width` at a time (not asserted: it only aims the
        // cancellations at the moment requests complete).
        let lengths = try await withThrowingTaskGroup(of: Duration.self) { group in
            for _ in 0..<width {
                group.addTask {
                    let start = ContinuousClock.now
                    _ = try await client.raw("GET", "/ping")
                    return ContinuousClock.now - start
                }
            }
            return try await group.reduce(into: [Duration]()) { $0.append($1) }
        }
        let typical = max(1, Int(lengths.sorted()[width / 2] / .microseconds(1)))
        var answered = 0, cancelled = 0
        for _ in 0..<rounds {
            let delays = (0..<width).map { _ in Int.random(in: 0..<(2 * typical), using: &random) }
            let results = await withTaskGroup(of: Result<RESTLoadClient.Answer, any Error>.self) { group in
                for delay in delays {
                    group.addTask {
                        let request = Task { try await client.raw("GET", "/ping") }
                        try? await Task.sleep(for: .microseconds(delay))
                        request.cancel()
                        return await request.result
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            for result in results {
                switch result {
                case .success(let answer):
                    #expect(answer.status == 200)
                    answered += 1
                case .failure(let error):
                    #expect(error is CancellationError, "seed \(seed): \(error)")
                    cancelled += 1
                }
            }
        }
        // Delays start at 0 µs: some cancels certainly came before the answer.
        #expect(cancelled > 0, "seed \(seed): \(answered) answered, none cancelled")
        print("RESTLoadClientTests: \(answered) answered, \(cancelled) cancelled (a request takes about \(typical) µs)")
        await server.stop()
    }
}
