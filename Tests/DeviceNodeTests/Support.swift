import FleetTesting
import DeviceNode
import Envelopes
import Foundation
import Logging
import Synchronization
import Testing

/// A clock that moves 1 ms on every reading (so times are ordered) and can be moved by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>
    init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }
    var now: Date {
        current.withLock { date in
            date = date.addingTimeInterval(0.001)
            return date
        }
    }
    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A temporary directory removed when the value goes away.
final class TempDirectory: Sendable {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "devicenode-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    var storePath: String { path + "/store.sqlite" }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

let hostUser = UserInfo(accountId: "acct-1", accountName: "Acme", userId: "user-1", userName: "Ann Host",
                        email: "host@example.com", host: "http://127.0.0.1:8080")

/// One device node on a fresh store, logged in.
struct Fixture {
    let directory: TempDirectory
    let clock: TestClock
    let accounts: InMemoryAccountService
    let templates: InMemoryTemplateService
    let node: DeviceNode

    static func make(saveProgress: Bool = true, login: Bool = true, directory: TempDirectory? = nil) async throws -> Fixture {
        let directory = try directory ?? TempDirectory()
        let clock = TestClock()
        let accounts = InMemoryAccountService(tokens: ["token-1": hostUser])
        let templates = InMemoryTemplateService()
        let configuration = DeviceConfiguration(
            storePath: directory.storePath, saveProgressAfterEachLocalSigner: saveProgress, clock: { clock.now })
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let node = try await DeviceNode.open(configuration: configuration, accountService: accounts,
                                             templateService: templates, logger: logger)
        if login { try await node.login(accessToken: "token-1") }
        return Fixture(directory: directory, clock: clock, accounts: accounts, templates: templates, node: node)
    }
}

struct EventTimeout: Error, CustomStringConvertible {
    var seen: [DeviceEvent]
    var description: String { "timed out waiting for an event; saw \(seen.count): \(seen)" }
}

/// Collects events from `stream` until one satisfies `last` (included), or fails after `timeout`.
func collect(
    _ stream: AsyncStream<DeviceEvent>, timeout: Duration = .seconds(120), until last: @escaping @Sendable (DeviceEvent) -> Bool
) async throws -> [DeviceEvent] {
    final class Log: Sendable { let events = Mutex<[DeviceEvent]>([]) }
    let seen = Log()
    let found = try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await event in stream {
                seen.events.withLock { $0.append(event) }
                if last(event) { return true }
            }
            return false
        }
        group.addTask {
            try await hangGuardClock.sleep(for: timeout)  // only against a hang
            return false
        }
        let first = try await group.next() ?? false
        group.cancelAll()
        return first
    }
    let events = seen.events.withLock { $0 }
    guard found else { throw EventTimeout(seen: events) }
    return events
}

@discardableResult
/// Runs `body` and returns the DeviceNodeError it throws (failing the test if it throws none).
func expectDeviceError(
    _ code: DeviceNodeError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> DeviceNodeError? {
    do {
        try await body()
        Issue.record("expected \(code), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as DeviceNodeError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// An envelope whose only signer is remote (nobody signs on the device).
func remoteOnlyEnvelope(transactionId: String = UUID().uuidString) throws -> Envelope {
    try SampleEnvelope.inPerson(signers: 0, remoteSigners: 1, transactionId: transactionId)
}
