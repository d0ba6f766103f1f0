import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Synchronization
import ZeroMQ

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

    /// The links keep their own sessions (`FleetClientConnection`): there is nothing to run here.
    func run() async {}

    /// Detaches the current link (closing it is `FleetClientConnection.close()`'s job).
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
