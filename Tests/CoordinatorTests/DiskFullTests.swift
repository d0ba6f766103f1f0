import DeviceNode
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Testing
import ZeroMQ

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for one test: a disk that really fills up.
struct TmpfsMount {
    let directory: URL

    /// Whether this process may mount a tmpfs (root or CAP_SYS_ADMIN). When not, why is printed,
    /// so the skipped test's output says what was missing.
    static let permitted: Bool = {
        do {
            let probe = try TmpfsMount(size: "1m")
            probe.unmount()
            return true
        } catch {
            print("DiskFullTests skipped: cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): \(error)")
            return false
        }
    }()

    struct Failed: Error, CustomStringConvertible { var description: String }

    init(size: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tmpfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let status = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory.path])
        guard status == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw Failed(description: "mount -t tmpfs -o size=\(size) exited with status \(status)")
        }
    }

    func unmount() {
        _ = try? Self.run("/bin/umount", [directory.path])
        try? FileManager.default.removeItem(at: directory)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        try ChildProcess.runToCompletion(tool, arguments).status
    }

    /// Writes `name` until the file system has no byte left; returns the bytes written.
    func fill(_ name: String) throws -> Int {
        let path = directory.appendingPathComponent(name).path
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        guard fd >= 0 else { throw Failed(description: "cannot create \(path): errno \(errno)") }
        defer { close(fd) }
        var total = 0
        // Big chunks first, then smaller ones, down to a byte: tmpfs allocates whole pages.
        for size in [1 << 20, 1 << 16, 1 << 12, 1] {
            let chunk = [UInt8](repeating: 0xA5, count: size)
            while true {
                let written = chunk.withUnsafeBytes { write(fd, $0.baseAddress, size) }
                if written > 0 {
                    total += written
                    continue
                }
                guard errno == ENOSPC else { throw Failed(description: "writing \(path): errno \(errno)") }
                break
            }
        }
        return total
    }
}

/// A coordinator as `signfleet coordinator` runs it (ROUTER and HTTP in one `ServiceGroup`), its
/// store on `storeDirectory`, its logs captured.
final class DiskRig: Sendable {
    let registry = PrometheusCollectorRegistry()
    let logs = CapturedLogs()
    let store: CoordinatorStore
    let services: CoordinatorServices
    let token: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let server: FleetServer
    let endpoint: String
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let http: String

    init(storeDirectory: URL) async throws {
        let factory = PrometheusMetricsFactory(registry: registry)
        store = try CoordinatorStore(
            path: storeDirectory.appendingPathComponent("store.sqlite").path, logger: logs.logger(label: "store", level: .info),
            metricsFactory: factory)
        services = CoordinatorServices(store: store, metricsFactory: factory)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "disk-rig")
        let quiet = logs.logger(label: "server", level: .error)
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: quiet,
            metricsFactory: factory)
        self.server = server
        endpoint = try await server.bind()
        let store = self.store
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let httpServer = CoordinatorHTTPServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: registry, instance: server.instance,
            status: { try await CoordinatorStatus.current(store: store, server: server) }, logger: quiet,
            storeFaults: store.faults, onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [CoordinatorService(server: server), httpServer], logger: quiet)
        self.group = group
        running = Task { try await group.run() }
        http = try await firstElement(of: addresses, "the HTTP listener's address")
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        await loop.shutdown()
        context.shutdown()
    }

    func client(_ deviceID: String) -> FleetClient {
        FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: deviceID, requestTimeout: .seconds(10), maxAttempts: 1),
            loop: loop, logger: logs.logger(label: "client", level: .critical), clock: ManualClock())
    }

    func get<T: Decodable>(_ path: String, as type: T.Type) async throws -> (status: Int, body: T) {
        let url = try #require(URL(string: "http://\(http)\(path)"))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: url)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601  // the HTTP API's times
        return ((response as? HTTPURLResponse)?.statusCode ?? -1, try decoder.decode(T.self, from: data))
    }

    func failedWrites(_ reason: String) -> Double {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return PrometheusText(String(decoding: buffer, as: UTF8.self)).value(StoreFaultMonitor.failuresLabel, ["reason": reason])
    }
}

