import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Synchronization
import ZeroMQ

/// A device's connection while it is online: a ``FleetClient`` (its own DEALER socket,
/// routing id = device id) with the task keeping it up.
///
/// An offline device has no link at all — no socket, no heartbeats — as an app that checks
/// reachability before it tries the network. Going online opens a new link (a client cannot
/// be restarted once stopped). A link lives from ``open(configuration:loop:logger:)`` to
/// ``close()``, both called by its device.
final class DeviceLink: Sendable {
    let client: FleetClient
    private let task: Task<Void, Never>

    private init(client: FleetClient, task: Task<Void, Never>) {
        self.client = client
        self.task = task
    }

    /// Starts connecting; the caller owns the link and must ``close()`` it.
    static func open(configuration: FleetClientConfiguration, loop: ZMQIOLoop, logger: Logger) -> DeviceLink {
        let client = FleetClient(configuration: configuration, loop: loop, logger: logger)
        return DeviceLink(client: client, task: Task { await client.run() })
    }

    /// Closes the socket and waits until the connection task has ended.
    func close() async {
        task.cancel()
        await client.stop()
        await task.value
    }
}

/// The device's session with the coordinator across its links: a ``ClientTransport`` that sends
/// each request over whichever link is open now, and fails at once with a retryable error while
/// the device is offline, as the SDK does without reachability.
///
/// The sync engine and the account and template services are made once per device (per login
/// for the engine) and take this, so going offline and online again is a new socket, a new
/// CURVE handshake and a new `hello`, but not a new enrollment: the engine enrolls again only
/// when ``serverInstance`` differs from the one it enrolled with (a restarted or restored
/// coordinator). A new link's ``serverInstance`` waits for its `hello` answer (at most the
/// client's longest reply timeout; unknown then, which makes the engine enroll to be safe).
final class LinkedClient: ClientTransport {
    private struct State {
        var client: FleetClient?
    }

    private let state = Mutex(State())

    /// The link's client while online, `nil` offline.
    func attach(_ client: FleetClient?) {
        state.withLock { $0.client = client }
    }

    private func current() throws -> FleetClient {
        guard let client = state.withLock({ $0.client }) else {
            throw FleetError(.timeout, "the device is offline", retryable: true)
        }
        return client
    }

    /// Connection events belong to each link's own client; this stream has none.
    var connectionEvents: AsyncStream<ConnectionEvent> { AsyncStream { $0.finish() } }

    /// The links keep their own sessions (``DeviceLink``): there is nothing to run here.
    func run() async {}

    /// Detaches the current link (closing it is ``DeviceLink/close()``'s job).
    func stop() async { attach(nil) }

    func request<Request: FleetRequest>(_ request: Request, timeout: Duration?, attempts: Int?) async throws -> Request.Reply {
        try await current().request(request, timeout: timeout, attempts: attempts)
    }

    var serverInstance: String? {
        get async {
            guard let client = state.withLock({ $0.client }) else { return nil }
            return await client.serverInstance(waitingUpTo: client.configuration.longestReplyTimeout)
        }
    }

    var connectedEndpoint: String? {
        get async { await state.withLock({ $0.client })?.connectedEndpoint }
    }

    var lastRateLimit: RateLimitStatus? {
        get async { await state.withLock({ $0.client })?.lastRateLimit }
    }
}

/// The device node's account and template services over the device's ``LinkedClient``
/// (the node is opened once, the links come and go).
final class LinkedServices: AccountService, TemplateService {
    let client: LinkedClient

    init(client: LinkedClient) {
        self.client = client
    }

    func userInfo(accessToken: String) async throws -> UserInfo {
        try await RemoteAccountService(client: client).userInfo(accessToken: accessToken)
    }

    func listTemplates(accessToken: String) async throws -> [Envelopes.TemplateSummary] {
        try await RemoteTemplateService(client: client).listTemplates(accessToken: accessToken)
    }

    func fetchTemplate(id: String, accessToken: String) async throws -> EnvelopeTemplate {
        try await RemoteTemplateService(client: client).fetchTemplate(id: id, accessToken: accessToken)
    }
}