@Suite struct DiskFullTests {
    /// Issue #14 part 6, with a real full disk: pushes are refused as retryable `unavailable`, the
    /// coordinator says so once, counts every failed write and reports degraded health; when
    /// space returns, the next push applies and everything acknowledged is still there.
    @Test(
        .enabled(if: TmpfsMount.permitted, "needs to mount a tmpfs (root or CAP_SYS_ADMIN); the reason is printed above"))
    func aFullDiskRefusesPushesAsRetryableAndRecoversWhenSpaceReturns() async throws {
        let disk = try TmpfsMount(size: "4m")
        defer { disk.unmount() }
        // The device's own store stays off the small disk.
        let deviceDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("disk-full-device-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: deviceDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: deviceDirectory) }

        let rig = try await DiskRig(storeDirectory: disk.directory)
        let (node, items) = try await signedItems(count: 4, directory: deviceDirectory, deviceID: "tablet-1")
        let client = rig.client("tablet-1")
        let connection = Task { await client.run() }
        _ = try await client.request(EnrollDevice(accessToken: rig.token, deviceID: "tablet-1", publicKey: node.publicKey))
        let first = try await client.request(SyncPush(deviceID: "tablet-1", items: [items[0]]))
        #expect(first.results.map(\.outcome) == [.applied])

        let filled = try disk.fill("filler")
        print("filled the tmpfs with \(filled) bytes")

        // Every push is refused as retryable, with what is wrong, and nothing is applied.
        let refusedPushes = 3
        for _ in 0..<refusedPushes {
            let refusal = await fleetError { _ = try await client.request(SyncPush(deviceID: "tablet-1", items: [items[1], items[2]])) }
            #expect(refusal?.code == .unavailable, "\(String(describing: refusal))")
            #expect(refusal?.retryable == true)
            #expect(refusal?.message.contains("the server's storage is failing (its disk is full)") == true, "\(String(describing: refusal))")
        }
        // Enrollment writes through the same store: the same refusal, the same episode.
        let other = try await signedItems(count: 0, directory: deviceDirectory, deviceID: "tablet-2").0
        let enrollClient = rig.client("tablet-2")
        let enrollConnection = Task { await enrollClient.run() }
        let enrollRefusal = await fleetError {
            _ = try await enrollClient.request(EnrollDevice(accessToken: rig.token, deviceID: "tablet-2", publicKey: other.publicKey))
        }
        #expect(enrollRefusal?.code == .unavailable && enrollRefusal?.retryable == true, "\(String(describing: enrollRefusal))")

        // Each refused request wrote once; a request resent on a new connection (a loaded machine
        // can replace one) writes again, so the count may be higher, and every report agrees with it.
        let failed = Int(rig.failedWrites("disk_full"))
        #expect(failed >= refusedPushes + 1, "\(failed) failed writes")
        #expect(rig.failedWrites("io_error") == 0)
        let (code, health) = try await rig.get("/health", as: CoordinatorHTTPServer.Health.self)
        #expect(code == 200)
        #expect(health.status == "degraded" && health.reasons == ["store_disk_full"], "\(health)")
        let (_, status) = try await rig.get("/status", as: CoordinatorStatus.self)
        #expect(status.storeFault?.kind == .diskFull && status.storeFault?.failedWrites == failed, "\(String(describing: status.storeFault))")
        #expect(status.envelopes == 1)
        let started = rig.logs.matching("the store's disk is full (SQLITE_FULL)")
        #expect(started.count == 1, "\(rig.logs.all)")
        #expect(started.first?.level == .error)
        #expect(started.first?.message.contains(disk.directory.appendingPathComponent("store.sqlite").path) == true)

        // Space returns: no restart, the next push applies, health is ok again.
        try FileManager.default.removeItem(at: disk.directory.appendingPathComponent("filler"))
        let resumed = try await client.request(SyncPush(deviceID: "tablet-1", items: [items[1], items[2], items[3]]))
        #expect(resumed.results.map(\.outcome) == [.applied, .applied, .applied], "\(resumed)")
        #expect(resumed.lastApplied == 4)
        let (_, healed) = try await rig.get("/health", as: CoordinatorHTTPServer.Health.self)
        #expect(healed.status == "ok" && healed.reasons.isEmpty, "\(healed)")
        let recovered = rig.logs.matching("the store writes again")
        #expect(recovered.count == 1, "\(rig.logs.all)")
        #expect(recovered.first?.message.contains("\(failed) writes failed") == true, "\(rig.logs.all)")
        #expect(rig.logs.matching("the store's disk is full").count == 1)
        _ = try await enrollClient.request(EnrollDevice(accessToken: rig.token, deviceID: "tablet-2", publicKey: other.publicKey))

        // Nothing acknowledged was lost: item 1 from before the episode and the three after.
        let stored = try await client.request(SyncResultsQuery(deviceID: "tablet-1"))
        #expect(stored.results.map(\.sequence) == [1, 2, 3, 4] && stored.results.allSatisfy { $0.outcome == .applied }, "\(stored)")
        let (_, after) = try await rig.get("/status", as: CoordinatorStatus.self)
        #expect(after.envelopes == 4 && after.storeFault == nil)

        connection.cancel()
        enrollConnection.cancel()
        try await node.close()
        try await other.close()
        try await rig.stop()
    }

    /// A coordinator restarted on a disk that is still full says so from the start (its store
    /// probes the disk when it opens), not at its first failed write; once space returns, a probe
    /// (what `GET /health` runs while an episode lasts) ends the episode without any write.
    @Test(
        .enabled(if: TmpfsMount.permitted, "needs to mount a tmpfs (root or CAP_SYS_ADMIN); the reason is printed above"))
    func aStoreOpenedOnAFullDiskIsDegradedAtOnce() async throws {
        let disk = try TmpfsMount(size: "4m")
        defer { disk.unmount() }
        let path = disk.directory.appendingPathComponent("store.sqlite").path
        do {
            let first = try CoordinatorStore(path: path)
            #expect(first.faults.healthReasons.isEmpty, "a disk with room")
        }
        let filler = disk.directory.appendingPathComponent("filler").path
        let filled = try disk.fill("filler")
        // Leave room for SQLite's -wal and -shm files (what opening the store needs), not for the
        // 256 KB probe.
        #expect(truncate(filler, off_t(filled - 160 * 1024)) == 0)
        let logs = CapturedLogs()
        let reopened = try CoordinatorStore(path: path, logger: logs.logger(label: "store", level: .info))
        #expect(reopened.faults.healthReasons == ["store_disk_full"], "degraded before any write")
        #expect(reopened.faults.episode?.lastError.contains("No space left on device") == true, "\(String(describing: reopened.faults.episode))")
        #expect(logs.matching("the store's disk is full").count == 1, "\(logs.all)")
        #expect(!FileManager.default.fileExists(atPath: path + ".probe"), "the probe file is gone")
        try FileManager.default.removeItem(atPath: filler)
        reopened.faults.probeDuringEpisode()  // what GET /health runs while the episode lasts
        #expect(reopened.faults.healthReasons.isEmpty)
        #expect(logs.matching("the store writes again").count == 1, "\(logs.all)")
    }

    /// Captive signing writes through the same store: a signing page opened on a full disk sends the
    /// browser back with `event=exception`, counts the failed write in the same episode, and logs no
    /// line per page; once space returns, the same URL opens (the failed open changed nothing).
    @Test(
        .enabled(if: TmpfsMount.permitted, "needs to mount a tmpfs (root or CAP_SYS_ADMIN); the reason is printed above"))
    func aSigningPageOnAFullDiskSendsTheBrowserBackAndTheSameURLWorksAfterwards() async throws {
        let disk = try TmpfsMount(size: "4m")
        defer { disk.unmount() }
        let logs = CapturedLogs()
        let rig = try await CaptiveRig(storeDirectory: disk.directory, logger: logs.logger(label: "coordinator", level: .info))
        let signer = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        let urls = [try await rig.url(id, .clientUserID("cu-bea")).url, try await rig.url(id, .clientUserID("cu-bea")).url]
        _ = try disk.fill("filler")

        for url in urls {
            let page = try await rig.request("GET", url)
            #expect(page.status == 303, "\(page.status) \(page.body)")
            #expect(page.headers["location"]?.contains("event=exception") == true, "\(page.headers)")
        }
        #expect(try await rig.metrics().value(StoreFaultMonitor.failuresLabel, ["reason": "disk_full"]) == 2)
        let health = try JSONDecoder().decode(CoordinatorHTTPServer.Health.self, from: Data(try await rig.request("GET", "/health").body.utf8))
        #expect(health.status == "degraded" && health.reasons == ["store_disk_full"], "\(health)")
        #expect(logs.matching("the store's disk is full").count == 1, "\(logs.all)")
        #expect(logs.matching("captive signing failed").isEmpty, "\(logs.all)")

        try FileManager.default.removeItem(at: disk.directory.appendingPathComponent("filler"))
        let opened = try await rig.request("GET", urls[1])
        #expect(opened.status == 200, "\(opened.status)")
        #expect(logs.matching("the store writes again").count == 1, "\(logs.all)")
        let healed = try JSONDecoder().decode(CoordinatorHTTPServer.Health.self, from: Data(try await rig.request("GET", "/health").body.utf8))
        #expect(healed.status == "ok", "\(healed)")
        await rig.tearDown()
    }
}
